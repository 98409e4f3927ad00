// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <zlib.h>
#include "log.h"
#include "termsafe.h"
#include "util.h"

static void oom(size_t n)
{
	log_err("out of memory (allocating %zu bytes)", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p)
		oom(n * sz);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		oom(strlen(s));
	return p;
}

/* ---- hash map ---- */

static inline u64 hmap_hash(u64 k1, u64 k2)
{
	/* splitmix64 finalizer over both words: ids are often pointers or counters */
	return mix64(k1 * 0x9e3779b97f4a7c15ULL ^ (k2 + 0x632be59bd9b4e019ULL));
}

void hmap_init(struct hmap *m)
{
	m->cap = 64;
	m->len = 0;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
}

void hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}

void hmap_clear(struct hmap *m)
{
	memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->len = 0;
}

static struct hmap_slot *hmap_find(const struct hmap *m, u64 k1, u64 k2)
{
	size_t mask = m->cap - 1, i = hmap_hash(k1, k2) & mask;

	for (;;) {
		struct hmap_slot *s = &m->slots[i];

		if (!s->val || (s->k1 == k1 && s->k2 == k2))
			return s;
		i = (i + 1) & mask;
	}
}

void *hmap_get(const struct hmap *m, u64 k1, u64 k2)
{
	return hmap_find(m, k1, k2)->val;
}

static void hmap_grow(struct hmap *m)
{
	struct hmap old = *m;

	m->cap = old.cap * 2;
	m->len = 0;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].val)
			hmap_put(m, old.slots[i].k1, old.slots[i].k2, old.slots[i].val);
	free(old.slots);
}

void hmap_put(struct hmap *m, u64 k1, u64 k2, void *val)
{
	struct hmap_slot *s;

	if ((m->len + 1) * 4 > m->cap * 3)
		hmap_grow(m);
	s = hmap_find(m, k1, k2);
	if (!s->val)
		m->len++;
	s->k1 = k1;
	s->k2 = k2;
	s->val = val;
}

void *hmap_del(struct hmap *m, u64 k1, u64 k2)
{
	size_t mask = m->cap - 1;
	struct hmap_slot *s = hmap_find(m, k1, k2);
	size_t i = s - m->slots, j = i;
	void *val = s->val;

	if (!val)
		return NULL;
	m->len--;
	/* Backward shift: pull later members of the probe run into the hole. */
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!m->slots[j].val)
			break;
		home = hmap_hash(m->slots[j].k1, m->slots[j].k2) & mask;
		/* Move j into i unless its home lies cyclically in (i, j]. */
		if ((i <= j) ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].val = NULL;
	return val;
}

bool hmap_next(const struct hmap *m, size_t *iter, u64 *k1, u64 *k2, void **val)
{
	while (*iter < m->cap) {
		struct hmap_slot *s = &m->slots[(*iter)++];

		if (s->val) {
			if (k1)
				*k1 = s->k1;
			if (k2)
				*k2 = s->k2;
			*val = s->val;
			return true;
		}
	}
	return false;
}

void hmap_del_k1(struct hmap *m, u64 k1, void (*drop)(void *val))
{
	size_t it = 0, n = 0, cap = 0;
	u64 k, k2, *keys = NULL;
	void *v;

	/* Collected first: a deletion shifts entries back, under the iterator. */
	while (hmap_next(m, &it, &k, &k2, &v)) {
		if (k != k1)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		keys[n++] = k2;
	}
	for (size_t j = 0; j < n; j++) {
		v = hmap_del(m, k1, keys[j]);
		if (drop)
			drop(v);
	}
	free(keys);
}

/* ---- buffered output ---- */

#define OBUF_CAP (256 * 1024)

int obuf_open_fd(struct obuf *o, int fd, bool gzip)
{
	memset(o, 0, sizeof(*o));
	o->fd = fd;
	o->cap = OBUF_CAP;
	o->buf = xmalloc(o->cap);
	if (gzip) {
		int gfd = dup(fd);

		if (gfd < 0)
			return -errno;
		/* Level 1: the point of .gz here is size at streaming speed. */
		o->gz = gzdopen(gfd, "wb1");
		if (!o->gz) {
			close(gfd);
			return -ENOMEM;
		}
	}
	return 0;
}

