// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * corobpf: the command line. Parses each command's options (options.h) and
 * hands them to a session (session.h), which does the run: trace (the
 * default), ps, top, report.
 */
#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "batch.h"
#include "execsearch.h"
#include "log.h"
#include "options.h"
#include "pgstore.h"
#include "session.h"

/*
 * What argp fills for one command: the common options first, so that
 * parse_common() reads any of them as a struct common_opts.
 */
struct trace_args {
	struct common_opts c;
	struct trace_opts t;
};

struct report_args {
	struct common_opts c;
	struct report_opts r;
};

const char *argp_program_version = "corobpf " COROBPF_VERSION;
const char *argp_program_bug_address = NULL;

/*
 * Exit codes, one entry each, as README's "Exit codes" paragraph gives them; each
 * command's --help lists only those it can end with (tests/integration/suite_docs_cli.py
 * holds both to that).
 */
#define EXIT_DOC_OK "0 ok"
#define EXIT_DOC_OK_CMD "0 ok (with -- CMD: the command's own exit status once it ran)"
#define EXIT_DOC_RUNTIME "1 runtime failure (BPF load or attach, or nothing could be attached)"
#define EXIT_DOC_UNOPENED "1 the capture cannot be opened (missing, unreadable, not a regular file)"
#define EXIT_DOC_USAGE "2 usage (an -o whose format its extension does not tell, too)"
#define EXIT_DOC_PRIVILEGE                                                                    \
	"3 missing privilege (root; or CAP_BPF and CAP_PERFMON for one's own processes on "  \
	"Linux 6.6+)"
#define EXIT_DOC_KERNEL "4 kernel lacks BTF, ring buffers or task storage"
#define EXIT_DOC_NO_PROCESS "5 no such process"
#define EXIT_DOC_NO_PROBES "6 no corobpf probes and no known switch functions in the target"
#define EXIT_DOC_OUTPUT "7 an output cannot be written (or exists: --force)"
#define EXIT_DOC_BAD_CAPTURE                                                                  \
	"8 the capture is truncated, corrupt, not a capture, or of another version (the "     \
	"outputs still hold what came before)"
#define EXIT_DOC_LAUNCH "9 the command cannot be run"
/* The shell's convention; a second signal quits at once (capture.c on_signal). */
#define EXIT_DOC_SIGNAL_CMD                                                                   \
	"128+N signal N killed the command, or stopped corobpf before it began tracing or a " \
	"second time (half-written outputs are removed)"
#define EXIT_DOC_SIGNAL                                                                       \
	"128+N signal N stopped corobpf before it began tracing, or a second time "           \
	"(half-written outputs are removed)"
#define EXIT_DOC_SIGNAL_REPORT                                                                \
	"128+N signal N stopped the replay (half-written outputs are removed)"

/* Tracing and top: a live capture, of running processes or of a command launched. */
#define EXIT_CODES_DOC                                                                        \
	"Exit codes: " EXIT_DOC_OK_CMD "; " EXIT_DOC_RUNTIME "; " EXIT_DOC_USAGE "; "         \
	EXIT_DOC_PRIVILEGE "; " EXIT_DOC_KERNEL "; " EXIT_DOC_NO_PROCESS "; "                 \
	EXIT_DOC_NO_PROBES "; " EXIT_DOC_OUTPUT "; " EXIT_DOC_LAUNCH "; " EXIT_DOC_SIGNAL_CMD \
	".\n"

/* ps: a live capture of running processes only; nothing is launched. */
#define PS_EXIT_CODES_DOC                                                                     \
	"Exit codes: " EXIT_DOC_OK "; " EXIT_DOC_RUNTIME "; " EXIT_DOC_USAGE "; "             \
	EXIT_DOC_PRIVILEGE "; " EXIT_DOC_KERNEL "; " EXIT_DOC_NO_PROCESS "; "                 \
	EXIT_DOC_NO_PROBES "; " EXIT_DOC_OUTPUT "; " EXIT_DOC_SIGNAL ".\n"

/* report reads a file and writes outputs: no BPF, no target. */
#define REPORT_EXIT_CODES_DOC                                                                 \
	"Exit codes: " EXIT_DOC_OK "; " EXIT_DOC_UNOPENED "; " EXIT_DOC_USAGE "; "            \
	EXIT_DOC_OUTPUT "; " EXIT_DOC_BAD_CAPTURE "; " EXIT_DOC_SIGNAL_REPORT ".\n"

