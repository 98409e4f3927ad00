/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the command line asks for, parsed (main.c) and handed to a session
 * (session.h). Split along the commands: what every command takes (the
 * outputs, their format, the detectors' thresholds), then what only a live
 * capture takes (trace and ps: targets, attach, ring, stacks), then what
 * only report takes (its input). -v and -q set log_level (log.h) directly.
 */
#ifndef COROBPF_OPTIONS_H
#define COROBPF_OPTIONS_H

#include "analyze.h"
#include "capture_opts.h"
#include "output.h"

#define OPTS_MAX_OUTPUTS 16

/*
 * Every command: -o, -f, --coroutine-tracks, --force, the findings' thresholds, the store's
 * timeouts.
 */
struct common_opts {
	const char *outputs[OPTS_MAX_OUTPUTS];
	int noutputs;
	enum output_format format; /* OUT_AUTO: from each file's extension */
	u32 coroutine_tracks;
	bool coroutine_tracks_set;
	bool force;
	struct analyze_opts an;
	struct pg_timeouts store_timeouts; /* --store-timeout */
	/* --max-coroutines, --max-coroutines-per-process: live coroutines followed (0: no cap). */
	u64 max_live, max_live_process;
	/* --max-open-spans, --max-open-spans-per-process: spans kept open at once (0: no cap). */
	u64 max_spans, max_spans_process;
};

/* trace, ps and top: a live capture, and what trace does with it besides its outputs. */
struct trace_opts {
	struct capture_opts cap; /* read-only once parsed: the capture and attaching read it */
	const char *raw;	 /* --raw: also write the raw capture there */
	double flight;		 /* --flight SECS: the flight recorder (flight.h); 0: off */
	u64 flight_mb;		 /* --flight-mb (0: FLIGHT_DEFAULT_MB) */
	u32 dump_on;		 /* --dump-on: 1 << enum finding_kind */
	u64 queue_mb;		 /* --queue-memory (0: MODELQ_DEFAULT_MEM) */
};

/* top: a live capture (trace_opts) shown as it runs. */
struct top_opts {
	double interval; /* --interval: seconds between refreshes (0: 1) */
	bool batch;	 /* --batch: text snapshots on stdout even on a terminal */
};

/* report: a replay. */
struct report_opts {
	const char *capture; /* a raw capture or a JSONL trace (plain or .gz) */
	bool json;	     /* --json */
};

#endif
