// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The detectors. Each reads the model's state changes (interval(): a state
 * ended; coroutine_end(): a coroutine's record closed; record(): an event)
 * and never re-derives state from raw events. Findings are made when they
 * can be known: a stall when the coroutine resumes, a lost wakeup when the
 * trace or the process ends with the coroutine still waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze.h"

#define NS_PER_S 1000000000ULL

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

struct analyzer {
	struct model *m;
	struct analyze_opts o;
	struct finding_sink out; /* the pipeline's: every output */
	struct hmap storms; /* (pid, parent id) -> struct storm */
	int slot;	    /* our priv[] slot: blocked_total() when its run began, + 1 */
};

static void emit_finding(struct analyzer *a, const struct finding *f)
{
	a->out.finding(a->out.ctx, f);
}

/*
 * Time a coroutine's thread spent blocked in the kernel, with the wait for a
 * CPU once woken: the blocking call's doing (its blocking and sched_latency
 * findings say it), not the coroutine's running.
 */
static u64 blocked_total(const struct coro *c)
{
	return c->t_blocked + c->t_woken_runq;
}

static void analyze_enter(void *ctx, const struct coro *c, u64 ts)
{
	struct analyzer *a = ctx;

	if (a->slot >= 0 && c->state == CS_RUNNING)
		model_set_priv(c->priv, a->slot, (void *)(uintptr_t)(blocked_total(c) + 1));
}

/* Time the run that ends now spent blocked in the kernel and woken (findings of their own). */
static u64 blocked_in_run(const struct analyzer *a, const struct coro *c)
{
	uintptr_t at_start = a->slot >= 0 ? (uintptr_t)c->priv[a->slot] : 0;
	u64 now = blocked_total(c);

	return at_start && now >= at_start - 1 ? now - (at_start - 1) : 0;
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
	memcpy(f->name, c->name, CORO_STR_LEN);
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
		memcpy(f->chain[f->nchain].name, p->name, CORO_STR_LEN);
		f->nchain++;
		pid = p->parent;
		puid = p->parent_uid;
	}
}


/*
 * Go: the runtime's own goroutines (its GC helpers, the finalizer and the
 * trace reader: goelf.c maps their idle parks to sleep) wait for work, and
 * a long wait for work is no stall.
 */
static bool go_runtime_idle(const struct coro *c, u32 reason)
{
	return reason == CORO_R_SLEEP && c->proc && c->proc->switch_families == 1u << CORO_FAM_GO &&
	       !strncmp(c->name, "runtime", 7) && (c->name[7] == '.' || c->name[7] == '/');
}

