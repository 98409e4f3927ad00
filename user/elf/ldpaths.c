// SPDX-License-Identifier: MIT
/*
 * ldpaths.c: compute the objects glibc's ld.so maps at startup.
 *
 * The rules below are those of glibc 2.36 as shipped by Debian 12 on x86-64.
 * They were checked on such a machine (an AMD CPU) with `LD_DEBUG=libs`,
 * `ld.so --help`, `ld.so --list-diagnostics` and `ldd`, not taken on faith;
 * only the Intel-specific platform and avx512_1 rules could not be observed
 * there and follow glibc's x86 CPU feature code:
 *
 * Load order. The executable, then LD_PRELOAD (separated by spaces or
 * colons, empty entries skipped), then the entries of /etc/ld.so.preload
 * (separated by spaces, tabs, newlines or colons, '#' starts a comment), then
 * a breadth-first walk: the DT_NEEDED of the executable in order, then those
 * of each preloaded object, then those of each object loaded so far, in load
 * order. An object is loaded once: a name matches an object already loaded
 * when it equals the path it was found at, a name it was requested by, or
 * its DT_SONAME (this is how libc's "ld-linux-x86-64.so.2" finds the
 * interpreter); a file found on disk matches when its device and inode do.
 *
 * A name containing '/' is opened as it is (relative names from the current
 * directory), after $ORIGIN, $LIB and $PLATFORM are expanded. Any other name
 * is searched, stopping at the first acceptable file, in:
 *   1. DT_RPATH of the object that needs it, of the object that loaded that
 *      one, and so on up to the executable; skipped entirely when the object
 *      that needs it has DT_RUNPATH. An object with both DT_RUNPATH and
 *      DT_RPATH has its DT_RPATH ignored everywhere, also as an ancestor.
 *   2. LD_LIBRARY_PATH (separated by ':' or ';'), $ORIGIN being the
 *      executable's directory.
 *   3. DT_RUNPATH of the object that needs it, and only that object.
 *   4. /etc/ld.so.cache.
 *   5. The system directories /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu,
 *      /lib, /usr/lib (`ld.so --help`: Debian's ld.so has neither /lib64 nor
 *      /usr/lib64 in its built-in path).
 * If the object that needs the name has DF_1_NODEFLIB, step 5 is skipped and
 * cache entries inside the system directories are ignored.
 *
 * Every directory D of steps 1, 2, 3 and 5 is tried with subdirectories
 * first: D/glibc-hwcaps/x86-64-v4, -v3, -v2 (those the CPU supports), then the
 * legacy hwcap subdirectories glibc 2.36 still searches, all subsets of
 * tls/<hwcap names>/<platform> from the longest, e.g. on an AMD CPU
 * tls/x86_64/x86_64, tls/x86_64, tls/x86_64, tls, x86_64/x86_64, x86_64,
 * x86_64, and finally D itself. An empty list element means the current
 * directory; trailing slashes are dropped; an element is not normalised
 * otherwise ("/y/${ORIGIN}z" becomes "/y//dir/of/objectz").
 *
 * Tokens: $ORIGIN and ${ORIGIN} are the directory of the object whose list or
 * DT_NEEDED it is: for the executable the directory of its real path (the
 * kernel's /proc/self/exe, so a symlinked executable gets the target's
 * directory; `ldd` differs here, it uses the path as given), for a library
 * the directory of the path it was found at, symlinks not resolved.
 * $LIB is "lib/x86_64-linux-gnu" (Debian's multiarch ld.so), $PLATFORM the
 * AT_PLATFORM glibc computes ("x86_64", or "haswell"/"xeon_phi" on some Intel
 * CPUs). A token must be followed by a character that cannot continue a
 * name ("$ORIGINX" stays as is); unknown tokens stay as they are.
 *
 * Candidates. A file that cannot be opened, or is a valid ELF of another
 * class or machine (a 32-bit libc in LD_LIBRARY_PATH), is skipped and the
 * search goes on. Any other defect (not an ELF, too short, an executable)
 * makes ld.so fail the launch: the name is reported missing with ld.so's
 * reason, and the search for it stops, as in ld.so.
 *
 * /etc/ld.so.cache: how it is read is ldcache.h's.
 *
 * Checked as a whole against `ldd` for every dynamically linked executable of
 * a Debian 12 system (675 in /usr/bin, /usr/sbin, /usr/libexec): same
 * objects, same order.
 *
 * Not modelled: secure-execution (setuid) restrictions, DT_FILTER and
 * DT_AUXILIARY, GLIBC_TUNABLES hwcap masks, LD_AUDIT, the PT_NOTE ABI tag
 * check, and libraries a program dlopen()s later.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util.h"

#include "dynlink.h"
#include "elfnotes.h"
#include "ldcache.h"
#include "ldhwcaps.h"
#include "ldpaths.h"

#define LD_PRELOAD_FILE		"/etc/ld.so.preload"
#define LD_DST_LIB		"lib/x86_64-linux-gnu"

static const char *const ld_system_dirs[] = {
	"/lib/x86_64-linux-gnu",
	"/usr/lib/x86_64-linux-gnu",
	"/lib",
	"/usr/lib",
};

struct ld_obj {
	char *path;		/* where it was found (made absolute); NULL for a placeholder */
	char *origin;		/* $ORIGIN */
	char **names;		/* names that refer to it (see the top comment) */
	size_t n_names;
	dev_t dev;
	ino_t ino;
	struct elf_dyninfo dyn;
	int loader;		/* the object whose dependency brought it in; -1 for the exe */
	bool listed;		/* part of the result */
	int fd;			/* opts->want_fds: the file examined, open; else -1 */
};

