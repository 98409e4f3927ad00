// SPDX-License-Identifier: MIT
/*
 * Coroutines that park in known functions, for corobpf --stacks. Built with
 * and without frame pointers (stacks-fp, stacks-nofp), the scheduler
 * compiled in with the same flags, and a shared library (libstackslib*.so)
 * holding one of the parking functions.
 *
 *   spawner            spawns the others from spawn_them()
 *   exe-parker         parks in exe_park_here() -> co_sleep_us(), 3 times
 *   lib-parker         parks in lib_park_here() (the library) -> co_sleep_us(), 3 times
 *   forgotten          parks in exe_wait_forever() -> chan_recv() on a channel
 *                      nobody sends to: a lost wakeup at the end (--stall 0.2)
 *
 * Prints "DONE" when the parkers have finished; the forgotten one is left
 * waiting, and the process exits 400 ms later.
 *
 * stacks serve: the parkers park for 50 ms at a time until killed (for
 * corobpf ps); prints "READY <pid>" once they run.
 *
 * stacks spin: one coroutine, "spinner", computes for 300 ms of CPU in spin_here()
 * without yielding while a "ticker" on the other worker is made ready every 5 ms
 * (work that waits: a long_run whose key frame is spin_here).
 *
 * stacks late: the default run, after 300 ms (a tracer that attaches after
 * the exec, as --follow does for a binary it has not seen, is in place).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "corosched.h"

void lib_park_here(unsigned us);

static co_chan_t *never;

__attribute__((noinline)) void exe_park_here(unsigned us)
{
	co_sleep_us(us);
	__asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays */
}

__attribute__((noinline)) void exe_wait_forever(void)
{
	void *msg;

	chan_recv(never, &msg);
	__asm__ volatile("" ::: "memory");
}

static int serve;

/* The CPU time this thread has had: what the 99 Hz CPU-clock samples count. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Arithmetic, the clock read once per million steps: nearly every sample
 * lands here. `ms` of CPU time, not of the wall clock: on a busy machine the
 * run takes longer but gets as many samples.
 */
__attribute__((noinline)) void spin_here(unsigned ms)
{
	uint64_t end = cpu_ns() + ms * 1000000ull;
	volatile uint64_t x = 1;

	do {
		for (int i = 0; i < 1000000; i++)
			x = x * 3 + 1;
	} while (cpu_ns() < end);
}

static int spinner(void *arg)
{
	spin_here(300);
	return 0;
}

static int ticker(void *arg)
{
	for (int i = 0; i < 60; i++)
		co_sleep_us(5000);
	return 0;
}

static int exe_parker(void *arg)
{
	for (int i = 0; serve || i < 3; i++)
		exe_park_here(serve ? 50000 : 2000);
	return 0;
}

static int lib_parker(void *arg)
{
	for (int i = 0; serve || i < 3; i++)
		lib_park_here(serve ? 50000 : 2000);
	return 0;
}

static int forgotten(void *arg)
{
	exe_wait_forever();
	return 0;
}

__attribute__((noinline)) void spawn_them(void)
{
	co_spawn(exe_parker, NULL, "exe-parker");
	co_spawn(lib_parker, NULL, "lib-parker");
	co_spawn(forgotten, NULL, "forgotten");
	__asm__ volatile("" ::: "memory");
}

static int spawner(void *arg)
{
	spawn_them();
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t id;

	serve = argc > 1 && !strcmp(argv[1], "serve");
	if (argc > 1 && !strcmp(argv[1], "late"))
		usleep(300000);
	never = chan_new(0);
	if (argc > 1 && !strcmp(argv[1], "spin")) {
		if (sched_start(2))
			return 1;
		co_spawn(spinner, NULL, "spinner");
		co_spawn(ticker, NULL, "ticker");
		sched_stop();
		printf("DONE\n");
		return 0;
	}
	if (sched_start(2))
		return 1;
	id = co_spawn(spawner, NULL, "spawner");
	(void)id;
	if (serve) {
		printf("READY %d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	/* The parkers take ~6 ms; give them ample time. */
	usleep(300000);
	printf("DONE\n");
	fflush(stdout);
	usleep(400000);
	return 0;
}
