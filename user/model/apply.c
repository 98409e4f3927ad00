// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What each record does to the model: the thread view brought in line with
 * the BPF side's, then the kind's own change, dispatched on the decoded
 * event through one table (appliers[]). See apply.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apply.h"
#include "kinds.h"
#include "lifecycle.h"

/* ---- the thread view ---- */

static bool cur_certain(struct model *m, const struct event *ev)
{
	struct coro_process *p;

	if (ev->no_thread || ev->cur_unsaid)
		return false;
	if (!ev->cur_unknown)
		return true;
	/* Launched under us: no switch yet really means the thread runs no coroutine. */
	p = model_proc_peek(m, ev->pid);
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
 * (certain: whether ev->cur is what runs there, cur_certain() of a BPF event).
 */
static struct coro_thread *thread_sync(struct model *m, const struct event *ev, bool certain)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);

	if (ev->lost_before) {
		m->anom.lost_events += ev->lost_before;
		/* The hole lies between the thread's last event and this one. */
		thread_forget(m, t, t->last_ts ? t->last_ts : ev->ts);
	}
	if (certain) {
		if (t->cur_known && t->cur != ev->cur) {
			m->anom.cur_desync++;
			thread_forget(m, t, ev->ts);
		}
		if (!t->cur_known) {
			t->cur = ev->cur;
			t->cur_exited = false;
			t->cur_known = true;
			/*
			 * After a hole the BPF side still knows what runs here now (it
			 * tracks switches it could not report): running from this event
			 * on is a fact; how it got here is not, and is left unknown.
			 */
			if (ev->lost_before && ev->cur) {
				struct coro *c = coro_get(m, ev->pid, ev->cur, ev->ts, CS_UNKNOWN);

				/* Not followed (a cap): the thread runs it, nothing more to say. */
				if (c && (c->state != CS_RUNNING || c->tid != ev->tid)) {
					if (c->state != CS_UNKNOWN)
						set_state(m, c, CS_UNKNOWN,
							  MAX(t->last_ts, c->state_since), 0, 0, 0);
					set_state(m, c, CS_RUNNING, ev->ts, ev->tid, 0, 0);
					coro_add_tid(c, ev->tid);
				}
			}
		}
	}
	t->last_ts = ev->ts;
	return t;
}

/* ---- what each kind of event does ---- */

static void apply_create(struct model *m, struct event *ev)
{
	struct coro *c = model_find(m, ev->pid, ev->create.id), *pc;

	if (c) {
		if (!c->created_seen && !c->switch_ins && !c->readies &&
		    (c->state == CS_UNKNOWN || c->state == CS_NEW)) {
			/*
			 * Named before it was announced: this create completes it. Nothing
			 * of its life has been counted yet, so its life starts here.
			 */
			c->created_seen = true;
			c->created_ts = ev->ts;
			c->uncertain = false;
			c->first_ts = ev->ts;
			c->t_state[CS_UNKNOWN] = 0;
			set_state(m, c, CS_NEW, ev->ts, 0, 0, 0);
			c->t_state[CS_UNKNOWN] = 0;
		} else {
			m->anom.recreate_live++;
			end_coroutine(m, c, CE_SUPERSEDED, ev->ts);
			c = NULL;
		}
	}
	if (!c) {
		u64 *cap = cap_reached(m, ev->pid);

		if (cap) {
			/* Not followed until there is room: then as one seen mid-life. */
			(*cap)++;
			m->over_cap = true;
			return;
		}
		c = coro_new(m, ev->pid, ev->create.id, ev->ts, CS_NEW, true, 0, 0, 0);
	}
	c->create_stack = ev->stack;
	c->parent = ev->create.parent;
	pc = ev->create.parent ? model_find(m, ev->pid, ev->create.parent) : NULL;
	c->parent_uid = pc ? pc->uid : 0;
	ev->c = c;
}

static void apply_name(struct model *m, struct event *ev)
{
	struct coro *c = coro_get(m, ev->pid, ev->name.id, ev->ts, CS_UNKNOWN);
	/* Decoded already: up to a NUL within the record, CORO_NAME_MAX - 1 bytes at most. */
	const struct ev_str *n = &ev->name.name;

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
	c->name_truncated = ev->str_truncated;
	ev->c = c;
}

