// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Go binaries: struct offsets, wait reasons, release (see goelf.h). */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elfnotes.h"
#include "goelf.h"
#include "util.h"
#include "x86dec.h"

struct gobin {
	int fd;
	Elf *elf;
	GElf_Ehdr eh;
};

/*
 * The layouts of releases whose binaries may come without DWARF, checked
 * against DWARF of binaries built by that release (amd64). The wait
 * reasons are those of the release's runtime2.go, by number.
 */
struct go_release {
	const char *prefix; /* "go1.19": every go1.19.x */
	struct coro_go_offsets offs;
	uint16_t g_status, m_procid;
	uint16_t g_sched, gobuf_sp, gobuf_pc, gobuf_bp, gobuf_ctxt;
	const char *reasons[CORO_GO_REASONS];
};

static const struct go_release releases[] = {
	{
		.prefix = "go1.19",
		.offs = { .g_goid = 152, .g_m = 48, .g_waiting = 328, .g_waitreason = 176,
			  .g_startpc = 312, .m_curg = 192, .sudog_c = 80, .sudog_elem = 24 },
		.g_status = 144,
		.m_procid = 72,
		.g_sched = 56, .gobuf_sp = 0, .gobuf_pc = 8, .gobuf_bp = 48, .gobuf_ctxt = 24,
		.reasons = { "", "GC assist marking", "IO wait", "chan receive (nil chan)",
			     "chan send (nil chan)", "dumping heap", "garbage collection",
			     "garbage collection scan", "panicwait", "select", "select (no cases)",
			     "GC assist wait", "GC sweep wait", "GC scavenge wait", "chan receive",
			     "chan send", "finalizer wait", "force gc (idle)", "semacquire",
			     "sleep", "sync.Cond.Wait", "timer goroutine (idle)",
			     "trace reader (blocked)", "wait for GC cycle", "GC worker (idle)",
			     "preempted", "debug call" },
	},
};

/* ---- .gopclntab: Go's function table (runtime/symtab.go, pcHeader and _func) ---- */

/* The table's magic: Go 1.18 and 1.19; Go 1.20 and later (whose _func has startLine). */
#define GO118_MAGIC 0xfffffff0u
#define GO120_MAGIC 0xfffffff1u
/* Where a _func keeps its funcID (a byte): after cuOffset, and 1.20's startLine. */
#define GO118_FUNCID_AT 36
#define GO120_FUNCID_AT 40

struct pcln {
	const uint8_t *d;
	size_t len;
	uint64_t nfunc, text, funcname, functab;
	uint32_t magic;
};

static bool pcln_open(Elf *elf, struct pcln *p)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;
		uint32_t magic;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		/* A position-independent binary keeps it among its relocated data. */
		if (!name || (strcmp(name, ".gopclntab") && strcmp(name, ".data.rel.ro.gopclntab")))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < 72)
			return false;
		p->d = d->d_buf;
		p->len = d->d_size;
		magic = load_u32(p->d);
		/* Go 1.18-1.19, and 1.20 and later (the same header), 8-byte pointers. */
		if ((magic != GO118_MAGIC && magic != GO120_MAGIC) || p->d[7] != 8)
			return false;
		p->magic = magic;
		p->nfunc = load_u64(p->d + 8);
		p->text = load_u64(p->d + 24);
		p->funcname = load_u64(p->d + 32);
		p->functab = load_u64(p->d + 64);
		if (!p->text) {
			/* A position-independent binary: the offsets count from .text. */
			Elf_Scn *s = NULL;

			while ((s = elf_nextscn(elf, s))) {
				const char *n = NULL;

				if (gelf_getshdr(s, &sh))
					n = elf_strptr(elf, shstrndx, sh.sh_name);
				if (n && !strcmp(n, ".text"))
					p->text = sh.sh_addr;
			}
		}
		return p->funcname < p->len && p->functab < p->len &&
		       p->nfunc < (p->len - p->functab) / 8;
	}
	return false;
}

