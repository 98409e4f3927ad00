// SPDX-License-Identifier: MIT
/*
 * cpu_preload.so: LD_PRELOAD'ed into a benchmark's workload, it prints the
 * process's own CPU time (user and system, the kernel's accounting) to
 * stderr when it exits: "BENCH_CPU <comm> <user s> <system s>".
 *
 * The switch rows of make bench divide it by the switches of the loop. A
 * uprobe's trap and its BPF program run in the traced thread, so they are
 * in that time; waiting for a CPU is not, nor is corobpf's reader, which
 * runs in its own process (on this shared 2-CPU VM the loops' wall clock
 * moved by a microsecond a switch between runs minutes apart).
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

__attribute__((destructor)) static void bench_cpu_report(void)
{
	char comm[32] = "";
	struct rusage ru;
	FILE *f = fopen("/proc/self/comm", "r");

	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	if (getrusage(RUSAGE_SELF, &ru))
		return;
	fprintf(stderr, "BENCH_CPU %s %ld.%06ld %ld.%06ld\n", comm, (long)ru.ru_utime.tv_sec,
		(long)ru.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
}
