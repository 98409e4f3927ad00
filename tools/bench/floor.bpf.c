// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor: empty programs on a USDT site or any instruction, what the
 * kernel's uprobe costs alone. And what a counters-only mode would cost: a
 * program that reads the probe's argument and counts it in the kernel, per
 * coroutine, with no ring buffer.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h> /* libbpf's USDT attach needs its maps (the empty program reads no argument) */

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

/*
 * The same through a uprobe_multi link (kernel 6.6+; floor.c sets the attach
 * type), the link corobpf's switch-function path attaches with: the kernel
 * runs the program by another path than a perf-event uprobe's.
 */
SEC("uprobe")
int empty_uprobe_multi(struct pt_regs *ctx)
{
	return 0;
}

/*
 * The same as a uprobe session (kernel 6.13+; floor.c sets the attach type),
 * as corobpf attaches an interpreter's functions (asyncio, Lua): 0 at the
 * entry asks for the return too, so both run, as they do under corobpf.
 */
SEC("uprobe")
int empty_session(struct pt_regs *ctx)
{
	return 0;
}

/* Per coroutine id: how many times the probe named it (a counters-only mode's least work). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} counts SEC(".maps");

SEC("usdt")
int BPF_USDT(count, __u64 id)
{
	__u64 one = 1, *n = bpf_map_lookup_elem(&counts, &id);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&counts, &id, &one, BPF_NOEXIST);
	return 0;
}

/* Only the argument read, the way libbpf's USDT path decodes it (its spec looked up per hit). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink SEC(".maps");

SEC("usdt")
int BPF_USDT(args, __u64 id)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&sink, &zero);

	if (v)
		*v += id; /* kept, so the read is not optimized away */
	return 0;
}
