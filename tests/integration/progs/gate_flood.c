// SPDX-License-Identifier: MIT
/*
 * gate_flood PROG SECS: for SECS seconds, touch PROG and run it, one run after another; print
 * "EXECS <n>" with the number of runs.
 *
 * The exec gate's worst case, as an unprivileged user plays it (tests/integration/
 * suite_hostile_gate.py): the gate reads the environment of the process that execs (the new
 * one cannot be read yet), so this program is started with a huge LD_LIBRARY_PATH while PROG
 * is given an empty environment (it runs at once, ld.so's own search is short). Touching PROG
 * gives it new change times, so each exec is of a program the gate has not examined.
 * Built static: its own exec has no libraries to search.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	char *const none[] = {NULL};
	unsigned long n = 0;
	double end;

	if (argc != 3) {
		fprintf(stderr, "usage: gate_flood PROG SECS\n");
		return 2;
	}
	end = now() + atof(argv[2]);
	while (now() < end) {
		char *const args[] = {argv[1], NULL};
		pid_t pid;

		if (utimensat(AT_FDCWD, argv[1], NULL, 0) < 0) {
			perror(argv[1]);
			return 1;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			execve(argv[1], args, none);
			_exit(127);
		}
		while (waitpid(pid, NULL, 0) < 0)
			;
		n++;
	}
	printf("EXECS %lu\n", n);
	return 0;
}
