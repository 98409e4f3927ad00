/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * safeopen.h: opening files that other users can name or swap.
 *
 * corobpf runs as root and reads the objects other users' processes map.
 * Their paths come from /proc/PID/maps, a raw capture or a JSONL file, and
 * the user who owns the process (or the directory the file is in) decides
 * what is at that path when root opens it: a FIFO (open() blocks forever),
 * a device (open() has side effects), a symlink into root's own files, or
 * a file swapped in for the one that was mapped. Every open of such a path
 * goes through here:
 *
 *   - nothing but a regular file is ever opened for reading: the path is
 *     first opened with O_PATH (no open routine of a device or FIFO runs),
 *     checked with fstat(), and only then reopened for reading through the
 *     descriptor;
 *   - a mapped object is opened through /proc/PID/map_files, the exact file
 *     the process maps, with no path resolution at all; where that is not
 *     allowed, through the process's root with openat2(RESOLVE_IN_ROOT), so
 *     an absolute symlink planted there cannot lead out of it, and the file
 *     found must be the one mapped (device and inode).
 *
 * Each returns a descriptor opened O_RDONLY | O_CLOEXEC, or a negative errno:
 * -EINVAL when the path names something other than a regular file, -ESTALE
 * when the file at the path is not the one mapped.
 */
#ifndef COROBPF_SAFEOPEN_H
#define COROBPF_SAFEOPEN_H

#include <stdint.h>
#include <sys/types.h>

/* A regular file by path, resolved as usual (the invoker's own namespace). */
int open_regular(const char *path);

/*
 * A regular file named by an O_PATH descriptor (consumed), reopened for reading through it:
 * the very file the descriptor names, whatever its path names now.
 */
int open_regular_fd(int pathfd);

/* A regular file by path inside process pid's root directory (its chroot, if any). */
int open_regular_in_root(unsigned int pid, const char *path);

/*
 * The file process pid maps at [start, end), which /proc/PID/maps says is
 * `path` on device dev (major:minor) with inode ino.
 */
int open_mapped_object(unsigned int pid, uint64_t start, uint64_t end, dev_t dev, uint64_t ino,
		       const char *path);

/* "/proc/self/fd/N": a path that names exactly the open file fd, for APIs that take paths. */
void fd_path(char buf[32], int fd);

#endif /* COROBPF_SAFEOPEN_H */
