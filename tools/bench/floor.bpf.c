// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The floor: empty programs on a USDT site or any instruction, what the kernel's uprobe costs alone. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h> /* libbpf's USDT attach needs its maps; no argument is read */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("usdt")
int BPF_USDT(empty)
{
	return 0;
}

/* The same on any instruction: what a uprobe there costs (emulated or single-stepped). */
SEC("uprobe")
int empty_uprobe(struct pt_regs *ctx)
{
	return 0;
}
