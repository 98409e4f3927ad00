/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Open spans (span_begin/span_end), per owner: a coroutine, or a thread
 * outside any coroutine. A span_end closes the innermost open span of its
 * name, and any opened inside it.
 *
 * The table: (owner, name hash) -> 1 + position of the innermost open span
 * with that hash in the owner's stack, for the stacks deep enough to be
 * indexed. The hash is keyed with a per-run random seed, so a program
 * cannot choose names that collide; the seed decides only how fast a span
 * is found, never which.
 */
#ifndef COROBPF_SPANS_H
#define COROBPF_SPANS_H

#include <stdbool.h>
#include "coro_abi.h"
#include "util.h"

struct coro_span {
	char name[CORO_STR_LEN];
	u64 ts;
	/* In an indexed stack (see struct span_table): */
	u64 hash;  /* of the name */
	u32 outer; /* the next open span outward with the same hash, or SPAN_NONE */
};
#define SPAN_NONE ((u32)-1)

struct span_table {
	struct hmap index;
	u64 seed;
	struct coro_span *pool; /* span arrays no stack uses, kept for reuse */
};

/* The open spans of a coroutine, or of a thread outside any coroutine. */
struct span_stack {
	const void *owner; /* the struct coro or coro_thread: the index's key */
	struct coro_span **v;
	u32 *n, *cap;
	bool *indexed;
};

void span_table_init(struct span_table *t);
void span_table_free(struct span_table *t);
void span_push(struct span_table *t, const struct span_stack *st, const char *name, u64 ts);
/* Close the innermost open span of that name (and any opened inside it); false if none. */
bool span_pop(struct span_table *t, const struct span_stack *st, const char *name);
/*
 * The owner goes (a coroutine ended, a thread's process did): its spans
 * leave the index. Its count stays, for the observers still to look.
 */
void span_forget(struct span_table *t, const void *owner, struct coro_span *v, u32 n,
		 bool *indexed);

#endif
