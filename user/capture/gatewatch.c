// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exec gate's watchdog: answers the gate's events while corobpf cannot (gatewatch.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "gatewatch.h"
#include "log.h"

#define WATCH_FAN_FD 3

struct gatewatch {
	pid_t pid;
	struct gatewatch_shared *page;
};

static u64 now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000 + (u64)ts.tv_nsec / 1000;
}

static void allow_fd(volatile struct gatewatch_shared *sh, int fd)
{
	struct fanotify_response r = {.fd = fd, .response = FAN_ALLOW};

	if (write(WATCH_FAN_FD, &r, sizeof(r)) == sizeof(r))
		sh->answered++;
}

/* The watchdog's life: system calls only (it was forked from a process with threads). */
static void __attribute__((noreturn)) watch(volatile struct gatewatch_shared *sh, u64 stale_us,
					    pid_t parent)
{
	struct fanotify_event_metadata buf[32];
	bool answering = false;

	for (;;) {
		struct pollfd p = {.fd = WATCH_FAN_FD, .events = POLLIN};
		u64 beat = __atomic_load_n(&sh->beat_us, __ATOMIC_ACQUIRE);
		ssize_t n;

		if (getppid() != parent)
			_exit(0);
		if (now_us() - beat < stale_us) {
			answering = false;
			poll(NULL, 0, GATEWATCH_BEAT_MS);
			continue;
		}
		if (!answering) {
			/* The gate stopped answering: what it holds first, then what comes. */
			u32 nheld = sh->nheld;

			answering = true;
			sh->takeovers++;
			for (u32 i = 0; i < nheld && i < GATEWATCH_MAX_HELD; i++)
				allow_fd(sh, sh->held[i]);
		}
		if (poll(&p, 1, GATEWATCH_BEAT_MS) <= 0 || !(p.revents & POLLIN))
			continue;
		n = read(WATCH_FAN_FD, buf, sizeof(buf));
		for (const struct fanotify_event_metadata *m = buf; n > 0 && FAN_EVENT_OK(m, n);
		     m = FAN_EVENT_NEXT(m, n)) {
			if (m->fd < 0)
				continue;
			if (m->mask & FAN_OPEN_EXEC_PERM)
				allow_fd(sh, m->fd);
			close(m->fd);
		}
	}
}

struct gatewatch *gatewatch_start(int fan, u32 stale_ms)
{
	struct gatewatch *w = xcalloc(1, sizeof(*w));
	pid_t parent = getpid();

	w->page = mmap(NULL, sizeof(*w->page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (w->page == MAP_FAILED) {
		log_info("exec gate: no watchdog (mmap: %s): while corobpf is stopped, execs "
			 "of programs on marked filesystems wait", strerror(errno));
		free(w);
		return NULL;
	}
	w->page->beat_us = now_us();
	w->pid = fork();
	if (w->pid < 0) {
		log_info("exec gate: no watchdog (fork: %s): while corobpf is stopped, execs "
			 "of programs on marked filesystems wait", strerror(errno));
		munmap(w->page, sizeof(*w->page));
		free(w);
		return NULL;
	}
	if (w->pid == 0) {
		sigset_t none;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		/* corobpf's handlers are not ours; a stop of corobpf's group is not for us. */
		for (int sig = 1; sig < NSIG; sig++) {
			struct sigaction dfl = {.sa_handler = SIG_DFL};

			if (sig != SIGKILL && sig != SIGSTOP && sig != SIGPIPE)
				sigaction(sig, &dfl, NULL);
		}
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		prctl(PR_SET_NAME, "corobpf-watch");
		/* The group and nothing else: not corobpf's BPF links, not its outputs. */
		if (fan != WATCH_FAN_FD && dup2(fan, WATCH_FAN_FD) < 0)
			_exit(1);
		syscall(SYS_close_range, WATCH_FAN_FD + 1, ~0U, 0);
		syscall(SYS_close_range, 0, WATCH_FAN_FD - 1, 0);
		watch(w->page, (u64)stale_ms * 1000, parent);
	}
	return w;
}

struct gatewatch_shared *gatewatch_page(struct gatewatch *w)
{
	return w->page;
}

void gatewatch_stop(struct gatewatch *w, u64 *answered, u64 *takeovers)
{
	*answered = *takeovers = 0;
	if (!w)
		return;
	kill(w->pid, SIGKILL);
	while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
		;
	*answered = w->page->answered;
	*takeovers = w->page->takeovers;
	munmap(w->page, sizeof(*w->page));
	free(w);
}
