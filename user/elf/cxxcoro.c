// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* C++20 coroutines in an unmodified object (see cxxcoro.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include "coro_abi.h"
#include "cxxcoro.h"
#include "elfnotes.h"
#include "util.h"
#include "x86dec.h"

/* libstdc++'s demangler (C linkage); corobpf links libstdc++ already. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

enum sym_role { ROLE_OTHER, ROLE_BODY, ROLE_DESTROY, ROLE_RAMP /* Clang's, not inlined */ };

struct sym {
	uint64_t vaddr, size;
	const char *name; /* in the ELF's string table */
	int role;
	int coro; /* BODY, DESTROY: index of its coroutine in names */
};

struct scan {
	struct elf_image img;
	struct sym *syms;
	size_t nsyms;
	struct cxx_plan *plan;
	char **ramps; /* mangled ramp name per coroutine index (NULL for awaiters) */
	bool *adapted; /* per coroutine index: its promise is corobpf::traced<P> */
	bool *clang;   /* per coroutine index: its body is a Clang .resume clone */
	Dwarf *dw;     /* the object's DWARF, if it has any (line info: eager Clang ramps) */
	size_t cap_sites, cap_names;
};

static bool has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && !memcmp(s + n - m, suf, m);
}

/*
 * The ramp's mangled name from a clone's: GCC names the actor
 * `<ramp-ish>P Z <ramp> E <len> <ramp>.Frame.actor`, the local frame type
 * being "<ramp>.Frame"; Clang names the clones `<ramp>.resume` etc.
 */
static char *ramp_of(const char *name, int *role)
{
	static const struct {
		const char *suffix;
		int role;
		bool gcc;
	} kinds[] = {
		{".Frame.actor", ROLE_BODY, true},   {".Frame.destroy", ROLE_DESTROY, true},
		{".resume", ROLE_BODY, false},	      {".destroy", ROLE_DESTROY, false},
		{".cleanup", ROLE_DESTROY, false},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(name), m = strlen(kinds[i].suffix);
		size_t end;

		if (!has_suffix(name, kinds[i].suffix) || strncmp(name, "_Z", 2))
			continue;
		*role = kinds[i].role;
		if (!kinds[i].gcc)
			return strndup(name, n - m);
		/* "<digits>_Z...Frame" ends where ".actor" starts. */
		end = n - m + strlen(".Frame");
		for (size_t p = n - m; p > 0; p--) {
			size_t d = p, val = 0, mul = 1;

			if (name[p] != '_' || name[p + 1] != 'Z')
				continue;
			while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') {
				val += (size_t)(name[d - 1] - '0') * mul;
				mul *= 10;
				d--;
			}
			if (d < p && val == end - p)
				return strndup(name + p, n - m - p);
		}
		return NULL;
	}
	return NULL;
}

/*
 * Past the operator's symbol at s ("<<", "()", "->*"), or past " new", " co_await", a
 * conversion's type...: none of it nests or ends a name.
 */
static size_t operator_end(const char *s)
{
	size_t i = 0;

	if (!strncmp(s, "()", 2) || !strncmp(s, "[]", 2))
		return 2;
	if (s[0] == ' ') {
		/* operator new, delete, co_await, "" suffixes, a conversion: one word. */
		for (i = 1; s[i] && s[i] != '(' && s[i] != '<'; i++)
			;
		return i;
	}
	while (s[i] && strchr("<>=!+-*/%^&|~,", s[i]))
		i++;
	return i;
}

/*
 * A demangled function's name without its return type: the mangling of a
 * function template's specialization holds its return type, which the
 * demangler prints first ("ex::task<int> ns::f<int>(int)"), where any other
 * function starts with its own name ("ns::g(int)"). The name begins after
 * the last space outside brackets before its parameter list (the last
 * parenthesis outside brackets); an operator's symbol is no bracket.
 */
