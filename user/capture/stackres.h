/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --stacks, the capture side (stacks.h has the pipeline side).
 *
 * A record from the ring names its stack either by an id in the kernel's
 * stack map (fp: the kernel walked the frame pointers and deduplicated) or
 * by carrying the registers and the top of the user stack (dwarf: unwound
 * here with libdw from the objects' .eh_frame, as `perf record --call-graph
 * dwarf` does, and deduplicated here). A record made in user space may
 * carry the addresses themselves (CORO_STACK_IPS: Go's parked goroutines,
 * gowalk.h). Either way the record leaves with a capture stack id; the first time an id is used, a CORO_REC_STACK record
 * defines it, preceded by CORO_REC_MAP records for the mappings its
 * addresses fall in (the process may be gone by the time anyone
 * symbolizes).
 */
#ifndef COROBPF_STACKRES_H
#define COROBPF_STACKRES_H

#include "coro_abi.h"
#include "util.h"

typedef void (*stack_emit_fn)(void *ctx, const struct coro_event_hdr *rec);

struct stack_resolver_stats {
	u64 stacks;	    /* distinct stacks defined */
	u64 unresolved;	    /* refs that gave no stack (kernel id gone, nothing unwound) */
	u64 unwound;	    /* dwarf samples unwound */
	u64 memo_hits;	    /* dwarf samples answered by an earlier unwind of the same context */
	u64 unwind_frames;  /* frames they gave */
	u64 unmapped;	    /* stacks with an address in no mapping read (kept as addresses) */
	/* Filled in by stack_resolver_stats(): what is held now, for processes still alive. */
	u64 procs;	    /* processes */
	u64 remembered;	    /* their stacks and unwinds remembered */
};

struct stack_resolver;

struct stack_resolver *stack_resolver_new(u32 mode, int stackmap_fd);
/*
 * The capture stack id of record h (0: it carries none, or it could not be
 * resolved), after emitting the records that define it.
 */
u32 stack_resolve(struct stack_resolver *r, const struct coro_event_hdr *h, stack_emit_fn emit,
		  void *ctx);
/*
 * Read the process's mappings now (it exec'd, loaded a library, or was just
 * admitted), while it is alive: stacks read later may outlive it.
 */
void stack_resolver_snapshot(struct stack_resolver *r, u32 pid, u64 ts, stack_emit_fn emit,
			     void *ctx);
/* The process exec'd or ended: its addresses mean something else from now on. */
void stack_resolver_forget(struct stack_resolver *r, u32 pid); /* its image was replaced (exec) */
void stack_resolver_ended(struct stack_resolver *r, u32 pid);	 /* it ended: all of it goes */
const struct stack_resolver_stats *stack_resolver_stats(struct stack_resolver *r);
void stack_resolver_free(struct stack_resolver *r);

#endif
