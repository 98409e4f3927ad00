// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The detectors. Each reads the model's state changes (interval(): a state
 * ended; coroutine_end(): a coroutine's record closed; record(): an event)
 * and never re-derives state from raw events. Findings are made when they
 * can be known: a stall when the coroutine resumes, a lost wakeup when the
 * trace or the process ends with the coroutine still waiting, a blocking
 * call or a long run once there is evidence that work waited meanwhile.
 *
 * What counts as evidence depends on what the runtime shows (enum
 * runtime_view; docs/jsonl.md has the table): a scheduler built with the
 * probes shows its readies and what each wait is on; Go's runtime shows
 * them too, and loses no wakeup; the switch-function path shows switches
 * only, so work waiting there is read from them: the thread's scheduler
 * context (model_is_scheduler()) switching in another coroutine before it
 * waits for work in the kernel again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "analyze.h"

#define NS_PER_S 1000000000ULL
/*
 * A thread blocked in the kernel at least this long while no finding's
 * coroutine ran there: its scheduler found nothing to run (the evidence of
 * work waiting is gone). Shorter waits are not a scheduler's (an allocator's
 * lock, a GIL handed between threads).
 */
#define IDLE_WAIT_NS 1000000ULL
/* Findings kept per thread for want of evidence yet (beyond: not made, counted). */
#define PENDING_MAX 256
/*
 * Findings kept per process for a ready that comes late (the batched path
 * copies a thread's records out when it leaves the CPU or on a tick: under
 * --no-sched, only on the tick), the oldest let go first (counted).
 */
#define HELD_MAX 64

void analyze_opts_default(struct analyze_opts *o)
{
	o->stall_ns = NS_PER_S;
	o->long_run_ns = 50 * 1000000ULL;
	o->sched_latency_ns = 10 * 1000000ULL;
	o->blocking_ns = 10 * 1000000ULL;
	o->spawn_storm = 1000;
	o->slow_span_ns = ANALYZE_SLOW_SPAN_DEFAULT_MS * 1000000ULL;
	o->nslow_names = 0;
}

/* Creations by one parent within the last second. */
struct storm {
	u32 pid;
	u64 parent;
	u64 *ts; /* ring of creation times in the last second */
	size_t head, len, cap;
	bool active;
	u64 start, last, count, peak;
};

/* What a process's runtime lets corobpf see, which decides the evidence a finding rests on. */
enum runtime_view {
	RV_PROBES, /* a scheduler's own probes: its readies, and what each wait is on */
	RV_GO,	   /* Go's runtime: readies and waits; it loses no wakeup */
	RV_SWITCH, /* switch functions of unmodified libraries: switches only, no readies */
};

/* A thread, as the detectors follow it. */
struct athread {
	u32 pid, tid;
	/* The coroutine running here (its uid), and its clocks when its run began. */
	u64 run_uid, run_offcpu0, run_made_ready0, run_runnable0;
	/*
	 * The switch-function path: findings about one coroutine (blocking
	 * calls, a long run) held until the thread shows whether work waited
	 * meanwhile; pend_out: it has switched out since (at pend_out_ts).
	 */
	struct finding *pend;
	u32 npend, cap_pend;
	u64 pend_uid, pend_id;
	bool pend_out;
	u64 pend_out_ts;
};

/*
 * A process with the probes or Go: its blocking calls and long runs that no
 * ready was seen to overlap when they ended, held for a ready recorded
 * meanwhile that comes late (readies_late()).
 */
struct aproc {
	struct finding held[HELD_MAX];
	u32 nheld, next;
};

/* An object coroutines wait on: who waits, and the latest wait on it that a wakeup ended. */
struct objwait {
	u64 waiters;
	u64 woken_start; /* the start of that wait, 0: none */
	struct objwait *next_free;
};

struct analyzer {
	struct model *m;
	struct analyze_opts o;
	struct finding_sink out; /* the pipeline's: every output */
	struct hmap storms;  /* (pid, parent id) -> struct storm */
	struct hmap threads; /* (pid, tid) -> struct athread */
	struct hmap waits;   /* (pid, obj) -> struct objwait */
	struct hmap procs;   /* (pid, 0) -> struct aproc, once one holds a finding */
	struct objwait *free_waits; /* reused: a wait per switch out allocates nothing */
};

static void emit_finding(struct analyzer *a, const struct finding *f)
{
	a->out.finding(a->out.ctx, f);
}

static enum runtime_view view_of(const struct coro_process *p)
{
	if (!p || !p->switch_families)
		return RV_PROBES;
	if (p->switch_families == 1u << CORO_FAM_GO)
		return RV_GO;
	return RV_SWITCH;
}

