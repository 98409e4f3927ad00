// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Planning uprobes on the context functions of unmodified coroutine
 * libraries (see switchfam.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "elfnotes.h"
#include "goelf.h"
#include "raw.h"
#include "switchfam.h"
#include "util.h"
#include "x86dec.h"

#define CODE_MAX 4096

/* Up to `len` bytes of code at vaddr; returns how many were read (0 if not code). */
static size_t obj_code(const struct elf_image *o, uint64_t vaddr, uint8_t *buf, size_t len)
{
	uint64_t off, avail;
	ssize_t n;

	if (!elf_image_text_offset(o, vaddr, &off, &avail))
		return 0;
	if (len > avail)
		len = (size_t)avail;
	n = pread(o->fd, buf, len, (off_t)off);
	return n > 0 ? (size_t)n : 0;
}

/*
 * A symbol of type NOTYPE names code when its section is executable:
 * hand-written assembly often has no .type directive (libruby's
 * coroutine_transfer is NOTYPE, size 0).
 */
static bool obj_sym_is_code(const struct elf_image *o, const GElf_Sym *sym)
{
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (GELF_ST_TYPE(sym->st_info) == STT_FUNC)
		return true;
	if (GELF_ST_TYPE(sym->st_info) != STT_NOTYPE || sym->st_shndx >= SHN_LORESERVE)
		return false;
	scn = elf_getscn(o->elf, sym->st_shndx);
	return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

/* A defined function symbol by exact name, from .symtab, else .dynsym. */
bool switchfam_obj_symbol(const struct elf_image *o, const char *name, uint64_t *vaddr,
			  uint64_t *size)
{
	const Elf64_Word types[2] = { SHT_SYMTAB, SHT_DYNSYM };

	for (int pass = 0; pass < 2; pass++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(o->elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;
			size_t n;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != types[pass] || !sh.sh_entsize)
				continue;
			d = elf_section_data(o->elf, scn, &sh);
			if (!d)
				continue;
			n = sh.sh_size / sh.sh_entsize;
			for (size_t i = 0; i < n; i++) {
				GElf_Sym sym;
				const char *s;

				if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
				    !sym.st_value)
					continue;
				s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
				if (s && !strcmp(s, name) && obj_sym_is_code(o, &sym)) {
					*vaddr = sym.st_value;
					*size = sym.st_size;
					return true;
				}
			}
		}
	}
	/* A Go binary without its symbol table still has Go's own (goelf.h). */
	return goelf_func_by_name(o->elf, name, vaddr, size);
}

#define obj_symbol switchfam_obj_symbol

/* ---- choosing the instruction ---- */

#define MAX_ARGS 3

struct site_req {
	int nargs;
	int reg[MAX_ARGS]; /* where each argument is at the entry */
};

struct site_res {
	uint64_t vaddr;
	bool emulated;
	int loc[MAX_ARGS]; /* where each argument is at the chosen instruction */
};

/*
 * The first instruction on the straight line from the function's entry
 * that the kernel emulates, at which every requested argument still sits
 * in some register, and that nothing else in the function jumps to (or
 * jumps before): it runs exactly once per call, with the values known. The
 * entry itself if there is none. `fsize` 0: the function ends at its first
 * return.
 */
static int find_site(const struct elf_image *o, uint64_t start, uint64_t fsize,
		     const struct site_req *rq, struct site_res *res)
{
	uint8_t code[CODE_MAX];
	size_t n = obj_code(o, start, code, fsize && fsize < CODE_MAX ? fsize : CODE_MAX);
	uint64_t end = start + n, first_target = UINT64_MAX, a;
	uint16_t mask[MAX_ARGS], stack[32][MAX_ARGS];
	int depth = 0;
	struct x86_insn in;

	if (!n)
		return -ENOENT;
	/* The function's extent, and the earliest place inside it something jumps to. */
	for (a = start; a < end;) {
		int len = x86_decode(code + (a - start), end - a, a, &in);

		if (!len)
			break;
		if ((in.flow == X86_FLOW_JCC || in.flow == X86_FLOW_JMP) && in.target > start &&
		    in.target < first_target)
			first_target = in.target;
		a += len;
		if (!fsize && (in.flow == X86_FLOW_RET || in.flow == X86_FLOW_INDIRECT ||
			       in.flow == X86_FLOW_JMP))
			break;
	}
	end = a;

	for (int i = 0; i < rq->nargs; i++)
		mask[i] = (uint16_t)(1u << rq->reg[i]);
	res->vaddr = start;
	res->emulated = false;
	for (int i = 0; i < rq->nargs; i++)
		res->loc[i] = rq->reg[i];
	for (a = start; a < end && a < first_target;) {
		int len = x86_decode(code + (a - start), end - a, a, &in);
		bool all = true;

		if (!len)
			break;
		if (a == start)
			res->emulated = in.uprobe == X86_UPROBE_EMULATED;
		for (int i = 0; i < rq->nargs; i++)
			all = all && mask[i];
		if (in.uprobe == X86_UPROBE_EMULATED && all) {
			res->vaddr = a;
			res->emulated = true;
			for (int i = 0; i < rq->nargs; i++)
				res->loc[i] = __builtin_ctz(mask[i]);
			return 0;
		}
		if (!in.writes_known)
			break;
		/* Follow the values: a pop brings back what a push saved. */
		if (in.push_reg >= 0 && depth < 32) {
			for (int i = 0; i < rq->nargs; i++)
				stack[depth][i] = (mask[i] >> in.push_reg) & 1;
			depth++;
		}
		for (int i = 0; i < rq->nargs; i++) {
			uint16_t had = mask[i];

			mask[i] &= (uint16_t)~in.writes;
			if (in.copy_src >= 0 && (had >> in.copy_src) & 1)
				mask[i] |= (uint16_t)(1u << in.copy_dst);
		}
		if (in.pop_reg >= 0) {
			if (!depth)
				break;
			depth--;
			for (int i = 0; i < rq->nargs; i++)
				if (stack[depth][i])
					mask[i] |= (uint16_t)(1u << in.pop_reg);
		}
		if (in.flow != X86_FLOW_NEXT && in.flow != X86_FLOW_CALL)
			break;
		a += len;
	}
	/* Nothing better: the entry, arguments where the calling convention puts them. */
	return 0;
}

