/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * procview.h: opening files by the paths another process would open them by, from its root
 * (its chroot, its mount namespace) and its current directory, without ever waiting on a
 * filesystem that can hang and without following a path out of that root.
 *
 * The exec gate's search (execsearch.c) runs as root on paths a user chose: the
 * LD_LIBRARY_PATH of the process that execs, the RUNPATH of its program. A lookup in a FUSE
 * directory whose daemon never answers waits for ever, and no signal ends that wait; so does
 * one on a network filesystem whose server is gone. So every path is walked one component at
 * a time, from a descriptor of the process's root (/proc/PID/root) or current directory:
 *
 *   - a name is looked up only in a directory whose filesystem cannot hang (fs_type_may_hang):
 *     each lookup stays on its mount (RESOLVE_NO_XDEV); where it would cross one, the mount
 *     reached is opened without a lookup in it (O_PATH), found by its mount ID (which
 *     /proc/self/fdinfo gives without calling into the filesystem) in the process's
 *     /proc/PID/mountinfo, and refused (-EREMOTE) unless its type is one that cannot hang;
 *   - symlinks are followed as the process would follow them: an absolute one from its root,
 *     ".." never above its root, at most 40 in one path; magic links (/proc/PID/fd/N) never;
 *   - only a regular file is opened for reading (never a FIFO or a device), through the
 *     descriptor the walk ended on.
 *
 * Every lookup counts against a budget (a number of lookups and a deadline); past it, every
 * call fails with -ECANCELED. Directories are remembered, found or not, so a search that tries
 * many names in the same directories looks each name up once.
 */
#ifndef COROBPF_PROCVIEW_H
#define COROBPF_PROCVIEW_H

#include <stdbool.h>
#include <sys/types.h>
#include "util.h"

struct proc_view {
	u32 pid;
	int root, cwd; /* O_PATH descriptors; cwd -1 if it could not be had */
	dev_t root_dev;
	ino_t root_ino;
	struct hmap mounts; /* mount ID -> 1 (cannot hang) or 2 (may hang) */
	bool mounts_read;
	struct hmap dirs; /* directories walked: hash of the path -> struct pv_dir */
	u32 dir_fds;	  /* descriptors kept in dirs */
	u32 lookups, max_lookups;
	u64 deadline_ns; /* CLOCK_MONOTONIC; 0: none */
	/* Directories not entered because their filesystem may hang: how many, the first. */
	u32 refused;
	char refused_what[256];
};

/*
 * Process pid's view, with a budget of max_lookups lookups until deadline_ns
 * (CLOCK_MONOTONIC). 0, or -errno: the process is gone, or its root is on a filesystem that
 * may hang (-EREMOTE).
 */
int proc_view_init(struct proc_view *v, u32 pid, u32 max_lookups, u64 deadline_ns);
void proc_view_release(struct proc_view *v);

/*
 * The regular file `name` in directory `dir` (dir NULL: name is the whole path), both as
 * process pid names them (relative ones from its current directory), open for reading. A
 * descriptor, or -errno: -ENOENT and the like as open(2) gives them, -EINVAL (not a regular
 * file), -EREMOTE (the path leads into a filesystem that may hang), -ELOOP, -ECANCELED (the
 * budget is spent).
 */
int proc_view_open(struct proc_view *v, const char *dir, const char *name);

/* The budget is spent: the lookups, or the time. */
bool proc_view_spent(struct proc_view *v);

/*
 * Types of filesystem a lookup or read can wait on for ever, or where reading a "file" reads
 * something else (proc: another process's memory): everything but local disk and memory
 * filesystems.
 */
bool fs_type_may_hang(const char *type);

/*
 * Whether a file on device dev (as /proc/PID/maps gives it: the superblock's) lives on a
 * filesystem that may hang, decided from process pid's mountinfo, then corobpf's own, without
 * a call into any filesystem: true (type names it) if its type may hang, or if no mount of dev
 * is listed (a mount detached since, whose type cannot be told) and it is not the kernel's own
 * tmpfs of memfds; false if it cannot hang.
 */
bool dev_may_hang(u32 pid, dev_t dev, char *type, size_t len);

#endif /* COROBPF_PROCVIEW_H */