static struct athread *athread_get(struct analyzer *a, u32 pid, u32 tid)
{
	struct athread *at = hmap_get(&a->threads, pid, tid);

	if (!at) {
		at = xcalloc(1, sizeof(*at));
		at->pid = pid;
		at->tid = tid;
		hmap_put(&a->threads, pid, tid, at);
	}
	return at;
}

static void athread_free(void *v)
{
	struct athread *at = v;

	free(at->pend);
	free(at);
}

/*
 * Suspended since before the trace saw it: first seen suspended (a Go
 * goroutine found parked by the attach's walk), its creation not seen and
 * never seen running on a thread. How long it had waited, and for what, is
 * not known: no finding rests on it.
 */
static bool since_attach(const struct coro *c, u64 start)
{
	if (c->created_seen || start != c->first_ts)
		return false;
	for (u32 i = 0; i < c->ntids; i++)
		if (c->tids[i])
			return false;
	return true;
}

/* A wait on an object the model knows: what "woken ahead of it" is about. */
static bool waits_on(u32 reason, u64 obj)
{
	return obj && (reason == CORO_R_WAIT || reason == CORO_R_IO || reason == CORO_R_UNKNOWN);
}

/* Its process ended on its own (exit, or the end of main), not killed by a signal. */
static bool clean_exit(const struct coro *c)
{
	const struct coro_process *p = c->proc;

	return c->end == CE_PROCESS_EXIT && p && p->exited &&
	       (p->exit_status < 0 || !WIFSIGNALED(p->exit_status));
}

static void analyze_enter(void *ctx, const struct coro *c, u64 ts)
{
	struct analyzer *a = ctx;

	if (c->state == CS_RUNNING && c->tid) {
		struct athread *at = athread_get(a, c->pid, c->tid);

		at->run_uid = c->uid;
		at->run_offcpu0 = c->t_offcpu;
		at->run_made_ready0 = c->proc ? c->proc->made_ready : 0;
		at->run_runnable0 = c->proc ? c->proc->runnable : 0;
	} else if (c->state == CS_SUSPENDED && waits_on(c->reason, c->obj)) {
		struct objwait *w = hmap_get(&a->waits, c->pid, c->obj);

		if (!w) {
			w = a->free_waits;
			if (w)
				a->free_waits = w->next_free;
			else
				w = xmalloc(sizeof(*w));
			memset(w, 0, sizeof(*w));
			hmap_put(&a->waits, c->pid, c->obj, w);
		}
		w->waiters++;
	}
}

/*
 * A wait on obj that began at start ends (woken: a wakeup ended it, not the
 * coroutine's end). Returns whether it was passed over: a wait on the same
 * object that began later was woken first, so a wakeup meant for this one
 * went to another, or never came.
 */
static bool wait_ended(struct analyzer *a, u32 pid, u64 obj, u64 start, bool woken)
{
	struct objwait *w = hmap_get(&a->waits, pid, obj);
	bool passed;

	if (!w)
		return false;
	passed = w->woken_start > start;
	if (woken && start > w->woken_start)
		w->woken_start = start;
	if (!--w->waiters) {
		hmap_del(&a->waits, pid, obj);
		w->next_free = a->free_waits;
		a->free_waits = w;
	}
	return passed;
}

static void finding_init(struct analyzer *a, struct finding *f, enum finding_kind kind,
			 const struct coro *c)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	if (!c)
		return;
	f->pid = c->pid;
	f->tid = c->tid;
	f->id = c->id;
	f->uid = c->uid;
	snprintf(f->name, sizeof(f->name), "%s", coro_name(c));
	/* Its last switch out's: the outputs say it with that suspension only. */
	if (c->awaiter)
		snprintf(f->awaiter, sizeof(f->awaiter), "%s", c->awaiter);
	f->parent = c->parent;
	/* The ancestry the model still knows: live ancestors of the right incarnation. */
	for (u64 pid = c->parent, puid = c->parent_uid; pid && f->nchain < FINDING_CHAIN;) {
		const struct coro *p = model_find(a->m, c->pid, pid);

		if (!p || (puid && p->uid != puid))
			break;
		f->chain[f->nchain].id = p->id;
		snprintf(f->chain[f->nchain].name, sizeof(f->chain[0].name), "%s", coro_name(p));
		f->nchain++;
		pid = p->parent;
		puid = p->parent_uid;
	}
}

/* ---- evidence of work waiting for a thread (blocking, long_run) ---- */

