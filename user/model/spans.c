// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include "spans.h"

/*
 * Spans are matched by name, innermost first. A search of the open spans
 * would make every span_end that matches nothing cost the depth of the
 * stack: a program that opens 100,000 spans and then ends as many names it
 * never opened took a replay 45 s. So a stack deeper than SPAN_SEARCH_MAX
 * is indexed: (owner, hash of the name) gives its innermost open span with
 * that hash, and each span links to the next one outward with the same
 * hash. A span_end then costs one lookup and one step per span it closes.
 * Shallow stacks, nearly all of them, are searched as they always were: no
 * hashing, no map.
 */
#define SPAN_SEARCH_MAX 16
/*
 * A stack's first array, and the size of those kept for reuse: a coroutine
 * holds one only while a span is open, so the many idle coroutines of a
 * server cost no span memory. The free ones are linked through their first
 * bytes.
 */
#define SPAN_FIRST_CAP 4

/* Equal names as strncmp(a, b, CORO_STR_LEN) sees them hash equal: the bytes before a NUL. */
static u64 span_hash(const struct span_table *t, const char *name)
{
	size_t n = strnlen(name, CORO_STR_LEN);
	u64 h = mix64(t->seed ^ n), w;

	for (size_t i = 0; i < n; i += 8) {
		w = 0;
		memcpy(&w, name + i, MIN(n - i, 8));
		h = mix64(h ^ w) + t->seed;
	}
	return h;
}

/* Span i becomes the innermost of its hash. */
static void span_index_add(struct span_table *t, const struct span_stack *st, u32 i)
{
	struct coro_span *sp = &(*st->v)[i];
	uintptr_t inner;

	sp->hash = span_hash(t, sp->name);
	inner = (uintptr_t)hmap_get(&t->index, (uintptr_t)st->owner, sp->hash);
	sp->outer = inner ? (u32)(inner - 1) : SPAN_NONE;
	hmap_put(&t->index, (uintptr_t)st->owner, sp->hash, (void *)(uintptr_t)(i + 1));
}

void span_push(struct span_table *t, const struct span_stack *st, const char *name, u64 ts)
{
	struct coro_span *sp;

	if (!*st->cap && t->pool) {
		*st->v = t->pool;
		memcpy(&t->pool, *st->v, sizeof(void *));
		*st->cap = SPAN_FIRST_CAP;
	} else if (*st->n == *st->cap) {
		*st->cap = *st->cap ? *st->cap * 2 : SPAN_FIRST_CAP;
		*st->v = xrealloc(*st->v, *st->cap * sizeof(**st->v));
	}
	sp = &(*st->v)[*st->n];
	memcpy(sp->name, name, CORO_STR_LEN);
	sp->name[CORO_STR_LEN - 1] = 0;
	sp->ts = ts;
	if (!*st->indexed && *st->n == SPAN_SEARCH_MAX) {
		/* Deep enough to index: the spans already open first, outermost first. */
		for (u32 i = 0; i < *st->n; i++)
			span_index_add(t, st, i);
		*st->indexed = true;
	}
	if (*st->indexed)
		span_index_add(t, st, *st->n);
	(*st->n)++;
}

/* Close the spans from the innermost out to index `to`. */
static void span_close_to(struct span_table *t, const struct span_stack *st, u32 to)
{
	if (!*st->indexed) {
		*st->n = to;
		return;
	}
	while (*st->n > to) {
		const struct coro_span *sp = &(*st->v)[--(*st->n)];

		/* Each one is the innermost of its hash when its turn comes: those inside went first. */
		if (sp->outer == SPAN_NONE)
			hmap_del(&t->index, (uintptr_t)st->owner, sp->hash);
		else
			hmap_put(&t->index, (uintptr_t)st->owner, sp->hash,
				 (void *)(uintptr_t)(sp->outer + 1));
	}
	/* Empty, the index holds nothing of it: searched again until it grows deep. */
	if (!*st->n)
		*st->indexed = false;
}

/* The innermost open span of that name, or SPAN_NONE. */
static u32 span_find(struct span_table *t, const struct span_stack *st, const char *name)
{
	const struct coro_span *v = *st->v;
	uintptr_t inner;

	if (!*st->indexed) {
		for (u32 i = *st->n; i-- > 0;)
			if (strncmp(v[i].name, name, CORO_STR_LEN) == 0)
				return i;
		return SPAN_NONE;
	}
	inner = (uintptr_t)hmap_get(&t->index, (uintptr_t)st->owner, span_hash(t, name));
	/* Other names on the chain only where two hashes collide. */
	for (u32 i = inner ? (u32)(inner - 1) : SPAN_NONE; i != SPAN_NONE; i = v[i].outer)
		if (strncmp(v[i].name, name, CORO_STR_LEN) == 0)
			return i;
	return SPAN_NONE;
}

/* Close the innermost open span of that name (and any opened inside it). */
bool span_pop(struct span_table *t, const struct span_stack *st, const char *name)
{
	u32 i = span_find(t, st, name);

	if (i == SPAN_NONE)
		return false;
	span_close_to(t, st, i);
	if (!*st->n) {
		/* None open: its array goes back for the next coroutine to open one. */
		if (*st->cap == SPAN_FIRST_CAP) {
			memcpy(*st->v, &t->pool, sizeof(void *));
			t->pool = *st->v;
		} else {
			free(*st->v);
		}
		*st->v = NULL;
		*st->cap = 0;
	}
	return true;
}

/*
 * The owner goes (a coroutine ended, a thread's process did): its spans
 * leave the index. Its count stays, for the observers still to look.
 */
void span_forget(struct span_table *t, const void *owner, struct coro_span *v, u32 n,
			bool *indexed)
{
	struct span_stack st = {.owner = owner, .v = &v, .n = &n, .indexed = indexed};

	span_close_to(t, &st, 0);
}

void span_table_init(struct span_table *t)
{
	hmap_init(&t->index);
	/* Only lookups depend on it, never an output: no need for it to repeat. */
	if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
		t->seed = (u64)time(NULL) * 0x9e3779b97f4a7c15ull ^ (u64)(uintptr_t)t;
}

void span_table_free(struct span_table *t)
{
	hmap_free(&t->index);
	while (t->pool) {
		struct coro_span *next;

		memcpy(&next, t->pool, sizeof(void *));
		free(t->pool);
		t->pool = next;
	}
}
