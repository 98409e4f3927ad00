// SPDX-License-Identifier: MIT
/*
 * flood THREADS N [MODE [IDS]]: THREADS threads each make N events as fast as they can and
 * count them, for make bench's "flood" section (docs/performance.md, "Flood").
 *
 * MODE probe (the default): CORO_PROBE(ready, id), which the batched path (corobpf's default)
 * appends to the thread's buffer. MODE limit: the least an in-target recorder does for the same
 * event, with no corobpf: a 40-byte record (the batched path's layout) written into a
 * thread-local buffer of 256, stamped with CLOCK_BOOTTIME from the vDSO, published by one store,
 * the buffer started again when full. MODE limit_tsc: the same, stamped with the TSC instead (a
 * cheaper stamp, which corobpf does not use: docs/performance.md says why).
 *
 * Each thread readies IDS coroutines of its own in turn (1024 by default), so the model follows a
 * bounded set. Prints the events made and the time per event: the mean over the threads of each
 * one's loop time over its N, on its own clock (start-up and exit are not counted); then the
 * same of each thread's CPU time (its own work, the BPF copies it traps into among it, not the
 * time other threads, corobpf's reader among them, held its CPU).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "corobpf.h"

enum mode { PROBE, LIMIT, LIMIT_TSC };

static long n_per_thread, ids = 1024;
static enum mode mode;
static pthread_barrier_t start;

struct result {
	long made;
	double ns, cpu_ns;
};

/* The limit's buffer: the batched path's own layout, in a thread-local of its own. */
static __thread struct corobpf_batch limit_buf;

static inline unsigned long long tsc(void)
{
#if defined(__x86_64__)
	unsigned int lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return (unsigned long long)hi << 32 | lo;
#else
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
#endif
}

/* What __coro_batch_put does for a record, less the probe and the tracer's semaphore. */
static inline __attribute__((always_inline)) void limit_put(unsigned long long id, int use_tsc)
{
	struct corobpf_batch *b = &limit_buf;
	unsigned long long w;
	struct corobpf_batch_rec *r;
	unsigned int n;

	*(volatile unsigned char *)&b->busy = 1;
	__asm__ __volatile__("" ::: "memory");
	w = *(volatile unsigned long long *)&b->word;
	n = (unsigned int)w;
	if (n >= COROBPF_BATCH_RECS) {
		w = ((w >> 32) + 1) << 32;
		n = 0;
	}
	r = &b->rec[n];
	if (use_tsc) {
		r->ts = tsc();
	} else {
		struct timespec t;

		clock_gettime(CLOCK_BOOTTIME, &t);
		r->ts = (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
	}
	r->kind = 3;
	r->aux = 0;
	r->a0 = id;
	r->a1 = 0;
	r->a2 = 0;
	b->layout = sizeof(*r);
	__asm__ __volatile__("" ::: "memory");
	*(volatile unsigned long long *)&b->word = w + 1;
	__asm__ __volatile__("" ::: "memory");
	*(volatile unsigned char *)&b->busy = 0;
}

static void *flood(void *arg)
{
	struct result *res = arg;
	/* The thread's own id space: its number, left in made by main. */
	unsigned long long base = (unsigned long long)res->made << 32;
	struct timespec a, b, ca, cb;
	long i, k = 0;

	pthread_barrier_wait(&start);
	clock_gettime(CLOCK_MONOTONIC, &a);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
	for (i = 0; i < n_per_thread; i++) {
		unsigned long long id = base | (unsigned long long)(k + 1);

		if (++k == ids)
			k = 0;
		__asm__ __volatile__("" ::"r"(id));
		if (mode == PROBE)
			CORO_PROBE(ready, id);
		else
			limit_put(id, mode == LIMIT_TSC);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
	clock_gettime(CLOCK_MONOTONIC, &b);
	res->made = i;
	res->ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)(i ? i : 1);
	res->cpu_ns = ((cb.tv_sec - ca.tv_sec) * 1e9 + (cb.tv_nsec - ca.tv_nsec)) / (double)(i ? i : 1);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	const char *m = argc > 3 ? argv[3] : "probe";
	struct result *res;
	pthread_t *tids;
	double ns = 0, cpu_ns = 0;
	long made = 0;

	n_per_thread = argc > 2 ? atol(argv[2]) : 2000000;
	ids = argc > 4 ? atol(argv[4]) : 1024;
	if (threads < 1 || threads > 256 || n_per_thread < 0 || ids < 1) {
		fprintf(stderr, "usage: flood THREADS(1-256) N [probe|limit|limit_tsc [IDS]]\n");
		return 2;
	}
	if (!strcmp(m, "probe")) {
		mode = PROBE;
	} else if (!strcmp(m, "limit")) {
		mode = LIMIT;
	} else if (!strcmp(m, "limit_tsc")) {
		mode = LIMIT_TSC;
	} else {
		fprintf(stderr, "flood: unknown mode %s (probe, limit or limit_tsc)\n", m);
		return 2;
	}
	res = calloc((size_t)threads, sizeof(*res));
	tids = calloc((size_t)threads, sizeof(*tids));
	if (!res || !tids)
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int t = 0; t < threads; t++) {
		res[t].made = t + 1; /* the thread's id space, until it writes its count there */
		if (pthread_create(&tids[t], NULL, flood, &res[t])) {
			perror("flood: pthread_create");
			return 1;
		}
	}
	for (int t = 0; t < threads; t++) {
		pthread_join(tids[t], NULL);
		made += res[t].made;
		ns += res[t].ns;
		cpu_ns += res[t].cpu_ns;
	}
	printf("produced %ld\n%.3f ns/iter\n%.3f cpu-ns/iter\n", made, ns / threads,
	       cpu_ns / threads);
	return 0;
}
