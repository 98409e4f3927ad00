// SPDX-License-Identifier: MIT
/*
 * probe_loop N [create|announce]: fire CORO_PROBE(ready, i) (or create(i, 0), a
 * probe that carries a stack under --stacks; or ask CORO_ANNOUNCE_WANTED(), as a
 * scheduler's loop does, answering when it is true) N times and print the time
 * per iteration. Built twice: with the probes, and with -DCOROBPF_DISABLE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "corobpf.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int create = argc > 2 && argv[2][0] == 'c';
	int announce = argc > 2 && argv[2][0] == 'a';
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	if (announce) {
		for (long i = 0; i < n; i++) {
			__asm__ __volatile__("" ::"r"(i));
			if (CORO_ANNOUNCE_WANTED()) {
				CORO_PROBE(announce, 1, 0, "loop", 0, 0);
				CORO_ANNOUNCE_DONE();
			}
		}
	} else if (create) {
		for (long i = 0; i < n; i++) {
			__asm__ __volatile__("" ::"r"(i));
			CORO_PROBE(create, i, 0);
		}
	} else {
		for (long i = 0; i < n; i++) {
			/* Keeps the loop (and i in a register) when the probe compiles away. */
			__asm__ __volatile__("" ::"r"(i));
			CORO_PROBE(ready, i);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f ns/iter\n",
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n);
	return 0;
}
