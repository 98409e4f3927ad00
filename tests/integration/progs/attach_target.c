// SPDX-License-Identifier: MIT
/*
 * A target for the attach-hardening tests (tests/integration/suite_hostile_attach.py).
 *
 *   attach_target run SECS      print "READY <pid>", then run coroutine 1..N through
 *                               create/switch/exit probes for SECS seconds; print
 *                               "DONE <n>" with the number of coroutines it ran
 *
 * Built three ways: static (it runs in a chroot with nothing else in it), and with
 * SPECS_EXTRA=K more sites of the create probe, each with an argument constant no
 * other site has: K argument specifications more for libbpf's pool (corobpf
 * refuses an object past its share); SPECS_BASE moves the constants, so that two
 * builds share none. The extra sites sit behind a branch that is never taken.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "corobpf.h"

#ifndef SPECS_EXTRA
#define SPECS_EXTRA 0
#endif

#ifndef SPECS_BASE
#define SPECS_BASE 100000
#endif
#define S1 CORO_PROBE(create, __COUNTER__ + SPECS_BASE, 0);
#define S4 S1 S1 S1 S1
#define S16 S4 S4 S4 S4
#define S64 S16 S16 S16 S16
#define S256 S64 S64 S64 S64

static void extra_sites(void)
{
#if SPECS_EXTRA >= 600
	S256 S256 S64 S16	/* 592 */
	S4 S4			/* 600 */
#elif SPECS_EXTRA >= 400
	S256 S64 S64 S16	/* 400 */
#endif
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end;
	unsigned long n = 0;

	if (argc < 3 || strcmp(argv[1], "run")) {
		fprintf(stderr, "usage: attach_target run SECS\n");
		return 2;
	}
	if (argc > 1000)
		extra_sites();
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("READY %d\n", (int)getpid());
	end = now() + atof(argv[2]);
	while (now() < end) {
		unsigned long id = ++n;

		CORO_PROBE(create, id, 0);
		CORO_PROBE(switch, 0, id, CORO_YIELD, 0);
		CORO_PROBE(switch, id, 0, CORO_DONE, 0);
		CORO_PROBE(exit, id, 0);
		usleep(1000);
	}
	printf("DONE %lu\n", n);
	return 0;
}
