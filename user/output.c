// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Outputs: one module per format; this file only picks and wires them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "perfetto.h"
#include "sqlite.h"
#include <unistd.h>
#include "output.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

enum output_format output_format_parse(const char *name)
{
	if (!strcmp(name, "jsonl") || !strcmp(name, "json"))
		return OUT_JSONL;
	if (!strcmp(name, "perfetto") || !strcmp(name, "pftrace"))
		return OUT_PERFETTO;
	if (!strcmp(name, "sqlite") || !strcmp(name, "db"))
		return OUT_SQLITE;
	if (!strcmp(name, "csv"))
		return OUT_CSV;
	return OUT_AUTO;
}

const char *output_format_name(enum output_format f)
{
	switch (f) {
	case OUT_JSONL: return "jsonl";
	case OUT_PERFETTO: return "perfetto";
	case OUT_SQLITE: return "sqlite";
	case OUT_CSV: return "csv";
	case OUT_AUTO: break;
	}
	return "auto";
}

int output_open(struct output *o, const char *path, enum output_format forced, bool force,
		char *err, size_t errlen)
{
	int ret;

	memset(o, 0, sizeof(*o));
	o->file.fd = -1;
	o->max_tracks = PERFETTO_DEFAULT_MAX_TRACKS;
	o->gzip = ends_with(path, ".gz");
	o->fmt = forced;
	if (o->fmt == OUT_AUTO) {
		if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz") ||
		    ends_with(path, ".json") || ends_with(path, ".ndjson"))
			o->fmt = OUT_JSONL;
		else if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace") ||
			 ends_with(path, ".perfetto"))
			o->fmt = OUT_PERFETTO;
		else if (ends_with(path, ".db") || ends_with(path, ".sqlite") ||
			 ends_with(path, ".sqlite3"))
			o->fmt = OUT_SQLITE;
		else if (ends_with(path, ".csv") || ends_with(path, ".csv.gz"))
			o->fmt = OUT_CSV;
	}
	if (o->fmt == OUT_AUTO) {
		snprintf(err, errlen, "cannot tell the format of %s from its extension; use "
			 ".pftrace, .jsonl (.jsonl.gz), .db or .csv, or give "
			 "-f perfetto|jsonl|sqlite|csv", path);
		return -EINVAL;
	}
	if (o->fmt == OUT_SQLITE && o->gzip) {
		snprintf(err, errlen, "%s: a database cannot be compressed", path);
		return -EINVAL;
	}
	if (o->fmt == OUT_PERFETTO && o->gzip) {
		snprintf(err, errlen, "%s: compressed Perfetto traces are not written; the UI "
			 "reads .pftrace", path);
		return -EINVAL;
	}
	ret = outfile_open(&o->file, path, force, err, errlen);
	if (ret)
		return ret;
	o->path = xstrdup(path);
	if (o->fmt == OUT_SQLITE)
		return 0; /* SQLite writes through o->file.fd itself */
	ret = obuf_open_fd(&o->ob, o->file.fd, o->gzip);
	if (ret) {
		snprintf(err, errlen, "cannot start compressing %s: %s", path, strerror(-ret));
		outfile_abort(&o->file);
		return ret;
	}
	return 0;
}

int output_attach(struct output *o, struct pipeline *p, char *err, size_t errlen)
{
	struct model_observer obs;
	struct finding_sink fs;

	switch (o->fmt) {
	case OUT_JSONL:
		o->sink = jsonl_sink_new(&o->ob, o->path, &p->model, &obs, &fs);
		pipeline_add_observer(p, &obs, &fs);
		break;
	case OUT_PERFETTO:
		o->sink = perfetto_sink_new(&o->ob, &p->model, o->max_tracks, &obs, &fs);
		pipeline_add_observer(p, &obs, &fs);
		break;
	case OUT_SQLITE:
		o->sink = sqlite_sink_new(o->file.fd, o->path, &p->model, &obs, &fs, err, errlen);
		if (!o->sink)
			return -1;
		pipeline_add_observer(p, &obs, &fs);
		break;
	case OUT_CSV:
		o->sink = csv_sink_new(&o->ob, &obs); /* the coroutines table: no findings */
		pipeline_add_observer(p, &obs, NULL);
		break;
	case OUT_AUTO:
		break;
	}
	return 0;
}

static int output_sink_error(struct output *o)
{
	if (!o->sink)
		return 0;
	switch (o->fmt) {
	case OUT_JSONL: return jsonl_sink_error(o->sink);
	case OUT_PERFETTO: return perfetto_sink_error(o->sink);
	case OUT_SQLITE:
	case OUT_CSV:
	case OUT_AUTO: break;
	}
	return 0;
}

static void output_free_sink(struct output *o)
{
	if (o->sink && o->fmt == OUT_JSONL)
		jsonl_sink_free(o->sink);
	if (o->sink && o->fmt == OUT_PERFETTO)
		perfetto_sink_free(o->sink);
	if (o->sink && o->fmt == OUT_CSV)
		csv_sink_free(o->sink);
	if (o->sink && o->fmt == OUT_SQLITE) {
		char ignored[8];

		sqlite_sink_close(o->sink, ignored, sizeof(ignored));
	}
	o->sink = NULL;
}

int output_close(struct output *o, char *err, size_t errlen)
{
	int ret = 0;

	if (o->fmt == OUT_SQLITE) {
		ret = sqlite_sink_close(o->sink, err, errlen);
		o->sink = NULL;
		if (ret) {
			outfile_abort(&o->file);
			free(o->path);
			o->path = NULL;
			return ret;
		}
		ret = outfile_commit(&o->file, err, errlen);
		free(o->path);
		o->path = NULL;
		return ret;
	}
	ret = output_sink_error(o);
	output_free_sink(o);
	if (!ret)
		ret = obuf_close(&o->ob);
	else
		obuf_close(&o->ob);
	if (ret) {
		snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(-ret));
		outfile_abort(&o->file);
	} else {
		ret = outfile_commit(&o->file, err, errlen);
	}
	free(o->path);
	o->path = NULL;
	return ret;
}

void output_abort(struct output *o)
{
	output_free_sink(o);
	if (o->ob.buf)
		obuf_close(&o->ob);
	outfile_abort(&o->file);
	free(o->path);
	o->path = NULL;
}
