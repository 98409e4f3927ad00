// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Opening files as another process names them, never waiting on a filesystem: see procview.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include "procview.h"
#include "safeopen.h"

#define PV_MAX_LINKS 40	  /* symlinks in one path, as the kernel allows */
#define PV_MAX_DIR_FDS 64 /* directory descriptors kept; past that, walked again each time */
#define PV_MOUNTINFO_MAX (16u << 20)

/* A mount of the process's namespace. */
struct pv_mount {
	bool may_hang;
	char type[40];
};

/* A directory walked: its descriptor (or -1 if not kept), or why there is none. */
struct pv_dir {
	char *path;
	int fd;
	int err; /* 0, or the negative errno of the walk */
};

bool fs_type_may_hang(const char *type)
{
	/*
	 * Local disk and memory filesystems: a lookup or a read waits for a disk at most. overlay
	 * is one of them only if its layers are: layers a user mounted in a namespace of their own
	 * can be FUSE (then the examiner may wait, and is replaced: execgate.c).
	 */
	static const char *const local[] = {
		"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs", "devtmpfs",
		"overlay", "squashfs", "erofs", "iso9660", "udf", "vfat", "msdos", "exfat", "ntfs3",
		"jfs", "nilfs2", "zfs", "bcachefs", "reiserfs", "hfsplus",
	};

	for (size_t i = 0; i < ARRAY_SIZE(local); i++)
		if (!strcmp(type, local[i]))
			return false;
	return true;
}

/* The type of a mount of dev in a mountinfo file: 1 found, 0 not listed, -1 unreadable. */
static int mountinfo_dev_type(const char *path, dev_t dev, char *type, size_t len)
{
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return -1;
	while (!found && getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char t[40];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 ||
		    makedev(maj, min) != dev || sscanf(sep + 3, "%39s", t) != 1)
			continue;
		snprintf(type, len, "%s", t);
		found = 1;
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The kernel's own tmpfs mount, which memfd_create() and shared anonymous memory use and no
 * mountinfo lists: its device, found from a memfd of corobpf's own; 0 if none could be made.
 */
static dev_t internal_shm_dev(void)
{
	static dev_t dev;
	static bool known;
	struct stat st;
	int fd;

	if (known)
		return dev;
	known = true;
	fd = memfd_create("corobpf-shm-dev", MFD_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0)
		dev = st.st_dev;
	if (fd >= 0)
		close(fd);
	return dev;
}

bool dev_may_hang(u32 pid, dev_t dev, char *type, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%u/mountinfo", pid);
	if (mountinfo_dev_type(path, dev, type, len) == 1 ||
	    mountinfo_dev_type("/proc/self/mountinfo", dev, type, len) == 1)
		return fs_type_may_hang(type);
	if (dev && dev == internal_shm_dev()) {
		snprintf(type, len, "tmpfs");
		return false;
	}
	snprintf(type, len, "a mount no mountinfo lists");
	return true;
}

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000 + (u64)ts.tv_nsec;
}

bool proc_view_spent(struct proc_view *v)
{
	return v->lookups >= v->max_lookups || (v->deadline_ns && now_ns() >= v->deadline_ns);
}

/* One lookup of one name in dirfd, counted. A descriptor or -errno. */
static int lookup(struct proc_view *v, int dirfd, const char *name, u64 resolve)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = resolve};
	long fd;

	if (proc_view_spent(v))
		return -ECANCELED;
	v->lookups++;
	fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

static void forget_mounts(struct proc_view *v)
{
	size_t it = 0;
	u64 k1, k2;
	void *val;

	while (hmap_next(&v->mounts, &it, &k1, &k2, &val))
		free(val);
	hmap_clear(&v->mounts);
}

/* Mounts by ID, from a mountinfo file, added to those known. */
static void read_mountinfo(struct proc_view *v, const char *path)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	do {
		if (len + 65536 + 1 > cap) {
			cap = cap ? 2 * cap : 131072;
			buf = xrealloc(buf, cap);
		}
		n = read(fd, buf + len, cap - len - 1);
		len += n > 0 ? (size_t)n : 0;
	} while (n > 0 && len < PV_MOUNTINFO_MAX);
	close(fd);
	if (!buf)
		return;
	buf[len] = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sep = strstr(line, " - ");
		struct pv_mount *m;
		unsigned long id;

		if (!sep || sscanf(line, "%lu", &id) != 1)
			continue;
		m = xcalloc(1, sizeof(*m));
		if (sscanf(sep + 3, "%39s", m->type) != 1) {
			free(m);
			continue;
		}
		m->may_hang = fs_type_may_hang(m->type);
		free(hmap_get(&v->mounts, id, 0));
		hmap_put(&v->mounts, id, 0, m);
	}
	free(buf);
}

