// SPDX-License-Identifier: MIT
/*
 * A running server's coroutines, for the attach tests (suite_31_announce.py):
 * what exists when a tracer attaches, told by the scheduler (usdt/corobpf.h,
 * WHAT EXISTS WHEN A TRACER ATTACHES; tools/sched/corosched.c answers).
 *
 *   announce STOPFILE
 *
 * On 2 workers: 60 "parker-N" wait on a channel nobody sends to until the
 * end, 60 "sleeper-N" sleep 60 s, 60 "busy-N" loop (yield, or sleep 1 ms),
 * and 20 "nested-N" are spawned by busy-0 (their parent) and wait on a second
 * channel. After 0.3 s it prints "READY <pid>", then runs until STOPFILE
 * exists; then it wakes every waiter, lets all finish and exits. With
 * COROBPF_TRUTH set, corosched writes each coroutine's truth there, with what
 * the last announce said of it ("announced": corosched.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "corosched.h"

#define NPARK 60
#define NSLEEP 60
#define NBUSY 60
#define NNESTED 20

static co_chan_t *park_ch, *nested_ch;
static volatile int stopping;
static uint64_t sleepers[NSLEEP];

static int parker(void *arg)
{
	void *msg;

	(void)arg;
	chan_recv(park_ch, &msg);
	return 0;
}

static int nested(void *arg)
{
	void *msg;

	(void)arg;
	chan_recv(nested_ch, &msg);
	return 0;
}

static int sleeper(void *arg)
{
	(void)arg;
	while (!stopping && co_sleep_us(60 * 1000000ull) != -ECANCELED)
		;
	return 0;
}

static int busy(void *arg)
{
	long me = (long)arg;
	char name[32];

	if (me == 0)
		for (int i = 0; i < NNESTED; i++) {
			snprintf(name, sizeof(name), "nested-%d", i);
			co_spawn(nested, NULL, name);
		}
	for (unsigned long n = 0; !stopping; n++) {
		if (n % 4)
			co_yield();
		else
			co_sleep_us(1000);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char name[32];

	if (argc != 2) {
		fprintf(stderr, "usage: announce STOPFILE\n");
		return 2;
	}
	park_ch = chan_new(0);
	nested_ch = chan_new(0);
	if (!park_ch || !nested_ch || sched_start(2)) {
		fprintf(stderr, "announce: cannot start the scheduler\n");
		return 1;
	}
	for (long i = 0; i < NPARK; i++) {
		snprintf(name, sizeof(name), "parker-%ld", i);
		co_spawn(parker, NULL, name);
	}
	for (long i = 0; i < NSLEEP; i++) {
		snprintf(name, sizeof(name), "sleeper-%ld", i);
		sleepers[i] = co_spawn(sleeper, NULL, name);
	}
	for (long i = 0; i < NBUSY; i++) {
		snprintf(name, sizeof(name), "busy-%ld", i);
		co_spawn(busy, (void *)i, name);
	}
	usleep(300000);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (access(argv[1], F_OK))
		usleep(20000);
	stopping = 1;
	chan_close(park_ch);
	chan_close(nested_ch);
	/* The sleepers would see `stopping` in 60 s: their sleep is cut short instead. */
	for (int i = 0; i < NSLEEP; i++)
		co_cancel(sleepers[i]);
	sched_stop();
	printf("DONE\n");
	return 0;
}