static const char trace_doc[] =
	"corobpf: see coroutines and the scheduling under them, with eBPF.\n"
	"\n"
	"Commands (each has its own --help):\n"
	"  corobpf [OPTIONS] TARGETS         trace TARGETS (below): write the -o\n"
	"                                    outputs, print a summary\n"
	"  corobpf report [OPTIONS] CAPTURE  the analysis and any output again, from a\n"
	"                                    --raw capture or a JSONL trace; no root\n"
	"  corobpf ps -p PID [-d SECS]       the live coroutines of PID seen in SECS\n"
	"                                    (default 1): state, for how long, where\n"
	"                                    each is parked\n"
	"  corobpf top [OPTIONS] TARGETS     the live coroutines of TARGETS on a full\n"
	"                                    screen, refreshed every second\n"
	"\n"
	"TARGETS:\n"
	"  -p PID [-p PID...]                running processes\n"
	"  -- CMD [ARGS...]                  CMD, run and traced from its first\n"
	"                                    instruction\n"
	"  -a [--comm NAME...]               every instrumented process, now and\n"
	"                                    started later; every family (the switch\n"
	"                                    functions: in the programs started later)\n"
	"  --follow -p PID|-- CMD            the targets, every process they fork, and\n"
	"                                    what those exec\n"
	"\n"
	"Targets carry corobpf probes (usdt/corobpf.h); without them, corobpf follows the "
	"context-switch functions of the libraries and runtimes they use (ucontext, "
	"Boost.Context, GNU Pth, Ruby, QEMU, greenlet, Go, Python asyncio, Lua; see --switch help). "
	"Tracing stops "
	"when every target has exited, on Ctrl-C or SIGTERM, or after -d SECS, and always "
	"finishes its outputs; a second Ctrl-C quits at once. A summary goes to stderr, and while "
	"recording a status line when stderr is a terminal (not with -q).\n"
	"\v"
	"Examples:\n"
	"  sudo corobpf -p 4242 -o trace.pftrace\n"
	"  sudo corobpf -d 10 -p 4242 -o trace.jsonl.gz\n"
	"  sudo corobpf -a -d 10 -o all.pftrace\n"
	"  sudo corobpf --switch boost-context -o fibers.pftrace -- ./fiberapp\n"
	"  sudo corobpf -o trace.jsonl --raw cap.raw -- ./server -c x\n"
	"  sudo corobpf --follow -o all.jsonl -- make check\n"
	"  sudo corobpf --stacks -o trace.db -p 4242\n"
	"  sudo corobpf --flight 5 --dump-on stall -o t.pftrace -p 4242\n"
	"  sudo corobpf ps -p 4242\n"
	"  corobpf report cap.raw -o again.jsonl\n"
	"\n"
	"Output formats, by extension: .pftrace (Perfetto: open at ui.perfetto.dev), .jsonl "
	".json .ndjson (JSON lines; .jsonl.gz compressed), .db .sqlite (SQLite), .csv (24 of "
	"the coroutines table's columns, docs/sqlite.md); a postgresql:// URI stores the run "
	"into that database (docs/store.md).\n"
	"\n"
	"With -- CMD, the command keeps corobpf's stdin, stdout, stderr and process group "
	"(so Ctrl-C reaches it too); SIGTERM and SIGHUP are passed on to it. When tracing "
	"stops (-d, or a signal) corobpf finishes its outputs, then waits for the command and "
	"exits with its status. A CMD that is a script (a pyenv shim, ./run.sh) is followed "
	"through its execs to the program, which is traced from its first instruction; what "
	"the script runs as a child needs --follow.\n"
	"\n" EXIT_CODES_DOC;

enum {
	OPT_RAW = 0x100,
	OPT_RING,
	OPT_FORCE,
	OPT_TRACKS,
	OPT_STALL,
	OPT_LONG_RUN,
	OPT_SCHED_LAT,
	OPT_STORM,
	OPT_JSON,
	OPT_NO_SCHED,
	OPT_BLOCKING,
	OPT_COMM,
	OPT_SWITCH,
	OPT_FOLLOW,
	OPT_STACKS,
	OPT_STACK_BYTES,
	OPT_SAMPLE_HZ,
	OPT_SLOW_SPAN,
	OPT_EXEC_GATE,
	OPT_INTERVAL,
	OPT_BATCH,
	OPT_FLIGHT,
	OPT_FLIGHT_MB,
	OPT_DUMP_ON,
	OPT_QUEUE_MEM,
	OPT_PROBE_PATH,
	OPT_STORE_TIMEOUT,
	OPT_MAX_LIVE,
	OPT_MAX_LIVE_PROCESS,
	OPT_MAX_SPANS,
	OPT_MAX_SPANS_PROCESS,
};

/* Every command that takes -o: the PostgreSQL store's waits (docs/store.md). */
#define STORE_TIMEOUT_OPTION                                                                 \
	{"store-timeout", OPT_STORE_TIMEOUT, "WHAT=SECS", 0,                                 \
	 "PostgreSQL store: how long to wait for the server: connect=SECS (default: the "      \
	 "URI's connect_timeout, else 10), lock=SECS (a lock another session holds, default "  \
	 "10), statement=SECS (one command, default 60); 0 waits for ever; e.g. "             \
	 "--store-timeout lock=60,statement=300. Ctrl-C ends the wait to connect; once "       \
	 "tracing stopped (-d, a signal) the store waits 1 s at most for a server that "       \
	 "stopped answering",                                                                  \
	 0}

#define FINDING_OPTIONS                                                                      \
	{"stall", OPT_STALL, "SECS", 0,                                                      \
	 "Findings: a suspension this long is a stall, a lost wakeup if it never ends "      \
	 "(default 1)", 1},                                                                  \
	{"long-run", OPT_LONG_RUN, "MS", 0,                                                  \
	 "Findings: running this long without switching out (default 50)", 1},               \
	{"sched-latency", OPT_SCHED_LAT, "MS", 0,                                            \
	 "Findings: waiting this long runnable (default 10)", 1},                            \
	{"blocking", OPT_BLOCKING, "MS", 0,                                                  \
	 "Findings: a running coroutine's thread blocked in the kernel this long "           \
	 "(default 10)", 1},                                                                 \
	{"spawn-storm", OPT_STORM, "N", 0,                                                   \
	 "Findings: more than N coroutines created by one parent within a second "           \
	 "(default 1000)", 1},                                                               \
	{"slow-span", OPT_SLOW_SPAN, "[NAME=]MS", 0,                                         \
	 "Findings: a span lasting this long is slow; NAME=MS for spans of that name "       \
	 "(repeatable; default 100)", 1},                                                    \
	{"max-coroutines", OPT_MAX_LIVE, "N", 0,                                             \
	 "Memory: follow at most N live coroutines in all (default 1000000; 0: no cap); "    \
	 "one first seen beyond is followed once there is room, as if attached then, and "   \
	 "its events until then are counted (docs/reliability.md, \"Memory\")", 2},          \
	{"max-coroutines-per-process", OPT_MAX_LIVE_PROCESS, "N", 0,                         \
	 "Memory: follow at most N live coroutines of one process (default 500000; 0: no "   \
	 "cap), so that one process cannot take the room of all", 2},                        \
	{"max-open-spans", OPT_MAX_SPANS, "N", 0,                                            \
	 "Memory: keep at most N spans open at once in all (default 1000000; 0: no cap); "   \
	 "one begun beyond is counted, not kept (its end closes no other span)", 2},         \
	{"max-open-spans-per-process", OPT_MAX_SPANS_PROCESS, "N", 0,                        \
	 "Memory: keep at most N spans open at once in one process (default 500000; 0: no "  \
	 "cap)", 2}

