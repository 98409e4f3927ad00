/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * preflight.h: what a live capture needs of the kernel (BTF, ring buffers,
 * task storage, uprobe_multi links) and of its own privileges (root, or
 * CAP_BPF and CAP_PERFMON), asked before anything is opened, each lack
 * said with what to do; libbpf's own messages routed through log.h.
 */
#ifndef COROBPF_PREFLIGHT_H
#define COROBPF_PREFLIGHT_H

#include <stdbool.h>

/* 0, or the exit code of what is missing (said). */
int capture_preflight(void);
/* The kernel has uprobe_multi links (6.6): its BTF knows their type. */
bool kernel_has_uprobe_multi(void);

#endif /* COROBPF_PREFLIGHT_H */
