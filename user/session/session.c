// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one wiring of a run (session.h): source, pipeline, outputs and view, in
 * the order every command shares, with one path out on failure. The pipeline
 * is built, fed, finished and freed here only (outputs add their observers
 * to it through pipeline_add_output()).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "capture.h"
#include "preflight.h"
#include "signals.h"
#include "flight.h"
#include "jsonl_read.h"
#include "log.h"
#include "perfetto.h"
#include "ps.h"
#include "raw.h"
#include "modelq.h"
#include "recsink.h"
#include "report.h"
#include "ringfill.h"
#include "session.h"
#include "status.h"
#include "summary.h"
#include "top.h"

/* What the command prints of the run besides its outputs. */
enum session_view {
	VIEW_SUMMARY, /* trace: the summary on stderr, unless -q */
	VIEW_PS,      /* ps: the table of live coroutines on stdout */
	VIEW_REPORT,  /* report: the summary and the analysis on stdout, or --json alone */
	VIEW_TOP,     /* top: the live view, refreshed while the capture runs */
};

#define PS_FRAMES 12 /* per stack in the ps table */

struct session {
	const struct common_opts *c;
	const struct trace_opts *t;  /* a live capture, or NULL */
	const struct report_opts *r; /* a replay, or NULL */
	enum session_view view;

	/* Outputs: outs[0, nouts) are open. */
	struct output outs[OPTS_MAX_OUTPUTS];
	int nouts;
	struct outfile rawfile; /* --raw */
	struct raw_writer *raw;
	/* A live capture's records: the raw copy first, then the pipeline (tee_emit()). */
	struct record_sink sink;

	/* The source: a live capture or a reader. */
	struct capture cap;
	bool cap_open;
	u32 *pids;
	struct raw_reader *reader;
	struct jsonl_reader *jreader;
	struct capture_info ci;
	bool ci_set;
	char input_error[512]; /* the model's input_error points here */

	struct pipeline p;
	bool pipe_open;
	struct summary sum;
	struct report_view *rv;
	struct ps *ps;
	/* top: the view, the ring's fill it shows, and the sink it locks around the pipeline. */
	const struct top_opts *topo;
	struct top *top;
	struct ring_fill rf;
	char top_what[160];
	struct record_sink top_inner;
	struct flight *flight; /* --flight: the -o outputs are its dumps */
	struct modelq *q;      /* a live capture: the reader's records to the model thread */
	struct status *status; /* the status line on a terminal */
};

/* ---- a live capture's records: the raw capture (--raw), then the pipeline ---- */

static void tee_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct session *s = ctx;

	if (s->raw)
		raw_writer_append(s->raw, rec);
	pipeline_feed(&s->p, rec);
}

static int tee_flush(void *ctx)
{
	struct session *s = ctx;
	int err;

	if (!s->raw)
		return 0;
	err = raw_writer_flush(s->raw);
	if (err < 0)
		log_err("cannot write the raw capture: %s", strerror(-err));
	return err < 0 ? err : 0;
}

/* ---- outputs ---- */

/* " named a, b" for -a's --comm filters, or "" (a static buffer). */
static const char *comm_list(const struct capture_opts *co)
{
	static char buf[16 * 24];
	size_t n = 0;

	buf[0] = 0;
	for (u32 i = 0; i < co->ncomms && n < sizeof(buf); i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? ", " : " named ", co->comms[i]);
	return buf;
}

static int session_open_outputs(struct session *s)
{
	const struct common_opts *c = s->c;
	struct pg_opts store = {
		.timeouts = c->store_timeouts,
		.stop = &capture_stop_signal,
		.live = s->t != NULL,
		.replay_from = s->t ? s->t->raw : s->r ? s->r->capture : NULL,
	};
	char err[1024];

	for (int i = 0; i < c->noutputs; i++) {
		if (output_open(&s->outs[i], c->outputs[i], c->format, c->force, &store, err,
				sizeof(err))) {
			log_err("%s", err);
			/* A store stopped while it connected: the signal's code, as before tracing. */
			if (capture_stop_signal)
				return 128 + capture_stop_signal;
			return EXIT_OUTPUT; /* the ones before are removed by session_abort() */
		}
		s->nouts = i + 1;
		s->outs[i].max_tracks = c->coroutine_tracks_set ? c->coroutine_tracks
							       : PERFETTO_DEFAULT_MAX_TRACKS;
	}
	return 0;
}