struct ld_state {
	struct ld_obj *objs;
	size_t n_objs, cap_objs;
	int *queue;		/* breadth-first order of objects whose DT_NEEDED to load */
	size_t n_queue, cap_queue;
	struct ld_hwcaps hw;	/* the hwcap subdirectories, $PLATFORM */
	struct ld_cache cache;
	bool have_cache;
	char **llp;		/* LD_LIBRARY_PATH, expanded */
	size_t n_llp;
	char *cwd;
	struct ld_opts *opts;
	size_t cap_missing;
	bool stopped;		/* a bound was reached: nothing more is looked up */
	unsigned int names;	/* names looked up so far */
};

enum try_result { TRY_NEXT, TRY_FOUND, TRY_FATAL };

/* The result will not be the whole of what ld.so maps: why (the first reason is kept). */
static void cut(struct ld_state *st, const char *why)
{
	if (st->opts->cut_short)
		return;
	st->opts->cut_short = 1;
	snprintf(st->opts->cut_reason, sizeof(st->opts->cut_reason), "%s", why);
}

/* Nothing more is looked up: what was found so far is the result. */
static void stop(struct ld_state *st, const char *why)
{
	cut(st, why);
	st->stopped = true;
}

/*
 * One file the search tries: `name` in `dir` (NULL: `name` is the whole path), which `path`
 * joins. A descriptor open for reading, or -errno.
 */
static int ld_open(struct ld_state *st, const char *dir, const char *name, const char *path)
{
	int fd;

	if (st->stopped)
		return -ECANCELED;
	if (!st->opts->open_file) {
		/*
		 * ld.so would block on a FIFO here; we would rather call it
		 * unreadable (fatal, see elf_check_loadable) than hang.
		 */
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		return fd < 0 ? -errno : fd;
	}
	fd = st->opts->open_file(st->opts->open_ctx, dir, name);
	if (fd == -ECANCELED)
		stop(st, "the search's budget of lookups or time was spent");
	return fd;
}

/* What the ELF readers are given to read fd: its path, or through the descriptor. */
static const char *read_path(const struct ld_state *st, int fd, const char *path, char buf[32])
{
	if (!st->opts->open_file)
		return path;
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
	return buf;
}


static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

static void strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int strv_push(char ***v, size_t *n, char *s)
{
	char **nv;

	if (!s)
		return -ENOMEM;
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[(*n)++] = s;
	*v = nv;
	return 0;
}

/* ---- search lists ---- */

/* Length of the token at `s` (after '$') if it is `name`, else 0. */
static size_t dst_match(const char *s, const char *name)
{
	size_t len = strlen(name);
	char c;

	if (s[0] == '{')
		return strncmp(s + 1, name, len) == 0 && s[len + 1] == '}' ? len + 2 : 0;
	if (strncmp(s, name, len) != 0)
		return 0;
	c = s[len];
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
		return 0;
	return len;
}

