/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One pipeline for live runs and replays: records in (from the ring buffer
 * or a raw capture), reorder, context translation (ctxmap), model, observers (outputs and the summary).
 * Only the source differs, so a replay writes exactly what the live run
 * wrote.
 *
 * The pipeline owns the observers and their order. The detectors are the
 * model's first observer, added by pipeline_init() before any output can
 * be: they see each change of the model first, so their findings reach an
 * output before the output sees that change, while it still holds the
 * coroutine a finding is about. Findings come back to the pipeline, which
 * hands them to the outputs in the order the outputs were added.
 */
#ifndef COROBPF_PIPELINE_H
#define COROBPF_PIPELINE_H

#include "ctxmap.h"
#include "gomodel.h"
#include "cxxmap.h"
#include "finding.h"
#include "model.h"
#include "reorder.h"

struct analyze_opts;
struct analyzer;

struct pipeline {
	struct capture_info *ci;
	struct reorder reorder;
	struct ctxmap ctxmap; /* raw context facts of the switch-function path -> coroutines */
	struct gomodel gomodel; /* Go's goroutine status changes -> coroutines, before ctxmap */
	struct cxxmap cxxmap; /* raw C++20 coroutine facts -> coroutines, after ctxmap */
	struct model model;
	struct analyzer *analyzer; /* the model's first observer, or NULL */
	struct finding_sink sinks[MODEL_MAX_OBSERVERS]; /* the outputs' finding callbacks */
	u32 nsinks;
	u64 fed;
};

/* detect: the detectors' thresholds, or NULL for none (the model and the outputs alone). */
void pipeline_init(struct pipeline *p, struct capture_info *ci, const struct analyze_opts *detect);
/*
 * An output (or a view), after the detectors and the outputs added before
 * it; fs: where it takes findings, or NULL. Returns its slot in the model's
 * priv[] arrays, or -1 when there are too many.
 */
int pipeline_add_observer(struct pipeline *p, const struct model_observer *obs,
			  const struct finding_sink *fs);
/* An output (output.h) as the next observer: its model observer and its findings. 0 or -1, err. */
struct output;
int pipeline_add_output(struct pipeline *p, struct output *o, char *err, size_t errlen);
void pipeline_begin(struct pipeline *p);
void pipeline_feed(struct pipeline *p, const struct coro_event_hdr *rec);
void pipeline_finish(struct pipeline *p);
void pipeline_free(struct pipeline *p);

#endif
