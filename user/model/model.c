// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "decode.h"
#include "model.h"

const char *coro_state_name(enum coro_state s)
{
	static const char *names[CS_NSTATES] = {
		[CS_NEW] = "new",	    [CS_RUNNABLE] = "runnable", [CS_RUNNING] = "running",
		[CS_SUSPENDED] = "suspended", [CS_UNKNOWN] = "unknown",	[CS_EXITED] = "exited",
	};
	return (unsigned)s < CS_NSTATES ? names[s] : "?";
}

const char *coro_reason_name(u32 reason)
{
	static const char *names[CORO_NREASONS] = {"unknown", "yield", "wait", "sleep", "io",
						   "done"};
	return reason < CORO_NREASONS ? names[reason] : "unknown";
}

const char *coro_end_name(enum coro_end e)
{
	switch (e) {
	case CE_EXIT: return "exit";
	case CE_PROCESS_EXIT: return "process_exit";
	case CE_TRACE_END: return "trace_end";
	case CE_SUPERSEDED: return "superseded";
	case CE_EXEC: return "exec";
	}
	return "?";
}

const char *coro_offcpu_state_name(u32 state)
{
	switch (state) {
	case CORO_OFF_PREEMPTED: return "preempted";
	case CORO_OFF_SLEEPING: return "sleeping";
	case CORO_OFF_DISK: return "disk";
	}
	return "other";
}

const char *coro_end_reason_name(u32 reason)
{
	switch (reason) {
	case CORO_END_TARGETS_EXITED: return "targets_exited";
	case CORO_END_SIGNAL: return "signal";
	case CORO_END_DURATION: return "duration";
	case CORO_END_ERROR: return "error";
	}
	return "none";
}

const char *coro_proc_mode_name(u32 mode)
{
	switch (mode) {
	case CORO_PROC_LAUNCHED: return "launched";
	case CORO_PROC_FORKED: return "forked";
	}
	return "attached";
}

_Static_assert(SPAN_NREASONS == CORO_NREASONS, "a span's suspensions are by reason");

void model_init(struct model *m, struct capture_info *ci)
{
	memset(m, 0, sizeof(*m));
	m->ci = ci;
	hmap_init(&m->coros);
	hmap_init(&m->threads);
	hmap_init(&m->procs);
	span_table_init(&m->spans);
	m->next_uid = 1;
	m->rng = 0x9e3779b97f4a7c15ull;
	m->max_live = MODEL_MAX_LIVE_DEFAULT;
	m->max_live_process = MODEL_MAX_LIVE_PROCESS_DEFAULT;
	m->max_spans = MODEL_MAX_SPANS_DEFAULT;
	m->max_spans_process = MODEL_MAX_SPANS_PROCESS_DEFAULT;
	hmap_init(&m->span_refused);
}

void model_limit_spans(struct model *m, u64 spans, u64 spans_per_process)
{
	m->max_spans = spans;
	m->max_spans_process = spans_per_process;
}

void model_limit(struct model *m, u64 live, u64 live_per_process)
{
	m->max_live = live;
	m->max_live_process = live_per_process;
}

int model_add_observer(struct model *m, const struct model_observer *obs)
{
	if (m->nobs == MODEL_MAX_OBSERVERS) {
		if (obs->slot)
			*obs->slot = -1;
		return -1;
	}
	m->obs = xrealloc(m->obs, (m->nobs + 1) * sizeof(*m->obs));
	m->obs[m->nobs++] = *obs;
	if (obs->slot)
		*obs->slot = (int)m->nobs - 1;
	return (int)m->nobs - 1;
}

void model_begin(struct model *m)
{
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].begin)
			m->obs[i].begin(m->obs[i].ctx, m->ci);
}

struct coro *model_find(struct model *m, u32 pid, u64 id)
{
	return hmap_get(&m->coros, pid, id);
}

const struct coro_thread *model_thread_peek(const struct model *m, u32 pid, u32 tid)
{
	return hmap_get(&m->threads, pid, tid);
}

const struct coro_process *model_process_peek(const struct model *m, u32 pid)
{
	return hmap_get(&m->procs, pid, 0);
}

const struct coro_process *model_next_process(const struct model *m, size_t *it)
{
	void *v;

	return hmap_next(&m->procs, it, NULL, NULL, &v) ? v : NULL;
}

const struct coro_thread *model_next_thread(const struct model *m, size_t *it)
{
	void *v;

	return hmap_next(&m->threads, it, NULL, NULL, &v) ? v : NULL;
}

/* One-entry caches in front of the thread and process maps: events come in runs from one thread. */
struct coro_thread *model_thread(struct model *m, u32 pid, u32 tid)
{
	struct coro_thread *t = m->last_thread;

	if (t && t->tid == tid && t->pid == pid)
		return t;
	t = hmap_get(&m->threads, pid, tid);
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		t->pid = pid;
		t->tid = tid;
		hmap_put(&m->threads, pid, tid, t);
	}
	m->last_thread = t;
	return t;
}

/* The process if the model knows it, else NULL. */
struct coro_process *model_proc_peek(struct model *m, u32 pid)
{
	struct coro_process *p = m->last_proc;

	if (p && p->pid == pid)
		return p;
	p = hmap_get(&m->procs, pid, 0);
	if (p)
		m->last_proc = p;
	return p;
}

struct coro_process *model_process(struct model *m, u32 pid)
{
	struct coro_process *p = model_proc_peek(m, pid);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		p->exit_status = -1;
		hmap_put(&m->procs, pid, 0, p);
	}
	return p;
}

/* ---- per-coroutine state machine ---- */

static void notify_interval(struct model *m, const struct coro *c, enum coro_state s, u64 start,
			    u64 end)
{
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].interval)
			m->obs[i].interval(m->obs[i].ctx, c, s, start, end, c->tid, c->reason,
					   c->obj);
}

static void notify_enter(struct model *m, const struct coro *c, u64 ts)
{
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].enter)
			m->obs[i].enter(m->obs[i].ctx, c, ts);
}

/* Close the current state interval at ts and account for it. */
static void close_interval(struct model *m, struct coro *c, u64 ts, bool open_at_end)
{
	u64 start = c->state_since, end = MAX(ts, start), dur = end - start;

	c->t_state[c->state] += dur;
	if (c->state == CS_SUSPENDED) {
		c->t_suspended[c->reason < CORO_NREASONS ? c->reason : 0] += dur;
		if (dur >= c->longest_susp && c->reason != CORO_R_DONE) {
			c->longest_susp = dur;
			c->longest_susp_start = start;
			c->longest_susp_reason = c->reason;
			c->longest_susp_obj = c->obj;
			c->longest_open = open_at_end;
		}
		if (c->nspans && c->reason != CORO_R_DONE)
			span_note_suspension(c->spans, c->nspans, start, dur, c->reason, c->obj);
	}
	notify_interval(m, c, c->state, start, end);
	c->state_since = end;
}

