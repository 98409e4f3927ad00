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

int gowalk_process(u32 pid, const struct goelf_info *gi, struct coro_rec_go_g **out)
{
	const struct coro_go_offsets *o = &gi->offs;
	u64 slice[2], *gs, bias, now = now_boottime_ns();
	struct coro_rec_go_g *recs;
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
	recs = xcalloc(slice[1], sizeof(*recs));
	for (u64 i = 0; i < slice[1]; i++) {
		struct coro_rec_go_g *r = &recs[n];
		u32 status = 0;
		u8 wr = 0;

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
		n++;
	}
	free(gs);
	*out = recs;
	return (int)n;
}
