// SPDX-License-Identifier: MIT
/*
 * faults: a probed program that does what traced programs do to a tracer,
 * for the reliability tests. Coroutines here are bare probe sequences (no
 * scheduler): their ids say which part of the program fired them.
 *
 *     faults [--wait] MODE [ARG]
 *
 * --wait        print "READY <pid>", block until SIGUSR1, then run MODE
 * threads N     N threads, 100 alive at a time; thread i runs coroutine
 *               0x10000000+i once (create, name, switch in, exit, switch out)
 * fork          coroutines 0x100..0x102 here, then a child that runs
 *               0x200..0x202 and exits 7; prints "CHILD <pid> STATUS 7"
 * crash         0x300 runs, 0x301 suspends on an object, then SIGSEGV
 *               (no core file)
 * burst N       N coroutines 0x400+i, one after another, then exit 0
 * linger MS     coroutine 0x500 runs, then sleep MS ms, then 0x501 runs
 * many N LIVE   N coroutines 0x1000000+i, LIVE of them suspended at any time:
 *               each is created, runs, waits; LIVE creations later it is
 *               woken, runs and exits (8 probes each); then the rest finish
 * steady RATE SECS LIVE
 *               as `many`, at RATE coroutines per second for SECS seconds,
 *               paced every 10 ms (for soak runs)
 * spans N       coroutine 0x600 opens N nested spans "leak" and ends them
 *               all, then opens N more and exits inside them (a leak)
 *
 * Every mode prints "DONE <mode> <count>" on stdout when its work is done.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "corobpf.h"

static void run_once(uint64_t id, const char *name, int reason, uint64_t obj)
{
	CORO_PROBE(create, id, 0);
	CORO_PROBE(name, id, name);
	CORO_PROBE(switch, 0, id, 0, 0);
	if (reason == CORO_DONE)
		CORO_PROBE(exit, id, 0);
	CORO_PROBE(switch, id, 0, reason, obj);
}

#define THREADS_AT_ONCE 100

static void *thread_fn(void *arg)
{
	uint64_t i = (uintptr_t)arg;
	char name[32];

	snprintf(name, sizeof(name), "t%llu", (unsigned long long)i);
	run_once(0x10000000 + i, name, CORO_DONE, 0);
	return NULL;
}

static int do_threads(long n)
{
	pthread_t th[THREADS_AT_ONCE];

	for (long base = 0; base < n; base += THREADS_AT_ONCE) {
		long k = n - base < THREADS_AT_ONCE ? n - base : THREADS_AT_ONCE;

		for (long j = 0; j < k; j++) {
			int err = pthread_create(&th[j], NULL, thread_fn, (void *)(uintptr_t)(base + j));

			if (err) {
				fprintf(stderr, "faults: pthread_create: %s\n", strerror(err));
				return 1;
			}
		}
		for (long j = 0; j < k; j++)
			pthread_join(th[j], NULL);
	}
	printf("DONE threads %ld\n", n);
	return 0;
}

static int do_fork(void)
{
	int status;
	pid_t pid;

	for (uint64_t i = 0; i < 3; i++)
		run_once(0x100 + i, "parent", CORO_DONE, 0);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("faults: fork");
		return 1;
	}
	if (pid == 0) {
		for (uint64_t i = 0; i < 3; i++)
			run_once(0x200 + i, "child", CORO_DONE, 0);
		_exit(7);
	}
	if (waitpid(pid, &status, 0) != pid) {
		perror("faults: waitpid");
		return 1;
	}
	printf("CHILD %d STATUS %d\n", (int)pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	printf("DONE fork 3\n");
	return 0;
}

static int do_crash(void)
{
	struct rlimit no_core = {0, 0};
	static int chan;

	setrlimit(RLIMIT_CORE, &no_core);
	run_once(0x300, "finished", CORO_DONE, 0);
	run_once(0x301, "waiter", CORO_WAIT, (uint64_t)(uintptr_t)&chan);
	printf("DONE crash 2\n");
	fflush(stdout);
	raise(SIGSEGV);
	return 1;
}

static int do_burst(long n)
{
	for (long i = 0; i < n; i++)
		run_once(0x400 + (uint64_t)i, "burst", CORO_DONE, 0);
	printf("DONE burst %ld\n", n);
	return 0;
}

static int do_linger(long ms)
{
	run_once(0x500, "before", CORO_DONE, 0);
	printf("RAN 0x500\n");
	fflush(stdout);
	usleep((useconds_t)ms * 1000);
	run_once(0x501, "after", CORO_DONE, 0);
	printf("DONE linger 2\n");
	return 0;
}

/* `many` and `steady`: coroutine i starts, and the one LIVE before it finishes. */
static uint64_t chan_obj;

