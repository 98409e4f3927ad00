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
	uint16_t g_sched, gobuf_sp, gobuf_pc, gobuf_bp;
	const char *reasons[CORO_GO_REASONS];
};

static const struct go_release releases[] = {
	{
		.prefix = "go1.19",
		.offs = { .g_goid = 152, .g_m = 48, .g_waiting = 328, .g_waitreason = 176,
			  .g_startpc = 312, .m_curg = 192, .sudog_c = 80, .sudog_elem = 24 },
		.g_status = 144,
		.m_procid = 72,
		.g_sched = 56, .gobuf_sp = 0, .gobuf_pc = 8, .gobuf_bp = 48,
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

struct pcln {
	const uint8_t *d;
	size_t len;
	uint64_t nfunc, text, funcname, functab;
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
		if ((magic != 0xfffffff0 && magic != 0xfffffff1) || p->d[7] != 8)
			return false;
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

/* A closure ("pkg.fn.func3", "pkg.fn.func3.1"): what a `go f(x)` statement starts. */
static bool is_closure(const char *name)
{
	const char *f = strstr(name, ".func");

	return f && f[5] >= '0' && f[5] <= '9';
}

/*
 * What the compiler calls on its own in any function: stack growth, write
 * barriers, bounds panics. Outside package runtime, any runtime function.
 */
static bool compiler_helper(const char *closure, const char *callee)
{
	static const char *const helpers[] = { "runtime.morestack", "runtime.gcWriteBarrier",
					       "runtime.panic", "runtime.goPanic" };

	if (strncmp(callee, "runtime.", 8))
		return false;
	if (strncmp(closure, "runtime.", 8))
		return true;
	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (!strncmp(callee, helpers[i], strlen(helpers[i])))
			return true;
	return false;
}

/* The one function a small closure calls, but compiler_helper's: f of `go f(x)`'s wrapper. */
static const char *wrapped_call(Elf *elf, const struct pcln *p, uint64_t idx)
{
	uint32_t entry, end = load_u32(p->d + p->functab + 8 * (idx + 1));
	const char *found = NULL, *self = pcln_func(p, idx, &entry);
	uint64_t start, fileoff = 0;
	size_t n, nph;
	Elf_Data *code;

	if (!self)
		return NULL;
	start = p->text + entry;
	n = end - entry;
	if (n > 256 || elf_getphdrnum(elf, &nph))
		return NULL;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    start >= ph.p_vaddr && start + n <= ph.p_vaddr + ph.p_filesz)
			fileoff = ph.p_offset + start - ph.p_vaddr;
	}
	code = fileoff ? elf_getdata_rawchunk(elf, (int64_t)fileoff, n, ELF_T_BYTE) : NULL;
	for (uint64_t a = 0; code && a < n;) {
		struct x86_insn in;
		int len = x86_decode((const uint8_t *)code->d_buf + a, n - a, start + a, &in);
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

			if (!callee || compiler_helper(self, callee))
				continue;
			if (found && strcmp(found, callee))
				return NULL; /* a closure of its own: keep its name */
			found = callee;
		}
	}
	return found;
}

bool goelf_func_at(Elf *elf, uint64_t vaddr, char *name, size_t len)
{
	struct pcln p;
	uint64_t idx;
	uint32_t entry;
	const char *n, *w;

	if (!pcln_open(elf, &p) || vaddr < p.text || !pcln_find(&p, vaddr - p.text, &idx))
		return false;
	n = pcln_func(&p, idx, &entry);
	if (!n)
		return false;
	if (vaddr != p.text + entry) {
		snprintf(name, len, "%s+0x%llx", n, (unsigned long long)(vaddr - p.text - entry));
		return true;
	}
	w = is_closure(n) ? wrapped_call(elf, &p, idx) : NULL;
	snprintf(name, len, "%s", w ? w : n);
	return true;
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

bool goelf_func_at_path(const char *path, uint64_t vaddr, char *name, size_t len)
{
	GElf_Ehdr eh;
	Elf *elf;
	bool ok;
	int fd;

	if (elf_open_host(path, &fd, &elf, &eh, NULL, 0))
		return false;
	ok = (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) && goelf_func_at(elf, vaddr, name, len);
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
	uint16_t g_sched, gobuf_sp, gobuf_pc, gobuf_bp;
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
	}
	gi->g_sched_pc = (uint16_t)(g_sched + gobuf_pc);
	gi->g_sched_sp = (uint16_t)(g_sched + gobuf_sp);
	gi->g_sched_bp = (uint16_t)(g_sched + gobuf_bp);
	o->g_sched_pc = gi->g_sched_pc;
	o->g_sched_bp = gi->g_sched_bp;
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
