// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Outputs: one module per format; this file only picks and wires them, from
 * one table. A new format is a new module and a row of `kinds`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "csv.h"
#include "jsonl.h"
#include "output.h"
#include "perfetto.h"
#include "pgstore.h"
#include "sqlite.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- the formats' adapters: create the sink and its observer, finish, discard ---- */

static void *jsonl_create(struct output *o, struct model *m, struct model_observer *obs,
			  struct finding_sink *fs, char *err, size_t errlen)
{
	return jsonl_sink_new(&o->ob, o->path, m, obs, fs);
}

static int jsonl_finish(void *sink, char *err, size_t errlen)
{
	int ret = jsonl_sink_error(sink);

	jsonl_sink_free(sink);
	return ret;
}

static void jsonl_discard(void *sink)
{
	jsonl_sink_free(sink);
}

static void *perfetto_create(struct output *o, struct model *m, struct model_observer *obs,
			     struct finding_sink *fs, char *err, size_t errlen)
{
	return perfetto_sink_new(&o->ob, m, o->max_tracks, obs, fs);
}

static int perfetto_finish(void *sink, char *err, size_t errlen)
{
	int ret = perfetto_sink_error(sink);

	perfetto_sink_free(sink);
	return ret;
}

static void perfetto_discard(void *sink)
{
	perfetto_sink_free(sink);
}

static void *sqlite_create(struct output *o, struct model *m, struct model_observer *obs,
			   struct finding_sink *fs, char *err, size_t errlen)
{
	return sqlite_sink_new(o->file.fd, o->path, m, obs, fs, err, errlen);
}

/* Its own message in err: 0 or -1. */
static int sqlite_finish(void *sink, char *err, size_t errlen)
{
	return sqlite_sink_close(sink, err, errlen);
}

static void sqlite_discard(void *sink)
{
	char ignored[8];

	sqlite_sink_close(sink, ignored, sizeof(ignored));
}

static void *csv_create(struct output *o, struct model *m, struct model_observer *obs,
			struct finding_sink *fs, char *err, size_t errlen)
{
	return csv_sink_new(&o->ob, m, obs);
}

static int csv_finish(void *sink, char *err, size_t errlen)
{
	csv_sink_free(sink);
	return 0;
}

static void csv_discard(void *sink)
{
	csv_sink_free(sink);
}

/* Connected by output_open(): the writers start here. */
static void *pg_create(struct output *o, struct model *m, struct model_observer *obs,
		       struct finding_sink *fs, char *err, size_t errlen)
{
	return pg_sink_attach(o->sink, m, obs, fs, err, errlen) ? NULL : o->sink;
}

/* Its own message in err: 0 or -1. */
static int pg_finish(void *sink, char *err, size_t errlen)
{
	return pg_sink_close(sink, false, err, errlen);
}

static void pg_discard(void *sink)
{
	char ignored[8];

	pg_sink_close(sink, true, ignored, sizeof(ignored));
}

struct output_kind {
	enum output_format fmt;
	const char *names[3];	/* for -f: the first is its name */
	const char *exts[5];	/* file name endings that choose it */
	const char *hint;	/* the endings an error suggests */
	const char *no_gzip;	/* why it cannot be compressed, or NULL if it can */
	bool own_fd;		/* writes the file's descriptor itself (no buffer, no gzip) */
	bool findings;		/* takes findings */
	void *(*create)(struct output *o, struct model *m, struct model_observer *obs,
			struct finding_sink *fs, char *err, size_t errlen);
	/*
	 * The sink is done: frees it. 0, -errno (the output's write failed) or
	 * -1 with the reason in err.
	 */
	int (*finish)(void *sink, char *err, size_t errlen);
	void (*discard)(void *sink);
	bool not_file;		/* chosen by a URI, not an extension: no output file at all */
};

/* In the order the extension error lists them. */
static const struct output_kind kinds[] = {
	{OUT_PERFETTO, {"perfetto", "pftrace"}, {".pftrace", ".perfetto-trace", ".perfetto"},
	 ".pftrace", "compressed Perfetto traces are not written; the UI reads .pftrace", false, true,
	 perfetto_create, perfetto_finish, perfetto_discard},
	{OUT_JSONL, {"jsonl", "json"}, {".jsonl", ".jsonl.gz", ".json", ".ndjson"},
	 ".jsonl (.jsonl.gz)", NULL, false, true, jsonl_create, jsonl_finish, jsonl_discard},
	{OUT_SQLITE, {"sqlite", "db"}, {".db", ".sqlite", ".sqlite3"}, ".db",
	 "a database cannot be compressed", true, true, sqlite_create, sqlite_finish,
	 sqlite_discard},
	{OUT_CSV, {"csv"}, {".csv", ".csv.gz"}, ".csv", NULL, false, false, csv_create, csv_finish,
	 csv_discard},
	{OUT_POSTGRES, {"postgresql", "postgres"}, {NULL}, "postgresql://URI",
	 "a database cannot be compressed", true, true, pg_create, pg_finish, pg_discard, true},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static const struct output_kind *kind_of(enum output_format f)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].fmt == f)
			return &kinds[i];
	return NULL;
}

enum output_format output_format_parse(const char *name)
{
	for (size_t i = 0; i < NKINDS; i++)
		for (size_t j = 0; j < 3 && kinds[i].names[j]; j++)
			if (!strcmp(name, kinds[i].names[j]))
				return kinds[i].fmt;
	return OUT_AUTO;
}

