/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * JSONL output (docs/jsonl.md): a header, one record per event and per
 * process/thread/object announcement, one summary per coroutine, a trailer.
 * Ids are strings ("0x1f") so that readers holding numbers as doubles keep
 * them exact.
 */
#ifndef COROBPF_JSONL_H
#define COROBPF_JSONL_H

#include "finding.h"
#include "jsonl_read.h" /* JSONL_SCHEMA_VERSION */
#include "model.h"

struct jsonl_sink;

/* `path` is the final output's path: summaries are spilled to a temporary file beside it. */
struct jsonl_sink *jsonl_sink_new(struct obuf *ob, const char *path, const struct model *m,
				  struct model_observer *obs, struct finding_sink *fs);
int jsonl_sink_error(struct jsonl_sink *s); /* 0 or -errno */

/* A finding as a JSON object: a "type":"finding" record line, or a bare object. */
void jsonl_write_finding(struct obuf *o, const struct finding *f, bool record);
void jsonl_sink_free(struct jsonl_sink *s);
/* ,"events_by_kind":{...}: the trailer's, and corobpf report --json's. */
void jsonl_put_events_by_kind(struct obuf *o, const struct model *m);

#endif
