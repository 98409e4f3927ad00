// SPDX-License-Identifier: MIT
/* Probe sites on instruction boundaries, decoded from their function's start: see sitebounds.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "elfread.h"
#include "sitebounds.h"
#include "util.h"
#include "x86dec.h"

#define SEGS_MAX 16
#define SYMS_PER_READ 4096
#define CODE_WINDOW 65536
#define WHY_LEN 320

/* A PT_LOAD segment's file bytes: [vaddr, file_end) at offset. */
struct seg {
	uint64_t vaddr, file_end, offset;
	bool exec;
};

/* A function symbol that holds a site: [start, end), its name at `name` in section `strtab`. */
struct fn_range {
	uint64_t start, end;
	uint32_t name, strtab;
};

/* A site, sorted by address; idx is its place in the caller's array. */
struct site_ref {
	uint64_t pc;
	size_t idx;
};

/* How one start was decoded so far: the next instruction begins at pos. */
struct sweep {
	uint64_t start, pos;
	bool used;
};

/* .eh_frame_hdr's search table, read whole (it is at most ELF_READ_MAX bytes). */
struct fde_table {
	uint64_t hdr_vaddr;
	int32_t *pairs; /* (initial location, FDE address), both relative to hdr_vaddr */
	size_t n;
	/* The last CIE read: its address and the encoding of its FDEs' addresses. */
	uint64_t cie_vaddr;
	uint8_t cie_enc;
	bool cie_valid;
};

struct bounds {
	Elf *elf;
	int fd;
	struct seg segs[SEGS_MAX];
	size_t nsegs;
	const struct site_ref *sites;
	size_t n;
	struct fn_range *ranges;
	size_t nranges, cap;
	uint64_t *prefix_end; /* the largest end among ranges[0..i] */
	/* Code symbols without a size (assembly's labels), sorted: starts when nothing else is. */
	struct fn_range *labels;
	size_t nlabels, cap_labels;
	struct fde_table fde;
	uint64_t decoded;
	/* The code window the decoder reads. */
	uint8_t *code;
	uint64_t code_vaddr;
	size_t code_len;
	struct sweep sweeps[2]; /* from the symbol's start, from the FDE's */
};

static const struct seg *seg_of(const struct bounds *b, uint64_t vaddr)
{
	for (size_t i = 0; i < b->nsegs; i++)
		if (vaddr >= b->segs[i].vaddr && vaddr < b->segs[i].file_end)
			return &b->segs[i];
	return NULL;
}

/* len bytes at vaddr, all in one segment's file bytes. */
static bool read_vaddr(const struct bounds *b, uint64_t vaddr, void *buf, size_t len)
{
	const struct seg *s = seg_of(b, vaddr);

	if (!s || len > s->file_end - vaddr)
		return false;
	return pread(b->fd, buf, len, (off_t)(s->offset + (vaddr - s->vaddr))) == (ssize_t)len;
}

/* As many of len bytes at vaddr as its segment holds, at least min; the rest zeroed. */
static bool read_vaddr_upto(const struct bounds *b, uint64_t vaddr, void *buf, size_t len,
			    size_t min)
{
	const struct seg *s = seg_of(b, vaddr);
	size_t n;

	memset(buf, 0, len);
	if (!s)
		return false;
	n = s->file_end - vaddr < len ? (size_t)(s->file_end - vaddr) : len;
	return n >= min &&
	       pread(b->fd, buf, n, (off_t)(s->offset + (vaddr - s->vaddr))) == (ssize_t)n;
}

static void load_segments(struct bounds *b)
{
	size_t n;

	if (elf_getphdrnum(b->elf, &n))
		return;
	for (size_t i = 0; i < n && b->nsegs < SEGS_MAX; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(b->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    ph.p_filesz > ph.p_memsz || ph.p_vaddr > UINT64_MAX - ph.p_filesz)
			continue;
		b->segs[b->nsegs++] = (struct seg){.vaddr = ph.p_vaddr,
						   .file_end = ph.p_vaddr + ph.p_filesz,
						   .offset = ph.p_offset,
						   .exec = ph.p_flags & PF_X};
	}
}