static void add_site(struct switch_plan *p, const struct elf_image *o, const char *func,
		     uint64_t fstart, const struct site_res *r, uint64_t cookie, const char *what)
{
	struct switch_site *s;
	uint64_t off, avail;

	if (p->nsites >= SWITCHFAM_MAX_SITES || !elf_image_text_offset(o, r->vaddr, &off, &avail))
		return;
	s = &p->sites[p->nsites++];
	s->offset = off;
	s->cookie = cookie;
	snprintf(s->func, sizeof(s->func), "%s", func);
	s->insn_off = (uint32_t)(r->vaddr - fstart);
	s->emulated = r->emulated;
	snprintf(s->desc, sizeof(s->desc), "%s+0x%x (%s%s%s)", func, s->insn_off,
		 r->emulated ? "emulated" : "single-stepped", what[0] ? "; " : "", what);
	if (!r->emulated && CORO_CTX_COOKIE_OP(cookie) == CORO_CTXOP_SWITCH)
		p->stepped++;
}

/*
 * The instruction at `at` bytes into the code at `start`, found by decoding
 * from `start` (`size` 0: the extent is not known). 0, or -ERANGE past the
 * end, -EINVAL inside an instruction (*inside: where that one starts),
 * -EILSEQ if the code before it does not decode.
 */
static int exact_site(const struct elf_image *o, uint64_t start, uint64_t size, uint64_t at,
		      struct site_res *r, uint64_t *inside)
{
	uint64_t a = start, off, avail;
	struct x86_insn in;
	int ret = 0, len = 0;
	uint8_t *code;
	size_t want, n;

	/* Bounded by the function, else its segment: the offset comes from the command line. */
	if ((size && at >= size) || !elf_image_text_offset(o, start, &off, &avail) || at >= avail)
		return -ERANGE;
	want = (size_t)at + 16;
	code = xmalloc(want);
	n = obj_code(o, start, code, want);
	if (n <= at) {
		free(code);
		return -ERANGE;
	}
	while (a < start + at) {
		len = x86_decode(code + (a - start), n - (a - start), a, &in);
		if (!len)
			break;
		a += len;
	}
	if (a != start + at) {
		ret = len ? -EINVAL : -EILSEQ;
		*inside = a - len - start;
	} else {
		len = x86_decode(code + at, n - at, a, &in);
		r->vaddr = a;
		r->emulated = len && in.uprobe == X86_UPROBE_EMULATED;
	}
	free(code);
	return ret;
}

/*
 * A switch function: from (or current), to, and optionally a register
 * that says how the switch ends `from` (cookie flags), followed to the
 * cheapest instruction; at `at` instead when the user named an offset.
 */