static void set_state(struct model *m, struct coro *c, enum coro_state s, u64 ts, u32 tid,
		      u32 reason, u64 obj)
{
	struct coro_process *p = c->proc;

	close_interval(m, c, ts, false);
	if (c->state == CS_RUNNABLE)
		p->runnable--;
	if (s == CS_RUNNABLE)
		p->runnable++;
	if (s == CS_UNKNOWN)
		c->uncertain = true;
	c->state = s;
	if (s == CS_RUNNING) {
		c->tid = tid;
		if (!c->thread || c->thread->tid != tid)
			c->thread = tid ? model_thread(m, c->pid, tid) : NULL;
	}
	c->reason = s == CS_SUSPENDED ? reason : 0;
	c->obj = s == CS_SUSPENDED ? obj : 0;
	notify_enter(m, c, c->state_since);
}

/* The first few threads are kept in the coroutine itself: no second cache miss per switch-in. */
static void coro_add_tid(struct coro *c, u32 tid)
{
	for (u32 i = 0; i < c->ntids; i++)
		if (c->tids[i] == tid)
			return;
	if (!c->tids) {
		c->tids = c->tids_few;
		c->cap_tids = sizeof(c->tids_few) / sizeof(c->tids_few[0]);
	} else if (c->ntids == c->cap_tids) {
		u32 *more = xmalloc(2 * c->cap_tids * sizeof(*more));

		memcpy(more, c->tids, c->ntids * sizeof(*more));
		if (c->tids != c->tids_few)
			free(c->tids);
		c->tids = more;
		c->cap_tids *= 2;
	}
	c->tids[c->ntids++] = tid;
}

static struct coro *coro_new(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s,
			     bool created, u32 tid, u32 reason, u64 obj)
{
	struct coro *c = xcalloc(1, sizeof(*c));
	struct coro_process *p = model_process(m, pid);

	c->uid = m->next_uid++;
	c->id = id;
	c->pid = pid;
	c->proc = p;
	c->thread = tid ? model_thread(m, pid, tid) : NULL;
	c->created_seen = created;
	c->created_ts = created ? ts : 0;
	c->first_ts = ts;
	c->state = s;
	c->state_since = ts;
	c->tid = tid;
	c->reason = s == CS_SUSPENDED ? reason : 0;
	c->obj = s == CS_SUSPENDED ? obj : 0;
	if (s == CS_UNKNOWN)
		c->uncertain = true;
	if (s == CS_RUNNABLE)
		p->runnable++;
	if (s == CS_RUNNING && tid)
		coro_add_tid(c, tid);
	hmap_put(&m->coros, pid, id, c);
	p->live++;
	p->created++;
	m->coroutines++;
	m->live++;
	if (m->live > m->peak_live)
		m->peak_live = m->live;
	notify_enter(m, c, ts);
	return c;
}

/* Ended coroutines wait here until the observers have seen the record that ended them. */
struct graveyard {
	struct coro **v;
	size_t len, cap;
};
static struct graveyard graveyard;

static void coro_free(struct coro *c)
{
	free(c->run_samples);
	if (c->tids != c->tids_few)
		free(c->tids);
	free(c->spans);
	free(c->awaiter);
	free(c->name_long);
	free(c);
}

/* The awaiter of its switch out (a C++20 wait), or none: copied only when it changes. */
static void coro_set_awaiter(struct coro *c, const struct ev_str *a)
{
	if (c->awaiter && a->len && !strncmp(c->awaiter, a->s, a->len) && !c->awaiter[a->len])
		return;
	free(c->awaiter);
	c->awaiter = NULL;
	if (a->len) {
		c->awaiter = xcalloc(1, a->len + 1);
		memcpy(c->awaiter, a->s, a->len);
	}
}

static void bury_flush(void)
{
	for (size_t i = 0; i < graveyard.len; i++)
		coro_free(graveyard.v[i]);
	graveyard.len = 0;
}

/* c's cumulative clocks at ts, its current state's part included (spans.h struct span_time). */
static void coro_span_clock(const struct coro *c, u64 ts, struct span_time *k)
{
	u64 part = ts > c->state_since ? ts - c->state_since : 0;

	k->running = c->t_state[CS_RUNNING] + (c->state == CS_RUNNING ? part : 0);
	k->runnable = c->t_state[CS_RUNNABLE] + (c->state == CS_RUNNABLE ? part : 0);
	k->suspended = c->t_state[CS_SUSPENDED] + (c->state == CS_SUSPENDED ? part : 0);
	k->unknown = c->t_state[CS_UNKNOWN] + (c->state == CS_UNKNOWN ? part : 0);
	for (int r = 0; r < CORO_NREASONS; r++)
		k->susp[r] = c->t_suspended[r];
	if (c->state == CS_SUSPENDED)
		k->susp[c->reason < CORO_NREASONS ? c->reason : 0] += part;
	k->offcpu = c->t_offcpu;
	k->blocked = c->t_blocked;
	k->runq = c->t_runq;
}

static void notify_span_done(void *ctx, const struct span_done *d)
{
	struct model *m = ctx;

	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].span_done)
			m->obs[i].span_done(m->obs[i].ctx, d);
}

/* A thread's own open spans end unclosed at ts: its process or the trace ended. */
static void thread_spans_unclosed(struct model *m, struct coro_thread *t, u64 ts)
{
	struct span_ender e = {.d = {.pid = t->pid, .tid = t->tid, .end = ts},
			       .done = notify_span_done, .ctx = m};

	if (t->nspans)
		span_end_open(&m->spans, t->spans, t->nspans, &e);
}

/*
 * Span begins the caps on open spans refused, of one owner: their names'
 * hashes, innermost last, and how many more were refused, inside those,
 * than the model remembers. Once an owner has one, every begin of it is
 * refused until they have all ended, so they are always inside its kept
 * spans. Remembered: REFUSED_PER_SPAN times the cap's number of hashes (8
 * bytes each, against 240 for a span kept).
 */
#define REFUSED_PER_SPAN 8
struct span_refused {
	u64 *hash;
	u32 n, cap;
	u64 unhashed;
	bool process; /* the first was refused for its process's cap (else for the cap of all) */
};

static void refused_free(struct model *m, const void *owner)
{
	struct span_refused *r = hmap_del(&m->span_refused, (uintptr_t)owner, 0);

	if (!r)
		return;
	m->refused_hashes -= r->n;
	free(r->hash);
	free(r);
}