/* The first site at or after addr. */
static size_t site_lower_bound(const struct bounds *b, uint64_t addr)
{
	size_t lo = 0, hi = b->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->sites[mid].pc < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- functions from the symbol tables ---- */

static void keep_range(struct bounds *b, uint64_t start, uint64_t end, uint32_t name,
		       uint32_t strtab)
{
	size_t i = site_lower_bound(b, start);

	if (i == b->n || b->sites[i].pc >= end)
		return; /* holds no site */
	if (b->nranges == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 64;
		b->ranges = xrealloc(b->ranges, b->cap * sizeof(*b->ranges));
	}
	b->ranges[b->nranges++] =
	    (struct fn_range){.start = start, .end = end, .name = name, .strtab = strtab};
}

/* A label in the code at or before the last site: where a function may start. */
static void keep_label(struct bounds *b, uint64_t at, uint32_t name, uint32_t strtab)
{
	const struct seg *s = seg_of(b, at);

	if (!s || !s->exec || at > b->sites[b->n - 1].pc)
		return;
	if (b->nlabels == b->cap_labels) {
		b->cap_labels = b->cap_labels ? 2 * b->cap_labels : 64;
		b->labels = xrealloc(b->labels, b->cap_labels * sizeof(*b->labels));
	}
	b->labels[b->nlabels++] =
	    (struct fn_range){.start = at, .end = at, .name = name, .strtab = strtab};
}

/* One symbol table, streamed: its functions that hold a site, its labels in the code. */
static void scan_symtab(struct bounds *b, const GElf_Shdr *sh)
{
	Elf64_Sym *syms;
	uint64_t n;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size > ELF_READ_MAX)
		return;
	n = sh->sh_size / sizeof(Elf64_Sym);
	syms = xmalloc(SYMS_PER_READ * sizeof(*syms));
	for (uint64_t at = 0; at < n;) {
		size_t k = n - at < SYMS_PER_READ ? (size_t)(n - at) : SYMS_PER_READ;
		ssize_t got = pread(b->fd, syms, k * sizeof(*syms),
				    (off_t)(sh->sh_offset + at * sizeof(*syms)));

		if (got != (ssize_t)(k * sizeof(*syms)))
			break;
		for (size_t i = 0; i < k; i++) {
			const Elf64_Sym *y = &syms[i];
			unsigned type = ELF64_ST_TYPE(y->st_info);

			if ((type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) ||
			    y->st_shndx == SHN_UNDEF || y->st_shndx >= SHN_LORESERVE ||
			    y->st_value > UINT64_MAX - y->st_size)
				continue;
			if (y->st_size && type != STT_NOTYPE)
				keep_range(b, y->st_value, y->st_value + y->st_size, y->st_name,
					   sh->sh_link);
			else if (!y->st_size)
				keep_label(b, y->st_value, y->st_name, sh->sh_link);
		}
		at += k;
	}
	free(syms);
}

static int cmp_range(const void *x, const void *y)
{
	const struct fn_range *a = x, *c = y;

	if (a->start != c->start)
		return a->start < c->start ? -1 : 1;
	return a->end > c->end ? -1 : a->end < c->end;
}

static void load_symbols(struct bounds *b)
{
	Elf_Scn *scn = NULL;
	uint64_t end = 0;

	while ((scn = elf_nextscn(b->elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM))
			scan_symtab(b, &sh);
	}
	if (b->nlabels)
		qsort(b->labels, b->nlabels, sizeof(*b->labels), cmp_range);
	if (!b->nranges)
		return;
	qsort(b->ranges, b->nranges, sizeof(*b->ranges), cmp_range);
	b->prefix_end = xmalloc(b->nranges * sizeof(*b->prefix_end));
	for (size_t i = 0; i < b->nranges; i++) {
		if (b->ranges[i].end > end)
			end = b->ranges[i].end;
		b->prefix_end[i] = end;
	}
}

