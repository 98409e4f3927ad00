// SPDX-License-Identifier: MIT
/*
 * dynlink.c: the dynamic-linking facts of an object, read through its
 * program headers as ld.so reads them. See dynlink.h.
 *
 * Everything read from a file is treated as hostile: lengths and offsets are
 * checked against what libelf actually returned before any byte is touched,
 * because corobpf runs as root and scans whatever binaries it is pointed at.
 */
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dynlink.h"
#include "elfnotes.h"
#include "util.h"

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

			/* A path: PATH_MAX at most, whatever the header says. */
			data = ph.p_filesz <= PATH_MAX ? elf_getdata_rawchunk(elf, ph.p_offset,
									      ph.p_filesz, ELF_T_BYTE)
						       : NULL;
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

	if (dyn_ph.p_filesz > ELF_READ_MAX) {
		errfmt(err, errlen, "%s: PT_DYNAMIC declares %llu bytes, more than the %llu MiB "
		       "corobpf reads of one table", path, (unsigned long long)dyn_ph.p_filesz,
		       (unsigned long long)(ELF_READ_MAX >> 20));
		ret = -EINVAL;
		goto fail;
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
	if (strsz > ELF_READ_MAX) {
		errfmt(err, errlen, "%s: DT_STRSZ declares %llu bytes of names, more than the %llu "
		       "MiB corobpf reads of one table", path, (unsigned long long)strsz,
		       (unsigned long long)(ELF_READ_MAX >> 20));
		ret = -EINVAL;
		goto fail;
	}
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
