/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The analysis `corobpf report` prints: time per state by kind of coroutine
 * (names with their trailing numbers dropped, so req-17 counts as req), and
 * per process the histograms of scheduling latency (ready to running) and of
 * run slices (running to switched out). As text, or with --json as one JSON
 * document that also carries the summary and every finding.
 */
#ifndef COROBPF_REPORT_H
#define COROBPF_REPORT_H

#include <stdio.h>
#include "finding.h"
#include "model.h"

struct report_view;

struct report_view *report_view_new(FILE *out, bool json, struct model_observer *obs,
				    struct finding_sink *fs);
void report_view_free(struct report_view *r);

/* The kind of a coroutine name: without trailing digits and dashes ("" stays ""). */
void name_kind(char *dst, size_t len, const char *name);

#endif