/*
 * The switch-function path: a finding about c held until the thread shows
 * whether work waited (pending_switch()); a finding of another coroutine
 * still held found none.
 */
static void pend_add(struct analyzer *a, struct athread *at, const struct coro *c,
		     const struct finding *f, bool out, u64 out_ts)
{
	if (at->npend && at->pend_uid != c->uid)
		at->npend = 0;
	if (!at->npend) {
		at->pend_uid = c->uid;
		at->pend_id = c->id;
		at->pend_out = false;
	}
	if (out) {
		at->pend_out = true;
		at->pend_out_ts = out_ts;
	}
	if (at->npend == PENDING_MAX) {
		/* Not held: a finding not made if the thread then shows that work waited. */
		a->m->anom.findings_unheld_thread++;
		return;
	}
	if (at->npend == at->cap_pend) {
		at->cap_pend = at->cap_pend ? at->cap_pend * 2 : 4;
		at->pend = xrealloc(at->pend, at->cap_pend * sizeof(*at->pend));
	}
	at->pend[at->npend++] = *f;
}

/*
 * A switch on a thread holding findings: the coroutine they are about
 * switching out, or back in; or another switched in after it went, which
 * is the evidence: work was waiting for the thread. Not the scheduler
 * context taking the thread (its turn comes after every coroutine), not a
 * context first seen since (made after it gave the thread back: it waited
 * for nothing), and not a context the coroutine itself handed the thread to
 * while its thread's scheduler is not known (two contexts handing the
 * thread to each other, each waiting for the other).
 */
static void pending_switch(struct analyzer *a, const struct event *ev)
{
	struct athread *at = hmap_get(&a->threads, ev->pid, ev->tid);
	const struct coro_thread *t = ev->thread;
	const struct coro *owner;
	bool by_owner;

	if (!at || !at->npend)
		return;
	/* Its last switch out, after its exit, names it by id alone (the model has let it go). */
	by_owner = ev->c ? ev->c->uid == at->pend_uid : ev->sw.from == at->pend_id;
	if (by_owner) {
		at->pend_out = true;
		at->pend_out_ts = ev->ts;
	}
	if (!ev->to)
		return;
	if (ev->to->uid == at->pend_uid) {
		at->pend_out = false;
		return;
	}
	if (!at->pend_out || model_is_scheduler(t, ev->to) || ev->to->first_ts >= at->pend_out_ts ||
	    (by_owner && !(t && (t->sched_changes || t->fiber_dispatcher_seen))))
		return;
	owner = model_find(a->m, ev->pid, at->pend_id);
	for (u32 i = 0; i < at->npend; i++) {
		/* Known by now as its thread's scheduler: its waits were for work. */
		if (at->pend[i].kind == FK_BLOCKING && owner && owner->uid == at->pend_uid &&
		    model_is_scheduler(t, owner))
			continue;
		emit_finding(a, &at->pend[i]);
	}
	at->npend = 0;
}

/* Work that waited while c ran: other coroutines of its process runnable, or made ready. */
static bool readies_meanwhile(const struct coro *c, u64 made_ready0, u64 runnable0)
{
	const struct coro_process *p = c->proc;

	return p && (runnable0 || p->runnable || p->made_ready > made_ready0);
}

/*
 * Evidence of work waiting (probes, Go) for a blocking call or a long run
 * of c: made now, or held for a ready that comes late.
 */
static void readies_decide(struct analyzer *a, const struct coro *c, const struct finding *f,
			   bool waited)
{
	struct aproc *ap;

	if (waited) {
		emit_finding(a, f);
		return;
	}
	ap = hmap_get(&a->procs, c->pid, 0);
	if (!ap) {
		ap = xcalloc(1, sizeof(*ap));
		hmap_put(&a->procs, c->pid, 0, ap);
	}
	/*
	 * A slot in use is the oldest: let go unconfirmed, a finding not made
	 * if its ready was still to come. Counted: most never get one, but the
	 * count bounds what a late ready could have confirmed.
	 */
	if (ap->held[ap->next].ts)
		a->m->anom.findings_unheld++;
	else
		ap->nheld++;
	ap->held[ap->next] = *f;
	ap->next = (ap->next + 1) % HELD_MAX;
}

/* A coroutine made ready at ts, applied late: the held findings it overlaps had work waiting. */
static void readies_late(struct analyzer *a, const struct event *ev)
{
	struct aproc *ap = hmap_get(&a->procs, ev->pid, 0);

	if (!ap || !ev->c || ev->c->state != CS_RUNNABLE)
		return;
	for (u32 i = 0; i < HELD_MAX && ap->nheld; i++) {
		struct finding *f = &ap->held[i];

		if (!f->ts || ev->ts < f->ts || ev->ts > f->ts + f->dur || f->uid == ev->c->uid)
			continue;
		emit_finding(a, f);
		f->ts = 0;
		ap->nheld--;
	}
}

