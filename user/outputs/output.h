/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef COROBPF_OUTPUT_H
#define COROBPF_OUTPUT_H

#include "finding.h"
#include "model.h"
#include "pgstore.h"

/*
 * Outputs chosen on the command line: "-o FILE" with the format taken from
 * the extension (or forced by -f). Each output is a model observer writing
 * to a file that appears under its name only when complete. A
 * postgresql:// URI is the one output that is not a file: it never goes
 * through the output file (no --force, no rename into place).
 */
enum output_format {
	OUT_AUTO = 0,
	OUT_JSONL,
	OUT_PERFETTO,
	OUT_SQLITE,
	OUT_CSV,
	OUT_POSTGRES, /* a postgresql:// or postgres:// URI (pgstore.h), not a file */
};

struct output {
	char *path;
	enum output_format fmt;
	bool gzip;
	struct outfile file;
	struct obuf ob;
	u32 max_tracks; /* perfetto: per-coroutine tracks per process before packed lanes (0: all packed) */
	void *sink; /* format-specific state (a store's from output_open() on) */
};

enum output_format output_format_parse(const char *name); /* OUT_AUTO if unknown */
const char *output_format_name(enum output_format f);
/*
 * Whether output_open() can tell the format of `path` (forced, or from its
 * extension): the command line checks every -o before anything starts, so
 * that a typo is a usage error, not a failed run. output_format_error()
 * writes the message that lists what is understood.
 */
bool output_format_known(const char *path, enum output_format forced);
void output_format_error(const char *path, char *err, size_t errlen);
/*
 * A file is created under a temporary name; a store (a postgresql:// URI) is
 * connected to with `store` (NULL where no store may be written).
 */
int output_open(struct output *o, const char *path, enum output_format forced, bool force,
		const struct pg_opts *store, char *err, size_t errlen);
/*
 * The output's observer of model m, for the session to add to its pipeline: obs, and fs for
 * the findings (fs->finding NULL: the format takes none). 0, or -1 with the reason in err.
 */
int output_observe(struct output *o, struct model *m, struct model_observer *obs,
		   struct finding_sink *fs, char *err, size_t errlen);
int output_close(struct output *o, char *err, size_t errlen); /* commit */
void output_abort(struct output *o);
/* `path` as messages show it: a URI's password left out (pgstore_shown_uri()). */
const char *output_shown_name(const char *path, char *buf, size_t len);

#endif