/* Function i: its entry offset from text, and its name (NULL if the table lies). */
static const char *pcln_func(const struct pcln *p, uint64_t i, uint32_t *entry)
{
	const uint8_t *ft = p->d + p->functab;
	uint64_t fo = p->functab + load_u32(ft + 8 * i + 4), no;

	*entry = load_u32(ft + 8 * i);
	if (fo + 8 > p->len)
		return NULL;
	no = p->funcname + (uint64_t)(int64_t)(int32_t)load_u32(p->d + fo + 4);
	if (no >= p->len || !memchr(p->d + no, 0, p->len - no))
		return NULL;
	return (const char *)p->d + no;
}

bool goelf_func_by_name(Elf *elf, const char *name, uint64_t *vaddr, uint64_t *size)
{
	struct pcln p;

	if (!pcln_open(elf, &p))
		return false;
	for (uint64_t i = 0; i < p.nfunc; i++) {
		uint32_t entry;
		const char *n = pcln_func(&p, i, &entry);

		if (n && !strcmp(n, name)) {
			*vaddr = p.text + entry;
			*size = load_u32(p.d + p.functab + 8 * (i + 1)) - entry;
			return true;
		}
	}
	return false;
}

/* The function holding text offset `off`: its index, by binary search. */
static bool pcln_find(const struct pcln *p, uint64_t off, uint64_t *idx)
{
	uint64_t lo = 0, hi = p->nfunc;

	if (!p->nfunc || off < load_u32(p->d + p->functab) ||
	    off >= load_u32(p->d + p->functab + 8 * p->nfunc))
		return false;
	while (hi - lo > 1) {
		uint64_t mid = (lo + hi) / 2;

		if (load_u32(p->d + p->functab + 8 * mid) <= off)
			lo = mid;
		else
			hi = mid;
	}
	*idx = lo;
	return true;
}

/* Function i's funcID (runtime/symtab.go), or -1 if the table lies. */
static int pcln_funcid(const struct pcln *p, uint64_t i)
{
	uint64_t fo = p->functab + load_u32(p->d + p->functab + 8 * i + 4);
	uint64_t at = fo + (p->magic == GO118_MAGIC ? GO118_FUNCID_AT : GO120_FUNCID_AT);

	return at < p->len ? p->d[at] : -1;
}

/*
 * The funcID Go gives the functions its tracebacks leave out (funcID_wrapper:
 * among them the closure the compiler wraps a `go f(x)` statement in). Its
 * number changes between releases, but it is the last of the list, right
 * after runtime.systemstack_switch's, in every release whose list was
 * checked (Go 1.19 to 1.23: runtime/symtab.go, then internal/abi), and
 * every program has that function. -1 if not found.
 */
static int pcln_wrapper_id(const struct pcln *p)
{
	for (uint64_t i = 0; i < p->nfunc; i++) {
		uint32_t entry;
		const char *n = pcln_func(p, i, &entry);
		int id;

		if (n && !strcmp(n, "runtime.systemstack_switch")) {
			id = pcln_funcid(p, i);
			return id > 0 ? id + 1 : -1;
		}
	}
	return -1;
}

/*
 * What the compiler calls on its own in any function: stack growth, write
 * barriers, bounds panics.
 */
static bool compiler_helper(const char *callee)
{
	static const char *const helpers[] = { "runtime.morestack", "runtime.gcWriteBarrier",
					       "runtime.panic", "runtime.goPanic" };

	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (!strncmp(callee, helpers[i], strlen(helpers[i])))
			return true;
	return false;
}

