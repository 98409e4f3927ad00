/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * lifecycle.h: a coroutine's life in the model, for the model's own files
 * (model.c, apply.c): made, moved from state to state (each state's
 * interval closed, counted and told to the observers), ended, and freed
 * once the observers have seen the record that ended it; a process's end
 * ends its coroutines and threads. Observers see none of this but through
 * their callbacks (model.h). lifecycle.c also ends the input and the model
 * (model_finish(), model_free(): model.h).
 */
#ifndef COROBPF_LIFECYCLE_H
#define COROBPF_LIFECYCLE_H

#include "model.h"

/* A new incarnation of (pid, id), in state s since ts (created: its create was seen). */
struct coro *coro_new(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s,
		      bool created, u32 tid, u32 reason, u64 obj);
/*
 * Room to follow one more live coroutine of pid (model_limit()): NULL, or the
 * counter of the cap that is reached (the process's, checked first, or all's).
 */
u64 *cap_reached(struct model *m, u32 pid);
/*
 * A coroutine the stream talks about but never introduced: attached mid-life, in state s.
 * NULL when a cap leaves no room to follow it (the caller says so: m->over_cap).
 */
struct coro *coro_get(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s);
/* coro_get(), one first seen suspended (s CS_SUSPENDED) for reason on obj. */
struct coro *coro_get_suspended(struct model *m, u32 pid, u64 id, u64 ts, enum coro_state s,
				u32 reason, u64 obj);
/* Close the current state interval at ts and account for it. */
void close_interval(struct model *m, struct coro *c, u64 ts, bool open_at_end);
/* Its current state ends at ts, state s begins (on thread tid; suspended for reason on obj). */
void set_state(struct model *m, struct coro *c, enum coro_state s, u64 ts, u32 tid, u32 reason,
	       u64 obj);
/* A thread it ran on (its list, in first-run order). */
void coro_add_tid(struct coro *c, u32 tid);
/* The awaiter of its switch out (a C++20 wait), or none: copied only when it changes. */
void coro_set_awaiter(struct coro *c, const struct ev_str *a);
/* c's cumulative clocks at ts, its current state's part included (spans.h struct span_time). */
void coro_span_clock(const struct coro *c, u64 ts, struct span_time *k);
/* A span instance ended: to the observers (struct span_ender's done; ctx: the model). */
void notify_span_done(void *ctx, const struct span_done *d);
/*
 * Span begins the caps on open spans refused (model_limit_spans()), of one
 * owner (a coroutine or a thread): their names' hashes, innermost last, and
 * how many more were refused, inside those, than the model remembers. Once
 * an owner has one, every begin of it is refused until they have all ended,
 * so they are always inside its kept spans. Remembered: REFUSED_PER_SPAN
 * times the cap's number of hashes (8 bytes each, against 240 for a span
 * kept). apply.c refuses and ends them; they are freed with their owner.
 */
#define REFUSED_PER_SPAN 8
struct span_refused {
	u64 *hash;
	u32 n, cap;
	u64 unhashed;
	bool process; /* the first was refused for its process's cap (else for the cap of all) */
};

/* The refused begins of owner, forgotten (m->span_refused). */
void refused_free(struct model *m, const void *owner);
/* n of pid's kept spans closed or ended: the counts of open spans follow. */
void spans_gone(struct model *m, u32 pid, u32 n);
/* A thread's own open spans end unclosed at ts: its process or the trace ended. */
void thread_spans_unclosed(struct model *m, struct coro_thread *t, u64 ts);
/* c ends (how, at ts): its last interval, its open spans, the observers; buried until the flush. */
void end_coroutine(struct model *m, struct coro *c, enum coro_end how, u64 ts);
/*
 * The end of a process's coroutines and threads, at ts: it exited, or
 * replaced its program (exec) and goes on as another.
 */
void end_process(struct model *m, u32 pid, u64 ts, enum coro_end how);
/* A traced process ended (its wait status, or -1): its coroutines and threads with it. */
void process_ended(struct model *m, u32 pid, u64 ts, s32 status);
/* Free the coroutines ended while the last record was applied (the observers have seen it). */
void bury_flush(void);

#endif /* COROBPF_LIFECYCLE_H */