/* A begin refused by the caps: remembered by its name's hash, while the cap of all allows. */
static void refuse_span(struct model *m, const void *owner, struct span_refused *r,
			const char *name, bool process)
{
	if (!r) {
		r = xcalloc(1, sizeof(*r));
		r->process = process;
		hmap_put(&m->span_refused, (uintptr_t)owner, 0, r);
	}
	u64 room = REFUSED_PER_SPAN * (m->max_spans ? m->max_spans : m->max_spans_process);

	if (r->unhashed || m->refused_hashes >= room) {
		r->unhashed++; /* inside the ones remembered: innermost */
		return;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->hash = xrealloc(r->hash, r->cap * sizeof(*r->hash));
	}
	r->hash[r->n++] = span_name_hash(&m->spans, name);
	m->refused_hashes++;
}

/*
 * A span_end of an owner with refused begins: true if it ends one of them
 * (the innermost refused of its name, and those refused inside it), which
 * closes none of the kept spans.
 */
static bool end_refused(struct model *m, const void *owner, struct span_refused *r,
			const char *name)
{
	u64 h = span_name_hash(&m->spans, name);

	/*
	 * Past what the model remembers, the innermost refused have no name:
	 * an end is taken as ending the innermost of them, as a program that
	 * ends its spans in order does (docs/reliability.md, "Bounded memory").
	 */
	if (r->unhashed) {
		if (!--r->unhashed && !r->n)
			refused_free(m, owner);
		return true;
	}
	for (u32 j = r->n; j-- > 0;) {
		if (r->hash[j] != h)
			continue;
		m->refused_hashes -= r->n - j;
		r->n = j;
		if (!r->n && !r->unhashed)
			refused_free(m, owner);
		return true;
	}
	return false;
}

/* An owner's kept spans closed or ended: the counts of open spans follow. */
static void spans_gone(struct model *m, u32 pid, u32 n)
{
	struct coro_process *p = model_proc_peek(m, pid);

	m->open_spans -= n;
	if (p)
		p->open_spans -= n;
}

/*
 * A run cut by the end of the trace or of its process while its thread was
 * off the CPU: the time since the thread left is the run's off-CPU time
 * (blocked, if it blocked), as the offcpu_end that never came would have
 * made it, never time spent running (a Ruby program in `sleep`, a main loop
 * waiting in ppoll when the trace ends).
 */
static void offcpu_until_end(struct coro *c, u64 ts)
{
	const struct coro_thread *t = c->thread;
	u64 from;

	if (c->state != CS_RUNNING || !t || !t->off || t->tid != c->tid)
		return;
	from = MAX(t->off_ts, c->state_since);
	if (ts <= from)
		return;
	c->t_offcpu += ts - from;
	if (t->off_state == CORO_OFF_SLEEPING || t->off_state == CORO_OFF_DISK)
		c->t_blocked += ts - from;
	else
		c->t_runq += ts - from;
}

static void end_coroutine(struct model *m, struct coro *c, enum coro_end how, u64 ts)
{
	struct coro_process *p = c->proc;

	c->end_state = c->state;
	c->end_reason = c->reason;
	c->end_obj = c->obj;
	c->end = how;
	m->ending = c;
	if (how == CE_TRACE_END || how == CE_PROCESS_EXIT || how == CE_EXEC)
		offcpu_until_end(c, ts);
	if (c->state != CS_EXITED) {
		close_interval(m, c, ts, how != CE_EXIT);
		if (c->state == CS_RUNNABLE)
			p->runnable--;
	}
	c->end_ts = MAX(ts, c->state_since);
	c->state = CS_EXITED;
	if (c->nspans) {
		/* Its open spans end unclosed: no end of theirs was seen. */
		struct span_time now;
		struct span_ender e = {.d = {.pid = c->pid, .tid = c->tid, .id = c->id,
					     .uid = c->uid, .end = c->end_ts},
				       .now = &now, .done = notify_span_done, .ctx = m};

		coro_span_clock(c, c->end_ts, &now);
		span_end_open(&m->spans, c->spans, c->nspans, &e);
	}
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].coroutine_end)
			m->obs[i].coroutine_end(m->obs[i].ctx, c);
	m->ending = NULL;
	hmap_del(&m->coros, c->pid, c->id);
	/* Observers have read its open spans; nothing can name it now. */
	span_forget(&m->spans, c, c->spans, c->nspans, &c->spans_indexed);
	spans_gone(m, c->pid, c->nspans);
	refused_free(m, c);
	p->live--;
	m->live--;
	if (graveyard.len == graveyard.cap) {
		graveyard.cap = graveyard.cap ? graveyard.cap * 2 : 16;
		graveyard.v = xrealloc(graveyard.v, graveyard.cap * sizeof(*graveyard.v));
	}
	graveyard.v[graveyard.len++] = c;
}

/*
 * Room to follow one more live coroutine of pid: NULL, or the counter of
 * the cap that is reached (the process's, checked first, or all's).
 */
static u64 *cap_reached(struct model *m, u32 pid)
{
	const struct coro_process *p;

	if (m->max_live_process && (p = model_proc_peek(m, pid)) && p->live >= m->max_live_process)
		return &m->anom.over_process_cap;
	if (m->max_live && m->live >= m->max_live)
		return &m->anom.over_cap;
	return NULL;
}

/*
 * A coroutine the stream talks about but never introduced: attached mid-life.
 * NULL when a cap leaves no room to follow it (the caller says so).
 */
static struct coro *coro_get(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s)
{
	struct coro *c = model_find(m, pid, id);

	if (c)
		return c;
	return cap_reached(m, pid) ? NULL : coro_new(m, pid, id, ts, s, false, 0, 0, 0);
}

/* ---- threads ---- */

static bool cur_certain(struct model *m, const struct coro_event_hdr *h)
{
	struct coro_process *p;

	if (h->flags & (CORO_EVF_NO_THREAD | CORO_EVF_CUR_UNSAID))
		return false;
	if (!(h->flags & CORO_EVF_CUR_UNKNOWN))
		return true;
	/* Launched under us: no switch yet really means the thread runs no coroutine. */
	p = model_proc_peek(m, h->pid);
	return p && p->mode == CORO_PROC_LAUNCHED;
}

/* The coroutine the thread was running (per the model) loses its certain state at ts. */
static void thread_forget(struct model *m, struct coro_thread *t, u64 ts)
{
	struct coro *c;

	if (t->cur_known && t->cur && !t->cur_exited) {
		c = model_find(m, t->pid, t->cur);
		if (c && c->state == CS_RUNNING && c->tid == t->tid)
			set_state(m, c, CS_UNKNOWN, MAX(ts, c->state_since), 0, 0, 0);
	}
	t->cur_known = false;
	t->cur_exited = false;
}

