/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The switch-function path: where to put uprobes on the context functions
 * of unmodified coroutine libraries, and what each one means.
 *
 * For every function of a family (swapcontext, jump_fcontext, ...) the
 * planner decodes the machine code from the entry and follows the
 * arguments it needs (the contexts) through register moves to the first
 * instruction the kernel emulates instead of single-stepping (a jcc, a
 * push, ...), provided the straight line from the entry reaches it on every
 * call and nothing jumps into it. Where no such instruction exists it falls
 * back to the entry and says so, with the cost class, so the summary can
 * tell the user what the tracing costs per switch.
 */
#ifndef COROBPF_SWITCHFAM_H
#define COROBPF_SWITCHFAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "coro_abi.h"
#include "fam_runtimes.h"
#include "goelf.h"
#include "switchspec.h"

#define SWITCHFAM_MAX_SITES 64

struct switch_site {
	uint64_t offset;     /* file offset of the probed instruction */
	uint64_t cookie;     /* CORO_CTX_COOKIE(...) for the BPF program */
	char func[48];	     /* the function it belongs to */
	uint32_t insn_off;   /* its offset in that function */
	bool emulated;	     /* the kernel emulates it: no single step */
	char desc[96];	     /* "swapcontext+0x93 (jae; from r9, to r12)" */
};

struct switch_plan {
	uint32_t family; /* enum coro_ctx_family */
	struct switch_site sites[SWITCHFAM_MAX_SITES];
	uint32_t nsites;
	uint32_t stepped; /* of the switch sites, how many are single-stepped */
	/* What this family cannot see in this object, for the summary (or ""). */
	char limits[160];
};

/*
 * Bit (1 << family) for every family whose functions `path` defines, and
 * SWITCHFAM_FCONTEXT_CALLER if it calls Boost.Context's switch functions
 * from outside; 0 on any error.
 */
#define SWITCHFAM_FCONTEXT_CALLER (1u << 16)
uint32_t switchfam_detect(const char *path);

/*
 * Boost.Context's switch functions have no instruction the kernel
 * emulates, but a `call` to them does: the call sites of jump_fcontext and
 * ontop_fcontext in the object at `path` (through its PLT, or direct),
 * each a switch site reading rsp (with the delta the callee's first
 * instruction applies, minus the return address not yet pushed) and rdi.
 * Returns 0 (possibly with no sites), or -EXDEV when the object reaches
 * the functions some other way (address taken, a call through the GOT):
 * then only the entry probes see every switch.
 */
int switchfam_plan_callers(const char *path, int64_t delta_jump, int64_t delta_ontop,
			   struct switch_plan *plan, char *err, size_t errlen);
/* The stack adjustment at the top of an fcontext switch function in `path` (0 if unknown). */
int64_t switchfam_fcontext_delta(const char *path, const char *fn);


/*
 * The libc-provided families the object at `path` uses through the dynamic
 * linker: (1 << CORO_FAM_UCONTEXT) if it imports makecontext, swapcontext or
 * setcontext, and Pth's too if it imports pth_spawn; 0 on any error.
 */
uint32_t switchfam_imports(const char *path);

/* "ucontext", "boost-context", "pth", "custom", "ruby", "qemu", "greenlet". */
const char *switchfam_name(uint32_t family);
/* Parses a family name (as above); 0 if unknown. */
uint32_t switchfam_parse(const char *name);

/*
 * Plan the sites for `family` in the object at `path`. Returns 0 (with at
 * least one site), -ENOENT if the object does not define the family's
 * functions, or another negative errno with a message in err.
 */
int switchfam_plan(const char *path, uint32_t family, struct switch_plan *plan, char *err,
		   size_t errlen);

/* Plan the site of a custom switch function in `path` (the spec's path as the target sees it). */
int switchfam_plan_custom(const char *path, const struct switch_custom *cs,
			  struct switch_plan *plan, char *err, size_t errlen);


struct elf_image;
/* A defined function (or code NOTYPE) symbol by name, .symtab first, in an open object. */
bool switchfam_obj_symbol(const struct elf_image *o, const char *name, uint64_t *vaddr,
			  uint64_t *size);
/*
 * Every place object `o` calls or tail-jumps to function `fn` (imported
 * through its PLT, or its own), each an instruction the kernel emulates:
 * how many (at most max, else -E2BIG) in vaddr and tail (a jmp), or -EXDEV
 * when something else refers to the function (not every call can be seen).
 */
int switchfam_call_sites(const struct elf_image *o, const char *fn, uint64_t *vaddr, bool *tail,
			 int max);

/* The families --switch help lists, one line each. */
void switchfam_help(FILE *out);

/* The file offset of function `name` in the ELF object at path (for a uprobe). 0 or -errno. */
int switchfam_symbol_offset(const char *path, const char *name, uint64_t *off);

#endif
