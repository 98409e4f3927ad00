/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * launch.h: -- CMD. The command is found as execvp would find it, forked
 * and held before its exec (running only corobpf's code), and every object
 * it will load (the executable, its interpreter, the preloads and the
 * DT_NEEDED closure, as ld.so would find them: ldpaths.h) is examined and
 * attached (attach.h) through one descriptor of the very file before it
 * runs. A command that is not an ELF file is followed through its execs:
 * each image is attached the same way, held at its exec.
 */
#ifndef COROBPF_LAUNCH_H
#define COROBPF_LAUNCH_H

#include "attach.h"

/* -- CMD: the command, and what attach_launch_prepare gives back of the child it forks. */
struct attach_launch {
	char **argv;
	/* In the child, before its exec: what corobpf changed for itself undone. */
	void (*before_exec)(void);
	/* In corobpf, at once after the fork (signals are passed on to the child from then). */
	void (*forked)(pid_t pid);
	/* Out: the child (-1 if none), held until release_fd is written to or closed. */
	pid_t child;
	int release_fd;	   /* write end of the pipe the child waits on */
	int launch_err_fd; /* read end: errno if its exec failed, EOF once it succeeded */
};

/*
 * Fork the command, held before exec, and attach to everything it will load. Exit code or 0.
 * The child execs the command as a shell would: argv[0] as typed, searched in PATH when it
 * holds no '/', never a resolved path (a symbolic link keeps its name: $0 and comm are the
 * link's). The file is examined through one descriptor, and t->exec_check set: the exec is
 * held until attach_launch_exec_is_examined() said it runs that file.
 * A command that is not an ELF file (a script, a pyenv shim) is forked with nothing attached
 * and t->via_script set: the capture holds it at each exec and calls attach_launch_image.
 */
int attach_launch_prepare(struct attach_ctx *a, struct target *t, struct attach_launch *l);
/*
 * t->exec_check: t, held at its first exec, runs the file that was examined (the same device
 * and inode as what its /proc/PID/exe names). False, said, if it does not or cannot be told.
 */
bool attach_launch_exec_is_examined(const struct target *t);
/*
 * via_script: t, stopped at an exec, runs a new image. What was attached for
 * the image before it is detached (without --follow, where attaching is for
 * every process), then the new one is attached as an ELF launch is: what the
 * kernel mapped (the executable, ld.so) through the descriptors of the
 * mapped files, what ld.so will map, then the switch-function path.
 * t->exe and t->comm become the new image's. 0, or an exit code (a --switch
 * uprobe: spec that cannot be placed).
 */
int attach_launch_image(struct attach_ctx *a, struct target *t);

#endif /* COROBPF_LAUNCH_H */
