// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "reorder.h"

#define SLAB_BYTES (64 * 1024)

void reorder_init(struct reorder *r, u64 window_ns, reorder_emit_fn emit, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->window = window_ns;
	r->max_bytes = REORDER_MAX_BYTES;
	r->emit = emit;
	r->ctx = ctx;
	r->hcap = 1024;
	r->heap = xmalloc(r->hcap * sizeof(*r->heap));
	r->rcap = 64 * 1024;
	r->ring = xmalloc(r->rcap);
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

/* Ring entries never wrap: a SKIP in place of the seq pads the rest to the ring's end. */
#define RING_SKIP (~0ULL)
#define ENTRY_BYTES(size) (8 + ROUND_UP((size_t)(size), 8))

static inline u8 *ring_at(const struct reorder *r, u64 off)
{
	return r->ring + (off & (r->rcap - 1));
}

/* The oldest ring entry's offset, past any padding at the ring's end. */
static inline u64 ring_head(struct reorder *r)
{
	if (*(const u64 *)ring_at(r, r->rhead) == RING_SKIP)
		r->rhead = ROUND_UP(r->rhead + 1, r->rcap);
	return r->rhead;
}

/* Room for n more bytes, with the padding a wrap may take: a bigger ring, entries kept in order. */
static void ring_room(struct reorder *r, size_t n)
{
	size_t cap = r->rcap;
	u8 *ring;
	u64 off, to = 0;

	while (r->rtail - r->rhead + n + n > cap)
		cap *= 2;
	if (cap == r->rcap)
		return;
	ring = xmalloc(cap);
	for (size_t i = 0; i < r->flen; i++) {
		const struct coro_event_hdr *h;
		size_t e;

		off = ring_head(r);
		h = (const void *)(ring_at(r, off) + 8);
		e = ENTRY_BYTES(h->size);
		memcpy(ring + to, ring_at(r, off), e);
		to += e;
		r->rhead = off + e;
	}
	free(r->ring);
	r->ring = ring;
	r->rcap = cap;
	r->rhead = 0;
	r->rtail = to;
}

static void ring_push(struct reorder *r, const struct coro_event_hdr *rec, u64 seq)
{
	size_t e = ENTRY_BYTES(rec->size), left;

	ring_room(r, e);
	left = r->rcap - (r->rtail & (r->rcap - 1));
	if (left < e) {
		*(u64 *)ring_at(r, r->rtail) = RING_SKIP;
		r->rtail += left;
	}
	*(u64 *)ring_at(r, r->rtail) = seq;
	memcpy(ring_at(r, r->rtail) + 8, rec, rec->size);
	r->rtail += e;
	r->flen++;
	r->ftail_ts = rec->ts;
}

/* The oldest held record: the smaller of the ring's head and the heap's top. */
static const struct coro_event_hdr *peek(struct reorder *r, bool *from_ring)
{
	const struct coro_event_hdr *f = NULL;
	const struct reorder_item *h = r->hlen ? &r->heap[0] : NULL;
	u64 fseq = 0;

	if (r->flen) {
		const u8 *e = ring_at(r, ring_head(r));

		fseq = *(const u64 *)e;
		f = (const void *)(e + 8);
	}
	*from_ring = f && (!h || f->ts < h->ts || (f->ts == h->ts && fseq < h->seq));
	return *from_ring ? f : h ? h->rec : NULL;
}

static void emit_one(struct reorder *r)
{
	bool from_ring;
	const struct coro_event_hdr *rec = peek(r, &from_ring);
	struct reorder_item it = {0};

	if (from_ring)
		__builtin_prefetch(ring_at(r, r->rhead + 512)); /* the ring streams: fetch ahead */
	else
		it = heap_pop(r);
	r->len--;
	r->bytes -= ENTRY_BYTES(rec->size);
	if (r->hlen)
		__builtin_prefetch(r->heap[0].rec);
	if (rec->ts < r->last_out_ts)
		r->late++;
	else
		r->last_out_ts = rec->ts;
	r->emit(r->ctx, rec);
	if (from_ring) {
		r->rhead += ENTRY_BYTES(rec->size);
		r->flen--;
	} else {
		rec_free(r, it.rec);
	}
}

void reorder_push(struct reorder *r, const struct coro_event_hdr *rec)
{
	const struct coro_event_hdr *oldest;
	u64 seq = r->seq++;
	bool from_ring;

	/* In order with the ring's newest: appended. A straggler: the heap. */
	if (!r->flen || rec->ts >= r->ftail_ts) {
		ring_push(r, rec, seq);
	} else {
		struct reorder_item it = {.ts = rec->ts, .seq = seq, .rec = rec_alloc(r, rec->size)};

		memcpy(it.rec, rec, rec->size);
		heap_push(r, it);
	}
	if (++r->len > r->peak)
		r->peak = r->len;
	r->bytes += ENTRY_BYTES(rec->size);
	if (rec->ts > r->max_ts)
		r->max_ts = rec->ts;
	while ((oldest = peek(r, &from_ring)) && oldest->ts + r->window < r->max_ts)
		emit_one(r);
	while (r->bytes > r->max_bytes) {
		r->cut++;
		emit_one(r);
	}
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
	for (size_t i = 0; i < r->nslabs; i++)
		free(r->slabs[i]);
	free(r->slabs);
	free(r->heap);
	free(r->ring);
	memset(r, 0, sizeof(*r));
}
