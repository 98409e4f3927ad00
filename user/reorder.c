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
	r->cap = 1024;
	r->heap = xmalloc(r->cap * sizeof(*r->heap));
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

	if (r->len == r->cap) {
		r->cap *= 2;
		r->heap = xrealloc(r->heap, r->cap * sizeof(*r->heap));
	}
	i = r->len++;
	while (i) {
		size_t parent = (i - 1) / 2;

		if (!item_less(&it, &r->heap[parent]))
			break;
		r->heap[i] = r->heap[parent];
		i = parent;
	}
	r->heap[i] = it;
	if (r->len > r->peak)
		r->peak = r->len;
}

static struct reorder_item heap_pop(struct reorder *r)
{
	struct reorder_item top = r->heap[0], last = r->heap[--r->len];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= r->len)
			break;
		if (c + 1 < r->len && item_less(&r->heap[c + 1], &r->heap[c]))
			c++;
		if (!item_less(&r->heap[c], &last))
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (r->len)
		r->heap[i] = last;
	return top;
}

static void emit_one(struct reorder *r)
{
	struct reorder_item it = heap_pop(r);

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

	it.rec = rec_alloc(r, rec->size);
	memcpy(it.rec, rec, rec->size);
	it.ts = rec->ts;
	it.seq = r->seq++;
	heap_push(r, it);
	if (rec->ts > r->max_ts)
		r->max_ts = rec->ts;
	while (r->len && r->heap[0].ts + r->window < r->max_ts)
		emit_one(r);
}

void reorder_drain(struct reorder *r)
{
	while (r->len)
		emit_one(r);
}

void reorder_free(struct reorder *r)
{
	while (r->len) {
		struct reorder_item it = heap_pop(r);

		rec_free(r, it.rec);
	}
	for (size_t i = 0; i < r->nslabs; i++)
		free(r->slabs[i]);
	free(r->slabs);
	free(r->heap);
	memset(r, 0, sizeof(*r));
}