/*
 * Go: goroutines of the runtime and of the standard library's signal
 * handling, parked for the whole life of any program (goleak leaves them
 * out too).
 */
static bool go_runtime_own(const struct coro *c)
{
	return !strncmp(c->name, "runtime.", 8) || !strncmp(c->name, "runtime/", 8) ||
	       !strncmp(c->name, "os/signal.", 10);
}

/*
 * Still so when the trace or its process ended, for at least --stall: a
 * wakeup that went missing, or a leak, where there is evidence of it
 * (analyze.h).
 */
static void at_end(struct analyzer *a, const struct coro *c, enum coro_state state, u64 start,
		   u64 dur, u32 reason, u64 obj, bool passed)
{
	struct finding f;
	enum finding_kind kind;
	bool exited = clean_exit(c);

	if (dur < a->o.stall_ns)
		return;
	/* How long it had waited, for what, is not known; but Go's leaks need only the exit. */
	if (since_attach(c, start) && view_of(c->proc) != RV_GO)
		return;
	switch (view_of(c->proc)) {
	case RV_SWITCH:
		/*
		 * No readies, no exits for most: a coroutine suspended at the end
		 * may wait for anything, or have finished. Only one never started
		 * says something.
		 */
		if (state != CS_NEW)
			return;
		kind = FK_LEAK;
		break;
	case RV_GO:
		/* Parked when the program ended: leaked, as goleak counts them. */
		if (!exited || state != CS_SUSPENDED || reason == CORO_R_DONE || go_runtime_own(c))
			return;
		kind = FK_LEAK;
		break;
	default:
		if (state == CS_SUSPENDED) {
			if (waits_on(reason, obj) && (exited || passed))
				kind = FK_LOST_WAKEUP; /* its wakeup never came, or went to another */
			else if ((reason == CORO_R_DONE || reason == CORO_R_UNKNOWN) && exited)
				kind = FK_LEAK;	       /* nothing recorded could wake it */
			else
				return;		       /* a sleep, a yield, a wait for work */
		} else if (state == CS_RUNNABLE) {
			kind = FK_LOST_WAKEUP; /* made ready, never run again */
		} else if (state == CS_NEW) {
			kind = FK_LEAK; /* created, never started */
		} else {
			return;
		}
	}
	finding_init(a, &f, kind, c);
	f.ts = start;
	f.dur = dur;
	f.open = true;
	f.state = state;
	f.reason = reason;
	f.obj = obj;
	f.has_waker = state == CS_RUNNABLE && c->has_waker;
	f.waker = c->waker;
	/* Never started: where it was made; else where it last parked. */
	f.stack = state == CS_NEW ? c->create_stack : c->park_stack;
	emit_finding(a, &f);
}

/*
 * A suspension of at least --stall ended by a wakeup: a stall where
 * something made it longer than it had to be. A scheduler's own sleeps and
 * yields are; a wait on an object is when it was passed over, or (probes)
 * while a span of its work was open; Go's sleeps and network waits are the
 * program's asking and the peer's pace; the switch path's suspensions wait
 * for anything, but a C++20 wait on an awaiter seen.
 */
static bool stall_due(const struct coro *c, u64 start, u32 reason, bool passed)
{
	if (reason == CORO_R_DONE || since_attach(c, start))
		return false;
	switch (view_of(c->proc)) {
	case RV_PROBES:
		if (reason == CORO_R_WAIT || reason == CORO_R_IO)
			return passed || c->nspans;
		return true;
	case RV_GO:
		return reason == CORO_R_WAIT && passed;
	default:
		return reason == CORO_R_WAIT && c->awaiter;
	}
}

static u64 str_hash(const char *p)
{
	u64 h = 0xcbf29ce484222325ULL;

	while (*p)
		h = (h ^ (u8)*p++) * 0x100000001b3ULL;
	return h;
}

/*
 * The key frame of a run from its samples: of the frames present in more
 * than 30% of them (a function counted once per sample), the deepest.
 * Frames are told apart by function and object (by address where there is
 * no symbol).
 */
