/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * From raw context facts to coroutines: the switch-function path's stage
 * between the reorder buffer and the model.
 *
 * The uprobes on context functions report raw values (CORO_EV_CTX_*): a
 * ucontext_t address, or for Boost.Context an address on the stack being
 * left and the saved stack pointer of the context being resumed. This
 * stage turns them into the probe ABI's CREATE, SWITCH and EXIT records,
 * so that the model and every output treat both paths alike:
 *
 * - ucontext: a coroutine is its ucontext_t address. makecontext on the
 *   context of one that never returned ends it (exit, status 0): the
 *   ucontext_t is reused. An address getcontext saved into names what ran
 *   then; a switch from a context to itself (getcontext, then setcontext
 *   to jump back) is no switch and is dropped.
 * - pth: an exit's status is pth_exit's value, -ECANCELED when cancelled.
 * - fcontext: a coroutine is the stack make_fcontext gave it (its id is the
 *   top of that stack); an address is resolved to the stack range holding
 *   it. A context outside every known range (a thread's own stack, or a
 *   fiber made before the trace began) is followed from the value it was
 *   suspended with to the switch that resumes it. A new stack overlapping
 *   an old one ends the old coroutine (its stack was freed).
 * - A thread's main context is a coroutine too, id CTXMAP_MAIN_ID(tid),
 *   named after the thread. In a launched process every thread starts in
 *   it; attached mid-life, the context a thread is in when first seen is
 *   not known.
 * - Ruby, QEMU, greenlet: a coroutine is the address the runtime switches
 *   with, as for ucontext. QEMU's terminate ends `from` at its last switch.
 *   A greenlet switched to that g_initialstub never made is the thread's
 *   main greenlet: in a launched process, the thread's main context.
 * - hdr.cur of every record of such a process is translated the same way.
 *
 * Records of processes traced through corobpf probes pass untouched.
 */
#ifndef COROBPF_CTXMAP_H
#define COROBPF_CTXMAP_H

#include "coro_abi.h"
#include "util.h"

#define CTXMAP_MAIN_ID(tid) ((1ULL << 63) | (u64)(tid))

struct ctxmap {
	struct hmap procs;   /* pid -> struct ctx_proc */
	struct hmap threads; /* (pid, tid) -> struct ctx_thread */
	struct hmap alias;   /* (pid, raw ucontext address) -> id, for main contexts */
	struct hmap handles; /* (pid, saved stack pointer) -> id, contexts outside known stacks */
	struct hmap created; /* (pid, id) greenlets and ucontexts seen made and not yet ended */
	bool active;	     /* some process uses the switch path */
	/* -a: the switch_path records of pid 0 (every process), newest first. */
	struct every {
		struct every *next;
		u32 family;
		struct coro_event_hdr rec[];
	} *every;
	/* A record translated (the longest: a name made in user space, raw.h), and one implied. */
	union {
		struct coro_event_hdr hdr;
		u8 bytes[512];
	} buf, extra;
	/* What the stage could not make sense of. */
	u64 exits_unknown;   /* a context exit on a thread whose context was not known */
	u64 stacks_reused;   /* coroutines ended because a new stack overlapped theirs */
	u64 contexts_remade; /* coroutines ended because makecontext made their context again */
};

typedef void (*ctxmap_emit_fn)(void *ctx, const struct coro_event_hdr *rec);

void ctxmap_init(struct ctxmap *x);
/* Pass `rec` on to emit (translated, or as it is), possibly with records it implies. */
void ctxmap_apply(struct ctxmap *x, const struct coro_event_hdr *rec, ctxmap_emit_fn emit,
		  void *ctx);
void ctxmap_free(struct ctxmap *x);

#endif
