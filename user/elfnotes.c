// SPDX-License-Identifier: MIT
/*
 * elfnotes.c: ELF identity checks, USDT note counting and dynamic-linking
 * facts, on top of libelf.
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
			       size_t errlen)
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
	return 0;
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
	ret = check_header_tables(path, fd, ehdr, err, errlen);
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

static void count_probe(struct elf_probes *out, const char *name, size_t name_len, bool sem)
{
	struct elf_probe_name *p;
	unsigned int i;

	out->total++;
	for (i = 0; i < out->n_names; i++) {
		p = &out->names[i];
		if (strcmp(p->name, name) == 0) {
			p->count++;
			p->has_semaphore |= sem;
			return;
		}
	}
	if (name_len >= ELF_PROBE_NAME_LEN || out->n_names == ELF_PROBE_NAMES_MAX) {
		out->names_dropped++;
		return;
	}
	p = &out->names[out->n_names++];
	memcpy(p->name, name, name_len + 1);
	p->count = 1;
	p->has_semaphore = sem;
}

/*
 * Walk the notes of one .note.stapsdt section. `sec_off` is the section's
 * file offset, so that a message points at the bytes a user can inspect
 * with a hex dump.
 */
/* The instruction at a site: looked up through the program headers, read from the file. */
struct site_reader {
	int fd;
	GElf_Phdr *ph;
	size_t nph;
	/* Distinct (probe name, argument string) pairs seen: an open-addressing set. */
	struct spec_slot {
		uint64_t hash;
		const char *args;	/* into the section's data, alive for the scan */
		unsigned int name;	/* index in out->names, plus one (0: empty slot) */
	} *specs;
	size_t specs_cap, specs_used;
	/* elf_probe_walk: the caller's per-site callback, and .stapsdt.base's address. */
	elf_site_fn site_fn;
	void *site_ctx;
	uint64_t base_addr;
};

/* The file offset of [addr, addr + len) in a loaded segment with `flag`, or 0. */
static uint64_t seg_offset(const struct site_reader *sr, uint64_t addr, uint64_t len,
			   uint32_t flag)
{
	for (size_t i = 0; i < sr->nph; i++) {
		const GElf_Phdr *p = &sr->ph[i];

		if (p->p_type == PT_LOAD && (p->p_flags & flag) && addr >= p->p_vaddr &&
		    addr - p->p_vaddr < p->p_filesz && len <= p->p_filesz - (addr - p->p_vaddr))
			return p->p_offset + (addr - p->p_vaddr);
	}
	return 0;
}

/* Hand one site to elf_probe_walk's caller, placed the way libbpf places USDT sites. */
static void report_site(const struct site_reader *sr, const char *name, const char *args,
			const char *desc)
{
	struct elf_probe_site site = { .name = name, .args = args };
	uint64_t note_base;

	memcpy(&site.pc, desc, 8);
	memcpy(&note_base, desc + 8, 8);
	memcpy(&site.sema, desc + 16, 8);
	/* A prelinked object moved its code; the note recorded where .stapsdt.base was. */
	if (sr->base_addr && note_base)
		site.pc = site.pc + sr->base_addr - note_base;
	if (!*site.args || *site.args == ':')
		site.args = "";
	site.off = seg_offset(sr, site.pc, 1, PF_X);
	if (site.sema)
		site.sema_off = seg_offset(sr, site.sema, 2, PF_W);
	sr->site_fn(sr->site_ctx, &site);
}

static uint64_t spec_hash(unsigned int name, const char *args)
{
	uint64_t h = 1469598103934665603ULL ^ name;

	for (; *args; args++)
		h = (h ^ (unsigned char)*args) * 1099511628211ULL;
	return h;
}

