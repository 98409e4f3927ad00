// SPDX-License-Identifier: MIT
/*
 * A scheduler that answers the moment a tracer's sites raise its announce
 * count (suite_31_announce.py): one thread does nothing but look, so it
 * answers while the tracer is still attaching. The kernel raises the count
 * before it writes a site's breakpoint: such an answer may go through an
 * announce site not armed yet, with only its done seen.
 *
 *   announce_eager STOPFILE N     print "READY <pid>"; N coroutines (ids 1..N,
 *                                 named eager-I) parked on object 0x77, until
 *                                 STOPFILE exists; then "ANSWERS <count>"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "corobpf.h"

static volatile int stop;
static long n;
static char (*names)[32];

static void *looker(void *arg)
{
	long *answers = arg;

	while (!stop) {
		if (!CORO_ANNOUNCE_WANTED())
			continue;
		for (long i = 0; i < n; i++)
			CORO_PROBE(announce, i + 1, 0, names[i], CORO_WAIT, 0x77);
		CORO_ANNOUNCE_DONE();
		(*answers)++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long answers = 0;
	pthread_t t;

	if (argc < 3 || (n = atol(argv[2])) < 1 || n > 100000) {
		fprintf(stderr, "usage: announce_eager STOPFILE N\n");
		return 2;
	}
	names = calloc((size_t)n, sizeof(*names));
	if (!names)
		return 1;
	for (long i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "eager-%ld", i + 1);
		CORO_PROBE(create, i + 1, 0);
		CORO_PROBE(switch, 0, i + 1, CORO_YIELD, 0);
		CORO_PROBE(switch, i + 1, 0, CORO_WAIT, 0x77);
	}
	if (pthread_create(&t, NULL, looker, &answers))
		return 1;
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (access(argv[1], F_OK))
		usleep(10000);
	stop = 1;
	pthread_join(t, NULL);
	printf("ANSWERS %ld\n", answers);
	return 0;
}