/*
 * Bring the thread view in line with the BPF side's before applying an event
 * (certain: whether h->cur is what runs there, cur_certain() of a BPF event).
 */
static struct coro_thread *thread_sync(struct model *m, const struct coro_event_hdr *h,
				       bool certain)
{
	struct coro_thread *t = model_thread(m, h->pid, h->tid);

	if (h->lost_before) {
		m->anom.lost_events += h->lost_before;
		/* The hole lies between the thread's last event and this one. */
		thread_forget(m, t, t->last_ts ? t->last_ts : h->ts);
	}
	if (certain) {
		if (t->cur_known && t->cur != h->cur) {
			m->anom.cur_desync++;
			thread_forget(m, t, h->ts);
		}
		if (!t->cur_known) {
			t->cur = h->cur;
			t->cur_exited = false;
			t->cur_known = true;
			/*
			 * After a hole the BPF side still knows what runs here now (it
			 * tracks switches it could not report): running from this event
			 * on is a fact; how it got here is not, and is left unknown.
			 */
			if (h->lost_before && h->cur) {
				struct coro *c = coro_get(m, h->pid, h->cur, h->ts, CS_UNKNOWN);

				/* Not followed (a cap): the thread runs it, nothing more to say. */
				if (c && (c->state != CS_RUNNING || c->tid != h->tid)) {
					if (c->state != CS_UNKNOWN)
						set_state(m, c, CS_UNKNOWN,
							  MAX(t->last_ts, c->state_since), 0, 0, 0);
					set_state(m, c, CS_RUNNING, h->ts, h->tid, 0, 0);
					coro_add_tid(c, h->tid);
				}
			}
		}
	}
	t->last_ts = h->ts;
	return t;
}

/* ---- events ---- */

static void apply_create(struct model *m, const struct coro_ev_create *e,
			 struct event *mi)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct coro *c = model_find(m, h->pid, e->id), *pc;

	if (c) {
		if (!c->created_seen && !c->switch_ins && !c->readies &&
		    (c->state == CS_UNKNOWN || c->state == CS_NEW)) {
			/*
			 * Named before it was announced: this create completes it. Nothing
			 * of its life has been counted yet, so its life starts here.
			 */
			c->created_seen = true;
			c->created_ts = h->ts;
			c->uncertain = false;
			c->first_ts = h->ts;
			c->t_state[CS_UNKNOWN] = 0;
			set_state(m, c, CS_NEW, h->ts, 0, 0, 0);
			c->t_state[CS_UNKNOWN] = 0;
		} else {
			m->anom.recreate_live++;
			end_coroutine(m, c, CE_SUPERSEDED, h->ts);
			c = NULL;
		}
	}
	if (!c) {
		u64 *cap = cap_reached(m, h->pid);

		if (cap) {
			/* Not followed until there is room: then as one seen mid-life. */
			(*cap)++;
			m->over_cap = true;
			return;
		}
		c = coro_new(m, h->pid, e->id, h->ts, CS_NEW, true, 0, 0, 0);
	}
	c->create_stack = mi->stack;
	c->parent = e->parent;
	pc = e->parent ? model_find(m, h->pid, e->parent) : NULL;
	c->parent_uid = pc ? pc->uid : 0;
	mi->c = c;
}

static void apply_name(struct model *m, const struct coro_ev_name *e, struct event *mi)
{
	struct coro *c = coro_get(m, e->hdr.pid, e->id, e->hdr.ts, CS_UNKNOWN);
	/* Decoded already: up to a NUL within the record, CORO_NAME_MAX - 1 bytes at most. */
	const struct ev_str *n = &mi->name.name;

	if (!c) {
		m->over_cap = true;
		return;
	}
	free(c->name_long);
	c->name_long = NULL;
	memcpy(c->name, n->s, MIN(n->len, CORO_STR_LEN - 1));
	c->name[MIN(n->len, CORO_STR_LEN - 1)] = 0;
	if (n->len >= CORO_STR_LEN) {
		c->name_long = xmalloc(n->len + 1);
		memcpy(c->name_long, n->s, n->len);
		c->name_long[n->len] = 0;
	}
	c->name_truncated = e->hdr.flags & CORO_EVF_STR_TRUNCATED;
	mi->c = c;
}

static void apply_ready(struct model *m, const struct coro_ev_ready *e,
			struct event *mi)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct coro *c = coro_get(m, h->pid, e->id, h->ts, CS_UNKNOWN);

	if (!c) {
		m->over_cap = true;
		return;
	}
	mi->c = c;
	c->readies++;
	c->has_waker = mi->cur_known;
	c->waker = h->cur;
	c->ready_ts = h->ts;
	switch (c->state) {
	case CS_RUNNING:
		/* Woken before it switched out (a yield, or a wake racing its sleep). */
		c->ready_pending = true;
		break;
	case CS_RUNNABLE:
		break;
	default:
		set_state(m, c, CS_RUNNABLE, h->ts, 0, 0, 0);
		c->proc->made_ready++;
	}
}

/* A process with Boost.Fiber's library mapped, traced through Boost.Context. */
static bool boost_fiber_process(const struct coro_process *p)
{
	return p && (p->switch_families & (1u << CORO_FAM_FCONTEXT)) && p->switch_desc &&
	       strstr(p->switch_desc, "libboost_fiber");
}

/*
 * Boost.Fiber's dispatcher: the context each thread's scheduler makes to run
 * its loop, which waits in the kernel when the scheduler is idle. The
 * scheduler queues it ready first, before any fiber it is then given, so
 * on each thread it is the first context entered for the second time (its
 * first entry, as every Boost.Context fiber's, is the set-up that returns at
 * once): docs/switch.md. Only in a process with libboost_fiber mapped, and
 * only for a context whose creation was seen.
 */
static void fiber_dispatcher(struct model *m, struct coro_thread *t, struct coro *c)
{
	if (t->fiber_dispatcher_seen || c->switch_ins != 2 || !c->created_seen ||
	    !boost_fiber_process(c->proc))
		return;
	t->fiber_dispatcher_seen = true;
	c->fiber_dispatcher = true;
	c->scheduler = true;
	if (c->name[0])
		return;
	snprintf(c->name, sizeof(c->name), "boost dispatcher [%u]", t->tid);
	m->named = c;
}

