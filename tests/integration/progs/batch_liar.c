// SPDX-License-Identifier: MIT
/*
 * batch_liar: a program that lies about its batch buffer (suite_hostile_batch.py).
 *
 *     batch_liar ADDR DELAY_MS STOP_FILE [PROGRAM ARGS...]
 *
 * Once a tracer raises the batch semaphore, it fires the `batch` probe with
 * ADDR (hex) as its buffer's address, as if it were its thread's buffer,
 * prints "REGISTERED", waits for the semaphore to drop (the tracer is
 * detaching; or STOP_FILE to exist, when another tracer keeps it up) and
 * DELAY_MS more, and execs PROGRAM under the same pid: an address corobpf
 * once wrote into at its end, in whatever process then held the pid. A
 * negative DELAY_MS execs at once, still traced.
 */
#include "corobpf.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int wait_semaphore(int up, int secs, const char *stop)
{
	for (int i = 0; i < secs * 1000; i++) {
		if ((corobpf_batch_semaphore != 0) == up || (stop && !access(stop, F_OK)))
			return 0;
		usleep(1000);
	}
	return -1;
}

int main(int argc, char **argv)
{
	unsigned long long addr;

	if (argc < 4)
		return 2;
	addr = strtoull(argv[1], NULL, 16);
	if (wait_semaphore(1, 120, NULL)) {
		fprintf(stderr, "batch_liar: never traced\n");
		return 1;
	}
	/* The batch probe's note, fired by hand with any address. */
	__asm__ __volatile__(__CORO_ASM_NOTE(batch, "8@%[a0]")::[a0] "r"(addr) : "memory");
	printf("REGISTERED\n");
	fflush(stdout);
	if (atoi(argv[2]) >= 0 && wait_semaphore(0, 120, argv[3])) {
		fprintf(stderr, "batch_liar: the tracer never detached\n");
		return 1;
	}
	if (atoi(argv[2]) > 0)
		usleep(atoi(argv[2]) * 1000);
	if (argc > 4) {
		execv(argv[4], argv + 4);
		perror("batch_liar: exec");
		return 1;
	}
	return 0;
}
