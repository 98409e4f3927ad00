// SPDX-License-Identifier: MIT
/*
 * elfnotes.c: ELF identity checks and USDT note counting, on top of libelf
 * (the dynamic-linking facts: dynlink.c).
 *
 * Everything read from a file is treated as hostile: lengths and offsets are
 * checked against what libelf actually returned before any byte is touched,
 * because corobpf runs as root and scans whatever binaries it is pointed at.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util.h"

#include "elfnotes.h"
#include "sitebounds.h"

#define STAPSDT_NOTE_TYPE	3
#define STAPSDT_NOTE_OWNER	"stapsdt"
#define STAPSDT_SECTION		".note.stapsdt"
/* pc, base, semaphore: three 8-byte addresses before the strings */
#define STAPSDT_ADDRS_SIZE	24


static const char *machine_name(unsigned int machine)
{
	switch (machine) {
	case EM_386:		return "i386";
	case EM_ARM:		return "arm";
	case EM_AARCH64:	return "aarch64";
	case EM_PPC:		return "ppc";
	case EM_PPC64:		return "ppc64";
	case EM_S390:		return "s390";
	case EM_RISCV:		return "riscv";
	case EM_MIPS:		return "mips";
	case EM_SPARCV9:	return "sparc64";
	case EM_LOONGARCH:	return "loongarch";
	case EM_BPF:		return "bpf";
	default:		return NULL;
	}
}

/*
 * libelf quietly treats section headers past the end of the file as "no
 * sections", which would turn a truncated binary into one without probes.
 * A cut file must be an error, so check both header tables fit.
 */
static int check_header_tables(const char *path, int fd, const GElf_Ehdr *ehdr, char *err,
			       size_t errlen, uint64_t *file_size)
{
	uint64_t shnum = ehdr->e_shnum ? ehdr->e_shnum : 1;	/* 0: count in section 0 */
	uint64_t phnum = ehdr->e_phnum;
	struct stat sb;

	if (fstat(fd, &sb) < 0) {
		int ret = -errno;

		errfmt(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (ehdr->e_shoff &&
	    (ehdr->e_shoff > (uint64_t)sb.st_size ||
	     shnum * sizeof(Elf64_Shdr) > (uint64_t)sb.st_size - ehdr->e_shoff)) {
		errfmt(err, errlen,
		       "%s: truncated: %llu section headers at file offset 0x%llx, file has %lld bytes",
		       path, (unsigned long long)shnum, (unsigned long long)ehdr->e_shoff,
		       (long long)sb.st_size);
		return -EINVAL;
	}
	if (phnum &&
	    (ehdr->e_phoff > (uint64_t)sb.st_size ||
	     phnum * sizeof(Elf64_Phdr) > (uint64_t)sb.st_size - ehdr->e_phoff)) {
		errfmt(err, errlen,
		       "%s: truncated: %llu program headers at file offset 0x%llx, file has %lld bytes",
		       path, (unsigned long long)phnum, (unsigned long long)ehdr->e_phoff,
		       (long long)sb.st_size);
		return -EINVAL;
	}
	*file_size = (uint64_t)sb.st_size;
	return 0;
}

/*
 * Every section whose bytes are in the file must be in it: libelf would
 * read one that runs past the end as far as the file goes, or fail later,
 * and a size a file cannot hold is not a mistake a linker makes. The
 * section name table, which every reader of names loads whole, must also
 * be no larger than ELF_READ_MAX.
 */
static int check_sections(const char *path, Elf *elf, uint64_t file_size, char *err,
			  size_t errlen)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh)) {
			errfmt(err, errlen, "%s: section %zu: unreadable header: %s", path,
			       elf_ndxscn(scn), elf_errmsg(-1));
			return -EINVAL;
		}
		if (sh.sh_type == SHT_NOBITS || !sh.sh_size)
			continue;
		if (sh.sh_offset > file_size || sh.sh_size > file_size - sh.sh_offset) {
			errfmt(err, errlen,
			       "%s: section %zu declares %llu bytes at file offset 0x%llx, past the "
			       "end of the %llu-byte file",
			       path, elf_ndxscn(scn), (unsigned long long)sh.sh_size,
			       (unsigned long long)sh.sh_offset, (unsigned long long)file_size);
			return -EINVAL;
		}
	}
	if (elf_getshdrstrndx(elf, &shstrndx) == 0 && shstrndx) {
		GElf_Shdr sh;

		scn = elf_getscn(elf, shstrndx);
		if (scn && gelf_getshdr(scn, &sh) && sh.sh_size > ELF_READ_MAX) {
			errfmt(err, errlen,
			       "%s: its section name table declares %llu bytes, more than the %llu "
			       "MiB corobpf reads of one table",
			       path, (unsigned long long)sh.sh_size,
			       (unsigned long long)(ELF_READ_MAX >> 20));
			return -EINVAL;
		}
	}
	return 0;
}

