/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * PostgreSQL output (docs/store.md): many machines and runs in one shared
 * database. "-o postgresql://..." (or postgres://), a libpq connection URI.
 * The SQLite tables (docs/sqlite.md), each with a capture_id column, and a
 * captures table naming the machine and the run. Rows are formatted on the
 * pipeline's thread into COPY batches that a writer thread sends: the
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
 * libpq (libpq.so.5) is loaded by pg_sink_new(), not linked: the other outputs never load it.
 */
#ifndef COROBPF_PGSTORE_H
#define COROBPF_PGSTORE_H

#include "finding.h"
#include "model.h"

#define PGSTORE_SCHEMA_VERSION 1

struct pg_sink;

/* Whether `path` is a libpq connection URI this output takes. */
bool pgstore_is_uri(const char *path);
/*
 * `uri` without its password (user:secret@ -> user@, password=... dropped)
 * for messages: libpq reads the password from PGPASSWORD or ~/.pgpass.
 */
void pgstore_shown_uri(const char *uri, char *buf, size_t len);

/*
 * Connects, creates the schema if missing (checks its version if present:
 * a newer one is an error) and starts the writer thread. `replay_from`
 * names what holds the capture (--raw, or report's input) for the command
 * an error prints, or NULL.
 */
struct pg_sink *pg_sink_new(const char *uri, const char *replay_from, struct model *m,
			    struct model_observer *obs, struct finding_sink *fs, char *err,
			    size_t errlen);
/*
 * Waits for the writer to store what was handed over and closes the
 * connection; 0 or -1 with the reason (and the command that uploads the
 * capture again) in err. `discard`: the run failed; the capture stays
 * marked incomplete.
 */
int pg_sink_close(struct pg_sink *s, bool discard, char *err, size_t errlen);

#endif
