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
u64 span_name_hash(const struct span_table *t, const char *name)
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

	sp->hash = span_name_hash(t, sp->name);
	inner = (uintptr_t)hmap_get(&t->index, (uintptr_t)st->owner, sp->hash);
	sp->outer = inner ? (u32)(inner - 1) : SPAN_NONE;
	hmap_put(&t->index, (uintptr_t)st->owner, sp->hash, (void *)(uintptr_t)(i + 1));
}

void span_push(struct span_table *t, const struct span_stack *st, const char *name, u64 ts,
	       const struct span_time *at_begin, u32 stack)
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
	sp->stack = stack;
	sp->serial = ++t->next_serial;
	sp->parent = *st->n ? (*st->v)[*st->n - 1].serial : 0;
	if (at_begin)
		sp->at_begin = *at_begin;
	else
		memset(&sp->at_begin, 0, sizeof(sp->at_begin));
	sp->longest_ts = sp->longest_ns = sp->longest_obj = 0;
	sp->longest_reason = 0;
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

static u64 sub0(u64 a, u64 b)
{
	return a > b ? a - b : 0;
}

static void stats_add(struct span_stats *ss, u64 seed, const struct span_done *d);

/* Span i of v ends (innermost first): tell the observers, count it, hand its longest outward. */
static void span_report(struct span_table *t, struct coro_span *v, u32 i,
			const struct span_ender *e)
{
	struct coro_span *sp = &v[i];
	struct span_done d = e->d;

	d.sp = sp;
	d.depth = i + 1;
	d.dur = sub0(d.end, sp->ts);
	if (e->now) {
		const struct span_time *a = &sp->at_begin, *b = e->now;

		d.in.offcpu = sub0(b->offcpu, a->offcpu);
		d.in.blocked = sub0(b->blocked, a->blocked);
		d.in.runq = sub0(b->runq, a->runq);
		/* On a CPU: the running state less its thread's time off the CPU. */
		d.in.running = sub0(sub0(b->running, a->running), d.in.offcpu);
		d.in.runnable = sub0(b->runnable, a->runnable);
		d.in.suspended = sub0(b->suspended, a->suspended);
		d.in.unknown = sub0(b->unknown, a->unknown);
		for (int r = 0; r < SPAN_NREASONS; r++)
			d.in.susp[r] = sub0(b->susp[r], a->susp[r]);
	}
	if (e->done)
		e->done(e->ctx, &d);
	stats_add(&t->stats, t->seed, &d);
	if (i && sp->longest_ns > v[i - 1].longest_ns) {
		v[i - 1].longest_ns = sp->longest_ns;
		v[i - 1].longest_ts = sp->longest_ts;
		v[i - 1].longest_obj = sp->longest_obj;
		v[i - 1].longest_reason = sp->longest_reason;
	}
}

/* Close the spans from the innermost out to index `to` (reported to e, if any). */
static void span_close_to(struct span_table *t, const struct span_stack *st, u32 to,
			  const struct span_ender *e)
{
	if (e)
		for (u32 i = *st->n; i-- > to;)
			span_report(t, *st->v, i, e);
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
	inner = (uintptr_t)hmap_get(&t->index, (uintptr_t)st->owner, span_name_hash(t, name));
	/* Other names on the chain only where two hashes collide. */
	for (u32 i = inner ? (u32)(inner - 1) : SPAN_NONE; i != SPAN_NONE; i = v[i].outer)
		if (strncmp(v[i].name, name, CORO_STR_LEN) == 0)
			return i;
	return SPAN_NONE;
}

/* Close the innermost open span of that name (and any opened inside it). */
bool span_pop(struct span_table *t, const struct span_stack *st, const char *name,
	      struct span_ender *e)
{
	u32 i = span_find(t, st, name);

	if (i == SPAN_NONE)
		return false;
	e->d.closed = true;
	span_close_to(t, st, i, e);
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

	span_close_to(t, &st, 0, NULL);
}

void span_end_open(struct span_table *t, struct coro_span *v, u32 n, struct span_ender *e)
{
	e->d.closed = false;
	for (u32 i = n; i-- > 0;)
		span_report(t, v, i, e);
}

void span_note_suspension(struct coro_span *v, u32 n, u64 start, u64 dur, u32 reason, u64 obj)
{
	struct coro_span *sp;

	if (!n || dur <= v[n - 1].longest_ns)
		return;
	sp = &v[n - 1];
	sp->longest_ns = dur;
	sp->longest_ts = start;
	sp->longest_obj = obj;
	sp->longest_reason = reason;
}

/* ---- per-name statistics ---- */