static const struct argp_option trace_options[] = {
	{"pid", 'p', "PID", 0, "Trace this running process (repeatable; with -a, a filter)", 0},
	{"all", 'a', NULL, 0,
	 "Trace every process whose objects carry corobpf probes, now and started later", 0},
	{"comm", OPT_COMM, "NAME", 0,
	 "With -a: only processes whose name starts with NAME (repeatable, at most 16: with any)",
	 0},
	{"follow", OPT_FOLLOW, NULL, 0,
	 "Also trace the processes the targets fork, theirs in turn, and what they exec "
	 "(through corobpf probes, Go, C++20, asyncio and Lua; not the switch functions)",
	 0},
	{"exec-gate", OPT_EXEC_GATE, "MS", 0,
	 "With -a or --follow: hold the exec of a program not examined yet until it is attached, "
	 "at most MS ms (default 1000; 0: never hold)",
	 0},
	{"output", 'o', "FILE", 0, "Write FILE, format from its extension (repeatable); a "
	 "postgresql:// URI stores into that database (docs/store.md; its password goes in "
	 "~/.pgpass or PGPASSFILE, not here)", 0},
	{"format", 'f', "FMT", 0,
	 "Format for every -o FILE: perfetto, jsonl, sqlite, csv, or postgresql (for a "
	 "postgresql:// URI)",
	 0},
	{"coroutine-tracks", OPT_TRACKS, "N", 0,
	 "Perfetto: a track per coroutine for the first N of each process (default 1000), "
	 "packed lanes for the rest; 0 packs all",
	 0},
	{"raw", OPT_RAW, "FILE", 0, "Also write the raw capture, for corobpf report", 0},
	{"duration", 'd', "SECS", 0, "Stop tracing after SECS seconds", 0},
	{"ring-size", OPT_RING, "MB", 0, "BPF ring buffer size in MiB, a power of 2 (default 16)",
	 0},
	{"queue-memory", OPT_QUEUE_MEM, "MB", 0,
	 "Memory in MiB for records read but not yet modelled (default 128); beyond it they "
	 "wait in an unnamed temporary file in $TMPDIR or /var/tmp",
	 0},
	{"switch", OPT_SWITCH, "FAMILY", 0,
	 "Trace coroutines through the context-switch functions of an unmodified library: "
	 "ucontext, boost-context, pth, ruby, qemu, greenlet, go, asyncio, lua, a list of them, "
	 "uprobe:PATH:SYMBOL:from=ARG,to=ARG, "
	 "or none (repeatable; `--switch help` lists them). Default: every family the target "
	 "uses, when it has no corobpf probes",
	 0},
	{"stacks", OPT_STACKS, "MODE", OPTION_ARG_OPTIONAL,
	 "User stacks at every create (the spawn site) and switch-out (where a coroutine is "
	 "parked): dwarf (the default: unwound from .eh_frame, right without frame pointers) "
	 "or fp (the kernel's frame-pointer walk, deduplicated in the kernel; wrong frames "
	 "where code omits them; docs/stacks.md compares their costs); --stacks fp is "
	 "--stacks=fp",
	 0},
	{"stack-bytes", OPT_STACK_BYTES, "N", 0,
	 "--stacks=dwarf: bytes of each stack copied for unwinding, 512 to 16384 (default "
	 "4096); deeper frames are cut",
	 0},
	{"sample-hz", OPT_SAMPLE_HZ, "HZ", 0,
	 "--stacks: sample the stacks of running coroutines HZ times a second per CPU (default "
	 "99; 0: never), for the key frame of long_run findings",
	 0},
	{"probe-path", OPT_PROBE_PATH, "PATH", 0,
	 "How corobpf probes reach corobpf: batched (each thread keeps its records, BPF "
	 "copies them out; the default) or trap (a uprobe trap per event; docs/probes.md). "
	 "--stacks always takes the trap path: a stack is taken at the trap. Without this "
	 "option: COROBPF_PROBE_PATH (batched or trap) if set",
	 0},
	{"no-sched", OPT_NO_SCHED, NULL, 0,
	 "Without the kernel's scheduling view (sched_switch and sched_wakeup): no off-CPU "
	 "stretches, no blocking findings (a call that blocks a coroutine is then a long_run)",
	 0},
	{"flight", OPT_FLIGHT, "SECS", 0,
	 "Flight recorder: keep only the last SECS of the capture in memory and write every "
	 "-o FILE as FILE.N (trace.1.pftrace, t.1.jsonl.gz...) on SIGUSR1 or --dump-on; "
	 "nothing is written otherwise (--raw still writes the whole capture)",
	 0},
	{"flight-mb", OPT_FLIGHT_MB, "MB", 0,
	 "--flight: keep at most MB MiB of records (default 64); a window cut short says so", 0},
	{"dump-on", OPT_DUMP_ON, "KIND", 0,
	 "--flight: also dump when a finding of KIND (stall, long_run, sched_latency, "
	 "blocking, spawn_storm, unmatched_span, lost_wakeup, leak; a list with commas) is "
	 "made; each finding once, a burst in one dump",
	 0},
	STORE_TIMEOUT_OPTION,
	{"force", OPT_FORCE, NULL, 0, "Overwrite existing output files", 0},
	{"quiet", 'q', NULL, 0,
	 "No summary, no status line, no progress messages: only errors and warnings", 0},
	{"verbose", 'v', NULL, 0, "More messages; -vv adds libbpf's debug log", 0},
	FINDING_OPTIONS,
	{},
};

/* A whole number for --opt in [min, max], or a usage error naming the range. */
static unsigned long parse_count(struct argp_state *state, const char *opt, const char *arg,
				 unsigned long min, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || v < min || v > max)
		argp_error(state, "invalid --%s '%s' (%lu to %lu)", opt, arg, min, max);
	return v;
}

/* A positive number of `unit`s (seconds, milliseconds) as nanoseconds. */
static u64 parse_threshold(struct argp_state *state, const char *opt, const char *arg, double unit)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || *end || !(v > 0 && v * unit < 1e18))
		argp_error(state, "invalid --%s '%s' (a positive number)", opt, arg);
	return (u64)(v * unit);
}

/* ---- a store's password on the command line ---- */

/*
 * The command line is /proc/PID/cmdline, which every local user reads. A store URI that holds
 * a password (or that libpq cannot read, and may) is copied out of it and written over in
 * place with the form messages show, before anything else runs; argp parses what is left,
 * and -o takes the copy back (store_uri_given()).
 */