static void key_frame(struct analyzer *a, const struct coro *c, struct finding *f)
{
	struct kf {
		u32 count, last_sample, depth_from_root, stack, index;
	} *v = NULL;
	size_t nv = 0, capv = 0;
	struct hmap ids;
	u32 n = c->nrun_samples;
	int best = -1;

	f->samples = (u32)MIN(c->run_samples_total, UINT32_MAX);
	f->samples_kept = n;
	if (!n)
		return;
	hmap_init(&ids);
	for (u32 i = 0; i < n; i++) {
		const struct sym_stack *st = model_stack(a->m, c->run_samples[i]);

		for (u32 d = 0; st && d < st->n; d++) {
			const struct sym_frame *fr = st->frames[d];
			u64 k1 = fr->func ? str_hash(fr->func) : (fr->obj ? fr->rel : fr->ip) ^ 0x5a5a5a5a5a5a5a5aULL;
			u64 k2 = (u64)(uintptr_t)fr->obj;
			uintptr_t idx = (uintptr_t)hmap_get(&ids, k1, k2);
			struct kf *e;

			if (!idx) {
				if (nv == capv) {
					capv = capv ? capv * 2 : 64;
					v = xrealloc(v, capv * sizeof(*v));
				}
				v[nv] = (struct kf){0, UINT32_MAX, st->n - 1 - d, st->id, d};
				hmap_put(&ids, k1, k2, (void *)(uintptr_t)++nv);
				idx = nv;
			}
			e = &v[idx - 1];
			if (e->last_sample != i) {
				e->last_sample = i;
				e->count++;
			}
		}
	}
	for (size_t i = 0; i < nv; i++)
		if ((u64)v[i].count * 10 > (u64)n * 3 &&
		    (best < 0 || v[i].depth_from_root > v[best].depth_from_root))
			best = (int)i;
	if (best >= 0) {
		const struct sym_stack *st = model_stack(a->m, v[best].stack);

		f->has_key = true;
		f->key_samples = v[best].count;
		f->stack = v[best].stack;
		f->key_depth = v[best].index;
		sym_frame_format(st->frames[v[best].index], f->key_frame, sizeof(f->key_frame));
	}
	hmap_free(&ids);
	free(v);
}

/*
 * A run of c ended. A long run when its time on a CPU (its thread's time
 * off the CPU left out: blocked in the kernel, or waiting for a CPU) is at
 * least --long-run and work waited for its thread meanwhile.
 */
static void run_ended(struct analyzer *a, const struct coro *c, u64 start, u64 end, u32 tid,
		      bool open)
{
	struct athread *at = tid ? athread_get(a, c->pid, tid) : NULL;
	bool known = at && at->run_uid == c->uid;
	u64 dur = end - start, off = known ? c->t_offcpu - at->run_offcpu0 : 0;
	struct finding f;

	if (dur - MIN(off, dur) < a->o.long_run_ns)
		return;
	finding_init(a, &f, FK_LONG_RUN, c);
	f.tid = tid;
	f.ts = start;
	f.dur = dur;
	f.open = open;
	key_frame(a, c, &f);
	if (view_of(c->proc) == RV_SWITCH) {
		/* Its switch out is now: whether work waited shows next (pending_switch()). */
		if (at)
			pend_add(a, at, c, &f, true, end);
		return;
	}
	readies_decide(a, c, &f,
		       known ? readies_meanwhile(c, at->run_made_ready0, at->run_runnable0)
			     : readies_meanwhile(c, UINT64_MAX, 0));
}

static void analyze_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			     u64 end, u32 tid, u32 reason, u64 obj)
{
	struct analyzer *a = ctx;
	u64 dur = end - start;
	bool ending = model_ending(a->m) == c;
	/* Cut short by the end of the trace or of its process, not ended by a transition. */
	bool open = ending && (c->end == CE_TRACE_END || c->end == CE_PROCESS_EXIT);
	bool passed = false;
	struct finding f;

	if (state == CS_SUSPENDED && waits_on(reason, obj))
		passed = wait_ended(a, c->pid, obj, start, !ending);
	if (state == CS_RUNNING) {
		run_ended(a, c, start, end, tid, open);
		return;
	}
	if (open) {
		at_end(a, c, state, start, dur, reason, obj, passed);
		return;
	}
	/* Its exit (or a re-creation of its id) ended this state: nothing resumed. */
	if (ending)
		return;
	/* Resumed: the waker, if the ready that ended it is the one the model holds. */
	if (state == CS_SUSPENDED && dur >= a->o.stall_ns && stall_due(c, start, reason, passed)) {
		finding_init(a, &f, FK_STALL, c);
		f.tid = tid;
		f.ts = start;
		f.dur = dur;
		f.reason = reason;
		f.obj = obj;
		f.has_waker = c->has_waker && c->ready_ts == end;
		f.waker = c->waker;
		f.stack = c->park_stack;
		emit_finding(a, &f);
	} else if (state == CS_RUNNABLE && dur >= a->o.sched_latency_ns) {
		finding_init(a, &f, FK_SCHED_LATENCY, c);
		f.ts = start;
		f.dur = dur;
		f.has_waker = c->has_waker && c->ready_ts == start;
		f.waker = c->waker;
		emit_finding(a, &f);
	}
}

