/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How the string probes' programs read strings (bpf/corobpf.bpf.c, "Strings"):
 * made sleepable, between open and load, where the kernel lets a uprobe
 * program sleep (6.0 and later), so that a string in a page not faulted in
 * yet is read after all. Kept to this header: one call in capture_open().
 */
#ifndef COROBPF_STRREAD_H
#define COROBPF_STRREAD_H

#include <stdbool.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "corobpf.skel.h"
#include "log.h"

/* A sleepable kprobe-type program loads only where uprobe programs may sleep. */
static inline bool kernel_has_sleepable_uprobes(void)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .prog_flags = BPF_F_SLEEPABLE);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "Dual BSD/GPL", insns, 2, &o);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * Call between corobpf_bpf__open() and __load(). The programs and the rodata
 * flag go together: the flag lets the programs take their faulting read,
 * which only a sleepable program may call.
 */
static inline void strread_setup(struct corobpf_bpf *skel)
{
	struct bpf_program *progs[] = {skel->progs.coro_name, skel->progs.coro_span_begin,
				       skel->progs.coro_span_end, skel->progs.coro_announce};

	if (!kernel_has_sleepable_uprobes()) {
		log_verbose("this kernel lets no uprobe program sleep: a string in a page its "
			    "program never touched comes out unreadable (counted)");
		return;
	}
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		bpf_program__set_flags(progs[i], bpf_program__flags(progs[i]) | BPF_F_SLEEPABLE);
	skel->rodata->strings_sleepable = true;
}

#endif
