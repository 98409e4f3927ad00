/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --stacks: user stacks at create (the spawn site) and at switch-out (the
 * suspension point), in two halves.
 *
 * Capture side (stack_resolver): a record from the ring names its stack
 * either by an id in the kernel's stack map (fp: the kernel walked the frame
 * pointers and deduplicated) or by carrying the registers and the top of the
 * user stack (dwarf: unwound here with libdw from the objects' .eh_frame, as
 * `perf record --call-graph dwarf` does, and deduplicated here). Either way
 * the record leaves with a capture stack id; the first time an id is used,
 * a CORO_REC_STACK record defines it, preceded by CORO_REC_MAP records for
 * the mappings its addresses fall in (the process may be gone by the time
 * anyone symbolizes).
 *
 * Pipeline side (symbolizer): MAP and STACK records in, symbolized stacks
 * out: function (demangled), offset, object, and file:line where debug
 * information exists (also from /usr/lib/debug by build id). Objects are
 * opened once and their answers cached per address, not per event.
 */
#ifndef COROBPF_STACKS_H
#define COROBPF_STACKS_H

#include "coro_abi.h"
#include "raw.h"
#include "util.h"

enum stack_mode {
	STACK_MODE_OFF = 0,
	STACK_MODE_FP = 1,    /* the kernel's frame-pointer walk, deduplicated in a BPF stack map */
	STACK_MODE_DWARF = 2, /* registers and stack bytes, unwound in user space from .eh_frame */
};

const char *stack_mode_name(u32 mode);

/* ---- capture side ---- */
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

/* ---- pipeline side ---- */
struct sym_frame {
	u64 ip;		  /* the address in the process */
	u64 rel;	  /* its offset in the object's file (for Perfetto's rel_pc) */
	const char *func; /* demangled; NULL: no symbol */
	u64 func_off;	  /* ip - the function's start */
	const char *obj;  /* the object's path; NULL: in no known mapping */
	const char *file; /* source file, NULL if no debug information */
	u32 line;
	u64 map_start, map_end, map_pgoff; /* the mapping (obj != NULL) */
};

struct sym_stack {
	u32 id, pid;
	u32 n;
	const struct sym_frame **frames; /* innermost first */
};

struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_map(struct symbolizer *s, const struct coro_rec_map *m);
void symbolizer_define(struct symbolizer *s, const struct coro_rec_stack *st);
/* A stack defined earlier, or NULL. */
const struct sym_stack *symbolizer_stack(const struct symbolizer *s, u32 id);
u64 symbolizer_nstacks(const struct symbolizer *s);
/* Every stack, in no particular order: for (size_t it = 0; (st = symbolizer_next(s, &it));) */
const struct sym_stack *symbolizer_next(const struct symbolizer *s, size_t *it);
/* The innermost frame worth naming a stack by: skips frames without a function name. */
const struct sym_frame *sym_stack_key_frame(const struct sym_stack *st);
/* "func+0x1a (obj) file:line" into buf. */
void sym_frame_format(const struct sym_frame *f, char *buf, size_t len);
void symbolizer_free(struct symbolizer *s);

#endif