static void span_finding(struct analyzer *a, const struct coro *c, u32 pid, u32 tid,
			 const char *name, size_t len, u64 ts, u64 dur, bool open)
{
	struct finding f;

	finding_init(a, &f, FK_UNMATCHED_SPAN, c);
	if (!c)
		f.pid = pid;
	f.tid = tid;
	f.ts = ts;
	f.dur = dur;
	f.open = open;
	memcpy(f.span, name, MIN(len, CORO_STR_LEN - 1)); /* the rest: zero */
	emit_finding(a, &f);
}

static u64 slow_threshold(const struct analyzer *a, const char *name)
{
	/* The last one given for a name wins. */
	for (u32 i = a->o.nslow_names; i-- > 0;)
		if (strncmp(a->o.slow_names[i].name, name, CORO_STR_LEN) == 0)
			return a->o.slow_names[i].ns;
	return a->o.slow_span_ns;
}

/*
 * A span open when the trace ended, in a live coroutine or thread: in progress
 * (a request the capture stopped in the middle of), no finding, unless open
 * for its slow-span threshold already: then it is left open too long.
 */
static bool in_progress(const struct analyzer *a, const char *name, u64 begin, u64 end)
{
	return end - begin < slow_threshold(a, name);
}

/* A span closed: slow if it lasted its threshold, with what most of its time was. */
static void analyze_span_done(void *ctx, const struct span_done *d)
{
	struct analyzer *a = ctx;
	const struct coro_span *sp = d->sp;
	const struct span_time *in = &d->in;
	u64 limit = slow_threshold(a, sp->name), best;
	const struct coro *c = NULL;
	struct finding f;
	u32 reason = 0;

	if (!d->closed || !limit || d->dur < limit)
		return;
	if (d->uid) {
		c = model_find(a->m, d->pid, d->id);
		if (c && c->uid != d->uid)
			c = NULL;
	}
	finding_init(a, &f, FK_SLOW_SPAN, c);
	f.pid = d->pid;
	f.tid = d->tid;
	if (!c && d->uid) {
		f.id = d->id;
		f.uid = d->uid;
	}
	f.ts = sp->ts;
	f.dur = d->dur;
	memcpy(f.span, sp->name, CORO_STR_LEN);
	f.span[CORO_STR_LEN - 1] = 0;
	f.stack = sp->stack;
	f.span_in = *in;
	f.span_depth = d->depth;
	f.span_serial = sp->serial;
	f.threshold = limit;
	f.longest_ts = sp->longest_ts;
	f.longest_ns = sp->longest_ns;
	f.longest_obj = sp->longest_obj;
	f.longest_reason = sp->longest_reason;
	/* The cause: the largest share; each suspension reason counts on its own. */
	for (u32 r = 1; r < SPAN_NREASONS; r++)
		if (in->susp[r] > in->susp[reason])
			reason = r;
	f.cause = SPAN_CAUSE_RUNNING;
	best = in->running;
	if (in->runnable > best)
		best = in->runnable, f.cause = SPAN_CAUSE_RUNNABLE;
	if (in->susp[reason] > best)
		best = in->susp[reason], f.cause = SPAN_CAUSE_SUSPENDED;
	if (in->blocked > best)
		best = in->blocked, f.cause = SPAN_CAUSE_BLOCKED;
	if (in->runq > best)
		best = in->runq, f.cause = SPAN_CAUSE_RUNQ;
	if (in->unknown > best)
		best = in->unknown, f.cause = SPAN_CAUSE_UNKNOWN;
	if (f.cause == SPAN_CAUSE_SUSPENDED) {
		f.reason = reason;
		f.obj = sp->longest_reason == reason ? sp->longest_obj : 0;
	}
	emit_finding(a, &f);
}

static void storm_emit(struct analyzer *a, struct storm *st)
{
	struct finding f;
	const struct coro *p = st->parent ? model_find(a->m, st->pid, st->parent) : NULL;

	finding_init(a, &f, FK_SPAWN_STORM, p);
	f.pid = st->pid;
	f.id = st->parent;
	f.ts = st->start;
	f.dur = st->last - st->start;
	f.count = st->count;
	f.peak = st->peak;
	emit_finding(a, &f);
	st->active = false;
}