static int plan_switch_at(struct switch_plan *p, const struct elf_image *o, const char *func,
			  uint64_t start, uint64_t size, const int *regs, uint32_t flags,
			  int64_t delta, bool exact, uint64_t at, uint64_t *inside)
{
	struct site_req rq = { 0 };
	struct site_res r;
	char what[80];
	int fi = -1, ti, ai = -1, loc[MAX_ARGS] = { CORO_CTX_REG_NONE, 0, CORO_CTX_REG_NONE };
	int ret;

	if (regs[0] != CORO_CTX_REG_NONE) {
		fi = rq.nargs;
		rq.reg[rq.nargs++] = regs[0];
	}
	ti = rq.nargs;
	rq.reg[rq.nargs++] = regs[1];
	if (regs[2] != CORO_CTX_REG_NONE) {
		ai = rq.nargs;
		rq.reg[rq.nargs++] = regs[2];
	}
	if (exact) {
		/* An offset the user named: exactly there, registers as named. */
		ret = exact_site(o, start, size, at, &r, inside);
		if (ret)
			return ret;
		for (int i = 0; i < rq.nargs; i++)
			r.loc[i] = rq.reg[i];
	} else if (find_site(o, start, size, &rq, &r)) {
		return -ENOENT;
	}
	if (fi >= 0)
		loc[0] = r.loc[fi];
	loc[1] = r.loc[ti];
	if (ai >= 0)
		loc[2] = r.loc[ai];
	if (fi >= 0)
		snprintf(what, sizeof(what), "from %%%s%s, to %%%s", x86_reg_name(loc[0]),
			 delta ? (delta < 0 ? "-delta" : "+delta") : "", x86_reg_name(loc[1]));
	else
		snprintf(what, sizeof(what), "to %%%s", x86_reg_name(loc[1]));
	if (ai >= 0)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), ", action %%%s",
			 x86_reg_name(loc[2]));
	add_site(p, o, func, start, &r,
		 CORO_CTX_COOKIE(CORO_CTXOP_SWITCH, loc[0], loc[1], loc[2], p->family, flags,
				 delta),
		 what);
	return 0;
}

/* A switch function: from (or current) and to, followed to the cheapest instruction. */
static int plan_switch(struct switch_plan *p, const struct elf_image *o, const char *func,
		       int from_reg, int to_reg, int64_t delta)
{
	const int regs[3] = { from_reg, to_reg, CORO_CTX_REG_NONE };
	uint64_t start, size;

	if (!obj_symbol(o, func, &start, &size))
		return -ENOENT;
	return plan_switch_at(p, o, func, start, size, regs, 0, delta, false, 0, NULL);
}

static int plan_simple(struct switch_plan *p, const struct elf_image *o, const char *func, int op,
		       int nargs, const int *regs, uint32_t flags, const char *what)
{
	uint64_t start, size;
	struct site_req rq = { .nargs = nargs };
	struct site_res r;
	int loc[MAX_ARGS] = { CORO_CTX_REG_NONE, CORO_CTX_REG_NONE, CORO_CTX_REG_NONE };

	if (!obj_symbol(o, func, &start, &size))
		return -ENOENT;
	for (int i = 0; i < nargs; i++)
		rq.reg[i] = regs[i];
	if (find_site(o, start, size, &rq, &r))
		return -ENOENT;
	for (int i = 0; i < nargs; i++)
		loc[i] = r.loc[i];
	add_site(p, o, func, start, &r,
		 CORO_CTX_COOKIE(op, loc[0], loc[1], loc[2], p->family, flags, 0), what);
	return 0;
}

/*
 * glibc's makecontext points the new context's return address at
 * __start_context, a local function (no symbol in a stripped libc): found
 * as the one rip-relative lea of makecontext into code, and recognised by
 * its first instruction (mov %rbx,%rsp). When a context's function returns
 * it runs there, on its way to uc_link: that is its exit.
 */
static bool find_start_context(const struct elf_image *o, uint64_t *where)
{
	uint64_t start, size, a, found = 0;
	uint8_t code[1024], head[3];
	size_t n;
	int hits = 0;
	struct x86_insn in;

	if (!obj_symbol(o, "makecontext", &start, &size))
		return false;
	n = obj_code(o, start, code, size && size < sizeof(code) ? size : sizeof(code));
	for (a = start; a < start + n;) {
		int len = x86_decode(code + (a - start), start + n - a, a, &in);
		uint64_t off, avail;

		if (!len)
			break;
		/* lea disp32(%rip), reg: 48/4c 8d, ModRM mod=00 rm=101 */
		if (!in.vex && in.map == 0 && in.opcode == 0x8d && (in.modrm & 0xc7) == 0x05) {
			const uint8_t *p = code + (a - start) + len - 4;
			int32_t disp = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
						 (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
			uint64_t t = a + len + (int64_t)disp;

			if (elf_image_text_offset(o, t, &off, &avail)) {
				hits++;
				found = t;
			}
		}
		a += len;
		if (in.flow == X86_FLOW_RET)
			break;
	}
	if (hits != 1 || obj_code(o, found, head, 3) != 3 ||
	    memcmp(head, "\x48\x89\xdc", 3) != 0)
		return false;
	*where = found;
	return true;
}

/* The stack pointer adjustment at the top of an fcontext switch: lea disp(%rsp),%rsp. */
static int64_t fcontext_delta(const struct elf_image *o, const char *func)
{
	uint64_t start, size, a;
	uint8_t code[64];
	size_t n;
	struct x86_insn in;

	if (!obj_symbol(o, func, &start, &size))
		return 0;
	n = obj_code(o, start, code, sizeof(code));
	a = start;
	for (int i = 0; i < 3 && a < start + n; i++) {
		int len = x86_decode(code + (a - start), start + n - a, a, &in);

		if (!len)
			break;
		/* 48 8d 64 24 XX: lea disp8(%rsp),%rsp */
		if (len == 5 && !memcmp(code + (a - start), "\x48\x8d\x64\x24", 4))
			return (int8_t)code[a - start + 4];
		a += len;
	}
	return 0;
}

/* ---- call sites (Boost.Context) ---- */

/* The dynamic symbol index of an undefined (imported) function `name`, or -1. */
static long import_index(const struct elf_image *o, const char *name)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_section_data(o->elf, scn, &sh);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *s;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx != SHN_UNDEF)
				continue;
			s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
			if (s && !strcmp(s, name))
				return (long)i;
		}
	}
	return -1;
}