static void obuf_drain(struct obuf *o)
{
	size_t off = 0;

	if (o->err) {
		o->len = 0;
		return;
	}
	if (o->gz) {
		if (o->len && gzwrite(o->gz, o->buf, o->len) != (int)o->len) {
			int e;

			gzerror(o->gz, &e);
			o->err = (e == Z_ERRNO && errno) ? errno : EIO;
		}
		o->len = 0;
		return;
	}
	while (off < o->len) {
		ssize_t n = write(o->fd, o->buf + off, o->len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			o->err = errno;
			break;
		}
		off += n;
	}
	o->len = 0;
}

void obuf_write_slow(struct obuf *o, const void *p, size_t n)
{
	if (o->len + n > o->cap) {
		obuf_drain(o);
		if (n > o->cap) {
			size_t off = 0;

			/* Larger than the buffer: pass it through in buffer-sized pieces. */
			while (off < n) {
				size_t k = MIN(n - off, o->cap);

				memcpy(o->buf, (const char *)p + off, k);
				o->len = k;
				obuf_drain(o);
				off += k;
			}
			return;
		}
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

void *obuf_reserve_slow(struct obuf *o, size_t n)
{
	if (o->len + n > o->cap)
		obuf_drain(o);
	return o->buf + o->len;
}

void obuf_printf(struct obuf *o, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	obuf_write(o, tmp, MIN((size_t)n, sizeof(tmp) - 1));
}

/* Two digits per division: timestamps have 13 or more. */
const char obuf_digit_pairs[200] = "00010203040506070809101112131415161718192021222324"
				   "25262728293031323334353637383940414243444546474849"
				   "50515253545556575859606162636465666768697071727374"
				   "75767778798081828384858687888990919293949596979899";

void obuf_u64_slow(struct obuf *o, u64 v)
{
	char tmp[24];

	obuf_write(o, tmp, fmt_u64(tmp, v) - tmp);
}

void obuf_s64(struct obuf *o, s64 v)
{
	if (v < 0) {
		obuf_putc(o, '-');
		obuf_u64(o, (u64)0 - (u64)v);
	} else {
		obuf_u64(o, v);
	}
}

void obuf_hex_slow(struct obuf *o, u64 v)
{
	char tmp[24];

	obuf_write(o, tmp, fmt_hex(tmp, v) - tmp);
}


void utf8_sanitize(char *dst, size_t dstlen, const char *src, size_t maxlen)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t n = strnlen(src, maxlen), i = 0, o = 0;

	if (!dstlen)
		return;
	while (i < n) {
		size_t k = utf8_seq_len(s + i, n - i);

		if (k) {
			if (o + k >= dstlen)
				break;
			memcpy(dst + o, s + i, k);
			o += k;
			i += k;
		} else {
			if (o + 3 >= dstlen)
				break;
			memcpy(dst + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	dst[o] = 0;
}

char *json_str_at(char *p, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	*p++ = '"';
	while (i < n) {
		unsigned char c = s[i];
		size_t k;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			*p++ = (char)c;
			i++;
			continue;
		}
		i++;
		switch (c) {
		case '"':
			p = mempcpy(p, "\\\"", 2);
			continue;
		case '\\':
			p = mempcpy(p, "\\\\", 2);
			continue;
		case '\n':
			p = mempcpy(p, "\\n", 2);
			continue;
		case '\t':
			p = mempcpy(p, "\\t", 2);
			continue;
		case '\r':
			p = mempcpy(p, "\\r", 2);
			continue;
		}
		if (c < 0x20) {
			p = mempcpy(p, "\\u00", 4);
			*p++ = "0123456789abcdef"[c >> 4];
			*p++ = "0123456789abcdef"[c & 15];
			continue;
		}
		k = utf8_seq_len(s + i - 1, n - i + 1);
		if (k) {
			p = mempcpy(p, s + i - 1, k);
			i += k - 1;
		} else {
			p = mempcpy(p, "\\ufffd", 6);
		}
	}
	*p++ = '"';
	return p;
}

void obuf_json_str(struct obuf *o, const char *str, size_t maxlen)
{
	size_t n = strnlen(str, maxlen), room = JSON_STR_ROOM(n);
	char *tmp;

	if (room <= OBUF_CAP / 4) {
		char *p = obuf_reserve(o, room);

		obuf_commit(o, json_str_at(p, str, n) - p);
		return;
	}
	tmp = xmalloc(room);
	obuf_write(o, tmp, json_str_at(tmp, str, n) - tmp);
	free(tmp);
}

int obuf_flush(struct obuf *o)
{
	obuf_drain(o);
	if (o->gz && !o->err && gzflush(o->gz, Z_SYNC_FLUSH) != Z_OK)
		o->err = EIO;
	return o->err ? -o->err : 0;
}

int obuf_close(struct obuf *o)
{
	int err;

	obuf_drain(o);
	if (o->gz) {
		if (gzclose(o->gz) != Z_OK && !o->err)
			o->err = EIO;
		o->gz = NULL;
	}
	err = o->err;
	free(o->buf);
	o->buf = NULL;
	return err ? -err : 0;
}

/* ---- output files ---- */

/*
 * Temporary files in use, for the second Ctrl-C, which leaves through
 * _exit: each slot is filled before its name is set, and read by the
 * signal handler only once the name is there.
 */
#define OUTFILE_MAX_OPEN 32
struct tmp_slot {
	int dirfd;
	dev_t dev;
	ino_t ino;
	const char *name;
};
static volatile struct tmp_slot open_tmps[OUTFILE_MAX_OPEN];

static void tmp_register(const struct outfile *f)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++) {
		if (!open_tmps[i].name) {
			open_tmps[i].dirfd = f->dirfd;
			open_tmps[i].dev = f->dev;
			open_tmps[i].ino = f->ino;
			open_tmps[i].name = f->tmp_name;
			return;
		}
	}
}

static void tmp_unregister(const struct outfile *f)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++)
		if (open_tmps[i].name == f->tmp_name)
			open_tmps[i].name = NULL;
}