struct scrubbed_arg {
	const char *start, *end; /* the URI's place in the command line, written over */
	char *uri;		 /* what was there */
};

static struct scrubbed_arg *scrubbed;
static int nscrubbed;

static void scrub_store_uris(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		char *uri = strstr(argv[i], "postgresql://"), *alt = strstr(argv[i], "postgres://");
		char shown[512], err[256];
		size_t len, n;
		bool secret;

		if (!uri || (alt && alt < uri))
			uri = alt;
		if (!uri)
			continue;
		if (!pgstore_check_uri(uri, shown, sizeof(shown), &secret, err, sizeof(err)) &&
		    !secret)
			continue;
		len = strlen(uri);
		scrubbed = realloc(scrubbed, (nscrubbed + 1) * sizeof(*scrubbed));
		if (!scrubbed)
			abort();
		scrubbed[nscrubbed++] = (struct scrubbed_arg){uri, uri + len, xstrdup(uri)};
		/* The same length: what follows stays where the kernel and ps look for it. */
		n = MIN(strlen(shown), len);
		memcpy(uri, shown, n);
		memset(uri + n, 0, len - n);
		if (secret)
			log_warn("the password in %s was on corobpf's command line, which every local "
				 "user can read (/proc/PID/cmdline, ps): it is removed from there now, "
				 "but was there a moment, and may be in your shell's history; keep it "
				 "in ~/.pgpass, or a file PGPASSFILE names, or PGPASSWORD "
				 "(docs/store.md)", shown);
	}
}

/* -o's argument: the store URI scrub_store_uris() took out of the command line, or itself. */
static const char *store_uri_given(const char *arg, struct argp_state *state)
{
	for (int i = 0; i < nscrubbed; i++) {
		if (arg >= scrubbed[i].start && arg < scrubbed[i].end) {
			char shown[512], err[256];
			bool secret;

			/*
			 * Not a URI libpq reads: said now, without quoting it. Without libpq, the
			 * store says so when it opens (exit 7, as any store that cannot be had).
			 */
			if (pgstore_libpq_loads() &&
			    pgstore_check_uri(scrubbed[i].uri, shown, sizeof(shown), &secret, err,
					      sizeof(err)))
				argp_error(state, "-o %s: %s", shown, err);
			return scrubbed[i].uri;
		}
	}
	return arg;
}

static error_t parse_common(int key, char *arg, struct argp_state *state)
{
	struct common_opts *c = state->input;

	switch (key) {
	case OPT_STALL:
		c->an.stall_ns = parse_threshold(state, "stall", arg, 1e9);
		return 0;
	case OPT_LONG_RUN:
		c->an.long_run_ns = parse_threshold(state, "long-run", arg, 1e6);
		return 0;
	case OPT_SCHED_LAT:
		c->an.sched_latency_ns = parse_threshold(state, "sched-latency", arg, 1e6);
		return 0;
	case OPT_BLOCKING:
		c->an.blocking_ns = parse_threshold(state, "blocking", arg, 1e6);
		return 0;
	case OPT_STORM:
		c->an.spawn_storm = parse_count(state, "spawn-storm", arg, 1, 1000000000);
		return 0;
	case OPT_MAX_LIVE:
		c->max_live = parse_count(state, "max-coroutines", arg, 0, 1000000000000ULL);
		return 0;
	case OPT_MAX_LIVE_PROCESS:
		c->max_live_process =
		    parse_count(state, "max-coroutines-per-process", arg, 0, 1000000000000ULL);
		return 0;
	case OPT_MAX_SPANS:
		c->max_spans = parse_count(state, "max-open-spans", arg, 0, 1000000000000ULL);
		return 0;
	case OPT_MAX_SPANS_PROCESS:
		c->max_spans_process =
		    parse_count(state, "max-open-spans-per-process", arg, 0, 1000000000000ULL);
		return 0;
	case OPT_SLOW_SPAN: {
		/* NAME=MS: the last '=' splits, so a name may hold one. */
		const char *eq = strrchr(arg, '=');
		size_t len;

		if (!eq) {
			c->an.slow_span_ns = parse_threshold(state, "slow-span", arg, 1e6);
			return 0;
		}
		len = (size_t)(eq - arg);
		if (c->an.nslow_names == ANALYZE_SLOW_NAMES_MAX)
			argp_error(state, "at most %d --slow-span NAME=MS", ANALYZE_SLOW_NAMES_MAX);
		/* Matched as the probe keeps names: their first CORO_STR_LEN - 1 bytes. */
		memset(c->an.slow_names[c->an.nslow_names].name, 0, CORO_STR_LEN);
		memcpy(c->an.slow_names[c->an.nslow_names].name, arg, MIN(len, CORO_STR_LEN - 1));
		c->an.slow_names[c->an.nslow_names++].ns =
			parse_threshold(state, "slow-span", eq + 1, 1e6);
		return 0;
	}
	case 'o':
		if (c->noutputs == OPTS_MAX_OUTPUTS)
			argp_error(state, "at most %d outputs", OPTS_MAX_OUTPUTS);
		c->outputs[c->noutputs++] = store_uri_given(arg, state);
		return 0;
	case OPT_STORE_TIMEOUT: {
		char err[256];

		if (pg_timeouts_parse(&c->store_timeouts, arg, err, sizeof(err)))
			argp_error(state, "%s", err);
		return 0;
	}
	case 'f':
		c->format = output_format_parse(arg);
		if (c->format == OUT_AUTO)
			argp_error(state, "unknown format '%s' (known: perfetto, jsonl, sqlite, csv, "
				   "postgresql)", arg);
		return 0;
	case OPT_TRACKS:
		c->coroutine_tracks = (u32)parse_count(state, "coroutine-tracks", arg, 0, 10000000);
		c->coroutine_tracks_set = true;
		return 0;
	case OPT_FORCE:
		c->force = true;
		return 0;
	case 'q':
		log_level = LOG_QUIET;
		return 0;
	case 'v':
		if (log_level < LOG_DEBUG)
			log_level++;
		return 0;
	}
	return ARGP_ERR_UNKNOWN;
}

