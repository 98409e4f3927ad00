/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* --switch uprobe:...: a switch function named on the command line, parsed. */
#ifndef COROBPF_SWITCHSPEC_H
#define COROBPF_SWITCHSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The spec parsed, no file read. 0 or -EINVAL, err saying why. */
int switchfam_parse_custom(const char *spec, struct switch_custom *out, char *err, size_t errlen);

#endif