static void at_end(struct analyzer *a, const struct coro *c, enum coro_state state, u64 start,
		   u64 dur, u32 reason, u64 obj)
{
	struct finding f;
	enum finding_kind kind;

	if (dur < a->o.stall_ns)
		return;
	/*
	 * The switch-function path has no ready events: a coroutine suspended
	 * at the end may be waiting for anything, or finished (Boost.Context
	 * shows no exits). Only one never started says something. Go is the
	 * exception: its runtime reports readies, waits and exits; so is a C++20
	 * coroutine whose wait's await_suspend was seen (it has an awaiter): its
	 * exit is seen, and only its body's entry resumes it, so never entered
	 * again is never resumed (made ready or not: docs/cxx20.md).
	 */
	if (c->proc && (c->proc->switch_families & ~(1u << CORO_FAM_GO)) && state != CS_NEW &&
	    !(c->awaiter && state == CS_SUSPENDED && reason == CORO_R_WAIT))
		return;
	switch (state) {
	case CS_SUSPENDED:
		if (reason == CORO_R_WAIT || reason == CORO_R_IO ||
		    (reason == CORO_R_UNKNOWN && obj))
			kind = FK_LOST_WAKEUP; /* waiting on something that never came */
		else if (reason == CORO_R_DONE || reason == CORO_R_UNKNOWN)
			kind = FK_LEAK;	       /* nothing recorded could wake it */
		else
			return;		       /* a sleep or yield still in progress */
		break;
	case CS_RUNNABLE:
		kind = FK_LOST_WAKEUP; /* made ready, never run again */
		break;
	case CS_NEW:
		kind = FK_LEAK; /* created, never started */
		break;
	default:
		return;
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

static void analyze_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			     u64 end, u32 tid, u32 reason, u64 obj)
{
	struct analyzer *a = ctx;
	u64 dur = end - start;
	bool ending = model_ending(a->m) == c;
	/* Cut short by the end of the trace or of its process, not ended by a transition. */
	bool open = ending && (c->end == CE_TRACE_END || c->end == CE_PROCESS_EXIT);
	struct finding f;

	/* Holding the worker: on a CPU or waiting for one, not blocked in the kernel. */
	if (state == CS_RUNNING && dur - MIN(blocked_in_run(a, c), dur) >= a->o.long_run_ns) {
		finding_init(a, &f, FK_LONG_RUN, c);
		f.tid = tid;
		f.ts = start;
		f.dur = dur;
		f.open = open;
		key_frame(a, c, &f);
		emit_finding(a, &f);
		return;
	}
	if (open) {
		at_end(a, c, state, start, dur, reason, obj);
		return;
	}
	/* Its exit (or a re-creation of its id) ended this state: nothing resumed. */
	if (ending)
		return;
	/* Resumed: the waker, if the ready that ended it is the one the model holds. */
	if (state == CS_SUSPENDED && reason != CORO_R_DONE && dur >= a->o.stall_ns &&
	    !go_runtime_idle(c, reason)) {
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

static void analyze_event(void *ctx, const struct event *ev)
{
	struct analyzer *a = ctx;

	switch (ev->kind) {
	case EV_CREATE:
		storm_create(a, ev->pid, ev->create.parent, ev->ts);
		break;
	case EV_OFFCPU_END: {
		u64 start = ev->offcpu.start;
		u64 dur = ev->ts > start ? ev->ts - start : 0;
		u64 blocked = dur - MIN(ev->offcpu.runq_ns, dur);
		struct finding f;

		/*
		 * Waiting for a CPU is not blocking; sleeping or disk wait is. A
		 * scheduler's own loop waiting for work (Boost.Fiber's dispatcher)
		 * is idle, not blocking: no coroutine is held up by it.
		 */
		if (!ev->c || ev->c->fiber_dispatcher ||
		    (ev->offcpu.state != CORO_OFF_SLEEPING && ev->offcpu.state != CORO_OFF_DISK) ||
		    blocked < a->o.blocking_ns)
			break;
		finding_init(a, &f, FK_BLOCKING, ev->c);
		f.tid = ev->tid;
		f.ts = start;
		f.dur = blocked;
		f.offcpu_state = ev->offcpu.state;
		{
			/* Where the coroutine made the call that blocked (--stacks). */
			const struct coro_thread *t = model_thread_peek(a->m, ev->pid, ev->tid);

			/*
			 * Only if this stretch's begin record carried it (a lost begin
			 * leaves an older stretch's): both times come from one BPF
			 * program run, microseconds apart.
			 */
			f.stack = t && t->off_ts >= start && t->off_ts - start < 1000000
					  ? t->off_stack
					  : 0;
		}
		emit_finding(a, &f);
		break;
	}
	case EV_SPAN_END:
		if (!ev->span.matched)
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
		break;
	}
	default:
		break;
	}
}

static void analyze_coroutine_end(void *ctx, const struct coro *c)
{
	struct analyzer *a = ctx;
	struct storm *st;

	for (u32 i = 0; i < c->nspans; i++)
		span_finding(a, c, c->pid, c->tid, c->spans[i].name,
			     strnlen(c->spans[i].name, CORO_STR_LEN), c->spans[i].ts,
			     c->end_ts - c->spans[i].ts, c->end != CE_EXIT);
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

	/* Spans opened by threads outside any coroutine and never closed. */
	while ((t = model_next_thread(m, &it))) {
		for (u32 i = 0; i < t->nspans; i++)
			span_finding(a, NULL, t->pid, t->tid, t->spans[i].name,
				     strnlen(t->spans[i].name, CORO_STR_LEN), t->spans[i].ts,
				     m->last_ts - t->spans[i].ts, true);
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
	a->slot = -1;
	hmap_init(&a->storms);
	memset(obs, 0, sizeof(*obs));
	obs->ctx = a;
	obs->interval = analyze_interval;
	obs->enter = analyze_enter;
	obs->event = analyze_event;
	obs->slot = &a->slot;
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
	free(a);
}
