/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * signals.h: how a run stops, and what a launched command gets back before
 * its exec. A signal sets a flag the capture's loop and the session look at;
 * a second one quits at once.
 */
#ifndef COROBPF_SIGNALS_H
#define COROBPF_SIGNALS_H

#include <stdbool.h>

#include <signal.h>
#include <sys/types.h>

/* Set by the signal handlers (the signal number); capture_run stops when it sees it. */
extern volatile sig_atomic_t capture_stop_signal;
/*
 * An eventfd the first stopping signal also writes to (or -1): capture_run's
 * stopper thread waits on it, so that the probes are silenced at the
 * signal, whatever the reader is doing.
 */
extern volatile int capture_stop_wake_fd;

/*
 * SIGINT/SIGTERM/SIGHUP stop tracing (a second one quits at once, removing
 * temporary outputs) and are passed on to the launched command; SIGPIPE is
 * ignored. The launched command gets the original dispositions back.
 */
void capture_install_signals(void);
/*
 * From now on (a pid) or no longer (-1), signals are passed on to pid. The
 * launched command gets the dispositions and the descriptor limit corobpf
 * started with back before its exec (capture_open raises the limit), and
 * is continued (SIGCONT) by the kernel if corobpf dies (a dlopen hold).
 */
void capture_set_signal_child(pid_t pid);
/*
 * A link, a pidfd and an object descriptor per traced process: as many
 * descriptors as the hard limit allows (the launched command gets the soft
 * limit back).
 */
void capture_raise_nofile(void);
/* In the launched child, before its exec: what it gets back (see capture_set_signal_child()). */
void capture_child_before_exec(void);
/* Whether the launched command's stdout is corobpf's stderr (capture_opts.stdout_to_stderr). */
void capture_set_child_stdout(bool to_stderr);

#endif /* COROBPF_SIGNALS_H */