static int session_close_outputs(struct session *s, bool announce)
{
	char err[512];
	int ret = 0;

	for (int i = 0; i < s->nouts; i++) {
		if (output_close(&s->outs[i], err, sizeof(err))) {
			log_err("%s", err);
			ret = EXIT_OUTPUT;
		} else if (announce) {
			char shown[512];

			log_info("wrote %s", output_shown_name(s->c->outputs[i], shown, sizeof(shown)));
		}
	}
	s->nouts = 0;
	return ret;
}

/* --raw, after pipeline_finish(). Returns 0 or EXIT_OUTPUT. */
static int session_close_raw(struct session *s)
{
	char err[512];
	int werr, ret = 0;

	if (!s->raw)
		return 0;
	werr = raw_writer_close(s->raw);
	s->raw = NULL;
	if (werr < 0) {
		/* Blocks before the error are whole: keep them, say where it stopped. */
		log_err("writing %s failed (%s): it holds the capture up to that point; "
			"corobpf report reads it back and names where it ends",
			s->t->raw, strerror(-werr));
		ret = EXIT_OUTPUT;
	}
	if (outfile_commit(&s->rawfile, err, sizeof(err))) {
		log_err("%s", err);
		ret = EXIT_OUTPUT;
	} else if (!werr) {
		log_info("wrote %s", s->t->raw);
	}
	return ret;
}

/* ---- open: the source and the outputs ---- */

static int session_open_live(struct session *s)
{
	const struct trace_opts *t = s->t;
	char err[512];
	int ret;

	ret = capture_preflight();
	if (ret)
		return ret;
	/* A signal from now on stops the run: connecting to a store included. */
	capture_install_signals();
	/* Outputs first: better to fail before touching the target. */
	ret = t->flight ? flight_check_outputs(s->c) : session_open_outputs(s);
	if (ret)
		return ret;
	if (t->raw && outfile_open(&s->rawfile, t->raw, s->c->force, err, sizeof(err))) {
		log_err("%s", err);
		return EXIT_OUTPUT;
	}
	if (capture_stop_signal)
		return 128 + capture_stop_signal; /* before any target is touched */
	if (t->flight)
		flight_install_signal();
	/* The model thread's queue, its memory faulted in while the capture attaches (modelq.h). */
	s->q = modelq_new(t->queue_mb ? t->queue_mb << 20 : MODELQ_DEFAULT_MEM, err, sizeof(err));
	if (!s->q) {
		log_err("%s", err);
		return EXIT_FAILURE_RUNTIME;
	}
	ret = capture_open(&s->cap, &t->cap);
	s->cap_open = true;
	if (!ret)
		ret = capture_targets(&s->cap);
	if (!ret)
		ret = capture_attach(&s->cap);
	if (!ret && capture_stop_signal)
		ret = 128 + capture_stop_signal;
	return ret;
}

/* An output over the capture it replays would destroy it: a usage error. */
static int session_check_not_input(const struct session *s)
{
	const struct common_opts *c = s->c;
	struct stat st;

	if (stat(s->r->capture, &st) < 0)
		return 0;
	for (int i = 0; i < c->noutputs; i++) {
		if (outfile_is_input(c->outputs[i], &st)) {
			log_err("-o %s would overwrite the input %s: write the output elsewhere",
				c->outputs[i], s->r->capture);
			return EXIT_USAGE;
		}
	}
	return 0;
}

static int session_open_replay(struct session *s)
{
	const char *path = s->r->capture;
	char err[512];
	int fd, ret;

	capture_install_signals(); /* a signal removes the half-written outputs */
	/*
	 * A file that cannot be opened (missing, unreadable, a directory or a FIFO) is not a
	 * damaged capture: exit 1, not 8. Asked of the file here, as the readers open it.
	 */
	fd = input_open(path, err, sizeof(err));
	if (fd < 0) {
		log_err("%s", err);
		return EXIT_FAILURE_RUNTIME;
	}
	close(fd);
	/* A raw capture, or a JSONL trace (plain or gzip) read back into records. */
	if (jsonl_file_looks_like(path))
		s->jreader = jsonl_reader_open(path, &s->ci, err, sizeof(err));
	else
		s->reader = raw_reader_open(path, &s->ci, err, sizeof(err));
	if (!s->jreader && !s->reader) {
		log_err("%s", err);
		return EXIT_BAD_CAPTURE;
	}
	s->ci_set = true;
	ret = session_check_not_input(s);
	if (ret)
		return ret;
	return session_open_outputs(s);
}

