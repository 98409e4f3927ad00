/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Open spans (span_begin/span_end), per owner: a coroutine, or a thread
 * outside any coroutine. A span_end closes the innermost open span of its
 * name, and any opened inside it.
 *
 * The table: (owner, name hash) -> 1 + position of the innermost open span
 * with that hash in the owner's stack, for the stacks deep enough to be
 * indexed. The hash is keyed with a per-run random seed, so a program
 * cannot choose names that collide; the seed decides only how fast a span
 * is found, never which.
 *
 * Where a span's time went: when it begins, the owner coroutine's
 * cumulative clocks are copied into it (struct span_time, the current
 * state's part included); when it ends, the difference is its share. A
 * coroutine's clocks follow it across threads, so a span that migrates is
 * measured whole, and nested spans each take their own copy. The longest
 * suspension inside a span is kept on the innermost open span only and
 * handed outward when a span closes (a suspension is inside every span
 * open when it ends, since the coroutine ran when each began): O(1) per
 * suspension whatever the depth.
 *
 * Every span instance ends exactly once for the observers (struct
 * span_done): closed by its span_end, or unclosed when its coroutine ends
 * (exit, process exit, trace end) or, for a thread's own span, when its
 * process or the trace does. Unclosed spans have no end and are never
 * slow; they are the unmatched_span findings.
 *
 * Per-name statistics (struct span_stats) are exact: every closed span's
 * duration is kept, up to SPAN_STATS_EXACT per name (8 bytes each); past
 * that a name's percentiles come from a uniform sample of that many
 * (`approx`), while its count, total, max and shares stay exact. Memory is
 * bounded whatever the program does: at most SPAN_STATS_NAMES names (the
 * spans of further names are counted together, under `other`), and at most
 * SPAN_STATS_KEPT durations kept in all (a name that would need more
 * samples from what it has).
 */
#ifndef COROBPF_SPANS_H
#define COROBPF_SPANS_H

#include <stdbool.h>
#include "coro_abi.h"
#include "util.h"

#define SPAN_NREASONS 6 /* CORO_R_UNKNOWN..CORO_R_DONE (model.h CORO_NREASONS; checked there) */

/*
 * A coroutine's time: cumulative clocks (at a span's begin), or the
 * differences (a span's share). running is on a CPU as a clock of the
 * coroutine's running state, and on a CPU only (off-CPU taken out) as a
 * share. offcpu = blocked + runq + time off for other reasons.
 */
struct span_time {
	u64 running, runnable, suspended, unknown;
	u64 susp[SPAN_NREASONS]; /* suspended, by reason */
	u64 offcpu, blocked, runq;
};

struct coro_span {
	char name[CORO_STR_LEN];
	u64 ts;
	/* In an indexed stack (see struct span_table): */
	u64 hash;  /* of the name */
	u32 outer; /* the next open span outward with the same hash, or SPAN_NONE */
	u32 stack; /* --stacks: where it began (a capture stack id), 0: none */
	u64 serial, parent; /* instance number over the trace (1..), its enclosing span's (0) */
	struct span_time at_begin; /* the owner's clocks when it began (zero: a thread's span) */
	/* The longest suspension inside it so far (see above): from, for, why, on what. */
	u64 longest_ts, longest_ns, longest_obj;
	u32 longest_reason;
};
#define SPAN_NONE ((u32)-1)

/* A span instance ends: what the observers are told (model.h span_done()). */
struct span_done {
	const struct coro_span *sp; /* its name, begin, serial, parent, stack, longest suspension */
	u32 pid, tid;		    /* tid: the thread it ended on (unclosed: last ran on) */
	u64 id, uid;		    /* the owner coroutine; 0, 0: a thread outside any */
	u32 depth;		    /* 1: outermost */
	bool closed;		    /* false: its coroutine, process or the trace ended first */
	u64 end;		    /* closed: its span_end; else when its owner ended */
	u64 dur;		    /* end - begin */
	struct span_time in;	    /* its share (zero for a thread's span) */
};

#define SPAN_STATS_EXACT (1u << 20)
#define SPAN_STATS_NAMES 4096
#define SPAN_STATS_KEPT (16u << 20) /* 128 MiB of durations */

/* One span name's closed instances. */
struct span_name_stats {
	char name[CORO_STR_LEN];
	u64 count, total, max;
	u64 suspended, offcpu; /* summed over its instances */
	u64 unclosed;
	bool other; /* the spans of the names past SPAN_STATS_NAMES, together (name: empty) */
	u64 *durs; /* every duration (up to SPAN_STATS_EXACT, then a uniform sample) */
	u32 ndurs, cap;
	bool sorted, approx;
};

struct span_stats {
	struct hmap names; /* (name hash, 0) -> struct span_name_stats (chained on collision) */
	u64 rng;	   /* for the sample past SPAN_STATS_EXACT (fixed seed: replays agree) */
	u64 instances;	   /* span instances ended, closed or not */
	u64 kept;	   /* durations kept, all names (SPAN_STATS_KEPT) */
	struct span_name_stats *other; /* the names past SPAN_STATS_NAMES, or NULL */
	/* span_stats_seal(): every name, by total time descending (then name), durations sorted */
	struct span_name_stats **sorted;
	size_t nsorted;
};

struct span_table {
	struct hmap index;
	u64 seed;
	struct coro_span *pool; /* span arrays no stack uses, kept for reuse */
	u64 next_serial;
	struct span_stats stats;
};

/* The open spans of a coroutine, or of a thread outside any coroutine. */
struct span_stack {
	const void *owner; /* the struct coro or coro_thread: the index's key */
	struct coro_span **v;
	u32 *n, *cap;
	bool *indexed;
};

void span_table_init(struct span_table *t);
/*
 * A name's hash, keyed with the run's seed (a program cannot choose names
 * that collide): equal for names strncmp(a, b, CORO_STR_LEN) finds equal.
 */
u64 span_name_hash(const struct span_table *t, const char *name);
void span_table_free(struct span_table *t);
/* at_begin: the owner coroutine's clocks now, or NULL (a thread's span). */
void span_push(struct span_table *t, const struct span_stack *st, const char *name, u64 ts,
	       const struct span_time *at_begin, u32 stack);

/*
 * How spans end: `d` is filled with the owner and the time (pid, tid, id,
 * uid, closed, end), `now` is the owner's clocks then (NULL for a thread);
 * done() is called for each span ended, innermost first, with depth, dur
 * and the share filled in, then the span is in the statistics.
 */
struct span_ender {
	struct span_done d;
	const struct span_time *now;
	void (*done)(void *ctx, const struct span_done *d);
	void *ctx;
};

/*
 * Close the innermost open span of that name (and any opened inside it,
 * which end with it); false if none.
 */
bool span_pop(struct span_table *t, const struct span_stack *st, const char *name,
	      struct span_ender *e);
/* Every open span of an owner that ends now, unclosed (they stay, for the observers to read). */
void span_end_open(struct span_table *t, struct coro_span *v, u32 n, struct span_ender *e);
/* A suspension of the owner ended: inside its open spans (v[n - 1] the innermost). */
void span_note_suspension(struct coro_span *v, u32 n, u64 start, u64 dur, u32 reason, u64 obj);

/* ---- per-name statistics ---- */

/* The input ended (model_finish(), before the observers' finish()): sort for the readers. */
void span_stats_seal(struct span_table *t);
/* After the seal: every name, by total time descending (then name bytes). */
static inline struct span_name_stats *const *span_stats_names(const struct span_table *t,
							      size_t *n)
{
	*n = t->stats.nsorted;
	return t->stats.sorted;
}
/*
 * After the seal. Nearest rank: the ceil(p/100 * N)-th smallest of the N
 * durations kept (p in 1..100); 0 if none.
 */
u64 span_stats_percentile(const struct span_name_stats *s, u32 p);
static inline bool span_stats_any(const struct span_table *t)
{
	return t->stats.instances != 0;
}
/*
 * The owner goes (a coroutine ended, a thread's process did): its spans
 * leave the index. Its count stays, for the observers still to look.
 */
void span_forget(struct span_table *t, const void *owner, struct coro_span *v, u32 n,
		 bool *indexed);

#endif