/* Count the site's argument string once per probe name (libbpf's unit of spec slots). */
static void count_spec(struct site_reader *sr, struct elf_probes *out, const char *name,
		       const char *args)
{
	const struct elf_probe_name *pn = elf_probes_find(out, name);
	unsigned int idx;
	uint64_t h;
	size_t i;

	if (!pn)
		return;	/* dropped: never attached */
	if (!*args || *args == ':')
		args = "";
	idx = (unsigned int)(pn - out->names) + 1;
	if (sr->specs_used * 2 >= sr->specs_cap) {
		size_t cap = sr->specs_cap ? sr->specs_cap * 2 : 64;
		struct spec_slot *n = xcalloc(cap, sizeof(*n));

		for (i = 0; i < sr->specs_cap; i++) {
			size_t j = sr->specs[i].hash & (cap - 1);

			if (!sr->specs[i].name)
				continue;
			while (n[j].name)
				j = (j + 1) & (cap - 1);
			n[j] = sr->specs[i];
		}
		free(sr->specs);
		sr->specs = n;
		sr->specs_cap = cap;
	}
	h = spec_hash(idx, args);
	for (i = h & (sr->specs_cap - 1); sr->specs[i].name; i = (i + 1) & (sr->specs_cap - 1))
		if (sr->specs[i].hash == h && sr->specs[i].name == idx &&
		    strcmp(sr->specs[i].args, args) == 0)
			return;
	sr->specs[i] = (struct spec_slot){ .hash = h, .args = args, .name = idx };
	sr->specs_used++;
	out->names[idx - 1].specs++;
}

static void classify_site(const struct site_reader *sr, uint64_t pc, struct elf_probes *out)
{
	static const unsigned char nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
	unsigned char b[5];

	for (size_t i = 0; i < sr->nph; i++) {
		const GElf_Phdr *p = &sr->ph[i];

		if (p->p_type != PT_LOAD || pc < p->p_vaddr || pc + 5 > p->p_vaddr + p->p_filesz)
			continue;
		if (pread(sr->fd, b, 5, (off_t)(p->p_offset + pc - p->p_vaddr)) != 5)
			break;
		if (b[0] == 0x90)
			out->sites_nop1++;
		else if (!memcmp(b, nop5, 5))
			out->sites_nop5++;
		else
			out->sites_other++;
		return;
	}
	out->sites_other++;
}

static int scan_stapsdt(const char *path, const unsigned char *buf, size_t size, size_t align,
			uint64_t sec_off, const char *provider, struct site_reader *sr,
			struct elf_probes *out, char *err, size_t errlen)
{
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
		if (strcmp(prov, provider) == 0) {
			uint64_t pc;

			memcpy(&pc, desc, 8);
			count_probe(out, name, strlen(name), sem != 0);
			count_spec(sr, out, name, args + 1);
			if (sr->site_fn)
				report_site(sr, name, args + 1, desc);
			classify_site(sr, pc, out);
		}
		off = next;
	}
	return 0;
}

int elf_probe_scan(const char *path, const char *provider, struct elf_probes *out, char *err,
		   size_t errlen)
{
	return elf_probe_walk(path, provider, NULL, NULL, out, err, errlen);
}

int elf_probe_walk(const char *path, const char *provider, elf_site_fn fn, void *ctx,
		   struct elf_probes *out, char *err, size_t errlen)
{
	struct site_reader sr = { .site_fn = fn, .site_ctx = ctx };
	size_t shstrndx, nph = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr ehdr;
	Elf *elf;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	if (!provider)
		provider = "corobpf";
	ret = elf_open_host(path, &fd, &elf, &ehdr, err, errlen);
	if (ret)
		return ret;
	out->elf_type = ehdr.e_type;
	sr.fd = fd;
	if (elf_getphdrnum(elf, &nph) == 0 && nph && nph < 4096) {
		sr.ph = xcalloc(nph, sizeof(*sr.ph));
		for (size_t i = 0; i < nph; i++)
			if (gelf_getphdr(elf, (int)i, &sr.ph[sr.nph]))
				sr.nph++;
	}

	if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
		errfmt(err, errlen, "%s: cannot find the section name table: %s", path,
		       elf_errmsg(-1));
		ret = -EINVAL;
		goto out;
	}
	while (fn && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		const char *sname;

		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_PROGBITS &&
		    (sname = elf_strptr(elf, shstrndx, shdr.sh_name)) &&
		    !strcmp(sname, ".stapsdt.base"))
			sr.base_addr = shdr.sh_addr;
	}
	scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
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
		sname = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (!sname) {
			errfmt(err, errlen, "%s: note section %zu: name offset %u is out of range",
			       path, elf_ndxscn(scn), shdr.sh_name);
			ret = -EINVAL;
			goto out;
		}
		if (strcmp(sname, STAPSDT_SECTION) != 0)
			continue;
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
			ret = scan_stapsdt(path, data->d_buf, data->d_size,
					   shdr.sh_addralign == 8 ? 8 : 4,
					   shdr.sh_offset + data->d_off, provider, &sr, out, err,
					   errlen);
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
	ret = 0;