/* The bytes of function idx's code (in elf's file), and its address; NULL if not all there. */
static const uint8_t *func_code(Elf *elf, const struct pcln *p, uint64_t idx, uint64_t *start,
				size_t *n)
{
	uint32_t entry = load_u32(p->d + p->functab + 8 * idx);
	uint32_t end = load_u32(p->d + p->functab + 8 * (idx + 1));
	uint64_t fileoff = 0;
	size_t nph;
	Elf_Data *code;

	*start = p->text + entry;
	*n = end - entry;
	if (*n > 256 || elf_getphdrnum(elf, &nph))
		return NULL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    *start >= ph.p_vaddr && *start + *n <= ph.p_vaddr + ph.p_filesz)
			fileoff = ph.p_offset + *start - ph.p_vaddr;
	}
	code = fileoff ? elf_getdata_rawchunk(elf, (int64_t)fileoff, *n, ELF_T_BYTE) : NULL;
	return code ? code->d_buf : NULL;
}

/*
 * The one function a `go f(x)` statement's wrapper calls, but
 * compiler_helper's: f. NULL if it calls none directly (f a function
 * value, or a closure called with arguments) or more than one.
 */
static const char *wrapped_call(Elf *elf, const struct pcln *p, uint64_t idx)
{
	const char *found = NULL;
	const uint8_t *code;
	uint64_t start;
	size_t n;

	code = func_code(elf, p, idx, &start, &n);
	for (uint64_t a = 0; code && a < n;) {
		struct x86_insn in;
		int len = x86_decode(code + a, n - a, start + a, &in);
		uint64_t ci;

		if (!len)
			return NULL;
		a += (uint64_t)len;
		if (in.flow != X86_FLOW_CALL || in.target < p->text ||
		    !pcln_find(p, in.target - p->text, &ci)) {
			continue;
		}
		{
			uint32_t e;
			const char *callee = pcln_func(p, ci, &e);

			if (!callee || compiler_helper(callee))
				continue;
			if (found && strcmp(found, callee))
				return NULL;
			found = callee;
		}
	}
	return found;
}

