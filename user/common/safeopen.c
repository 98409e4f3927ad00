// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Opening files that other users can name or swap: see safeopen.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include "safeopen.h"

void fd_path(char buf[32], int fd)
{
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

/*
 * From a descriptor opened with O_PATH: a readable descriptor of the same
 * file if it is a regular file (optionally the expected dev/ino), else an
 * error. Consumes pathfd.
 */
static int reopen_regular(int pathfd, const dev_t *dev, const uint64_t *ino)
{
	char self[32];
	struct stat st;
	int fd, e;

	if (fstat(pathfd, &st) < 0) {
		e = -errno;
		close(pathfd);
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(pathfd);
		return -EINVAL;
	}
	if (dev && (st.st_dev != *dev || (uint64_t)st.st_ino != *ino)) {
		close(pathfd);
		return -ESTALE;
	}
	/* Reopening an O_PATH descriptor through procfs opens that very inode. */
	fd_path(self, pathfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	e = -errno;
	close(pathfd);
	return fd >= 0 ? fd : e;
}

int open_regular_fd(int pathfd)
{
	return reopen_regular(pathfd, NULL, NULL);
}

int open_regular(const char *path)
{
	int fd = open(path, O_PATH | O_CLOEXEC);

	return fd < 0 ? -errno : reopen_regular(fd, NULL, NULL);
}

static int openat2_path(int dirfd, const char *path, uint64_t resolve)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = resolve,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static int open_in_root(unsigned int pid, const char *path, const dev_t *dev, const uint64_t *ino)
{
	char root[48];
	int rootfd, fd;

	snprintf(root, sizeof(root), "/proc/%u/root", pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	/* Symlinks resolve as if chrooted there; procfs magic links are not followed. */
	fd = openat2_path(rootfd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	close(rootfd);
	return fd < 0 ? fd : reopen_regular(fd, dev, ino);
}

int open_regular_in_root(unsigned int pid, const char *path)
{
	return open_in_root(pid, path, NULL, NULL);
}

int open_mapped_object(unsigned int pid, uint64_t start, uint64_t end, dev_t dev, uint64_t ino,
		       const char *path)
{
	char mf[96];
	int fd, e;

	snprintf(mf, sizeof(mf), "/proc/%u/map_files/%llx-%llx", pid, (unsigned long long)start,
		 (unsigned long long)end);
	fd = open(mf, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		return reopen_regular(fd, NULL, NULL);
	e = -errno;
	/* map_files needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE); the process may be gone. */
	if (e != -EPERM && e != -EACCES)
		return e;
	if (strstr(path, " (deleted)"))
		return -ESTALE;
	return open_in_root(pid, path, &dev, &ino);
}
