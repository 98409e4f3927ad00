/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * recsink.h: where records go. A live capture writes every record, in
 * order, into a sink it is handed, and knows nothing of what is behind it
 * (for `corobpf trace`: the raw capture, then the pipeline, wired by the
 * session); the flight recorder keeps them on the way. A record is the
 * sink's only for the call: it copies what it keeps.
 *
 * The stack resolver (capture/stackres.h) writes its records (mappings,
 * stack definitions) into the same sink, ahead of the record that refers
 * to them: its stack_emit_fn has the shape of emit for that reason.
 */
#ifndef COROBPF_RECSINK_H
#define COROBPF_RECSINK_H

#include <stddef.h>
#include "coro_abi.h"
#include "util.h"

struct record_sink {
	void (*emit)(void *ctx, const struct coro_event_hdr *rec);
	/*
	 * Called about once a second: write out what is buffered. 0, or a
	 * negative errno (said already) after which the capture stops.
	 */
	int (*flush)(void *ctx);
	/*
	 * Or NULL. Called when the source has nothing more for now (the ring
	 * is empty): hand on what is held back for batching.
	 */
	void (*idle)(void *ctx);
	/*
	 * Or NULL. len bytes of records back to back, each whole (its size a
	 * multiple of 8), as emit would be given them one by one; the newest ts
	 * among them.
	 */
	void (*emit_many)(void *ctx, const void *recs, size_t len, u64 newest_ts);
	void *ctx;
};

static inline void record_sink_emit(const struct record_sink *s, const struct coro_event_hdr *rec)
{
	s->emit(s->ctx, rec);
}

/* Records back to back (emit_many): in one call where the sink takes them so. */
void record_sink_emit_many(const struct record_sink *s, const void *recs, size_t len,
			   u64 newest_ts);

/*
 * A sink in front of another that keeps the newest ts it was given (the
 * capture's: a target's exit record is not stamped older than
 * REORDER_LIVE_FLOOR_NS, 5 ms, before it). record_watch_init() points w->sink at it.
 */
struct record_watch {
	struct record_sink sink;
	const struct record_sink *outer;
	u64 newest_ts;
};

void record_watch_init(struct record_watch *w, const struct record_sink *outer);

static inline void record_sink_idle(const struct record_sink *s)
{
	if (s->idle)
		s->idle(s->ctx);
}

#endif /* COROBPF_RECSINK_H */