/* Two outputs (or --raw and an output) naming one file would each replace the other. */
static void check_outputs_distinct(struct argp_state *state, const struct common_opts *c,
				   const char *raw)
{
	for (int i = 0; i < c->noutputs; i++) {
		for (int j = 0; j < i; j++)
			if (!pgstore_is_uri(c->outputs[i]) &&
			    outfile_same(c->outputs[j], c->outputs[i]))
				argp_error(state, "-o %s and -o %s name the same file: give each "
					   "output once", c->outputs[j], c->outputs[i]);
		if (!output_format_known(c->outputs[i], c->format)) {
			char err[512];

			output_format_error(c->outputs[i], err, sizeof(err));
			argp_error(state, "%s", err);
		}
		if (raw && !pgstore_is_uri(c->outputs[i]) && outfile_same(raw, c->outputs[i]))
			argp_error(state, "--raw %s and -o %s name the same file: give each output "
				   "once", raw, c->outputs[i]);
	}
}

static error_t parse_trace(int key, char *arg, struct argp_state *state)
{
	struct trace_args *ta = state->input;
	struct trace_opts *t = &ta->t;
	struct capture_opts *a = &t->cap;
	char *end;

	switch (key) {
	case 'p': {
		unsigned long v;

		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || *end || !v || v > 0x7fffffff)
			argp_error(state, "invalid PID '%s'", arg);
		if (a->npids == CAPTURE_MAX_PIDS)
			argp_error(state, "at most %d -p", CAPTURE_MAX_PIDS);
		a->pids[a->npids++] = v;
		return 0;
	}
	case OPT_RAW:
		t->raw = arg;
		return 0;
	case OPT_NO_SCHED:
		a->no_sched = true;
		return 0;
	case OPT_PROBE_PATH:
		if (!strcmp(arg, "trap"))
			a->probe_path = PROBE_PATH_TRAP;
		else if (!strcmp(arg, "batched"))
			a->probe_path = PROBE_PATH_BATCHED;
		else
			argp_error(state, "--probe-path: '%s' is not trap or batched", arg);
		return 0;
	case 'a':
		a->system_wide = true;
		return 0;
	case OPT_FOLLOW:
		a->follow = true;
		return 0;
	case OPT_EXEC_GATE:
		a->exec_gate_ms = (u32)parse_count(state, "exec-gate", arg, 0, 60000);
		return 0;
	case OPT_STACKS:
		if (!arg || !strcmp(arg, "dwarf"))
			a->stacks = STACK_MODE_DWARF;
		else if (!strcmp(arg, "fp"))
			a->stacks = STACK_MODE_FP;
		else
			argp_error(state, "invalid --stacks '%s' (dwarf or fp)", arg);
		return 0;
	case OPT_SAMPLE_HZ:
		a->sample_hz = (u32)parse_count(state, "sample-hz", arg, 0, 10000);
		a->sample_hz_set = true;
		return 0;
	case OPT_STACK_BYTES:
		a->stack_bytes = (u32)ROUND_UP(parse_count(state, "stack-bytes", arg, 512,
							   CORO_STACK_BYTES_MAX), 8);
		return 0;
	case OPT_SWITCH: {
		char buf[256], *tok, *save, err[512];

		if (!strcmp(arg, "help")) {
			switchfam_help(stdout);
			exit(0);
		}
		if (!strncmp(arg, "uprobe:", 7)) {
			if (a->ncustom == sizeof(a->custom) / sizeof(a->custom[0]))
				argp_error(state, "at most 8 --switch uprobe:...");
			if (switchfam_parse_custom(arg, &a->custom[a->ncustom], err, sizeof(err)))
				argp_error(state, "invalid --switch %s", err);
			a->ncustom++;
			a->switch_forced = true;
			return 0;
		}
		if (!strcmp(arg, "none")) {
			a->switch_none = true;
			return 0;
		}
		if (strlen(arg) >= sizeof(buf))
			argp_error(state, "invalid --switch '%s'", arg);
		strcpy(buf, arg);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			u32 f = switchfam_parse(tok);

			if (!f)
				argp_error(state, "unknown --switch family '%s' (known: ucontext, "
					   "boost-context, pth, ruby, qemu, greenlet, go, asyncio, lua; or "
					   "uprobe:...; see --switch help)", tok);
			a->switch_families |= 1u << f;
		}
		a->switch_forced = true;
		return 0;
	}
	case OPT_FLIGHT:
		errno = 0;
		t->flight = strtod(arg, &end);
		if (errno || *end || !(t->flight >= 0.01 && t->flight <= 86400))
			argp_error(state, "invalid --flight '%s' (seconds, 0.01 to 86400)", arg);
		return 0;
	case OPT_FLIGHT_MB:
		t->flight_mb = parse_count(state, "flight-mb", arg, 1, 65536);
		return 0;
	case OPT_QUEUE_MEM:
		t->queue_mb = parse_count(state, "queue-memory", arg, 2, 65536);
		return 0;
	case OPT_DUMP_ON: {
		char buf[256], *tok, *save;

		if (strlen(arg) >= sizeof(buf))
			argp_error(state, "invalid --dump-on '%s'", arg);
		strcpy(buf, arg);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			int k;

			for (k = 0; k < FK_NKINDS && strcmp(tok, finding_kind_name(k)); k++)
				;
			if (k == FK_NKINDS)
				argp_error(state, "unknown --dump-on kind '%s' (stall, long_run, "
					   "sched_latency, blocking, spawn_storm, unmatched_span, "
					   "lost_wakeup, leak)", tok);
			t->dump_on |= 1u << k;
		}
		return 0;
	}
	case OPT_COMM:
		if (!*arg || strlen(arg) > 15)
			argp_error(state, "invalid --comm '%s' (1 to 15 characters, as the kernel "
				   "keeps them)", arg);
		if (a->ncomms == CAPTURE_MAX_COMMS)
			argp_error(state, "at most %d --comm", CAPTURE_MAX_COMMS);
		a->comms[a->ncomms++] = arg;
		return 0;
	case 'd':
		errno = 0;
		a->duration = strtod(arg, &end);
		/* Written so that NaN fails too. */
		if (errno || *end || !(a->duration >= 1e-6 && a->duration <= 1e7))
			argp_error(state, "invalid duration '%s' (seconds, from 0.000001)", arg);
		return 0;
	case OPT_RING: {
		unsigned long mb;

		errno = 0;
		mb = strtoul(arg, &end, 10);
		/* The map size is a u32 of bytes: 2 GiB at most. */
		if (errno || *end || !mb || (mb & (mb - 1)) || mb > 2048)
			argp_error(state, "invalid ring size '%s' (MiB, a power of 2 up to 2048)",
				   arg);
		a->ring_bytes = (u64)mb << 20;
		return 0;
	}
	case ARGP_KEY_ARG:
		/* main() already split off everything after "--". */
		argp_error(state, "unexpected argument '%s' (a command goes after --)", arg);
		return 0;
	case ARGP_KEY_END:
		if (!a->npids && !a->argv && !a->system_wide)
			argp_error(state, "nothing to trace: give -p PID, -- CMD, or -a");
		if (a->npids && a->argv)
			argp_error(state, "give either -p PID or -- CMD, not both");
		if (a->system_wide && a->argv)
			argp_error(state, "-a traces what runs: launch the command separately");
		if (a->system_wide && a->npids > 16)
			argp_error(state, "with -a, at most 16 -p filters");
		if (a->ncomms && !a->system_wide)
			argp_error(state, "--comm filters -a");
		if (a->switch_none && a->switch_forced)
			argp_error(state, "--switch none excludes other --switch values");
		if (a->follow && a->system_wide)
			argp_error(state, "--follow needs -p PID or -- CMD (-a traces every "
				   "instrumented process anyway)");
		if (a->follow && a->switch_forced && !a->switch_none)
			argp_error(state, "--switch cannot be combined with --follow: followed "
				   "processes are traced through corobpf probes, Go, C++20, asyncio and "
				   "Lua (--switch none leaves those but the probes out)");
		if (a->sample_hz_set && !a->stacks)
			argp_error(state, "--sample-hz samples stacks: add --stacks");
		if (a->stack_bytes && a->stacks != STACK_MODE_DWARF)
			argp_error(state, "--stack-bytes sizes --stacks=dwarf samples");
		if (a->system_wide && a->switch_forced && !a->switch_none)
			argp_error(state, "--switch cannot be combined with -a, which takes every "
				   "family corobpf knows (the switch functions in the programs started "
				   "under it); --switch none leaves them out, and -p or -- trace a "
				   "process through the families named");
		if ((t->flight_mb || t->dump_on) && !t->flight)
			argp_error(state, "--flight-mb and --dump-on set up the flight recorder: add "
				   "--flight SECS");
		if (t->flight && !ta->c.noutputs)
			argp_error(state, "--flight writes the -o outputs when asked: give -o FILE");
		for (int i = 0; t->flight && i < ta->c.noutputs; i++)
			if (pgstore_is_uri(ta->c.outputs[i]))
				argp_error(state, "--flight dumps files, not a PostgreSQL store: dump "
					   "JSONL (-o t.jsonl), then corobpf report DUMP -o URI");
		check_outputs_distinct(state, &ta->c, t->raw);
		return 0;
	}
	return parse_common(key, arg, state);
}