static void start_one(uint64_t id)
{
	CORO_PROBE(create, id, 0);
	CORO_PROBE(name, id, "many");
	CORO_PROBE(switch, 0, id, 0, 0);
	CORO_PROBE(switch, id, 0, CORO_WAIT, &chan_obj);
}

static void finish_one(uint64_t id)
{
	CORO_PROBE(ready, id);
	CORO_PROBE(switch, 0, id, 0, 0);
	CORO_PROBE(exit, id, 0);
	CORO_PROBE(switch, id, 0, CORO_DONE, 0);
}

static void step_many(long i, long live)
{
	start_one(0x1000000 + (uint64_t)i);
	if (i >= live)
		finish_one(0x1000000 + (uint64_t)(i - live));
}

static void finish_many(long n, long live)
{
	for (long i = n > live ? n - live : 0; i < n; i++)
		finish_one(0x1000000 + (uint64_t)i);
}

static int do_many(long n, long live)
{
	for (long i = 0; i < n; i++)
		step_many(i, live);
	finish_many(n, live);
	printf("DONE many %ld\n", n);
	return 0;
}

static int do_steady(long rate, long secs, long live)
{
	struct timespec next;
	long i = 0, ticks = secs * 100;

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long t = 0; t < ticks; t++) {
		/* Coroutines due by the end of this tick, so the rate holds over any span. */
		long due = rate * (t + 1) / 100;

		for (; i < due; i++)
			step_many(i, live);
		next.tv_nsec += 10000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	finish_many(i, live);
	printf("DONE steady %ld\n", i);
	return 0;
}

static int do_spans(long n)
{
	CORO_PROBE(create, 0x600, 0);
	CORO_PROBE(switch, 0, 0x600, 0, 0);
	for (long i = 0; i < n; i++)
		CORO_PROBE(span_begin, "leak");
	for (long i = 0; i < n; i++)
		CORO_PROBE(span_end, "leak");
	for (long i = 0; i < n; i++)
		CORO_PROBE(span_begin, "leak");
	CORO_PROBE(exit, 0x600, 0);
	CORO_PROBE(switch, 0x600, 0, CORO_DONE, 0);
	printf("DONE spans %ld\n", n);
	return 0;
}

/*
 * --as-pid PID CMD...: run CMD as a child with exactly that pid (clone3's
 * set_tid; root), whatever else the machine starts meanwhile; exit with
 * its status. A test reuses a traced process's pid this way.
 */
static int as_pid(pid_t want, char **cmd)
{
	struct clone_args ca = {
		.exit_signal = SIGCHLD,
		.set_tid = (uint64_t)(uintptr_t)&want,
		.set_tid_size = 1,
	};
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	int st;

	if (pid < 0) {
		fprintf(stderr, "faults: clone3 with pid %d: %s\n", (int)want, strerror(errno));
		return 3;
	}
	if (pid == 0) {
		execv(cmd[0], cmd);
		_exit(127);
	}
	if (waitpid((pid_t)pid, &st, 0) < 0)
		return 3;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	int i = 1;
	long arg;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 3 && !strcmp(argv[1], "--as-pid"))
		return as_pid((pid_t)atol(argv[2]), argv + 3);
	if (i < argc && !strcmp(argv[i], "--wait")) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("READY %d\n", (int)getpid());
		while (sigwait(&set, &sig) || sig != SIGUSR1)
			;
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: faults [--wait] threads N|fork|crash|burst N|linger MS|many N LIVE|"
				"steady RATE SECS LIVE|spans N\n");
		return 2;
	}
	arg = i + 1 < argc ? atol(argv[i + 1]) : 0;
	if (!strcmp(argv[i], "threads"))
		return do_threads(arg);
	if (!strcmp(argv[i], "fork"))
		return do_fork();
	if (!strcmp(argv[i], "crash"))
		return do_crash();
	if (!strcmp(argv[i], "burst"))
		return do_burst(arg);
	if (!strcmp(argv[i], "linger"))
		return do_linger(arg);
	if (!strcmp(argv[i], "many") && i + 2 < argc)
		return do_many(arg, atol(argv[i + 2]));
	if (!strcmp(argv[i], "spans"))
		return do_spans(arg);
	if (!strcmp(argv[i], "steady") && i + 3 < argc)
		return do_steady(arg, atol(argv[i + 2]), atol(argv[i + 3]));
	fprintf(stderr, "faults: unknown mode '%s'\n", argv[i]);
	return 2;
}
