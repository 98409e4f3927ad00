/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * SQLite output (docs/sqlite.md): every trace queryable. Tables meta,
 * processes, threads, coroutines, events, slices (state intervals) and
 * findings, written in one transaction with prepared statements; indexes
 * are created at the end.
 */
#ifndef COROBPF_SQLITE_H
#define COROBPF_SQLITE_H

#include "finding.h"
#include "model.h"

#define SQLITE_SCHEMA_VERSION 1

struct sqlite_sink;

/*
 * Writes the database through `fd` (an empty file opened read-write, still
 * open after sqlite_sink_close), never opening a file by name; `path`
 * names it in messages.
 */
struct sqlite_sink *sqlite_sink_new(int fd, const char *path, struct model *m,
				    struct model_observer *obs, struct finding_sink *fs, char *err,
				    size_t errlen);
/* Finishes writing and closes the database; 0 or -1 with the reason in err. */
int sqlite_sink_close(struct sqlite_sink *s, char *err, size_t errlen);

#endif