/* corobpf ps: trace's options, for a snapshot of running processes with their stacks. */
static error_t parse_ps(int key, char *arg, struct argp_state *state)
{
	struct trace_args *ta = state->input;
	struct capture_opts *a = &ta->t.cap;

	/* Hidden from ps --help, and refused: what ps --help does not offer, ps does not take. */
	if (key == OPT_EXEC_GATE)
		argp_error(state, "--exec-gate holds programs that -a or --follow find at their "
			   "exec; ps looks at running processes only");
	if (key == ARGP_KEY_END) {
		if (!a->npids || a->argv || a->system_wide || a->follow)
			argp_error(state, "takes -p PID (repeatable): it looks at running processes");
		if (ta->t.flight)
			argp_error(state, "--flight is for tracing (corobpf --flight SECS -o FILE "
				   "-p PID), not ps");
		if (!a->stacks)
			a->stacks = STACK_MODE_DWARF; /* ps is about stacks */
		if (!a->duration)
			a->duration = 1.0; /* the window */
	}
	return parse_trace(key, arg, state);
}

/* corobpf top: trace's options and its own. */
struct top_args {
	struct trace_args ta; /* first: parse_trace() reads the input as one */
	struct top_opts top;
};

static const char top_doc[] =
	"corobpf top: the live coroutines of the targets, on a full screen refreshed every "
	"second: a header (processes, coroutines alive and by state, events per second, events "
	"lost, how full the ring buffer is), a table of coroutines (PID, ID, NAME, STATE, FOR: "
	"how long in that state, TID: the thread it runs or last ran on, WAIT: why it is "
	"suspended, OBJECT: on what, SWITCH: times switched in, RUN: time running since first "
	"seen), and the findings as they are made. Enter shows a coroutine's detail: its recent "
	"states as a timeline and a list, with --stacks where it was spawned and where it "
	"parked, and its findings.\n"
	"\n"
	"Keys: q quit, ? help, Up/Down/PgUp/PgDn/Home/End select, Enter detail, Esc back, "
	"s/S sort by the next/previous column, 1-9 sort by that column (again: reverse), "
	"r reverse, / filter by name, space or p pause.\n"
	"\n"
	"q stops tracing as Ctrl-C does when tracing without top: the probes are detached "
	"and the targets run on, unharmed; with -- CMD, corobpf then waits for the command. "
	"-o FILE also records, as without top, and the files are finished when top ends. When "
	"stdout is not a terminal (or with --batch), a text snapshot is printed every "
	"interval instead (one at the end of a run shorter than that; a command launched "
	"with -- then writes its stdout to corobpf's stderr): a line \"# corobpf "
	"top\" with key=value figures, the line "
	"\"PID ID STATE FOR TID REASON OBJECT SWITCHES RUNNING NAME\", "
	"a line per coroutine, blank-separated with NAME last, \"# findings N\" and the newest "
	"findings, then an empty line (docs/top.md). Coroutines appear once they fire a probe.\n"
	"\v"
	"Examples:\n"
	"  sudo corobpf top -p 4242\n"
	"  sudo corobpf top --stacks -o trace.pftrace -- ./server\n"
	"  sudo corobpf top -a -d 5 > snapshots.txt\n"
	"\n" EXIT_CODES_DOC;

