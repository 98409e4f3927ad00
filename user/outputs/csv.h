/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CSV output (RFC 4180, one header row): a subset of the SQLite coroutines
 * table, one row per coroutine incarnation, for pandas or DuckDB. It takes
 * no findings.
 */
#ifndef COROBPF_CSV_H
#define COROBPF_CSV_H

#include "model.h"

struct csv_sink;

struct csv_sink *csv_sink_new(struct obuf *ob, struct model_observer *obs);
void csv_sink_free(struct csv_sink *s);

#endif
