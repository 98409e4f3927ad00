// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Where records go: several at once, and the watch of the newest time. See recsink.h. */
#include "recsink.h"

void record_sink_emit_many(const struct record_sink *s, const void *recs, size_t len,
			   u64 newest_ts)
{
	const u8 *p = recs, *end = p + len;

	if (s->emit_many) {
		s->emit_many(s->ctx, recs, len, newest_ts);
		return;
	}
	while (p < end) {
		const struct coro_event_hdr *h = (const void *)p;

		s->emit(s->ctx, h);
		p += h->size;
	}
}

static void watch_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct record_watch *w = ctx;

	if (rec->ts > w->newest_ts)
		w->newest_ts = rec->ts;
	record_sink_emit(w->outer, rec);
}

static void watch_emit_many(void *ctx, const void *recs, size_t len, u64 newest_ts)
{
	struct record_watch *w = ctx;

	if (newest_ts > w->newest_ts)
		w->newest_ts = newest_ts;
	record_sink_emit_many(w->outer, recs, len, newest_ts);
}

static int watch_flush(void *ctx)
{
	struct record_watch *w = ctx;

	return w->outer->flush ? w->outer->flush(w->outer->ctx) : 0;
}

static void watch_idle(void *ctx)
{
	struct record_watch *w = ctx;

	record_sink_idle(w->outer);
}

void record_watch_init(struct record_watch *w, const struct record_sink *outer)
{
	w->outer = outer;
	w->newest_ts = 0;
	w->sink = (struct record_sink){.emit = watch_emit, .flush = watch_flush, .idle = watch_idle,
				       .emit_many = watch_emit_many, .ctx = w};
}