/* A 64-bit load's base register and displacement (no index, not rip-relative); false if not. */
static bool load_operand(const struct x86_insn *in, const uint8_t *b, int *base, int32_t *disp)
{
	int mod = in->modrm >> 6, rm = in->modrm & 7;
	const uint8_t *d = b + in->len - in->imm_len - in->disp_len;

	if (!in->has_modrm || mod == 3 || (mod == 0 && rm == 5))
		return false;
	if (rm == 4) {
		uint8_t sib = *(d - 1);

		if (((sib >> 3) & 7) != 4 || (in->rex & 2))
			return false; /* an index register */
		rm = sib & 7;
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

/* What a register holds in a wrapper, as loads from its closure (rdx at its entry). */
struct chain {
	bool known;
	uint8_t n;
	int32_t off[GOELF_WRAPPER_LOADS];
};

/*
 * How the wrapper at idx finds f when it calls it through its closure: the
 * loads from rdx (Go's closure context register) to the register or memory
 * its indirect call goes through, followed on its straight-line path from
 * its entry (a conditional branch is taken to fall through: the wrappers'
 * only ones go to stack growth and panics). False if it calls something
 * else first, or the target is not such a chain of loads.
 */
static bool wrapper_loads(Elf *elf, const struct pcln *p, uint64_t idx, struct goelf_wrapper *w)
{
	struct chain r[X86_NREGS];
	const uint8_t *code;
	uint64_t start;
	size_t n;

	memset(r, 0, sizeof(r));
	code = func_code(elf, p, idx, &start, &n);
	r[X86_RDX].known = true;
	for (uint64_t a = 0; code && a < n;) {
		struct x86_insn in;
		int len = x86_decode(code + a, n - a, start + a, &in), base, reg;
		int32_t disp;

		if (!len || in.flow == X86_FLOW_RET || in.flow == X86_FLOW_JMP ||
		    in.flow == X86_FLOW_CALL)
			return false;
		if (in.flow == X86_FLOW_INDIRECT) {
			struct chain c;

			/* call r/m64 (ff /2); a jmp through a register or memory ends the path. */
			if (in.map != 0 || in.opcode != 0xff || ((in.modrm >> 3) & 7) != 2)
				return false;
			if ((in.modrm >> 6) == 3) {
				c = r[(in.modrm & 7) | ((in.rex & 1) ? 8 : 0)];
			} else if (load_operand(&in, code + a, &base, &disp) && r[base].known &&
				   r[base].n < GOELF_WRAPPER_LOADS) {
				c = r[base];
				c.off[c.n++] = disp;
			} else {
				return false;
			}
			if (!c.known || !c.n)
				return false;
			w->n = c.n;
			memcpy(w->off, c.off, sizeof(w->off));
			return true;
		}
		reg = ((in.modrm >> 3) & 7) | ((in.rex & 4) ? 8 : 0);
		if (in.map == 0 && in.opcode == 0x8b && (in.rex & 8) &&
		    load_operand(&in, code + a, &base, &disp)) {
			/* mov r64, [base + disp] */
			struct chain c = r[base];

			if (c.known && c.n < GOELF_WRAPPER_LOADS)
				c.off[c.n++] = disp;
			else
				c.known = false;
			r[reg] = c;
		} else if (in.copy_src >= 0 && in.copy_dst >= 0) {
			r[in.copy_dst] = r[in.copy_src];
		} else if (!in.writes_known) {
			memset(r, 0, sizeof(r));
		} else {
			for (int i = 0; i < X86_NREGS; i++)
				if (in.writes & (1u << i))
					r[i].known = false;
		}
		a += (uint64_t)len;
	}
	return false;
}

int goelf_goroutine_start(Elf *elf, uint64_t vaddr, char *name, size_t len,
			  struct goelf_wrapper *w)
{
	struct pcln p;
	uint64_t idx;
	uint32_t entry;
	const char *n, *f = NULL;
	int id;

	memset(w, 0, sizeof(*w));
	if (!pcln_open(elf, &p) || vaddr < p.text || !pcln_find(&p, vaddr - p.text, &idx))
		return 0;
	n = pcln_func(&p, idx, &entry);
	if (!n)
		return 0;
	if (vaddr != p.text + entry) {
		snprintf(name, len, "%s+0x%llx", n, (unsigned long long)(vaddr - p.text - entry));
		return 1;
	}
	/* The main goroutine: the main context, as every family names it. */
	if (!strcmp(n, "runtime.main")) {
		snprintf(name, len, "main");
		return 1;
	}
	id = pcln_funcid(&p, idx);
	if (id > 0 && id == pcln_wrapper_id(&p)) {
		f = wrapped_call(elf, &p, idx);
		if (!f && wrapper_loads(elf, &p, idx, w)) {
			w->entry = vaddr;
			w->end = p.text + load_u32(p.d + p.functab + 8 * (idx + 1));
		}
	}
	snprintf(name, len, "%s", f ? f : n);
	return 1;
}

bool goelf_func_at(Elf *elf, uint64_t vaddr, char *name, size_t len)
{
	struct goelf_wrapper w;

	return goelf_goroutine_start(elf, vaddr, name, len, &w);
}

uint64_t goelf_wrapper_target(const struct goelf_wrapper *w, uint64_t ctxt, goelf_read_fn read,
			      void *rctx)
{
	uint64_t v = ctxt;

	if (!w->n || !ctxt)
		return 0;
	for (uint32_t i = 0; i < w->n && i < GOELF_WRAPPER_LOADS; i++)
		if (!read(rctx, v + (uint64_t)(int64_t)w->off[i], &v) || !v)
			return 0;
	return v;
}

uint64_t goelf_wrapper_callee(const struct goelf_wrapper *w, const uint64_t *frames, uint32_t n)
{
	/* frames[k] for k >= 1 is a return address: its call is just before it. */
	for (uint32_t k = 1; w->n && k < n; k++)
		if (frames[k] - 1 >= w->entry && frames[k] - 1 < w->end)
			return k == 1 ? frames[0] : frames[k - 1] - 1;
	return 0;
}

struct goelf_funcs {
	struct pcln p;
};

struct goelf_funcs *goelf_funcs_open(Elf *elf)
{
	struct goelf_funcs *t;
	struct pcln p;

	if (!elf || !pcln_open(elf, &p))
		return NULL;
	t = xcalloc(1, sizeof(*t));
	t->p = p;
	return t;
}

const char *goelf_funcs_at(const struct goelf_funcs *t, uint64_t vaddr, uint64_t *off)
{
	uint64_t idx;
	uint32_t entry;
	const char *n;

	if (!t || vaddr < t->p.text || !pcln_find(&t->p, vaddr - t->p.text, &idx))
		return NULL;
	n = pcln_func(&t->p, idx, &entry);
	if (n)
		*off = vaddr - t->p.text - entry;
	return n;
}

void goelf_funcs_free(struct goelf_funcs *t)
{
	free(t);
}

bool goelf_func_at_path(const char *path, uint64_t vaddr, char *name, size_t len,
			struct goelf_wrapper *w)
{
	struct goelf_wrapper none;
	GElf_Ehdr eh;
	Elf *elf;
	bool ok;
	int fd;

	if (elf_open_host(path, &fd, &elf, &eh, NULL, 0))
		return false;
	ok = (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) &&
	     goelf_goroutine_start(elf, vaddr, name, len, w ? w : &none);
	elf_end(elf);
	close(fd);
	return ok;
}

const char *goelf_releases_known(void)
{
	return "go1.19";
}

uint8_t goelf_reason_of(const char *text)
{
	if (!text[0])
		return CORO_R_UNKNOWN;
	/*
	 * The runtime's own goroutines idle until there is work (forcegchelper,
	 * the sweeper, the scavenger, the finalizer goroutine, GC workers): a
	 * sleep, not a wait for an event that may be lost.
	 */
	if (!strcmp(text, "sleep") || strstr(text, "(idle)") || !strcmp(text, "GC sweep wait") ||
	    !strcmp(text, "GC scavenge wait") || !strcmp(text, "finalizer wait") ||
	    !strcmp(text, "trace reader (blocked)"))
		return CORO_R_SLEEP;
	if (!strcmp(text, "IO wait"))
		return CORO_R_IO;
	if (!strcmp(text, "preempted"))
		return CORO_R_YIELD;
	/* Channels, select, sync, semaphores and the runtime's own waits. */
	return CORO_R_WAIT;
}

/* `len` bytes of the file at virtual address vaddr; false if they are not all in the file. */
static bool read_vaddr(const struct gobin *b, uint64_t vaddr, void *buf, size_t len)
{
	size_t n;

	if (elf_getphdrnum(b->elf, &n))
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(b->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr + len <= ph.p_vaddr + ph.p_filesz)
			return pread(b->fd, buf, len, (off_t)(ph.p_offset + vaddr - ph.p_vaddr)) ==
			       (ssize_t)len;
	}
	return false;
}

/* A symbol of .symtab by exact name (Go binaries have no .dynsym to speak of). */
static bool symbol(const struct gobin *b, const char *name, uint64_t *vaddr, uint64_t *size)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(b->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		d = elf_section_data(b->elf, scn, &sh);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *s;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			s = elf_strptr(b->elf, sh.sh_link, sym.st_name);
			if (s && !strcmp(s, name)) {
				*vaddr = sym.st_value;
				*size = sym.st_size;
				return true;
			}
		}
	}
	return false;
}