/* ---- start: the pipeline, its observers in their one order ---- */

static void session_add_top(struct session *s)
{
	struct top_config cfg = {0};
	struct model_observer obs;
	struct finding_sink fs;
	const struct capture *cap = &s->cap;

	if (s->t->cap.system_wide)
		snprintf(s->top_what, sizeof(s->top_what), "every instrumented process%s",
			 comm_list(&s->t->cap));
	else if (cap->ntargets == 1)
		snprintf(s->top_what, sizeof(s->top_what), "pid %u (%s)", cap->targets[0].pid,
			 cap->targets[0].comm);
	else
		snprintf(s->top_what, sizeof(s->top_what), "%zu processes", cap->ntargets);
	cfg.interval_s = s->topo->interval;
	cfg.text = s->topo->batch;
	cfg.stacks = s->t->cap.stacks != 0;
	cfg.what = s->top_what;
	cfg.stop = &capture_stop_signal;
	if (!ring_fill_open(&s->rf, cap)) {
		cfg.ring_fill = ring_fill_now;
		cfg.ring_ctx = &s->rf;
	}
	s->top = top_new(&s->p.model, &cfg, &obs, &fs);
	pipeline_add_observer(&s->p, &obs, &fs);
}

static void session_add_view(struct session *s)
{
	struct model_observer obs;
	struct finding_sink fs;

	switch (s->view) {
	case VIEW_SUMMARY:
		if (log_level >= LOG_INFO) {
			summary_init(&s->sum, stderr, &obs, &fs);
			pipeline_add_observer(&s->p, &obs, &fs);
		}
		break;
	case VIEW_PS:
		s->ps = ps_new(stdout, &s->p.model, &obs);
		pipeline_add_observer(&s->p, &obs, NULL);
		break;
	case VIEW_REPORT:
		/* The analysis: text after the summary, or one JSON document instead of both. */
		if (!s->r->json && log_level < LOG_INFO)
			break;
		if (!s->r->json) {
			summary_init(&s->sum, stdout, &obs, &fs);
			pipeline_add_observer(&s->p, &obs, &fs);
		}
		s->rv = report_view_new(stdout, s->r->json, &obs, &fs);
		pipeline_add_observer(&s->p, &obs, &fs);
		break;
	case VIEW_TOP:
		session_add_top(s);
		break;
	}
}

static int session_start(struct session *s)
{
	char err[512];

	if (s->t) {
		s->pids = xcalloc(s->cap.ntargets, sizeof(u32));
		for (size_t i = 0; i < s->cap.ntargets; i++)
			s->pids[i] = s->cap.targets[i].pid;
		capture_info_init_live(&s->ci, s->pids, s->cap.ntargets);
		s->ci_set = true;
	}
	/* The detectors first (pipeline_init), then the outputs in -o order, then the view. */
	pipeline_init(&s->p, &s->ci, &s->c->an);
	model_limit(&s->p.model, s->c->max_live, s->c->max_live_process);
	model_limit_spans(&s->p.model, s->c->max_spans, s->c->max_spans_process);
	s->pipe_open = true;
	for (int i = 0; i < s->nouts; i++) {
		if (pipeline_add_output(&s->p, &s->outs[i], err, sizeof(err))) {
			log_err("%s", err);
			return EXIT_OUTPUT;
		}
	}
	session_add_view(s);
	if (s->t && s->t->flight)
		s->flight = flight_new(s->c, s->t, &s->ci, &s->p);
	if (s->t && s->t->raw) {
		s->raw = raw_writer_open(s->rawfile.fd, &s->ci, err, sizeof(err));
		if (!s->raw) {
			log_err("%s: %s", s->t->raw, err);
			return EXIT_OUTPUT;
		}
	}
	pipeline_begin(&s->p);
	return 0;
}

