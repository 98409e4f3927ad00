/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --stacks: user stacks at create (the spawn site) and at switch-out (the
 * suspension point), in two halves.
 *
 * Capture side (stack_resolver, stackres.h): a record from the ring leaves
 * with a capture stack id, defined by CORO_REC_STACK and CORO_REC_MAP
 * records the first time it is used.
 *
 * Pipeline side (symbolizer, here): MAP and STACK records in, symbolized stacks
 * out: function (demangled), offset, object, and file:line where debug
 * information exists (also from /usr/lib/debug by build id). Objects are
 * opened once and their answers cached per address, not per event.
 */
#ifndef COROBPF_STACKS_H
#define COROBPF_STACKS_H

#include "coro_abi.h"
#include "util.h"

struct coro_rec_map;
struct coro_rec_stack;

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
