// SPDX-License-Identifier: MIT
/*
 * A program with the announce probes whose scheduler never answers
 * (suite_31_announce.py): its loop switches coroutine 1 in and out every
 * millisecond and never calls CORO_ANNOUNCE_WANTED(); the announce sites sit
 * behind a branch never taken.
 *
 *   announce_mute STOPFILE     print "READY <pid>", run until STOPFILE exists
 */
#include <stdio.h>
#include <unistd.h>
#include "corobpf.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: announce_mute STOPFILE\n");
		return 2;
	}
	CORO_PROBE(create, 1, 0);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (access(argv[1], F_OK)) {
		CORO_PROBE(switch, 0, 1, CORO_YIELD, 0);
		usleep(1000);
		CORO_PROBE(switch, 1, 0, CORO_YIELD, 0);
	}
	if (argc > 99 && CORO_ANNOUNCE_WANTED()) {
		CORO_PROBE(announce, 1, 0, "never", 0, 0);
		CORO_ANNOUNCE_DONE();
	}
	CORO_PROBE(exit, 1, 0);
	return 0;
}