static void apply_ready(struct model *m, struct event *ev)
{
	struct coro *c = coro_get(m, ev->pid, ev->ready.id, ev->ts, CS_UNKNOWN);

	if (!c) {
		m->over_cap = true;
		return;
	}
	ev->c = c;
	c->readies++;
	c->has_waker = ev->cur_known;
	c->waker = ev->cur;
	c->ready_ts = ev->ts;
	switch (c->state) {
	case CS_RUNNING:
		/* Woken before it switched out (a yield, or a wake racing its sleep). */
		c->ready_pending = true;
		break;
	case CS_RUNNABLE:
		break;
	default:
		set_state(m, c, CS_RUNNABLE, ev->ts, 0, 0, 0);
		c->proc->made_ready++;
	}
}

/*
 * A coroutine its scheduler listed for a tracer that attached
 * (usdt/corobpf.h, WHAT EXISTS WHEN A TRACER ATTACHES). What the probes
 * said of it since the attach is newer and kept (the list is given under
 * the scheduler's lock, in time order with its switches); its name and
 * parent only the list may know. One the model does not know yet is
 * followed from here as one seen mid-life, in the state listed: runnable,
 * or suspended for the reason on the object given. Running: on which
 * thread is not said, so its state stays unknown until it switches out.
 * How long it had waited before is not known: no finding rests on that
 * (analyze.c, since_attach()).
 */
static void apply_announce(struct model *m, struct event *ev)
{
	const struct ev_str *n = &ev->announce.name;
	u32 reason = ev->announce.reason;
	enum coro_state s = CS_UNKNOWN;
	const struct coro *pc;
	struct coro *c;

	if (reason == CORO_R_YIELD)
		s = CS_RUNNABLE;
	else if (reason == CORO_R_WAIT || reason == CORO_R_SLEEP || reason == CORO_R_IO)
		s = CS_SUSPENDED;
	c = coro_get_suspended(m, ev->pid, ev->announce.id, ev->ts, s, reason,
			       ev->announce.obj);

	if (!c) {
		m->over_cap = true;
		return;
	}
	ev->c = c;
	if (!c->announced) {
		c->announced = true;
		c->proc->announced++;
	}
	if (!c->name[0] && !c->name_long && n->len) {
		u32 len = MIN(n->len, CORO_STR_LEN - 1);

		memcpy(c->name, n->s, len);
		c->name[len] = 0;
		c->name_truncated = ev->str_truncated;
	}
	if (!c->parent && ev->announce.parent) {
		c->parent = ev->announce.parent;
		pc = model_find(m, ev->pid, c->parent);
		c->parent_uid = pc ? pc->uid : 0;
	}
	/* Known, but in no certain state (events of it lost): the list says which. */
	if (c->state == CS_UNKNOWN && s != CS_UNKNOWN)
		set_state(m, c, s, ev->ts, 0, reason, ev->announce.obj);
}

/* The end of a scheduler's list: counted for the summary. */
static void apply_announce_done(struct model *m, struct event *ev)
{
	struct coro_process *p = model_proc_peek(m, ev->pid);

	if (p)
		p->announce_lists++;
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

static void apply_switch(struct model *m, struct event *ev)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);
	bool from_refused = false;
	struct coro *c;

	if (__builtin_expect(m->cxx_awaiter && *m->cxx_awaiter, 0))
		ev->sw.awaiter = str_field(*m->cxx_awaiter, CORO_STR_LEN);
	if (t->cur_known && ev->sw.from != t->cur) {
		/* The scheduler names another coroutine than the one running here. */
		m->anom.switch_from_mismatch++;
		thread_forget(m, t, ev->ts);
	}
	if (ev->sw.from) {
		if (t->cur_known && t->cur_exited && t->cur == ev->sw.from) {
			/* Its exit probe came first; this is its last switch out. */
		} else {
			enum coro_state next;
			u32 reason = ev->sw.reason < CORO_NREASONS ? ev->sw.reason : CORO_R_UNKNOWN;

			c = model_find(m, ev->pid, ev->sw.from);
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
			if (!c && cap_reached(m, ev->pid)) {
				/* Not followed: this side of the switch says nothing. */
				from_refused = true;
				m->over_cap_part = true;
				goto switch_in;
			}
			if (!c) {
				c = coro_new(m, ev->pid, ev->sw.from, ev->ts, next, false, ev->tid, reason,
					     ev->sw.obj);
				c->park_stack = ev->stack;
				coro_add_tid(c, ev->tid);
			} else {
				/* The stack of a switch is the one being left: where it parks. */
				c->park_stack = ev->stack;
				/* Before its new state begins: the observers' enter() sees it. */
				if (__builtin_expect(ev->sw.awaiter.len || c->awaiter, 0))
					coro_set_awaiter(c, &ev->sw.awaiter);
				set_state(m, c, next, ev->ts, ev->tid, reason, ev->sw.obj);
			}
			c->ready_pending = false;
			ev->c = c;
		}
	}