/*
 * The mounts the process sees, by ID (IDs are the system's: one ID, one mount). Its own
 * mountinfo lists only those under its root, so a chroot's would lack the mount the chroot is
 * in: corobpf's own list those of its namespace, which a chroot in it shares. A mount in no
 * list (a chroot inside another namespace) is not entered.
 */
static void read_mounts(struct proc_view *v, bool ours)
{
	char path[64];

	if (!v->mounts_read)
		forget_mounts(v);
	v->mounts_read = true;
	snprintf(path, sizeof(path), "/proc/%u/mountinfo", v->pid);
	read_mountinfo(v, path);
	if (ours)
		read_mountinfo(v, "/proc/self/mountinfo");
}

/* The mount a descriptor is on, from /proc/self/fdinfo: no call into its filesystem. */
static long mount_id(int fd)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "mnt_id:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

/* 0 if fd is on a filesystem that cannot hang; -EREMOTE (noted, with `where`) if it may. */
static int check_mount(struct proc_view *v, int fd, const char *where)
{
	long id = mount_id(fd);
	struct pv_mount *m = NULL;

	if (id >= 0) {
		if (!v->mounts_read)
			read_mounts(v, false);
		m = hmap_get(&v->mounts, (u64)id, 0);
		if (!m) {
			/* Mounted since the table was read, or what its chroot is in. */
			read_mounts(v, true);
			m = hmap_get(&v->mounts, (u64)id, 0);
		}
	}
	if (m && !m->may_hang)
		return 0;
	/* A mount the process's table does not list is not entered either. */
	if (!v->refused++)
		snprintf(v->refused_what, sizeof(v->refused_what), "%s (%s)", where,
			 m ? m->type : "a mount its mountinfo does not list");
	return -EREMOTE;
}

static bool same_dir(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/*
 * Walks `path` from `start` (an O_PATH directory descriptor, not consumed), an absolute path
 * from the process's root. Returns an O_PATH descriptor of what the path names, or -errno.
 * `shown` is the path as a person reads it, for the note of a refused mount.
 */
static int walk(struct proc_view *v, int start, const char *path, const char *shown)
{
	char *rest = xmalloc(2 * PATH_MAX + 2), *target = xmalloc(PATH_MAX + 1);
	int cur = start, links = 0, ret;
	size_t len = strlen(path);

	if (len > 2 * PATH_MAX) {
		ret = -ENAMETOOLONG;
		goto out;
	}
	memcpy(rest, path, len + 1);
	for (char *p = rest;;) {
		char *comp, *slash;
		int next;

		if (*p == '/') {
			if (cur != start && cur != v->root)
				close(cur);
			cur = v->root;
			while (*p == '/')
				p++;
		}
		if (!*p)
			break;
		comp = p;
		slash = strchr(p, '/');
		if (slash) {
			*slash = 0;
			p = slash + 1;
			while (*p == '/')
				p++;
		} else {
			p += strlen(p);
		}
		if (!strcmp(comp, "."))
			continue;
		/* ".." never leads above the process's root, as chroot(2) has it. */
		if (!strcmp(comp, "..") && same_dir(cur, v->root_dev, v->root_ino))
			continue;
		next = lookup(v, cur, comp, RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS);
		if (next == -ELOOP) {
			/* A symlink: its target, then the rest of the path, from where it is. */
			ssize_t n = readlinkat(cur, comp, target, PATH_MAX);
			size_t tail = strlen(p);

			if (n <= 0 || ++links > PV_MAX_LINKS || (size_t)n + 1 + tail > 2 * PATH_MAX) {
				ret = n < 0 ? -errno : -ELOOP;
				goto out;
			}
			target[n] = 0;
			memmove(rest + n + 1, p, tail + 1);
			memcpy(rest, target, n);
			rest[n] = '/';
			p = rest;
			continue;
		}
		if (next == -EXDEV) {
			/* A mount: entered without a lookup in it, then judged by its type. */
			next = lookup(v, cur, comp, RESOLVE_NO_SYMLINKS);
			if (next >= 0 && check_mount(v, next, shown) < 0) {
				close(next);
				next = -EREMOTE;
			}
		}
		if (next < 0) {
			ret = next;
			goto out;
		}
		if (cur != start && cur != v->root)
			close(cur);
		cur = next;
	}
	ret = cur == start || cur == v->root ? fcntl(cur, F_DUPFD_CLOEXEC, 0) : cur;
	if (ret < 0)
		ret = -errno;
	cur = start;
out:
	if (cur != start && cur != v->root)
		close(cur);
	free(rest);
	free(target);
	return ret;
}

static u64 path_hash(const char *s)
{
	u64 h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (u8)*s) * 0x100000001b3ULL;
	return mix64(h);
}