const char *output_format_name(enum output_format f)
{
	const struct output_kind *k = kind_of(f);

	return k ? k->names[0] : "auto";
}

static enum output_format format_of_path(const char *path)
{
	if (pgstore_is_uri(path))
		return OUT_POSTGRES;
	for (size_t i = 0; i < NKINDS; i++)
		for (size_t j = 0; j < 5 && kinds[i].exts[j]; j++)
			if (ends_with(path, kinds[i].exts[j]))
				return kinds[i].fmt;
	return OUT_AUTO;
}

static void unknown_format(char *err, size_t errlen, const char *path)
{
	size_t n = snprintf(err, errlen, "cannot tell the format of %s from its extension; use ",
			    path);

	for (size_t i = 0; i < NKINDS && n < errlen; i++)
		n += snprintf(err + n, errlen - n, "%s%s",
			      i == 0 ? "" : i + 1 == NKINDS ? " or " : ", ", kinds[i].hint);
	if (n < errlen)
		n += snprintf(err + n, errlen - n, ", or give -f ");
	for (size_t i = 0; i < NKINDS && n < errlen; i++)
		n += snprintf(err + n, errlen - n, "%s%s", i ? "|" : "", kinds[i].names[0]);
}

bool output_format_known(const char *path, enum output_format forced)
{
	return forced != OUT_AUTO || format_of_path(path) != OUT_AUTO;
}

void output_format_error(const char *path, char *err, size_t errlen)
{
	unknown_format(err, errlen, path);
}

int output_open(struct output *o, const char *path, enum output_format forced, bool force,
		const struct pg_opts *store, char *err, size_t errlen)
{
	int ret;

	memset(o, 0, sizeof(*o));
	o->file.fd = -1;
	o->max_tracks = PERFETTO_DEFAULT_MAX_TRACKS;
	o->gzip = ends_with(path, ".gz");
	o->fmt = forced;
	if (o->fmt == OUT_AUTO || pgstore_is_uri(path))
		o->fmt = format_of_path(path);
	if (o->fmt == OUT_AUTO) {
		unknown_format(err, errlen, path);
		return -EINVAL;
	}
	if (kind_of(o->fmt)->not_file) {
		if (!pgstore_is_uri(path)) {
			snprintf(err, errlen, "%s: -f %s takes a postgresql:// URI, not a file", path,
				 kind_of(o->fmt)->names[0]);
			return -EINVAL;
		}
		if (!store) {
			snprintf(err, errlen, "a PostgreSQL store cannot be written here");
			return -EINVAL;
		}
		/* Connected now: a store that cannot be had fails the run before it starts. */
		o->sink = pg_sink_open(path, store, err, errlen);
		if (!o->sink)
			return -EIO;
		o->path = xstrdup(path);
		return 0;
	}
	if (o->gzip && kind_of(o->fmt)->no_gzip) {
		snprintf(err, errlen, "%s: %s", path, kind_of(o->fmt)->no_gzip);
		return -EINVAL;
	}
	ret = outfile_open(&o->file, path, force, err, errlen);
	if (ret)
		return ret;
	o->path = xstrdup(path);
	if (kind_of(o->fmt)->own_fd)
		return 0; /* the format writes through o->file.fd itself */
	ret = obuf_open_fd(&o->ob, o->file.fd, o->gzip);
	if (ret) {
		snprintf(err, errlen, "cannot start compressing %s: %s", path, strerror(-ret));
		outfile_abort(&o->file);
		return ret;
	}
	return 0;
}

int output_observe(struct output *o, struct model *m, struct model_observer *obs,
		   struct finding_sink *fs, char *err, size_t errlen)
{
	const struct output_kind *k = kind_of(o->fmt);
	void *sink;

	memset(fs, 0, sizeof(*fs));
	sink = k->create(o, m, obs, fs, err, errlen);
	/* A store's sink is open already: output_abort() closes it. */
	if (!sink)
		return -1;
	o->sink = sink;
	if (!k->findings)
		memset(fs, 0, sizeof(*fs));
	return 0;
}

static void output_free_sink(struct output *o)
{
	if (o->sink)
		kind_of(o->fmt)->discard(o->sink);
	o->sink = NULL;
}

int output_close(struct output *o, char *err, size_t errlen)
{
	const struct output_kind *k = kind_of(o->fmt);
	int ret = o->sink ? k->finish(o->sink, err, errlen) : 0;

	o->sink = NULL;
	if (k->not_file) {
		free(o->path);
		o->path = NULL;
		return ret;
	}
	if (k->own_fd) {
		/* The format wrote the file and said what failed; the message names the file. */
		if (ret) {
			if (!strstr(err, o->path)) {
				char what[512];

				snprintf(what, sizeof(what), "%s", err);
				snprintf(err, errlen, "%s: %s", o->path, what);
			}
			outfile_abort(&o->file);
		} else {
			ret = outfile_commit(&o->file, err, errlen);
		}
		free(o->path);
		o->path = NULL;
		return ret;
	}
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

const char *output_shown_name(const char *path, char *buf, size_t len)
{
	if (!pgstore_is_uri(path))
		return path;
	pgstore_shown_uri(path, buf, len);
	return buf;
}