static const struct argp_option top_only_options[] = {
	{"interval", OPT_INTERVAL, "SECS", 0, "Seconds between refreshes (default 1)", 0},
	{"batch", OPT_BATCH, NULL, 0,
	 "Text snapshots on stdout even on a terminal (always when stdout is not one)", 0},
	{},
};

static error_t parse_top(int key, char *arg, struct argp_state *state)
{
	struct top_args *a = state->input;
	char *end;

	switch (key) {
	case OPT_INTERVAL:
		a->top.interval = strtod(arg, &end);
		if (*end || !(a->top.interval >= 0.1 && a->top.interval <= 3600))
			argp_error(state, "--interval takes seconds, 0.1 to 3600: %s", arg);
		return 0;
	case OPT_BATCH:
		a->top.batch = true;
		return 0;
	case OPT_FLIGHT:
	case OPT_FLIGHT_MB:
	case OPT_DUMP_ON:
		argp_error(state, "the flight recorder records with trace, not top: corobpf --flight "
				  "SECS -o FILE ...");
		return 0;
	}
	return parse_trace(key, arg, state);
}

static const char report_doc[] =
	"corobpf report: replay a raw capture (written with --raw), or read back a JSONL trace "
	"(plain or .gz), through the same model, detectors and outputs as the live run. Needs "
	"no privileges.\n"
	"\v"
	"Examples:\n"
	"  corobpf report cap.raw                  the summary, findings, time by kind\n"
	"                                          of coroutine, latency and run\n"
	"                                          histograms\n"
	"  corobpf report --json cap.raw           the same, as one JSON document\n"
	"  corobpf report cap.raw -o trace.jsonl   the JSONL the live run wrote\n"
	"  corobpf report cap.raw -o trace.pftrace\n"
	"                                          a Perfetto trace of it\n"
	"\n"
	"A truncated or corrupt capture is replayed up to the damage, which is named (byte "
	"offset and record count); the outputs say so, and corobpf exits with 8.\n"
	"\n" REPORT_EXIT_CODES_DOC;

static const char ps_doc[] =
	"corobpf ps: the live coroutines of running processes, seen for -d SECS (default 1): "
	"each one's state, for how long, and where it is parked (stacks are on by default: "
	"--stacks=dwarf).\n"
	"\v"
	"Examples:\n"
	"  sudo corobpf ps -p 4242\n"
	"  sudo corobpf ps -p 4242 -d 5 --stacks=fp\n"
	"\n" PS_EXIT_CODES_DOC;

static const struct argp_option report_options[] = {
	{"json", OPT_JSON, NULL, 0, "Print the analysis as one JSON document (for machines)", 0},
	{"output", 'o', "FILE", 0, "Write FILE, format from its extension (repeatable); a "
	 "postgresql:// URI stores into that database (docs/store.md; its password goes in "
	 "~/.pgpass or PGPASSFILE, not here)", 0},
	{"format", 'f', "FMT", 0,
	 "Format for every -o FILE: perfetto, jsonl, sqlite, csv, or postgresql (for a "
	 "postgresql:// URI)",
	 0},
	{"coroutine-tracks", OPT_TRACKS, "N", 0,
	 "Perfetto: a track per coroutine for the first N of each process (default 1000)", 0},
	STORE_TIMEOUT_OPTION,
	{"force", OPT_FORCE, NULL, 0, "Overwrite existing output files", 0},
	{"quiet", 'q', NULL, 0,
	 "No summary and no analysis (--json still prints its document); on stderr, only "
	 "errors and warnings",
	 0},
	{"verbose", 'v', NULL, 0, "More messages", 0},
	FINDING_OPTIONS,
	{},
};

static error_t parse_report(int key, char *arg, struct argp_state *state)
{
	struct report_args *ra = state->input;
	struct report_opts *a = &ra->r;

	switch (key) {
	case OPT_JSON:
		a->json = true;
		return 0;
	case ARGP_KEY_ARG:
		if (a->capture)
			argp_error(state, "one capture at a time");
		a->capture = arg;
		return 0;
	case ARGP_KEY_END:
		if (!a->capture)
			argp_error(state, "which capture? corobpf report FILE");
		check_outputs_distinct(state, &ra->c, NULL);
		return 0;
	}
	return parse_common(key, arg, state);
}

/* ---- the commands ---- */

/* What every command starts from: the detectors' thresholds, the model's caps. */
static void common_defaults(struct common_opts *c)
{
	analyze_opts_default(&c->an);
	pg_timeouts_default(&c->store_timeouts);
	c->max_live = MODEL_MAX_LIVE_DEFAULT;
	c->max_live_process = MODEL_MAX_LIVE_PROCESS_DEFAULT;
	c->max_spans = MODEL_MAX_SPANS_DEFAULT;
	c->max_spans_process = MODEL_MAX_SPANS_PROCESS_DEFAULT;
}

static int cmd_report(int argc, char **argv)
{
	struct argp argp = {report_options, parse_report, "CAPTURE", report_doc};
	struct report_args a = {0};

	common_defaults(&a.c);
	if (argp_parse(&argp, argc, argv, 0, NULL, &a))
		return EXIT_USAGE;
	return session_report(&a.c, &a.r);
}

/* Everything after the first "--" is the command, options and all: argp sees what is before. */
static int split_command(int *argc, char **argv, struct capture_opts *t)
{
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			if (i + 1 == *argc) {
				log_err("no command after --");
				return EXIT_USAGE;
			}
			t->argv = argv + i + 1;
			*argc = i;
			break;
		}
	}
	return 0;
}

/*
 * A live capture's options once parsed and checked: the defaults of those not given, and the
 * probe path the run takes (said once the targets are attached: session.c). Read-only from now on.
 */
static void resolve_capture_opts(struct capture_opts *o)
{
	const char *why = NULL;
	u32 asked = o->probe_path;

	if (!o->stack_bytes)
		o->stack_bytes = 4096;
	if (!o->sample_hz_set)
		o->sample_hz = 99;
	o->probe_path = batch_path_choose(asked, o->stacks != 0, &why);
	o->probe_path_asked = asked;
	o->probe_path_why = why;
}

