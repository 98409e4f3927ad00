/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Findings: the bugs of coroutine schedulers, found from the model. The
 * analyzer is the model's first observer (the pipeline registers it before
 * any output); each finding it makes goes to the finding_sink it was given,
 * the pipeline's, which hands it to every output, so the summary, JSONL,
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
 *                  counted) at least --blocking (needs the scheduling view); not
 *                  a scheduler idle in its own context (Boost.Fiber's dispatcher,
 *                  model.c fiber_dispatcher())
 *   slow_span      a span closed after at least --slow-span (its name's own
 *                  threshold if one was given, else the default one; 0: never
 *                  slow); made at its span_end, with where its time went. A
 *                  span never closed is an unmatched_span, never slow.
 *
 * A threshold is met at equality: a 1 s suspension is a stall at --stall 1.
 */
#ifndef COROBPF_ANALYZE_H
#define COROBPF_ANALYZE_H

#include "finding.h"
#include "model.h"

/*
 * A span of 100 ms is one a person notices (a click answered in more feels
 * slow) and one no quick operation reaches by being preempted on a loaded
 * machine; names that are slower by nature get their own threshold.
 */
#define ANALYZE_SLOW_SPAN_DEFAULT_MS 100
#define ANALYZE_SLOW_NAMES_MAX 64

struct analyze_opts {
	u64 stall_ns;	      /* default 1 s */
	u64 long_run_ns;      /* default 50 ms */
	u64 sched_latency_ns; /* default 10 ms */
	u64 blocking_ns;      /* default 10 ms */
	u64 spawn_storm;      /* children per second, default 1000 */
	u64 slow_span_ns;     /* default 100 ms (ANALYZE_SLOW_SPAN_DEFAULT_MS) */
	/* --slow-span NAME=MS: a name's own threshold (the last one given for a name wins). */
	u32 nslow_names;
	struct {
		char name[CORO_STR_LEN];
		u64 ns;
	} slow_names[ANALYZE_SLOW_NAMES_MAX];
};

void analyze_opts_default(struct analyze_opts *o);

struct analyzer;

/*
 * Findings go to `out`; `obs` is filled with the analyzer's model callbacks
 * (adding it to the model gives the analyzer its priv[] slot).
 */
struct analyzer *analyzer_new(struct model *m, const struct analyze_opts *o,
			      const struct finding_sink *out, struct model_observer *obs);
void analyzer_free(struct analyzer *a);

#endif