/*
 * The switch-function path shows no readies, so which context schedules the
 * others is read from the switches: a scheduler (gevent's hub, QEMU's main
 * loop, a fiber loop's main fiber) switches to one context after another,
 * while the contexts it runs switch back to it. Of a thread's contexts, the
 * one that most often switched to another context than the one it switched
 * to last is its scheduler, once it has done so at least once (two
 * contexts switching to each other have none). Boost.Fiber's fibers switch
 * to one another directly: there the dispatcher alone is the scheduler.
 */
static void note_scheduler(struct model *m, struct coro_thread *t, u32 pid, u64 from, u64 to)
{
	struct coro *c = model_find(m, pid, from);
	const struct coro_process *p = c ? c->proc : NULL;

	if (!p || !(p->switch_families & ~(1u << CORO_FAM_GO)) || boost_fiber_process(p))
		return;
	if (c->last_to && c->last_to != to)
		c->to_changes++;
	c->last_to = to;
	if (c->to_changes > t->sched_changes || (t->sched_id == c->id && t->sched_uid == c->uid)) {
		t->sched_id = c->id;
		t->sched_uid = c->uid;
		t->sched_changes = c->to_changes;
		c->scheduler = c->scheduler || c->to_changes;
	}
}

bool model_is_scheduler(const struct coro_thread *t, const struct coro *c)
{
	return c->fiber_dispatcher ||
	       (t && t->sched_changes && t->sched_id == c->id && t->sched_uid == c->uid);
}

const char *model_scheduler_role(const struct coro *c)
{
	u32 fam = c->proc ? c->proc->switch_families : 0;

	if (c->fiber_dispatcher)
		return "dispatcher";
	if (fam & (1u << CORO_FAM_GREENLET))
		return "hub";
	if (fam & (1u << CORO_FAM_PTH))
		return "scheduler";
	return "main loop";
}

static void apply_switch(struct model *m, const struct coro_ev_switch *e,
			 struct event *mi)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct coro_thread *t = model_thread(m, h->pid, h->tid);
	bool from_refused = false;
	struct coro *c;

	if (__builtin_expect(m->cxx_awaiter && *m->cxx_awaiter, 0))
		mi->sw.awaiter = str_field(*m->cxx_awaiter, CORO_STR_LEN);
	if (t->cur_known && e->from != t->cur) {
		/* The scheduler names another coroutine than the one running here. */
		m->anom.switch_from_mismatch++;
		thread_forget(m, t, h->ts);
	}
	if (e->from) {
		if (t->cur_known && t->cur_exited && t->cur == e->from) {
			/* Its exit probe came first; this is its last switch out. */
		} else {
			enum coro_state next;
			u32 reason = e->reason < CORO_NREASONS ? e->reason : CORO_R_UNKNOWN;

			c = model_find(m, h->pid, e->from);
			if (!c && reason == CORO_R_DONE) {
				/*
				 * Its last switch out, after an exit whose thread the model
				 * did not know (attached mid-life, or a hole): nothing new.
				 */
				goto switch_in;
			}
			if (reason == CORO_R_DONE)
				next = CS_SUSPENDED;
			else if (c && c->ready_pending)
				next = CS_RUNNABLE;
			else if (reason == CORO_R_YIELD)
				next = CS_RUNNABLE;
			else
				next = CS_SUSPENDED;
			if (!c && cap_reached(m, h->pid)) {
				/* Not followed: this side of the switch says nothing. */
				from_refused = true;
				m->over_cap_part = true;
				goto switch_in;
			}
			if (!c) {
				c = coro_new(m, h->pid, e->from, h->ts, next, false, h->tid, reason,
					     e->obj);
				c->park_stack = mi->stack;
				coro_add_tid(c, h->tid);
			} else {
				/* The stack of a switch is the one being left: where it parks. */
				c->park_stack = mi->stack;
				/* Before its new state begins: the observers' enter() sees it. */
				if (__builtin_expect(mi->sw.awaiter.len || c->awaiter, 0))
					coro_set_awaiter(c, &mi->sw.awaiter);
				set_state(m, c, next, h->ts, h->tid, reason, e->obj);
			}
			c->ready_pending = false;
			mi->c = c;
		}
	}
switch_in:
	if (e->to) {
		c = model_find(m, h->pid, e->to);
		if (c) {
			/* A new run: its samples start afresh. */
			c->nrun_samples = 0;
			c->run_samples_total = 0;
		}
		if (!c && cap_reached(m, h->pid)) {
			/* Not followed: the thread runs it, nothing else is said of it. */
			m->over_cap_part = true;
			if (!mi->c)
				m->over_cap = true; /* nothing of the switch was applied */
			goto switch_done;
		}
		if (!c) {
			c = coro_new(m, h->pid, e->to, h->ts, CS_RUNNING, false, h->tid, 0, 0);
		} else {
			if (c->state == CS_RUNNING && c->tid != h->tid) {
				/* Its switch out on the other thread is missing. */
				struct coro_thread *o = hmap_get(&m->threads, h->pid, c->tid);

				m->anom.running_elsewhere++;
				if (o && o->cur == e->to) {
					o->cur_known = false;
					o->cur_exited = false;
				}
			}
			set_state(m, c, CS_RUNNING, h->ts, h->tid, 0, 0);
		}
		c->switch_ins++;
		c->ready_pending = false;
		coro_add_tid(c, h->tid);
		mi->to = c;
		fiber_dispatcher(m, t, c);
	} else if (from_refused) {
		m->over_cap = true; /* to the scheduler, from one not followed */
	}
switch_done:
	t->cur = e->to;
	t->cur_known = true;
	t->cur_exited = false;
	if (e->from && e->to && e->from != e->to)
		note_scheduler(m, t, h->pid, e->from, e->to);
}

/* A timer sample of a thread running a coroutine: kept for the run's key frame. */
static void apply_sample(struct model *m, const struct coro_event_hdr *h,
			 struct event *mi)
{
	struct coro *c = h->cur ? model_find(m, h->pid, h->cur) : NULL;
	u32 stack = mi->stack;

	m->samples_nostack += !stack; /* the summary says these apart from events without one */
	if (!c || c->state != CS_RUNNING || c->tid != h->tid)
		return; /* the model's view of the thread says otherwise: not this run's */
	mi->c = c;
	c->run_samples_total++;
	if (!stack)
		return;
	if (c->nrun_samples == CORO_RUN_SAMPLES_MAX) {
		/*
		 * Full: keep a uniform sample of the whole run (reservoir). The
		 * generator is seeded per model, so a replay picks the same ones.
		 */
		u64 j;

		m->rng ^= m->rng << 13;
		m->rng ^= m->rng >> 7;
		m->rng ^= m->rng << 17;
		j = m->rng % c->run_samples_total;
		if (j < CORO_RUN_SAMPLES_MAX)
			c->run_samples[j] = stack;
		return;
	}
	if (c->nrun_samples == c->cap_run_samples) {
		c->cap_run_samples = c->cap_run_samples ? c->cap_run_samples * 2 : 16;
		c->run_samples = xrealloc(c->run_samples, c->cap_run_samples * sizeof(u32));
	}
	c->run_samples[c->nrun_samples++] = stack;
}

