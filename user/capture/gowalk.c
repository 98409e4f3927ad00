// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The goroutines alive at attach (see gowalk.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include "gowalk.h"
#include "switchfam.h"
#include "util.h"

/* Go's status bit for a goroutine the GC is scanning: the state under it is the real one. */
#define GO_GSCAN 0x1000

static bool peek(u32 pid, u64 addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};

	return addr && process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static u64 peek_word(u32 pid, u64 addr)
{
	u64 v = 0;

	return peek(pid, addr, &v, sizeof(v)) ? v : 0;
}

/* A PIE's load bias: where the kernel put its program headers (AT_PHDR) less where it says. */
static bool load_bias(u32 pid, const struct goelf_info *gi, u64 *bias)
{
	char path[64];
	u64 av[2];
	FILE *f;

	*bias = 0;
	if (!gi->pie)
		return true;
	if (!gi->phdr_vaddr)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/auxv", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fread(av, sizeof(av), 1, f) == 1 && av[0]) {
		if (av[0] == AT_PHDR) {
			*bias = av[1] - gi->phdr_vaddr;
			fclose(f);
			return true;
		}
	}
	fclose(f);
	return false;
}

/* A packed walk record with room for its stack. */
struct walked {
	struct coro_rec_go_g g;
	struct coro_stack_ref ref;
	u64 ips[GOWALK_STACK_DEPTH];
};

/*
 * Where the parked goroutine at g is: its saved pc, then the return
 * addresses of the frame-pointer chain (each frame [bp] = the caller's bp,
 * [bp + 8] = the return address into it). Only ever read through peek.
 */
static u32 walk_stack(u32 pid, const struct goelf_info *gi, u64 g, u64 *ips)
{
	u64 pc = peek_word(pid, g + gi->g_sched_pc), sp = peek_word(pid, g + gi->g_sched_sp);
	u64 bp = peek_word(pid, g + gi->g_sched_bp);
	u32 n = 0;

	if (!pc)
		return 0;
	ips[n++] = pc;
	while (n < GOWALK_STACK_DEPTH && bp && bp >= sp && !(bp & 7)) {
		u64 fr[2];

		if (!peek(pid, bp, fr, sizeof(fr)) || !fr[1])
			break;
		ips[n++] = fr[1];
		/* Callers' frames are above: anything else is not a chain. */
		if (fr[0] <= bp)
			break;
		bp = fr[0];
	}
	return n;
}

int gowalk_process(u32 pid, const struct goelf_info *gi, bool stacks,
		   struct coro_rec_go_g **out)
{
	const struct coro_go_offsets *o = &gi->offs;
	u64 slice[2], *gs, bias, now = now_boottime_ns();
	size_t used = 0, cap = 0;
	char *recs = NULL;
	u32 n = 0;

	*out = NULL;
	if (!gi->allgs || !load_bias(pid, gi, &bias))
		return -ENOTSUP;
	if (!peek(pid, gi->allgs + bias, slice, sizeof(slice)))
		return -errno ? -errno : -EIO;
	if (slice[1] > GOWALK_MAX)
		slice[1] = GOWALK_MAX;
	if (!slice[1])
		return 0;
	gs = xmalloc(slice[1] * sizeof(*gs));
	if (!peek(pid, slice[0], gs, slice[1] * sizeof(*gs))) {
		free(gs);
		return -EIO;
	}
	for (u64 i = 0; i < slice[1]; i++) {
		struct walked w;
		struct coro_rec_go_g *r = &w.g;
		u32 status = 0, nips = 0;
		u8 wr = 0;

		memset(&w.g, 0, sizeof(w.g));

		if (!peek(pid, gs[i] + gi->g_status, &status, sizeof(status)))
			continue;
		status &= ~(u32)GO_GSCAN;
		if (status == CORO_GO_DEAD || status == CORO_GO_IDLE)
			continue;
		r->goid = peek_word(pid, gs[i] + o->g_goid);
		if (!r->goid)
			continue; /* a thread's g0 or gsignal, not a goroutine */
		r->hdr.size = sizeof(*r);
		r->hdr.kind = CORO_REC_GO_G;
		r->hdr.pid = pid;
		r->hdr.ts = now;
		r->status = status;
		if (status == CORO_GO_RUNNING || status == CORO_GO_SYSCALL) {
			u64 m = peek_word(pid, gs[i] + o->g_m);

			r->hdr.tid = m ? (u32)peek_word(pid, m + gi->m_procid) : 0;
		}
		if (status == CORO_GO_WAITING) {
			u64 sg = peek_word(pid, gs[i] + o->g_waiting);

			peek(pid, gs[i] + o->g_waitreason, &wr, 1);
			r->waitreason = wr;
			r->reason = o->reason[wr & (CORO_GO_REASONS - 1)];
			r->obj = sg ? peek_word(pid, sg + o->sudog_c) : 0;
			if (sg && !r->obj)
				r->obj = peek_word(pid, sg + o->sudog_elem);
		}
		switchfam_name_at(pid, peek_word(pid, gs[i] + o->g_startpc), r->name,
				  sizeof(r->name));
		if (stacks && (status == CORO_GO_WAITING || status == CORO_GO_PREEMPTED))
			nips = walk_stack(pid, gi, gs[i], w.ips);
		if (nips) {
			w.ref.id = nips;
			w.ref.how = CORO_STACK_IPS;
			r->hdr.size = (u16)(sizeof(w.g) + sizeof(w.ref) + nips * sizeof(u64));
		}
		if (used + sizeof(w) > cap) {
			cap = cap ? cap * 2 : 64 * sizeof(w);
			recs = xrealloc(recs, cap);
		}
		memcpy(recs + used, &w, r->hdr.size);
		used += r->hdr.size;
		n++;
	}
	free(gs);
	*out = (struct coro_rec_go_g *)recs;
	return (int)n;
}

void gowalk_emit(const struct coro_rec_go_g *gs, u32 n, struct stack_resolver *stk,
		 stack_emit_fn emit, void *ctx)
{
	const char *p = (const char *)gs;

	for (u32 i = 0; i < n; i++) {
		const struct coro_rec_go_g *r = (const void *)p;
		struct {
			struct coro_rec_go_g g;
			struct coro_stack_ref ref;
		} o = {.g = *r};
		u32 id = 0;

		p += r->hdr.size;
		if (stk && r->hdr.size > sizeof(*r))
			id = stack_resolve(stk, &r->hdr, emit, ctx);
		o.g.hdr.size = sizeof(o.g);
		if (id) {
			o.g.hdr.size = sizeof(o);
			o.ref.id = id;
			o.ref.how = CORO_STACK_CAPTURE_ID;
		}
		emit(ctx, &o.g.hdr);
	}
}