/*
 * "--stacks fp" as "--stacks=fp". The mode is optional, so argp would take "fp" for an argument
 * of its own and refuse it; nothing else before "--" is a bare word, so a mode after --stacks is
 * its mode. The two words become one; the array is argv's own, shortened by one.
 */
static void join_stacks_mode(int *argc, char **argv)
{
	for (int i = 1; i + 1 < *argc; i++) {
		if (strcmp(argv[i], "--stacks") ||
		    (strcmp(argv[i + 1], "fp") && strcmp(argv[i + 1], "dwarf")))
			continue;
		argv[i] = !strcmp(argv[i + 1], "fp") ? "--stacks=fp" : "--stacks=dwarf";
		memmove(argv + i + 1, argv + i + 2, (size_t)(*argc - i - 2) * sizeof(*argv));
		argv[--*argc] = NULL;
	}
}

/* trace and ps: one parse, options in one struct, a parser of their own for ps. */
static int parse_live(int argc, char **argv, const struct argp *how, struct trace_args *a)
{
	const struct argp argp = *how;

	a->t.cap.ring_bytes = 16ULL << 20;
	a->t.cap.exec_gate_ms = 1000;
	common_defaults(&a->c);
	if (split_command(&argc, argv, &a->t.cap))
		return EXIT_USAGE;
	join_stacks_mode(&argc, argv);
	if (argp_parse(&argp, argc, argv, 0, NULL, a))
		return EXIT_USAGE;
	resolve_capture_opts(&a->t.cap);
	return 0;
}

static int cmd_trace(int argc, char **argv)
{
	const struct argp how = {trace_options, parse_trace, "(-p PID... | -a | -- CMD [ARGS...])",
				 trace_doc};
	struct trace_args a = {0};
	int ret = parse_live(argc, argv, &how, &a);

	return ret ? ret : session_trace(&a.c, &a.t);
}

static int cmd_ps(int argc, char **argv)
{
	/* trace's options, without those ps refuses (its --help must not offer them). */
	struct argp_option opts[ARRAY_SIZE(trace_options)];
	const struct argp how = {opts, parse_ps, "-p PID [-p PID...]", ps_doc};
	struct trace_args a = {0};
	int ret;

	memcpy(opts, trace_options, sizeof(opts));
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].key == 'a' || opts[i].key == OPT_COMM || opts[i].key == OPT_FOLLOW ||
		    opts[i].key == OPT_EXEC_GATE || opts[i].key == OPT_FLIGHT ||
		    opts[i].key == OPT_FLIGHT_MB || opts[i].key == OPT_DUMP_ON)
			opts[i].flags |= OPTION_HIDDEN;
		else if (opts[i].key == 'p')
			opts[i].doc = "Look at this running process (repeatable)";
		else if (opts[i].key == 'd')
			opts[i].doc = "Watch for SECS seconds (default 1)";
		else if (opts[i].key == 'q')
			opts[i].doc = "No progress messages: on stderr, only errors and "
				      "warnings (the table still goes to stdout)";
	ret = parse_live(argc, argv, &how, &a);

	return ret ? ret : session_ps(&a.c, &a.t);
}

/* top's options: its own, then trace's. */
static struct argp_option *top_options(void)
{
	size_t a = 0, b = 0;
	struct argp_option *o;

	while (top_only_options[a].name)
		a++;
	while (trace_options[b].name || trace_options[b].key || trace_options[b].doc)
		b++;
	o = xcalloc(a + b + 1, sizeof(*o));
	memcpy(o, top_only_options, a * sizeof(*o));
	memcpy(o + a, trace_options, b * sizeof(*o));
	for (size_t i = a; i < a + b; i++) {
		/* the flight recorder is trace's alone */
		if (o[i].key == OPT_FLIGHT || o[i].key == OPT_FLIGHT_MB || o[i].key == OPT_DUMP_ON)
			o[i].flags |= OPTION_HIDDEN;
		else if (o[i].key == 'q') /* top has no summary and no status line */
			o[i].doc = "No progress messages: on stderr, only errors and warnings";
	}
	return o;
}

static int cmd_top(int argc, char **argv)
{
	struct top_args a = {0};
	struct argp_option *opts = top_options();
	struct argp argp = {opts, parse_top, "[-p PID... | -a | -- CMD [ARGS...]]", top_doc};
	int ret = 0;

	a.ta.t.cap.ring_bytes = 16ULL << 20;
	a.top.interval = 1.0;
	common_defaults(&a.ta.c);
	if (split_command(&argc, argv, &a.ta.t.cap))
		ret = EXIT_USAGE;
	join_stacks_mode(&argc, argv);
	if (!ret && argp_parse(&argp, argc, argv, 0, NULL, &a))
		ret = EXIT_USAGE;
	if (!ret)
		resolve_capture_opts(&a.ta.t.cap);
	/*
	 * Snapshots are a stream for scripts (docs/top.md): a launched command's own stdout must not
	 * mix into it, so it goes to stderr. On a screen the command keeps the terminal.
	 */
	a.ta.t.cap.stdout_to_stderr =
		a.top.batch || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO);
	if (!ret)
		ret = session_top(&a.ta.c, &a.ta.t, &a.top);
	free(opts);
	return ret;
}

int main(int argc, char **argv)
{
	/* Started with a standard fd closed? Then no output file may take its number. */
	for (int fd; (fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2;)
		;
	argp_err_exit_status = EXIT_USAGE;
	/* The exec gate's examiner: corobpf started by itself (execsearch.h), not a command. */
	if (argc > 1 && !strcmp(argv[1], EXECSEARCH_ARG))
		return execsearch_main(argc, argv);
	scrub_store_uris(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "report")) {
		argv[1] = "corobpf report";
		return cmd_report(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "ps")) {
		argv[1] = "corobpf ps"; /* how argp names it in its messages */
		return cmd_ps(argc - 1, argv + 1);
	}
	if (argc > 1 && !strcmp(argv[1], "top")) {
		argv[1] = "corobpf top";
		return cmd_top(argc - 1, argv + 1);
	}
	return cmd_trace(argc, argv);
}