/* ---- feed ---- */

/* top: every record reaches the pipeline under the view's lock (top.h). */
static void top_sink_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct session *s = ctx;

	top_lock(s->top);
	record_sink_emit(&s->top_inner, rec);
	top_unlock(s->top);
}

static int top_sink_flush(void *ctx)
{
	struct session *s = ctx;
	int ret = 0;

	top_lock(s->top);
	if (s->top_inner.flush)
		ret = s->top_inner.flush(s->top_inner.ctx);
	top_unlock(s->top);
	return ret;
}

/* From the capture's loop: the flight recorder's dumps, the status line. */
static void session_tick(void *ctx)
{
	struct session *s = ctx;
	u64 bytes;

	if (s->flight)
		flight_tick(s->flight);
	if (!s->status)
		return;
	bytes = status_file_bytes(s->rawfile.fd) + flight_bytes_written(s->flight);
	for (int i = 0; i < s->nouts; i++)
		bytes += status_file_bytes(s->outs[i].file.fd);
	status_tick(s->status, bytes);
}

/* Which path the probes take, and why not the one asked for: said once the targets are attached. */
static void session_say_probe_path(const struct session *s)
{
	const struct capture_opts *o = &s->t->cap;
	const char *why = o->probe_path_why;

	if (why && o->probe_path_asked == PROBE_PATH_BATCHED)
		log_warn("--probe-path batched: %s: the trap path is used", why);
	else if (why)
		log_info("probe path: trap, not batched: %s", why);
	if (o->probe_path == PROBE_PATH_BATCHED)
		log_info("probe path: batched (records kept in each thread, copied out by BPF)");
	else
		log_verbose("probe path: trap (a uprobe trap per event)");
}

/*
 * Until the source ends. Returns an exit code that aborts the session (a
 * command that could not be run, a signal during a replay), or 0 with *code
 * the exit code the run ends with if nothing later fails.
 */
static int session_feed_live(struct session *s, int *code)
{
	const struct trace_opts *t = s->t;
	const struct capture *cap = &s->cap;
	struct record_sink qsink;
	int ret, qret;

	session_say_probe_path(s);
	if (t->cap.system_wide)
		log_info("tracing every instrumented process%s%s", comm_list(&t->cap),
			 t->cap.duration ? "" : "; Ctrl-C to stop");
	else if (cap->ntargets == 1)
		log_info("tracing %s (pid %u)%s", cap->targets[0].comm, cap->targets[0].pid,
			 t->cap.duration ? "" : "; Ctrl-C to stop");
	else
		log_info("tracing %zu processes%s", cap->ntargets,
			 t->cap.duration ? "" : "; Ctrl-C to stop");
	s->sink = (struct record_sink){.emit = tee_emit, .flush = tee_flush, .ctx = s};
	if (s->flight)
		s->sink = flight_sink(s->flight, s->sink);
	if (s->top) {
		s->top_inner = s->sink;
		s->sink = (struct record_sink){.emit = top_sink_emit, .flush = top_sink_flush,
					       .ctx = s};
		ret = top_start(s->top);
		if (ret) {
			log_err("cannot start the top view: %s", strerror(-ret));
			return EXIT_FAILURE_RUNTIME;
		}
	}
	if (s->view == VIEW_SUMMARY)
		s->status = status_new(&s->p.model);
	/* Everything behind the sink runs on the model thread, ticked there (modelq.h). */
	modelq_begin(s->q, s->sink, session_tick, s);
	qsink = modelq_sink(s->q);
	ret = capture_run(&s->cap, &qsink);
	top_stop(s->top); /* q stops the capture as Ctrl-C does; the screen goes first */
	/* What the model thread has not yet followed, processed now; the status line shows it. */
	qret = modelq_finish(s->q);
	status_end(s->status); /* before the summary and any message of the end */
	s->status = NULL;
	modelq_say(s->q);
	if (ret == EXIT_LAUNCH)
		return ret;
	if (qret < 0 && !ret)
		ret = EXIT_OUTPUT;
	*code = ret;
	return 0;
}