static char *expand_dst(const struct ld_state *st, const char *s, const char *origin)
{
	size_t len = 0, cap = strlen(s) + 1, n, vlen;
	char *out = malloc(cap), *nout;
	const char *val;

	if (!out)
		return NULL;
	while (*s) {
		val = NULL;
		n = 0;
		if (*s == '$') {
			if ((n = dst_match(s + 1, "ORIGIN")))
				val = origin;
			else if ((n = dst_match(s + 1, "PLATFORM")))
				val = st->hw.platform;
			else if ((n = dst_match(s + 1, "LIB")))
				val = LD_DST_LIB;
		}
		if (!val) {
			val = s;
			vlen = 1;
			n = 0;
		} else {
			vlen = strlen(val);
		}
		if (len + vlen + 1 > cap) {
			cap = (len + vlen + 1) * 2;
			nout = realloc(out, cap);
			if (!nout) {
				free(out);
				return NULL;
			}
			out = nout;
		}
		memcpy(out + len, val, vlen);
		len += vlen;
		s += n + 1;
	}
	out[len] = '\0';
	return out;
}

static u64 str_hash(const char *s)
{
	u64 h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return mix64(h);
}

/*
 * Split a search list into directories, tokens expanded against `origin`. A directory listed
 * again is dropped, as ld.so drops it (fillin_rpath): the same name searched twice finds
 * nothing new.
 */
static int split_list(const struct ld_state *st, const char *list, const char *seps,
		      const char *origin, char ***dirs, size_t *n)
{
	const char *p = list, *end;
	char *elem, *dir;
	struct hmap seen;
	size_t len;
	int ret;

	*dirs = NULL;
	*n = 0;
	hmap_init(&seen);
	for (;;) {
		end = p + strcspn(p, seps);
		len = end - p;
		while (len > 1 && p[len - 1] == '/')
			len--;
		elem = strndup(p, len);
		if (!elem)
			goto nomem;
		dir = expand_dst(st, elem, origin);
		free(elem);
		if (dir) {
			u64 h = str_hash(dir);
			uintptr_t at = (uintptr_t)hmap_get(&seen, h, strlen(dir));

			if (at && !strcmp((*dirs)[at - 1], dir)) {
				free(dir);
				goto next;
			}
			if (!at)
				hmap_put(&seen, h, strlen(dir), (void *)(uintptr_t)(*n + 1));
		}
		ret = strv_push(dirs, n, dir);
		if (ret)
			goto nomem;
next:
		if (!*end) {
			hmap_free(&seen);
			return 0;
		}
		p = end + 1;
	}
nomem:
	hmap_free(&seen);
	strv_free(*dirs, *n);
	*dirs = NULL;
	*n = 0;
	return -ENOMEM;
}

/* ---- objects ---- */

static int find_by_name(const struct ld_state *st, const char *name)
{
	size_t i, j;

	for (i = 0; i < st->n_objs; i++)
		for (j = 0; j < st->objs[i].n_names; j++)
			if (strcmp(st->objs[i].names[j], name) == 0)
				return i;
	return -1;
}

static int obj_add_name(struct ld_obj *o, const char *name)
{
	size_t j;

	for (j = 0; j < o->n_names; j++)
		if (strcmp(o->names[j], name) == 0)
			return 0;
	return strv_push(&o->names, &o->n_names, strdup(name));
}