static void apply_exit(struct model *m, const struct coro_ev_exit *e, struct event *mi)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct coro *c = coro_get(m, h->pid, e->id, h->ts, CS_UNKNOWN);

	if (!c) {
		/* Its thread runs it no more than before: the exit ends what it was not told. */
		m->over_cap = true;
		return;
	}
	if (c->state == CS_RUNNING) {
		struct coro_thread *t = hmap_get(&m->threads, h->pid, c->tid);

		/* Exiting from inside: its thread still runs it until the switch out. */
		if (t && t->cur_known && t->cur == e->id)
			t->cur_exited = true;
	}
	c->status = e->status;
	mi->c = c;
	end_coroutine(m, c, CE_EXIT, h->ts);
}

static void apply_span(struct model *m, const struct coro_ev_span *e, struct event *mi)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct coro_thread *t = model_thread(m, h->pid, h->tid);
	struct coro *c = NULL;
	bool begin = h->kind == CORO_EV_SPAN_BEGIN;
	struct span_refused *refused;
	struct span_stack st;

	mi->span.owner_known = t->cur_known;
	mi->span.owner = t->cur_known && !t->cur_exited ? t->cur : 0;
	if (mi->span.owner) {
		c = model_find(m, h->pid, mi->span.owner);
		if (!c && cap_reached(m, h->pid)) {
			/* Its owner is not followed: no span of it is kept, no end matched. */
			m->over_cap = true;
			return;
		}
		if (!c)
			c = coro_new(m, h->pid, mi->span.owner, h->ts, CS_RUNNING, false, h->tid, 0,
				     0);
		mi->c = c;
		st = (struct span_stack){c, &c->spans, &c->nspans, &c->cap_spans,
					 &c->spans_indexed};
	} else {
		st = (struct span_stack){t, &t->spans, &t->nspans, &t->cap_spans,
					 &t->spans_indexed};
	}
	refused = hmap_get(&m->span_refused, (uintptr_t)st.owner, 0);
	if (begin) {
		struct span_time now;
		struct coro_process *p = model_proc_peek(m, h->pid);
		bool proc_full = p && m->max_spans_process && p->open_spans >= m->max_spans_process;
		bool all_full = m->max_spans && m->open_spans >= m->max_spans;

		if (refused || proc_full || all_full) {
			/*
			 * Not kept: the cap of its process (checked first), or of all; or
			 * inside refused spans of its owner, under the cap that refused them.
			 */
			if (proc_full || (!all_full && refused && refused->process))
				m->anom.spans_over_process_cap++;
			else
				m->anom.spans_over_cap++;
			refuse_span(m, st.owner, refused, e->name, proc_full);
			m->span_over_cap = true;
			mi->span.depth = *st.n;
			return;
		}
		if (c)
			coro_span_clock(c, h->ts, &now);
		span_push(&m->spans, &st, e->name, h->ts, c ? &now : NULL, mi->stack);
		m->open_spans++;
		if (p)
			p->open_spans++;
		mi->span.depth = *st.n;
	} else {
		struct span_time now;
		struct span_ender en = {.d = {.pid = h->pid, .tid = h->tid, .id = c ? c->id : 0,
					      .uid = c ? c->uid : 0, .end = h->ts},
					.now = c ? &now : NULL, .done = notify_span_done, .ctx = m};
		u32 before = *st.n;

		if (refused && end_refused(m, st.owner, refused, e->name)) {
			m->span_over_cap = true;
			mi->span.depth = *st.n;
			return;
		}
		if (c)
			coro_span_clock(c, h->ts, &now);
		mi->span.depth = *st.n;
		mi->span.matched = span_pop(&m->spans, &st, e->name, &en);
		spans_gone(m, h->pid, before - *st.n);
		if (mi->span.matched && refused) {
			/* A kept span closed: those refused inside it end with it. */
			refused_free(m, st.owner);
		} else if (!mi->span.matched) {
			m->anom.span_unmatched_end++;
			if (c)
				c->spans_unmatched_end++;
		}
	}
}

/* The coroutine running on the thread now, if the model is sure of it. */
static struct coro *running_on(struct model *m, struct coro_thread *t)
{
	struct coro *c;

	if (!t->cur_known || !t->cur || t->cur_exited)
		return NULL;
	c = model_find(m, t->pid, t->cur);
	return c && c->state == CS_RUNNING && c->tid == t->tid ? c : NULL;
}

static void apply_offcpu_begin(struct model *m, const struct coro_ev_offcpu_begin *e,
			       struct event *mi)
{
	struct coro_thread *t = model_thread(m, e->hdr.pid, e->hdr.tid);
	const struct coro_process *p = model_proc_peek(m, e->hdr.pid);

	t->off = true;
	t->off_ts = e->hdr.ts;
	t->off_state = e->state;
	t->off_stack = mi->stack;
	t->off_made_ready = p ? p->made_ready : 0;
	t->off_runnable = p ? p->runnable : 0;
	mi->c = running_on(m, t);
}

static void apply_offcpu_end(struct model *m, const struct coro_ev_offcpu_end *e,
			     struct event *mi)
{
	struct coro_thread *t = model_thread(m, e->hdr.pid, e->hdr.tid);
	struct coro *c = running_on(m, t);
	u64 dur = e->hdr.ts > e->start ? e->hdr.ts - e->start : 0;
	u64 runq = MIN(e->runq_ns, dur);

	t->off = false;
	if (e->hdr.flags & CORO_EVF_OFFCPU_LATE)
		m->anom.offcpu_late++;
	mi->c = c;
	if (!c)
		return;
	/* The coroutine "ran" all along; the kernel says how much of it was not on a CPU. */
	c->t_offcpu += dur;
	c->t_runq += runq;
	if (e->state == CORO_OFF_SLEEPING || e->state == CORO_OFF_DISK) {
		c->t_blocked += dur - runq;
		c->t_woken_runq += runq;
	}
}

static void apply_process(struct model *m, const struct coro_rec_process *r)
{
	struct coro_process *p = model_process(m, r->hdr.pid);

	p->mode = r->mode;
	memcpy(p->comm, r->comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = 0;
	free(p->exe);
	p->exe = xstrdup(r->exe);
	p->start_ts = r->hdr.ts;
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].process)
			m->obs[i].process(m->obs[i].ctx, p);
}

