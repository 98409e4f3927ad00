/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a corobpf JSONL file (schema 1, plain or gzip) back into the
 * record stream, so that `corobpf report trace.jsonl` runs the same model
 * and detectors as a replay of the raw capture. What JSONL does not carry
 * is rebuilt conservatively: the coroutine current on a thread is known
 * from switches, wakers and span owners; create, name and exit events say
 * nothing about their thread. Derived records (coroutine summaries and
 * findings) are ignored and computed again.
 */
#ifndef COROBPF_JSONL_READ_H
#define COROBPF_JSONL_READ_H

#include "capture_info.h"

/* What the JSONL writer (outputs/jsonl.c) writes and this reader reads. */
#define JSONL_SCHEMA_VERSION 1

struct coro_event_hdr;

struct jsonl_reader;

struct jsonl_reader *jsonl_reader_open(const char *path, struct capture_info *ci, char *err,
				       size_t errlen);
/* Like raw_reader_next(): 1 and *rec, 0 at the end, -1 with jsonl_reader_error(). */
int jsonl_reader_next(struct jsonl_reader *r, const struct coro_event_hdr **rec);
const char *jsonl_reader_error(const struct jsonl_reader *r);
void jsonl_reader_close(struct jsonl_reader *r);

/* True if the file looks like JSONL (starts with '{', after gzip if compressed). */
bool jsonl_file_looks_like(const char *path);

#endif