static int new_obj(struct ld_state *st)
{
	struct ld_obj *n;

	if (st->n_objs == st->cap_objs) {
		size_t cap = st->cap_objs ? st->cap_objs * 2 : 16;

		n = realloc(st->objs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		st->objs = n;
		st->cap_objs = cap;
	}
	memset(&st->objs[st->n_objs], 0, sizeof(st->objs[0]));
	st->objs[st->n_objs].loader = -1;
	st->objs[st->n_objs].fd = -1;
	return st->n_objs++;
}

static int queue_push(struct ld_state *st, int idx)
{
	if (st->n_queue == st->cap_queue) {
		size_t cap = st->cap_queue ? st->cap_queue * 2 : 16;
		int *n = realloc(st->queue, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		st->queue = n;
		st->cap_queue = cap;
	}
	st->queue[st->n_queue++] = idx;
	return 0;
}

static char *make_absolute(const struct ld_state *st, const char *path)
{
	if (path[0] == '/')
		return strdup(path);
	return xasprintf("%s/%s", st->cwd, path);
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, slash - path);
}

static int add_missing(struct ld_state *st, const char *name, const char *needed_by, char *reason)
{
	struct ld_opts *o = st->opts;
	struct ld_missing *m;

	if (!reason)
		return -ENOMEM;
	if (o->n_missing == st->cap_missing) {
		size_t cap = st->cap_missing ? st->cap_missing * 2 : 8;

		m = realloc(o->missing, cap * sizeof(*m));
		if (!m) {
			free(reason);
			return -ENOMEM;
		}
		o->missing = m;
		st->cap_missing = cap;
	}
	m = &o->missing[o->n_missing];
	m->name = strdup(name);
	m->needed_by = strdup(needed_by);
	m->reason = reason;
	if (!m->name || !m->needed_by) {
		free(m->name);
		free(m->needed_by);
		free(m->reason);
		return -ENOMEM;
	}
	o->n_missing++;
	return 0;
}

/*
 * Try one file as ld.so would. TRY_FOUND sets *idx to the object (new or
 * already loaded); TRY_FATAL sets *reason; TRY_NEXT means keep searching.
 * Returns -ENOMEM through *oom only.
 */
static enum try_result try_file(struct ld_state *st, const char *dir, const char *name,
				const char *path, int loader, int *idx, char **reason, bool *oom)
{
	char why[256], dyn_err[512], fdp[32];
	struct ld_obj *o;
	struct stat sb;
	size_t i;
	int fd, ret, n;

	fd = ld_open(st, dir, name, path);
	if (fd < 0)
		return TRY_NEXT;
	ret = elf_check_loadable(fd, why, sizeof(why));
	if (ret == ELF_LOAD_SKIP) {
		close(fd);
		return TRY_NEXT;
	}
	if (ret < 0) {
		close(fd);
		*reason = xasprintf("%s: %s", path, why);
		*oom = !*reason;
		return TRY_FATAL;
	}
	ret = fstat(fd, &sb);
	if (ret < 0) {
		close(fd);
		return TRY_NEXT;
	}
	for (i = 0; i < st->n_objs; i++) {
		if (st->objs[i].path && st->objs[i].dev == sb.st_dev &&
		    st->objs[i].ino == sb.st_ino) {
			close(fd);
			*idx = i;
			return TRY_FOUND;
		}
	}

	n = new_obj(st);
	if (n < 0) {
		close(fd);
		goto nomem;
	}
	o = &st->objs[n];
	o->loader = loader;
	o->dev = sb.st_dev;
	o->ino = sb.st_ino;
	ret = elf_dynamic_info(read_path(st, fd, path, fdp), &o->dyn, dyn_err, sizeof(dyn_err));
	if (ret >= 0 && st->opts->want_fds)
		o->fd = fd;
	else
		close(fd);
	if (ret == -ENOMEM)
		goto nomem_obj;
	if (ret < 0) {
		*reason = strdup(dyn_err);
	} else if (o->dyn.elf_type == ET_EXEC) {
		*reason = xasprintf("%s: cannot dynamically load executable", path);
	} else if (o->dyn.flags_1 & DF_1_PIE) {
		*reason = xasprintf("%s: cannot dynamically load position-independent executable",
				    path);
	} else {
		o->path = make_absolute(st, path);
		o->origin = o->path ? dir_of(o->path) : NULL;
		if (!o->path || !o->origin || obj_add_name(o, path) ||
		    (o->dyn.soname && obj_add_name(o, o->dyn.soname)))
			goto nomem_obj;
		o->listed = true;
		*idx = n;
		return TRY_FOUND;
	}
	/* Not an object after all: drop the slot again. */
	elf_dyninfo_free(&o->dyn);
	if (o->fd >= 0)
		close(o->fd);
	st->n_objs--;
	*oom = !*reason;
	return TRY_FATAL;
nomem_obj:
	elf_dyninfo_free(&o->dyn);
	if (o->fd >= 0)
		close(o->fd);
	strv_free(o->names, o->n_names);
	free(o->path);
	free(o->origin);
	st->n_objs--;
nomem:
	*oom = true;
	return TRY_FATAL;
}

static enum try_result search_dirs(struct ld_state *st, char **dirs, size_t n_dirs,
				   const char *name, int loader, int *idx, char **reason,
				   bool *oom)
{
	enum try_result r;
	size_t i, j;

	for (i = 0; i < n_dirs; i++) {
		const char *d = dirs[i];
		const char *sep = d[0] && d[strlen(d) - 1] != '/' ? "/" : "";

		for (j = 0; j < st->hw.n_subdirs && !st->stopped; j++) {
			size_t sl = strlen(st->hw.subdirs[j]);
			char *path = xasprintf("%s%s%s%s", d, sep, st->hw.subdirs[j], name);
			/* The directory alone, for the opener: the subdirectory without its '/'. */
			char *dir = sl ? xasprintf("%s%s%.*s", d, sep, (int)(sl - 1), st->hw.subdirs[j])
				       : strdup(d);

			if (!path || !dir) {
				free(path);
				free(dir);
				*oom = true;
				return TRY_FATAL;
			}
			r = try_file(st, dir, name, path, loader, idx, reason, oom);
			free(path);
			free(dir);
			if (r != TRY_NEXT)
				return r;
		}
	}
	return TRY_NEXT;
}

static enum try_result search_list(struct ld_state *st, const char *list, const char *origin,
				   const char *name, int loader, int *idx, char **reason,
				   bool *oom)
{
	enum try_result r;
	char **dirs;
	size_t n;

	if (split_list(st, list, ":", origin, &dirs, &n)) {
		*oom = true;
		return TRY_FATAL;
	}
	r = search_dirs(st, dirs, n, name, loader, idx, reason, oom);
	strv_free(dirs, n);
	return r;
}

static bool in_system_dir(const char *path)
{
	size_t i, len;

	for (i = 0; i < sizeof(ld_system_dirs) / sizeof(ld_system_dirs[0]); i++) {
		len = strlen(ld_system_dirs[i]);
		if (strncmp(path, ld_system_dirs[i], len) == 0 && path[len] == '/')
			return true;
	}
	return false;
}

/* ld.so ignores DT_RPATH in an object that also has DT_RUNPATH. */
static const char *effective_rpath(const struct ld_obj *o)
{
	return o->dyn.runpath ? NULL : o->dyn.rpath;
}

/* The search of the top comment, steps 1 to 5, for a name without '/'. */
static enum try_result search_name(struct ld_state *st, const char *name, int loader, int *idx,
				   char **reason, bool *oom)
{
	/* Copies, not a pointer into st->objs: every try_file() may move the array. */
	const char *runpath = st->objs[loader].dyn.runpath;
	const char *origin = st->objs[loader].origin;
	bool nodeflib = st->objs[loader].dyn.flags_1 & DF_1_NODEFLIB;
	enum try_result r;
	int l;

	if (!runpath) {
		for (l = loader; l >= 0; l = st->objs[l].loader) {
			const char *rp = effective_rpath(&st->objs[l]);

			if (!rp)
				continue;
			r = search_list(st, rp, st->objs[l].origin, name, loader, idx, reason, oom);
			if (r != TRY_NEXT)
				return r;
		}
	}
	r = search_dirs(st, st->llp, st->n_llp, name, loader, idx, reason, oom);
	if (r != TRY_NEXT)
		return r;
	if (runpath) {
		r = search_list(st, runpath, origin, name, loader, idx, reason, oom);
		if (r != TRY_NEXT)
			return r;
	}
	if (st->have_cache) {
		const char *cached = ld_cache_find(&st->cache, name);

		if (cached && !(nodeflib && in_system_dir(cached))) {
			r = try_file(st, NULL, cached, cached, loader, idx, reason, oom);
			if (r != TRY_NEXT)
				return r;
		}
	}
	if (!nodeflib)
		return search_dirs(st, (char **)ld_system_dirs,
				   sizeof(ld_system_dirs) / sizeof(ld_system_dirs[0]), name,
				   loader, idx, reason, oom);
	return TRY_NEXT;
}

/*
 * Load `raw` for object `loader` unless it is loaded already. A new object
 * is queued for its own DT_NEEDED. Failures become a placeholder object that
 * answers to the name, so that every later reference to it matches (ld.so
 * reports a missing library once) and go to opts->missing.
 */
static int load_name(struct ld_state *st, const char *raw, int loader, const char *needed_by)
{
	char *name, *reason = NULL;
	enum try_result r;
	bool oom = false;
	int idx = -1, ret, ph;

	name = strchr(raw, '$') ? expand_dst(st, raw, st->objs[loader].origin) : strdup(raw);
	if (!name)
		return -ENOMEM;
	if (find_by_name(st, name) >= 0) {
		free(name);
		return 0;
	}
	if (st->opts->max_names && ++st->names > st->opts->max_names) {
		char why[96];

		snprintf(why, sizeof(why), "more than %u libraries to look up",
			 st->opts->max_names);
		stop(st, why);
	}
	if (st->stopped) {
		free(name);
		return 0;
	}
	if (strchr(name, '/'))
		r = try_file(st, NULL, name, name, loader, &idx, &reason, &oom);
	else
		r = search_name(st, name, loader, &idx, &reason, &oom);
	if (oom) {
		free(reason);
		free(name);
		return -ENOMEM;
	}
	if (st->stopped && r != TRY_FOUND) {
		/* Not missing: not looked for to the end. */
		free(reason);
		free(name);
		return 0;
	}
	if (r == TRY_FOUND) {
		ret = obj_add_name(&st->objs[idx], name);
		free(name);
		return ret;
	}
	if (r == TRY_NEXT)
		reason = strdup("not found");
	ret = add_missing(st, name, needed_by, reason);
	if (!ret) {
		ph = new_obj(st);
		if (ph < 0)
			ret = ph;
		else
			ret = obj_add_name(&st->objs[ph], name);
	}
	free(name);
	return ret;
}

static int load_preload_list(struct ld_state *st, const char *list, const char *seps,
			     const char *label)
{
	char *copy, *p, *tok;
	int ret = 0;

	copy = strdup(list);
	if (!copy)
		return -ENOMEM;
	p = copy;
	while ((tok = strsep(&p, seps))) {
		if (!*tok)
			continue;
		ret = load_name(st, tok, 0, label);
		if (ret)
			break;
	}
	free(copy);
	return ret;
}

/* /etc/ld.so.preload: '#' comments to the end of the line, then a list. */
static int load_preload_file(struct ld_state *st, const char *file)
{
	char *buf = NULL, *p;
	size_t len = 0;
	FILE *f;
	int ret, fd;

	fd = ld_open(st, NULL, file, file);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return 0;	/* absent or unreadable: ld.so silently goes on too */
	}
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		fclose(f);
		return 0;
	}
	fclose(f);
	for (p = buf; (p = strchr(p, '#'));)
		while (*p && *p != '\n')
			*p++ = ' ';
	ret = load_preload_list(st, buf, " \t\n:", file);
	free(buf);
	return ret;
}