/* A Go string header {ptr, len} at vaddr, its text into buf. */
static bool go_string(const struct gobin *b, uint64_t vaddr, char *buf, size_t len)
{
	uint64_t hdr[2];

	if (!read_vaddr(b, vaddr, hdr, sizeof(hdr)) || !hdr[0] || hdr[1] >= len)
		return false;
	if (!read_vaddr(b, hdr[0], buf, hdr[1]))
		return false;
	buf[hdr[1]] = 0;
	return true;
}

/*
 * The release, from .go.buildinfo: Go 1.18 and later keep the version
 * inline (flag 2: a varint length, then the text, at byte 32); older ones
 * point at runtime.buildVersion's string header.
 */
static void read_version(const struct gobin *b, char *out, size_t len)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	out[0] = 0;
	if (elf_getshdrstrndx(b->elf, &shstrndx))
		return;
	while ((scn = elf_nextscn(b->elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		uint8_t h[64];

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(b->elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".go.buildinfo"))
			continue;
		if (sh.sh_size < sizeof(h) ||
		    pread(b->fd, h, sizeof(h), (off_t)sh.sh_offset) != (ssize_t)sizeof(h) ||
		    memcmp(h, "\xff Go buildinf:", 14))
			return;
		if (h[15] & 2) {
			size_t n = h[32];

			if (n < 0x80 && n < len && n <= sizeof(h) - 33) {
				memcpy(out, h + 33, n);
				out[n] = 0;
			}
		} else if (h[14] == 8) {
			uint64_t p;

			memcpy(&p, h + 16, 8);
			go_string(b, p, out, len);
		}
		return;
	}
}

