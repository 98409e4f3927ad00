// SPDX-License-Identifier: MIT
/*
 * Coroutine programs with one bug each, on purpose, for the detectors, and a
 * control without any. Each prints "BUG <kind> <id>" for the coroutine the
 * finding must be pinned to (spawn_storm: the parent), then "DONE".
 *
 *     bugs lost_wakeup     a coroutine waits on a channel nobody sends to; the
 *                          process exits 1.3 s later with it still waiting
 *     bugs stall           a coroutine sleeps 1.5 s, then finishes
 *     bugs long_run        a coroutine computes 300 ms (CPU time, as every computing
 *                          coroutine here) without yielding while a
 *                          "ticker" is made ready every 5 ms (work that waits)
 *     bugs sched_latency   one worker; a coroutine computes 30 ms while another,
 *                          made ready just before, waits for the worker
 *     bugs unclosed_span   a coroutine opens span "tx" and exits inside it
 *     bugs spawn_storm     a parent spawns 5,000 children as fast as it can
 *     bugs blocking        a coroutine blocks its worker in usleep(200 ms) while a
 *                          "ticker" is made ready every 5 ms; prints "SLEPT <ns>",
 *                          the time the usleep took by its own clock
 *     bugs oversubscribed  six workers on fewer CPUs, six coroutines computing
 *                          150 ms each: preempted, waiting for CPUs, never blocking
 *     bugs control         the same kinds of work, all within every threshold
 *
 * Default thresholds: stall 1 s, long_run 50 ms, sched_latency 10 ms, spawn
 * storm 1000/s.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "corosched.h"

static void bug(const char *kind, uint64_t id)
{
	printf("BUG %s 0x%" PRIx64 "\n", kind, id);
	fflush(stdout);
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * Burn `ms` of the thread's CPU time without yielding: that long on a CPU
 * however busy the machine is (a long run counts time on a CPU only).
 */
static void compute(unsigned ms)
{
	uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ms * 1000000ULL;
	volatile uint64_t x = 0;

	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
		x++;
}

static co_chan_t *never;

static int waiter(void *arg)
{
	void *msg;

	return chan_recv(never, &msg);
}

static int sleeper(void *arg)
{
	co_sleep_us((uintptr_t)arg);
	return 0;
}

static int cruncher(void *arg)
{
	compute((unsigned)(uintptr_t)arg);
	return 0;
}

static int blocker(void *arg)
{
	uint64_t t0 = now_ns();

	usleep((useconds_t)(uintptr_t)arg);
	printf("SLEPT %" PRIu64 "\n", now_ns() - t0);
	return 0;
}

/*
 * Made ready by a timer every 5 ms for `arg` ticks, on the other worker: the
 * work a blocked or long-running worker's scheduler has meanwhile, which
 * makes its blocking call or long run a finding (analyze.h).
 */
static int ticker(void *arg)
{
	for (uintptr_t i = 0; i < (uintptr_t)arg; i++)
		co_sleep_us(5000);
	return 0;
}

static int quick(void *arg)
{
	return 0;
}

static int span_leaver(void *arg)
{
	co_span_begin("tx");
	co_sleep_us(1000);
	if (arg)
		co_span_end("tx");
	return 0;
}

static int spawner(void *arg)
{
	long n = (long)(uintptr_t)arg;

	for (long i = 0; i < n; i++) {
		co_spawn(quick, NULL, NULL);
		/* The control spreads its children out: well under the threshold. */
		if (n < 1000)
			co_sleep_us(2000);
		else if (i % 100 == 99)
			co_yield(); /* a storm, not also a long run */
	}
	return 0;
}

/* sched_latency: A computes 30 ms on the only worker; B, ready meanwhile, waits. */
static int latency_pair(void *arg)
{
	uint64_t b = co_spawn(sleeper, (void *)(uintptr_t)0, "waits-for-worker");

	bug("sched_latency", b);
	compute((unsigned)(uintptr_t)arg);
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	unsigned workers = !strcmp(what, "sched_latency") ? 1 : !strcmp(what, "oversubscribed") ? 6 : 2;

	never = chan_new(0);
	if (sched_start(workers))
		return 1;
	if (!strcmp(what, "lost_wakeup")) {
		bug("lost_wakeup", co_spawn(waiter, NULL, "forgotten"));
		usleep(1300 * 1000);
		printf("DONE\n");
		fflush(stdout);
		_exit(0); /* with the waiter still waiting: nobody will ever wake it */
	} else if (!strcmp(what, "stall")) {
		bug("stall", co_spawn(sleeper, (void *)(uintptr_t)1500000, "slow-sleeper"));
	} else if (!strcmp(what, "long_run")) {
		bug("long_run", co_spawn(cruncher, (void *)(uintptr_t)300, "cruncher"));
		co_spawn(ticker, (void *)(uintptr_t)60, "ticker");
	} else if (!strcmp(what, "sched_latency")) {
		co_spawn(latency_pair, (void *)(uintptr_t)30, "holds-worker");
	} else if (!strcmp(what, "unclosed_span")) {
		bug("unmatched_span", co_spawn(span_leaver, NULL, "span-leaver"));
	} else if (!strcmp(what, "spawn_storm")) {
		bug("spawn_storm", co_spawn(spawner, (void *)(uintptr_t)5000, "spawner"));
	} else if (!strcmp(what, "blocking")) {
		bug("blocking", co_spawn(blocker, (void *)(uintptr_t)200000, "blocker"));
		co_spawn(ticker, (void *)(uintptr_t)40, "ticker");
	} else if (!strcmp(what, "oversubscribed")) {
		for (int i = 0; i < 6; i++)
			bug("preempted", co_spawn(cruncher, (void *)(uintptr_t)150, "cpu-bound"));
	} else if (!strcmp(what, "control")) {
		co_spawn(sleeper, (void *)(uintptr_t)200000, "short-sleeper");
		co_spawn(cruncher, (void *)(uintptr_t)5, "short-cruncher");
		co_spawn(span_leaver, (void *)1, "span-closer");
		co_spawn(spawner, (void *)(uintptr_t)50, "slow-spawner");
	} else {
		fprintf(stderr, "usage: bugs lost_wakeup|stall|long_run|sched_latency|unclosed_span|"
				"spawn_storm|blocking|oversubscribed|control\n");
		return 2;
	}
	sched_wait_all();
	sched_stop();
	printf("DONE\n");
	return 0;
}
