/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * CSV output (RFC 4180, one header row): the SQLite coroutines table
 * (tables.h), every column, one row per coroutine incarnation, for pandas
 * or DuckDB; its stacks as text (`m` symbolizes them). It takes no
 * findings.
 */
#ifndef COROBPF_CSV_H
#define COROBPF_CSV_H

#include "model.h"

struct csv_sink;

struct csv_sink *csv_sink_new(struct obuf *ob, const struct model *m, struct model_observer *obs);
void csv_sink_free(struct csv_sink *s);

#endif