static int cmp_uid(const void *a, const void *b)
{
	const struct coro *x = *(struct coro *const *)a, *y = *(struct coro *const *)b;

	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/*
 * The end of a process's coroutines and threads, at ts: it exited, or
 * replaced its program (exec) and goes on as another.
 */
static void end_process(struct model *m, u32 pid, u64 ts, enum coro_end how)
{
	struct coro **doomed = NULL;
	size_t n = 0, cap = 0, it = 0;
	u64 k1, k2;
	void *v;

	while (hmap_next(&m->coros, &it, &k1, &k2, &v)) {
		if (k1 != pid)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			doomed = xrealloc(doomed, cap * sizeof(*doomed));
		}
		doomed[n++] = v;
	}
	/* Oldest first, so outputs list them in a stable order. */
	if (n > 1)
		qsort(doomed, n, sizeof(*doomed), cmp_uid);
	for (size_t i = 0; i < n; i++)
		end_coroutine(m, doomed[i], how, ts);
	free(doomed);
	/* Drop its threads: a reused pid starts clean. */
	{
		struct coro_thread **gone = NULL;

		n = cap = it = 0;
		while (hmap_next(&m->threads, &it, &k1, &k2, &v)) {
			if (k1 != pid)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				gone = xrealloc(gone, cap * sizeof(*gone));
			}
			gone[n++] = v;
		}
		m->last_thread = NULL;
		for (size_t i = 0; i < n; i++) {
			thread_spans_unclosed(m, gone[i], ts);
			hmap_del(&m->threads, gone[i]->pid, gone[i]->tid);
			span_forget(&m->spans, gone[i], gone[i]->spans, gone[i]->nspans,
				    &gone[i]->spans_indexed);
			spans_gone(m, gone[i]->pid, gone[i]->nspans);
			refused_free(m, gone[i]);
			free(gone[i]->spans);
			free(gone[i]);
		}
		free(gone);
	}
}

/*
 * A traced process ended: told by user space (its pidfd, proc_exit) or,
 * with -a and --follow, by the kernel (proc_gone); the wait status, or -1.
 */
static void process_ended(struct model *m, u32 pid, u64 ts, s32 status)
{
	struct coro_process *p = model_process(m, pid);

	p->exited = true;
	p->exit_status = status;
	p->exit_ts = ts;
	end_process(m, pid, ts, CE_PROCESS_EXIT);
}

static void apply_exec(struct model *m, const struct coro_ev_proc *e)
{
	struct coro_process *p = model_process(m, e->hdr.pid);

	end_process(m, e->hdr.pid, e->hdr.ts, CE_EXEC);
	memcpy(p->comm, e->comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = 0;
}

static void apply_switch_path(struct model *m, const struct coro_rec_switch *r)
{
	struct coro_process *p = model_process(m, r->hdr.pid);
	const char *path = r->text, *sites = path + strlen(path) + 1;
	const char *limits = sites + strlen(sites) + 1, *fam;
	size_t old = p->switch_desc ? strlen(p->switch_desc) : 0, add;
	char *line;

	fam = coro_family_name(r->family);
	p->switch_families |= 1u << (r->family & 31);
	p->switch_stepped += r->stepped;
	add = strlen(fam) + strlen(path) + strlen(sites) + strlen(limits) + 16;
	line = xmalloc(add);
	snprintf(line, add, "%s: %s: %s%s%s", fam, path, sites, limits[0] ? "; " : "", limits);
	p->switch_desc = xrealloc(p->switch_desc, old + strlen(line) + 2);
	if (old)
		p->switch_desc[old++] = '\n';
	strcpy(p->switch_desc + old, line);
	free(line);
}

/*
 * A name the model gave (a Boost.Fiber dispatcher's), announced to the
 * observers as a name event right after the record that showed it; it is
 * derived, not recorded, so no counter counts it.
 */
static void announce_name(struct model *m, const struct event *from)
{
	struct coro *c = m->named;
	struct event ev;

	m->named = NULL;
	memset(&ev, 0, sizeof(ev));
	ev.kind = EV_NAME;
	ev.pid = c->pid;
	ev.tid = from->tid;
	ev.ts = from->ts;
	ev.seq = from->seq;
	ev.per_thread = from->per_thread;
	ev.cur = c->id;
	ev.cur_known = true;
	ev.c = c;
	ev.thread = from->thread;
	ev.proc = c->proc;
	ev.name.id = c->id;
	ev.name.name.s = coro_name(c);
	ev.name.name.len = (u32)strlen(coro_name(c));
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].event)
			m->obs[i].event(m->obs[i].ctx, &ev);
}