/* Whether `name` in dirfd is still the file (dev, ino): another user may have replaced it. */
static bool still_ours(int dirfd, const char *name, dev_t dev, ino_t ino)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev &&
	       st.st_ino == ino;
}

void outfile_emergency_cleanup(void)
{
	for (int i = 0; i < OUTFILE_MAX_OPEN; i++) {
		const char *name = open_tmps[i].name;

		if (name && still_ours(open_tmps[i].dirfd, name, open_tmps[i].dev, open_tmps[i].ino))
			unlinkat(open_tmps[i].dirfd, name, 0);
	}
}

/*
 * Splits `path` into its directory (allocated; "." when it has none) and
 * its last name (in path). -EISDIR when the path names a directory itself
 * ("dir/", ".", "..").
 */
static int split_path(const char *path, char **dir, const char **name)
{
	const char *slash = strrchr(path, '/');

	*name = slash ? slash + 1 : path;
	if (!**name || !strcmp(*name, ".") || !strcmp(*name, ".."))
		return -EISDIR;
	if (!slash) {
		*dir = xstrdup(".");
	} else if (slash == path) {
		*dir = xstrdup("/");
	} else {
		*dir = xmalloc(slash - path + 1);
		memcpy(*dir, path, slash - path);
		(*dir)[slash - path] = 0;
	}
	return 0;
}

/*
 * Opens the directory `real` (an absolute path without symbolic links, as
 * realpath() gives) refusing any link met on the way: one swapped in since
 * realpath() read the path fails with ELOOP instead of being followed.
 */
static int open_dir_nofollow(const char *real)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS,
	};
	char *copy, *comp, *save;
	int fd, next, e;

	fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof(how));
	if (fd >= 0 || errno != ENOSYS)
		return fd;
	/* Before Linux 5.6: one component at a time, none of them a link. */
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	copy = xstrdup(real);
	for (comp = strtok_r(copy, "/", &save); comp && fd >= 0; comp = strtok_r(NULL, "/", &save)) {
		next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = errno;
		close(fd);
		fd = next;
		errno = e;
	}
	free(copy);
	return fd;
}

