/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go, -p: the goroutines alive when corobpf attached, read from the
 * process's memory after the uprobe on casgstatus is in place, so a change
 * made meanwhile is seen by the probe: the records are stamped after the
 * last read, and user/model/gomodel.c keeps the probes' view of a goroutine
 * they reported before that instant (the walk gives its name only, or
 * nothing if it ended); what they report after it happened after the read.
 *
 * runtime.allgs is a []*g of every goroutine the program ever made (dead
 * ones are kept for reuse). It is read with process_vm_readv: only the
 * process's memory, through no path; every pointer in it is the target's
 * and is only ever read through the same call, so a lying or changing
 * target gives wrong goroutines at worst, never a read of anything else.
 * The slice's length is bounded, and goroutines are read one by one.
 */
#ifndef COROBPF_GOWALK_H
#define COROBPF_GOWALK_H

#include "goelf.h"
#include "raw.h"
#include "stackres.h"

/* The most goroutines one walk reports (the rest are seen when they next change). */
#define GOWALK_MAX (1u << 20)
/* Frames of a parked goroutine's stack walked (a longer one keeps its innermost). */
#define GOWALK_STACK_DEPTH 64

/*
 * The live goroutines of process pid (its binary described by gi), as
 * CORO_REC_GO_G records all stamped when the walk ended, into *out
 * (malloc'd, packed: each record hdr.size long). A runnable goroutine whose
 * goid changed by the end of the walk is left out: its g was being reused
 * by newproc1 (the status is set before the new goid), and the probes saw
 * the new goroutine made. Returns how many, or a negative errno (the
 * process gone, its memory not readable).
 *
 * With stacks (--stacks), where a parked goroutine (Gwaiting, Gpreempted)
 * is parked comes with it: its record is followed by a struct
 * coro_stack_ref of CORO_STACK_IPS and the addresses, from its saved
 * context (g.sched: pc, then the chain of frame pointers from sched.bp,
 * which Go keeps on amd64). Each frame must be above the last (the stack
 * grows down): a broken chain ends the walk.
 */
int gowalk_process(u32 pid, const struct goelf_info *gi, bool stacks,
		   struct coro_rec_go_g **out);

/*
 * Emit the n packed records of a walk: with a resolver (--stacks), a
 * parked goroutine's addresses become a capture stack id (defined ahead of
 * it); without one, or when they resolve to nothing, the record goes
 * without a stack, as a walk without stacks makes it.
 */
void gowalk_emit(const struct coro_rec_go_g *gs, u32 n, struct stack_resolver *stk,
		 stack_emit_fn emit, void *ctx);

#endif