struct dwarf_want {
	const char *type, *member;
	uint16_t *out;
	bool found;
};

/* The members this module needs, from the DWARF of the runtime's structures. */
static int read_dwarf(const struct gobin *b, struct dwarf_want *w, size_t nw)
{
	Dwarf *dw = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
	Dwarf_Off off = 0, next;
	size_t hsize, found = 0;

	if (!dw)
		return -ENOENT;
	while (found < nw && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, die;

		if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &die) == 0) {
			do {
				const char *name;
				Dwarf_Die mem;

				if (dwarf_tag(&die) != DW_TAG_structure_type)
					continue;
				name = dwarf_diename(&die);
				if (!name || strncmp(name, "runtime.", 8) ||
				    dwarf_child(&die, &mem))
					continue;
				do {
					const char *mn = dwarf_diename(&mem);
					Dwarf_Attribute a;
					Dwarf_Word v;

					if (dwarf_tag(&mem) != DW_TAG_member || !mn)
						continue;
					for (size_t i = 0; i < nw; i++) {
						if (w[i].found || strcmp(w[i].type, name) ||
						    strcmp(w[i].member, mn))
							continue;
						if (dwarf_attr(&mem, DW_AT_data_member_location,
							       &a) &&
						    !dwarf_formudata(&a, &v) && v < 0xffff) {
							*w[i].out = (uint16_t)v;
							w[i].found = true;
							found++;
						}
					}
				} while (dwarf_siblingof(&mem, &mem) == 0);
			} while (dwarf_siblingof(&die, &die) == 0);
		}
		off = next;
	}
	dwarf_end(dw);
	return found == nw ? 0 : -ENOENT;
}

/* Wait reasons by their text, from the binary's own table; false if it has none readable. */
static bool read_reasons(const struct gobin *b, struct coro_go_offsets *o)
{
	uint64_t v, size;
	char text[64];

	if (!symbol(b, "runtime.waitReasonStrings", &v, &size) || !size || size % 16)
		return false;
	for (uint64_t i = 0; i < size / 16 && i < CORO_GO_REASONS; i++) {
		/*
		 * Entry 0 is "": every other must be readable (a PIE's file may
		 * hold its pointers only as relocations).
		 */
		if (!go_string(b, v + 16 * i, text, sizeof(text))) {
			if (i)
				return false;
			text[0] = 0;
		}
		o->reason[i] = goelf_reason_of(text);
	}
	return true;
}

