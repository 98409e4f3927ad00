/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * procfs.h: what corobpf reads of a process or thread in /proc by its id.
 * The process may be gone: each reader says so (an error, an empty name)
 * and never blocks on it.
 */
#ifndef COROBPF_PROCFS_H
#define COROBPF_PROCFS_H

#include "util.h"

/* /proc/PID/status: its thread group and parent. 0 or -errno. */
int proc_read_status(u32 pid, u32 *tgid, u32 *ppid);
/* /proc/PID/task/TID/comm, control characters made '?'; empty if gone. */
void proc_read_comm(u32 pid, u32 tid, char comm[16]);

#endif /* COROBPF_PROCFS_H */
