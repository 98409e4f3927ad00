/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Findings: the bugs of coroutine schedulers, found from the model. The
 * analyzer is the model's first observer (the pipeline registers it before
 * any output); each finding it makes goes to the finding_sink it was given,
 * the pipeline's, which hands it to every output, so the summary, JSONL,
 * Perfetto and SQLite all report the same findings.
 *
 * Each finding rests on evidence, and what evidence there is depends on the
 * runtime (docs/jsonl.md has the table, per kind and family): a scheduler
 * built with the probes shows its readies and what each wait is on ("the
 * probes" below); Go's runtime shows readies and waits too, and loses no
 * wakeup; the switch-function path (gevent, QEMU, Ruby, Boost, ucontext,
 * Pth, unmodified C++20) shows switches only, so work waiting for a thread
 * is read from them: after the coroutine gave the thread back, another was
 * switched in before the thread's scheduler context (model_is_scheduler():
 * gevent's hub, QEMU's main loop, Boost.Fiber's dispatcher) waited for work
 * in the kernel again. Nothing suspended since before the trace saw it (found
 * parked at an attach) is a stall or a lost wakeup: how long, and for what,
 * is not known.
 *
 *   lost_wakeup    suspended on something (wait, io, unknown reason with an
 *                  object) for at least --stall when the trace or its process
 *                  ended, where a wakeup went missing: its process exited
 *                  cleanly with it waiting, or a coroutine that began waiting
 *                  on the same object later was woken first (it was passed
 *                  over); or made ready and never run again. The probes only:
 *                  Go's runtime loses no wakeup, and the switch path sees none
 *   stall          suspended at least --stall, then woken, where something
 *                  made it longer than it had to be: the probes' sleeps and
 *                  yields; a wait passed over, or (probes) inside an open span;
 *                  a C++20 wait on an awaiter seen. Not Go's sleeps, nor any
 *                  network wait (the peer's pace), nor the switch path's
 *                  suspensions of unknown reason
 *   long_run       on a CPU at least --long-run without switching out (its
 *                  thread's time off the CPU not counted: blocked in the
 *                  kernel, or waiting for a CPU) while work waited for its
 *                  thread: other coroutines of its process runnable or made
 *                  ready meanwhile (probes, Go), or another switched in after it
 *                  (switch path)
 *   sched_latency  waited runnable at least --sched-latency before running
 *   leak           alive at the end, for at least --stall, and nothing could
 *                  wake it: never started; (probes) suspended with no wait
 *                  object when its process exited; (Go) parked when its process
 *                  exited, as goleak counts a leak (the runtime's own
 *                  goroutines, and signal handling's, left out)
 *   unmatched_span a span still open when its coroutine ended (or the trace
 *                  did), or a span end without an open span of that name
 *   spawn_storm    one parent created more than --spawn-storm coroutines within
 *                  one second
 *   blocking       while a coroutine ran, its thread was blocked in the kernel
 *                  (sleeping or in disk wait, run queue time not counted) at
 *                  least --blocking, while work waited for the thread (as for
 *                  long_run); never a scheduler context's wait for work (needs
 *                  the scheduling view)
 *   slow_span      a span closed after at least --slow-span (its name's own
 *                  threshold if one was given, else the default one; 0: never
 *                  slow); made at its span_end, with where its time went. A
 *                  span never closed is an unmatched_span, never slow.
 *
 * A threshold is met at equality: a 1 s suspension is a stall at --stall 1.
 * A finding whose evidence comes later (the switch path's blocking and
 * long_run) is made when it comes, with its own start time.
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
