// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The capture's stop, on time. See stopper.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "log.h"
#include "signals.h"
#include "stopper.h"

static void *stopper_thread(void *arg)
{
	struct stopper *s = arg;

	for (;;) {
		struct pollfd p = {.fd = s->efd, .events = POLLIN};
		int timeout = -1;
		u64 now = now_boottime_ns();

		if (s->deadline) {
			u64 ms;

			if (now >= s->deadline)
				break;
			/* -d takes up to 10^7 s: waited for in steps an int of ms holds. */
			ms = (s->deadline - now) / 1000000 + 1;
			timeout = ms > 60000 ? 60000 : (int)ms;
		}
		if (poll(&p, 1, timeout) > 0) {
			if (__atomic_load_n(&s->quit, __ATOMIC_ACQUIRE))
				return NULL;
			break; /* a signal */
		}
	}
	__atomic_store_n(&s->stopped_at, now_boottime_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(s->flag, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

void stopper_start(struct stopper *s, u64 deadline, volatile u32 *flag)
{
	sigset_t all, old;

	memset(s, 0, sizeof(*s));
	s->deadline = deadline;
	s->flag = flag;
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0) {
		log_debug("no stopper: eventfd: %s", strerror(errno));
		return;
	}
	/* Signals stay the reader's: the handler wakes this thread through the eventfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s->running = !pthread_create(&s->thread, NULL, stopper_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (s->running)
		capture_stop_wake_fd = s->efd;
}

bool stopper_fired(struct stopper *s)
{
	return __atomic_load_n(&s->stopped_at, __ATOMIC_ACQUIRE) != 0;
}

u64 stopper_end(struct stopper *s)
{
	u64 one = 1, at;

	capture_stop_wake_fd = -1;
	if (s->running) {
		__atomic_store_n(&s->quit, 1, __ATOMIC_RELEASE);
		if (write(s->efd, &one, sizeof(one)) < 0)
			log_debug("waking the stopper: %s", strerror(errno));
		pthread_join(s->thread, NULL);
		s->running = false;
	}
	if (s->efd >= 0)
		close(s->efd);
	s->efd = -1;
	at = __atomic_load_n(&s->stopped_at, __ATOMIC_ACQUIRE);
	return at ? at : now_boottime_ns();
}
