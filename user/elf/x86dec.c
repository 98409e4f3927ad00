// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * x86-64 instruction decoding for the switch-function path (see x86dec.h).
 * The opcode facts come from the Intel and AMD manuals' opcode maps; the
 * tests check every instruction boundary of real libraries against objdump.
 */
#include <pthread.h>
#include <string.h>
#include "x86dec.h"

/* Operand shape of an opcode: ModRM present, immediate size class. */
enum {
	F_M = 1 << 0,	 /* ModRM follows */
	F_I8 = 1 << 1,	 /* imm8 */
	F_IZ = 1 << 2,	 /* imm16 with 66, else imm32 */
	F_IV = 1 << 3,	 /* imm16/32, or imm64 with REX.W (mov r, imm) */
	F_I16 = 1 << 4,	 /* imm16 */
	F_BAD = 1 << 5,	 /* invalid in 64-bit mode */
	F_MOFFS = 1 << 6 /* 8-byte address (4 with 67) */
};

static uint8_t one[256], two[256];
/* Built once, by whichever thread decodes first (the capture's, or the exec gate's). */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void set(uint8_t *t, int lo, int hi, uint8_t f)
{
	for (int i = lo; i <= hi; i++)
		t[i] = f;
}

static void init_tables(void)
{
	/* One-byte map. */
	for (int op = 0; op < 0x40; op++) {
		switch (op & 7) {
		case 0: case 1: case 2: case 3: one[op] = F_M; break;
		case 4: one[op] = F_I8; break;
		case 5: one[op] = F_IZ; break;
		default: one[op] = F_BAD; /* push/pop seg, daa...; prefixes are taken before */
		}
	}
	set(one, 0x40, 0x5f, 0);
	one[0x60] = one[0x61] = F_BAD;
	one[0x63] = F_M;
	one[0x68] = F_IZ;
	one[0x69] = F_M | F_IZ;
	one[0x6a] = F_I8;
	one[0x6b] = F_M | F_I8;
	set(one, 0x6c, 0x6f, 0);
	set(one, 0x70, 0x7f, F_I8);
	one[0x80] = F_M | F_I8;
	one[0x81] = F_M | F_IZ;
	one[0x82] = F_BAD;
	one[0x83] = F_M | F_I8;
	set(one, 0x84, 0x8f, F_M);
	set(one, 0x90, 0x9f, 0);
	one[0x9a] = F_BAD;
	set(one, 0xa0, 0xa3, F_MOFFS);
	set(one, 0xa4, 0xaf, 0);
	one[0xa8] = F_I8;
	one[0xa9] = F_IZ;
	set(one, 0xb0, 0xb7, F_I8);
	set(one, 0xb8, 0xbf, F_IV);
	one[0xc0] = one[0xc1] = F_M | F_I8;
	one[0xc2] = F_I16;
	one[0xc3] = 0;
	one[0xc6] = F_M | F_I8;
	one[0xc7] = F_M | F_IZ;
	one[0xc8] = F_I16 | F_I8;
	one[0xc9] = 0;
	one[0xca] = F_I16;
	one[0xcb] = one[0xcc] = 0;
	one[0xcd] = F_I8;
	one[0xce] = F_BAD;
	one[0xcf] = 0;
	set(one, 0xd0, 0xd3, F_M);
	one[0xd4] = one[0xd5] = one[0xd6] = F_BAD;
	one[0xd7] = 0;
	set(one, 0xd8, 0xdf, F_M);
	set(one, 0xe0, 0xe7, F_I8);
	one[0xe8] = one[0xe9] = F_IZ; /* rel32 */
	one[0xea] = F_BAD;
	one[0xeb] = F_I8;
	set(one, 0xec, 0xef, 0);
	one[0xf1] = one[0xf4] = one[0xf5] = 0;
	one[0xf6] = one[0xf7] = F_M; /* + immediate for test, decided on ModRM */
	set(one, 0xf8, 0xfd, 0);
	one[0xfe] = one[0xff] = F_M;

	/* Two-byte map (0f xx). */
	set(two, 0x00, 0xff, F_M);
	two[0x04] = two[0x0a] = two[0x0c] = F_BAD;
	set(two, 0x05, 0x09, 0); /* syscall, clts, sysret, invd, wbinvd */
	two[0x0b] = two[0x0e] = 0;
	two[0x0f] = F_M | F_I8; /* 3DNow!: the opcode is the trailing byte */
	set(two, 0x24, 0x27, F_BAD);
	set(two, 0x30, 0x37, 0);
	two[0x36] = F_BAD;
	two[0x39] = F_BAD;
	set(two, 0x3b, 0x3f, F_BAD);
	set(two, 0x70, 0x73, F_M | F_I8);
	two[0x77] = 0;
	two[0x7a] = two[0x7b] = F_BAD;
	set(two, 0x80, 0x8f, F_IZ); /* jcc rel32 */
	two[0xa0] = two[0xa1] = two[0xa2] = 0;
	two[0xa4] = two[0xac] = F_M | F_I8;
	two[0xa6] = two[0xa7] = F_BAD;
	two[0xa8] = two[0xa9] = two[0xaa] = 0;
	two[0xba] = F_M | F_I8;
	two[0xc2] = two[0xc4] = two[0xc5] = two[0xc6] = F_M | F_I8;
	set(two, 0xc8, 0xcf, 0);
}

