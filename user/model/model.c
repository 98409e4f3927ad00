// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The model's tables and its observers: lookups and iteration. What each
 * record does is apply.c's; a coroutine's life and the end of input,
 * lifecycle.c's. See model.h.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model.h"
#include "raw.h"

const char *coro_state_name(enum coro_state s)
{
	static const char *names[CS_NSTATES] = {
		[CS_NEW] = "new",	    [CS_RUNNABLE] = "runnable", [CS_RUNNING] = "running",
		[CS_SUSPENDED] = "suspended", [CS_UNKNOWN] = "unknown",	[CS_EXITED] = "exited",
	};
	return (unsigned)s < CS_NSTATES ? names[s] : "?";
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

/* Behind model_thread()'s one-entry cache (model.h). */
struct coro_thread *model_thread_lookup(struct model *m, u32 pid, u32 tid)
{
	struct coro_thread *t = hmap_get(&m->threads, pid, tid);

	if (!t) {
		t = xcalloc(1, sizeof(*t));
		t->pid = pid;
		t->tid = tid;
		hmap_put(&m->threads, pid, tid, t);
	}
	m->last_thread = t;
	return t;
}

/* Behind model_proc_peek()'s one-entry cache (model.h). */
struct coro_process *model_proc_lookup(struct model *m, u32 pid)
{
	struct coro_process *p = hmap_get(&m->procs, pid, 0);

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