static void storm_free(struct analyzer *a, struct storm *st)
{
	if (st->active)
		storm_emit(a, st);
	hmap_del(&a->storms, st->pid, st->parent);
	free(st->ts);
	free(st);
}

static void storm_create(struct analyzer *a, u32 pid, u64 parent, u64 ts)
{
	struct storm *st = hmap_get(&a->storms, pid, parent);

	if (!st) {
		st = xcalloc(1, sizeof(*st));
		st->pid = pid;
		st->parent = parent;
		hmap_put(&a->storms, pid, parent, st);
	}
	/* Forget creations more than a second old. */
	while (st->len && st->ts[st->head] + NS_PER_S <= ts) {
		st->head = (st->head + 1) % st->cap;
		st->len--;
	}
	if (st->active && st->len <= a->o.spawn_storm)
		storm_emit(a, st); /* the rate fell back under the threshold */
	if (st->len == st->cap) {
		size_t ncap = st->cap ? st->cap * 2 : 8;
		u64 *n = xmalloc(ncap * sizeof(*n));

		for (size_t i = 0; i < st->len; i++)
			n[i] = st->ts[(st->head + i) % st->cap];
		free(st->ts);
		st->ts = n;
		st->head = 0;
		st->cap = ncap;
	}
	st->ts[(st->head + st->len++) % st->cap] = ts;
	if (!st->active && st->len > a->o.spawn_storm) {
		st->active = true;
		st->start = st->ts[st->head];
		st->count = st->len;
		st->peak = st->len;
	} else if (st->active) {
		st->count++;
		if (st->len > st->peak)
			st->peak = st->len;
	}
	st->last = ts;
}

/*
 * A thread back on a CPU. Blocked in the kernel (sleeping, or in disk wait;
 * its wait for a CPU once woken left out) at least --blocking while a
 * coroutine ran there, not its thread's scheduler waiting for work: a
 * blocking call, if work waited for the thread meanwhile. A stretch while
 * no held finding's coroutine ran, and long enough to be its scheduler's
 * wait for work, shows that nothing waited: those findings go.
 */
static void offcpu_ended(struct analyzer *a, const struct event *ev)
{
	const struct coro_thread *t = ev->thread;
	const struct coro *c = ev->offcpu.owner; /* whose stretch (a late one: who left) */
	u64 start = ev->offcpu.start;
	u64 dur = ev->offcpu.end > start ? ev->offcpu.end - start : 0;
	u64 blocked = dur - MIN(ev->offcpu.runq_ns, dur);
	/* This stretch's begin record was seen: the clocks it noted are this stretch's. */
	bool began = t && t->off_ts >= start && t->off_ts - start < 1000000;
	struct athread *at;
	struct finding f;

	if (ev->offcpu.state != CORO_OFF_SLEEPING && ev->offcpu.state != CORO_OFF_DISK)
		return;
	at = hmap_get(&a->threads, ev->pid, ev->tid);
	if (at && at->npend && at->pend_out && start >= at->pend_out_ts &&
	    blocked >= IDLE_WAIT_NS && (!c || c->uid != at->pend_uid))
		at->npend = 0;
	if (!c || blocked < a->o.blocking_ns || model_is_scheduler(t, c))
		return;
	finding_init(a, &f, FK_BLOCKING, c);
	f.tid = ev->tid;
	f.ts = start;
	f.dur = blocked;
	f.offcpu_state = ev->offcpu.state;
	/* Where the coroutine made the call that blocked (--stacks), if its begin carried it. */
	f.stack = began ? t->off_stack : 0;
	if (view_of(c->proc) == RV_SWITCH) {
		pend_add(a, athread_get(a, ev->pid, ev->tid), c, &f, false, 0);
		return;
	}
	readies_decide(a, c, &f,
		       began ? readies_meanwhile(c, t->off_made_ready, t->off_runnable)
			     : readies_meanwhile(c, UINT64_MAX, 0));
}

