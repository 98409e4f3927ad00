/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A session: one run of a command, from its options to its exit code, wired
 * in one place for every command. In this order:
 *
 *   open     the source and the outputs: for a live capture, preflight, the
 *            -o outputs (before the target is touched), --raw, the signal
 *            handlers, then capture_open, capture_targets, capture_attach;
 *            for a replay, the reader, then the outputs (none over the input)
 *   start    the pipeline (the detectors first), the outputs' observers in
 *            -o order, then the command's view (summary, report, ps table),
 *            the raw writer, pipeline_begin
 *   feed     capture_run, or every record of the reader until its end or a
 *            signal; a live capture's loop ticks the status line (status.h)
 *            and, with --flight, the flight recorder (flight.h), whose sink
 *            keeps every record after the tee and whose dumps replace the
 *            -o outputs (opened only to check them, at open)
 *   finish   pipeline_finish, the view's table, --raw then the outputs
 *            committed, a launched command waited for
 *   abort    any failure, at any step: a launched command killed, every file
 *            opened so far removed
 *
 * Both end in one release of what the session holds, in reverse order.
 * Nothing here is specific to a command but the choice of source and view.
 */
#ifndef COROBPF_SESSION_H
#define COROBPF_SESSION_H

#include "options.h"

/* corobpf [trace]: a live capture, the summary on stderr unless -q. */
int session_trace(const struct common_opts *c, const struct trace_opts *t);
/* corobpf ps: a live capture of t->duration seconds, the ps table on stdout. */
int session_ps(const struct common_opts *c, const struct trace_opts *t);
/*
 * corobpf top: a live capture shown as it runs (top.h), on the terminal or
 * as text snapshots on stdout; the -o outputs written as trace writes them.
 */
int session_top(const struct common_opts *c, const struct trace_opts *t,
		const struct top_opts *top);
/* corobpf report: a replay, the summary and the analysis (or --json) on stdout unless -q. */
int session_report(const struct common_opts *c, const struct report_opts *r);

#endif