Elf_Data *elf_section_data(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	GElf_Shdr strsh;
	Elf_Scn *str;

	if (sh->sh_size > ELF_READ_MAX)
		return NULL;
	/* A symbol table's names are read whole too, by elf_strptr(). */
	if (sh->sh_type == SHT_SYMTAB || sh->sh_type == SHT_DYNSYM) {
		str = elf_getscn(elf, sh->sh_link);
		if (!str || !gelf_getshdr(str, &strsh) || strsh.sh_size > ELF_READ_MAX)
			return NULL;
	}
	return elf_getdata(scn, NULL);
}

/*
 * Open `path` as an x86-64 ELF. Every caller needs the same refusal messages,
 * so they live here: the user should learn that the file is 32-bit or ARM,
 * not that some section was missing.
 */
int elf_open_host(const char *path, int *fd_out, Elf **elf_out, GElf_Ehdr *ehdr,
		  char *err, size_t errlen)
{
	const char *ident, *mname;
	uint64_t file_size = 0;
	size_t ident_len;
	Elf *elf;
	int fd, ret;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		errfmt(err, errlen, "libelf: %s", elf_errmsg(-1));
		return -ENOSYS;
	}
	/* O_NONBLOCK: a FIFO in place of a binary must not hang a root tool. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		errfmt(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		errfmt(err, errlen, "%s: cannot read as ELF: %s", path, elf_errmsg(-1));
		close(fd);
		return -ENOEXEC;
	}
	if (elf_kind(elf) != ELF_K_ELF) {
		errfmt(err, errlen, "%s: not an ELF file%s", path,
		       elf_kind(elf) == ELF_K_AR ? " (an ar archive)" : "");
		ret = -ENOEXEC;
		goto fail;
	}
	ident = elf_getident(elf, &ident_len);
	if (!ident || ident_len < EI_NIDENT) {
		errfmt(err, errlen, "%s: truncated ELF identification", path);
		ret = -ENOEXEC;
		goto fail;
	}
	if (ident[EI_CLASS] != ELFCLASS64) {
		errfmt(err, errlen, "%s: %s ELF; corobpf supports x86-64 (64-bit) objects only",
		       path, ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "unknown-class");
		ret = -ENOEXEC;
		goto fail;
	}
	if (ident[EI_DATA] != ELFDATA2LSB) {
		errfmt(err, errlen, "%s: big-endian ELF; corobpf supports x86-64 objects only",
		       path);
		ret = -ENOEXEC;
		goto fail;
	}
	if (!gelf_getehdr(elf, ehdr)) {
		errfmt(err, errlen, "%s: truncated or invalid ELF header: %s", path,
		       elf_errmsg(-1));
		ret = -ENOEXEC;
		goto fail;
	}
	if (ehdr->e_machine != EM_X86_64) {
		mname = machine_name(ehdr->e_machine);
		if (mname)
			errfmt(err, errlen, "%s: ELF for %s; corobpf supports x86-64 objects only",
			       path, mname);
		else
			errfmt(err, errlen,
			       "%s: ELF for machine %u; corobpf supports x86-64 objects only", path,
			       ehdr->e_machine);
		ret = -ENOEXEC;
		goto fail;
	}
	ret = check_header_tables(path, fd, ehdr, err, errlen, &file_size);
	if (ret)
		goto fail;
	ret = check_sections(path, elf, file_size, err, errlen);
	if (ret)
		goto fail;
	*fd_out = fd;
	*elf_out = elf;
	return 0;
fail:
	elf_end(elf);
	close(fd);
	return ret;
}

static size_t align_up(size_t v, size_t align)
{
	return (v + align - 1) & ~(align - 1);
}

/* Counts a site; returns its number among the sites of its name (from 1), or 0 if dropped. */
static unsigned int count_probe(struct elf_probes *out, const char *name, size_t name_len,
				bool sem)
{
	struct elf_probe_name *p;
	unsigned int i;

	out->total++;
	for (i = 0; i < out->n_names; i++) {
		p = &out->names[i];
		if (strcmp(p->name, name) == 0) {
			p->count++;
			p->has_semaphore |= sem;
			return p->count;
		}
	}
	if (name_len >= ELF_PROBE_NAME_LEN || out->n_names == ELF_PROBE_NAMES_MAX) {
		out->names_dropped++;
		return 0;
	}
	p = &out->names[out->n_names++];
	memcpy(p->name, name, name_len + 1);
	p->count = 1;
	p->has_semaphore = sem;
	return 1;
}

/*
 * What usdt/corobpf.h writes at a site: a one-byte nop, or with COROBPF_NOP5
 * a five-byte nop between two steps of the stack pointer over the red zone.
 */
#define SDK_NOP1 0x90
static const unsigned char sdk_nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
static const unsigned char sdk_nop5_before[5] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };
static const unsigned char sdk_nop5_after[8] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
#define SITE_BEFORE sizeof(sdk_nop5_before)
#define SITE_AFTER (sizeof(sdk_nop5) + sizeof(sdk_nop5_after))

/* More program headers than this is no object a loader would map. */
#define ELF_PHDRS_MAX 65535

/* A PT_LOAD segment as libbpf matches an address to it: [vaddr, mem_end). */
struct load_seg {
	uint64_t vaddr, mem_end;
	uint64_t file_end;	/* vaddr + p_filesz: the part the file holds */
	uint64_t offset;
	uint32_t flags;
};

