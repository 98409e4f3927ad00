/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One pipeline for live runs and replays: records in (from the ring buffer
 * or a raw capture), reorder, context translation (ctxmap), model, observers (outputs and the summary).
 * Only the source differs, so a replay writes exactly what the live run
 * wrote.
 */
#ifndef COROBPF_PIPELINE_H
#define COROBPF_PIPELINE_H

#include "ctxmap.h"
#include "model.h"
#include "reorder.h"

#define PIPELINE_REORDER_WINDOW_NS (10 * 1000 * 1000ULL)

struct pipeline {
	struct capture_info *ci;
	struct reorder reorder;
	struct ctxmap ctxmap; /* raw context facts of the switch-function path -> coroutines */
	struct model model;
	u64 fed;
};

void pipeline_init(struct pipeline *p, struct capture_info *ci);
int pipeline_add_observer(struct pipeline *p, const struct model_observer *obs); /* slot or -1 */
void pipeline_begin(struct pipeline *p);
void pipeline_feed(struct pipeline *p, const struct coro_event_hdr *rec);
void pipeline_finish(struct pipeline *p);
void pipeline_free(struct pipeline *p);

#endif
