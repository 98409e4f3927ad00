/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The short summary printed when a run or a replay ends: processes,
 * coroutines, events, losses, findings, the scheduler contexts idle in the
 * kernel, and the longest-suspended coroutines.
 */
#ifndef COROBPF_SUMMARY_H
#define COROBPF_SUMMARY_H

#include <stdio.h>
#include "finding.h"
#include "model.h"

#define SUMMARY_TOP 5

struct summary_entry {
	u64 id, uid, dur, obj, start;
	u32 pid, reason;
	bool open;
	char name[CORO_STR_LEN];
	char awaiter[CORO_STR_LEN]; /* open: a C++20 wait's awaiter type, "" if none */
};

#define SUMMARY_WORST 3

/*
 * Per switch-path process, what tells whether its family's view fits the
 * program (summary.c, misfit()); the first SUMMARY_MISFIT_PROCS such
 * processes are tallied.
 */
#define SUMMARY_MISFIT_PROCS 16

struct summary_misfit {
	u32 pid;
	u64 incarnations, switched_once, superseded, never_ran, switch_ins;
};

/*
 * A scheduler context (model_is_scheduler(): gevent's hub, QEMU's main
 * loop, Boost.Fiber's dispatcher...), whose waits in the kernel are its
 * scheduler idle: named for what it is, with its time waiting.
 */
#define SUMMARY_SCHEDULERS 8

struct summary_scheduler {
	u64 id, blocked;
	u32 pid, tid;
	const char *role;
	char name[CORO_STR_LEN];
};

struct summary {
	FILE *out;
	struct summary_scheduler sched[SUMMARY_SCHEDULERS];
	int nsched;
	u64 sched_more; /* past the first SUMMARY_SCHEDULERS */
	struct summary_entry top[SUMMARY_TOP];
	int ntop;
	u64 nfindings[FK_NKINDS];
	struct finding worst[FK_NKINDS][SUMMARY_WORST]; /* by duration (spawn storms: by count) */
	int nworst[FK_NKINDS];
	struct summary_misfit misfit[SUMMARY_MISFIT_PROCS];
	int nmisfit;
};

void summary_init(struct summary *s, FILE *out, struct model_observer *obs,
		  struct finding_sink *fs);

#endif
