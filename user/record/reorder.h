/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Timestamp reordering. Records leave the ring buffer in reservation order;
 * a CPU interrupted between reserving and reading the clock can put a
 * slightly older timestamp behind a newer one. The model needs time order,
 * so records wait here until the newest timestamp seen is `window` ns past
 * theirs, and leave in (ts, arrival) order. The decision depends only on
 * the record sequence, never on wall time, so a replay of a raw capture
 * orders exactly as the live run did.
 *
 * Records that arrive in order (nearly all) are copied into a byte ring in
 * arrival order, each after its arrival number: written and read
 * sequentially, so the window streams through the cache. Only stragglers
 * are copied into size-class slabs and wait in a heap; each emit takes the
 * smaller head of the two. No allocation per record once the ring and the
 * slabs have grown to the working set.
 */
#ifndef COROBPF_REORDER_H
#define COROBPF_REORDER_H

#include "coro_abi.h"
#include "util.h"

/*
 * The window the pipeline reorders over. The batched path's records wait in
 * their thread until a copy (a switch, the 4 ms tick): a virtual CPU the
 * host did not run for 10 ms held a thread's records past a 10 ms window
 * while the other CPU's records went on (batch_killed_mid_run, once in a
 * CI run). 50 ms holds such a stall of up to about 45 ms.
 */
#define REORDER_WINDOW_NS (50 * 1000 * 1000ULL)
/*
 * What the window may hold, in bytes of records: beyond some 3.5 million
 * records a second (a flood) the window is cut to what fits, about 175,000
 * records of 40 bytes (10 ms at 17 million a second: no shorter than the
 * window of before, and its ring no larger), and what arrives later than
 * that counts as late.
 */
#define REORDER_MAX_BYTES (8ULL << 20)
/*
 * The live capture dates the records it makes itself no older than this
 * before the newest record it passed on: well inside the window, cut or not.
 */
#define REORDER_LIVE_FLOOR_NS (5 * 1000 * 1000ULL)

typedef void (*reorder_emit_fn)(void *ctx, const struct coro_event_hdr *rec);

struct reorder_item {
	u64 ts, seq;
	struct coro_event_hdr *rec;
};

#define REORDER_CLASSES 32 /* size classes of 8 bytes: records up to 256 bytes pooled */

struct reorder {
	u64 window;
	u64 max_bytes;	 /* held beyond this, the oldest leave whatever the window */
	u64 bytes;	 /* held now */
	u64 cut;	 /* records that left before the window, to keep within max_bytes */
	u64 max_ts;	 /* newest timestamp pushed */
	u64 last_out_ts; /* timestamp of the last record emitted */
	u64 seq;
	u64 late;	 /* records that arrived after newer ones had already left */
	struct reorder_item *heap;
	size_t hlen, hcap;
	/* In-order records: [u64 seq][record, 8-byte sized] entries at offsets head..tail. */
	u8 *ring;
	size_t rcap;	  /* bytes, a power of two */
	u64 rhead, rtail; /* byte offsets, growing; position = offset & (rcap - 1) */
	size_t flen;	  /* entries in the ring */
	u64 ftail_ts;	  /* timestamp of its newest entry */
	size_t len, peak; /* records held in both */
	void *free_list[REORDER_CLASSES];
	void **slabs;
	size_t nslabs;
	reorder_emit_fn emit;
	void *ctx;
};

void reorder_init(struct reorder *r, u64 window_ns, reorder_emit_fn emit, void *ctx);
void reorder_push(struct reorder *r, const struct coro_event_hdr *rec);
void reorder_drain(struct reorder *r); /* emit everything held */
void reorder_free(struct reorder *r);

#endif
