// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The live capture's sink: the raw capture, then the pipeline. See recsink.h. */
#include <string.h>
#include "log.h"
#include "pipeline.h"
#include "raw.h"
#include "recsink.h"

static void tee_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct record_tee *tee = ctx;

	if (tee->raw)
		raw_writer_append(tee->raw, rec);
	pipeline_feed(tee->pipeline, rec);
}

static int tee_flush(void *ctx)
{
	struct record_tee *tee = ctx;
	int err;

	if (!tee->raw)
		return 0;
	err = raw_writer_flush(tee->raw);
	if (err < 0)
		log_err("cannot write the raw capture: %s", strerror(-err));
	return err < 0 ? err : 0;
}

struct record_sink record_tee_sink(struct record_tee *tee)
{
	return (struct record_sink){.emit = tee_emit, .flush = tee_flush, .ctx = tee};
}
