// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A coroutine's life in the model: its states, its end, its process's end,
 * the end of input (model_finish()) and of the model (model_free()). See
 * lifecycle.h.
 */
#include <stdlib.h>
#include <string.h>
#include "lifecycle.h"

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
void close_interval(struct model *m, struct coro *c, u64 ts, bool open_at_end)
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

void set_state(struct model *m, struct coro *c, enum coro_state s, u64 ts, u32 tid,
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
void coro_add_tid(struct coro *c, u32 tid)
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

struct coro *coro_new(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s,
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
void coro_set_awaiter(struct coro *c, const struct ev_str *a)
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

void bury_flush(void)
{
	for (size_t i = 0; i < graveyard.len; i++)
		coro_free(graveyard.v[i]);
	graveyard.len = 0;
}

static void bury_free(void)
{
	bury_flush();
	free(graveyard.v);
	graveyard.v = NULL;
	graveyard.cap = 0;
}

/* c's cumulative clocks at ts, its current state's part included (spans.h struct span_time). */
void coro_span_clock(const struct coro *c, u64 ts, struct span_time *k)
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

void notify_span_done(void *ctx, const struct span_done *d)
{
	struct model *m = ctx;

	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].span_done)
			m->obs[i].span_done(m->obs[i].ctx, d);
}

/* A thread's own open spans end unclosed at ts: its process or the trace ended. */
void thread_spans_unclosed(struct model *m, struct coro_thread *t, u64 ts)
{
	struct span_ender e = {.d = {.pid = t->pid, .tid = t->tid, .end = ts},
			       .done = notify_span_done, .ctx = m};

	if (t->nspans)
		span_end_open(&m->spans, t->spans, t->nspans, &e);
}

/*
 * Span begins the caps on open spans refused: what apply.c's span function
 * remembers of an owner's (struct span_refused) is freed with the owner.
 */
void refused_free(struct model *m, const void *owner)
{
	struct span_refused *r = hmap_del(&m->span_refused, (uintptr_t)owner, 0);

	if (!r)
		return;
	m->refused_hashes -= r->n;
	free(r->hash);
	free(r);
}

/* An owner's kept spans closed or ended: the counts of open spans follow. */
void spans_gone(struct model *m, u32 pid, u32 n)
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

void end_coroutine(struct model *m, struct coro *c, enum coro_end how, u64 ts)
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

u64 *cap_reached(struct model *m, u32 pid)
{
	const struct coro_process *p;

	if (m->max_live_process && (p = model_proc_peek(m, pid)) && p->live >= m->max_live_process)
		return &m->anom.over_process_cap;
	if (m->max_live && m->live >= m->max_live)
		return &m->anom.over_cap;
	return NULL;
}

struct coro *coro_get(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s)
{
	return coro_get_suspended(m, pid, id, ts, s, 0, 0);
}

struct coro *coro_get_suspended(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s,
				u32 reason, u64 obj)
{
	struct coro *c = model_find(m, pid, id);

	if (c)
		return c;
	return cap_reached(m, pid) ? NULL : coro_new(m, pid, id, ts, s, false, 0, reason, obj);
}

/* Oldest first: the order in which outputs list them. */
static int coro_cmp_uid(const void *a, const void *b)
{
	const struct coro *x = *(struct coro *const *)a, *y = *(struct coro *const *)b;

	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/*
 * The end of a process's coroutines and threads, at ts: it exited, or
 * replaced its program (exec) and goes on as another.
 */
void end_process(struct model *m, u32 pid, u64 ts, enum coro_end how)
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
		qsort(doomed, n, sizeof(*doomed), coro_cmp_uid);
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
void process_ended(struct model *m, u32 pid, u64 ts, s32 status)
{
	struct coro_process *p = model_process(m, pid);

	p->exited = true;
	p->exit_status = status;
	p->exit_ts = ts;
	end_process(m, pid, ts, CE_PROCESS_EXIT);
}

/* ---- the end of input, and of the model ---- */

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
	qsort(all, n, sizeof(*all), coro_cmp_uid);
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
	bury_free();
}
