/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * execsearch.h: what ld.so will map for a program held at the exec gate (execgate.h),
 * searched by a process of its own, an examiner, never by corobpf itself.
 *
 * The search follows paths a user chose: the LD_LIBRARY_PATH of the process that execs, the
 * RUNPATH of its program. It is bounded (EXECSEARCH_* below: entries, names, lookups, and a
 * deadline the gate gives), it never looks into a filesystem that can hang (procview.h), and
 * it looks where the process will: from its root (a chroot, a mount namespace of its own) and
 * its current directory. What it cannot rule out is a wait no signal ends: a read of the
 * process's environment racing a thread that maps a FUSE file there, a lookup in an overlay
 * over FUSE. So it runs in another process: an examiner stuck there is abandoned (killed,
 * replaced), and corobpf, which keeps the gate's fanotify group, never waits for it.
 *
 * An examiner is corobpf itself, exec'd again with EXECSEARCH_ARG (main.c), talking over a
 * SOCK_SEQPACKET socket on its descriptor 3:
 *
 *   gate -> examiner   struct execsearch_req, with the descriptor of the file exec'd
 *   examiner -> gate   one struct execsearch_msg per object ld.so will map (EXECSEARCH_OBJ,
 *                      in its order, the interpreter first), with the object's descriptor
 *                      the first time this examiner sends it (the file examined: the gate
 *                      never opens a path); then one EXECSEARCH_END
 *
 * A message is sent only up to the end of its path.
 */
#ifndef COROBPF_EXECSEARCH_H
#define COROBPF_EXECSEARCH_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>
#include "util.h"

#define EXECSEARCH_ARG "__exec-gate-examiner"

/* The bounds of one search: past one, it stops and says so (EXECSEARCH_CUT). */
#define EXECSEARCH_MAX_LIBRARY_PATH 256 /* LD_LIBRARY_PATH entries searched, the first ones */
#define EXECSEARCH_MAX_NAMES 512	/* libraries looked up */
#define EXECSEARCH_MAX_LOOKUPS 20000	/* names looked up in directories */
#define EXECSEARCH_MAX_NEW_FDS 64	/* descriptors sent (objects not sent before) */
#define EXECSEARCH_MAX_ENV (4u << 20)	/* bytes of environment read */

struct execsearch_req {
	u32 id;
	u32 pid;	 /* the process that execs */
	u64 deadline_ns; /* CLOCK_MONOTONIC: the search stops there */
};

enum execsearch_kind {
	EXECSEARCH_OBJ = 1,
	EXECSEARCH_END = 2,
};

enum execsearch_flags {
	EXECSEARCH_CUT = 1 << 0,     /* not searched to the end: `why` */
	EXECSEARCH_REFUSED = 1 << 1, /* directories not entered (may hang): the first in `where` */
};

struct execsearch_msg {
	u32 id;
	u32 kind;    /* enum execsearch_kind */
	u32 flags;   /* END: enum execsearch_flags */
	u32 pad;
	char why[192];
	char where[256]; /* END: the first directory not entered, and its filesystem's type */
	char path[PATH_MAX]; /* OBJ: as the process names it */
};

/* The examiner's main: requests on descriptor 3 until it closes. An exit code. */
int execsearch_main(int argc, char **argv);

/* In corobpf: an examiner started; its pid and corobpf's end of its socket. 0 or -errno. */
int execsearch_spawn(pid_t *pid, int *sock);

#endif /* COROBPF_EXECSEARCH_H */