/*
 * How the object reaches dynamic symbol `idx`: the GOT slot of its PLT
 * entry (JUMP_SLOT). Returns 0 and the slot, -ENOENT if it never does, or
 * -EXDEV if it also takes the function's address through the GOT or a data
 * relocation (calls we could not all see).
 */
static int plt_slot(const struct elf_image *o, long idx, uint64_t *slot)
{
	Elf_Scn *scn = NULL;
	int found = -ENOENT;

	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		d = elf_section_data(o->elf, scn, &sh);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r) || (long)GELF_R_SYM(r.r_info) != idx)
				continue;
			if (GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT)
				return -EXDEV;
			*slot = r.r_offset;
			found = 0;
		}
	}
	return found;
}

struct code_section {
	uint64_t addr, size, off;
	char name[32];
};

/* The object's executable sections (where instructions begin at the section start). */
static size_t exec_sections(const struct elf_image *o, struct code_section *v, size_t max)
{
	Elf_Scn *scn = NULL;
	size_t n = 0, shstrndx;

	if (elf_getshdrstrndx(o->elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(o->elf, scn)) && n < max) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
			continue;
		name = elf_strptr(o->elf, shstrndx, sh.sh_name);
		v[n].addr = sh.sh_addr;
		v[n].size = sh.sh_size;
		v[n].off = sh.sh_offset;
		snprintf(v[n].name, sizeof(v[n].name), "%s", name ? name : "?");
		n++;
	}
	return n;
}

/* Where a rip-relative memory operand of `in` (at addr, bytes b) points; false if none. */
static bool rip_target(const struct x86_insn *in, const uint8_t *b, uint64_t addr, uint64_t *t)
{
	int32_t disp;
	const uint8_t *p;

	if (!in->has_modrm || (in->modrm & 0xc7) != 0x05 || in->disp_len != 4)
		return false;
	p = b + in->len - in->imm_len - 4;
	disp = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
	*t = addr + in->len + (int64_t)disp;
	return true;
}

#define MAX_CALL_SITES 64

struct call_sites {
	uint64_t vaddr[MAX_CALL_SITES];
	bool tail[MAX_CALL_SITES]; /* a jmp (tail call): the caller's return address is on the stack */
	int n;
};

/*
 * Every place object `o` transfers control to function `fn` (imported
 * through its PLT, or defined in it), found by decoding all its
 * executable sections. Returns 0 (sites in cs, maybe none), or -EXDEV if
 * something else refers to the function or its GOT slot (its address
 * taken, a call through the GOT, code that does not decode): then not
 * every switch would be seen from call sites.
 */
