/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * attach.h: which objects carry corobpf probes (or context-switch
 * functions), and attaching to them. Called by the capture (capture.c) in
 * its attach step and when a process execs or dlopens:
 *
 *   attach_scan_process   -p PID: the objects it maps, opened safely (safeopen.h)
 *   attach_switch_path    then, without probes (or with --switch): its switch functions
 *   attach_scan_global    -a, --follow: an object attached once for every process
 *   attach_launch_prepare -- CMD: fork it held, attach to what it will load, before it runs
 *
 * Every failure is counted in the capture's user stats and said once.
 */
#ifndef COROBPF_ATTACH_H
#define COROBPF_ATTACH_H

#include <stdbool.h>
#include "capture.h"

/* Returns 0, or an exit code (the process is gone, its maps unreadable: another user's). */
int attach_scan_process(struct capture *c, struct target *t, bool late);
/*
 * After the first scan: the switch-function path for t if it has no probes (or --switch).
 * 0, or an exit code when a --switch uprobe: spec cannot be placed (logged, naming it).
 */
int attach_switch_path(struct capture *c, struct target *t);
/* -a, --follow: attach (for every process) to the objects pid maps that carry probes. */
void attach_scan_global(struct capture *c, u32 pid, bool late);
/* Fork the command, held before exec, and attach to everything it will load. Exit code or 0. */
int attach_launch_prepare(struct capture *c, struct target *t);

#endif /* COROBPF_ATTACH_H */