/* Main object (index 0) and interpreter (index 1). */
static int load_exe(struct ld_state *st, const char *exe_path, char *err, size_t errlen)
{
	char real[PATH_MAX], dyn_err[512], fdp[32];
	const char *interp;
	struct ld_obj *o;
	struct stat sb;
	int ret, n, fd;

	if (stat(exe_path, &sb) < 0 || (!st->opts->origin && !realpath(exe_path, real))) {
		ret = -errno;
		errfmt(err, errlen, "%s: %s", exe_path, strerror(errno));
		return ret;
	}
	n = new_obj(st);
	if (n < 0)
		goto nomem;
	o = &st->objs[n];
	o->dev = sb.st_dev;
	o->ino = sb.st_ino;
	ret = elf_dynamic_info(exe_path, &o->dyn, err, errlen);
	if (ret)
		return ret;
	if (o->dyn.elf_type != ET_EXEC && o->dyn.elf_type != ET_DYN) {
		errfmt(err, errlen, "%s: not an executable (ELF type %d)", exe_path,
		       o->dyn.elf_type);
		return -ENOEXEC;
	}
	o->path = make_absolute(st, exe_path);
	o->origin = st->opts->origin ? strdup(st->opts->origin) : dir_of(real);
	if (!o->path || !o->origin)
		goto nomem;
	/* The executable answers to its soname only (ld.so names it ""). */
	if (o->dyn.soname && obj_add_name(o, o->dyn.soname))
		goto nomem;
	if (!o->dyn.interp)
		return 0;

	interp = o->dyn.interp;
	fd = ld_open(st, NULL, interp, interp);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		ret = fd < 0 ? fd : -errno;
		errfmt(err, errlen, "%s: interpreter %s: %s", exe_path, interp, strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	n = new_obj(st);
	if (n < 0) {
		close(fd);
		goto nomem;
	}
	o = &st->objs[n];
	o->dev = sb.st_dev;
	o->ino = sb.st_ino;
	o->loader = 0;
	ret = elf_dynamic_info(read_path(st, fd, st->objs[0].dyn.interp, fdp), &o->dyn, dyn_err,
			       sizeof(dyn_err));
	if (ret || !st->opts->want_fds)
		close(fd);
	else
		o->fd = fd;
	if (ret) {
		errfmt(err, errlen, "%s: interpreter: %s", exe_path, dyn_err);
		return ret;
	}
	o->path = make_absolute(st, st->objs[0].dyn.interp);
	o->origin = o->path ? dir_of(o->path) : NULL;
	if (!o->path || !o->origin || obj_add_name(o, st->objs[0].dyn.interp) ||
	    (o->dyn.soname && obj_add_name(o, o->dyn.soname)))
		goto nomem;
	o->listed = true;
	return 0;
nomem:
	errfmt(err, errlen, "%s: out of memory", exe_path);
	return -ENOMEM;
}

static void state_free(struct ld_state *st)
{
	size_t i;

	for (i = 0; i < st->n_objs; i++) {
		struct ld_obj *o = &st->objs[i];

		free(o->path);
		free(o->origin);
		strv_free(o->names, o->n_names);
		elf_dyninfo_free(&o->dyn);
		if (o->fd >= 0)
			close(o->fd);
	}
	free(st->objs);
	free(st->queue);
	strv_free(st->llp, st->n_llp);
	ld_cache_free(&st->cache);
	free(st->cwd);
}

void ld_paths_free(char **paths, size_t n)
{
	strv_free(paths, n);
}

int ld_path_is_loader(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld64.so", 7);
}

void ld_opts_release(struct ld_opts *opts)
{
	size_t i;

	if (!opts)
		return;
	for (i = 0; i < opts->n_missing; i++) {
		free(opts->missing[i].name);
		free(opts->missing[i].needed_by);
		free(opts->missing[i].reason);
	}
	free(opts->missing);
	opts->missing = NULL;
	opts->n_missing = 0;
	opts->cache_error[0] = '\0';
	for (i = 0; i < opts->n_fds; i++)
		if (opts->fds[i] >= 0)
			close(opts->fds[i]);
	free(opts->fds);
	opts->fds = NULL;
	opts->n_fds = 0;
	opts->cut_short = 0;
	opts->cut_reason[0] = '\0';
}

int ld_resolve_needed(const char *exe_path, char ***paths_out, size_t *n_out,
		      struct ld_opts *opts, char *err, size_t errlen)
{
	const char *llp, *preload, *preload_file, *cache_file;
	struct ld_opts local_opts = {0};
	struct ld_state st = {0};
	char **paths = NULL;
	size_t n_paths = 0, q, i;
	int ret;

	*paths_out = NULL;
	*n_out = 0;
	if (!opts)
		opts = &local_opts;
	ld_opts_release(opts);
	st.opts = opts;

	llp = opts->library_path ? opts->library_path : getenv("LD_LIBRARY_PATH");
	preload = opts->preload ? opts->preload : getenv("LD_PRELOAD");
	preload_file = opts->preload_file ? opts->preload_file : LD_PRELOAD_FILE;
	cache_file = opts->cache_file ? opts->cache_file : LD_CACHE_FILE;

	st.cwd = opts->cwd ? strdup(opts->cwd) : getcwd(NULL, 0);
	if (!st.cwd) {
		ret = -errno;
		errfmt(err, errlen, "cannot get the current directory: %s", strerror(errno));
		goto out;
	}
	ld_hwcaps_init(&st.hw);

	ret = load_exe(&st, exe_path, err, errlen);
	if (ret)
		goto out;
	if (st.objs[0].dyn.is_static || !st.objs[0].dyn.interp) {
		/* Nothing maps libraries for it: a static or static-pie program. */
		ret = 0;
		goto out;
	}

	if (cache_file[0] && opts->open_file) {
		int fd = ld_open(&st, NULL, cache_file, cache_file);

		if (fd < 0) {
			errfmt(opts->cache_error, sizeof(opts->cache_error), "%s: %s", cache_file,
			       strerror(-fd));
			ret = fd;
		} else {
			ret = ld_cache_load_fd(&st.cache, fd, cache_file, opts->cache_error,
					    sizeof(opts->cache_error));
		}
		if (ret == -ENOMEM)
			goto nomem;
		st.have_cache = ret == 0;
		if (ret == -ENOENT)
			opts->cache_error[0] = '\0';	/* no cache is a valid setup */
	} else if (cache_file[0]) {
		ret = ld_cache_load(&st.cache, cache_file, opts->cache_error,
				 sizeof(opts->cache_error));
		if (ret == -ENOMEM)
			goto nomem;
		st.have_cache = ret == 0;
		if (ret == -ENOENT)
			opts->cache_error[0] = '\0';	/* no cache is a valid setup */
	}
	if (llp && llp[0]) {
		const char *end = llp;
		unsigned int entries = 1;
		char *kept = NULL;

		/* The first max_library_path entries, the rest said to be left out. */
		for (; *end && (!opts->max_library_path || entries <= opts->max_library_path); end++)
			entries += *end == ':' || *end == ';';
		if (*end) {
			char why[128];

			for (const char *p = end; *p; p++)
				entries += *p == ':' || *p == ';';
			snprintf(why, sizeof(why), "LD_LIBRARY_PATH has %u entries: the first %u "
				 "were searched", entries, opts->max_library_path);
			cut(&st, why);
			kept = strndup(llp, end - 1 - llp);
			if (!kept)
				goto nomem;
		}
		ret = split_list(&st, kept ? kept : llp, ":;", st.objs[0].origin, &st.llp,
				 &st.n_llp);
		free(kept);
		if (ret)
			goto nomem;
	}

	ret = queue_push(&st, 0);
	if (ret)
		goto nomem;
	if (preload && preload[0]) {
		size_t before = st.n_objs;

		ret = load_preload_list(&st, preload, " :", "LD_PRELOAD");
		if (ret)
			goto nomem;
		for (i = before; i < st.n_objs; i++)
			if (st.objs[i].listed && queue_push(&st, i))
				goto nomem;
	}
	if (preload_file[0]) {
		size_t before = st.n_objs;

		ret = load_preload_file(&st, preload_file);
		if (ret)
			goto nomem;
		for (i = before; i < st.n_objs; i++)
			if (st.objs[i].listed && queue_push(&st, i))
				goto nomem;
	}

	for (q = 0; q < st.n_queue && !st.stopped; q++) {
		int cur = st.queue[q];
		size_t k;

		for (k = 0; k < st.objs[cur].dyn.n_needed && !st.stopped; k++) {
			size_t before = st.n_objs;
			const char *by = cur == 0 ? exe_path : st.objs[cur].path;

			ret = load_name(&st, st.objs[cur].dyn.needed[k], cur, by);
			if (ret)
				goto nomem;
			for (i = before; i < st.n_objs; i++)
				if (st.objs[i].listed && queue_push(&st, i))
					goto nomem;
		}
	}

	if (opts->want_fds) {
		opts->fds = malloc((st.n_objs + 1) * sizeof(*opts->fds));
		if (!opts->fds)
			goto nomem;
	}
	for (i = 0; i < st.n_objs; i++) {
		if (!st.objs[i].listed)
			continue;
		ret = strv_push(&paths, &n_paths, strdup(st.objs[i].path));
		if (ret)
			goto nomem;
		if (opts->want_fds) {
			opts->fds[opts->n_fds++] = st.objs[i].fd;
			st.objs[i].fd = -1;
		}
	}
	if (opts == &local_opts && opts->n_missing) {
		errfmt(err, errlen, "%s (needed by %s): %s", opts->missing[0].name,
		       opts->missing[0].needed_by, opts->missing[0].reason);
		ret = -ENOENT;
		goto out;
	}
	*paths_out = paths;
	*n_out = n_paths;
	paths = NULL;
	n_paths = 0;
	ret = 0;
	goto out;
nomem:
	errfmt(err, errlen, "%s: out of memory while resolving libraries", exe_path);
	ret = -ENOMEM;
out:
	strv_free(paths, n_paths);
	if (ret && opts != &local_opts)
		ld_opts_release(opts);
	ld_opts_release(&local_opts);
	state_free(&st);
	return ret;
}

void ld_env_vars(const char *env, size_t len, char **lib, char **preload)
{
	for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
		const char *v = env + off;

		if (!*lib && !strncmp(v, "LD_LIBRARY_PATH=", 16))
			*lib = xstrdup(v + 16);
		else if (!*preload && !strncmp(v, "LD_PRELOAD=", 11))
			*preload = xstrdup(v + 11);
	}
}
