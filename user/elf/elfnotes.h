/* SPDX-License-Identifier: MIT */
/*
 * elfnotes.h: what an ELF object is, and which corobpf probes it carries.
 *
 * corobpf attaches only to x86-64 ELF objects, so every function here first
 * checks the class and machine and says so when they differ. Nothing here
 * prints: failures return a negative errno value and, when `err` is not
 * NULL, a message of the form "PATH: what is wrong" in err[0..errlen).
 *
 *     struct elf_probes p;
 *     char err[256];
 *
 *     if (elf_probe_scan("/usr/bin/server", "corobpf", &p, err, sizeof(err)) < 0)
 *             fprintf(stderr, "error: %s\n", err);
 *     else if (!elf_probes_find(&p, "switch"))
 *             fprintf(stderr, "warning: no switch probe, coroutines will not run\n");
 */
#ifndef COROBPF_ELFNOTES_H
#define COROBPF_ELFNOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Probe ABI v1 has seven names; room for other providers' habits too. */
#define ELF_PROBE_NAMES_MAX	32
/* Longer names are counted in total and names_dropped, never truncated. */
#define ELF_PROBE_NAME_LEN	64

struct elf_probe_name {
	char name[ELF_PROBE_NAME_LEN];
	unsigned int count;		/* sites (notes) of this probe */
	/*
	 * Distinct argument strings among those sites, as libbpf counts them:
	 * each takes one slot of its USDT spec map per attach (an empty string
	 * or one that starts with ':' counts as the empty string).
	 */
	unsigned int specs;
	bool has_semaphore;		/* some site has a nonzero semaphore address */
};

struct elf_probes {
	int elf_type;			/* e_type: ET_EXEC, or ET_DYN (shared object or PIE) */
	unsigned int total;		/* sites of the provider, every name */
	unsigned int n_names;		/* entries used in names[], in order of first site */
	unsigned int names_dropped;	/* sites whose name did not fit in names[] */
	/*
	 * What the sites are (usdt/corobpf.h: a one-byte nop, or with
	 * COROBPF_NOP5 a five-byte one the kernel may optimize), as the file
	 * holds them at the address libbpf will probe; every refused site
	 * counts as other.
	 */
	unsigned int sites_nop1, sites_nop5, sites_other;
	/*
	 * Sites that must not be probed, and why the first one: a uprobe there
	 * could change what the program computes (not the nop our SDK writes,
	 * not in an executable segment, or not the start of an instruction of
	 * its function: sitebounds.h), or the kernel would increment a
	 * word that is not a semaphore of ours (outside .probes). One is
	 * enough to leave the whole object alone: libbpf attaches every site
	 * of a name at once, and an object with one such note is not what our
	 * SDK built. `refused` may quote a name from the file as it is: print it
	 * through log_*() or term_safe(), which escape it.
	 */
	unsigned int sites_refused;
	char refused[512];
	struct elf_probe_name names[ELF_PROBE_NAMES_MAX];
};

/*
 * Count the USDT sites of `provider` (NULL means "corobpf") in the
 * .note.stapsdt sections of `path`, per probe name. Notes of other providers
 * and other note types are skipped, but every note is bounds-checked: a
 * truncated or inconsistent note fails with -EINVAL and the file offset of the
 * note in the message. A file without the section has zero probes (success).
 *
 * Each site of the provider is also judged as libbpf will attach it (its
 * address moved by .stapsdt.base, mapped through the PT_LOAD segments to
 * the file): a site or semaphore our SDK would not have written counts in
 * sites_refused, with the first reason in `refused`; the call still
 * succeeds. Time and memory are linear in the size of the notes.
 *
 * Returns 0, -ENOEXEC (not an ELF, or not x86-64), -EINVAL (malformed),
 * -ENOMEM, or the errno of open().
 */
int elf_probe_scan(const char *path, const char *provider, struct elf_probes *out, char *err,
		   size_t errlen);

/*
 * One site of the provider, as an attach needs it: where to put the uprobe
 * and the semaphore the kernel counts, as file offsets (through the program
 * headers, after the .stapsdt.base adjustment prelink may call for), and
 * the argument string. sema_off is 0 without a semaphore. Strings point
 * into the file's data and live only during the callback.
 */
