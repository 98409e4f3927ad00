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
 * the switch-function path, on whatever instruction is there. Attached as
 * corobpf attaches that path, so the kernel runs both programs the same way:
 * one uprobe_multi link per FILE where the kernel has them (6.6), else one
 * perf-event uprobe per site. uprobe1:FILE:... always takes the latter (the
 * floor's link before it followed corobpf's). session:FILE:OFFSET[,...]: an
 * empty program at the entries and the returns of the functions at those
 * offsets, one uprobe session link per FILE (kernel 6.13+), as corobpf
 * attaches asyncio's and Lua's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "floor.skel.h"

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (6.6), absent from Debian 12's headers. */
#define TRACE_UPROBE_MULTI 48
/* ...and BPF_TRACE_UPROBE_SESSION (6.13). */
#define TRACE_UPROBE_SESSION 57
#define MAX_OFFSETS 64

/* The kernel has uprobe_multi links: its BTF knows their type (corobpf's own test). */
static int kernel_has_uprobe_multi(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	int yes;

	if (libbpf_get_error(btf))
		return 0;
	yes = btf__find_by_name_kind(btf, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) >= 0;
	btf__free(btf);
	return yes;
}

/* One uprobe_multi link on n offsets of path for pid; libbpf 1.1 has no wrapper. */
static int attach_multi(int prog_fd, unsigned int type, pid_t pid, const char *path,
			const unsigned long long *offs, unsigned int n)
{
	struct {
		unsigned int prog_fd, target_fd, attach_type, flags;
		unsigned long long path, offsets, ref_ctr_offsets, cookies;
		unsigned int cnt, mflags, pid, __pad;
		unsigned char rest[64];
	} attr;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.attach_type = type;
	attr.path = (unsigned long long)(uintptr_t)path;
	attr.offsets = (unsigned long long)(uintptr_t)offs;
	attr.cnt = n;
	attr.pid = pid;
	return (int)syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
}

int main(int argc, char **argv)
{
	struct floor_bpf *skel;
	struct bpf_link *link;
	int go[2], status, multi, session;
	char c;
	pid_t pid;

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: floor PROBE -- CMD [ARGS...]\n");
		return 2;
	}
	multi = kernel_has_uprobe_multi();
	session = !strncmp(argv[1], "session:", 8);
	skel = floor_bpf__open();
	if (!skel) {
		perror("floor: open");
		return 1;
	}
	if (multi)
		bpf_program__set_expected_attach_type(skel->progs.empty_uprobe_multi,
						      TRACE_UPROBE_MULTI);
	else
		bpf_program__set_autoload(skel->progs.empty_uprobe_multi, false);
	if (session)
		bpf_program__set_expected_attach_type(skel->progs.empty_session,
						      TRACE_UPROBE_SESSION);
	else
		bpf_program__set_autoload(skel->progs.empty_session, false);
	if (floor_bpf__load(skel)) {
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
	if (session) {
		char *spec = strdup(argv[1] + 8), *offs = strrchr(spec, ':'), *tok, *save;
		unsigned long long off[MAX_OFFSETS];
		unsigned int n = 0;

		if (!offs) {
			fprintf(stderr, "floor: session:FILE:OFFSET expected\n");
			kill(pid, SIGKILL);
			return 2;
		}
		*offs++ = 0;
		for (tok = strtok_r(offs, ",", &save); tok && n < MAX_OFFSETS;
		     tok = strtok_r(NULL, ",", &save))
			off[n++] = strtoull(tok, NULL, 16);
		if (attach_multi(bpf_program__fd(skel->progs.empty_session), TRACE_UPROBE_SESSION,
				 pid, spec, off, n) < 0) {
			fprintf(stderr, "floor: attach a uprobe session to %s: %s\n", spec,
				strerror(errno));
			kill(pid, SIGKILL);
			return 1;
		}
	} else if (!strncmp(argv[1], "uprobe:", 7) || !strncmp(argv[1], "uprobe1:", 8)) {
		char *all = strdup(argv[1]), *one, *save1;

		/* uprobe:FILE:OFFS[;uprobe:FILE:OFFS...] */
		for (one = strtok_r(all, ";", &save1); one; one = strtok_r(NULL, ";", &save1)) {
			int single = !strncmp(one, "uprobe1:", 8);
			char *spec = strchr(one, ':') + 1, *offs = strrchr(spec, ':'), *tok, *save;
			unsigned long long off[MAX_OFFSETS];
			unsigned int n = 0;

			if ((strncmp(one, "uprobe:", 7) && !single) || !offs) {
				fprintf(stderr, "floor: uprobe:FILE:OFFSET expected\n");
				kill(pid, SIGKILL);
				return 2;
			}
			*offs++ = 0;
			for (tok = strtok_r(offs, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (multi && !single) {
					if (n == MAX_OFFSETS) {
						fprintf(stderr, "floor: at most %d offsets a file\n",
							MAX_OFFSETS);
						kill(pid, SIGKILL);
						return 2;
					}
					off[n++] = strtoull(tok, NULL, 16);
					continue;
				}
				link = bpf_program__attach_uprobe(skel->progs.empty_uprobe, false, pid,
								  spec, strtoul(tok, NULL, 16));
				if (!link) {
					perror("floor: attach uprobe");
					kill(pid, SIGKILL);
					return 1;
				}
			}
			/* The link's fd stays open until exit, as corobpf's do. */
			if (n && attach_multi(bpf_program__fd(skel->progs.empty_uprobe_multi),
					      TRACE_UPROBE_MULTI, pid, spec, off, n) < 0) {
				fprintf(stderr, "floor: attach uprobe_multi to %s: %s\n", spec,
					strerror(errno));
				kill(pid, SIGKILL);
				return 1;
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