/* The directory of path, opened (O_PATH); -errno with the reason in err. */
static int open_parent(const char *path, const char **name, char *err, size_t errlen)
{
	char *dir = NULL, *real = NULL;
	int fd, ret;

	ret = split_path(path, &dir, name);
	if (ret) {
		errfmt(err, errlen, "cannot create %s: %s; name a file", path, strerror(-ret));
		return ret;
	}
	real = realpath(dir, NULL);
	if (!real) {
		ret = -errno;
		errfmt(err, errlen, "cannot create %s: its directory %s: %s", path, dir,
		       strerror(-ret));
		free(dir);
		return ret;
	}
	fd = open_dir_nofollow(real);
	if (fd < 0) {
		ret = -errno;
		if (ret == -ELOOP)
			errfmt(err, errlen, "cannot create %s: a symbolic link appeared in the path "
			       "of its directory %s while it was opened; check who else can "
			       "rename there", path, real);
		else
			errfmt(err, errlen, "cannot create %s: its directory %s: %s", path, real,
			       strerror(-ret));
	}
	free(dir);
	free(real);
	return fd < 0 ? ret : fd;
}

/* Everything an outfile holds, let go (tmp_unregister of one not registered does nothing). */
static void outfile_free(struct outfile *f)
{
	tmp_unregister(f);
	if (f->fd >= 0)
		close(f->fd);
	close(f->dirfd);
	free(f->path);
	free(f->name);
	free(f->tmp_path);
	memset(f, 0, sizeof(*f));
	f->fd = f->dirfd = -1;
}

int outfile_open(struct outfile *f, const char *path, bool force, char *err, size_t errlen)
{
	struct stat st;
	const char *name;
	size_t n;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->dirfd = open_parent(path, &name, err, errlen);
	if (f->dirfd < 0) {
		ret = f->dirfd;
		f->dirfd = -1;
		return ret;
	}
	if (fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			errfmt(err, errlen, "%s is a directory; name a file", path);
			ret = -EISDIR;
			goto fail;
		}
		if (!force) {
			errfmt(err, errlen, "%s already exists; remove it or add --force", path);
			ret = -EEXIST;
			goto fail;
		}
	}
	n = strlen(path) + 32;
	f->path = xstrdup(path);
	f->name = xstrdup(name);
	f->force = force;
	f->tmp_path = xmalloc(n);
	snprintf(f->tmp_path, n, "%s.tmp-%d", path, (int)getpid());
	f->tmp_name = f->tmp_path + (name - path);
	/* A leftover of a run that had our pid; what another user plants there fails O_EXCL. */
	unlinkat(f->dirfd, f->tmp_name, 0);
	/* Root writes other users' traces (-a): none of them may read another's. */
	f->fd = openat(f->dirfd, f->tmp_name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		       geteuid() == 0 ? 0600 : 0644);
	if (f->fd < 0 || fstat(f->fd, &st) < 0) {
		ret = -errno;
		errfmt(err, errlen, "cannot create %s: %s", f->tmp_path, strerror(-ret));
		goto fail;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	tmp_register(f);
	return 0;
fail:
	outfile_free(f);
	return ret;
}

/* Under sudo, the trace belongs to whoever asked for it: given through our own descriptor. */
static void give_to_sudo_user(const struct outfile *f, int fd)
{
	const char *uid = getenv("SUDO_UID"), *gid = getenv("SUDO_GID");

	if (geteuid() != 0 || !uid || !gid)
		return;
	if (fchown(fd, (uid_t)strtoul(uid, NULL, 10), (gid_t)strtoul(gid, NULL, 10)) < 0)
		log_debug("chown %s to SUDO_UID %s: %s", f->path, uid, strerror(errno));
}