/*
 * What a scan knows of the object to judge each site of the provider the
 * way libbpf will attach it. Filled on the first such site: objects without
 * one (most libraries) cost nothing more.
 */
struct scan {
	const char *path, *provider;
	int fd;
	Elf *elf;
	size_t shstrndx;
	bool prepared;
	struct load_seg *segs;	/* sorted by address, none overlapping */
	size_t nsegs;
	char segs_bad[192];	/* why no address in the object can be trusted, or "" */
	uint64_t base;		/* address of the first .stapsdt.base section, 0 if none */
	bool has_probes_sec;	/* the first .probes section, where semaphores belong: */
	uint64_t probes_addr, probes_size, probes_offset;
	struct elf_probes *out;
	/* Distinct (probe name, argument string) pairs seen: an open-addressing set. */
	struct spec_slot {
		uint64_t hash;
		const char *args;	/* into the section's data, alive for the scan */
		unsigned int name;	/* index in out->names, plus one (0: empty slot) */
	} *specs;
	size_t specs_cap, specs_used;
	/* elf_probe_walk: the caller's callback for every site accepted. */
	elf_site_fn site_fn;
	void *site_ctx;
	/* The sites accepted so far, for the instruction-boundary check after the notes. */
	struct site_rec {
		uint64_t pc;
		const char *name; /* into the section's data, alive for the scan */
		unsigned int nth;
		bool nop5;
	} *recs;
	size_t nrecs, cap_recs;
};

static uint64_t spec_hash(unsigned int name, const char *args)
{
	uint64_t h = 1469598103934665603ULL ^ name;

	for (; *args; args++)
		h = (h ^ (unsigned char)*args) * 1099511628211ULL;
	return h;
}

/* Count the site's argument string once per probe name (libbpf's unit of spec slots). */
static void count_spec(struct scan *s, const char *name, const char *args)
{
	const struct elf_probe_name *pn = elf_probes_find(s->out, name);
	unsigned int idx;
	uint64_t h;
	size_t i;

	if (!pn)
		return;	/* dropped: never attached */
	idx = (unsigned int)(pn - s->out->names) + 1;
	if (s->specs_used * 2 >= s->specs_cap) {
		size_t cap = s->specs_cap ? s->specs_cap * 2 : 64;
		struct spec_slot *n = xcalloc(cap, sizeof(*n));

		for (i = 0; i < s->specs_cap; i++) {
			size_t j = s->specs[i].hash & (cap - 1);

			if (!s->specs[i].name)
				continue;
			while (n[j].name)
				j = (j + 1) & (cap - 1);
			n[j] = s->specs[i];
		}
		free(s->specs);
		s->specs = n;
		s->specs_cap = cap;
	}
	h = spec_hash(idx, args);
	for (i = h & (s->specs_cap - 1); s->specs[i].name; i = (i + 1) & (s->specs_cap - 1))
		if (s->specs[i].hash == h && s->specs[i].name == idx &&
		    strcmp(s->specs[i].args, args) == 0)
			return;
	s->specs[i] = (struct spec_slot){ .hash = h, .args = args, .name = idx };
	s->specs_used++;
	s->out->names[idx - 1].specs++;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct load_seg *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/*
 * libbpf takes the first PT_LOAD in address order that holds an address. If
 * segments overlapped, which bytes that is would depend on libbpf's sort; a
 * loadable object has no overlaps, so an object with them is refused whole.
 * Addresses past INT64_MAX are refused too: libbpf compares them as longs.
 */
static void load_segments(struct scan *s)
{
	size_t nph, i;

	if (elf_getphdrnum(s->elf, &nph) != 0 || !nph) {
		snprintf(s->segs_bad, sizeof(s->segs_bad),
			 "it has no program headers (not an object a process maps)");
		return;
	}
	if (nph > ELF_PHDRS_MAX) {
		snprintf(s->segs_bad, sizeof(s->segs_bad),
			 "it has %zu program headers, more than any loader takes", nph);
		return;
	}
	s->segs = xcalloc(nph, sizeof(*s->segs));
	for (i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(s->elf, (int)i, &ph)) {
			snprintf(s->segs_bad, sizeof(s->segs_bad),
				 "its program header %zu is unreadable", i);
			return;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_vaddr > INT64_MAX ||
		    ph.p_memsz > INT64_MAX - ph.p_vaddr || ph.p_offset > INT64_MAX ||
		    ph.p_filesz > INT64_MAX - ph.p_offset) {
			snprintf(s->segs_bad, sizeof(s->segs_bad),
				 "its PT_LOAD segment %zu (address 0x%llx, file offset 0x%llx) has "
				 "impossible sizes", i, (unsigned long long)ph.p_vaddr,
				 (unsigned long long)ph.p_offset);
			return;
		}
		s->segs[s->nsegs++] = (struct load_seg){
			.vaddr = ph.p_vaddr,
			.mem_end = ph.p_vaddr + ph.p_memsz,
			.file_end = ph.p_vaddr + ph.p_filesz,
			.offset = ph.p_offset,
			.flags = ph.p_flags,
		};
	}
	if (!s->nsegs) {
		snprintf(s->segs_bad, sizeof(s->segs_bad),
			 "it has no PT_LOAD segment (not an object a process maps)");
		return;
	}
	qsort(s->segs, s->nsegs, sizeof(*s->segs), cmp_seg);
	for (i = 1; i < s->nsegs; i++) {
		if (s->segs[i].vaddr < s->segs[i - 1].mem_end) {
			snprintf(s->segs_bad, sizeof(s->segs_bad),
				 "its PT_LOAD segments at 0x%llx-0x%llx and 0x%llx-0x%llx overlap",
				 (unsigned long long)s->segs[i - 1].vaddr,
				 (unsigned long long)s->segs[i - 1].mem_end,
				 (unsigned long long)s->segs[i].vaddr,
				 (unsigned long long)s->segs[i].mem_end);
			return;
		}
	}
}

