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
#include "event.h" /* CORO_NAME_MAX */
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

/*
 * The fields of struct finding a kind fills besides those every finding has
 * (its coroutine, thread, times, chain, stack), one table for every writer
 * (finding.c: finding_kinds[]). A writer asks finding_fields() which of its
 * kind's fields this finding has values for, and writes those, each in its
 * own words and order; a new kind of finding is a row there (and its
 * detector), its fields written by every output without a change to any.
 */
enum finding_field {
	FF_STATE = 1 << 0,	/* state: its state at the end (enum coro_state) */
	FF_WAIT = 1 << 1,	/* reason, obj: the suspension, when it was suspended */
	FF_AWAITER = 1 << 2,	/* awaiter: a C++20 wait's awaiter type (a wait's, when known) */
	FF_WAKER = 1 << 3,	/* waker: who made it ready (has_waker: when known) */
	FF_SPAN = 1 << 4,	/* span: the span's name */
	/*
	 * A slow span's account: span_serial, span_depth, threshold, cause,
	 * span_in, longest_*.
	 */
	FF_SLOW = 1 << 5,
	FF_CAUSE_WAIT = 1 << 6, /* reason, obj: the suspension that was a slow span's cause */
	FF_STORM = 1 << 7,	/* count, peak: a parent's children in a storm */
	FF_PARENT = 1 << 8,	/* id is the parent's (a storm's), with no coroutine of its own */
	FF_SAMPLES = 1 << 9,	/* samples, samples_kept: the stacks sampled during a run */
	FF_KEY = 1 << 10,	/* key_frame, key_samples, key_depth: the samples' key frame */
	FF_OFFCPU = 1 << 11,	/* offcpu_state: how its thread was blocked */
};

struct finding_kind_def {
	const char *name;
	u32 fields; /* enum finding_field: those the kind may fill */
	/*
	 * Counted in the JSONL trailer only in a trace with spans: the
	 * trailers of traces without keep the bytes they had before the kind.
	 */
	bool only_with_spans;
};

extern const struct finding_kind_def finding_kinds[FK_NKINDS];

static inline const char *finding_kind_name(enum finding_kind k)
{
	return (unsigned)k < FK_NKINDS ? finding_kinds[k].name : "?";
}

/* The fields this finding has values for: its kind's, as its values allow. */
u32 finding_fields(const struct finding *f);

/* Whether the finding names a coroutine's id (its own, or a storm's parent's). */
static inline bool finding_names_id(const struct finding *f)
{
	return f->uid || (finding_kinds[f->kind].fields & FF_PARENT);
}

static inline const char *finding_span_cause_name(u32 cause)
{
	static const char *const names[SPAN_CAUSE_N] = {
		"running", "runnable", "suspended", "blocked", "runq", "unknown",
	};
	return cause < SPAN_CAUSE_N ? names[cause] : "?";
}

#endif
