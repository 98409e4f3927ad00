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
 * A language runtime's family (fam_runtimes.c), described as data: the
 * symbols that say an object has it, and where its uprobes go. Each
 * site's registers are where the values are at the function's entry; the
 * planner follows them to the cheapest instruction as for every family.
 */
struct switchfam_site_desc {
	const char *func; /* the symbol (FUNC, or NOTYPE in code) */
	uint8_t op;	  /* enum coro_ctx_op */
	/*
	 * SWITCH: from (CORO_CTX_REG_NONE: the thread's current context), to,
	 * and a register `flags` gives a meaning to (or CORO_CTX_REG_NONE).
	 * CREATE: the new context's id, then unused. EXIT: unused.
	 */
	uint8_t reg[3];
	uint8_t flags; /* enum coro_ctx_cookie_flags */
	bool optional; /* the family works without it (fewer facts) */
	const char *what;
	/*
	 * At every ret of the function instead (reg[0] is then rax, the value
	 * returned): a function that makes a context and returns it. Not
	 * possible if it tail-calls out of itself.
	 */
	bool at_return;
};

struct switchfam_desc {
	uint32_t family;
	const char *detect[2]; /* an object defining both has the family */
	struct switchfam_site_desc sites[4];
	/*
	 * Families whose view is wrong in a process that has this one (QEMU
	 * makes contexts with makecontext but switches with siglongjmp:
	 * ucontext would see every coroutine once, and no switch after).
	 */
	uint32_t excludes;
	const char *limits; /* what the family cannot see, for the summary */
	const char *help;   /* its --switch help lines, indented as switchfam_help's */
};

/* The runtime family `family`, or NULL if it is not one. */
const struct switchfam_desc *switchfam_runtime(uint32_t family);
/* The first and last runtime family numbers (enum coro_ctx_family). */
#define SWITCHFAM_RUNTIME_FIRST CORO_FAM_RUBY
#define SWITCHFAM_RUNTIME_LAST CORO_FAM_GREENLET
/* The last family number switchfam_detect can report. */
#define SWITCHFAM_LAST SWITCHFAM_RUNTIME_LAST
/* The families to leave out of a process whose objects have `families` (bits). */
uint32_t switchfam_excluded(uint32_t families);

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

/*
 * A custom switch function from the command line:
 *     uprobe:PATH:SYMBOL[+OFFSET]:from=ARG,to=ARG
 *     uprobe:PATH:0xADDR:from=ARG,to=ARG
 * SYMBOL may be a function or a NOTYPE symbol in code (hand-written
 * assembly); with +OFFSET (anywhere inside it, on an instruction boundary)
 * or 0xADDR (an address of the object's code, as its symbols count them)
 * the probe goes exactly there and the registers are read as named. ARG
 * is arg0..arg5 (the integer argument registers of the x86-64 calling
 * convention at the function's entry), sp, or a register name (rdi, r12,
 * ...); from may also be "current" (the function names only the context it
 * switches to).
 */
struct switch_custom {
	char path[4096];
	char symbol[128];
	uint64_t sym_offset;
	bool has_offset; /* +OFFSET given: exactly there */
	bool at_address; /* 0xADDR given instead of a symbol */
	uint64_t address;
	int from_reg; /* enum x86_reg, or CORO_CTX_REG_NONE for "current" */
	int to_reg;
};

/* The spec parsed, no file read (switchspec.c). 0 or -EINVAL, err saying why. */
int switchfam_parse_custom(const char *spec, struct switch_custom *out, char *err, size_t errlen);
/* Plan the site of a custom switch function in `path` (the spec's path as the target sees it). */
int switchfam_plan_custom(const char *path, const struct switch_custom *cs,
			  struct switch_plan *plan, char *err, size_t errlen);

/*
 * The function at `addr` in live process pid, for naming a context by the
 * function it was made to run (QEMU's coroutine entry): "symbol" or
 * "symbol+0xOFF" from the object mapped there, "object+0xVADDR" where it
 * has no symbol (a static function of a stripped binary), else "0xADDR".
 * Cached per (pid, addr) for the run.
 */
void switchfam_name_at(uint32_t pid, uint64_t addr, char *name, size_t len);

/* The families --switch help lists, one line each. */
void switchfam_help(FILE *out);

/* The file offset of function `name` in the ELF object at path (for a uprobe). 0 or -errno. */
int switchfam_symbol_offset(const char *path, const char *name, uint64_t *off);

#endif