static int session_feed_replay(struct session *s, int *code)
{
	const struct coro_event_hdr *rec;
	int ret = 0;

	while (!capture_stop_signal &&
	       (ret = s->reader ? raw_reader_next(s->reader, &rec)
				: jsonl_reader_next(s->jreader, &rec)) == 1)
		pipeline_feed(&s->p, rec);
	if (capture_stop_signal)
		return 128 + capture_stop_signal;
	if (ret < 0) {
		/* Keep everything before the damage; say where it is, in the outputs too. */
		snprintf(s->input_error, sizeof(s->input_error), "%s",
			 s->reader ? raw_reader_error(s->reader) : jsonl_reader_error(s->jreader));
		s->p.model.input_error = s->input_error;
		log_err("%s: %s", s->r->capture, s->input_error);
		*code = EXIT_BAD_CAPTURE;
	}
	return 0;
}

/* ---- finish, abort ---- */

/* What both ends free, in reverse order of opening. */
static void session_release(struct session *s)
{
	top_stop(s->top); /* its thread reads the pipeline */
	modelq_free(s->q); /* its thread feeds the pipeline */
	flight_free(s->flight);
	status_end(s->status);
	if (s->pipe_open)
		pipeline_free(&s->p);
	if (s->rv)
		report_view_free(s->rv);
	ps_free(s->ps);
	top_free(s->top);
	ring_fill_close(&s->rf);
	if (s->cap_open)
		capture_close(&s->cap);
	raw_reader_close(s->reader);
	jsonl_reader_close(s->jreader);
	if (s->ci_set)
		capture_info_free(&s->ci);
	free(s->pids);
}

static int session_finish(struct session *s, int code)
{
	int ret;

	pipeline_finish(&s->p);
	if (s->ps)
		ps_print(s->ps, s->t->cap.duration, PS_FRAMES);
	ret = session_close_raw(s);
	if (ret)
		code = ret;
	/* A live run says what it wrote; a replay's stdout is the report. */
	ret = session_close_outputs(s, s->t != NULL);
	if (ret)
		code = ret;
	ret = s->flight ? flight_finish(s->flight) : 0;
	if (ret)
		code = ret;
	if (s->cap_open && s->cap.ntargets && s->cap.targets[0].launched) {
		int status = capture_wait_child(&s->cap);

		/* The command's status, unless corobpf itself failed. */
		if (!code)
			code = status;
	}
	session_release(s);
	return code;
}

/* The one path out on failure, from any step: nothing half-written is left. */
static void session_abort(struct session *s)
{
	if (s->cap_open)
		capture_kill_child(&s->cap);
	if (s->raw)
		raw_writer_close(s->raw);
	s->raw = NULL;
	outfile_abort(&s->rawfile);
	for (int i = 0; i < s->nouts; i++)
		output_abort(&s->outs[i]);
	s->nouts = 0;
	session_release(s);
}

static int session_run(struct session *s)
{
	int ret, code = 0;

	ret = s->t ? session_open_live(s) : session_open_replay(s);
	if (!ret)
		ret = session_start(s);
	if (!ret)
		ret = s->t ? session_feed_live(s, &code) : session_feed_replay(s, &code);
	if (ret) {
		session_abort(s);
		return ret;
	}
	return session_finish(s, code);
}

/* ---- the commands ---- */

static void session_init(struct session *s, const struct common_opts *c, enum session_view view)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->view = view;
	s->rawfile.fd = -1;
}

static void session_init_live(struct session *s, const struct trace_opts *t)
{
	s->t = t;
}

int session_trace(const struct common_opts *c, const struct trace_opts *t)
{
	struct session s;

	session_init(&s, c, VIEW_SUMMARY);
	session_init_live(&s, t);
	return session_run(&s);
}

int session_ps(const struct common_opts *c, const struct trace_opts *t)
{
	struct session s;

	session_init(&s, c, VIEW_PS);
	session_init_live(&s, t);
	return session_run(&s);
}

int session_top(const struct common_opts *c, const struct trace_opts *t,
		const struct top_opts *top)
{
	struct session s;

	session_init(&s, c, VIEW_TOP);
	session_init_live(&s, t);
	s.topo = top;
	return session_run(&s);
}

int session_report(const struct common_opts *c, const struct report_opts *r)
{
	struct session s;

	session_init(&s, c, VIEW_REPORT);
	s.r = r;
	return session_run(&s);
}