static int find_call_sites(const struct elf_image *o, const char *fn, struct call_sites *cs)
{
	struct code_section secs[32];
	size_t nsec = exec_sections(o, secs, 32);
	uint64_t targets[2], slot = 0, v, sz;
	int nt = 0, ret;
	long idx = import_index(o, fn);
	uint8_t *buf = NULL;

	cs->n = 0;
	if (obj_symbol(o, fn, &v, &sz))
		targets[nt++] = v;
	if (idx >= 0) {
		ret = plt_slot(o, idx, &slot);
		if (ret == -EXDEV)
			return ret;
	}
	/* The PLT entry: the 16-byte stub whose indirect jmp reads the slot. */
	for (size_t s = 0; slot && s < nsec; s++) {
		struct x86_insn in;
		uint64_t a, t;

		if (strncmp(secs[s].name, ".plt", 4))
			continue;
		buf = xrealloc(buf, secs[s].size);
		if (pread(o->fd, buf, secs[s].size, (off_t)secs[s].off) != (ssize_t)secs[s].size)
			continue;
		for (a = secs[s].addr; a < secs[s].addr + secs[s].size;) {
			const uint8_t *b = buf + (a - secs[s].addr);
			int len = x86_decode(b, secs[s].addr + secs[s].size - a, a, &in);

			if (!len) {
				a++;
				continue;
			}
			if (in.flow == X86_FLOW_INDIRECT && rip_target(&in, b, a, &t) && t == slot &&
			    nt < 2)
				targets[nt++] = a & ~15ULL;
			a += len;
		}
	}
	if (!nt) {
		free(buf);
		return idx >= 0 && slot ? -EXDEV : 0; /* imported, but no stub found: be safe */
	}
	for (size_t s = 0; s < nsec; s++) {
		struct x86_insn in;
		uint64_t a, t;
		bool plt = !strncmp(secs[s].name, ".plt", 4);

		buf = xrealloc(buf, secs[s].size);
		if (pread(o->fd, buf, secs[s].size, (off_t)secs[s].off) != (ssize_t)secs[s].size) {
			free(buf);
			return -EXDEV;
		}
		for (a = secs[s].addr; a < secs[s].addr + secs[s].size;) {
			const uint8_t *b = buf + (a - secs[s].addr);
			int len = x86_decode(b, secs[s].addr + secs[s].size - a, a, &in);
			bool hit = false, call_like;

			if (!len) {
				/* Padding between PLT stubs may not decode; code elsewhere must. */
				if (plt) {
					a++;
					continue;
				}
				free(buf);
				return -EXDEV;
			}
			call_like = in.flow == X86_FLOW_CALL || in.flow == X86_FLOW_JMP;
			for (int i = 0; i < nt; i++)
				if ((call_like && in.target == targets[i]) ||
				    (rip_target(&in, b, a, &t) && t == targets[i]))
					hit = true;
			if (!plt && rip_target(&in, b, a, &t) && slot && t == slot) {
				free(buf); /* a call or load through the GOT slot */
				return -EXDEV;
			}
			if (hit) {
				if (!call_like || in.uprobe != X86_UPROBE_EMULATED ||
				    cs->n == MAX_CALL_SITES) {
					free(buf);
					return -EXDEV;
				}
				cs->vaddr[cs->n] = a;
				cs->tail[cs->n] = in.flow == X86_FLOW_JMP;
				cs->n++;
			}
			a += len;
		}
	}
	free(buf);
	return 0;
}

int switchfam_call_sites(const struct elf_image *o, const char *fn, uint64_t *vaddr, bool *tail,
			int max)
{
	struct call_sites cs;
	int ret = find_call_sites(o, fn, &cs);

	if (ret)
		return ret;
	if (cs.n > max)
		return -E2BIG;
	for (int i = 0; i < cs.n; i++) {
		vaddr[i] = cs.vaddr[i];
		tail[i] = cs.tail[i];
	}
	return cs.n;
}

int switchfam_plan_callers(const char *path, int64_t delta_jump, int64_t delta_ontop,
			   struct switch_plan *plan, char *err, size_t errlen)
{
	static const char *const fns[2] = { "jump_fcontext", "ontop_fcontext" };
	const int64_t deltas[2] = { delta_jump, delta_ontop };
	struct elf_image o;
	int ret;

	memset(plan, 0, sizeof(*plan));
	plan->family = CORO_FAM_FCONTEXT;
	ret = elf_image_open(&o, path, err, errlen);
	if (ret)
		return ret;
	for (int f = 0; f < 2; f++) {
		struct call_sites cs;

		ret = find_call_sites(&o, fns[f], &cs);
		if (ret) {
			errfmt(err, errlen, "%s: %s is reached other than by direct calls", path,
			       fns[f]);
			elf_image_close(&o);
			return ret;
		}
		for (int i = 0; i < cs.n; i++) {
			struct site_res r = { .vaddr = cs.vaddr[i], .emulated = true };
			/* At a call the return address is not pushed yet: the entry's rsp is 8 lower. */
			int64_t d = deltas[f] - (cs.tail[i] ? 0 : 8);
			char func[48];

			snprintf(func, sizeof(func), "%s@call", fns[f]);
			add_site(plan, &o, func, cs.vaddr[i], &r,
				 CORO_CTX_COOKIE(CORO_CTXOP_SWITCH, X86_RSP, X86_RDI, CORO_CTX_REG_NONE,
						 CORO_FAM_FCONTEXT, 0, d),
				 cs.tail[i] ? "tail call" : "call");
			/* add_site names it by function offset; a call site is named by address. */
			if (plan->nsites)
				snprintf(plan->sites[plan->nsites - 1].desc,
					 sizeof(plan->sites[plan->nsites - 1].desc),
					 "%s at 0x%llx (emulated %s)", fns[f],
					 (unsigned long long)cs.vaddr[i], cs.tail[i] ? "jmp" : "call");
		}
	}
	elf_image_close(&o);
	return 0;
}

int64_t switchfam_fcontext_delta(const char *path, const char *fn)
{
	struct elf_image o;
	int64_t d;

	if (elf_image_open(&o, path, NULL, 0))
		return 0;
	d = fcontext_delta(&o, fn);
	elf_image_close(&o);
	return d;
}

int switchfam_symbol_offset(const char *path, const char *name, uint64_t *off)
{
	uint64_t vaddr, size, avail;
	struct elf_image o;
	int ret = -ENOENT;

	if (elf_image_open(&o, path, NULL, 0))
		return -ENOEXEC;
	if (obj_symbol(&o, name, &vaddr, &size) && elf_image_text_offset(&o, vaddr, off, &avail))
		ret = 0;
	elf_image_close(&o);
	return ret;
}

