/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * atattach.h: the kernel's view of a process attached while it runs (-p): its
 * threads off the CPU at the attach start their off-CPU stretches there. What
 * its scheduler says exists is announce.h's.
 */
#ifndef COROBPF_ATATTACH_H
#define COROBPF_ATATTACH_H

#include <stdbool.h>
#include "util.h"

struct corobpf_bpf;

/* Each thread of pid off the CPU now starts an off-CPU stretch (nothing under --no-sched). */
void offcpu_at_attach(struct corobpf_bpf *skel, bool no_sched, u32 pid);

#endif /* COROBPF_ATATTACH_H */