struct elf_probe_site {
	const char *name;
	const char *args;	/* "" when the note has none */
	uint64_t pc;		/* the site's address in the object, adjusted */
	/*
	 * The file offset to probe; 0: in no executable segment. A five-byte
	 * site (COROBPF_NOP5) is probed at the stack step before it, never at
	 * the nop: elfnotes.c says why.
	 */
	uint64_t off;
	/*
	 * The file offset of the instruction after the site (after a five-byte
	 * site's step back); 0 with off.
	 */
	uint64_t off_after;
	uint64_t sema;		/* the semaphore's address in the object, or 0 */
	uint64_t sema_off;	/* its file offset; 0: none, or in no writable segment */
};
typedef void (*elf_site_fn)(void *ctx, const struct elf_probe_site *site);

/* elf_probe_scan(), and `fn` called for every site of `provider` it accepts, in file order. */
int elf_probe_walk(const char *path, const char *provider, elf_site_fn fn, void *ctx,
		   struct elf_probes *out, char *err, size_t errlen);

/* The entry for probe `name`, or NULL if the object has no site of it. */
const struct elf_probe_name *elf_probes_find(const struct elf_probes *probes, const char *name);

/* True if `path` can be read and starts with the ELF magic (any class or machine). */
bool elf_is_elf(const char *path);

/*
 * Whether the dynamic loader would map the open file `fd` as a library,
 * judged from its ELF header the way glibc's ld.so judges a search
 * candidate:
 *   0                  an x86-64 ELF that ld.so accepts;
 *   ELF_LOAD_SKIP      a valid ELF of another class or machine: ld.so skips
 *                      it silently and keeps searching;
 *   negative errno     ld.so would stop and fail the whole load ("invalid ELF
 *                      header", "file too short", "only ET_DYN and ET_EXEC can
 *                      be loaded", ...): -ENOEXEC with ld.so's reason in err,
 *                      or the errno of a failed read.
 * `err` gets the reason without a path (the caller knows which file it
 * opened). Reads with pread(), so the file offset of `fd` does not change.
 * Checks the header only: ld.so also refuses, after this point, executables
 * (ET_EXEC, or ET_DYN with DF_1_PIE) as libraries; ldpaths does that part.
 */
#define ELF_LOAD_SKIP 1
int elf_check_loadable(int fd, char *err, size_t errlen);

/* ELF_READ_MAX: the most corobpf reads whole of one section or table (elfread.h). */
#include "elfread.h"

/*
 * Open `path` as an x86-64 ELF (libelf), refusing other classes and
 * machines with a message that says which, and an object a section of
 * which runs past the end of the file (or whose section name table is
 * larger than ELF_READ_MAX). On success the caller owns *fd_out and
 * *elf_out (elf_end, close). Returns 0 or a negative errno.
 */
#include <gelf.h>
int elf_open_host(const char *path, int *fd_out, Elf **elf_out, GElf_Ehdr *ehdr, char *err,
		  size_t errlen);

/*
 * elf_getdata(scn, NULL) for a section of at most ELF_READ_MAX bytes (a
 * symbol table: its string table too, which elf_strptr() reads whole);
 * NULL for a larger one, as for an unreadable one.
 */
Elf_Data *elf_section_data(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh);

/*
 * An object opened for reading code: elf_open_host() plus its PT_LOAD
 * segments, which map a virtual address to a file offset. The first 16
 * segments are kept; ld.so-loadable objects have four or five.
 */
#define ELF_IMAGE_LOADS_MAX	16
struct elf_image {
	const char *path;	/* as given, not copied */
	int fd;			/* -1 when closed */
	Elf *elf;
	GElf_Ehdr eh;
	GElf_Phdr loads[ELF_IMAGE_LOADS_MAX];
	size_t nloads;
};

/*
 * Zero `img` and open `path` into it (elf_open_host's refusals and errors).
 * On failure nothing is left open and img->fd is -1; on success the caller
 * ends with elf_image_close().
 */
int elf_image_open(struct elf_image *img, const char *path, char *err, size_t errlen);

/* Release what elf_image_open() took; safe on a closed or zeroed-then-failed image. */
void elf_image_close(struct elf_image *img);

/*
 * File offset of `vaddr` in an executable (PF_X) PT_LOAD segment, and in
 * *avail (when not NULL) how many bytes of that segment's file image start
 * there. False if no executable segment holds it.
 */
bool elf_image_text_offset(const struct elf_image *img, uint64_t vaddr, uint64_t *off,
			   uint64_t *avail);

#endif /* COROBPF_ELFNOTES_H */
