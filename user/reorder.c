// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "reorder.h"

#define SLAB_BYTES (64 * 1024)

void reorder_init(struct reorder *r, u64 window_ns, reorder_emit_fn emit, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->window = window_ns;
	r->emit = emit;
	r->ctx = ctx;
	r->hcap = 1024;
	r->heap = xmalloc(r->hcap * sizeof(*r->heap));
	r->fcap = 1024;
	r->fifo = xmalloc(r->fcap * sizeof(*r->fifo));
}

static void *rec_alloc(struct reorder *r, size_t size)
{
	size_t cls = size / 8 - 1;
	void *p;

	if (cls >= REORDER_CLASSES)
		return xmalloc(size);
	if (!r->free_list[cls]) {
		/* Carve a new slab into objects of this class. */
		size_t n = SLAB_BYTES / size;
		char *slab = xmalloc(n * size);

		r->slabs = xrealloc(r->slabs, (r->nslabs + 1) * sizeof(*r->slabs));
		r->slabs[r->nslabs++] = slab;
		for (size_t i = 0; i < n; i++) {
			*(void **)(slab + i * size) = r->free_list[cls];
			r->free_list[cls] = slab + i * size;
		}
	}
	p = r->free_list[cls];
	r->free_list[cls] = *(void **)p;
	return p;
}

static void rec_free(struct reorder *r, struct coro_event_hdr *rec)
{
	size_t cls = rec->size / 8 - 1;

	if (cls >= REORDER_CLASSES) {
		free(rec);
		return;
	}
	*(void **)rec = r->free_list[cls];
	r->free_list[cls] = rec;
}

static inline bool item_less(const struct reorder_item *a, const struct reorder_item *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->seq < b->seq);
}

static void heap_push(struct reorder *r, struct reorder_item it)
{
	size_t i;

	if (r->hlen == r->hcap) {
		r->hcap *= 2;
		r->heap = xrealloc(r->heap, r->hcap * sizeof(*r->heap));
	}
	i = r->hlen++;
	while (i) {
		size_t parent = (i - 1) / 2;

		if (!item_less(&it, &r->heap[parent]))
			break;
		r->heap[i] = r->heap[parent];
		i = parent;
	}
	r->heap[i] = it;
}

static struct reorder_item heap_pop(struct reorder *r)
{
	struct reorder_item top = r->heap[0], last = r->heap[--r->hlen];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= r->hlen)
			break;
		if (c + 1 < r->hlen && item_less(&r->heap[c + 1], &r->heap[c]))
			c++;
		if (!item_less(&r->heap[c], &last))
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (r->hlen)
		r->heap[i] = last;
	return top;
}

static void fifo_push(struct reorder *r, struct reorder_item it)
{
	if (r->flen == r->fcap) {
		/* Unroll the ring into a buffer twice the size. */
		struct reorder_item *n = xmalloc(2 * r->fcap * sizeof(*n));

		for (size_t i = 0; i < r->flen; i++)
			n[i] = r->fifo[(r->fhead + i) & (r->fcap - 1)];
		free(r->fifo);
		r->fifo = n;
		r->fhead = 0;
		r->fcap *= 2;
	}
	r->fifo[(r->fhead + r->flen++) & (r->fcap - 1)] = it;
}

/* The oldest held record: the smaller of the FIFO's head and the heap's top. */
static const struct reorder_item *peek(const struct reorder *r, bool *from_fifo)
{
	const struct reorder_item *f = r->flen ? &r->fifo[r->fhead] : NULL;
	const struct reorder_item *h = r->hlen ? &r->heap[0] : NULL;

	*from_fifo = f && (!h || item_less(f, h));
	return *from_fifo ? f : h;
}

static void emit_one(struct reorder *r)
{
	struct reorder_item it;
	bool from_fifo;

	peek(r, &from_fifo);
	if (from_fifo) {
		it = r->fifo[r->fhead];
		r->fhead = (r->fhead + 1) & (r->fcap - 1);
		r->flen--;
	} else {
		it = heap_pop(r);
	}
	r->len--;
	/*
	 * Held records have left the cache by the time they are due (the window
	 * holds megabytes): fetch the next ones while this one is processed.
	 */
	if (r->flen) {
		const char *n = (const char *)r->fifo[r->fhead].rec;

		__builtin_prefetch(n);
		__builtin_prefetch(n + 63);
		if (r->flen > 1)
			__builtin_prefetch(r->fifo[(r->fhead + 1) & (r->fcap - 1)].rec);
	}
	if (r->hlen)
		__builtin_prefetch(r->heap[0].rec);
	if (it.ts < r->last_out_ts)
		r->late++;
	else
		r->last_out_ts = it.ts;
	r->emit(r->ctx, it.rec);
	rec_free(r, it.rec);
}

void reorder_push(struct reorder *r, const struct coro_event_hdr *rec)
{
	struct reorder_item it;
	const struct reorder_item *oldest;
	bool from_fifo;

	it.rec = rec_alloc(r, rec->size);
	memcpy(it.rec, rec, rec->size);
	it.ts = rec->ts;
	it.seq = r->seq++;
	/* In order with the FIFO's tail: O(1). A straggler: the heap. */
	if (!r->flen || it.ts >= r->fifo[(r->fhead + r->flen - 1) & (r->fcap - 1)].ts)
		fifo_push(r, it);
	else
		heap_push(r, it);
	if (++r->len > r->peak)
		r->peak = r->len;
	if (rec->ts > r->max_ts)
		r->max_ts = rec->ts;
	while ((oldest = peek(r, &from_fifo)) && oldest->ts + r->window < r->max_ts)
		emit_one(r);
}

void reorder_drain(struct reorder *r)
{
	while (r->len)
		emit_one(r);
}

void reorder_free(struct reorder *r)
{
	while (r->hlen) {
		struct reorder_item it = heap_pop(r);

		rec_free(r, it.rec);
	}
	for (size_t i = 0; i < r->flen; i++)
		rec_free(r, r->fifo[(r->fhead + i) & (r->fcap - 1)].rec);
	for (size_t i = 0; i < r->nslabs; i++)
		free(r->slabs[i]);
	free(r->slabs);
	free(r->heap);
	free(r->fifo);
	memset(r, 0, sizeof(*r));
}
