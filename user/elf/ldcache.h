/* SPDX-License-Identifier: MIT */
/*
 * ldcache.h: /etc/ld.so.cache, step 4 of ld.so's search (ldpaths.c), read
 * and searched as glibc 2.36's ld.so does.
 *
 * /etc/ld.so.cache on Debian 12 is the new format only ("glibc-ld.so.cache"
 * "1.1", 48-byte header, 24-byte entries {int32 flags, uint32 key, uint32
 * value, uint32 osversion, uint64 hwcap}, string offsets relative to the
 * header), written by ldconfig 2.36. Its x86-64 entries have flags 0x0303
 * (FLAG_ELF_LIBC6 | FLAG_X8664_LIB64), /lib32 ones 0x0003, and a few plain
 * ELF ones 0x0001. Every hwcap field is zero and the only extension section
 * is the generator string (no glibc-hwcaps section): ldconfig writes hwcap
 * entries only for libraries inside glibc-hwcaps or legacy hwcap
 * subdirectories, and none of the directories it scans has one. Entries with
 * a nonzero hwcap are therefore ignored here (a limitation: such a library
 * would be found through the directory search instead, if at all). The old
 * "ld.so-1.7.0" format is accepted only as the compat prefix `ldconfig -c
 * compat` writes before a new header.
 */
#ifndef COROBPF_LDCACHE_H
#define COROBPF_LDCACHE_H

#include <stddef.h>
#include <stdint.h>

#define LD_CACHE_FILE "/etc/ld.so.cache"

/* A cache read and checked whole: lookups need no checks. */
struct ld_cache {
	char *buf;
	size_t size;
	size_t hdr;		/* offset of the new-format header: strings are relative to it */
	uint32_t nlibs;
};

/*
 * Reads and checks the cache open at fd (closed here; file names it in
 * messages): 0, or -EINVAL for a file ld.so would not use, -ENOMEM, with
 * the reason in err. c is zeroed on failure.
 */
int ld_cache_load_fd(struct ld_cache *c, int fd, const char *file, char *err, size_t errlen);
/* The same for the file at that path: -errno if it cannot be opened. */
int ld_cache_load(struct ld_cache *c, const char *file, char *err, size_t errlen);
/* The first x86-64 libc6 entry for `name`, in file order as ld.so's search yields it; or NULL. */
const char *ld_cache_find(const struct ld_cache *c, const char *name);
void ld_cache_free(struct ld_cache *c);

/*
 * Look `name` up in an ld.so.cache file (NULL = /etc/ld.so.cache) as ld.so
 * does: the first x86-64 libc6 entry with that exact key. Returns 0 and a
 * malloc'ed path, -ENOENT if there is no such entry or no cache file, or
 * -EINVAL for a file ld.so would not use (bad magic, offsets out of bounds),
 * with the reason in err.
 */
int ld_cache_lookup(const char *cache_file, const char *name, char **path_out, char *err,
		    size_t errlen);

#endif /* COROBPF_LDCACHE_H */