static void analyze_event(void *ctx, const struct event *ev)
{
	struct analyzer *a = ctx;

	switch (ev->kind) {
	case EV_CREATE:
		storm_create(a, ev->pid, ev->create.parent, ev->ts);
		break;
	case EV_OFFCPU_END:
		offcpu_ended(a, ev);
		break;
	case EV_SWITCH:
		if (ev->tid)
			pending_switch(a, ev);
		break;
	case EV_READY:
		readies_late(a, ev);
		break;
	case EV_SPAN_END:
		if (!ev->span.matched && !ev->span.before_trace)
			span_finding(a, ev->c, ev->pid, ev->tid, ev->span.name.s, ev->span.name.len,
				     ev->ts, 0, false);
		break;
	case EV_PROC_EXIT: {
		/* Its storms end with it; so do its threads' open spans. */
		struct storm **v = NULL;
		size_t n = 0, it = 0;
		u64 k1;
		void *val;

		while (hmap_next(&a->storms, &it, &k1, NULL, &val))
			if (k1 == ev->pid) {
				v = xrealloc(v, (n + 1) * sizeof(*v));
				v[n++] = val;
			}
		for (size_t i = 0; i < n; i++)
			storm_free(a, v[i]);
		free(v);
		/* Findings held for evidence get none now. */
		hmap_del_k1(&a->threads, ev->pid, athread_free);
		free(hmap_del(&a->procs, ev->pid, 0));
		break;
	}
	case EV_PROC_GONE:
	case EV_EXEC:
		hmap_del_k1(&a->threads, ev->pid, athread_free);
		free(hmap_del(&a->procs, ev->pid, 0));
		break;
	default:
		break;
	}
}

static void analyze_coroutine_end(void *ctx, const struct coro *c)
{
	struct analyzer *a = ctx;
	struct athread *at = c->tid ? hmap_get(&a->threads, c->pid, c->tid) : NULL;
	struct storm *st;

	/* Findings held about it: its exit gives the thread back as a switch out would. */
	if (at && at->npend && at->pend_uid == c->uid && c->end == CE_EXIT && !at->pend_out) {
		at->pend_out = true;
		at->pend_out_ts = c->end_ts;
	}

	for (u32 i = 0; i < c->nspans; i++) {
		const struct coro_span *sp = &c->spans[i];

		if (c->end == CE_TRACE_END && in_progress(a, sp->name, sp->ts, c->end_ts))
			continue;
		span_finding(a, c, c->pid, c->tid, sp->name, strnlen(sp->name, CORO_STR_LEN), sp->ts,
			     c->end_ts - sp->ts, c->end != CE_EXIT);
	}
	/* A parent's storm ends with it. */
	st = hmap_get(&a->storms, c->pid, c->id);
	if (st)
		storm_free(a, st);
}

static void analyze_finish(void *ctx, const struct model *m)
{
	struct analyzer *a = ctx;
	const struct coro_thread *t;
	size_t it = 0;
	void *v;

	/* Spans opened by threads outside any coroutine, still open (threads of live processes). */
	while ((t = model_next_thread(m, &it))) {
		for (u32 i = 0; i < t->nspans; i++) {
			if (in_progress(a, t->spans[i].name, t->spans[i].ts, m->last_ts))
				continue;
			span_finding(a, NULL, t->pid, t->tid, t->spans[i].name,
				     strnlen(t->spans[i].name, CORO_STR_LEN), t->spans[i].ts,
				     m->last_ts - t->spans[i].ts, true);
		}
	}
	it = 0;
	while (hmap_next(&a->storms, &it, NULL, NULL, &v)) {
		struct storm *st = v;

		if (st->active)
			storm_emit(a, st);
	}
}

struct analyzer *analyzer_new(struct model *m, const struct analyze_opts *o,
			      const struct finding_sink *out, struct model_observer *obs)
{
	struct analyzer *a = xcalloc(1, sizeof(*a));

	a->m = m;
	a->o = *o;
	a->out = *out;
	hmap_init(&a->storms);
	hmap_init(&a->threads);
	hmap_init(&a->waits);
	hmap_init(&a->procs);
	memset(obs, 0, sizeof(*obs));
	obs->ctx = a;
	obs->interval = analyze_interval;
	obs->enter = analyze_enter;
	obs->event = analyze_event;
	obs->coroutine_end = analyze_coroutine_end;
	obs->finish = analyze_finish;
	obs->span_done = analyze_span_done;
	return a;
}

void analyzer_free(struct analyzer *a)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&a->storms, &it, NULL, NULL, &v)) {
		free(((struct storm *)v)->ts);
		free(v);
	}
	hmap_free(&a->storms);
	it = 0;
	while (hmap_next(&a->threads, &it, NULL, NULL, &v))
		athread_free(v);
	hmap_free(&a->threads);
	it = 0;
	while (hmap_next(&a->waits, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&a->waits);
	it = 0;
	while (hmap_next(&a->procs, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&a->procs);
	while (a->free_waits) {
		struct objwait *w = a->free_waits;

		a->free_waits = w->next_free;
		free(w);
	}
	free(a);
}