switch_in:
	if (ev->sw.to) {
		c = model_find(m, ev->pid, ev->sw.to);
		if (c) {
			/* A new run: its samples start afresh. */
			c->nrun_samples = 0;
			c->run_samples_total = 0;
		}
		if (!c && cap_reached(m, ev->pid)) {
			/* Not followed: the thread runs it, nothing else is said of it. */
			m->over_cap_part = true;
			if (!ev->c)
				m->over_cap = true; /* nothing of the switch was applied */
			goto switch_done;
		}
		if (!c) {
			c = coro_new(m, ev->pid, ev->sw.to, ev->ts, CS_RUNNING, false, ev->tid, 0, 0);
		} else {
			if (c->state == CS_RUNNING && c->tid != ev->tid) {
				/* Its switch out on the other thread is missing. */
				struct coro_thread *o = hmap_get(&m->threads, ev->pid, c->tid);

				m->anom.running_elsewhere++;
				if (o && o->cur == ev->sw.to) {
					o->cur_known = false;
					o->cur_exited = false;
				}
			}
			set_state(m, c, CS_RUNNING, ev->ts, ev->tid, 0, 0);
		}
		c->switch_ins++;
		c->ready_pending = false;
		coro_add_tid(c, ev->tid);
		ev->to = c;
		fiber_dispatcher(m, t, c);
	} else if (from_refused) {
		m->over_cap = true; /* to the scheduler, from one not followed */
	}
switch_done:
	t->cur = ev->sw.to;
	t->cur_known = true;
	t->cur_exited = false;
	if (ev->sw.from && ev->sw.to && ev->sw.from != ev->sw.to)
		note_scheduler(m, t, ev->pid, ev->sw.from, ev->sw.to);
}