uint32_t switchfam_detect(const char *path)
{
	struct elf_image o;
	uint64_t v, s;
	uint32_t fams = 0;

	if (elf_image_open(&o, path, NULL, 0))
		return 0;
	if (obj_symbol(&o, "swapcontext", &v, &s) && obj_symbol(&o, "makecontext", &v, &s))
		fams |= 1u << CORO_FAM_UCONTEXT;
	if (obj_symbol(&o, "jump_fcontext", &v, &s) && obj_symbol(&o, "make_fcontext", &v, &s))
		fams |= 1u << CORO_FAM_FCONTEXT;
	if (obj_symbol(&o, "pth_spawn", &v, &s) && obj_symbol(&o, "pth_attr_set", &v, &s))
		fams |= 1u << CORO_FAM_PTH;
	for (uint32_t f = SWITCHFAM_RUNTIME_FIRST; f <= SWITCHFAM_RUNTIME_LAST; f++) {
		const struct switchfam_desc *d = switchfam_runtime(f);

		if (d && obj_symbol(&o, d->detect[0], &v, &s) && obj_symbol(&o, d->detect[1], &v, &s))
			fams |= 1u << f;
	}
	if (import_index(&o, "jump_fcontext") >= 0 || import_index(&o, "ontop_fcontext") >= 0)
		fams |= SWITCHFAM_FCONTEXT_CALLER;
	elf_image_close(&o);
	return fams;
}

uint32_t switchfam_imports(const char *path)
{
	static const char *const uc[] = { "makecontext", "swapcontext", "setcontext" };
	struct elf_image o;
	uint32_t fams = 0;

	if (elf_image_open(&o, path, NULL, 0))
		return 0;
	for (size_t i = 0; i < sizeof(uc) / sizeof(uc[0]); i++)
		if (import_index(&o, uc[i]) >= 0)
			fams |= 1u << CORO_FAM_UCONTEXT;
	if (import_index(&o, "pth_spawn") >= 0)
		fams |= 1u << CORO_FAM_PTH | 1u << CORO_FAM_UCONTEXT;
	elf_image_close(&o);
	return fams;
}

const char *switchfam_name(uint32_t family)
{
	return coro_family_name(family);
}

uint32_t switchfam_parse(const char *name)
{
	uint32_t f = coro_family_parse(name);

	if (f == CORO_FAM_CUSTOM || f == CORO_FAM_CXX20)
		return 0; /* named by its uprobe:... spec; C++20 is not chosen by name */
	if (!f && (!strcmp(name, "fcontext") || !strcmp(name, "boost")))
		return CORO_FAM_FCONTEXT;
	return f;
}

void switchfam_help(FILE *out)
{
	fprintf(out,
		"switch-function families (--switch NAME[,NAME...]):\n"
		"  ucontext       glibc makecontext/swapcontext/setcontext; a coroutine is its\n"
		"                 ucontext_t; exits seen when its function returns (uc_link)\n"
		"  boost-context  Boost.Context make_fcontext/jump_fcontext/ontop_fcontext (under\n"
		"                 Boost.Fiber, Boost.Coroutine2, ...); a coroutine is its stack;\n"
		"                 exits are not visible (a reused stack ends the old one)\n"
		"  pth            GNU Pth: names from pth_attr_set, exits from pth_exit; switches\n"
		"                 through ucontext (implies it)\n");
	for (uint32_t f = SWITCHFAM_RUNTIME_FIRST; f <= SWITCHFAM_RUNTIME_LAST; f++)
		if (switchfam_runtime(f))
			fputs(switchfam_runtime(f)->help, out);
	fprintf(out,
		"  asyncio        CPython 3.11's asyncio tasks (the _asyncio module's task steps,\n"
		"                 uprobe sessions: kernel 6.13+); a coroutine is a Task, named\n"
		"                 \"Task-N coro()\"; creates, waits (sleep, io, or the future or\n"
		"                 task awaited) and exits seen (docs/python.md)\n"
		"  lua            Lua 5.4 and LuaJIT 2.1 coroutines (lua_resume, uprobe sessions);\n"
		"                 a coroutine is a lua_State, named source:line; creates, resumes\n"
		"                 (the resumer waits on it), yields and exits seen (docs/lua.md)\n"
		"  uprobe:PATH:SYMBOL[+OFF]:from=ARG,to=ARG\n"
		"  uprobe:PATH:0xADDR:from=ARG,to=ARG\n"
		"                 any function that switches from one context to another; ARG is\n"
		"                 arg0..arg5, sp, a register (rdi, r12, ...), or from=current\n"
		"Without --switch, a process with no corobpf probes is traced through every family\n"
		"whose library it uses.\n");
}