static const char *const reg_names[X86_NREGS] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
};

const char *x86_reg_name(int reg)
{
	return reg >= 0 && reg < X86_NREGS ? reg_names[reg] : "?";
}

#define R(x) (1u << (x))

/* Register writes of the common integer instructions of the one-byte map. */
static void effects_one(struct x86_insn *in, int reg, int rm, bool mod3, bool w)
{
	uint8_t op = in->opcode;
	int g = (in->modrm >> 3) & 7;

	in->writes_known = true;
	if (op < 0x40 && (op & 7) < 6) {
		bool cmp = (op >> 3) == 7;

		if (cmp)
			return;
		if ((op & 7) < 2)
			in->writes = mod3 ? R(rm) : 0;
		else if ((op & 7) < 4)
			in->writes = R(reg);
		else
			in->writes = R(X86_RAX);
		return;
	}
	if (op >= 0x50 && op <= 0x57) {
		in->writes = R(X86_RSP);
		in->push_reg = (op & 7) | ((in->rex & 1) << 3);
		return;
	}
	if (op >= 0x58 && op <= 0x5f) {
		in->pop_reg = (op & 7) | ((in->rex & 1) << 3);
		in->writes = R(X86_RSP) | R(in->pop_reg);
		return;
	}
	if (op >= 0xb0 && op <= 0xbf) {
		in->writes = R((op & 7) | ((in->rex & 1) << 3));
		return;
	}
	if (op >= 0x70 && op <= 0x7f)
		return;
	if (op >= 0xd8 && op <= 0xdf) {
		/* x87: only fnstsw %ax touches an integer register. */
		if (op == 0xdf && in->modrm == 0xe0)
			in->writes = R(X86_RAX);
		return;
	}
	switch (op) {
	case 0x63: case 0x69: case 0x6b: case 0x8a: case 0x8d:
		in->writes = R(reg);
		return;
	case 0x8b:
		in->writes = R(reg);
		if (mod3 && w) {
			in->copy_src = rm;
			in->copy_dst = reg;
		}
		return;
	case 0x88: case 0xc6: case 0xc7: case 0xc0: case 0xc1:
	case 0xd0: case 0xd1: case 0xd2: case 0xd3:
		in->writes = mod3 ? R(rm) : 0;
		return;
	case 0x89:
		in->writes = mod3 ? R(rm) : 0;
		if (mod3 && w) {
			in->copy_src = reg;
			in->copy_dst = rm;
		}
		return;
	case 0x80: case 0x81: case 0x83:
		in->writes = g == 7 || !mod3 ? 0 : R(rm);
		return;
	case 0x84: case 0x85: case 0xa8: case 0xa9:
		return;
	case 0x86: case 0x87:
		in->writes = R(reg) | (mod3 ? R(rm) : 0);
		return;
	case 0x90:
		if (in->rex & 1)
			in->writes = R(X86_RAX) | R(X86_R8);
		return;
	case 0x91: case 0x92: case 0x93: case 0x94: case 0x95: case 0x96: case 0x97:
		in->writes = R(X86_RAX) | R((op & 7) | ((in->rex & 1) << 3));
		return;
	case 0x98:
		in->writes = R(X86_RAX);
		return;
	case 0x99:
		in->writes = R(X86_RDX);
		return;
	case 0x68: case 0x6a: case 0x9c: case 0x9d:
		in->writes = R(X86_RSP);
		return;
	case 0xc9:
		in->writes = R(X86_RSP) | R(X86_RBP);
		return;
	case 0xf6: case 0xf7:
		if (g <= 1)
			return;
		if (g <= 3)
			in->writes = mod3 ? R(rm) : 0;
		else
			in->writes = R(X86_RAX) | R(X86_RDX);
		return;
	case 0xfe: case 0xff:
		if (g <= 1) {
			in->writes = mod3 ? R(rm) : 0;
			return;
		}
		if (g == 6) {
			in->writes = R(X86_RSP);
			return;
		}
		break;
	case 0xe8:
		/* The callee may change every caller-saved register. */
		in->writes = R(X86_RAX) | R(X86_RCX) | R(X86_RDX) | R(X86_RSI) | R(X86_RDI) |
			     R(X86_R8) | R(X86_R9) | R(X86_R10) | R(X86_R11) | R(X86_RSP);
		return;
	case 0xe9: case 0xeb: case 0xc3: case 0xc2: case 0xcc: case 0xf4:
		return;
	}
	in->writes_known = false;
}

