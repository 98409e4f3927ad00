// SPDX-License-Identifier: MIT
/*
 * setuid_flag: the victim of batch_liar (suite_hostile_batch.py), installed
 * set-uid root. A flag at a fixed address (built without PIE) that nothing
 * in it changes:
 *
 *     setuid_flag addr      print the flag's address (hex)
 *     setuid_flag FILE      once FILE exists (at most 300 s), print
 *                           "FLAG <value> euid <euid>" (the value in hex)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile unsigned long long flag = 0xbeef;

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "addr")) {
		printf("%llx\n", (unsigned long long)(unsigned long)&flag);
		return 0;
	}
	for (int i = 0; argc > 1 && i < 30000 && access(argv[1], F_OK); i++)
		usleep(10000);
	printf("FLAG %llx euid %d\n", flag, (int)geteuid());
	return 0;
}