out:
	free(sr.ph);
	free(sr.specs);
	elf_end(elf);
	close(fd);
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

void elf_dyninfo_free(struct elf_dyninfo *info)
{
	size_t i;

	if (!info)
		return;
	free(info->interp);
	for (i = 0; i < info->n_needed; i++)
		free(info->needed[i]);
	free(info->needed);
	free(info->rpath);
	free(info->runpath);
	free(info->soname);
	memset(info, 0, sizeof(*info));
}

/*
 * DT_STRTAB is a virtual address: find the PT_LOAD that maps it to learn
 * where it is in the file, as the loader would see it after mapping.
 */
static int vaddr_to_offset(const GElf_Phdr *loads, size_t n_loads, uint64_t vaddr,
			   uint64_t *off, uint64_t *avail)
{
	size_t i;

	for (i = 0; i < n_loads; i++) {
		const GElf_Phdr *ph = &loads[i];

		if (vaddr >= ph->p_vaddr && vaddr - ph->p_vaddr < ph->p_filesz) {
			*off = ph->p_offset + (vaddr - ph->p_vaddr);
			*avail = ph->p_filesz - (vaddr - ph->p_vaddr);
			return 0;
		}
	}
	return -1;
}

/* A copy of the string at `off` in the dynamic string table, bounds-checked. */
static int dyn_string(const char *path, const char *strtab, size_t strsz, uint64_t off,
		      const char *what, char **out, char *err, size_t errlen)
{
	const char *s, *nul;

	if (off >= strsz) {
		errfmt(err, errlen,
		       "%s: %s string offset %llu is outside the %zu-byte string table", path,
		       what, (unsigned long long)off, strsz);
		return -EINVAL;
	}
	s = strtab + off;
	nul = memchr(s, 0, strsz - off);
	if (!nul) {
		errfmt(err, errlen, "%s: %s string at offset %llu is not NUL-terminated", path,
		       what, (unsigned long long)off);
		return -EINVAL;
	}
	*out = strndup(s, nul - s);
	if (!*out) {
		errfmt(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	return 0;
}

int elf_dynamic_info(const char *path, struct elf_dyninfo *out, char *err, size_t errlen)
{
	uint64_t strtab_vaddr = 0, strsz = 0, str_off, str_avail;
	uint64_t rpath_off = 0, runpath_off = 0, soname_off = 0;
	bool has_strtab = false, has_rpath = false, has_runpath = false, has_soname = false;
	GElf_Phdr *loads = NULL, dyn_ph = { 0 };
	size_t phnum, n_loads = 0, i, n_dyn, n_needed = 0;
	const Elf64_Dyn *dyn;
	bool has_dynamic = false;
	Elf_Data *data;
	const char *strtab;
	GElf_Ehdr ehdr;
	Elf *elf;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	ret = elf_open_host(path, &fd, &elf, &ehdr, err, errlen);
	if (ret)
		return ret;
	out->elf_type = ehdr.e_type;

	if (elf_getphdrnum(elf, &phnum) != 0) {
		errfmt(err, errlen, "%s: cannot read program headers: %s", path, elf_errmsg(-1));
		ret = -EINVAL;
		goto fail;
	}
	loads = calloc(phnum ? phnum : 1, sizeof(*loads));
	if (!loads) {
		errfmt(err, errlen, "%s: out of memory", path);
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph)) {
			errfmt(err, errlen, "%s: program header %zu is unreadable: %s", path, i,
			       elf_errmsg(-1));
			ret = -EINVAL;
			goto fail;
		}
		if (ph.p_type == PT_LOAD) {
			loads[n_loads++] = ph;
		} else if (ph.p_type == PT_DYNAMIC && !has_dynamic) {
			dyn_ph = ph;
			has_dynamic = true;
		} else if (ph.p_type == PT_INTERP && !out->interp) {
			const char *s, *nul;

			data = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz, ELF_T_BYTE);
			s = data ? data->d_buf : NULL;
			nul = s ? memchr(s, 0, data->d_size) : NULL;
			if (!nul || nul == s) {
				errfmt(err, errlen,
				       "%s: PT_INTERP at file offset 0x%llx (%llu bytes) is not a path",
				       path, (unsigned long long)ph.p_offset,
				       (unsigned long long)ph.p_filesz);
				ret = -EINVAL;
				goto fail;
			}
			out->interp = strdup(s);
			if (!out->interp) {
				errfmt(err, errlen, "%s: out of memory", path);
				ret = -ENOMEM;
				goto fail;
			}
		}
	}
	if (!has_dynamic) {
		out->is_static = true;
		ret = 0;
		goto done;
	}

	data = elf_getdata_rawchunk(elf, dyn_ph.p_offset, dyn_ph.p_filesz, ELF_T_DYN);
	if (!data) {
		errfmt(err, errlen,
		       "%s: PT_DYNAMIC at file offset 0x%llx (%llu bytes) is unreadable: %s", path, (unsigned long long)dyn_ph.p_offset,
		       (unsigned long long)dyn_ph.p_filesz, elf_errmsg(-1));
		ret = -EINVAL;
		goto fail;
	}
	dyn = data->d_buf;
	n_dyn = data->d_size / sizeof(*dyn);
	/* First pass: where the strings are and how many DT_NEEDED there are. */
	for (i = 0; i < n_dyn && dyn[i].d_tag != DT_NULL; i++) {
		switch (dyn[i].d_tag) {
		case DT_STRTAB:
			strtab_vaddr = dyn[i].d_un.d_ptr;
			has_strtab = true;
			break;
		case DT_STRSZ:
			strsz = dyn[i].d_un.d_val;
			break;
		case DT_NEEDED:
			n_needed++;
			break;
		case DT_RPATH:
			if (!has_rpath)
				rpath_off = dyn[i].d_un.d_val;
			has_rpath = true;
			break;
		case DT_RUNPATH:
			if (!has_runpath)
				runpath_off = dyn[i].d_un.d_val;
			has_runpath = true;
			break;
		case DT_SONAME:
			if (!has_soname)
				soname_off = dyn[i].d_un.d_val;
			has_soname = true;
			break;
		case DT_FLAGS_1:
			out->flags_1 = dyn[i].d_un.d_val;
			break;
		}
	}
	n_dyn = i;
	if (!n_needed && !has_rpath && !has_runpath && !has_soname) {
		ret = 0;
		goto done;
	}
	if (!has_strtab || !strsz) {
		errfmt(err, errlen, "%s: dynamic section has names but no DT_STRTAB/DT_STRSZ",
		       path);
		ret = -EINVAL;
		goto fail;
	}
	if (vaddr_to_offset(loads, n_loads, strtab_vaddr, &str_off, &str_avail)) {
		errfmt(err, errlen, "%s: DT_STRTAB address 0x%llx is not in any loaded segment",
		       path, (unsigned long long)strtab_vaddr);
		ret = -EINVAL;
		goto fail;
	}
	if (strsz > str_avail)
		strsz = str_avail;
	data = elf_getdata_rawchunk(elf, str_off, strsz, ELF_T_BYTE);
	if (!data) {
		errfmt(err, errlen,
		       "%s: dynamic string table at file offset 0x%llx is unreadable: %s", path, (unsigned long long)str_off, elf_errmsg(-1));
		ret = -EINVAL;
		goto fail;
	}
	strtab = data->d_buf;
	strsz = data->d_size;

	if (n_needed) {
		out->needed = calloc(n_needed, sizeof(*out->needed));
		if (!out->needed) {
			errfmt(err, errlen, "%s: out of memory", path);
			ret = -ENOMEM;
			goto fail;
		}
	}
	for (i = 0; i < n_dyn; i++) {
		if (dyn[i].d_tag != DT_NEEDED)
			continue;
		ret = dyn_string(path, strtab, strsz, dyn[i].d_un.d_val, "DT_NEEDED",
				 &out->needed[out->n_needed], err, errlen);
		if (ret)
			goto fail;
		out->n_needed++;
	}
	if (has_rpath) {
		ret = dyn_string(path, strtab, strsz, rpath_off, "DT_RPATH", &out->rpath, err,
				 errlen);
		if (ret)
			goto fail;
	}
	if (has_runpath) {
		ret = dyn_string(path, strtab, strsz, runpath_off, "DT_RUNPATH", &out->runpath, err,
				 errlen);
		if (ret)
			goto fail;
	}
	if (has_soname) {
		ret = dyn_string(path, strtab, strsz, soname_off, "DT_SONAME", &out->soname, err,
				 errlen);
		if (ret)
			goto fail;
	}
	ret = 0;
done:
	free(loads);
	elf_end(elf);
	close(fd);
	return ret;
fail:
	elf_dyninfo_free(out);
	goto done;
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