static void effects_two(struct x86_insn *in, int reg, int rm, bool mod3)
{
	uint8_t op = in->opcode;

	in->writes_known = true;
	if (op >= 0x80 && op <= 0x8f)
		return;
	if (op >= 0x40 && op <= 0x4f) {
		in->writes = R(reg);
		return;
	}
	if (op >= 0x90 && op <= 0x9f) {
		in->writes = mod3 ? R(rm) : 0;
		return;
	}
	if (op >= 0xc8 && op <= 0xcf) {
		in->writes = R((op & 7) | ((in->rex & 1) << 3));
		return;
	}
	switch (op) {
	case 0x05: /* syscall */
		in->writes = R(X86_RAX) | R(X86_RCX) | R(X86_R11);
		return;
	case 0x1e: case 0x1f: case 0x0d: case 0x18: /* endbr, nops, prefetch */
		return;
	case 0xae: /* fxsave, ldmxcsr, stmxcsr, xsave, fences: no integer register */
		if (!mod3 || ((in->modrm >> 3) & 7) >= 5)
			return;
		break;
	case 0xa2:
		in->writes = R(X86_RAX) | R(X86_RBX) | R(X86_RCX) | R(X86_RDX);
		return;
	case 0x31:
		in->writes = R(X86_RAX) | R(X86_RDX);
		return;
	case 0xa3:
		return;
	case 0xab: case 0xb3: case 0xbb: case 0xa4: case 0xa5: case 0xac: case 0xad: case 0xba:
		/* 0f ba /4 is bt, which only reads (Go's casgstatus tests its arguments so). */
		in->writes = mod3 && !(in->opcode == 0xba && ((in->modrm >> 3) & 7) == 4) ? R(rm)
											      : 0;
		return;
	case 0xaf: case 0xb6: case 0xb7: case 0xbe: case 0xbf: case 0xbc: case 0xbd: case 0xb8:
		in->writes = R(reg);
		return;
	case 0xb0: case 0xb1:
		in->writes = R(X86_RAX) | (mod3 ? R(rm) : 0);
		return;
	case 0xc0: case 0xc1:
		in->writes = R(reg) | (mod3 ? R(rm) : 0);
		return;
	}
	in->writes_known = false;
}

static int64_t sread(const uint8_t *p, int n)
{
	switch (n) {
	case 1: return (int8_t)p[0];
	case 2: return (int16_t)(p[0] | p[1] << 8);
	case 4: return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				 (uint32_t)p[3] << 24);
	case 8: {
		uint64_t v = 0;

		for (int i = 7; i >= 0; i--)
			v = v << 8 | p[i];
		return (int64_t)v;
	}
	}
	return 0;
}

