/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Findings: the bugs of coroutine schedulers, found from the model. The
 * analyzer is a model observer; each finding it makes goes back through the
 * model to every output (model_emit_finding), so the summary, JSONL,
 * Perfetto and SQLite all report the same findings.
 *
 *   lost_wakeup    suspended on something (wait, io, unknown reason) and never
 *                  made ready again before the trace or its process ended, for
 *                  at least --stall; or made ready and never run again
 *   stall          suspended at least --stall, then resumed
 *   long_run       ran at least --long-run without switching out (time its
 *                  thread was blocked in the kernel meanwhile not counted:
 *                  that is a blocking finding)
 *   sched_latency  waited runnable at least --sched-latency before running
 *   leak           alive at the end, not running, not runnable, and nothing
 *                  recorded could wake it (never started, or suspended with no
 *                  wait object), for at least --stall
 *   unmatched_span a span still open when its coroutine ended (or the trace
 *                  did), or a span end without an open span of that name
 *   spawn_storm    one parent created more than --spawn-storm coroutines within
 *                  one second
 *   blocking       while a coroutine ran, its thread was off the CPU blocked in
 *                  the kernel (sleeping or in disk wait, run queue time not
 *                  counted) at least --blocking (needs the scheduling view)
 *
 * A threshold is met at equality: a 1 s suspension is a stall at --stall 1.
 */
#ifndef COROBPF_ANALYZE_H
#define COROBPF_ANALYZE_H

#include "model.h"

enum finding_kind {
	FK_LOST_WAKEUP,
	FK_STALL,
	FK_LONG_RUN,
	FK_SCHED_LATENCY,
	FK_LEAK,
	FK_UNMATCHED_SPAN,
	FK_SPAWN_STORM,
	FK_BLOCKING,
	FK_NKINDS
};

#define FINDING_CHAIN 8

struct finding {
	enum finding_kind kind;
	u32 pid, tid;	    /* tid: the thread involved (ran on, ran last on), 0 if none */
	u64 id, uid;	    /* the coroutine */
	char name[CORO_STR_LEN];
	u64 parent;
	/* Ancestors known to the model when found, nearest first. */
	u32 nchain;
	struct {
		u64 id;
		char name[CORO_STR_LEN];
	} chain[FINDING_CHAIN];
	u64 ts, dur;	    /* when it started, how long it lasted (or had lasted) */
	bool open;	    /* still going when the trace or its process ended */
	u32 reason;	    /* suspension reason (lost_wakeup, stall, leak) */
	u64 obj;	    /* what it waited on */
	u64 waker;	    /* who made it ready (stall, sched_latency, lost_wakeup), if known */
	bool has_waker;
	enum coro_state state; /* its state (lost_wakeup, leak) */
	char span[CORO_STR_LEN]; /* unmatched_span */
	u64 count;	    /* spawn_storm: children created in the storm */
	u64 peak;	    /* spawn_storm: most created within one second */
	u32 offcpu_state;   /* blocking: enum coro_offcpu_state */
	u32 stack;	    /* --stacks: where it was parked (lost_wakeup, stall, leak), or 0;
			     * long_run: a sampled stack holding the key frame */
	/*
	 * long_run with --sample-hz: samples taken during the run, and the key
	 * frame: the deepest frame present in more than 30% of them, at
	 * frames[key_depth] of `stack`, in key_samples of them.
	 */
	u32 samples, key_samples, key_depth;
	u32 samples_kept; /* of `samples`, kept for the key frame (a uniform sample of long runs) */
	bool has_key;
	char key_frame[256]; /* "func+0x1e (obj) file.c:52" */
};

struct analyze_opts {
	u64 stall_ns;	      /* default 1 s */
	u64 long_run_ns;      /* default 50 ms */
	u64 sched_latency_ns; /* default 10 ms */
	u64 blocking_ns;      /* default 10 ms */
	u64 spawn_storm;      /* children per second, default 1000 */
};

void analyze_opts_default(struct analyze_opts *o);
const char *finding_kind_name(enum finding_kind k);

struct analyzer;

struct analyzer *analyzer_new(struct model *m, const struct analyze_opts *o,
			      struct model_observer *obs);
/* After registering the observer: the model's priv[] slot it got. */
void analyzer_bind(struct analyzer *a, int slot);
void analyzer_free(struct analyzer *a);

#endif
