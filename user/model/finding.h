/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A finding: what the detectors (analyze.h, which says when each kind is
 * made) hand the outputs through the pipeline. It is a value: it names the
 * coroutine, thread and stack by their ids and copies what an output prints,
 * so an output needs nothing of the analyzer, and a finding outlives the
 * model's view of the coroutine it is about.
 */
#ifndef COROBPF_FINDING_H
#define COROBPF_FINDING_H

#include "coro_abi.h"
#include "raw.h"
#include "spans.h"
#include "util.h"

enum finding_kind {
	FK_LOST_WAKEUP,
	FK_STALL,
	FK_LONG_RUN,
	FK_SCHED_LATENCY,
	FK_LEAK,
	FK_UNMATCHED_SPAN,
	FK_SPAWN_STORM,
	FK_BLOCKING,
	FK_SLOW_SPAN,
	FK_NKINDS
};

/* slow_span: what most of the span's time was (finding_span_cause_name()). */
enum span_cause {
	SPAN_CAUSE_RUNNING,   /* its coroutine on a CPU */
	SPAN_CAUSE_RUNNABLE,  /* ready, waiting for a worker */
	SPAN_CAUSE_SUSPENDED, /* switched out: `reason`, `obj` */
	SPAN_CAUSE_BLOCKED,   /* its thread blocked in the kernel while the coroutine ran */
	SPAN_CAUSE_RUNQ,      /* its thread waiting for a CPU while the coroutine ran */
	SPAN_CAUSE_UNKNOWN,   /* events were lost */
	SPAN_CAUSE_N
};

#define FINDING_CHAIN 8

struct finding {
	enum finding_kind kind;
	u32 pid, tid;	    /* tid: the thread involved (ran on, ran last on), 0 if none */
	u64 id, uid;	    /* the coroutine */
	char name[CORO_NAME_MAX];
	u64 parent;
	/* Ancestors known to the model when found, nearest first. */
	u32 nchain;
	struct {
		u64 id;
		char name[CORO_NAME_MAX];
	} chain[FINDING_CHAIN];
	u64 ts, dur;	    /* when it started, how long it lasted (or had lasted) */
	bool open;	    /* still going when the trace or its process ended */
	u32 reason;	    /* suspension reason (lost_wakeup, stall, leak) */
	u64 obj;	    /* what it waited on */
	/* lost_wakeup, stall, leak: a C++20 wait's awaiter type ("": not known) */
	char awaiter[CORO_STR_LEN];
	u64 waker;	    /* who made it ready (stall, sched_latency, lost_wakeup), if known */
	bool has_waker;
	u32 state;	    /* its state, an enum coro_state (lost_wakeup, leak) */
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
	/*
	 * slow_span (span: its name; ts, dur: its begin and duration; stack:
	 * where it began, --stacks; reason, obj: the suspension that was its
	 * cause): where its time went, the cause (the largest share; a
	 * suspension reason counts alone), its threshold, its instance and
	 * depth, and its longest single suspension.
	 */
	struct span_time span_in;
	u32 cause; /* enum span_cause */
	u32 span_depth;
	u64 span_serial, threshold;
	u64 longest_ts, longest_ns, longest_obj;
	u32 longest_reason;
};

/*
 * Where findings go. The analyzer is given the pipeline's, and the pipeline
 * hands each finding to the finding_sink of every output, in the order the
 * outputs were added.
 */
struct finding_sink {
	void *ctx;
	/* Called when the finding is made, not at its start time (f->ts). */
	void (*finding)(void *ctx, const struct finding *f);
};

static inline const char *finding_kind_name(enum finding_kind k)
{
	static const char *const names[FK_NKINDS] = {
		[FK_LOST_WAKEUP] = "lost_wakeup",     [FK_STALL] = "stall",
		[FK_LONG_RUN] = "long_run",	      [FK_SCHED_LATENCY] = "sched_latency",
		[FK_LEAK] = "leak",		      [FK_UNMATCHED_SPAN] = "unmatched_span",
		[FK_SPAWN_STORM] = "spawn_storm",     [FK_BLOCKING] = "blocking",
		[FK_SLOW_SPAN] = "slow_span",
	};
	return (unsigned)k < FK_NKINDS ? names[k] : "?";
}

static inline const char *finding_span_cause_name(u32 cause)
{
	static const char *const names[SPAN_CAUSE_N] = {
		"running", "runnable", "suspended", "blocked", "runq", "unknown",
	};
	return cause < SPAN_CAUSE_N ? names[cause] : "?";
}

#endif