static void drop_return_type(char *s)
{
	size_t depth = 0, params = 0, space = 0;
	bool have_params = false, have_space = false;

	/* The parameter list: the last parenthesis outside brackets. */
	for (size_t i = 0; s[i]; i++) {
		if ((i == 0 || strchr(": ", s[i - 1])) && !strncmp(s + i, "operator", 8) &&
		    !isalnum((unsigned char)s[i + 8]) && s[i + 8] != '_') {
			i += 8 + operator_end(s + i + 8) - 1;
			continue;
		}
		if (strchr("(<[{", s[i])) {
			if (s[i] == '(' && !depth) {
				params = i;
				have_params = true;
			}
			depth++;
		} else if (strchr(")>]}", s[i]) && depth) {
			depth--;
		}
	}
	if (!have_params)
		return;
	/* The last space outside brackets before it ends the return type, if there is one. */
	depth = 0;
	for (size_t i = 0; i < params; i++) {
		if ((i == 0 || strchr(": ", s[i - 1])) && !strncmp(s + i, "operator", 8) &&
		    !isalnum((unsigned char)s[i + 8]) && s[i + 8] != '_') {
			i += 8 + operator_end(s + i + 8) - 1;
			continue;
		}
		if (strchr("(<[{", s[i])) {
			depth++;
		} else if (strchr(")>]}", s[i]) && depth) {
			depth--;
		} else if (s[i] == ' ' && !depth) {
			space = i;
			have_space = true;
		}
	}
	if (have_space)
		memmove(s, s + space + 1, strlen(s + space + 1) + 1);
}

void cxxcoro_demangle(const char *name, char *buf, size_t len)
{
	int status = -1;
	char *d = __cxa_demangle(name, NULL, NULL, &status);
	char *clone;

	if (d && !status) {
		/* A clone's demangled name ends in " [clone .actor]": the coroutine is the function. */
		if ((clone = strstr(d, " [clone .")))
			*clone = 0;
		drop_return_type(d);
	}
	snprintf(buf, len, "%s", d && !status ? d : name);
	free(d);
	if ((clone = strstr(buf, " [clone .")))
		*clone = 0;
}