int x86_decode(const uint8_t *code, size_t avail, uint64_t addr, struct x86_insn *in)
{
	size_t i = 0, max = avail < 15 ? avail : 15;
	bool addr32 = false, rex_w, lock = false;
	uint8_t f;
	int nprefix = 0;

	pthread_once(&tables_once, init_tables);
	memset(in, 0, sizeof(*in));
	in->copy_src = in->copy_dst = in->push_reg = in->pop_reg = -1;

	/* Legacy prefixes, then at most one REX right before the opcode. */
	for (;; i++) {
		if (i >= max)
			return 0;
		switch (code[i]) {
		case 0x66: in->opsize16 = true; nprefix++; continue;
		case 0x67: addr32 = true; nprefix++; continue;
		case 0xf2: in->repne = true; nprefix++; continue;
		case 0xf3: in->rep = true; nprefix++; continue;
		case 0xf0: lock = true; nprefix++; continue;
		case 0x64: case 0x65: case 0x2e: case 0x36: case 0x3e: case 0x26: nprefix++; continue;
		}
		break;
	}
	if ((code[i] & 0xf0) == 0x40) {
		in->rex = code[i++];
		if (i >= max)
			return 0;
	}
	rex_w = in->rex & 8;

	if (code[i] == 0xc4 || code[i] == 0xc5 || code[i] == 0x62 ||
	    (code[i] == 0x8f && i + 1 < max && (code[i + 1] & 0x1f) >= 8)) {
		/* VEX / EVEX / XOP: no REX or 66/f2/f3 before them. */
		uint8_t esc = code[i], mapsel;
		size_t payload = esc == 0xc5 ? 1 : esc == 0x62 ? 3 : 2;

		if (in->rex || in->opsize16 || in->rep || in->repne || lock)
			return 0;
		if (i + payload + 1 >= max)
			return 0;
		if (esc == 0xc5)
			mapsel = 1;
		else if (esc == 0x62)
			mapsel = code[i + 1] & 0x07;
		else
			mapsel = code[i + 1] & 0x1f;
		in->vex = true;
		in->rex = 0x40 | (esc == 0xc5 ? 0 : ((code[i + 2] & 0x80) ? 8 : 0));
		in->map = esc == 0x8f ? mapsel : (uint8_t)(8 + mapsel);
		i += 1 + payload;
		in->opcode = code[i++];
		in->has_modrm = !(esc != 0x8f && mapsel == 1 && in->opcode == 0x77 && esc != 0x62);
		if (esc == 0x8f)
			in->imm_len = mapsel == 8 ? 1 : mapsel == 0xa ? 4 : 0;
		else if (mapsel == 3)
			in->imm_len = 1;
		else if (mapsel == 1)
			in->imm_len = ((in->opcode >= 0x70 && in->opcode <= 0x73) || in->opcode == 0xc2 ||
				       in->opcode == 0xc4 || in->opcode == 0xc5 || in->opcode == 0xc6)
					      ? 1 : 0;
		else if (mapsel == 0 || mapsel > 7)
			return 0;
		f = in->has_modrm ? F_M : 0;
		goto modrm;
	}

	in->opcode = code[i++];
	if (in->opcode == 0x0f) {
		if (i >= max)
			return 0;
		in->opcode = code[i++];
		if (in->opcode == 0x38 || in->opcode == 0x3a) {
			in->map = in->opcode == 0x38 ? 2 : 3;
			if (i >= max)
				return 0;
			in->opcode = code[i++];
			f = F_M | (in->map == 3 ? F_I8 : 0);
		} else {
			in->map = 1;
			f = two[in->opcode];
		}
	} else {
		in->map = 0;
		f = one[in->opcode];
	}
	if (f & F_BAD)
		return 0;
	if (f & F_I8)
		in->imm_len += 1;
	if (f & F_I16)
		in->imm_len += 2;
	if (f & F_IZ)
		in->imm_len += (in->opsize16 && !(in->map == 0 && (in->opcode == 0xe8 || in->opcode == 0xe9)) &&
				!(in->map == 1 && in->opcode >= 0x80 && in->opcode <= 0x8f))
				       ? 2 : 4;
	if (f & F_IV)
		in->imm_len += rex_w ? 8 : in->opsize16 ? 2 : 4;
	if (f & F_MOFFS)
		in->disp_len = addr32 ? 4 : 8;
	in->has_modrm = f & F_M;

modrm:
	if (in->has_modrm) {
		uint8_t mod, rm;

		if (i >= max)
			return 0;
		in->modrm = code[i++];
		/* mov to/from control and debug registers: always the register form. */
		mod = !in->vex && in->map == 1 && in->opcode >= 0x20 && in->opcode <= 0x23
			      ? 3 : in->modrm >> 6;
		rm = in->modrm & 7;
		if (mod != 3 && rm == 4) {
			uint8_t sib;

			if (i >= max)
				return 0;
			sib = code[i++];
			if (mod == 0 && (sib & 7) == 5)
				in->disp_len = 4;
		}
		if (mod == 0 && rm == 5)
			in->disp_len = 4; /* rip-relative */
		else if (mod == 1)
			in->disp_len = 1;
		else if (mod == 2)
			in->disp_len = 4;
		/* test r/m, imm: the immediate depends on the ModRM's reg field. */
		if (!in->vex && in->map == 0 && (in->opcode == 0xf6 || in->opcode == 0xf7) &&
		    ((in->modrm >> 3) & 7) <= 1)
			in->imm_len = in->opcode == 0xf6 ? 1 : in->opsize16 ? 2 : 4;
	}
	if (i + in->disp_len + in->imm_len > max)
		return 0;
	i += in->disp_len;
	if (in->imm_len) {
		int first = in->imm_len == 3 ? 2 : in->imm_len; /* enter: imm16, imm8 */

		in->imm = sread(code + i, first);
	}
	i += in->imm_len;
	in->len = (uint8_t)i;

	/* Control flow. */
	in->flow = X86_FLOW_NEXT;
	if (!in->vex && in->map == 0) {
		uint8_t op = in->opcode;

		if ((op >= 0x70 && op <= 0x7f) || (op >= 0xe0 && op <= 0xe3))
			in->flow = X86_FLOW_JCC;
		else if (op == 0xeb || op == 0xe9)
			in->flow = X86_FLOW_JMP;
		else if (op == 0xe8)
			in->flow = X86_FLOW_CALL;
		else if (op == 0xc2 || op == 0xc3 || op == 0xca || op == 0xcb || op == 0xcf ||
			 op == 0xf4 || op == 0xcc)
			in->flow = X86_FLOW_RET;
		else if (op == 0xff && ((in->modrm >> 3) & 7) >= 2 && ((in->modrm >> 3) & 7) <= 5)
			in->flow = X86_FLOW_INDIRECT;
		if (in->flow == X86_FLOW_JCC || in->flow == X86_FLOW_JMP || in->flow == X86_FLOW_CALL)
			in->target = addr + in->len + (uint64_t)in->imm;
	} else if (!in->vex && in->map == 1) {
		if (in->opcode >= 0x80 && in->opcode <= 0x8f) {
			in->flow = X86_FLOW_JCC;
			in->target = addr + in->len + (uint64_t)in->imm;
		} else if (in->opcode == 0x0b || in->opcode == 0x07) {
			in->flow = X86_FLOW_RET; /* ud2, sysret */
		}
	}

	/*
	 * What the kernel's uprobe code does with it: relative jumps, calls and
	 * conditional branches, the one-byte nop and pushes of a register are
	 * emulated; everything else is stepped out of line (measured on 6.18:
	 * a multi-byte nop in a function body is stepped too). Operand-size and other odd
	 * prefixes send even those to the slow path, and int3 is refused.
	 */
	in->uprobe = X86_UPROBE_STEPPED;
	if (!in->vex && in->map == 0 && in->opcode == 0xcc)
		in->uprobe = X86_UPROBE_REFUSED;
	else if (!in->vex && nprefix == 0) {
		uint8_t op = in->opcode;

		if (in->map == 0 && (op == 0xeb || op == 0xe9 || op == 0xe8 ||
				     (op >= 0x70 && op <= 0x7f)) && !in->rex)
			in->uprobe = X86_UPROBE_EMULATED;
		else if (in->map == 0 && op == 0x90 && !in->rex)
			in->uprobe = X86_UPROBE_EMULATED;
		else if (in->map == 0 && op >= 0x50 && op <= 0x57 && (!in->rex || in->rex == 0x41))
			in->uprobe = X86_UPROBE_EMULATED;
		else if (in->map == 1 && op >= 0x80 && op <= 0x8f && !in->rex)
			in->uprobe = X86_UPROBE_EMULATED;
	}

	/* Register effects (only what the argument tracking needs to be exact about). */
	{
		int reg = ((in->modrm >> 3) & 7) | ((in->rex & 4) << 1);
		int rm = (in->modrm & 7) | ((in->rex & 1) << 3);
		bool mod3 = in->has_modrm && (in->modrm >> 6) == 3;

		if (in->vex)
			in->writes_known = false;
		else if (in->map == 0)
			effects_one(in, reg, rm, mod3, rex_w);
		else if (in->map == 1)
			effects_two(in, reg, rm, mod3);
		else
			in->writes_known = false;
	}
	return in->len;
}

bool x86_uprobe_may_optimize(const uint8_t *code, size_t avail)
{
	static const uint8_t nop10[] = { 0x66, 0x2e, 0x0f, 0x1f, 0x84 };
	struct x86_insn in;
	int len = x86_decode(code, avail, 0, &in);
	bool nop;

	if (!len || in.vex)
		return false;
	nop = (in.map == 0 && in.opcode == 0x90 && !(in.rex & 1)) ||
	      (in.map == 1 && in.opcode == 0x1f && in.has_modrm && ((in.modrm >> 3) & 7) == 0);
	if (!nop)
		return false;
	return len == 5 || (len == 10 && !memcmp(code, nop10, sizeof(nop10)));
}