/* A timer sample of a thread running a coroutine: kept for the run's key frame. */
static void apply_sample(struct model *m, struct event *ev)
{
	struct coro *c = ev->cur ? model_find(m, ev->pid, ev->cur) : NULL;
	u32 stack = ev->stack;

	m->samples_nostack += !stack; /* the summary says these apart from events without one */
	if (!c || c->state != CS_RUNNING || c->tid != ev->tid)
		return; /* the model's view of the thread says otherwise: not this run's */
	ev->c = c;
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

static void apply_exit(struct model *m, struct event *ev)
{
	struct coro *c = coro_get(m, ev->pid, ev->exit.id, ev->ts, CS_UNKNOWN);

	if (!c) {
		/* Its thread runs it no more than before: the exit ends what it was not told. */
		m->over_cap = true;
		return;
	}
	if (c->state == CS_RUNNING) {
		struct coro_thread *t = hmap_get(&m->threads, ev->pid, c->tid);

		/* Exiting from inside: its thread still runs it until the switch out. */
		if (t && t->cur_known && t->cur == ev->exit.id)
			t->cur_exited = true;
	}
	c->status = ev->exit.status;
	ev->c = c;
	end_coroutine(m, c, CE_EXIT, ev->ts);
}

/* A begin refused by the caps: remembered by its name's hash, while the cap of all allows. */
static void refuse_span(struct model *m, const void *owner, struct span_refused *r,
			const char *name, bool process)
{
	u64 room = REFUSED_PER_SPAN * (m->max_spans ? m->max_spans : m->max_spans_process);

	if (!r) {
		r = xcalloc(1, sizeof(*r));
		r->process = process;
		hmap_put(&m->span_refused, (uintptr_t)owner, 0, r);
	}
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

/*
 * A span_end that closed nothing, in a process taken on running: its begin may
 * be older than the trace, no bug, if its owner may have begun a span before
 * the trace was whole (docs/jsonl.md, span_begun_before_trace). A thread did
 * (its start is not known); a coroutine did unless created after that.
 */
static bool begun_before(struct model *m, u32 pid, const struct coro *c)
{
	const struct coro_process *p = model_proc_peek(m, pid);

	if (!p || p->mode != CORO_PROC_ATTACHED)
		return false;
	return !c || !c->created_seen || c->created_ts < p->traced_from;
}

static void apply_span(struct model *m, struct event *ev)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);
	struct coro *c = NULL;
	bool begin = ev->kind == EV_SPAN_BEGIN;
	struct span_refused *refused;
	struct span_stack st;

	ev->span.owner_known = t->cur_known;
	ev->span.owner = t->cur_known && !t->cur_exited ? t->cur : 0;
	if (ev->span.owner) {
		c = model_find(m, ev->pid, ev->span.owner);
		if (!c && cap_reached(m, ev->pid)) {
			/* Its owner is not followed: no span of it is kept, no end matched. */
			m->over_cap = true;
			return;
		}
		if (!c)
			c = coro_new(m, ev->pid, ev->span.owner, ev->ts, CS_RUNNING, false, ev->tid, 0,
				     0);
		ev->c = c;
		st = (struct span_stack){c, &c->spans, &c->nspans, &c->cap_spans,
					 &c->spans_indexed};
	} else {
		st = (struct span_stack){t, &t->spans, &t->nspans, &t->cap_spans,
					 &t->spans_indexed};
	}
	refused = hmap_get(&m->span_refused, (uintptr_t)st.owner, 0);
	if (begin) {
		struct span_time now;
		struct coro_process *p = model_proc_peek(m, ev->pid);
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
			refuse_span(m, st.owner, refused, ev->span.name.s, proc_full);
			m->span_over_cap = true;
			ev->span.depth = *st.n;
			return;
		}
		if (c)
			coro_span_clock(c, ev->ts, &now);
		span_push(&m->spans, &st, ev->span.name.s, ev->ts, c ? &now : NULL, ev->stack);
		m->open_spans++;
		if (p)
			p->open_spans++;
		ev->span.depth = *st.n;
	} else {
		struct span_time now;
		struct span_ender en = {.d = {.pid = ev->pid, .tid = ev->tid, .id = c ? c->id : 0,
					      .uid = c ? c->uid : 0, .end = ev->ts},
					.now = c ? &now : NULL, .done = notify_span_done, .ctx = m};
		u32 before = *st.n;

		if (refused && end_refused(m, st.owner, refused, ev->span.name.s)) {
			m->span_over_cap = true;
			ev->span.depth = *st.n;
			return;
		}
		if (c)
			coro_span_clock(c, ev->ts, &now);
		ev->span.depth = *st.n;
		ev->span.matched = span_pop(&m->spans, &st, ev->span.name.s, &en);
		spans_gone(m, ev->pid, before - *st.n);
		if (ev->span.matched && refused) {
			/* A kept span closed: those refused inside it end with it. */
			refused_free(m, st.owner);
		} else if (!ev->span.matched && begun_before(m, ev->pid, c)) {
			ev->span.before_trace = true;
			m->anom.span_begun_before_trace++;
		} else if (!ev->span.matched) {
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

static void apply_offcpu_begin(struct model *m, struct event *ev)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);
	const struct coro_process *p = model_proc_peek(m, ev->pid);

	t->off = true;
	t->off_ts = ev->ts;
	t->off_state = ev->offcpu.state;
	t->off_stack = ev->stack;
	t->off_made_ready = p ? p->made_ready : 0;
	t->off_runnable = p ? p->runnable : 0;
	ev->c = running_on(m, t);
	t->off_coro_id = ev->c ? ev->c->id : 0;
	t->off_coro_uid = ev->c ? ev->c->uid : 0;
	t->off_back_ts = 0;
}

static void apply_offcpu_end(struct model *m, struct event *ev)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);
	struct coro *c = running_on(m, t);
	u64 dur, runq;

	/* ev->c stays the coroutine running now: the line's "id", read back as the thread's. */
	ev->c = c;
	if (ev->offcpu.late && t->off_back_ts > ev->offcpu.start && t->off_back_ts < ev->ts) {
		/*
		 * The thread made records of its own on the CPU before the BPF side could end
		 * the stretch (a batched copy's, written before it): the stretch was over by the
		 * first of them, and it was the time of the coroutine that left the CPU, not of
		 * the one running now (which would be off the CPU longer than it ran).
		 */
		ev->offcpu.end = t->off_back_ts;
		c = t->off_coro_uid ? model_find(m, t->pid, t->off_coro_id) : NULL;
		if (c && c->uid != t->off_coro_uid)
			c = NULL;
	}
	dur = ev->offcpu.end > ev->offcpu.start ? ev->offcpu.end - ev->offcpu.start : 0;
	runq = MIN(ev->offcpu.runq_ns, dur);
	t->off = false;
	t->off_back_ts = 0;
	if (ev->offcpu.late)
		m->anom.offcpu_late++;
	ev->offcpu.owner = c;
	if (!c)
		return;
	/* The coroutine "ran" all along; the kernel says how much of it was not on a CPU. */
	c->t_offcpu += dur;
	c->t_runq += runq;
	if (ev->offcpu.state == CORO_OFF_SLEEPING || ev->offcpu.state == CORO_OFF_DISK) {
		c->t_blocked += dur - runq;
		c->t_woken_runq += runq;
	}
}