static uint8_t *read_code(const struct scan *s, uint64_t vaddr, uint64_t size)
{
	uint64_t off;
	uint8_t *buf;

	if (!size || size > (64u << 20) || !elf_image_text_offset(&s->img, vaddr, &off, NULL))
		return NULL;
	buf = xmalloc(size + 16);
	memset(buf + size, 0, 16);
	if (pread(s->img.fd, buf, size, (off_t)off) != (ssize_t)size) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The defined functions of .symtab (else .dynsym), sorted by address, duplicates dropped. */
static void load_syms(struct scan *s)
{
	Elf_Scn *scn = NULL;
	Elf_Scn *pick = NULL;
	GElf_Shdr sh, pick_sh = {0};
	size_t cap = 0, w = 0;

	while ((scn = elf_nextscn(s->img.elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && !pick)) {
			pick = scn;
			pick_sh = sh;
		}
	}
	if (!pick)
		return;
	{
		Elf_Data *data = elf_section_data(s->img.elf, pick, &pick_sh);
		size_t n = pick_sh.sh_entsize ? pick_sh.sh_size / pick_sh.sh_entsize : 0;

		for (size_t i = 0; data && i < n; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(data, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
			    sym.st_shndx == SHN_UNDEF || !sym.st_size)
				continue;
			name = elf_strptr(s->img.elf, pick_sh.sh_link, sym.st_name);
			if (!name)
				continue;
			if (s->nsyms == cap) {
				cap = cap ? cap * 2 : 1024;
				s->syms = xrealloc(s->syms, cap * sizeof(*s->syms));
			}
			s->syms[s->nsyms++] = (struct sym){sym.st_value, sym.st_size, name, ROLE_OTHER, -1};
		}
	}
	qsort(s->syms, s->nsyms, sizeof(*s->syms), sym_cmp);
	for (size_t i = 0; i < s->nsyms; i++)
		if (!w || s->syms[w - 1].vaddr != s->syms[i].vaddr)
			s->syms[w++] = s->syms[i];
	s->nsyms = w;
}

static const struct sym *sym_at(const struct scan *s, uint64_t vaddr)
{
	size_t lo = 0, hi = s->nsyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->syms[mid].vaddr == vaddr)
			return &s->syms[mid];
		if (s->syms[mid].vaddr < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static uint32_t add_name(struct scan *s, char *name, char *ramp)
{
	struct cxx_plan *p = s->plan;

	if (p->nnames == s->cap_names) {
		s->cap_names = s->cap_names ? s->cap_names * 2 : 64;
		p->names = xrealloc(p->names, s->cap_names * sizeof(*p->names));
		s->ramps = xrealloc(s->ramps, s->cap_names * sizeof(*s->ramps));
		s->adapted = xrealloc(s->adapted, s->cap_names * sizeof(*s->adapted));
		s->clang = xrealloc(s->clang, s->cap_names * sizeof(*s->clang));
	}
	p->names[p->nnames] = name;
	s->ramps[p->nnames] = ramp;
	s->adapted[p->nnames] = false;
	s->clang[p->nnames] = false;
	return p->nnames++;
}

static void add_site(struct scan *s, uint64_t vaddr, uint64_t cookie, bool emulated)
{
	struct cxx_plan *p = s->plan;
	uint64_t off;

	if (!elf_image_text_offset(&s->img, vaddr, &off, NULL))
		return;
	if (p->nsites == s->cap_sites) {
		s->cap_sites = s->cap_sites ? s->cap_sites * 2 : 64;
		p->sites = xrealloc(p->sites, s->cap_sites * sizeof(*p->sites));
	}
	p->sites[p->nsites++] = (struct cxx_site){off, cookie, emulated};
}

/* The coroutine index of a ramp's mangled name, made on first use. */
static int coro_index(struct scan *s, char *ramp, const char *clone)
{
	char buf[1024];

	for (uint32_t i = 0; i < s->plan->nnames; i++)
		if (s->ramps[i] && !strcmp(s->ramps[i], ramp)) {
			free(ramp);
			return (int)i;
		}
	cxxcoro_demangle(ramp, buf, sizeof(buf));
	if (!strcmp(buf, ramp))
		cxxcoro_demangle(clone, buf, sizeof(buf)); /* better than nothing: the clone's */
	return (int)add_name(s, xstrdup(buf), ramp);
}

/* The memory operand of `in` (bytes b): base register and displacement; false if none usable. */
static bool mem_base(const struct x86_insn *in, const uint8_t *b, int *base, int64_t *disp)
{
	int mod = in->modrm >> 6, rm = in->modrm & 7;
	bool sib = rm == 4 && mod != 3;
	const uint8_t *d = b + in->len - in->imm_len - in->disp_len;

	if (!in->has_modrm || mod == 3 || (mod == 0 && rm == 5))
		return false; /* a register, or rip-relative */
	if (sib) {
		uint8_t sb = *(d - 1);

		if (((sb >> 3) & 7) != 4 || (in->rex & 2)) /* an index register: not a plain base */
			return false;
		rm = sb & 7;
		if (mod == 0 && rm == 5)
			return false;
	}
	*base = rm | ((in->rex & 1) ? 8 : 0);
	if (in->disp_len == 1)
		*disp = (int8_t)d[0];
	else if (in->disp_len == 4)
		*disp = (int32_t)((uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
				  (uint32_t)d[3] << 24);
	else
		*disp = 0;
	return true;
}

static int modrm_reg(const struct x86_insn *in)
{
	return ((in->modrm >> 3) & 7) | ((in->rex & 4) ? 8 : 0);
}

/* A rip-relative lea's destination and target. */
static bool lea_rip(const struct x86_insn *in, const uint8_t *b, uint64_t addr, int *reg,
		    uint64_t *target)
{
	const uint8_t *p;
	int32_t disp;

	if (in->map != 0 || in->opcode != 0x8d || !in->has_modrm || (in->modrm & 0xc7) != 0x05 ||
	    !(in->rex & 8))
		return false;
	p = b + in->len - 4;
	disp = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
	*target = addr + in->len + (int64_t)disp;
	*reg = modrm_reg(in);
	return true;
}

/* A store into memory that can be a frame (not the stack: a spill of the address). */
static void add_create(struct scan *s, const struct x86_insn *in, uint64_t addr, int base,
		       int64_t disp, int coro, uint64_t fn_first_site)
{
	uint64_t off;

	if (base == X86_RSP || (base == X86_RBP && disp < 0) || disp < INT16_MIN || disp > INT16_MAX)
		return;
	if (!elf_image_text_offset(&s->img, addr, &off, NULL))
		return;
	for (uint64_t i = fn_first_site; i < s->plan->nsites; i++)
		if (s->plan->sites[i].offset == off)
			return; /* found from another lea of the same address */
	add_site(s, addr, CORO_CXX_COOKIE(CORO_CXX_CREATE, base, disp, coro),
		 in->uprobe == X86_UPROBE_EMULATED);
	s->plan->creates++;
}

/*
 * After `lea body(%rip), reg` at code[i]: the stores of reg (or of an xmm
 * register it was moved into: GCC's paired store of the resume and destroy
 * pointers) into memory, until reg is written again. Branches are not
 * followed but read through in address order: a ramp inlined into a loop
 * has its lea hoisted into a callee-saved register, and its store in the
 * loop's body, further on.
 */
static void find_stores(struct scan *s, const uint8_t *code, uint64_t size, uint64_t start,
			uint64_t i, int reg, int coro, uint64_t fn_first_site)
{
	int xmm = -1;
	bool live = true; /* reg still holds the address */
	bool spilled = false; /* ...and the xmm register was kept in a stack slot (a hoisted value) */
	int64_t slot = 0;

	for (int n = 0; n < 512 && i < size && (live || xmm >= 0 || spilled); n++) {
		struct x86_insn in;
		uint64_t addr = start + i;
		int len = x86_decode(code + i, size - i, addr, &in), base;
		int64_t disp;

		if (!len)
			return;
		if (live && in.map == 0 && in.opcode == 0x89 && (in.rex & 8) && modrm_reg(&in) == reg &&
		    mem_base(&in, code + i, &base, &disp)) {
			add_create(s, &in, addr, base, disp, coro, fn_first_site);
			i += (uint64_t)len;
			continue;
		}
		if (live && in.map == 1 && in.opsize16 && in.opcode == 0x6e && (in.rex & 8) &&
		    (in.modrm >> 6) == 3 && ((in.modrm & 7) | ((in.rex & 1) ? 8 : 0)) == reg) {
			xmm = modrm_reg(&in); /* movq reg, %xmmN */
		} else if (xmm >= 0 && in.map == 1 && modrm_reg(&in) == xmm &&
			   ((in.opcode == 0x11 && !in.rep && !in.repne) || in.opcode == 0x29 ||
			    (in.opcode == 0x7f && (in.opsize16 || in.rep))) &&
			   (in.modrm >> 6) != 3) {
			/* movups/movaps/movdqa/movdqu %xmmN, mem: the low quadword first. */
			if (mem_base(&in, code + i, &base, &disp) && base == X86_RSP) {
				spilled = true;
				slot = disp;
			} else if (mem_base(&in, code + i, &base, &disp)) {
				add_create(s, &in, addr, base, disp, coro, fn_first_site);
			}
			xmm = -1;
		} else if (spilled && in.map == 1 && (in.modrm >> 6) != 3 &&
			   (in.opcode == 0x28 || (in.opcode == 0x10 && !in.rep && !in.repne) ||
			    (in.opcode == 0x6f && (in.opsize16 || in.rep))) &&
			   mem_base(&in, code + i, &base, &disp) && base == X86_RSP && disp == slot) {
			xmm = modrm_reg(&in); /* the slot loaded again: movaps/movups/movdqa/movdqu */
		} else if (xmm >= 0 && in.map == 1 && modrm_reg(&in) == xmm &&
			   !(in.opsize16 && in.opcode == 0x6c)) {
			xmm = -1; /* anything but punpcklqdq into it: lost track */
		}
		if (in.map == 0 && (!in.writes_known || (in.writes & (1u << reg))))
			live = false; /* (SSE instructions write no general register) */
		if (in.map == 0 && (in.writes & (1u << X86_RSP)) && in.push_reg < 0 &&
		    in.pop_reg < 0 && in.flow != X86_FLOW_CALL)
			spilled = false; /* the stack pointer moved: the slot is lost */
		i += (uint64_t)len;
	}
}

/* `call *reg` within the next three instructions, nothing else flowing between. */
static bool indirect_call_follows(const uint8_t *code, uint64_t size, uint64_t start, uint64_t i)
{
	for (int n = 0; n < 3 && i < size; n++) {
		struct x86_insn in;
		int len = x86_decode(code + i, size - i, start + i, &in);

		if (!len)
			return false;
		if (in.flow == X86_FLOW_INDIRECT)
			return in.map == 0 && in.opcode == 0xff && ((in.modrm >> 3) & 7) == 2 &&
			       (in.modrm >> 6) == 3;
		if (in.flow != X86_FLOW_NEXT)
			return false;
		i += (uint64_t)len;
	}
	return false;
}

/* The compile unit whose ranges hold pc (Clang emits no .debug_aranges: dwarf_addrdie fails). */
static bool cu_of(Dwarf *dw, uint64_t pc, Dwarf_Die *cu)
{
	Dwarf_CU *u = NULL;

	while (dwarf_get_units(dw, u, &u, NULL, NULL, cu, NULL) == 0)
		if (dwarf_haspc(cu, pc) > 0)
			return true;
	return false;
}

/*
 * Whether `pc` is code of the function itself (not inlined into it) at a
 * line of its body: another line than its declaration's, in its file. A
 * coroutine's implicit code (the frame made, its initial suspend point) is
 * at its declaration's line.
 */
static bool at_body_line(Dwarf *dw, uint64_t pc)
{
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Line *l, *entry;
	Dwarf_Addr low;
	const char *file, *own_file;
	int line = 0, decl = 0, n;
	bool body = false;

	if (!cu_of(dw, pc, &cu))
		return false;
	n = dwarf_getscopes(&cu, pc, &scopes);
	/* Its file: its entry's (DWARF 5's decl_file is not read by every libdw). */
	if (n > 0 && dwarf_tag(&scopes[0]) == DW_TAG_subprogram &&
	    (l = dwarf_getsrc_die(&cu, pc)) && !dwarf_lineno(l, &line) && line &&
	    !dwarf_decl_line(&scopes[0], &decl) && !dwarf_lowpc(&scopes[0], &low) &&
	    (entry = dwarf_getsrc_die(&cu, low)) && (file = dwarf_linesrc(l, NULL, NULL)) &&
	    (own_file = dwarf_linesrc(entry, NULL, NULL)))
		body = line != decl && !strcmp(file, own_file);
	free(scopes);
	return body;
}

/*
 * A Clang ramp of its own (`fn`) that runs its coroutine's body up to a
 * first suspension inline (an eager coroutine, optimized: no await_suspend
 * call may be left to see). Its machine code has the shape of a lazy
 * ramp's: the frame made, its suspend index stored (`mov $N` into the
 * frame), return. The line table tells them apart: a lazy ramp's index
 * store is its initial suspend point, at the coroutine's declaration line;
 * an eager one stores into the frame at a line of the body. Without line
 * info the ramp is not probed (docs/cxx20.md).
 */
static bool eager_ramp(const struct scan *s, const struct sym *fn, const uint8_t *code)
{
	if (!s->dw)
		return false;
	/*
	 * A ramp that calls an await_suspend is left to its await sites: its
	 * first suspension, if a call, is seen there; and without optimization
	 * (every awaiter a call) a ramp keeps the body's code after its initial
	 * suspend point, dead but at the body's lines.
	 */
	for (uint64_t i = 0; i < fn->size;) {
		struct x86_insn in;
		const struct sym *t;
		int len = x86_decode(code + i, fn->size - i, fn->vaddr + i, &in);

		if (!len)
			break;
		if (in.flow == X86_FLOW_CALL && (t = sym_at(s, in.target)) &&
		    strstr(t->name, "13await_suspend"))
			return false;
		i += (uint64_t)len;
	}
	for (uint64_t i = 0; i < fn->size;) {
		struct x86_insn in;
		uint64_t addr = fn->vaddr + i;
		int len = x86_decode(code + i, fn->size - i, addr, &in), base;
		int64_t disp;

		if (!len || in.flow == X86_FLOW_RET)
			break;
		if (in.map == 0 && (in.opcode == 0xc6 || in.opcode == 0xc7) &&
		    ((in.modrm >> 3) & 7) == 0 && mem_base(&in, code + i, &base, &disp) &&
		    base != X86_RSP && !(base == X86_RBP && disp < 0) && at_body_line(s->dw, addr))
			return true;
		i += (uint64_t)len;
	}
	return false;
}

/* Every function's code: stores of body addresses (creations) and await_suspend calls. */
static void scan_code(struct scan *s, unsigned flags)
{
	for (size_t f = 0; f < s->nsyms; f++) {
		const struct sym *fn = &s->syms[f];
		uint8_t *code = read_code(s, fn->vaddr, fn->size);
		uint64_t first_site = s->plan->nsites;
		bool initial = false; /* a ramp called initial_suspend(): its awaiter's call is next */
		bool seen_initial = false; /* ...at all (no call of it left: an optimized ramp) */

		if (!code)
			continue;
		if (fn->role == ROLE_RAMP && !s->adapted[fn->coro] && eager_ramp(s, fn, code)) {
			struct x86_insn first;

			if (x86_decode(code, fn->size, fn->vaddr, &first) &&
			    first.uprobe != X86_UPROBE_REFUSED) {
				add_site(s, fn->vaddr,
					 CORO_CXX_COOKIE(CORO_CXX_RAMP, 0, 0, fn->coro),
					 first.uprobe == X86_UPROBE_EMULATED);
				s->plan->eager_ramps++;
			}
		}
		for (uint64_t i = 0; i < fn->size;) {
			struct x86_insn in;
			uint64_t addr = fn->vaddr + i, target;
			int len = x86_decode(code + i, fn->size - i, addr, &in), reg;
			const struct sym *t;

			if (!len)
				break; /* data in the text, or padding: the rest is not decoded */
			if (lea_rip(&in, code + i, addr, &reg, &target) && (t = sym_at(s, target)) &&
			    t->role == ROLE_BODY && fn->role != ROLE_DESTROY && !s->adapted[t->coro])
				find_stores(s, code, fn->size, fn->vaddr, i + (uint64_t)len, reg, t->coro,
					    first_site);
			if (fn->role != ROLE_DESTROY && in.flow == X86_FLOW_CALL &&
			    (t = sym_at(s, in.target)) && t->role == ROLE_BODY &&
			    has_suffix(t->name, ".Frame.actor") && !s->adapted[t->coro]) {
				/*
				 * The ramp runs the body up to its initial suspend point
				 * (a ramp inlined into another body, too).
				 */
				add_site(s, addr, CORO_CXX_COOKIE(CORO_CXX_START, X86_RDI, 0, t->coro),
					 in.uprobe == X86_UPROBE_EMULATED);
				s->plan->starts++;
			}
			if (fn->role == ROLE_BODY && !s->adapted[fn->coro] && in.flow == X86_FLOW_CALL &&
			    (t = sym_at(s, in.target)) && strstr(t->name, "coroutine_handle") &&
			    has_suffix(t->name, "7addressEv") &&
			    indirect_call_follows(code, fn->size, fn->vaddr, i + (uint64_t)len)) {
				add_site(s, addr, CORO_CXX_COOKIE(CORO_CXX_XFER, X86_RDI, 0, fn->coro),
					 in.uprobe == X86_UPROBE_EMULATED);
				s->plan->xfers++;
			}
			if (fn->role == ROLE_RAMP && in.flow == X86_FLOW_CALL &&
			    (t = sym_at(s, in.target)) && strstr(t->name, "15initial_suspend"))
				initial = seen_initial = true;
			if ((flags & CXXCORO_AWAITS) &&
			    (fn->role == ROLE_BODY || fn->role == ROLE_RAMP) && !s->adapted[fn->coro] &&
			    in.flow == X86_FLOW_CALL && (t = sym_at(s, in.target)) &&
			    strstr(t->name, "13await_suspend") &&
			    !(fn->role == ROLE_RAMP &&
			      (initial || (!seen_initial && strstr(t->name, "14suspend_always"))))) {
				char buf[1024], *colon;

				cxxcoro_demangle(t->name, buf, sizeof(buf));
				/* "ns::awaiter<T>::await_suspend(...)": the awaiter is its class. */
				if ((colon = strstr(buf, "::await_suspend("))) {
					*colon = 0;
					add_site(s, addr,
						 CORO_CXX_COOKIE(CORO_CXX_AWAIT, X86_RSI, 0,
								 add_name(s, xstrdup(buf), NULL)),
						 true);
					s->plan->awaits++;
				}
			}
			if (fn->role == ROLE_RAMP && in.flow == X86_FLOW_CALL &&
			    (t = sym_at(s, in.target)) && strstr(t->name, "13await_suspend"))
				initial = false; /* the initial awaiter's call, not probed */
			i += (uint64_t)len;
		}
		free(code);
	}
}

/*
 * GCC: where the actor keeps the frame's resume index, which it reads
 * first thing to dispatch (`movzwl OFF(%reg)` in the prologue); 0 if not
 * found, or not GCC.
 */
static int64_t resume_index_at(const struct scan *s, const struct sym *y)
{
	uint64_t size = MIN(y->size, 96), i = 0;
	uint8_t *code;
	int64_t off = 0;

	if (!has_suffix(y->name, ".Frame.actor") || !(code = read_code(s, y->vaddr, size)))
		return 0;
	for (int n = 0; n < 12 && i < size && !off; n++) {
		struct x86_insn in;
		int len = x86_decode(code + i, size - i, y->vaddr + i, &in), base;
		int64_t disp;

		if (!len || in.flow != X86_FLOW_NEXT)
			break;
		if (in.map == 1 && in.opcode == 0xb7 && (in.modrm >> 6) != 3 &&
		    mem_base(&in, code + i, &base, &disp) && base != X86_RSP && base != X86_RBP &&
		    disp > 0 && disp <= INT16_MAX)
			off = disp;
		i += (uint64_t)len;
	}
	free(code);
	return off;
}

struct pcs {
	uint64_t *pc;
	size_t n, cap;
};

static void add_switch_site(void *ctx, const struct elf_probe_site *site)
{
	struct pcs *p = ctx;

	if (strcmp(site->name, "switch"))
		return;
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->pc = xrealloc(p->pc, p->cap * sizeof(*p->pc));
	}
	p->pc[p->n++] = site->pc;
}

/* A direct call of a member of corobpf::traced<P>, or of anything templated on it. */
static bool calls_adapter(const struct scan *s, const struct sym *y)
{
	uint8_t *code = read_code(s, y->vaddr, y->size);
	bool found = false;

	for (uint64_t i = 0; code && i < y->size && !found;) {
		struct x86_insn in;
		const struct sym *t;
		int len = x86_decode(code + i, y->size - i, y->vaddr + i, &in);

		if (!len)
			break;
		found = in.flow == X86_FLOW_CALL && (t = sym_at(s, in.target)) &&
			strstr(t->name, "7corobpf6traced");
		i += (uint64_t)len;
	}
	free(code);
	return found;
}

/*
 * The coroutines whose promise is corobpf::traced<P> (usdt/corobpf_coro.hpp):
 * the adapter reports them itself through the probes of corobpf.h, with
 * more than their bodies show, so they get no site here (both would count
 * every switch twice). Decided per coroutine, by its body: the adapter's
 * enter and leave fire the switch probe from it, inlined (a site of
 * `switch` inside the body) or not (a call of a traced<P> member). Any
 * other use of corobpf.h in the object (a ready probe in a constructor)
 * leaves its other coroutines traced here.
 */
static void find_adapted(struct scan *s)
{
	struct pcs sw = {0};
	struct elf_probes probes;
	char err[256];

	if (elf_probe_walk(s->img.path, "corobpf", add_switch_site, &sw, &probes, err,
			   sizeof(err)) < 0)
		sw.n = 0;
	for (size_t i = 0; i < s->nsyms; i++) {
		const struct sym *y = &s->syms[i];
		bool adapted = false;

		if (y->role != ROLE_BODY || s->adapted[y->coro])
			continue;
		for (size_t k = 0; k < sw.n && !adapted; k++)
			adapted = sw.pc[k] >= y->vaddr && sw.pc[k] < y->vaddr + y->size;
		if (adapted || calls_adapter(s, y)) {
			s->adapted[y->coro] = true;
			s->plan->adapted++;
		}
	}
	free(sw.pc);
}

/*
 * Clang's ramps that are functions of their own: an eager coroutine's first
 * run (up to its first suspension) happens in there, and its end is seen
 * where the ramp calls an await_suspend (docs/cxx20.md). GCC's ramps call
 * the actor for that run instead (start sites).
 */
static uint64_t name_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 1099511628211ull;
	return h;
}

static void find_ramps(struct scan *s)
{
	struct hmap by_name; /* (hash of a ramp's mangled name, n) -> coroutine index + 1 */

	hmap_init(&by_name);
	for (uint32_t c = 0; c < s->plan->nnames; c++) {
		uint64_t h, n = 0;

		if (!s->ramps[c] || !s->clang[c])
			continue;
		h = name_hash(s->ramps[c]);
		while (hmap_get(&by_name, h, n))
			n++;
		hmap_put(&by_name, h, n, (void *)(uintptr_t)(c + 1));
	}
	for (size_t i = 0; i < s->nsyms; i++) {
		struct sym *y = &s->syms[i];
		uint64_t h;
		void *v;

		if (y->role != ROLE_OTHER || strncmp(y->name, "_Z", 2))
			continue;
		h = name_hash(y->name);
		for (uint64_t n = 0; (v = hmap_get(&by_name, h, n)); n++) {
			uint32_t c = (uint32_t)(uintptr_t)v - 1;

			if (!strcmp(s->ramps[c], y->name)) {
				y->role = ROLE_RAMP;
				y->coro = (int)c;
				break;
			}
		}
	}
	hmap_free(&by_name);
}

bool cxxcoro_detect(const char *path)
{
	struct scan s = {0};
	char err[256];
	bool found = false;

	if (elf_image_open(&s.img, path, err, sizeof(err)))
		return false;
	load_syms(&s);
	for (size_t i = 0; i < s.nsyms && !found; i++)
		found = has_suffix(s.syms[i].name, ".Frame.actor") ||
			(has_suffix(s.syms[i].name, ".resume") && !strncmp(s.syms[i].name, "_Z", 2));
	free(s.syms);
	elf_image_close(&s.img);
	return found;
}

int cxxcoro_plan(const char *path, unsigned flags, struct cxx_plan *plan, char *err,
		 size_t errlen)
{
	struct scan s = {0};
	uint32_t bodies_created = 0;
	int ret;

	memset(plan, 0, sizeof(*plan));
	s.plan = plan;
	ret = elf_image_open(&s.img, path, err, errlen);
	if (ret)
		return ret;
	load_syms(&s);
	/* Bodies and destroys first: their coroutine's name is their ramp's. */
	for (size_t i = 0; i < s.nsyms; i++) {
		struct sym *y = &s.syms[i];
		int role = ROLE_OTHER;
		char *ramp = ramp_of(y->name, &role);

		if (!ramp)
			continue;
		y->role = role;
		y->coro = coro_index(&s, ramp, y->name);
		if (role == ROLE_BODY && has_suffix(y->name, ".resume"))
			s.clang[y->coro] = true;
	}
	find_adapted(&s);
	find_ramps(&s);
	s.dw = dwarf_begin_elf(s.img.elf, DWARF_C_READ, NULL);
	for (size_t i = 0; i < s.nsyms; i++) {
		const struct sym *y = &s.syms[i];
		uint8_t *code;
		struct x86_insn in;

		if (y->role == ROLE_OTHER || y->role == ROLE_RAMP || s.adapted[y->coro])
			continue;
		code = read_code(&s, y->vaddr, MIN(y->size, 16));
		if (!code || !x86_decode(code, MIN(y->size, 16), y->vaddr, &in)) {
			free(code);
			continue;
		}
		free(code);
		if (in.uprobe == X86_UPROBE_REFUSED)
			continue;
		add_site(&s, y->vaddr,
			 CORO_CXX_COOKIE(y->role == ROLE_BODY ? CORO_CXX_BODY : CORO_CXX_DESTROY,
					 X86_RDI, y->role == ROLE_BODY ? resume_index_at(&s, y) : 0,
					 y->coro),
			 in.uprobe == X86_UPROBE_EMULATED);
		if (y->role == ROLE_BODY) {
			plan->bodies++;
			plan->stepped += in.uprobe != X86_UPROBE_EMULATED;
		} else {
			plan->destroys++;
		}
	}
	if (plan->bodies)
		scan_code(&s, flags);
	for (uint32_t c = 0; c < plan->nnames; c++) {
		bool created = false;

		if (!s.ramps[c] || s.adapted[c])
			continue;
		for (uint32_t i = 0; i < plan->nsites && !created; i++)
			created = CORO_CXX_COOKIE_OP(plan->sites[i].cookie) == CORO_CXX_CREATE &&
				  CORO_CXX_COOKIE_FN(plan->sites[i].cookie) == c;
		bodies_created += created;
	}
	for (uint32_t c = 0; c < plan->nnames; c++)
		free(s.ramps[c]);
	free(s.ramps);
	free(s.adapted);
	free(s.clang);
	plan->bodies_without_create = plan->bodies > bodies_created ? plan->bodies - bodies_created
								    : 0;
	if (s.dw)
		dwarf_end(s.dw);
	free(s.syms);
	elf_image_close(&s.img);
	return 0;
}

void cxxcoro_plan_free(struct cxx_plan *plan)
{
	for (uint32_t i = 0; i < plan->nnames; i++)
		free(plan->names[i]);
	free(plan->names);
	free(plan->sites);
	memset(plan, 0, sizeof(*plan));
}
