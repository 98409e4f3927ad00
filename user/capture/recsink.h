/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * recsink.h: where a live capture's records go. The capture writes every
 * record, in order, into a sink handed to it, and knows nothing of what is
 * behind it. A record is the sink's only for the call: it copies what it
 * keeps.
 *
 * The sink of `corobpf trace` is a tee (struct record_tee): the raw capture
 * first (--raw, a copy of each record), then the pipeline. The stack
 * resolver (stacks.h) writes its records (mappings, stack definitions)
 * into the same sink, ahead of the record that refers to them: its
 * stack_emit_fn has the shape of emit for that reason.
 */
#ifndef COROBPF_RECSINK_H
#define COROBPF_RECSINK_H

#include "coro_abi.h"

struct pipeline;
struct raw_writer;

struct record_sink {
	void (*emit)(void *ctx, const struct coro_event_hdr *rec);
	/*
	 * Called about once a second: write out what is buffered. 0, or a
	 * negative errno (said already) after which the capture stops.
	 */
	int (*flush)(void *ctx);
	void *ctx;
};

static inline void record_sink_emit(const struct record_sink *s, const struct coro_event_hdr *rec)
{
	s->emit(s->ctx, rec);
}

/* The raw capture (NULL: none) and the pipeline, in that order. */
struct record_tee {
	struct raw_writer *raw;
	struct pipeline *pipeline;
};

/* A sink writing into tee (which must outlive it). */
struct record_sink record_tee_sink(struct record_tee *tee);

#endif /* COROBPF_RECSINK_H */