/* tmp_name to name in dirfd, replacing nothing unless force; 0 or -errno. */
static int rename_into_place(const struct outfile *f)
{
	if (f->force)
		return renameat(f->dirfd, f->tmp_name, f->dirfd, f->name) < 0 ? -errno : 0;
	if (renameat2(f->dirfd, f->tmp_name, f->dirfd, f->name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* A filesystem without RENAME_NOREPLACE (NFS): a hard link fails as well on a name taken. */
	if (linkat(f->dirfd, f->tmp_name, f->dirfd, f->name, 0) < 0)
		return -errno;
	unlinkat(f->dirfd, f->tmp_name, 0);
	return 0;
}

int outfile_commit(struct outfile *f, char *err, size_t errlen)
{
	int keep, ret = 0;

	if (!f->path)
		return 0;
	/*
	 * Write errors held back by the filesystem (NFS) come at close: close
	 * one descriptor now, keep a duplicate to give the file away once it
	 * is in place.
	 */
	keep = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
	if (keep < 0) {
		ret = -errno;
	} else {
		if (close(f->fd) < 0)
			ret = -errno;
		f->fd = keep;
	}
	if (ret) {
		errfmt(err, errlen, "cannot write %s: %s", f->path, strerror(-ret));
		goto abort;
	}
	if (!still_ours(f->dirfd, f->tmp_name, f->dev, f->ino)) {
		errfmt(err, errlen, "%s was replaced or removed during the run (can another user "
		       "rename in its directory?); nothing was written to %s", f->tmp_path, f->path);
		ret = -ESTALE;
		goto abort;
	}
	ret = rename_into_place(f);
	if (ret) {
		/* Finished: kept under its temporary name, whatever went wrong with the rename. */
		if (ret == -EEXIST || ret == -ENOTEMPTY)
			errfmt(err, errlen, "%s appeared during the run; the finished trace is kept "
			       "as %s", f->path, f->tmp_path);
		else if (ret == -EISDIR)
			errfmt(err, errlen, "%s became a directory during the run; the finished "
			       "trace is kept as %s", f->path, f->tmp_path);
		else
			errfmt(err, errlen, "cannot rename %s to %s: %s; the finished trace is kept "
			       "as %s", f->tmp_path, f->path, strerror(-ret), f->tmp_path);
	}
	give_to_sudo_user(f, f->fd);
	outfile_free(f);
	return ret;
abort:
	outfile_abort(f);
	return ret;
}

void outfile_abort(struct outfile *f)
{
	if (!f->path)
		return;
	if (still_ours(f->dirfd, f->tmp_name, f->dev, f->ino))
		unlinkat(f->dirfd, f->tmp_name, 0);
	outfile_free(f);
}

/* The directory's identity and the file there (lstat, and stat through a link) for path. */
struct out_ident {
	struct stat dir, link, file;
	bool has_link, has_file;
	const char *name;
};

static bool out_ident(const char *path, struct out_ident *id)
{
	int dirfd = open_parent(path, &id->name, NULL, 0);
	bool ok;

	if (dirfd < 0)
		return false;
	ok = fstat(dirfd, &id->dir) == 0;
	id->has_link = fstatat(dirfd, id->name, &id->link, AT_SYMLINK_NOFOLLOW) == 0;
	id->has_file = fstatat(dirfd, id->name, &id->file, 0) == 0;
	close(dirfd);
	return ok;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

bool outfile_same(const char *a, const char *b)
{
	struct out_ident x, y;

	if (!out_ident(a, &x) || !out_ident(b, &y))
		return false;
	if (same_inode(&x.dir, &y.dir) && !strcmp(x.name, y.name))
		return true;
	return x.has_link && y.has_link && same_inode(&x.link, &y.link);
}

bool outfile_is_input(const char *path, const struct stat *input)
{
	struct out_ident x;

	if (!out_ident(path, &x))
		return false;
	return (x.has_link && same_inode(&x.link, input)) ||
	       (x.has_file && same_inode(&x.file, input));
}

/* ---- inputs ---- */

int input_open(const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO waits for a writer otherwise. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		errfmt(err, errlen, "cannot open %s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		errfmt(err, errlen, "cannot open %s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		errfmt(err, errlen, "%s is not a regular file (a %s); give a capture file "
		       "written by corobpf --raw or -o FILE.jsonl", path,
		       S_ISDIR(st.st_mode) ? "directory" : S_ISFIFO(st.st_mode) ? "FIFO" :
		       S_ISSOCK(st.st_mode) ? "socket" : "device");
		close(fd);
		return -EINVAL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		ret = -errno;
		errfmt(err, errlen, "cannot read %s: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}

/* ---- time ---- */

u64 now_boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

s64 realtime_minus_boottime_ns(void)
{
	struct timespec a, b, c;
	s64 best = 0, best_gap = INT64_MAX;

	/* Bracket a realtime read with boottime reads; keep the tightest of a few tries. */
	for (int i = 0; i < 5; i++) {
		s64 gap, mid;

		clock_gettime(CLOCK_BOOTTIME, &a);
		clock_gettime(CLOCK_REALTIME, &b);
		clock_gettime(CLOCK_BOOTTIME, &c);
		gap = (c.tv_sec - a.tv_sec) * 1000000000LL + (c.tv_nsec - a.tv_nsec);
		mid = a.tv_sec * 1000000000LL + a.tv_nsec + gap / 2;
		if (gap < best_gap) {
			best_gap = gap;
			best = b.tv_sec * 1000000000LL + b.tv_nsec - mid;
		}
	}
	return best;
}

void fmt_duration(char *buf, size_t len, u64 ns)
{
	if (ns >= 10000000000ULL)
		snprintf(buf, len, "%.1f s", ns / 1e9);
	else if (ns >= 1000000000ULL)
		snprintf(buf, len, "%.2f s", ns / 1e9);
	else if (ns >= 1000000ULL)
		snprintf(buf, len, "%.1f ms", ns / 1e6);
	else if (ns >= 1000ULL)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
}

void errfmt(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

bool fmt_wall_time(char *buf, size_t len, u64 ts, s64 offset, bool frac)
{
	s64 wall;
	time_t secs;
	struct tm tm;
	char date[40];

	buf[0] = 0;
	if (ts > (u64)INT64_MAX || __builtin_add_overflow((s64)ts, offset, &wall) || wall < 0 ||
	    wall / 1000000000LL > 253402300799LL) /* 9999-12-31T23:59:59Z */
		return false;
	secs = (time_t)(wall / 1000000000LL);
	if (!gmtime_r(&secs, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm))
		return false;
	if (frac)
		snprintf(buf, len, "%s.%09lldZ", date, (long long)(wall % 1000000000LL));
	else
		snprintf(buf, len, "%sZ", date);
	return true;
}

/*
 * zlib's CRC-32, computed by folding with carry-less multiplication where
 * the CPU has it (x86-64 PCLMULQDQ): the raw capture checks one per block,
 * and zlib's table-driven loop took a fifth of the replay's instructions.
 * The method is the one of Intel's white paper "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction": fold 64 bytes at a time
 * by x^(512+32) and x^(512-32) mod P, then 16, then reduce 128 bits to 32
 * with a Barrett reduction. The constants are those powers of x modulo the
 * bit-reflected polynomial 0x1DB710641, and mu = floor(x^64 / P).
 */
#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("pclmul,sse4.1"))) static u32 crc32_fold(u32 crc, const u8 *p, size_t len)
{
	/* len >= 64 and a multiple of 16; crc already inverted */
	const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
	const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124);
	const __m128i poly_mu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x[4], t, r;

	for (int i = 0; i < 4; i++)
		x[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
	x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
	while (len >= 64) {
		for (int i = 0; i < 4; i++) {
			t = _mm_clmulepi64_si128(x[i], k1k2, 0x00);
			x[i] = _mm_clmulepi64_si128(x[i], k1k2, 0x11);
			x[i] = _mm_xor_si128(_mm_xor_si128(x[i], t),
					     _mm_loadu_si128((const __m128i *)(p + 16 * i)));
		}
		p += 64;
		len -= 64;
	}
	r = x[0];
	for (int i = 1; i < 4 + (int)(len / 16); i++) {
		__m128i next = i < 4 ? x[i] : _mm_loadu_si128((const __m128i *)(p + 16 * (i - 4)));

		t = _mm_clmulepi64_si128(r, k3k4, 0x00);
		r = _mm_clmulepi64_si128(r, k3k4, 0x11);
		r = _mm_xor_si128(_mm_xor_si128(r, t), next);
	}
	/* 128 bits to 64, then 96 to 64 */
	t = _mm_clmulepi64_si128(r, k3k4, 0x10);
	r = _mm_xor_si128(_mm_srli_si128(r, 8), t);
	t = _mm_srli_si128(r, 4);
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), k5, 0x00);
	r = _mm_xor_si128(r, t);
	/* Barrett reduction to 32 bits */
	t = r;
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), poly_mu, 0x10);
	r = _mm_clmulepi64_si128(_mm_and_si128(r, mask32), poly_mu, 0x00);
	r = _mm_xor_si128(r, t);
	return (u32)_mm_extract_epi32(r, 1);
}
#endif

u32 crc32_buf(u32 crc, const void *buf, size_t len)
{
	const u8 *p = buf;

#if defined(__x86_64__)
	static int have = -1;

	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	}
	if (have && len >= 64) {
		size_t n = len & ~(size_t)15;

		crc = ~crc32_fold(~crc, p, n);
		p += n;
		len -= n;
	}
#endif
	return (u32)crc32_z(crc, p, len);
}
