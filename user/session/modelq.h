/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * modelq.h: the queue between a live capture's reader and everything behind
 * it (the flight recorder, the raw capture, the pipeline and its outputs),
 * which run on a thread of their own, the model thread.
 *
 * The reader (the capture's loop) copies each record into a chunk of 1 MiB
 * and hands the chunk over when it is full, or when the ring has nothing
 * more for now (record_sink.idle): no lock, allocation or wake per record.
 * The model thread takes chunks in order and hands each record to the inner
 * sink, exactly as the capture would have.
 *
 * Bounded: at most `mem_limit` bytes of chunks wait in memory, reserved at
 * the start and faulted in by the model thread as the capture starts, up
 * to the default's 128 MiB (a page fault per 4 KiB taken by the reader in
 * a flood costs it events). Beyond it a
 * full chunk is written to a temporary file (unnamed, O_TMPFILE, in
 * $TMPDIR or /var/tmp) and read back, in its turn, by the model thread;
 * the file's space is given back as it is read. The file may hold at most
 * half the free space its filesystem had at the start (and 16 GiB). When
 * both are full, or the file cannot be made, the reader waits for the model
 * thread: the ring buffer fills behind it and the BPF side counts what it
 * drops, as it always does. modelq_say() names that cause and its remedy.
 *
 * The model thread runs at a lower priority than the reader while the
 * capture runs (nice +19 over the process's), so that on a busy machine it
 * is the model, not the ring, that falls behind; at the end of the capture
 * it is raised back and what it has not yet followed is processed after.
 *
 * Threads: modelq_sink()'s emit, idle and flush, modelq_finish() and
 * modelq_say() belong to the reader; the inner sink and the tick are called
 * on the model thread only. flush asks the model thread to flush the inner
 * sink and returns the error of an earlier flush, if any (the capture then
 * stops, as it did when it flushed the sink itself).
 */
#ifndef COROBPF_MODELQ_H
#define COROBPF_MODELQ_H

#include "recsink.h"
#include "util.h"

#define MODELQ_CHUNK (1u << 20)
#define MODELQ_DEFAULT_MEM (128ull << 20)
#define MODELQ_SPILL_MAX (16ull << 30)

struct modelq;

struct modelq_stats {
	u64 records;	     /* handed to the inner sink */
	u64 bytes;	     /* of records queued */
	u64 peak_behind;     /* bytes queued not yet processed, at most */
	u64 spilled;	     /* bytes written to the temporary file */
	u64 waits;	     /* times the reader waited for the model thread */
	u64 wait_ns;	     /* for this long in all */
	u64 behind_at_end;   /* bytes not yet processed when the capture ended */
	u64 catch_up_ns;     /* from modelq_finish() to the last record processed */
	int spill_errno;     /* why there is no temporary file, or 0 */
	char spill_dir[256]; /* where the temporary file is, or would be */
};

/*
 * A queue of mem_limit bytes of chunks (at least 2), its model thread
 * started: it faults the memory in, then waits for modelq_begin(). Made
 * before the capture attaches, so that the faults are done by the time
 * records come. NULL and err said on failure.
 */
struct modelq *modelq_new(u64 mem_limit, char *err, size_t errlen);
/*
 * Records from now on go to `inner`, on the model thread; tick (or NULL)
 * is called there about every 20 ms.
 */
void modelq_begin(struct modelq *q, struct record_sink inner, void (*tick)(void *), void *tick_ctx);
/* The reader's sink: records in (copied), idle, flush. */
struct record_sink modelq_sink(struct modelq *q);
/*
 * No more records: the model thread, at the reader's priority again,
 * processes what is queued and stops. Returns the inner sink's last flush
 * error, or 0. The inner sink is the caller's again after it.
 */
int modelq_finish(struct modelq *q);
void modelq_stats(const struct modelq *q, struct modelq_stats *st);
/* On stderr: the model's backlog when it was worth saying, and any wait of the reader with its remedy. */
void modelq_say(const struct modelq *q);
void modelq_free(struct modelq *q);

#endif
