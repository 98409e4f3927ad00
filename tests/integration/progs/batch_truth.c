// SPDX-License-Identifier: MIT
/*
 * batch_truth: the batched probe path's ground truth (suite_27_batch.py).
 *
 *     batch_truth STATE_FILE THREADS ITERS MODE [START_DELAY_MS | GO_FILE]
 *
 * Every thread runs ITERS iterations of a fixed sequence of probes, so the
 * test can rebuild each thread's exact events from its index and the
 * iterations it completed; the program publishes both, per thread, in
 * STATE_FILE (a shared mapping, so they survive a SIGKILL):
 *     create(id) switch(0 -> id, yield) ready(id) [every 10th: span_begin
 *     "s", name(id, "c<id>"), span_end "s"] switch(id -> 0, done, obj i)
 *     exit(id, -(i % 3))
 * with id = (thread + 1) << 32 | (i + 1).
 *
 * MODE: "sleep" (odd threads sleep 100 us every 50 iterations: harvests at
 * sched_switch), "slow" (every thread, every 5 iterations), "crawl" (every
 * thread sleeps 50 ms after each iteration: far fewer records a second than
 * a buffer holds), "spin" (no system call at all: the tick's harvests),
 * "burst" (every thread sleeps 20 ms after every 100 iterations: a burst
 * fills its buffer a few times over between two of its harvests at
 * sched_switch or a tick), "selfsem" (as "burst", but the program raises
 * its own batch semaphore at start, as a batched session being attached
 * or detached leaves it for an instant: it appends with no batch probe to
 * tell its buffer to), "hang" (then every thread blocks forever:
 * corobpf -d stops it), "kill"
 * (then every thread spins forever: the test kills it), "exec" (thread 0, not
 * the main thread, waits for the others to finish, runs its iterations and
 * execs /bin/true at once: its last records are in memory the exec replaces),
 * "fork" (as "crawl"; once FORK_FILE, the sixth argument, exists, thread 0
 * forks: the child, whose only thread is a copy of thread 0, goes on with
 * its iterations, publishing its pid as thread 0's tid; thread 0 of the
 * parent stops for good).
 */
#include "corobpf.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAXT 32

struct state {
	volatile int64_t tid[MAXT];
	volatile int64_t done[MAXT]; /* iterations completed */
	volatile int64_t finished;   /* threads through their ITERS */
};

static struct state *st;
static long iters;
static const char *mode;
static long nthreads;
static const char *fork_file;

static void *worker(void *arg)
{
	long t = (long)arg;
	volatile unsigned long spin = 0;

	st->tid[t] = syscall(SYS_gettid);
	if (!strcmp(mode, "exec") && t == 0)
		while (st->finished < nthreads - 1)
			spin++;
	for (long i = 0; i < iters; i++) {
		unsigned long long id = (unsigned long long)(t + 1) << 32 | (unsigned long long)(i + 1);

		CORO_PROBE(create, id, 0);
		CORO_PROBE(switch, 0, id, CORO_YIELD, 0);
		CORO_PROBE(ready, id);
		if (i % 10 == 0) {
			char name[32];

			snprintf(name, sizeof(name), "c%llx", id);
			CORO_PROBE(span_begin, "s");
			CORO_PROBE(name, id, name);
			CORO_PROBE(span_end, "s");
		}
		CORO_PROBE(switch, id, 0, CORO_DONE, i);
		CORO_PROBE(exit, id, -(i % 3));
		st->done[t] = i + 1;
		if ((!strcmp(mode, "sleep") && (t & 1) && i % 50 == 0) || (!strcmp(mode, "slow") && i % 5 == 0))
			usleep(100);
		if ((!strcmp(mode, "burst") || !strcmp(mode, "selfsem")) && i % 100 == 99)
			usleep(20000);
		if (!strcmp(mode, "crawl") || !strcmp(mode, "fork"))
			usleep(50000);
		if (!strcmp(mode, "fork") && t == 0 && fork_file && !access(fork_file, F_OK)) {
			fork_file = NULL;
			if (fork() == 0) {
				st->tid[0] = getpid();
				continue;
			}
			for (;;)
				pause();
		}
		if (!strcmp(mode, "spin") || !strcmp(mode, "kill"))
			for (int k = 0; k < 2000; k++)
				spin++;
	}
	if (!strcmp(mode, "exec") && t == 0) {
		/* No system call between the last probe and the exec. */
		execl("/bin/true", "true", (char *)NULL);
		_exit(3);
	}
	__sync_fetch_and_add(&st->finished, 1);
	if (!strcmp(mode, "hang"))
		for (;;)
			pause();
	if (!strcmp(mode, "kill"))
		for (;;)
			spin++;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAXT];
	long n;
	int fd;

	if (argc < 5) {
		fprintf(stderr, "usage: batch_truth STATE_FILE THREADS ITERS MODE [START_DELAY_MS]\n");
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, sizeof(*st)) < 0)
		return 1;
	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (st == MAP_FAILED)
		return 1;
	n = nthreads = atol(argv[2]);
	iters = atol(argv[3]);
	mode = argv[4];
	if (argc > 6)
		fork_file = argv[6];
	if (n < 1 || n > MAXT)
		return 2;
	if (argc > 5 && argv[5][0] == '/') {
		/* Start once the tracer is attached: the test creates GO_FILE then. */
		while (access(argv[5], F_OK) != 0)
			usleep(1000);
	} else if (argc > 5) {
		usleep(atoi(argv[5]) * 1000);
	}
	if (!strcmp(mode, "selfsem"))
		corobpf_batch_semaphore = 1;
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (long i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