/*
 * The function symbol with the earliest start that holds pc, or NULL. The
 * first range whose running largest end passes pc raised it itself, so it
 * holds pc if it starts at or before it; any other range that holds pc
 * comes after it in start order.
 */
static const struct fn_range *symbol_of(const struct bounds *b, uint64_t pc)
{
	size_t lo = 0, hi = b->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->prefix_end[mid] <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == b->nranges || b->ranges[lo].start > pc)
		return NULL;
	return &b->ranges[lo];
}

/* The nearest label at or before pc, or NULL. */
static const struct fn_range *label_of(const struct bounds *b, uint64_t pc)
{
	size_t lo = 0, hi = b->nlabels;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->labels[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &b->labels[lo - 1] : NULL;
}

/* The symbol's name for a message: up to 63 bytes of it, or "?" (the log escapes it). */
static void symbol_name(const struct bounds *b, const struct fn_range *r, char *buf, size_t len)
{
	Elf_Scn *scn = elf_getscn(b->elf, r->strtab);
	GElf_Shdr sh;
	ssize_t got;

	snprintf(buf, len, "?");
	if (!scn || !gelf_getshdr(scn, &sh) || r->name >= sh.sh_size || len < 2)
		return;
	got = pread(b->fd, buf, MIN(len - 1, sh.sh_size - r->name), (off_t)(sh.sh_offset + r->name));
	buf[got > 0 ? got : 0] = 0;
	if (!buf[0])
		snprintf(buf, len, "?");
}

/* ---- functions from the unwind table (.eh_frame_hdr, then the FDE and its CIE) ---- */

#define DW_EH_PE_omit 0xff
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_uleb128 0x01
#define DW_EH_PE_udata2 0x02
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sleb128 0x09
#define DW_EH_PE_sdata2 0x0a
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

/* Bytes read from a buffer, never past its end; `bad` once it would have been. */
struct cursor {
	const uint8_t *p, *end;
	uint64_t vaddr; /* of p */
	bool bad;
};

static uint64_t cur_bytes(struct cursor *c, size_t n, bool sign)
{
	uint64_t v = 0;

	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	if (sign && n < 8 && (v >> (8 * n - 1)) & 1)
		v |= ~0ULL << (8 * n);
	c->p += n;
	c->vaddr += n;
	return v;
}

static uint64_t cur_leb(struct cursor *c, bool sign)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t byte;

	do {
		if (c->bad || c->p == c->end || shift >= 64) {
			c->bad = true;
			return 0;
		}
		byte = *c->p++;
		c->vaddr++;
		v |= (uint64_t)(byte & 0x7f) << shift;
		shift += 7;
	} while (byte & 0x80);
	if (sign && shift < 64 && (byte & 0x40))
		v |= ~0ULL << shift;
	return v;
}

/* A pointer in encoding enc; pcrel and datarel (from data_base) applied, the others refused. */
static uint64_t cur_ptr(struct cursor *c, uint8_t enc, uint64_t data_base)
{
	uint64_t at = c->vaddr, v;

	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: v = cur_bytes(c, 8, false); break;
	case DW_EH_PE_uleb128: v = cur_leb(c, false); break;
	case DW_EH_PE_udata2: v = cur_bytes(c, 2, false); break;
	case DW_EH_PE_udata4: v = cur_bytes(c, 4, false); break;
	case DW_EH_PE_udata8: v = cur_bytes(c, 8, false); break;
	case DW_EH_PE_sleb128: v = cur_leb(c, true); break;
	case DW_EH_PE_sdata2: v = cur_bytes(c, 2, true); break;
	case DW_EH_PE_sdata4: v = cur_bytes(c, 4, true); break;
	case DW_EH_PE_sdata8: v = cur_bytes(c, 8, true); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0: return v;
	case DW_EH_PE_pcrel: return v + at;
	case DW_EH_PE_datarel: return v + data_base;
	}
	c->bad = true; /* textrel, funcrel, aligned: not what .eh_frame holds */
	return 0;
}

