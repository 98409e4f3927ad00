// SPDX-License-Identifier: MIT
/*
 * batch_signal: probes fired from a signal handler that interrupts the
 * thread's own probes (suite_27_batch.py).
 *
 *     batch_signal ITERS INTERVAL_US GO_FILE
 *
 * Once GO_FILE exists, the main thread fires create(0x1_0000_0000 + i) and
 * exit(same, 0) for i in [0, ITERS), and nothing else, while a timer sends
 * it SIGUSR1 every INTERVAL_US microseconds (a high-resolution timer: the
 * signal lands wherever the thread is, often inside a probe, so the
 * handler's probes nest in it); the handler fires create(0x2_0000_0000 + k)
 * and exit(same, 1) for the k-th signal it handles. Prints "main ITERS
 * handler K": the trace must hold exactly those coroutines, each created
 * and exited once.
 */
#include "corobpf.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long handled;

static void on_usr1(int sig)
{
	unsigned long long id = 0x200000000ull + (unsigned long long)handled;

	(void)sig;
	CORO_PROBE(create, id, 0);
	CORO_PROBE(exit, id, 1);
	handled = handled + 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	struct sigevent sev;
	struct itimerspec its = {0};
	timer_t timer;
	sigset_t set;
	long iters, us;

	if (argc < 4) {
		fprintf(stderr, "usage: batch_signal ITERS INTERVAL_US GO_FILE\n");
		return 2;
	}
	iters = atol(argv[1]);
	us = atol(argv[2]);
	while (access(argv[3], F_OK) != 0)
		usleep(1000);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR1;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer))
		return 1;
	its.it_value.tv_nsec = us * 1000;
	its.it_interval.tv_nsec = us * 1000;
	timer_settime(timer, 0, &its, NULL);
	for (long i = 0; i < iters; i++) {
		unsigned long long id = 0x100000000ull + (unsigned long long)i;

		CORO_PROBE(create, id, 0);
		CORO_PROBE(exit, id, 0);
	}
	/* No signal after the count is taken. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	timer_delete(timer);
	printf("main %ld handler %ld\n", iters, handled);
	return 0;
}