int goelf_read(const char *path, struct goelf_info *gi, char *err, size_t errlen)
{
	struct gobin b = { .fd = -1 };
	const struct go_release *rel = NULL;
	struct coro_go_offsets *o = &gi->offs;
	uint16_t g_sched, gobuf_sp, gobuf_pc, gobuf_bp, gobuf_ctxt;
	struct dwarf_want w[] = {
		{ "runtime.g", "goid", &o->g_goid },
		{ "runtime.g", "m", &o->g_m },
		{ "runtime.g", "waiting", &o->g_waiting },
		{ "runtime.g", "waitreason", &o->g_waitreason },
		{ "runtime.g", "startpc", &o->g_startpc },
		{ "runtime.g", "atomicstatus", &gi->g_status },
		{ "runtime.m", "curg", &o->m_curg },
		{ "runtime.m", "procid", &gi->m_procid },
		{ "runtime.sudog", "c", &o->sudog_c },
		{ "runtime.sudog", "elem", &o->sudog_elem },
		{ "runtime.g", "sched", &g_sched },
		{ "runtime.gobuf", "sp", &gobuf_sp },
		{ "runtime.gobuf", "pc", &gobuf_pc },
		{ "runtime.gobuf", "bp", &gobuf_bp },
		{ "runtime.gobuf", "ctxt", &gobuf_ctxt },
	};
	uint64_t size;
	int ret;

	memset(gi, 0, sizeof(*gi));
	ret = elf_open_host(path, &b.fd, &b.elf, &b.eh, err, errlen);
	if (ret)
		return ret;
	gi->pie = b.eh.e_type == ET_DYN;
	{
		size_t nph;

		for (size_t i = 0; !elf_getphdrnum(b.elf, &nph) && i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(b.elf, (int)i, &ph) && ph.p_type == PT_PHDR)
				gi->phdr_vaddr = ph.p_vaddr;
		}
	}
	read_version(&b, gi->version, sizeof(gi->version));
	for (size_t i = 0; i < sizeof(releases) / sizeof(releases[0]); i++) {
		size_t n = strlen(releases[i].prefix);

		/* "go1.19" and "go1.19.8", not "go1.190" */
		if (!strncmp(gi->version, releases[i].prefix, n) &&
		    (!gi->version[n] || gi->version[n] == '.'))
			rel = &releases[i];
	}
	gi->from_dwarf = read_dwarf(&b, w, sizeof(w) / sizeof(w[0])) == 0;
	if (!gi->from_dwarf) {
		if (!rel) {
			errfmt(err, errlen,
			       "Go release %s, built without DWARF, is not one corobpf knows the "
			       "runtime's layout of (%s); rebuild it without -ldflags=-w or -s, "
			       "or see docs/go.md", gi->version[0] ? gi->version : "unknown",
			       goelf_releases_known());
			ret = -ENOTSUP;
			goto out;
		}
		*o = rel->offs;
		gi->g_status = rel->g_status;
		gi->m_procid = rel->m_procid;
		g_sched = rel->g_sched;
		gobuf_sp = rel->gobuf_sp;
		gobuf_pc = rel->gobuf_pc;
		gobuf_bp = rel->gobuf_bp;
		gobuf_ctxt = rel->gobuf_ctxt;
	}
	gi->g_sched_pc = (uint16_t)(g_sched + gobuf_pc);
	gi->g_sched_sp = (uint16_t)(g_sched + gobuf_sp);
	gi->g_sched_bp = (uint16_t)(g_sched + gobuf_bp);
	gi->g_sched_ctxt = (uint16_t)(g_sched + gobuf_ctxt);
	o->g_sched_pc = gi->g_sched_pc;
	o->g_sched_bp = gi->g_sched_bp;
	o->g_sched_ctxt = gi->g_sched_ctxt;
	gi->reasons_by_text = read_reasons(&b, o);
	if (!gi->reasons_by_text) {
		if (!rel) {
			/* The texts the runtime has used since Go 1.13 name most; the rest wait. */
			for (size_t i = 0; i < CORO_GO_REASONS; i++)
				o->reason[i] = CORO_R_WAIT;
		} else {
			for (size_t i = 0; i < CORO_GO_REASONS; i++)
				o->reason[i] = goelf_reason_of(rel->reasons[i] ? rel->reasons[i]
									: "?");
		}
	}
	if (!symbol(&b, "runtime.allgs", &gi->allgs, &size))
		gi->allgs = 0;
out:
	elf_end(b.elf);
	close(b.fd);
	return ret;
}
