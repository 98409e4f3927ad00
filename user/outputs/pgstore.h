/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * PostgreSQL output (docs/store.md): many machines and runs in one shared
 * database. "-o postgresql://..." (or postgres://), a libpq connection URI.
 * The SQLite tables (docs/sqlite.md), each with a capture_id column, and a
 * captures table naming the machine and the run. Rows are formatted on the
 * pipeline's thread into COPY batches that writer threads send: the
 * pipeline never waits on the network.
 *
 * A capture's id is derived from its raw header (hostname, kernel, start
 * time, boot clock offset), so a live run and a later upload of its --raw
 * capture carry the same id. Its captures row is written first with
 * complete = false and marked complete only after every row is stored. A
 * complete capture is never written twice: uploading it again is skipped
 * (said on stderr, exit 0); an incomplete one (an earlier run or upload
 * that failed) is replaced.
 *
 * Every wait on the server is bounded (pgconn.h): the connect, lock and
 * statement timeouts, a stop while the store is opened, a server that stops
 * answering once tracing stopped. The password is libpq's to find
 * (PGPASSWORD, ~/.pgpass, a service file); one in the URI is never shown.
 *
 * libpq (libpq.so.5) is loaded when a store is opened, not linked: the other outputs never load it.
 */
#ifndef COROBPF_PGSTORE_H
#define COROBPF_PGSTORE_H

#include <signal.h>
#include "finding.h"
#include "model.h"
#include "pgparams.h" /* the timeouts, the URIs */

#define PGSTORE_SCHEMA_VERSION 2

struct pg_sink;

/* How a run opens its store. */
struct pg_opts {
	struct pg_timeouts timeouts;
	/* The run's stop signal (capture.h): it ends the opening at once; later, a wait for a
	 * server that stopped answering (pgconn.h). NULL: none. */
	volatile sig_atomic_t *stop;
	bool live; /* a live run: -d and signals stop tracing (a replay's end is its file's) */
	/* What holds the whole capture (--raw, or report's input), for the command an error
	 * prints; or NULL. */
	const char *replay_from;
};


/*
 * Connects (every writer's connection), creates the schema if missing
 * (checks its version if present: another one is an error), each wait
 * bounded. NULL with the reason in err; a signal that stopped it is the
 * run's stop signal (opts->stop).
 */
struct pg_sink *pg_sink_open(const char *uri, const struct pg_opts *opts, char *err,
			     size_t errlen);
/* Starts the writer threads; the observers the pipeline calls. 0, or -1 with err. */
int pg_sink_attach(struct pg_sink *s, struct model *m, struct model_observer *obs,
		   struct finding_sink *fs, char *err, size_t errlen);
/*
 * Waits for the writers to store what was handed over and closes the
 * connections; 0 or -1 with the reason (and the command that uploads the
 * capture again) in err. `discard`: the run failed; what the writers wait
 * for is given up, and the capture stays marked incomplete.
 */
int pg_sink_close(struct pg_sink *s, bool discard, char *err, size_t errlen);

#endif
