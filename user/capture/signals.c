// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Signals, and what a launched command gets back before its exec. See signals.h. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include "signals.h"
#include "util.h"

volatile sig_atomic_t capture_stop_signal;
volatile int capture_stop_wake_fd = -1;
static volatile pid_t signal_child = -1;
static struct sigaction saved_actions[NSIG];

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	pid_t child = signal_child;

	(void)uc;
	if (capture_stop_signal) {
		/* The second one: quit now, leaving no half-written file behind. */
		outfile_emergency_cleanup();
		_exit(128 + sig);
	}
	capture_stop_signal = sig;
	if (capture_stop_wake_fd >= 0) {
		u64 one = 1;
		ssize_t n = write(capture_stop_wake_fd, &one, sizeof(one));

		(void)n;
	}
	/* Pass termination on; a keyboard ^C already reached the whole process group. */
	if (child > 0 && (sig != SIGINT || si->si_code == SI_USER || si->si_code == SI_QUEUE))
		kill(child, sig);
}

void capture_install_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa = {0};

	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: interrupt the poll */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		sigaction(sigs[i], NULL, &saved_actions[sigs[i]]);
		/* Under nohup, a hangup is not ours to act on. */
		if (sigs[i] == SIGHUP && saved_actions[SIGHUP].sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
	sigaction(SIGPIPE, NULL, &saved_actions[SIGPIPE]);
	signal(SIGPIPE, SIG_IGN);
}

/* The descriptor limit corobpf was started with, given back to the launched command. */
static struct rlimit capture_saved_nofile;
static bool capture_nofile_raised;

void capture_raise_nofile(void)
{
	struct rlimit nofile;

	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		capture_saved_nofile = nofile;
		nofile.rlim_cur = nofile.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nofile) == 0)
			capture_nofile_raised = true;
	}
}

static void capture_restore_limits(void)
{
	if (capture_nofile_raised)
		setrlimit(RLIMIT_NOFILE, &capture_saved_nofile);
}

static void capture_restore_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &saved_actions[sigs[i]], NULL);
}

void capture_set_signal_child(pid_t pid)
{
	signal_child = pid;
}

/*
 * Also: if corobpf dies while the command is held at a dlopen (SIGSTOP,
 * switch-function path), the kernel continues it. The death signal goes
 * when the thread that forked dies: the main thread, which lives for the
 * whole run. A command that outlives corobpf (-d, Ctrl-C twice) gets
 * one SIGCONT more, which only a SIGCONT handler notices. The kernel
 * clears the setting at the exec of a set-uid or set-gid program (or one
 * with file capabilities): such a command is not protected.
 * Had corobpf died before this prctl, its BPF programs are gone with it
 * and nothing stops the command any more.
 */
/* capture_opts.stdout_to_stderr, for the launched child (capture_set_child_stdout()). */
static bool child_stdout_to_stderr;

void capture_set_child_stdout(bool to_stderr)
{
	child_stdout_to_stderr = to_stderr;
}

void capture_child_before_exec(void)
{
	capture_restore_signals();
	capture_restore_limits();
	prctl(PR_SET_PDEATHSIG, SIGCONT);
	if (child_stdout_to_stderr)
		dup2(STDERR_FILENO, STDOUT_FILENO);
}