/* The segment libbpf maps `addr` with, or NULL. */
static const struct load_seg *find_seg(const struct scan *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsegs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < s->segs[mid].vaddr)
			hi = mid;
		else if (addr >= s->segs[mid].mem_end)
			lo = mid + 1;
		else
			return &s->segs[mid];
	}
	return NULL;
}

/* .stapsdt.base found by name as libbpf finds it (the first one, any type); the first .probes. */
static void load_sections(struct scan *s)
{
	bool have_base = false;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(s->elf, scn))) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return;		/* elf_probe_scan's own walk fails on it */
		name = elf_strptr(s->elf, s->shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (!have_base && !strcmp(name, ".stapsdt.base")) {
			s->base = sh.sh_addr;
			have_base = true;
		} else if (!s->has_probes_sec && !strcmp(name, ".probes") &&
			   sh.sh_type == SHT_PROGBITS &&
			   (sh.sh_flags & (SHF_WRITE | SHF_ALLOC | SHF_EXECINSTR)) ==
				   (SHF_WRITE | SHF_ALLOC) &&
			   sh.sh_size <= UINT64_MAX - sh.sh_addr) {
			s->has_probes_sec = true;
			s->probes_addr = sh.sh_addr;
			s->probes_size = sh.sh_size;
			s->probes_offset = sh.sh_offset;
		}
	}
}

/* The allocated section holding `addr`, for messages: "in .rodata". */
static void section_of(const struct scan *s, uint64_t addr, char *buf, size_t len)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(s->elf, scn))) {
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			break;
		/* TLS sections' addresses are templates that overlap the sections after them. */
		if (!(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_TLS) || addr < sh.sh_addr ||
		    addr - sh.sh_addr >= sh.sh_size)
			continue;
		name = elf_strptr(s->elf, s->shstrndx, sh.sh_name);
		if (!name)
			break;
		snprintf(buf, len, "in %.64s", name);
		return;
	}
	snprintf(buf, len, "in no section");
}