static void apply_process(struct model *m, struct event *ev)
{
	struct coro_process *p = model_process(m, ev->pid);

	p->mode = ev->process.mode;
	/* The record's field, whole (event.h). */
	memcpy(p->comm, ev->process.comm.s, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = 0;
	free(p->exe);
	p->exe = xstrdup(ev->process.exe.s);
	p->start_ts = ev->ts;
	p->traced_from = ev->process.traced_from;
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].process)
			m->obs[i].process(m->obs[i].ctx, p);
}

static void apply_thread(struct model *m, struct event *ev)
{
	struct coro_thread *t = model_thread(m, ev->pid, ev->tid);

	memcpy(t->comm, ev->comm.comm.s, sizeof(t->comm));
	t->comm[sizeof(t->comm) - 1] = 0;
	ev->thread = t;
}

static void apply_exec(struct model *m, struct event *ev)
{
	struct coro_process *p = model_process(m, ev->pid);

	end_process(m, ev->pid, ev->ts, CE_EXEC);
	memcpy(p->comm, ev->comm.comm.s, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = 0;
	ev->thread = NULL; /* freed with its process's */
}

/*
 * A traced process ended: told by user space (its pidfd, proc_exit) or,
 * with -a and --follow, by the kernel (proc_gone); the wait status, or -1.
 */
static void apply_process_end(struct model *m, struct event *ev)
{
	process_ended(m, ev->pid, ev->ts, ev->proc_exit.status);
	ev->thread = NULL; /* freed with its process's */
}

static void apply_switch_path(struct model *m, struct event *ev)
{
	struct coro_process *p = model_process(m, ev->pid);
	const char *path = ev->switch_path.path.s, *sites = ev->switch_path.sites.s;
	const char *limits = ev->switch_path.limits.s, *fam;
	size_t old = p->switch_desc ? strlen(p->switch_desc) : 0, add;
	char *line;

	fam = coro_family_name(ev->switch_path.family);
	p->switch_families |= 1u << (ev->switch_path.family & 31);
	p->switch_stepped += ev->switch_path.stepped;
	add = strlen(fam) + strlen(path) + strlen(sites) + strlen(limits) + 16;
	line = xmalloc(add);
	snprintf(line, add, "%s: %s: %s%s%s", fam, path, sites, limits[0] ? "; " : "", limits);
	p->switch_desc = xrealloc(p->switch_desc, old + strlen(line) + 2);
	if (old)
		p->switch_desc[old++] = '\n';
	strcpy(p->switch_desc + old, line);
	free(line);
}

static void apply_stats(struct model *m, struct event *ev)
{
	memcpy(m->stats.bpf, ev->stats.bpf, sizeof(m->stats.bpf));
	memset(m->stats.user, 0, sizeof(m->stats.user));
	memcpy(m->stats.user, ev->stats.user, ev->stats.nuser * sizeof(m->stats.user[0]));
	m->have_stats = true;
}

static void apply_end(struct model *m, struct event *ev)
{
	m->end_reason = ev->end.reason;
}

/*
 * Nothing to do but what every record does (the counts, the thread view):
 * a loader's notice, a process's admission (its process record came just
 * before), an object attached, a hole read back from JSONL.
 */
static void apply_nothing(struct model *m, struct event *ev)
{
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

/*
 * What each kind does to the model, by decoded kind (record/event.h). A
 * kind the record table decodes (record/kinds.c) has its row here; a kind
 * without one is counted as unknown (m->anom.unknown_records).
 */
static void (*const appliers[256])(struct model *m, struct event *ev) = {
	[EV_CREATE] = apply_create,
	[EV_NAME] = apply_name,
	[EV_READY] = apply_ready,
	[EV_SWITCH] = apply_switch,
	[EV_EXIT] = apply_exit,
	[EV_SPAN_BEGIN] = apply_span,
	[EV_SPAN_END] = apply_span,
	[EV_LIBLOAD] = apply_nothing,
	[EV_OFFCPU_BEGIN] = apply_offcpu_begin,
	[EV_OFFCPU_END] = apply_offcpu_end,
	[EV_PROC_NEW] = apply_nothing, /* announced by a process record just before it */
	[EV_EXEC] = apply_exec,
	[EV_PROC_GONE] = apply_process_end,
	[EV_SAMPLE] = apply_sample,
	[EV_ANNOUNCE] = apply_announce,
	[EV_ANNOUNCE_DONE] = apply_announce_done,
	[EV_PROCESS] = apply_process,
	[EV_THREAD] = apply_thread,
	[EV_OBJECT] = apply_nothing,
	[EV_PROC_EXIT] = apply_process_end,
	[EV_STATS] = apply_stats,
	[EV_END] = apply_end,
	[EV_SWITCH_PATH] = apply_switch_path,
	[EV_LOST] = apply_nothing, /* the thread's view changed before (model_apply) */
};

bool model_applies(enum event_kind kind)
{
	return appliers[kind & 0xff] != NULL;
}

void model_apply(struct model *m, const struct coro_event_hdr *h)
{
	struct event ev;
	struct coro_thread *t = NULL;
	bool known = event_decode(&ev, h);
	void (*apply)(struct model *m, struct event *ev);

	ev.seq = ++m->applied;
	m->applying = &ev;
	if (ev.ts > m->last_ts)
		m->last_ts = ev.ts;
	if (!m->first_ts || ev.ts < m->first_ts)
		m->first_ts = ev.ts;
	m->events_by_kind[ev.kind]++;
	if (ev.kind <= EV_BPF_MAX) {
		if (ev.kind == EV_SAMPLE)
			m->samples++;
		else if (!(record_kind(ev.kind)->flags & RK_NOTICE))
			m->events++;
		if (!model_proc_peek(m, ev.pid))
			m->anom.unknown_pid++;
		ev.cur_known = cur_certain(m, &ev);
		/*
		 * Events with no per-thread state (ld.so's hook, process events) say
		 * nothing of threads. Nor does a stack sample, but for the hole it
		 * carries: it is taken on a timer, out of the probes' order. A sample
		 * 4 us after a switch out that named the coroutine switched out was
		 * seen here, as if it had interrupted the switch's program between its
		 * clock read and its update of the thread's coroutine; such a sample
		 * made the thread's coroutine unknown and counted a thread_desync.
		 */
		if (!ev.no_thread && (ev.kind != EV_SAMPLE || ev.lost_before))
			t = thread_sync(m, &ev, ev.cur_known);
		/*
		 * A probe of its own says the thread is on a CPU: a stretch whose
		 * end was lost is over (the BPF side ends it late, when it can).
		 */
		if (t && t->off && ev.ts > t->off_ts && ev.kind != EV_OFFCPU_BEGIN &&
		    ev.kind != EV_OFFCPU_END && ev.kind != EV_SAMPLE) {
			t->off = false;
			t->off_back_ts = ev.ts;
		}
	} else if (ev.kind == EV_LOST && !ev.no_thread) {
		/*
		 * A hole read back from JSONL before a record it has no line for: the
		 * thread's view changes as that record changed it. Its flag alone says
		 * whether cur is certain (a JSONL written before `lost` had an `id`
		 * does not know, even for a launched process).
		 */
		ev.cur_known = !ev.cur_unknown;
		ev.per_thread = true;
		t = thread_sync(m, &ev, ev.cur_known);
	} else {
		ev.cur_known = false;
	}
	apply = known ? appliers[ev.kind] : NULL;
	if (!apply) {
		m->anom.unknown_records++;
		m->applying = NULL;
		return;
	}
	ev.thread = t; /* a thread record's, or none once its process ended: the apply says */
	apply(m, &ev);
	if (m->over_cap || m->over_cap_part)
		m->anom.events_over_cap++;
	ev.over_cap = m->over_cap || m->span_over_cap;
	m->over_cap = m->over_cap_part = m->span_over_cap = false;
	ev.proc = ev.c ? ev.c->proc : model_proc_peek(m, ev.pid);
	for (size_t i = 0; i < m->nobs; i++)
		if (m->obs[i].event)
			m->obs[i].event(m->obs[i].ctx, &ev);
	if (m->named)
		announce_name(m, &ev);
	m->applying = NULL;
	bury_flush();
}
