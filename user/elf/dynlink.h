/* SPDX-License-Identifier: MIT */
/*
 * dynlink.h: what ld.so reads of an object to load it (its interpreter,
 * DT_NEEDED, RPATH, RUNPATH, SONAME, DT_FLAGS_1), for user/elf/ldpaths.c's
 * search. Failures return a negative errno value and, when `err` is not
 * NULL, a message of the form "PATH: what is wrong" (as elfnotes.h's).
 */
#ifndef COROBPF_DYNLINK_H
#define COROBPF_DYNLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The dynamic-linking facts of an object, read through its program headers
 * the way ld.so reads them (so stripped section headers do not matter).
 * Strings are raw: $ORIGIN and friends are not expanded here.
 */
struct elf_dyninfo {
	int elf_type;		/* e_type */
	bool is_static;		/* no PT_DYNAMIC: nothing is loaded for it */
	char *interp;		/* PT_INTERP, or NULL */
	char **needed;		/* DT_NEEDED names, in the order of the dynamic array */
	size_t n_needed;
	char *rpath;		/* DT_RPATH, or NULL (kept even when DT_RUNPATH exists) */
	char *runpath;		/* DT_RUNPATH, or NULL */
	char *soname;		/* DT_SONAME, or NULL */
	uint64_t flags_1;	/* DT_FLAGS_1 (DF_1_NODEFLIB changes the library search) */
};

/*
 * Fill `out` (zeroed first) for `path`. On failure `out` holds nothing to
 * free. Returns 0, -ENOEXEC (not an x86-64 ELF), -EINVAL (malformed dynamic
 * data), -ENOMEM, or the errno of open().
 */
int elf_dynamic_info(const char *path, struct elf_dyninfo *out, char *err, size_t errlen);

/* Free what elf_dynamic_info() allocated and zero `info`; NULL is fine. */
void elf_dyninfo_free(struct elf_dyninfo *info);

#endif /* COROBPF_DYNLINK_H */
