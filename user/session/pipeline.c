// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "analyze.h"
#include "kinds.h"
#include "log.h"
#include "output.h"
#include "pipeline.h"

static void pipeline_model(void *ctx, const struct coro_event_hdr *rec)
{
	struct pipeline *p = ctx;

	model_apply(&p->model, rec);
}

static void pipeline_cxx(void *ctx, const struct coro_event_hdr *rec)
{
	struct pipeline *p = ctx;

	cxxmap_apply(&p->cxxmap, rec, pipeline_model, p);
}

static void pipeline_ctxmap(void *ctx, const struct coro_event_hdr *rec)
{
	struct pipeline *p = ctx;

	ctxmap_apply(&p->ctxmap, rec, pipeline_cxx, p);
}

static void pipeline_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct pipeline *p = ctx;

	gomodel_apply(&p->gomodel, rec, pipeline_ctxmap, p);
}

/* A finding of the detectors: to every output, in the order they were added. */
static void pipeline_finding(void *ctx, const struct finding *f)
{
	struct pipeline *p = ctx;

	for (u32 i = 0; i < p->nsinks; i++)
		p->sinks[i].finding(p->sinks[i].ctx, f);
}

void pipeline_init(struct pipeline *p, struct capture_info *ci, const struct analyze_opts *detect)
{
	memset(p, 0, sizeof(*p));
	p->ci = ci;
	ctxmap_init(&p->ctxmap);
	gomodel_init(&p->gomodel);
	cxxmap_init(&p->cxxmap);
	model_init(&p->model, ci);
	p->model.cxx_awaiter = &p->cxxmap.awaiter;
	reorder_init(&p->reorder, REORDER_WINDOW_NS, pipeline_emit, p);
	if (detect) {
		struct finding_sink to_outputs = {.ctx = p, .finding = pipeline_finding};
		struct model_observer obs;

		/* Before anything else can be added: the detectors are the first observer. */
		p->analyzer = analyzer_new(&p->model, detect, &to_outputs, &obs);
		model_add_observer(&p->model, &obs);
	}
}

int pipeline_add_observer(struct pipeline *p, const struct model_observer *obs,
			  const struct finding_sink *fs)
{
	int slot = model_add_observer(&p->model, obs);

	/* The model holds at most MODEL_MAX_OBSERVERS, so sinks[] has room for every one. */
	if (slot >= 0 && fs && fs->finding)
		p->sinks[p->nsinks++] = *fs;
	return slot;
}

int pipeline_add_output(struct pipeline *p, struct output *o, char *err, size_t errlen)
{
	struct model_observer obs;
	struct finding_sink fs;

	if (output_observe(o, &p->model, &obs, &fs, err, errlen))
		return -1;
	pipeline_add_observer(p, &obs, &fs);
	return 0;
}

void pipeline_begin(struct pipeline *p)
{
	model_begin(&p->model);
}

void pipeline_feed(struct pipeline *p, const struct coro_event_hdr *rec)
{
	p->fed++;
	/* Stack definitions are timeless, and come before their first use: no reordering. */
	if (record_kind(rec->kind)->flags & RK_DEFINITION) {
		model_define(&p->model, rec);
		return;
	}
	reorder_push(&p->reorder, rec);
}

void pipeline_finish(struct pipeline *p)
{
	reorder_drain(&p->reorder);
	p->model.anom.late_records = p->reorder.late;
	if (p->reorder.cut)
		log_verbose("reordering: %llu records left the window before %llu ms had passed, "
			    "to hold at most %llu MiB (a flood); %llu arrived late",
			    (unsigned long long)p->reorder.cut,
			    (unsigned long long)(p->reorder.window / 1000000),
			    (unsigned long long)(p->reorder.max_bytes >> 20),
			    (unsigned long long)p->reorder.late);
	model_finish(&p->model);
}

void pipeline_free(struct pipeline *p)
{
	reorder_free(&p->reorder);
	ctxmap_free(&p->ctxmap);
	gomodel_free(&p->gomodel);
	cxxmap_free(&p->cxxmap);
	model_free(&p->model);
	if (p->analyzer)
		analyzer_free(p->analyzer);
}
