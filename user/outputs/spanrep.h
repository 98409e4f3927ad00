/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The per-name span statistics as the summary and `corobpf report` show
 * them (the model keeps them: user/model/spans.h, struct span_stats): a
 * text table, names by total time, or a JSON array. Read in an observer's
 * finish(), after the model sealed them; nothing is printed for a trace
 * without spans.
 */
#ifndef COROBPF_SPANREP_H
#define COROBPF_SPANREP_H

#include <stdio.h>
#include "model.h"

struct obuf;

/* Names the summary's table shows; `corobpf report` adds the full table only beyond them. */
#define SPANREP_SUMMARY_NAMES 10

/* The table, at most `max` names (0: all), with a line for the rest. */
void spanrep_print(FILE *out, const struct model *m, const char *indent, size_t max);
/* How many span names the model holds. */
size_t spanrep_names(const struct model *m);
/*
 * `,"spans":[{name, count, total_ns, p50_ns, ...}, ...]`: the JSONL span_stats
 * fields; nothing without spans.
 */
void spanrep_json(struct obuf *o, const struct model *m);

#endif
