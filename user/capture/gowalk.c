// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The goroutines alive at attach (see gowalk.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>
#include "gowalk.h"
#include "addrnames.h"
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
 * [bp + 8] = the return address into it), at most max. Only ever read
 * through peek.
 */
static u32 walk_stack(u32 pid, const struct goelf_info *gi, u64 g, u64 *ips, u32 max)
{
	u64 pc = peek_word(pid, g + gi->g_sched_pc), sp = peek_word(pid, g + gi->g_sched_sp);
	u64 bp = peek_word(pid, g + gi->g_sched_bp);
	u32 n = 0;

	if (!pc)
		return 0;
	ips[n++] = pc;
	while (n < max && bp && bp >= sp && !(bp & 7)) {
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

/* A word of the process (a goelf_read_fn; ctx: the pid). */
static bool live_word(void *ctx, uint64_t addr, uint64_t *word)
{
	return peek(*(const u32 *)ctx, addr, word, sizeof(*word));
}

/* Frames followed to name a goroutine started by a wrapper (the wrapper's is near the last). */
#define NAME_DEPTH 512

/*
 * A goroutine started in a `go f(x)` statement's wrapper that calls f
 * through its closure (w): named after f, as Go's traceback names it. Before
 * it first runs, through the closure it starts with (g.sched.ctxt, which the
 * runtime clears when it runs it); once it ran, from its stack, where it was
 * left: the frame the wrapper called. False, the name kept, if neither says
 * (it runs now: its stack is its thread's to change).
 */
static bool name_wrapped(u32 pid, const struct goelf_info *gi, u64 g, u32 status,
			 const struct goelf_wrapper *w, char *name, size_t len)
{
	u64 ctxt = peek_word(pid, g + gi->g_sched_ctxt), f = 0;
	char buf[CORO_STR_LEN];

	if (ctxt) {
		f = goelf_wrapper_target(w, ctxt, live_word, &pid);
		if (f) {
			addrname_at(pid, f, buf, sizeof(buf));
			if (!strncmp(buf, "0x", 2) || strstr(buf, "+0x"))
				f = 0; /* not a function's entry: not the closure the code says */
		}
	} else if (status != CORO_GO_RUNNING && status != CORO_GO_SYSCALL) {
		u64 *frames = xmalloc(NAME_DEPTH * sizeof(*frames));
		u32 n = walk_stack(pid, gi, g, frames, NAME_DEPTH);

		f = goelf_wrapper_callee(w, frames, n);
		free(frames);
		if (f)
			addrname_func_at(pid, f, buf, sizeof(buf));
	}
	if (!f)
		return false;
	snprintf(name, len, "%s", buf);
	return true;
}

/*
 * A runnable goroutine's goid read a second time, after the pass over every
 * goroutine: newproc1 reuses a dead g and sets its status to Grunnable
 * before it gives it its new goid, so a g read between the two carries its
 * dead goroutine's goid. A goid that changed meanwhile was such a read:
 * the new goroutine's creation is in the probes' stream, which has been in
 * place since before the walk began. The thread in newproc1 can be held off
 * its CPU between the two stores for longer than the walk takes (most likely
 * why go_attach_under_load once found a goroutine runnable at an attach that
 * never ran and that the runtime never listed), so the runnable ones are read
 * once more after GOWALK_RECHECK_MS.
 */
static bool goid_changed(u32 pid, const struct goelf_info *gi, u64 g, u64 goid)
{
	return peek_word(pid, g + gi->offs.g_goid) != goid;
}

/* How long after the pass a runnable goroutine's goid is read again (goid_changed). */
#define GOWALK_RECHECK_MS 10

/* A record's g, and what its name still needs (a wrapper's way to f, while it ran). */
struct walked_g {
	u64 g;
	struct goelf_wrapper w;
};

int gowalk_process(u32 pid, const struct goelf_info *gi, bool stacks,
		   struct coro_rec_go_g **out)
{
	const struct coro_go_offsets *o = &gi->offs;
	u64 slice[2], *gs, bias, now;
	size_t used = 0, cap = 0;
	char *recs = NULL, *from, *to;
	struct walked_g *wg;
	u32 n = 0, kept = 0;
	bool runnable = false; /* a record whose goid is read again (goid_changed) */

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
	wg = xcalloc(slice[1], sizeof(*wg));
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
		r->status = status;
		runnable |= status == CORO_GO_RUNNABLE;
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
		wg[n].g = gs[i];
		addrname_goroutine(pid, peek_word(pid, gs[i] + o->g_startpc), r->name,
					 sizeof(r->name), &wg[n].w);
		if (wg[n].w.n &&
		    name_wrapped(pid, gi, gs[i], status, &wg[n].w, r->name, sizeof(r->name)))
			wg[n].w.n = 0;
		if (stacks && (status == CORO_GO_WAITING || status == CORO_GO_PREEMPTED))
			nips = walk_stack(pid, gi, gs[i], w.ips, GOWALK_STACK_DEPTH);
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
	/* A runnable g whose goid may not have been written yet: the second read is later. */
	if (runnable)
		usleep(GOWALK_RECHECK_MS * 1000);
	/*
	 * In place: the records of goroutines that were really there, packed.
	 * One that ran a wrapper is named now if it has stopped running since.
	 */
	from = to = recs;
	for (u32 i = 0; i < n; i++) {
		struct coro_rec_go_g *r = (struct coro_rec_go_g *)from;
		u16 size = r->hdr.size;
		u32 status = 0;

		from += size;
		if (r->status == CORO_GO_RUNNABLE && goid_changed(pid, gi, wg[i].g, r->goid))
			continue;
		if (wg[i].w.n && peek(pid, wg[i].g + gi->g_status, &status, sizeof(status)) &&
		    !goid_changed(pid, gi, wg[i].g, r->goid))
			name_wrapped(pid, gi, wg[i].g, status & ~(u32)GO_GSCAN, &wg[i].w, r->name,
				     sizeof(r->name));
		memmove(to, r, size);
		to += size;
		kept++;
	}
	free(wg);
	/*
	 * Every record is stamped after the last read: the probes' records of
	 * anything that changed while the walk read (before this instant) come
	 * first in time order, and gomodel.c keeps their view; whatever they
	 * say later happened after the walk read it, but for newproc1's
	 * return (gomodel.c, apply_status): a runnable g read after it had its
	 * goid, before its thread reached the probe on newproc1's ret.
	 */
	now = now_boottime_ns();
	from = recs;
	for (u32 i = 0; i < kept; i++) {
		struct coro_rec_go_g *r = (struct coro_rec_go_g *)from;

		r->hdr.ts = now;
		from += r->hdr.size;
	}
	*out = (struct coro_rec_go_g *)recs;
	return (int)kept;
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
