/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The switch-function families of language runtimes (Ruby, QEMU, greenlet, Go), as data. */
#ifndef COROBPF_FAM_RUNTIMES_H
#define COROBPF_FAM_RUNTIMES_H

#include <stdbool.h>
#include <stdint.h>
#include "coro_abi.h"

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
#define SWITCHFAM_RUNTIME_LAST CORO_FAM_GO
/* The last family number switchfam_detect can report. */
#define SWITCHFAM_LAST SWITCHFAM_RUNTIME_LAST
/* The families to leave out of a process whose objects have `families` (bits). */
uint32_t switchfam_excluded(uint32_t families);

#endif
