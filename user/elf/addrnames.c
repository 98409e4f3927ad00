// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Names of code addresses in a traced process (see addrnames.h): the function
 * symbol holding an address, in whichever object of the process maps it, kept
 * per (pid, address) for the run; a Go wrapper's way to the function it calls.
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
#include "addrnames.h"
#include "switchfam.h"
#include "util.h"

/*
 * The function symbol whose extent holds vaddr (exact starts first); false
 * if none. w (if not NULL): a Go wrapper's way to the function it calls.
 */
static bool obj_symbol_at(const struct elf_image *o, uint64_t vaddr, char *name, size_t len,
			  struct goelf_wrapper *w)
{
	const Elf64_Word types[2] = { SHT_SYMTAB, SHT_DYNSYM };
	struct goelf_wrapper none;
	uint64_t best = 0;
	bool found = false;

	/* Go: by Go's table, a `go f(x)` wrapper named after f (goelf.h). */
	if (goelf_goroutine_start(o->elf, vaddr, name, len, w ? w : &none))
		return true;
	for (int pass = 0; pass < 2 && !found; pass++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(o->elf, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != types[pass] || !sh.sh_entsize)
				continue;
			d = elf_section_data(o->elf, scn, &sh);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym sym;
				const char *s;

				if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
				    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value > vaddr ||
				    (vaddr >= sym.st_value + sym.st_size && vaddr != sym.st_value) ||
				    (found && sym.st_value <= best))
					continue;
				s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
				if (!s || !*s)
					continue;
				if (sym.st_value == vaddr)
					snprintf(name, len, "%s", s);
				else
					snprintf(name, len, "%s+0x%llx", s,
						 (unsigned long long)(vaddr - sym.st_value));
				best = sym.st_value;
				found = true;
			}
		}
	}
	return found;
}

/* Names by (pid, address), kept for the run: a runtime makes many contexts per function. */
static struct hmap names_at;
static bool names_at_init;
/* By pid: address less vaddr in the last position-independent object a name was found in. */
static struct hmap bias_at;
/* Go: (pid, address) -> its struct goelf_wrapper (process addresses), if it needs one. */
static struct hmap wrappers_at;

bool addrname_bias_of(uint32_t pid, uint64_t *bias)
{
	void *v = names_at_init ? hmap_get(&bias_at, pid, 0) : NULL;

	/* Kept plus one: a bias (page-aligned) is never all ones, and a value is never NULL. */
	if (!v)
		return false;
	*bias = (uint64_t)(uintptr_t)v - 1;
	return true;
}

static void name_at(uint32_t pid, uint64_t addr, char *name, size_t len, struct goelf_wrapper *w)
{
	char maps[64], line[4096 + 128], obj_path[96] = "", shown[4096] = "?";
	struct goelf_wrapper found = {0};
	uint64_t off = 0;
	const char *cached;
	FILE *f;
	struct elf_image o;

	if (!names_at_init) {
		hmap_init(&names_at);
		hmap_init(&bias_at);
		hmap_init(&wrappers_at);
		names_at_init = true;
	}
	cached = hmap_get(&names_at, pid, addr);
	if (cached) {
		const struct goelf_wrapper *cw = hmap_get(&wrappers_at, pid, addr);

		snprintf(name, len, "%s", cached);
		if (w)
			*w = cw ? *cw : found;
		return;
	}
	snprintf(name, len, "0x%llx", (unsigned long long)addr);
	snprintf(maps, sizeof(maps), "/proc/%u/maps", pid);
	f = fopen(maps, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, pgoff;
		char perms[8], *path;

		if (sscanf(line, "%llx-%llx %7s %llx", &start, &end, perms, &pgoff) != 4 ||
		    perms[2] != 'x' || addr < start || addr >= end)
			continue;
		path = strchr(line, '/');
		if (path) {
			path[strcspn(path, "\n")] = 0;
			snprintf(shown, sizeof(shown), "%s", path);
		}
		/* The exact file mapped there, whatever its path says now. */
		snprintf(obj_path, sizeof(obj_path), "/proc/%u/map_files/%llx-%llx", pid, start,
			 end);
		off = addr - start + pgoff;
		break;
	}
	if (f)
		fclose(f);
	if (obj_path[0] && !elf_image_open(&o, obj_path, NULL, 0)) {
		for (size_t i = 0; i < o.nloads; i++) {
			const GElf_Phdr *ph = &o.loads[i];

			uint64_t vaddr = off - ph->p_offset + ph->p_vaddr;

			if (off < ph->p_offset || off >= ph->p_offset + ph->p_filesz)
				continue;
			if (o.eh.e_type == ET_DYN)
				hmap_put(&bias_at, pid, 0, (void *)(uintptr_t)(addr - vaddr + 1));
			/* A static function of a stripped binary: where it is in the object. */
			if (!obj_symbol_at(&o, vaddr, name, len, &found)) {
				const char *base = strrchr(shown, '/');

				snprintf(name, len, "%s+0x%llx", base ? base + 1 : shown,
					 (unsigned long long)vaddr);
			}
			/* The wrapper's code where the process has it. */
			found.entry += addr - vaddr;
			found.end += addr - vaddr;
			break;
		}
		elf_image_close(&o);
	}
	/* Cached once the process said where it is (a vanished one is asked again). */
	if (obj_path[0]) {
		hmap_put(&names_at, pid, addr, xstrdup(name));
		if (found.n)
			hmap_put(&wrappers_at, pid, addr,
				 memcpy(xmalloc(sizeof(found)), &found, sizeof(found)));
	}
	if (w)
		*w = found;
}