/*
 * Every ret of a function, each a site (what it returns is in rax there),
 * found by decoding it whole; -EXDEV if it can also leave by a tail call
 * (the value is then returned by another function), -EILSEQ if it does not
 * decode.
 */
static int plan_returns(struct switch_plan *p, const struct elf_image *o,
			const struct switchfam_site_desc *sd, uint64_t start, uint64_t size)
{
	uint8_t *code;
	uint64_t a;
	size_t n;
	int ret = 0;
	struct x86_insn in;
	struct switch_plan tmp = { .family = p->family };

	if (!size)
		return -ENOENT;
	code = xmalloc(size);
	n = obj_code(o, start, code, size);
	for (a = start; ret == 0 && a < start + n;) {
		int len = x86_decode(code + (a - start), start + n - a, a, &in);
		bool is_jmp_ind = in.flow == X86_FLOW_INDIRECT && !in.vex && in.map == 0 &&
				  in.opcode == 0xff && ((in.modrm >> 3) & 7) >= 4;

		if (!len) {
			ret = -EILSEQ;
			break;
		}
		if (is_jmp_ind || (in.flow == X86_FLOW_JMP && (in.target < start ||
							      in.target >= start + size)))
			ret = -EXDEV;
		if (in.flow == X86_FLOW_RET && !in.vex && in.map == 0 &&
		    (in.opcode == 0xc3 || in.opcode == 0xc2)) {
			struct site_res r = { .vaddr = a, .emulated = in.uprobe == X86_UPROBE_EMULATED };

			add_site(&tmp, o, sd->func, start, &r,
				 CORO_CTX_COOKIE(sd->op, X86_RAX, CORO_CTX_REG_NONE, CORO_CTX_REG_NONE,
						 p->family, sd->flags, 0),
				 sd->what);
		}
		a += len;
	}
	free(code);
	if (!ret && n != size)
		ret = -EILSEQ;
	if (!ret && !tmp.nsites)
		ret = -ENOENT;
	for (uint32_t i = 0; !ret && i < tmp.nsites && p->nsites < SWITCHFAM_MAX_SITES; i++)
		p->sites[p->nsites++] = tmp.sites[i];
	return ret;
}

/* A runtime family's sites (fam_runtimes.c): -ENOENT if a site it needs is missing. */
static int plan_runtime(struct switch_plan *p, const struct elf_image *o,
			const struct switchfam_desc *d)
{
	for (size_t i = 0; i < sizeof(d->sites) / sizeof(d->sites[0]) && d->sites[i].func; i++) {
		const struct switchfam_site_desc *sd = &d->sites[i];
		const int regs[3] = { sd->reg[0], sd->reg[1], sd->reg[2] };
		uint64_t start, size;
		int ret, n = 0;

		if (!obj_symbol(o, sd->func, &start, &size)) {
			if (sd->optional)
				continue;
			return -ENOENT;
		}
		if (sd->at_return) {
			ret = plan_returns(p, o, sd, start, size);
		} else if (sd->op == CORO_CTXOP_SWITCH) {
			ret = plan_switch_at(p, o, sd->func, start, size, regs, sd->flags, 0, false,
					     0, NULL);
		} else {
			while (n < 3 && regs[n] != CORO_CTX_REG_NONE)
				n++;
			ret = plan_simple(p, o, sd->func, sd->op, n, regs, sd->flags, sd->what);
		}
		if (ret && !sd->optional)
			return ret;
	}
	snprintf(p->limits, sizeof(p->limits), "%s", d->limits);
	return 0;
}

