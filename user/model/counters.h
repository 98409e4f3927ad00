/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The counters of what a capture lost and what the model had to tolerate,
 * in one table (counters.c). Every output reports them by looping over it:
 * the JSONL trailer's "lost" and "anomalies" objects (and the JSONL reader,
 * which reads the capture's counters back), the SQLite meta table, the
 * Perfetto capture summary, the text summary and `corobpf report --json`.
 * A new counter is one entry there, plus the code that increments it.
 *
 * The table's order is the order of every output, and JSONL readers see
 * the keys in it: a new counter goes at the end of its group. Counters no
 * output reports (CORO_STAT_WAKEUPS, CORO_USTAT_RECORDS) are not in it.
 */
#ifndef COROBPF_COUNTERS_H
#define COROBPF_COUNTERS_H

#include <stdio.h>
#include "model.h"

enum counter_group {
	CG_LOST,      /* what the capture missed: the trailer's "lost" */
	CG_ANOMALIES, /* what the model had to tolerate: the trailer's "anomalies" */
	CG_NGROUPS
};

/* Where a counter's value is. */
enum counter_src {
	CSRC_BPF,  /* m->stats.bpf[index] (enum coro_stat), carried in the stats record */
	CSRC_USER, /* m->stats.user[index] (enum coro_user_stat), carried in the stats record */
	CSRC_ANOM, /* the u64 at byte offset index of m->anom, counted by the model as it goes */
	CSRC_FN,   /* get(m): worked out from others, never stored */
};

/* --stacks: in the Perfetto capture summary only when stacks were taken or lost. */
#define CF_STACKS (1U << 0)
/* The text summary says it after the rest of its group: a possible loss after certain ones. */
#define CF_SAY_LAST (1U << 1)
/*
 * The JSONL reader leaves it at zero: a JSONL file carries no stack
 * definitions, so a replay of one reports neither stacks nor their losses.
 */
#define CF_NOT_READ_BACK (1U << 2)
/* A headline figure: also in `corobpf report --json`, under its SQL name. */
#define CF_HEADLINE (1U << 3)
/*
 * In the "lost" group of every output, but nothing this session lost (records of before it,
 * left out): `top`'s total of losses leaves it out.
 */
#define CF_NOT_A_LOSS (1U << 4)

struct counter {
	enum counter_group group;
	enum counter_src src;
	u32 index;
	u32 flags; /* CF_* */
	u64 (*get)(const struct model *m); /* CSRC_FN */
	const char *json;     /* key in its group's object of the JSONL trailer */
	const char *sql;      /* key in the SQLite meta table; NULL: not there */
	const char *perfetto; /* argument of the Perfetto capture summary; NULL: not there */
	/*
	 * The text summary's line, after the number, when the counter is not
	 * zero; NULL: none. say() instead writes a line that combines several
	 * counters, under its own condition.
	 */
	const char *text;
	void (*say)(FILE *out, const struct model *m);
};

/* The table's size at most (counters.c checks): outputs size their arrays with it. */
#define COUNTERS_MAX 40

extern const struct counter counters[];
extern const size_t ncounters;
/* The JSONL trailer's name of each group's object. */
extern const char *const counter_group_json[CG_NGROUPS];

#define for_each_counter(c) for (const struct counter *c = counters; c < counters + ncounters; c++)

u64 counter_value(const struct counter *c, const struct model *m);
/*
 * Where a stats record's counters (bpf: CORO_STAT_MAX of them, user:
 * CORO_USTAT_MAX) carry the counter (CSRC_BPF, CSRC_USER), or NULL.
 */
u64 *counter_stat(const struct counter *c, u64 *bpf, u64 *user);
/* --stacks: events kept without their stack (lost in the kernel, or not resolved). */
bool counters_stacks_missing(const struct model *m);

#endif
