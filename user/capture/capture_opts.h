/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * capture_opts.h: what a live capture is asked for, one struct. The command
 * line fills it (user/main.c, which also gives the defaults and resolves
 * the probe path before any session starts); from then on it is read-only:
 * the capture (capture.h), attaching (attachctx.h) and the session read
 * this one copy.
 */
#ifndef COROBPF_CAPTURE_OPTS_H
#define COROBPF_CAPTURE_OPTS_H

#include "switchfam.h"
#include "util.h"

/* --stacks. */
enum stack_mode {
	STACK_MODE_OFF = 0,
	STACK_MODE_FP = 1,    /* the kernel's frame-pointer walk, deduplicated in a BPF stack map */
	STACK_MODE_DWARF = 2, /* registers and stack bytes, unwound in user space from .eh_frame */
};

#define CAPTURE_MAX_PIDS 256
#define CAPTURE_MAX_CUSTOM 8
#define CAPTURE_MAX_COMMS 16 /* the BPF side's COMM_FILTER_MAX */

struct capture_opts {
	u32 pids[CAPTURE_MAX_PIDS]; /* -p (with -a: a filter) */
	u32 npids;
	char **argv;	 /* after --: the command to launch, or NULL */
	double duration; /* -d, seconds (0: until the targets exit or a signal) */
	u64 ring_bytes;
	bool no_sched;	  /* without the kernel's scheduling view (sched_switch/wakeup) */
	bool system_wide; /* -a: every process whose objects carry probes (pids: a filter) */
	/* -a --comm, repeatable: only processes whose name starts with one of them */
	const char *comms[CAPTURE_MAX_COMMS];
	u32 ncomms;
	/*
	 * --follow: the targets' probe objects are attached for every process
	 * (pid -1) and the BPF side admits the targets and, at fork, their
	 * descendants; exec'd images are scanned like -a's. Probes only.
	 */
	bool follow;
	/*
	 * The switch-function path (--switch). Automatic by default: a process
	 * without corobpf probes is traced through every family its libraries
	 * provide. switch_forced: the families (and custom functions) given,
	 * even where probes exist (which are then left alone); switch_none: never.
	 */
	u32 switch_families; /* 1 << enum coro_ctx_family */
	bool switch_forced;
	bool switch_none;
	struct switch_custom custom[CAPTURE_MAX_CUSTOM]; /* --switch uprobe:... */
	size_t ncustom;
	u32 stacks;	 /* --stacks: enum stack_mode */
	u32 stack_bytes; /* --stacks=dwarf: bytes of user stack copied per event */
	/* --sample-hz: perf-event samples of running coroutines per second per CPU (0: none) */
	u32 sample_hz;
	bool sample_hz_set;
	/* -a, --follow: the exec gate's longest hold (execgate.h); 0: no gate. */
	u32 exec_gate_ms;
	/* --probe-path: enum probe_path (batch.h), as batch_path_choose() resolved it */
	u32 probe_path;
	u32 probe_path_asked;	    /* what --probe-path asked for */
	const char *probe_path_why; /* why probe_path is not what was asked, or NULL */
	/* -- CMD: the command's stdout is corobpf's stderr (top's snapshots own stdout). */
	bool stdout_to_stderr;
};

#endif /* COROBPF_CAPTURE_OPTS_H */
