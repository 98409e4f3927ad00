/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * attach.h: which objects carry corobpf probes (or context-switch
 * functions), and attaching to them. Called by the capture (capture.c) in
 * its attach step and when a process execs or dlopens:
 *
 *   attach_scan_process   -p PID: the objects it maps, opened safely (safeopen.h)
 *   attach_switch_path    then, without probes (or with --switch): its switch functions
 *   attach_scan_global    -a, --follow: an object attached once for every process
 *   attach_exec_object    -a, --follow: a program held at its exec (execgate.h), and its libraries
 *   attach_launch_prepare -- CMD: fork it held, attach to what it will load (launch.h)
 *   attach_launch_image   -- SCRIPT: the same for each image it execs (launch.h)
 *
 * Everything goes through the attach context (attachctx.h): the programs
 * and budgets it is lent, the links it keeps, and what was attached, which
 * the capture turns into records. Every failure is counted in the
 * context's user stats and said once.
 */
#ifndef COROBPF_ATTACH_H
#define COROBPF_ATTACH_H

#include <stdbool.h>
#include <sys/types.h>
#include "attachctx.h"
#include "execgate.h"
#include "util.h"

/* A traced process (-p, or the launched command): what the capture and attaching know of it. */
struct target {
	u32 pid;
	int pidfd;
	bool launched;
	bool own_pid; /* -a: attached for this process alone (its ucontext), not every process */
	/*
	 * Launched through a script (not an ELF file): nothing is attached
	 * before it runs; each image it execs is attached like an ELF launch,
	 * while the BPF side holds it at that exec (exec_hold_tgid).
	 */
	bool via_script;
	bool execed;	      /* an exec record came: the image is new */
	/*
	 * A launched ELF command: the file examined and attached to before the
	 * fork (device and inode), which the file its exec runs must be. The
	 * BPF side holds it at that exec (exec_check_tgid) until the capture
	 * has compared them (attach_launch_exec_is_examined).
	 */
	bool exec_check;
	dev_t exec_dev;
	ino_t exec_ino;
	u32 images;	      /* via_script: images attached so far */
	size_t image_links[2]; /* via_script: the attach context's links before this image's */
	/*
	 * via_script: the switch-path records of the image, held until it makes
	 * its first context switch or exits in it; dropped if it execs first (a
	 * shell between the command and the program switches nothing, and its
	 * libc's switch functions would make the process look traced by them).
	 */
	bool hold_switch_recs;
	struct attach_found *held;
	size_t nheld;
	bool forked; /* --follow: a descendant of a target, admitted at its fork */
	bool exited;
	int wait_status; /* launched: waitpid status; -1 unknown */
	bool rescan;	 /* ld.so changed its link map */
	bool libload_attached;
	struct hmap objects; /* (dev, inode) of objects already examined */
	u32 probe_sites;
	u32 probe_sites_ignored; /* --switch: probes found but not used */
	/* Objects that define context functions, kept until the path is chosen. */
	struct target_swobj {
		int fd; /* -1, or the descriptor `path` names (/proc/self/fd/N) */
		char *path, *shown;
		u32 families;
	} *swobjs;
	size_t nswobjs;
	bool switch_mode; /* traced through the switch-function path */
	bool fcontext_calls; /* Boost.Context switches probed at their call sites */
	s64 fc_delta_jump, fc_delta_ontop;
	u32 switch_sites;
	u64 start_ts; /* when corobpf took it on, before attaching */
	/*
	 * Taken on running (-p, -a): when its probes were all attached, the
	 * session's start (its process record says it); 0 for one traced from its
	 * first instruction.
	 */
	u64 traced_from;
	char comm[16];
	char exe[4096];
	u32 ppid;
};

/* Returns 0, or an exit code (the process is gone, its maps unreadable: another user's). */
int attach_scan_process(struct attach_ctx *a, struct target *t, bool late);
/*
 * After the first scan: the switch-function path for t if it has no probes (or --switch).
 * 0, or an exit code when a --switch uprobe: spec cannot be placed (logged, naming it).
 */
int attach_switch_path(struct attach_ctx *a, struct target *t);
/* -a, --follow: attach (for every process) to the objects pid maps that carry probes. */
void attach_scan_global(struct attach_ctx *a, u32 pid, bool late);
/*
 * -a: process pid exec'd a program that uses libc's ucontext (or GNU Pth):
 * those families, for it alone (a uprobe on libc for every process would
 * trap in all of them). Once per process and program.
 */
void attach_exec_ucontext(struct attach_ctx *a, u32 pid);

/*
 * -a, --follow, the exec gate (execgate.h): the file process pid is exec'ing
 * (fd, the very file), and what ld.so will map with it (libs, as the gate's
 * examiner found them, each through its descriptor), examined and attached
 * for every process, before the program runs. changed: the file was examined
 * before with other change times (rewritten in place).
 */
void attach_exec_object(struct attach_ctx *a, int fd, u32 pid, bool changed,
			const struct execgate_lib *libs, size_t nlibs);

/*
 * One object of t: its corobpf probes, else (later, in attach_switch_path)
 * its switch functions. `path` opens it; when fd >= 0 it is fd's
 * /proc/self/fd path, and an object kept for the switch-function path
 * keeps a descriptor of its own. shown: as messages name it; late: mapped
 * before it was attached (dlopen). The probe sites attached.
 */
u32 attach_object(struct attach_ctx *a, struct target *t, int fd, const char *path,
		  const char *shown, bool late);
/* ld.so's dlopen hook in the object at path, once per target. */
void attach_libload(struct attach_ctx *a, struct target *t, const char *path);
/* The objects examined for t: its own, or (--follow) every process's. */
struct hmap *attach_examined(struct attach_ctx *a, struct target *t);

/* Frees what attaching keeps of t (its objects, the descriptors of its switch objects, held records). */
void attach_target_free(struct target *t);

#endif /* COROBPF_ATTACH_H */