void addrname_at(uint32_t pid, uint64_t addr, char *name, size_t len)
{
	name_at(pid, addr, name, len, NULL);
}

void addrname_goroutine(uint32_t pid, uint64_t addr, char *name, size_t len,
			      struct goelf_wrapper *w)
{
	name_at(pid, addr, name, len, w);
}

void addrname_func_at(uint32_t pid, uint64_t addr, char *name, size_t len)
{
	char *plus;

	name_at(pid, addr, name, len, NULL);
	plus = strstr(name, "+0x");
	if (plus && name[0] != '0')
		*plus = 0;
}

void addrname_learn_bias(uint32_t pid, const char *path)
{
	char maps[64], line[4096 + 128];
	struct elf_image o;
	struct stat st;
	FILE *f;

	if (stat(path, &st) || elf_image_open(&o, path, NULL, 0))
		return;
	if (o.eh.e_type != ET_DYN)
		goto out;
	snprintf(maps, sizeof(maps), "/proc/%u/maps", pid);
	f = fopen(maps, "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, pgoff, ino;
		unsigned int major, minor;
		char perms[8];

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &pgoff,
			   &major, &minor, &ino) != 7 ||
		    perms[2] != 'x' || ino != (unsigned long long)st.st_ino ||
		    makedev(major, minor) != st.st_dev)
			continue;
		for (size_t i = 0; i < o.nloads; i++) {
			const GElf_Phdr *ph = &o.loads[i];

			if (pgoff < ph->p_offset || pgoff >= ph->p_offset + ph->p_filesz)
				continue;
			if (!names_at_init) {
				hmap_init(&names_at);
				hmap_init(&bias_at);
				hmap_init(&wrappers_at);
				names_at_init = true;
			}
			hmap_put(&bias_at, pid, 0,
				 (void *)(uintptr_t)(start - (pgoff - ph->p_offset + ph->p_vaddr) + 1));
			break;
		}
		break;
	}
	if (f)
		fclose(f);
out:
	elf_image_close(&o);
}

bool addrname_in_exe(const char *path, const char *shown, uint64_t start_code,
			   uint64_t addr, char *name, size_t len)
{
	struct elf_image o;
	uint64_t off, code = UINT64_MAX, vaddr;
	bool in;

	if (elf_image_open(&o, path, NULL, 0))
		return false;
	/* The kernel's start_code: the lowest executable segment's vaddr, moved by the bias. */
	for (size_t i = 0; i < o.nloads; i++)
		if ((o.loads[i].p_flags & PF_X) && o.loads[i].p_vaddr < code)
			code = o.loads[i].p_vaddr;
	vaddr = addr - (start_code - code);
	in = code != UINT64_MAX && start_code >= code &&
	     elf_image_text_offset(&o, vaddr, &off, NULL);
	if (in && !obj_symbol_at(&o, vaddr, name, len, NULL)) {
		const char *base = strrchr(shown, '/');

		snprintf(name, len, "%s+0x%llx", base ? base + 1 : shown, (unsigned long long)vaddr);
	}
	elf_image_close(&o);
	return in;
}
