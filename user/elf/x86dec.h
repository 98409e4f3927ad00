/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A small x86-64 instruction decoder: lengths, operands' registers and the
 * few facts the switch-function path needs to choose where a uprobe costs
 * least (which instructions the kernel emulates instead of single-stepping,
 * and which registers an instruction writes, so that a function's
 * arguments can be followed from its entry to a later instruction).
 *
 * It decodes the whole 64-bit instruction set for length (legacy, REX,
 * VEX, EVEX and XOP encodings); the register effects are known only for
 * the common integer instructions, and anything else is reported as
 * "writes unknown registers".
 */
#ifndef COROBPF_X86DEC_H
#define COROBPF_X86DEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* General-purpose registers in encoding order (rax=0 ... r15=15). */
enum x86_reg {
	X86_RAX, X86_RCX, X86_RDX, X86_RBX, X86_RSP, X86_RBP, X86_RSI, X86_RDI,
	X86_R8, X86_R9, X86_R10, X86_R11, X86_R12, X86_R13, X86_R14, X86_R15,
	X86_NREGS
};

enum x86_flow {
	X86_FLOW_NEXT = 0,     /* falls through to the next instruction */
	X86_FLOW_JCC,	       /* conditional relative branch (target valid) */
	X86_FLOW_JMP,	       /* unconditional relative jump (target valid) */
	X86_FLOW_CALL,	       /* relative call (target valid) */
	X86_FLOW_INDIRECT,     /* jmp/call through a register or memory */
	X86_FLOW_RET,	       /* ret, iret, hlt, ud2, int3: nothing after it on this path */
};

/* How the kernel runs an instruction it has put a uprobe on (x86-64). */
enum x86_uprobe_cost {
	X86_UPROBE_EMULATED = 0, /* 0x90 nop, push reg, jmp/call/jcc rel: no single step */
	X86_UPROBE_STEPPED = 1,	 /* copied out of line and single-stepped: ~10x the cost */
	X86_UPROBE_REFUSED = 2,	 /* the kernel will not probe it (e.g. int3, or prefixes it rejects) */
};

struct x86_insn {
	uint8_t len;
	uint8_t map;	   /* 0: one-byte opcodes, 1: 0f, 2: 0f38, 3: 0f3a, 8+: VEX/EVEX/XOP maps */
	uint8_t opcode;
	bool has_modrm;
	uint8_t modrm;
	uint8_t rex;	   /* 0 if none */
	bool opsize16;	   /* 66 prefix */
	bool rep, repne;   /* f3, f2 */
	bool vex;	   /* VEX, EVEX or XOP encoded */
	uint8_t imm_len, disp_len;
	int64_t imm;
	enum x86_flow flow;
	uint64_t target;   /* for relative branches: address of the destination */
	enum x86_uprobe_cost uprobe;
	/*
	 * Register effects, as bit masks over enum x86_reg. `writes_known` is
	 * false when the decoder does not know what the instruction writes (treat
	 * every register as clobbered). A register-to-register move is reported
	 * as a copy (copy_src -> copy_dst) so that values can be followed.
	 */
	bool writes_known;
	uint16_t writes;
	int8_t copy_src, copy_dst; /* -1 if not a full 64-bit register copy */
	int8_t push_reg, pop_reg;  /* push/pop of a register, else -1 */
};

/*
 * Decode the instruction at code[0..avail) whose address is `addr`. Returns
 * its length (1..15), or 0 if the bytes are not a valid 64-bit instruction
 * or are cut off.
 */
int x86_decode(const uint8_t *code, size_t avail, uint64_t addr, struct x86_insn *in);

const char *x86_reg_name(int reg);

/*
 * Whether a kernel that optimizes uprobes (x86-64, 6.17 on) may write a call over a uprobe
 * on the instruction at code: a five-byte nop (0x90 with prefixes, or 0f 1f /0), as 6.17
 * and 6.18 do, or the ten-byte 66 2e 0f 1f 84 nop later kernels choose instead. Such a call
 * goes to a trampoline page a child forked afterwards does not have (attachctx.c).
 */
bool x86_uprobe_may_optimize(const uint8_t *code, size_t avail);

#endif