void model_apply(struct model *m, const struct coro_event_hdr *h)
{
	struct event ev, *mi = &ev;
	struct coro_thread *t = NULL;
	bool known = event_decode(&ev, h);

	ev.seq = ++m->applied;
	m->applying = &ev;
	if (h->ts > m->last_ts)
		m->last_ts = h->ts;
	if (!m->first_ts || h->ts < m->first_ts)
		m->first_ts = h->ts;
	m->events_by_kind[h->kind]++;
	if (h->kind <= CORO_EV_BPF_MAX) {
		if (h->kind == CORO_EV_SAMPLE)
			m->samples++;
		else if (h->kind != CORO_EV_LIBLOAD && h->kind != CORO_EV_PROC_NEW &&
			 h->kind != CORO_EV_EXEC && h->kind != CORO_EV_PROC_GONE)
			m->events++;
		if (!model_proc_peek(m, h->pid))
			m->anom.unknown_pid++;
		ev.cur_known = cur_certain(m, h);
		/*
		 * Events with no per-thread state (ld.so's hook, process events) say
		 * nothing of threads. Nor does a stack sample, but for the hole it
		 * carries: it is taken on a timer, out of the probes' order. A sample
		 * 4 us after a switch out that named the coroutine switched out was
		 * seen here, as if it had interrupted the switch's program between its
		 * clock read and its update of the thread's coroutine; such a sample
		 * made the thread's coroutine unknown and counted a thread_desync.
		 */
		if (!(h->flags & CORO_EVF_NO_THREAD) && (h->kind != CORO_EV_SAMPLE || h->lost_before))
			t = thread_sync(m, h, ev.cur_known);
		/*
		 * A probe of its own says the thread is on a CPU: a stretch whose
		 * end was lost is over (the BPF side ends it late, when it can).
		 */
		if (t && t->off && h->ts > t->off_ts && h->kind != CORO_EV_OFFCPU_BEGIN &&
		    h->kind != CORO_EV_OFFCPU_END && h->kind != CORO_EV_SAMPLE)
			t->off = false;
	} else if (h->kind == CORO_REC_LOST && !(h->flags & CORO_EVF_NO_THREAD)) {
		/*
		 * A hole read back from JSONL before a record it has no line for: the
		 * thread's view changes as that record changed it. Its flag alone says
		 * whether cur is certain (a JSONL written before `lost` had an `id`
		 * does not know, even for a launched process).
		 */
		ev.cur_known = !(h->flags & CORO_EVF_CUR_UNKNOWN);
		ev.per_thread = true;
		t = thread_sync(m, h, ev.cur_known);
	} else {
		ev.cur_known = false;
	}
	switch (h->kind) {
	case CORO_EV_CREATE:
		apply_create(m, (const void *)h, mi);
		break;
	case CORO_EV_NAME:
		apply_name(m, (const void *)h, mi);
		break;
	case CORO_EV_READY:
		apply_ready(m, (const void *)h, mi);
		break;
	case CORO_EV_SWITCH:
		apply_switch(m, (const void *)h, mi);
		break;
	case CORO_EV_EXIT:
		apply_exit(m, (const void *)h, mi);
		break;
	case CORO_EV_SPAN_BEGIN:
	case CORO_EV_SPAN_END:
		apply_span(m, (const void *)h, mi);
		break;
	case CORO_EV_LIBLOAD:
		break;
	case CORO_EV_SAMPLE:
		apply_sample(m, h, mi);
		break;
	case CORO_EV_OFFCPU_BEGIN:
		apply_offcpu_begin(m, (const void *)h, mi);
		break;
	case CORO_EV_OFFCPU_END:
		apply_offcpu_end(m, (const void *)h, mi);
		break;
	case CORO_EV_PROC_NEW:
		break; /* announced by a process record just before it */
	case CORO_EV_EXEC:
		apply_exec(m, (const void *)h);
		break;
	case CORO_EV_PROC_GONE:
		process_ended(m, h->pid, h->ts, ((const struct coro_ev_proc *)h)->exit_code);
		break;
	case CORO_REC_PROCESS:
		apply_process(m, (const void *)h);
		break;
	case CORO_REC_THREAD: {
		const struct coro_rec_thread *r = (const void *)h;

		t = model_thread(m, h->pid, h->tid);
		memcpy(t->comm, r->comm, sizeof(t->comm));
		t->comm[sizeof(t->comm) - 1] = 0;
		break;
	}
	case CORO_REC_OBJECT:
		break;
	case CORO_REC_SWITCH:
		apply_switch_path(m, (const void *)h);
		break;
	case CORO_REC_PROC_EXIT:
		process_ended(m, h->pid, h->ts, ((const struct coro_rec_proc_exit *)h)->status);
		break;
	case CORO_REC_STATS:
		/* An older capture's record is shorter: its later counters are zero. */
		memset(&m->stats, 0, sizeof(m->stats));
		memcpy(&m->stats, h, MIN((size_t)h->size, sizeof(m->stats)));
		m->have_stats = true;
		break;
	case CORO_REC_END:
		m->end_reason = ((const struct coro_rec_end *)h)->reason;
		break;
	case CORO_REC_LOST:
		break; /* the thread's view changed above */
	default:
		known = false;
	}
	if (!known) {
		m->anom.unknown_records++;
		m->applying = NULL;
		return;
	}
	if (m->over_cap || m->over_cap_part)
		m->anom.events_over_cap++;
	ev.over_cap = m->over_cap || m->span_over_cap;
	m->over_cap = m->over_cap_part = m->span_over_cap = false;
	/* A process's end (or exec) freed its threads. */
	if (h->kind == CORO_EV_EXEC || h->kind == CORO_EV_PROC_GONE || h->kind == CORO_REC_PROC_EXIT)
		t = NULL;
	ev.thread = t;
	ev.proc = ev.c ? ev.c->proc : model_proc_peek(m, h->pid);
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].event)
			m->obs[i].event(m->obs[i].ctx, &ev);
	if (m->named)
		announce_name(m, &ev);
	m->applying = NULL;
	bury_flush();
}

void model_finish(struct model *m)
{
	struct coro **all;
	size_t n = 0, it = 0;
	void *v;

	if (m->finished)
		return;
	m->finished = true;
	all = xmalloc((m->coros.len + 1) * sizeof(*all));
	while (hmap_next(&m->coros, &it, NULL, NULL, &v))
		all[n++] = v;
	qsort(all, n, sizeof(*all), cmp_uid);
	for (size_t i = 0; i < n; i++)
		end_coroutine(m, all[i], CE_TRACE_END, m->last_ts);
	free(all);
	{
		/* Spans threads opened outside any coroutine, still open: unclosed. */
		struct coro_thread *t;

		it = 0;
		while ((t = (struct coro_thread *)model_next_thread(m, &it)))
			thread_spans_unclosed(m, t, m->last_ts);
	}
	span_stats_seal(&m->spans);
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].finish)
			m->obs[i].finish(m->obs[i].ctx, m);
	bury_flush();
}

void model_define(struct model *m, const struct coro_event_hdr *rec)
{
	if (!m->sym)
		m->sym = symbolizer_new();
	if (rec->kind == CORO_REC_MAP)
		symbolizer_map(m->sym, (const struct coro_rec_map *)rec);
	else if (rec->kind == CORO_REC_STACK)
		symbolizer_define(m->sym, (const struct coro_rec_stack *)rec);
}

const struct sym_stack *model_stack(const struct model *m, u32 id)
{
	return m->sym ? symbolizer_stack(m->sym, id) : NULL;
}

void model_free(struct model *m)
{
	symbolizer_free(m->sym);
	m->sym = NULL;
	size_t it = 0;
	void *v;

	while (hmap_next(&m->coros, &it, NULL, NULL, &v))
		coro_free(v);
	it = 0;
	while (hmap_next(&m->threads, &it, NULL, NULL, &v)) {
		struct coro_thread *t = v;

		free(t->spans);
		free(t);
	}
	it = 0;
	while (hmap_next(&m->procs, &it, NULL, NULL, &v)) {
		struct coro_process *p = v;

		free(p->exe);
		free(p->switch_desc);
		free(p);
	}
	it = 0;
	while (hmap_next(&m->span_refused, &it, NULL, NULL, &v)) {
		struct span_refused *r = v;

		free(r->hash);
		free(r);
	}
	hmap_free(&m->span_refused);
	hmap_free(&m->coros);
	hmap_free(&m->threads);
	hmap_free(&m->procs);
	span_table_free(&m->spans);
	free(m->obs);
	bury_flush();
	free(graveyard.v);
	graveyard.v = NULL;
	graveyard.cap = 0;
}