static void stats_add(struct span_stats *ss, u64 seed, const struct span_done *d)
{
	const char *name = d->sp->name;
	size_t len = strnlen(name, CORO_STR_LEN);
	u64 h = mix64(seed ^ len), w;
	struct span_name_stats *ns;

	ss->instances++;
	for (size_t i = 0; i < len; i += 8) {
		w = 0;
		memcpy(&w, name + i, MIN(len - i, 8));
		h = mix64(h ^ w) + seed;
	}
	/* A name that collides with another takes the next second key. */
	for (u64 k2 = 0;; k2++) {
		ns = hmap_get(&ss->names, h, k2);
		if (!ns && ss->names.len >= SPAN_STATS_NAMES) {
			/* Names past the bound: together, in one entry outside the map. */
			if (!ss->other) {
				ss->other = xcalloc(1, sizeof(*ss->other));
				ss->other->other = true;
			}
			ns = ss->other;
			break;
		}
		if (!ns) {
			ns = xcalloc(1, sizeof(*ns));
			memcpy(ns->name, name, len);
			hmap_put(&ss->names, h, k2, ns);
			break;
		}
		if (strncmp(ns->name, name, CORO_STR_LEN) == 0)
			break;
	}
	if (!d->closed) {
		ns->unclosed++;
		return;
	}
	ns->count++;
	ns->total += d->dur;
	ns->max = MAX(ns->max, d->dur);
	ns->suspended += d->in.suspended;
	ns->offcpu += d->in.offcpu;
	if (ns->ndurs < SPAN_STATS_EXACT && (ns->ndurs < ns->cap || ss->kept < SPAN_STATS_KEPT)) {
		if (ns->ndurs == ns->cap) {
			u32 more = ns->cap ? MIN(ns->cap, SPAN_STATS_EXACT - ns->cap) : 16;

			more = (u32)MIN(more, MAX(SPAN_STATS_KEPT - ss->kept, 1));
			ns->cap += more;
			ss->kept += more;
			ns->durs = xrealloc(ns->durs, ns->cap * sizeof(*ns->durs));
		}
		ns->durs[ns->ndurs++] = d->dur;
	} else {
		/* A uniform sample of all of them, of the size it has (Algorithm R). */
		u64 j;

		ss->rng = ss->rng * 6364136223846793005ULL + 1442695040888963407ULL;
		j = mix64(ss->rng) % ns->count;
		ns->approx = true;
		if (j < ns->ndurs)
			ns->durs[j] = d->dur;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return (x > y) - (x < y);
}

static int cmp_names(const void *a, const void *b)
{
	const struct span_name_stats *x = *(struct span_name_stats *const *)a;
	const struct span_name_stats *y = *(struct span_name_stats *const *)b;

	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return memcmp(x->name, y->name, CORO_STR_LEN);
}

void span_stats_seal(struct span_table *t)
{
	struct span_stats *ss = &t->stats;
	size_t it = 0;
	void *v;

	if (ss->sorted)
		return;
	ss->sorted = xmalloc((ss->names.len + 2) * sizeof(*ss->sorted));
	while (hmap_next(&ss->names, &it, NULL, NULL, &v)) {
		struct span_name_stats *ns = v;

		if (ns->ndurs)
			qsort(ns->durs, ns->ndurs, sizeof(*ns->durs), cmp_u64);
		ns->sorted = true;
		ss->sorted[ss->nsorted++] = ns;
	}
	qsort(ss->sorted, ss->nsorted, sizeof(*ss->sorted), cmp_names);
	/* The names past the bound, together, last. */
	if (ss->other) {
		if (ss->other->ndurs)
			qsort(ss->other->durs, ss->other->ndurs, sizeof(*ss->other->durs), cmp_u64);
		ss->other->sorted = true;
		ss->sorted[ss->nsorted++] = ss->other;
	}
}

u64 span_stats_percentile(const struct span_name_stats *s, u32 p)
{
	u64 rank;

	if (!s->ndurs || !s->sorted)
		return 0;
	rank = ((u64)p * s->ndurs + 99) / 100;
	return s->durs[MIN(MAX(rank, 1), s->ndurs) - 1];
}

void span_table_init(struct span_table *t)
{
	memset(t, 0, sizeof(*t));
	hmap_init(&t->index);
	hmap_init(&t->stats.names);
	t->stats.rng = 0x5eed;
	/* Only lookups depend on it, never an output: no need for it to repeat. */
	if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
		t->seed = (u64)time(NULL) * 0x9e3779b97f4a7c15ull ^ (u64)(uintptr_t)t;
}

void span_table_free(struct span_table *t)
{
	size_t it = 0;
	void *v;

	hmap_free(&t->index);
	while (hmap_next(&t->stats.names, &it, NULL, NULL, &v)) {
		free(((struct span_name_stats *)v)->durs);
		free(v);
	}
	hmap_free(&t->stats.names);
	if (t->stats.other)
		free(t->stats.other->durs);
	free(t->stats.other);
	free(t->stats.sorted);
	while (t->pool) {
		struct coro_span *next;

		memcpy(&next, t->pool, sizeof(void *));
		free(t->pool);
		t->pool = next;
	}
}
