// SPDX-License-Identifier: MIT
/*
 * ldcache.c: /etc/ld.so.cache, read and searched as glibc 2.36's ld.so does
 * (ldcache.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ldcache.h"
#include "util.h"

/* ld.so.cache layout (new format) */
#define CACHE_MAGIC_NEW		"glibc-ld.so.cache"
#define CACHE_VERSION_NEW	"1.1"
#define CACHE_MAGIC_OLD		"ld.so-1.7.0"
#define CACHE_NEW_HDR_SIZE	48
#define CACHE_NEW_ENTRY_SIZE	24
#define CACHE_OLD_HDR_SIZE	16
#define CACHE_OLD_ENTRY_SIZE	12
#define CACHE_FLAGS_X8664_LIBC6	0x0303
/* Real caches are tens of kilobytes; refuse to slurp something absurd. */
#define CACHE_MAX_SIZE		(64u << 20)

static bool cache_string_ok(const struct ld_cache *c, uint32_t off)
{
	size_t at = c->hdr + off;

	return off < c->size - c->hdr && memchr(c->buf + at, 0, c->size - at) != NULL;
}

/*
 * Validate everything up front so lookups need no checks: ld.so would fault
 * or misread on a corrupt cache, we refuse it and search without it.
 */
int ld_cache_load_fd(struct ld_cache *c, int fd, const char *file, char *err, size_t errlen)
{
	struct stat sb;
	size_t entries, i, got = 0;
	uint8_t flags;

	memset(c, 0, sizeof(*c));
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > CACHE_MAX_SIZE) {
		errfmt(err, errlen, "%s: not a regular file of at most %u bytes", file,
		       CACHE_MAX_SIZE);
		close(fd);
		return -EINVAL;
	}
	c->size = sb.st_size;
	c->buf = malloc(c->size + 1);
	if (!c->buf) {
		close(fd);
		errfmt(err, errlen, "%s: out of memory", file);
		return -ENOMEM;
	}
	while (got < c->size) {
		ssize_t n = read(fd, c->buf + got, c->size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	c->size = got;

	if (c->size >= CACHE_OLD_HDR_SIZE &&
	    memcmp(c->buf, CACHE_MAGIC_OLD, sizeof(CACHE_MAGIC_OLD) - 1) == 0) {
		uint64_t old_n = load_u32(c->buf + 12);
		uint64_t end = CACHE_OLD_HDR_SIZE + old_n * CACHE_OLD_ENTRY_SIZE;

		/* The new header follows the old table, 8-byte aligned (its entries hold u64s). */
		c->hdr = (end + 7) & ~(uint64_t)7;
		if (end > c->size || c->hdr > c->size) {
			errfmt(err, errlen,
			       "%s: old-format table of %llu entries is longer than the file", file, (unsigned long long)old_n);
			goto corrupt;
		}
	}
	if (c->size - c->hdr < CACHE_NEW_HDR_SIZE ||
	    memcmp(c->buf + c->hdr, CACHE_MAGIC_NEW CACHE_VERSION_NEW,
		   sizeof(CACHE_MAGIC_NEW CACHE_VERSION_NEW) - 1) != 0) {
		errfmt(err, errlen, "%s: not a glibc-ld.so.cache1.1 file", file);
		goto corrupt;
	}
	/* Endianness in bits 0-1: 0 unrecorded, 2 little, 3 big. */
	flags = c->buf[c->hdr + 28];
	if ((flags & 3) != 0 && (flags & 3) != 2) {
		errfmt(err, errlen, "%s: not a little-endian cache (flags 0x%x)", file, flags);
		goto corrupt;
	}
	c->nlibs = load_u32(c->buf + c->hdr + 20);
	entries = c->size - c->hdr - CACHE_NEW_HDR_SIZE;
	if (c->nlibs > entries / CACHE_NEW_ENTRY_SIZE) {
		errfmt(err, errlen, "%s: %u entries do not fit in %zu bytes", file, c->nlibs,
		       c->size);
		goto corrupt;
	}
	for (i = 0; i < c->nlibs; i++) {
		const char *e = c->buf + c->hdr + CACHE_NEW_HDR_SIZE + i * CACHE_NEW_ENTRY_SIZE;

		if (!cache_string_ok(c, load_u32(e + 4)) || !cache_string_ok(c, load_u32(e + 8))) {
			errfmt(err, errlen, "%s: entry %zu points outside the file", file, i);
			goto corrupt;
		}
	}
	return 0;
corrupt:
	free(c->buf);
	memset(c, 0, sizeof(*c));
	return -EINVAL;
}

int ld_cache_load(struct ld_cache *c, const char *file, char *err, size_t errlen)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret;

	if (fd < 0) {
		ret = -errno;
		memset(c, 0, sizeof(*c));
		errfmt(err, errlen, "%s: %s", file, strerror(errno));
		return ret;
	}
	return ld_cache_load_fd(c, fd, file, err, errlen);
}

/* The first x86-64 libc6 entry for `name`, in file order as ld.so's search yields it. */
const char *ld_cache_find(const struct ld_cache *c, const char *name)
{
	uint32_t i;

	for (i = 0; i < c->nlibs; i++) {
		const char *e = c->buf + c->hdr + CACHE_NEW_HDR_SIZE +
				(size_t)i * CACHE_NEW_ENTRY_SIZE;

		if ((int32_t)load_u32(e) != CACHE_FLAGS_X8664_LIBC6 || load_u64(e + 16) != 0)
			continue;
		if (strcmp(c->buf + c->hdr + load_u32(e + 4), name) == 0)
			return c->buf + c->hdr + load_u32(e + 8);
	}
	return NULL;
}

int ld_cache_lookup(const char *cache_file, const char *name, char **path_out, char *err,
		    size_t errlen)
{
	struct ld_cache c;
	const char *p;
	int ret;

	*path_out = NULL;
	if (!cache_file)
		cache_file = LD_CACHE_FILE;
	ret = ld_cache_load(&c, cache_file, err, errlen);
	if (ret)
		return ret;
	p = ld_cache_find(&c, name);
	if (p) {
		*path_out = strdup(p);
		ret = *path_out ? 0 : -ENOMEM;
	} else {
		errfmt(err, errlen, "%s: no x86-64 entry for %s", cache_file, name);
		ret = -ENOENT;
	}
	ld_cache_free(&c);
	return ret;
}

void ld_cache_free(struct ld_cache *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}