/*
 * A directory as the process names it: a descriptor the caller must not close (kept, or
 * `*owned` set: the caller closes it), or -errno (remembered too).
 */
static int dir_fd(struct proc_view *v, const char *dir, bool *owned)
{
	u64 h = path_hash(dir), k2 = strlen(dir);
	struct pv_dir *d = hmap_get(&v->dirs, h, k2);
	struct stat st;
	int fd, start;

	*owned = false;
	if (d && !strcmp(d->path, dir) && (d->fd >= 0 || d->err))
		return d->fd >= 0 ? d->fd : d->err;
	start = dir[0] == '/' ? v->root : v->cwd;
	if (start < 0)
		return -ENOENT;
	fd = walk(v, start, dir[0] ? dir : ".", dir);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))) {
		close(fd);
		fd = -ENOTDIR;
	}
	if (fd == -ECANCELED)
		return fd; /* the budget, not the directory */
	if (d && strcmp(d->path, dir))
		goto uncached; /* another path with the same hash: not remembered */
	if (!d) {
		d = xcalloc(1, sizeof(*d));
		d->path = xstrdup(dir);
		d->fd = -1;
		hmap_put(&v->dirs, h, k2, d);
	}
	if (fd < 0) {
		d->err = fd;
		return fd;
	}
	if (v->dir_fds < PV_MAX_DIR_FDS) {
		v->dir_fds++;
		d->fd = fd;
		return fd;
	}
uncached:
	*owned = fd >= 0;
	return fd;
}

int proc_view_open(struct proc_view *v, const char *dir, const char *name)
{
	char *copy = NULL;
	const char *base;
	bool owned;
	int dfd, fd;

	if (!dir) {
		/* A whole path: its directory is remembered like any other. */
		const char *slash = strrchr(name, '/');

		if (!slash)
			return proc_view_open(v, "", name);
		copy = xstrdup(name);
		copy[slash - name + (slash == name)] = 0;
		base = slash + 1;
		fd = *base ? proc_view_open(v, copy, base) : -EISDIR;
		free(copy);
		return fd;
	}
	dfd = dir_fd(v, dir, &owned);
	if (dfd < 0)
		return dfd;
	if (strchr(name, '/')) {
		fd = walk(v, dfd, name, dir);
	} else {
		fd = lookup(v, dfd, name, RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS);
		/* A symlink (a library's usual soname link) or a mount: walked. */
		if (fd == -ELOOP || fd == -EXDEV)
			fd = walk(v, dfd, name, dir);
	}
	if (owned)
		close(dfd);
	return fd < 0 ? fd : open_regular_fd(fd);
}

int proc_view_init(struct proc_view *v, u32 pid, u32 max_lookups, u64 deadline_ns)
{
	char path[64];
	struct stat st;
	int ret;

	memset(v, 0, sizeof(*v));
	v->pid = pid;
	v->cwd = -1;
	v->max_lookups = max_lookups;
	v->deadline_ns = deadline_ns;
	hmap_init(&v->mounts);
	hmap_init(&v->dirs);
	snprintf(path, sizeof(path), "/proc/%u/root", pid);
	/* A magic link: the directory itself, no lookup in its filesystem. */
	v->root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (v->root < 0)
		return -errno;
	ret = check_mount(v, v->root, "its root");
	if (ret < 0)
		return ret;
	if (fstat(v->root, &st) < 0)
		return -errno;
	v->root_dev = st.st_dev;
	v->root_ino = st.st_ino;
	snprintf(path, sizeof(path), "/proc/%u/cwd", pid);
	v->cwd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (v->cwd >= 0 && check_mount(v, v->cwd, "its current directory") < 0) {
		close(v->cwd);
		v->cwd = -1;
	}
	return 0;
}

void proc_view_release(struct proc_view *v)
{
	size_t it = 0;
	u64 k1, k2;
	void *val;

	while (hmap_next(&v->dirs, &it, &k1, &k2, &val)) {
		struct pv_dir *d = val;

		if (d->fd >= 0)
			close(d->fd);
		free(d->path);
		free(d);
	}
	forget_mounts(v);
	hmap_free(&v->dirs);
	hmap_free(&v->mounts);
	if (v->root >= 0)
		close(v->root);
	if (v->cwd >= 0)
		close(v->cwd);
	v->root = v->cwd = -1;
}