/* A name CORO_PROBE() can write: a C identifier. */
static bool is_identifier(const char *s)
{
	if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/* One site of the provider, as its note has it and as libbpf will compute it. */
struct site {
	const char *name;	/* from the file: any bytes */
	unsigned int nth;	/* among the sites of its name, from 1; 0: name dropped */
	uint64_t loc, note_base, sem;
	uint64_t pc;		/* what libbpf probes: loc moved as .stapsdt.base moved */
	uint64_t off, sem_off;	/* file offsets of pc and of the semaphore, once accepted */
};

/*
 * "site 3 of corobpf:switch at 0x1234", "semaphore of corobpf:name at 0x4010".
 * The name is the file's bytes, cut at 64: the log escapes what it prints.
 */
static void site_label(const struct scan *s, const struct site *site, const char *what,
		       uint64_t addr, char *buf, size_t len)
{
	if (site->nth && !strcmp(what, "site"))
		snprintf(buf, len, "site %u of %s:%.64s at 0x%llx", site->nth, s->provider,
			 site->name, (unsigned long long)addr);
	else
		snprintf(buf, len, "%s of %s:%.64s at 0x%llx", what, s->provider, site->name,
			 (unsigned long long)addr);
}

/*
 * Counts one refused site and keeps the first reason: "<label> <why>". Only
 * the first is formatted, so a file of refused sites costs no more than one.
 */
static void refuse(struct scan *s, const struct site *site, const char *what, uint64_t addr,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void refuse(struct scan *s, const struct site *site, const char *what, uint64_t addr,
		   const char *fmt, ...)
{
	struct elf_probes *out = s->out;
	char label[256];
	size_t n;
	va_list ap;

	out->sites_refused++;
	if (out->refused[0])
		return;
	site_label(s, site, what, addr, label, sizeof(label));
	n = (size_t)snprintf(out->refused, sizeof(out->refused), "%s ", label);
	if (n >= sizeof(out->refused))
		return;
	va_start(ap, fmt);
	vsnprintf(out->refused + n, sizeof(out->refused) - n, fmt, ap);
	va_end(ap);
}

/*
 * The semaphore the kernel will increment at ref_ctr_offset while a uprobe
 * sits on the site: it must be one our SDK defines, a 2-byte word in
 * .probes, which libbpf must map to the same file bytes (it maps through
 * the segments, the section says where the word is).
 */
static void check_semaphore(struct scan *s, struct site *site)
{
	const struct load_seg *seg;
	uint64_t sem = site->sem, seg_off, sec_off;
	char where[96];

	if (sem & 1) {
		refuse(s, site, "semaphore", sem, "is not 2-byte aligned: not a semaphore our "
		       "SDK defines");
		return;
	}
	if (!s->has_probes_sec) {
		section_of(s, sem, where, sizeof(where));
		refuse(s, site, "semaphore", sem, "is outside .probes (%s; the object has no "
		       "writable .probes section)", where);
		return;
	}
	if (sem < s->probes_addr || s->probes_size < 2 ||
	    sem - s->probes_addr > s->probes_size - 2) {
		section_of(s, sem, where, sizeof(where));
		refuse(s, site, "semaphore", sem, "is outside .probes (%s)", where);
		return;
	}
	seg = find_seg(s, sem);
	if (!seg || !(seg->flags & PF_W) || (seg->flags & PF_X) || sem >= seg->file_end ||
	    seg->file_end - sem < 2) {
		refuse(s, site, "semaphore", sem, "is not in the file-backed part of a writable, "
		       "non-executable segment");
		return;
	}
	seg_off = seg->offset + (sem - seg->vaddr);
	sec_off = s->probes_offset + (sem - s->probes_addr);
	if (seg_off != sec_off) {
		refuse(s, site, "semaphore", sem, "is at file offset 0x%llx by its segment, "
		       "0x%llx by .probes: the kernel would increment other bytes",
		       (unsigned long long)seg_off, (unsigned long long)sec_off);
		return;
	}
	site->sem_off = seg_off;
}

/*
 * Judge one site of the provider: the nop our SDK writes, at the address
 * libbpf will probe, in an executable segment, and a semaphore our SDK
 * defines. Counts its kind, or refuses it with the reason.
 */
static void check_site(struct scan *s, struct site *site)
{
	unsigned char win[SITE_BEFORE + SITE_AFTER];
	const struct load_seg *seg;
	size_t at, n, avail;
	uint64_t lo, hi;
	char bytes[3 * 5 + 1];

	if (!s->prepared) {
		load_segments(s);
		load_sections(s);
		s->prepared = true;
	}
	site->pc = site->loc;
	if (!is_identifier(site->name)) {
		refuse(s, site, "site", site->loc, "has a name that is not a C identifier: not a "
		       "probe our SDK emits");
		goto other;
	}
	if (s->segs_bad[0]) {
		refuse(s, site, "site", site->loc, "cannot be placed: %s", s->segs_bad);
		goto other;
	}
	/* libbpf moves each site by how far .stapsdt.base moved since the note was written. */
	if (s->base)
		site->pc = site->loc + (s->base - site->note_base);
	if (site->note_base != s->base) {
		refuse(s, site, "site", site->loc, "has a note that puts .stapsdt.base at 0x%llx, "
		       "but the object has it at 0x%llx: changed after linking, or not written by "
		       "our SDK (libbpf would probe 0x%llx)", (unsigned long long)site->note_base,
		       (unsigned long long)s->base, (unsigned long long)site->pc);
		goto other;
	}
	seg = find_seg(s, site->pc);
	if (!seg) {
		refuse(s, site, "site", site->pc, "is in no loaded segment");
		goto other;
	}
	if (!(seg->flags & PF_X)) {
		refuse(s, site, "site", site->pc, "is in a segment that is not executable");
		goto other;
	}
	if (site->pc >= seg->file_end) {
		refuse(s, site, "site", site->pc, "is past the bytes its segment has in the file");
		goto other;
	}
	/* The site and what COROBPF_NOP5 puts around it, as far as the segment's file bytes go. */
	lo = site->pc - seg->vaddr >= SITE_BEFORE ? site->pc - SITE_BEFORE : seg->vaddr;
	hi = seg->file_end - site->pc > SITE_AFTER ? site->pc + SITE_AFTER : seg->file_end;
	n = (size_t)(hi - lo);
	at = (size_t)(site->pc - lo);
	avail = n - at;
	if (pread(s->fd, win, n, (off_t)(seg->offset + (lo - seg->vaddr))) != (ssize_t)n) {
		refuse(s, site, "site", site->pc, "cannot be read: the file ends before it");
		goto other;
	}
	if (win[at] == SDK_NOP1) {
		s->out->sites_nop1++;
	} else if (avail >= sizeof(sdk_nop5) && !memcmp(win + at, sdk_nop5, sizeof(sdk_nop5))) {
		if (at < SITE_BEFORE || avail < SITE_AFTER ||
		    memcmp(win + at - SITE_BEFORE, sdk_nop5_before, SITE_BEFORE) ||
		    memcmp(win + at + sizeof(sdk_nop5), sdk_nop5_after, sizeof(sdk_nop5_after))) {
			refuse(s, site, "site", site->pc, "is a five-byte nop without the "
			       "stack-pointer steps COROBPF_NOP5 puts around it: a kernel that "
			       "optimizes the uprobe into a call would overwrite the red zone "
			       "there");
			goto other;
		}
		s->out->sites_nop5++;
		/*
		 * Probed at the stack step before it, not at the nop itself: a kernel that
		 * optimizes a uprobe on the nop into a call to its trampoline (6.18.44 here)
		 * does not give a child forked afterwards that trampoline, and the child dies
		 * of SIGSEGV at its first pass through the site (docs/probes.md). The step is
		 * an ordinary instruction, single-stepped as a five-byte nop is on a kernel
		 * that does not optimize; the arguments are registers or immediates, the same
		 * there.
		 */
		site->off = seg->offset + (site->pc - SITE_BEFORE - seg->vaddr);
		goto semaphore;
	} else {
		for (size_t i = 0; i < 5 && i < avail; i++)
			snprintf(bytes + 3 * i, sizeof(bytes) - 3 * i, "%02x ", win[at + i]);
		bytes[3 * MIN(avail, 5) - 1] = '\0';
		refuse(s, site, "site", site->pc, "is not a nop (bytes %s): not an instruction our "
		       "SDK emits", bytes);
		goto other;
	}
	site->off = seg->offset + (site->pc - seg->vaddr);
semaphore:
	if (site->sem)
		check_semaphore(s, site);
	return;
other:
	s->out->sites_other++;
}

/*
 * Walk the notes of one .note.stapsdt section. `sec_off` is the section's
 * file offset, so that a message points at the bytes a user can inspect
 * with a hex dump.
 */
static int scan_stapsdt(struct scan *s, const unsigned char *buf, size_t size, size_t align,
			uint64_t sec_off, char *err, size_t errlen)
{
	const char *path = s->path;
	size_t off = 0;

	while (off < size) {
		uint32_t namesz, descsz, type;
		size_t name_off, desc_off, next, left;
		const char *desc, *prov, *name, *args, *end;
		uint64_t sem;

		/* Trailing alignment padding after the last note is not a note. */
		if (size - off < 12) {
			for (left = off; left < size && !buf[left]; left++)
				;
			if (left == size)
				break;
			errfmt(err, errlen, "%s: truncated note header at file offset 0x%llx", path,
			       (unsigned long long)(sec_off + off));
			return -EINVAL;
		}
		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		name_off = off + 12;
		if (namesz > size - name_off) {
			errfmt(err, errlen,
			       "%s: note at file offset 0x%llx: owner name of %u bytes runs past the end of %s",
			       path, (unsigned long long)(sec_off + off), namesz, STAPSDT_SECTION);
			return -EINVAL;
		}
		desc_off = name_off + align_up(namesz, align);
		if (desc_off > size || descsz > size - desc_off) {
			errfmt(err, errlen,
			       "%s: note at file offset 0x%llx: descriptor of %u bytes runs past the end of %s",
			       path, (unsigned long long)(sec_off + off), descsz, STAPSDT_SECTION);
			return -EINVAL;
		}
		next = desc_off + align_up(descsz, align);
		if (next > size)
			next = size;	/* the last note's padding may be cut by the section size */

		if (type != STAPSDT_NOTE_TYPE || namesz != sizeof(STAPSDT_NOTE_OWNER) ||
		    memcmp(buf + name_off, STAPSDT_NOTE_OWNER, sizeof(STAPSDT_NOTE_OWNER)) != 0) {
			off = next;
			continue;
		}
		if (descsz < STAPSDT_ADDRS_SIZE + 3) {
			errfmt(err, errlen,
			       "%s: stapsdt note at file offset 0x%llx: descriptor of %u bytes, need at least %d",
			       path, (unsigned long long)(sec_off + off), descsz,
			       STAPSDT_ADDRS_SIZE + 3);
			return -EINVAL;
		}
		desc = (const char *)buf + desc_off;
		end = desc + descsz;
		memcpy(&sem, desc + 16, 8);
		prov = desc + STAPSDT_ADDRS_SIZE;
		name = memchr(prov, 0, end - prov);
		args = name ? memchr(name + 1, 0, end - (name + 1)) : NULL;
		if (!name || name + 1 >= end || !args || args + 1 >= end ||
		    !memchr(args + 1, 0, end - (args + 1))) {
			errfmt(err, errlen,
			       "%s: stapsdt note at file offset 0x%llx: provider, name and arguments are not three NUL-terminated strings",
			       path, (unsigned long long)(sec_off + off));
			return -EINVAL;
		}
		name++;
		if (strcmp(prov, s->provider) == 0) {
			struct site site = { .name = name, .sem = sem };

			memcpy(&site.loc, desc, 8);
			memcpy(&site.note_base, desc + 8, 8);
			unsigned int refused = s->out->sites_refused;
			const char *spec = args[1] && args[1] != ':' ? args + 1 : "";

			site.nth = count_probe(s->out, name, args - name, sem != 0);
			unsigned int nop5 = s->out->sites_nop5;

			check_site(s, &site);
			count_spec(s, name, spec);
			if (s->out->sites_refused == refused) {
				if (s->nrecs == s->cap_recs) {
					s->cap_recs = s->cap_recs ? 2 * s->cap_recs : 64;
					s->recs = xrealloc(s->recs, s->cap_recs * sizeof(*s->recs));
				}
				/*
				 * The address probed must start an instruction: a five-byte
				 * site's stack step (check_site), which then covers the nop.
				 */
				bool is5 = s->out->sites_nop5 != nop5;

				s->recs[s->nrecs++] = (struct site_rec){
				    .pc = is5 ? site.pc - SITE_BEFORE : site.pc, .name = name,
				    .nth = site.nth, .nop5 = is5};
			}
			if (s->site_fn && s->out->sites_refused == refused) {
				struct elf_probe_site es = {
					.name = name, .args = spec, .pc = site.pc, .off = site.off,
					.sema = site.sem, .sema_off = site.sem_off,
				};

				/* The SDK's sequence: the nop, or the step, nop and step back. */
				if (site.off)
					es.off_after = site.off +
						(s->out->sites_nop5 != nop5 ? SITE_BEFORE + SITE_AFTER : 1);

				s->site_fn(s->site_ctx, &es);
			}
		}
		off = next;
	}
	return 0;
}

/* A site the boundary check refused: counted as the other refusals are, and its kind as other. */
static void bound_refused(void *ctx, size_t idx, const char *why)
{
	struct scan *s = ctx;
	const struct site_rec *r = &s->recs[idx];
	struct site site = {.name = r->name, .nth = r->nth};

	refuse(s, &site, "site", r->pc, "%s", why);
	if (r->nop5)
		s->out->sites_nop5--;
	else
		s->out->sites_nop1--;
	s->out->sites_other++;
}

/*
 * Every site accepted must start an instruction of its function
 * (sitebounds.h). Only when none was refused: one refusal leaves the
 * object alone already, and this is the costly check.
 */
static void check_boundaries(struct scan *s)
{
	uint64_t *pcs;

	if (!s->nrecs || s->out->sites_refused)
		return;
	pcs = xmalloc(s->nrecs * sizeof(*pcs));
	for (size_t i = 0; i < s->nrecs; i++)
		pcs[i] = s->recs[i].pc;
	site_bounds_check(s->elf, s->fd, pcs, s->nrecs, bound_refused, s);
	free(pcs);
}

int elf_probe_scan(const char *path, const char *provider, struct elf_probes *out, char *err,
		   size_t errlen)
{
	return elf_probe_walk(path, provider, NULL, NULL, out, err, errlen);
}

int elf_probe_walk(const char *path, const char *provider, elf_site_fn fn, void *ctx,
		   struct elf_probes *out, char *err, size_t errlen)
{
	struct scan s = { .path = path, .out = out, .site_fn = fn, .site_ctx = ctx };
	Elf_Scn *scn = NULL;
	GElf_Ehdr ehdr;
	int ret;

	memset(out, 0, sizeof(*out));
	s.provider = provider ? provider : "corobpf";
	ret = elf_open_host(path, &s.fd, &s.elf, &ehdr, err, errlen);
	if (ret)
		return ret;
	out->elf_type = ehdr.e_type;

	if (elf_getshdrstrndx(s.elf, &s.shstrndx) != 0) {
		errfmt(err, errlen, "%s: cannot find the section name table: %s", path,
		       elf_errmsg(-1));
		ret = -EINVAL;
		goto out;
	}
	while ((scn = elf_nextscn(s.elf, scn))) {
		Elf_Data *data = NULL;
		const char *sname;
		GElf_Shdr shdr;

		if (!gelf_getshdr(scn, &shdr)) {
			errfmt(err, errlen, "%s: section %zu: unreadable header: %s", path,
			       elf_ndxscn(scn), elf_errmsg(-1));
			ret = -EINVAL;
			goto out;
		}
		if (shdr.sh_type != SHT_NOTE)
			continue;
		sname = elf_strptr(s.elf, s.shstrndx, shdr.sh_name);
		if (!sname) {
			errfmt(err, errlen, "%s: note section %zu: name offset %u is out of range",
			       path, elf_ndxscn(scn), shdr.sh_name);
			ret = -EINVAL;
			goto out;
		}
		if (strcmp(sname, STAPSDT_SECTION) != 0)
			continue;
		/*
		 * Read whole: never on a size only declared. A compiler writes a
		 * hundred bytes or so per site; past ELF_READ_MAX the object is
		 * refused rather than read (a sparse file can declare gigabytes).
		 */
		if (shdr.sh_size > ELF_READ_MAX) {
			errfmt(err, errlen,
			       "%s: %s at file offset 0x%llx declares %llu bytes of notes, more than "
			       "the %llu MiB corobpf reads of one section (a compiler writes about "
			       "100 bytes per probe site)",
			       path, STAPSDT_SECTION, (unsigned long long)shdr.sh_offset,
			       (unsigned long long)shdr.sh_size,
			       (unsigned long long)(ELF_READ_MAX >> 20));
			ret = -EINVAL;
			goto out;
		}
		/*
		 * elf_getdata() returns NULL both at the end and on error; only a
		 * fresh error number tells them apart, and other libelf users
		 * (libbpf) leave theirs behind.
		 */
		(void)elf_errno();
		/* One Elf_Data per section for a file read from disk, but do not assume it. */
		while ((data = elf_getdata(scn, data))) {
			if (data->d_size && !data->d_buf)
				break;
			ret = scan_stapsdt(&s, data->d_buf, data->d_size,
					   shdr.sh_addralign == 8 ? 8 : 4,
					   shdr.sh_offset + data->d_off, err, errlen);
			if (ret)
				goto out;
		}
		if (elf_errno()) {
			errfmt(err, errlen,
			       "%s: %s section at file offset 0x%llx (%llu bytes) is unreadable: %s",
			       path, STAPSDT_SECTION, (unsigned long long)shdr.sh_offset,
			       (unsigned long long)shdr.sh_size, elf_errmsg(-1));
			ret = -EINVAL;
			goto out;
		}
	}
	check_boundaries(&s);
	ret = 0;
out:
	free(s.recs);
	free(s.segs);
	free(s.specs);
	elf_end(s.elf);
	close(s.fd);
	return ret;
}

const struct elf_probe_name *elf_probes_find(const struct elf_probes *probes, const char *name)
{
	unsigned int i;

	for (i = 0; i < probes->n_names; i++)
		if (strcmp(probes->names[i].name, name) == 0)
			return &probes->names[i];
	return NULL;
}

bool elf_is_elf(const char *path)
{
	unsigned char magic[SELFMAG];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	n = pread(fd, magic, sizeof(magic), 0);
	close(fd);
	return n == SELFMAG && memcmp(magic, ELFMAG, SELFMAG) == 0;
}

/* GNU ABI versions glibc 2.36 defines (up to unique symbols and ifuncs, etc.). */
#define GLIBC_GNU_ABI_VERSIONS 4

int elf_check_loadable(int fd, char *err, size_t errlen)
{
	Elf64_Ehdr eh;
	ssize_t n;
	int i;

	/* The order of these checks is ld.so's: it decides which problems are fatal. */
	n = pread(fd, &eh, sizeof(eh), 0);
	if (n < 0) {
		int ret = -errno;

		errfmt(err, errlen, "cannot read file data: %s", strerror(errno));
		return ret;
	}
	if ((size_t)n < sizeof(eh)) {
		errfmt(err, errlen, "file too short");
		return -ENOEXEC;
	}
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
		errfmt(err, errlen, "invalid ELF header");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return ELF_LOAD_SKIP;
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		errfmt(err, errlen, "ELF file data encoding not little-endian");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_VERSION] != EV_CURRENT) {
		errfmt(err, errlen, "ELF file version ident does not match current one");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_OSABI] != ELFOSABI_SYSV && eh.e_ident[EI_OSABI] != ELFOSABI_GNU) {
		errfmt(err, errlen, "ELF file OS ABI invalid");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_ABIVERSION] != 0 &&
	    !(eh.e_ident[EI_OSABI] == ELFOSABI_GNU &&
	      eh.e_ident[EI_ABIVERSION] < GLIBC_GNU_ABI_VERSIONS)) {
		errfmt(err, errlen, "ELF file ABI version invalid");
		return -ENOEXEC;
	}
	for (i = EI_PAD; i < EI_NIDENT; i++) {
		if (eh.e_ident[i]) {
			errfmt(err, errlen, "nonzero padding in e_ident");
			return -ENOEXEC;
		}
	}
	if (eh.e_version != EV_CURRENT) {
		errfmt(err, errlen, "ELF file version does not match current one");
		return -ENOEXEC;
	}
	if (eh.e_machine != EM_X86_64)
		return ELF_LOAD_SKIP;
	if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) {
		errfmt(err, errlen, "only ET_DYN and ET_EXEC can be loaded");
		return -ENOEXEC;
	}
	if (eh.e_phentsize != sizeof(Elf64_Phdr)) {
		errfmt(err, errlen, "ELF file's phentsize not the expected size");
		return -ENOEXEC;
	}
	return 0;
}

