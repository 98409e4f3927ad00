/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record kinds, one table (kinds.c): every list of kinds the user side
 * needs is a column of it. A kind's row gives
 *
 *   name    its name in every output and in a JSONL trace read back
 *   size    the least a record of the kind may be (0: its header alone);
 *           a kind that may carry a stack (RK_STACK) carries its struct
 *           coro_stack_ref right after those bytes
 *   strings NUL-terminated strings after the fixed part, each within the
 *           record (a path, a switch path's three texts)
 *   flags   RK_* below
 *   decode  its payload into a decoded event (record/event.h); NULL: the
 *           model's observers never see the kind (a raw fact of the
 *           switch-function path, Go or C++20, turned into others first)
 *   check   what else a valid record of the kind must hold (NULL: nothing)
 *
 * The raw capture's reader and the ring's handler validate with it
 * (coro_record_valid()), the stack resolver and the context maps find a
 * record's stack with it, the model decodes with it (event_decode()), the
 * JSONL reader finds a kind by its name with it. Adding a kind is a row
 * here and its decode function (bpf/coro_abi.h or records.h give the
 * layout), and its place in the model (model/apply.c): docs/design.md,
 * "Adding a record kind".
 */
#ifndef COROBPF_KINDS_H
#define COROBPF_KINDS_H

#include <stddef.h>
#include "event.h"

struct coro_event_hdr;
struct coro_stack_ref;
struct coro_ev_name;

enum record_kind_flags {
	/* May carry a struct coro_stack_ref after its fixed part (--stacks). */
	RK_STACK = 1 << 0,
	/*
	 * A notice about a process or the loader, not a coroutine's event: not
	 * counted among the trailer's `events`.
	 */
	RK_NOTICE = 1 << 1,
	/*
	 * A definition (a mapping, a stack): timeless, taken when read rather
	 * than in time order (pipeline.c).
	 */
	RK_DEFINITION = 1 << 2,
};

struct record_kind {
	const char *name;
	u16 size;
	u8 strings;
	u8 flags;
	void (*decode)(struct event *ev, const struct coro_event_hdr *h);
	const char *(*check)(const struct coro_event_hdr *h);
};

/* Indexed by kind (bpf/coro_abi.h: 1..127; records.h: 128..255); a kind unknown is zeros. */
extern const struct record_kind record_kinds[256];

static inline const struct record_kind *record_kind(unsigned kind)
{
	return &record_kinds[kind & 0xff];
}

/* The kind of that name, or 0. */
unsigned record_kind_by_name(const char *name);

/*
 * A name record made in user space (C++20's functions, Go's, QEMU's entries:
 * ringev.c) at rec, of up to CORO_NAME_MAX - 1 bytes of name (event.h),
 * CORO_EVF_STR_TRUNCATED if cut there: it may be longer than struct
 * coro_ev_name, its name running on past the field to a NUL within the
 * record. rec has room for CORO_NAME_REC_MAX bytes (records.h).
 */
void coro_name_record(struct coro_ev_name *rec, const char *name);

/* Validation shared by the ring's handler and the capture's reader: why not, in *why. */
bool coro_record_valid(const struct coro_event_hdr *h, size_t avail, const char **why);

/* The stack ref of a record that carries one (RK_STACK, taken with --stacks), or NULL. */
const struct coro_stack_ref *coro_stack_ref_of(const struct coro_event_hdr *h);
/* The size of a record of that kind without its stack ref (0: no stack). */
size_t coro_stack_base_size(unsigned kind);
/* The capture stack id a record names (0: none). */
u32 coro_record_stack(const struct coro_event_hdr *h);

/*
 * The header's facts and the payload of h into *ev: false for a kind
 * observers never see (no decode). Of the model's part, c, to, thread,
 * proc, seq, cur_known and the span's owner, depth and matching are left
 * zero for the model to set.
 */
bool event_decode(struct event *ev, const struct coro_event_hdr *h);

#endif /* COROBPF_KINDS_H */
