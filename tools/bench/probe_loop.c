// SPDX-License-Identifier: MIT
/*
 * probe_loop N: fire CORO_PROBE(ready, i) N times and print the time per
 * iteration. Built twice: with the probes, and with -DCOROBPF_DISABLE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "corobpf.h"

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		/* Keeps the loop (and i in a register) when the probe compiles away. */
		__asm__ __volatile__("" ::"r"(i));
		CORO_PROBE(ready, i);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f ns/iter\n",
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n);
	return 0;
}
