// SPDX-License-Identifier: MIT
/*
 * floor PROBE -- CMD ARGS: run CMD with an empty BPF program attached (libbpf's
 * USDT attach, so the site and the kernel path are exactly corobpf's) to
 * corobpf:PROBE in CMD's executable. The benchmark's baseline.
 *
 * floor count:PROBE -- CMD ARGS: the same with a program that counts the
 * probe's first argument per value in a hash map (what a counters-only mode
 * would do at the least), instead of the empty one. floor args:PROBE: one
 * that only reads the argument (libbpf's generic USDT argument path).
 *
 * floor PROBE,PROBE... -- CMD ARGS: the empty program on each of those probes (the C++20
 * adapter's row: every corobpf probe).
 *
 * floor uprobe:FILE:OFFSET[,OFFSET...][;uprobe:FILE:...] -- CMD ARGS: the same
 * with plain uprobes at those file offsets (hex) of each FILE: the floor of
 * the switch-function path, on whatever instruction is there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/libbpf.h>
#include "floor.skel.h"

int main(int argc, char **argv)
{
	struct floor_bpf *skel;
	struct bpf_link *link;
	int go[2], status;
	char c;
	pid_t pid;

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: floor PROBE -- CMD [ARGS...]\n");
		return 2;
	}
	skel = floor_bpf__open_and_load();
	if (!skel) {
		perror("floor: load");
		return 1;
	}
	if (pipe(go) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execv(argv[3], argv + 3);
		_exit(127);
	}
	close(go[0]);
	if (!strncmp(argv[1], "uprobe:", 7)) {
		char *all = strdup(argv[1]), *one, *save1;

		/* uprobe:FILE:OFFS[;uprobe:FILE:OFFS...] */
		for (one = strtok_r(all, ";", &save1); one; one = strtok_r(NULL, ";", &save1)) {
			char *spec = one + 7, *offs = strrchr(spec, ':'), *tok, *save;

			if (strncmp(one, "uprobe:", 7) || !offs) {
				fprintf(stderr, "floor: uprobe:FILE:OFFSET expected\n");
				kill(pid, SIGKILL);
				return 2;
			}
			*offs++ = 0;
			for (tok = strtok_r(offs, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				link = bpf_program__attach_uprobe(skel->progs.empty_uprobe, false, pid,
								  spec, strtoul(tok, NULL, 16));
				if (!link) {
					perror("floor: attach uprobe");
					kill(pid, SIGKILL);
					return 1;
				}
			}
		}
	} else {
		struct bpf_program *prog = skel->progs.empty;
		const char *probe = argv[1];

		if (!strncmp(probe, "count:", 6)) {
			prog = skel->progs.count;
			probe += 6;
		} else if (!strncmp(probe, "args:", 5)) {
			prog = skel->progs.args;
			probe += 5;
		}
		char *names = strdup(probe), *name, *save;

		for (name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
			link = bpf_program__attach_usdt(prog, pid, argv[3], "corobpf", name, NULL);
			if (!link) {
				perror("floor: attach");
				kill(pid, SIGKILL);
				return 1;
			}
		}
	}
	if (write(go[1], "g", 1) != 1)
		return 1;
	waitpid(pid, &status, 0);
	/* The links go with the skeleton's programs at exit. */
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