int elf_image_open(struct elf_image *img, const char *path, char *err, size_t errlen)
{
	size_t n;
	int ret;

	memset(img, 0, sizeof(*img));
	img->path = path;
	img->fd = -1;
	ret = elf_open_host(path, &img->fd, &img->elf, &img->eh, err, errlen);
	if (ret)
		return ret;
	if (elf_getphdrnum(img->elf, &n))
		n = 0;
	for (size_t i = 0; i < n && img->nloads < ELF_IMAGE_LOADS_MAX; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(img->elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			img->loads[img->nloads++] = ph;
	}
	return 0;
}

void elf_image_close(struct elf_image *img)
{
	if (img->elf)
		elf_end(img->elf);
	if (img->fd >= 0)
		close(img->fd);
	img->elf = NULL;
	img->fd = -1;
}

bool elf_image_text_offset(const struct elf_image *img, uint64_t vaddr, uint64_t *off,
			   uint64_t *avail)
{
	for (size_t i = 0; i < img->nloads; i++) {
		const GElf_Phdr *ph = &img->loads[i];

		if ((ph->p_flags & PF_X) && vaddr >= ph->p_vaddr &&
		    vaddr < ph->p_vaddr + ph->p_filesz) {
			*off = vaddr - ph->p_vaddr + ph->p_offset;
			if (avail)
				*avail = ph->p_vaddr + ph->p_filesz - vaddr;
			return true;
		}
	}
	return false;
}