int switchfam_plan(const char *path, uint32_t family, struct switch_plan *plan, char *err,
		   size_t errlen)
{
	struct elf_image o;
	int ret;

	memset(plan, 0, sizeof(*plan));
	plan->family = family;
	ret = elf_image_open(&o, path, err, errlen);
	if (ret)
		return ret;
	ret = -ENOENT;
	switch (family) {
	case CORO_FAM_UCONTEXT: {
		const int rdi[1] = { X86_RDI };
		uint64_t sc;

		if (plan_switch(plan, &o, "swapcontext", X86_RDI, X86_RSI, 0))
			break;
		plan_switch(plan, &o, "setcontext", CORO_CTX_REG_NONE, X86_RDI, 0);
		/*
		 * A context saved by getcontext and set later is a jump, or a way back
		 * to whoever saved it: without it, a new coroutine. glibc's getcontext
		 * has no emulated instruction while %rdi holds the context, so the
		 * entry is single-stepped (once per call; programs call it to make a
		 * context, or to save a place to jump back to, not per switch).
		 */
		plan_simple(plan, &o, "getcontext", CORO_CTXOP_SAVE, 1, rdi, 0, "saved into %rdi");
		if (plan_simple(plan, &o, "makecontext", CORO_CTXOP_CREATE, 1, rdi,
				CORO_CTXC_STACK_UCONTEXT, "the new context in %rdi"))
			break;
		if (find_start_context(&o, &sc)) {
			struct site_req rq = { 0 };
			struct site_res r;

			if (!find_site(&o, sc, 0, &rq, &r))
				add_site(plan, &o, "__start_context", sc, &r,
					 CORO_CTX_COOKIE(CORO_CTXOP_EXIT, CORO_CTX_REG_NONE,
							 CORO_CTX_REG_NONE, CORO_CTX_REG_NONE,
							 family, 0, 0),
					 "a context's function returned");
		} else {
			snprintf(plan->limits, sizeof(plan->limits),
				 "exits not visible (__start_context not recognised in %s)", path);
		}
		ret = 0;
		break;
	}
	case CORO_FAM_FCONTEXT: {
		const int make[2] = { X86_RDI, X86_RSI };

		if (plan_simple(plan, &o, "make_fcontext", CORO_CTXOP_CREATE, 2, make,
				CORO_CTXC_STACK_REGS, "stack top %rdi, size %rsi"))
			break;
		if (plan_switch(plan, &o, "jump_fcontext", X86_RSP, X86_RDI,
				fcontext_delta(&o, "jump_fcontext")))
			break;
		plan_switch(plan, &o, "ontop_fcontext", X86_RSP, X86_RDI,
			    fcontext_delta(&o, "ontop_fcontext"));
		snprintf(plan->limits, sizeof(plan->limits),
			 "exits not visible (a fiber's stack reused by a new one ends it)");
		ret = 0;
		break;
	}
	case CORO_FAM_PTH: {
		const int attr_set[3] = { X86_RDI, X86_RSI, X86_RDX }, spawn[1] = { X86_RDI };

		if (plan_simple(plan, &o, "pth_attr_set", CORO_CTXOP_NAME, 3, attr_set, 0,
				"names") ||
		    plan_simple(plan, &o, "pth_spawn", CORO_CTXOP_SPAWN, 1, spawn, 0, "spawns"))
			break;
		plan_simple(plan, &o, "pth_exit", CORO_CTXOP_EXIT, 1, spawn,
			    CORO_CTXC_EXIT_STATUS_A, "exits, the value in %rdi");
		ret = 0;
		break;
	}
	default:
		if (switchfam_runtime(family)) {
			ret = plan_runtime(plan, &o, switchfam_runtime(family));
			break;
		}
		errfmt(err, errlen, "unknown switch family %u", family);
		ret = -EINVAL;
	}
	if (ret == -ENOENT)
		errfmt(err, errlen, "%s: no %s functions", path, switchfam_name(family));
	elf_image_close(&o);
	return ret;
}

int switchfam_plan_custom(const char *path, const struct switch_custom *cs,
			  struct switch_plan *plan, char *err, size_t errlen)
{
	const int regs[3] = { cs->from_reg, cs->to_reg, CORO_CTX_REG_NONE };
	uint64_t start, size = 0, inside = 0, off, avail;
	char name[sizeof(cs->symbol)];
	struct elf_image o;
	int ret;

	memset(plan, 0, sizeof(*plan));
	plan->family = CORO_FAM_CUSTOM;
	ret = elf_image_open(&o, path, err, errlen);
	if (ret)
		return ret;
	if (cs->at_address) {
		start = cs->address;
		snprintf(name, sizeof(name), "0x%llx", (unsigned long long)start);
		if (!elf_image_text_offset(&o, start, &off, &avail)) {
			errfmt(err, errlen, "%s: address %s is not in an executable segment", path,
			       name);
			elf_image_close(&o);
			return -ERANGE;
		}
	} else if (!obj_symbol(&o, cs->symbol, &start, &size)) {
		errfmt(err, errlen, "%s: no function named %s", path, cs->symbol);
		elf_image_close(&o);
		return -ENOENT;
	} else {
		snprintf(name, sizeof(name), "%s", cs->symbol);
	}
	ret = plan_switch_at(plan, &o, name, start, size, regs, 0, 0,
			     cs->at_address || cs->has_offset, cs->sym_offset, &inside);
	if (ret == -ENOENT)
		errfmt(err, errlen, "%s: no switch site found in %s", path, name);
	else if (ret == -ERANGE)
		errfmt(err, errlen, "%s: %s+0x%llx is past the end of %s%s", path, name,
		       (unsigned long long)cs->sym_offset, name,
		       size ? "" : " (the end of its executable segment)");
	else if (ret == -EINVAL)
		errfmt(err, errlen,
		       "%s: %s+0x%llx is not at an instruction boundary (it is inside the "
		       "instruction at %s+0x%llx)", path, name, (unsigned long long)cs->sym_offset,
		       name, (unsigned long long)inside);
	else if (ret == -EILSEQ)
		errfmt(err, errlen, "%s: the code of %s does not decode at +0x%llx, before +0x%llx",
		       path, name, (unsigned long long)inside, (unsigned long long)cs->sym_offset);
	snprintf(plan->limits, sizeof(plan->limits), "creates and exits not visible");
	elf_image_close(&o);
	return ret;
}
