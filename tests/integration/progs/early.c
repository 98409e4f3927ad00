// SPDX-License-Identifier: MIT
/*
 * Probes before main and after dlopen.
 *
 *     early                 creates 0xe2 (exe constructor), 0xe1 (libearly.so constructor),
 *                           0xe3 (main), 0xe4 (libearly.so, from main)
 *     early dlopen MS       then dlopens libdlprobe.so (its constructor creates 0xd1),
 *                           waits MS ms, and creates 0xd2 through it
 *     early sigs            then prints its SigIgn line (the signals it ignores)
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "corobpf.h"

void early_lib_fire(unsigned long id, unsigned long parent);

__attribute__((constructor)) static void exe_ctor(void)
{
	CORO_PROBE(create, 0xe2, 0);
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	void (*fire)(unsigned long, unsigned long);
	ssize_t n;
	void *h;

	CORO_PROBE(create, 0xe3, 0);
	early_lib_fire(0xe4, 0xe3);
	if (argc == 2 && !strcmp(argv[1], "sigs")) {
		char line[256];
		FILE *f = fopen("/proc/self/status", "r");

		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "SigIgn:", 7))
				fputs(line, stdout);
		if (f)
			fclose(f);
		return 0;
	}
	if (argc < 3 || strcmp(argv[1], "dlopen"))
		return 0;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		perror("readlink /proc/self/exe");
		return 1;
	}
	exe[n] = 0;
	snprintf(path, sizeof(path), "%s/libdlprobe.so", dirname(exe));
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "early: %s\n", dlerror());
		return 1;
	}
	/* The tracer learns of the new object from ld.so and attaches meanwhile. */
	usleep(atoi(argv[2]) * 1000);
	fire = (void (*)(unsigned long, unsigned long))dlsym(h, "early_lib_fire");
	if (!fire) {
		fprintf(stderr, "early: %s\n", dlerror());
		return 1;
	}
	fire(0xd2, 0);
	return 0;
}