/* The search table of PT_GNU_EH_FRAME, in the form every linker writes it. */
static void load_fde_table(struct bounds *b)
{
	uint8_t head[4 + 8 + 8];
	struct cursor c;
	uint64_t count;
	size_t n;

	if (elf_getphdrnum(b->elf, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(b->elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			b->fde.hdr_vaddr = ph.p_vaddr;
			break;
		}
	}
	if (!b->fde.hdr_vaddr || !read_vaddr_upto(b, b->fde.hdr_vaddr, head, sizeof(head), 12))
		return;
	/* Version 1; the table's entries (initial location, FDE address) sdata4 from the header. */
	if (head[0] != 1 || head[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) ||
	    head[1] == DW_EH_PE_omit || head[2] == DW_EH_PE_omit)
		return;
	c = (struct cursor){.p = head + 4, .end = head + sizeof(head), .vaddr = b->fde.hdr_vaddr + 4};
	cur_ptr(&c, head[1], b->fde.hdr_vaddr); /* where .eh_frame is: not needed */
	count = cur_ptr(&c, head[2], b->fde.hdr_vaddr);
	if (c.bad || !count || count > ELF_READ_MAX / 8)
		return;
	b->fde.pairs = xmalloc(count * 8);
	if (!read_vaddr(b, c.vaddr, b->fde.pairs, count * 8)) {
		free(b->fde.pairs);
		b->fde.pairs = NULL;
		return;
	}
	b->fde.n = count;
}

/* The encoding of the addresses in the FDEs of the CIE at `cie` (absptr unless 'R' says). */
static bool cie_fde_encoding(struct bounds *b, uint64_t cie, uint8_t *enc)
{
	uint8_t buf[64];
	struct cursor c;
	const char *aug;
	uint64_t ver;
	size_t auglen;

	if (b->fde.cie_valid && b->fde.cie_vaddr == cie) {
		*enc = b->fde.cie_enc;
		return true;
	}
	if (!read_vaddr_upto(b, cie, buf, sizeof(buf), 16))
		return false;
	c = (struct cursor){.p = buf, .end = buf + sizeof(buf), .vaddr = cie};
	if (cur_bytes(&c, 4, false) == 0xffffffff || cur_bytes(&c, 4, false) != 0)
		return false; /* 64-bit DWARF, or not a CIE */
	ver = cur_bytes(&c, 1, false);
	if (ver != 1 && ver != 3)
		return false;
	aug = (const char *)c.p;
	auglen = strnlen(aug, (size_t)(c.end - c.p));
	if (auglen == (size_t)(c.end - c.p) || strstr(aug, "eh"))
		return false;
	c.p += auglen + 1;
	c.vaddr += auglen + 1;
	cur_leb(&c, false); /* code alignment */
	cur_leb(&c, true);  /* data alignment */
	if (ver == 1)
		cur_bytes(&c, 1, false); /* return address register */
	else
		cur_leb(&c, false);
	*enc = DW_EH_PE_absptr;
	if (aug[0] == 'z') {
		cur_leb(&c, false); /* augmentation data length */
		for (const char *a = aug + 1; *a && !c.bad; a++) {
			if (*a == 'R') {
				*enc = (uint8_t)cur_bytes(&c, 1, false);
			} else if (*a == 'P') {
				uint8_t penc = (uint8_t)cur_bytes(&c, 1, false);

				cur_ptr(&c, penc & 0x7f, 0); /* the personality, indirect or not */
			} else if (*a == 'L') {
				cur_bytes(&c, 1, false);
			} else if (*a != 'S' && *a != 'B') {
				return false;
			}
		}
	}
	if (c.bad)
		return false;
	b->fde.cie_vaddr = cie;
	b->fde.cie_enc = *enc;
	b->fde.cie_valid = true;
	return true;
}

/* The start of the FDE that covers pc: true and *start, or false if none does. */
static bool fde_of(struct bounds *b, uint64_t pc, uint64_t *start)
{
	int64_t rel = (int64_t)(pc - b->fde.hdr_vaddr);
	uint64_t fde, cie, begin, range;
	size_t lo = 0, hi = b->fde.n;
	uint8_t buf[4 + 4 + 8 + 8], enc;
	struct cursor c;

	/* The last entry whose initial location is at or before pc (the table is sorted). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((int64_t)b->fde.pairs[2 * mid] <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	fde = b->fde.hdr_vaddr + (uint64_t)(int64_t)b->fde.pairs[2 * (lo - 1) + 1];
	if (!read_vaddr_upto(b, fde, buf, sizeof(buf), 4 + 4 + 8))
		return false;
	c = (struct cursor){.p = buf, .end = buf + sizeof(buf), .vaddr = fde};
	if (cur_bytes(&c, 4, false) == 0xffffffff)
		return false;
	cie = c.vaddr;
	cie -= cur_bytes(&c, 4, false);
	if (c.bad || cie == fde + 4 || !cie_fde_encoding(b, cie, &enc))
		return false;
	begin = cur_ptr(&c, enc, 0);
	range = cur_ptr(&c, enc & 0x0f, 0);
	if (c.bad || pc < begin || pc - begin >= range)
		return false;
	*start = begin;
	return true;
}

/* ---- decoding ---- */

/* The code at vaddr: a pointer, and in *avail how many bytes follow in its segment's file bytes. */
static const uint8_t *code_at(struct bounds *b, uint64_t vaddr, size_t *avail)
{
	const struct seg *s = seg_of(b, vaddr);
	uint64_t left;
	size_t len;

	if (!s || !s->exec)
		return NULL;
	if (vaddr >= b->code_vaddr && vaddr - b->code_vaddr < b->code_len &&
	    (b->code_len - (vaddr - b->code_vaddr) >= 16 ||
	     b->code_vaddr + b->code_len == s->file_end)) {
		*avail = b->code_len - (size_t)(vaddr - b->code_vaddr);
		return b->code + (vaddr - b->code_vaddr);
	}
	left = s->file_end - vaddr;
	len = left < CODE_WINDOW ? (size_t)left : CODE_WINDOW;
	if (!b->code)
		b->code = xmalloc(CODE_WINDOW);
	if (pread(b->fd, b->code, len, (off_t)(s->offset + (vaddr - s->vaddr))) != (ssize_t)len) {
		b->code_len = 0;
		return NULL;
	}
	b->code_vaddr = vaddr;
	b->code_len = len;
	*avail = len;
	return b->code;
}

static void bytes_at(struct bounds *b, uint64_t vaddr, size_t n, char *buf, size_t len)
{
	size_t avail = 0, o = 0;
	const uint8_t *p = code_at(b, vaddr, &avail);

	buf[0] = 0;
	for (size_t i = 0; p && i < n && i < avail && o + 4 <= len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%02x", i ? " " : "", p[i]);
}

/*
 * Decode from `start` (a function's) up to pc. True if an instruction begins
 * at pc; false with the reason in why. `sw` remembers how far this start
 * was decoded, for the next site of the same function.
 */
static bool decode_to(struct bounds *b, struct sweep *sw, uint64_t start, uint64_t pc,
		      const char *fn, char *why, size_t len)
{
	uint64_t at = sw->used && sw->start == start && sw->pos <= pc ? sw->pos : start;
	char bytes[64];

	while (at < pc) {
		struct x86_insn in;
		size_t avail;
		const uint8_t *code = code_at(b, at, &avail);
		int n;

		if (!code) {
			snprintf(why, len, "cannot be shown to start an instruction: %s, from its "
				 "start at 0x%llx, runs to 0x%llx, outside the file's executable "
				 "bytes", fn, (unsigned long long)start, (unsigned long long)at);
			return false;
		}
		if (b->decoded >= SITE_BOUNDS_DECODE_MAX) {
			snprintf(why, len, "cannot be shown to start an instruction: decoding the "
				 "object's functions from their starts would take more than %llu "
				 "MiB of code", (unsigned long long)(SITE_BOUNDS_DECODE_MAX >> 20));
			return false;
		}
		n = x86_decode(code, avail, at, &in);
		if (!n) {
			bytes_at(b, at, 8, bytes, sizeof(bytes));
			snprintf(why, len, "cannot be shown to start an instruction: %s, decoded "
				 "from its start at 0x%llx, holds bytes that are no instruction at "
				 "0x%llx (%s)", fn, (unsigned long long)start, (unsigned long long)at,
				 bytes);
			return false;
		}
		b->decoded += (uint64_t)n;
		if (at + (uint64_t)n > pc) {
			bytes_at(b, at, (size_t)n, bytes, sizeof(bytes));
			snprintf(why, len, "is inside the instruction at 0x%llx (bytes %s) of %s, "
				 "decoded from its start at 0x%llx: not an instruction boundary, and "
				 "a breakpoint there would change that instruction",
				 (unsigned long long)at, bytes, fn, (unsigned long long)start);
			return false;
		}
		at += (uint64_t)n;
	}
	sw->used = true;
	sw->start = start;
	sw->pos = at;
	return true;
}

static bool check_site(struct bounds *b, uint64_t pc, char *why, size_t len)
{
	const struct fn_range *sym = symbol_of(b, pc);
	uint64_t fde_start = 0;
	bool fde = b->fde.n && fde_of(b, pc, &fde_start);
	char name[64], fn[96];

	/* Neither a sized function nor an unwind entry: the label before it (assembly). */
	if (!sym && !fde && (sym = label_of(b, pc))) {
		symbol_name(b, sym, name, sizeof(name));
		snprintf(fn, sizeof(fn), "the code at label %s", name);
		return decode_to(b, &b->sweeps[0], sym->start, pc, fn, why, len);
	}
	if (!sym && !fde) {
		snprintf(why, len, "is in no function the object describes (no function symbol "
			 "and no unwind entry holds it), so whether it starts an instruction "
			 "cannot be checked: keep the symbol table, or build with unwind tables "
			 "(the compiler's default)");
		return false;
	}
	if (sym) {
		symbol_name(b, sym, name, sizeof(name));
		snprintf(fn, sizeof(fn), "function %s", name);
		if (!decode_to(b, &b->sweeps[0], sym->start, pc, fn, why, len))
			return false;
	}
	if (fde && !(sym && sym->start == fde_start) &&
	    !decode_to(b, &b->sweeps[1], fde_start, pc, "the function of its unwind entry", why,
		       len))
		return false;
	return true;
}

static int cmp_site(const void *x, const void *y)
{
	const struct site_ref *a = x, *c = y;

	return a->pc < c->pc ? -1 : a->pc > c->pc;
}

size_t site_bounds_check(Elf *elf, int fd, const uint64_t *pcs, size_t n, site_bounds_fn bad,
			 void *ctx)
{
	struct bounds b = {.elf = elf, .fd = fd, .n = n};
	struct site_ref *sites;
	size_t nbad = 0;
	bool ok = true;
	char why[WHY_LEN];

	if (!n)
		return 0;
	sites = xmalloc(n * sizeof(*sites));
	for (size_t i = 0; i < n; i++)
		sites[i] = (struct site_ref){.pc = pcs[i], .idx = i};
	qsort(sites, n, sizeof(*sites), cmp_site);
	b.sites = sites;
	load_segments(&b);
	load_symbols(&b);
	load_fde_table(&b);
	for (size_t i = 0; i < n; i++) {
		/* The same address again (another note of one site): the same answer. */
		if (!i || sites[i].pc != sites[i - 1].pc)
			ok = check_site(&b, sites[i].pc, why, sizeof(why));
		if (!ok) {
			bad(ctx, sites[i].idx, why);
			nbad++;
		}
	}
	free(b.code);
	free(b.fde.pairs);
	free(b.prefix_end);
	free(b.ranges);
	free(b.labels);
	free(sites);
	return nbad;
}
