// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Go's goroutine status changes to coroutine records (see gomodel.h). */
#include <string.h>
#include "gomodel.h"
#include "kinds.h"
#include "raw.h"

void gomodel_init(struct gomodel *g)
{
	memset(g, 0, sizeof(*g));
	hmap_init(&g->seen);
	hmap_init(&g->running);
	hmap_init(&g->thread);
}

void gomodel_free(struct gomodel *g)
{
	hmap_free(&g->seen);
	hmap_free(&g->running);
	hmap_free(&g->thread);
}

/* What the probes said of a goroutine (the value in `seen`). */
#define SEEN_ALIVE ((void *)1)
#define SEEN_ENDED ((void *)2)
/* The walk found it runnable, and the probes have said nothing of it since. */
#define SEEN_WALKED_RUNNABLE ((void *)3)

/* A header for a record implied by `h`: its losses are reported once, by the first. */
static struct coro_event_hdr implied(const struct coro_event_hdr *h, u8 kind, u16 size,
				     bool first)
{
	struct coro_event_hdr o = *h;

	o.kind = kind;
	o.size = size;
	if (!first)
		o.lost_before = 0;
	return o;
}

/*
 * In `thread`: what runs there is the walk's word (a goroutine it found
 * running), not the BPF side's, which never saw it start there.
 */
#define THREAD_WALKED (1ULL << 63)

static void put_thread(struct gomodel *g, u32 pid, u32 tid, u64 goid)
{
	hmap_put(&g->thread, pid, tid, (void *)(uintptr_t)(goid + 1));
}

/* The goroutine the stage said runs on (pid, tid), 0 for none; *walked: the walk said it. */
static u64 thread_goroutine(struct gomodel *g, u32 pid, u32 tid, bool *walked)
{
	u64 v = (u64)(uintptr_t)hmap_get(&g->thread, pid, tid);

	*walked = v & THREAD_WALKED;
	v &= ~THREAD_WALKED;
	return v ? v - 1 : 0;
}

/* stack: a capture stack id where it parked (the walk's), or 0: none. */
static void emit_switch_at(struct gomodel *g, const struct coro_event_hdr *h, bool first, u64 from,
			   u64 to, u32 reason, u64 obj, u32 stack, gomodel_emit_fn emit, void *ctx)
{
	struct {
		struct coro_ev_switch e;
		struct coro_stack_ref ref;
	} rec = {.e.hdr = implied(h, CORO_EV_SWITCH, sizeof(rec.e), first)};

	if (stack) {
		rec.e.hdr.size = sizeof(rec);
		rec.ref.id = stack;
		rec.ref.how = CORO_STACK_CAPTURE_ID;
	}
	rec.e.from = from;
	rec.e.to = to;
	rec.e.reason = reason;
	rec.e.obj = obj;
	if (from)
		hmap_del(&g->running, h->pid, from);
	if (to)
		hmap_put(&g->running, h->pid, to, (void *)(uintptr_t)(h->tid + 1));
	if (h->tid)
		put_thread(g, h->pid, h->tid, to);
	emit(ctx, &rec.e.hdr);
}

static void emit_switch(struct gomodel *g, const struct coro_event_hdr *h, bool first, u64 from,
			u64 to, u32 reason, u64 obj, gomodel_emit_fn emit, void *ctx)
{
	emit_switch_at(g, h, first, from, to, reason, obj, 0, emit, ctx);
}

static void emit_id(const struct coro_event_hdr *h, bool first, u8 kind, u64 id,
		    gomodel_emit_fn emit, void *ctx)
{
	struct coro_ev_exit e = {.hdr = implied(h, kind, kind == CORO_EV_EXIT ? sizeof(e)
							      : sizeof(struct coro_ev_ready),
						first)};

	e.id = id;
	e.status = 0;
	emit(ctx, &e.hdr);
}

/*
 * A goroutine about to run on h's thread: if the GC parked it elsewhere
 * without a status change, it left that thread then; if this thread still
 * ran another one, that one left it (true: the thread runs none now). The
 * BPF side's word for what ran (h->cur) must agree, unless the walk at the
 * attach found the other one running there: the BPF side never saw it
 * start, and the GC's asynchronous preemption may have stopped it since.
 */
static bool missed_switch_outs(struct gomodel *g, const struct coro_event_hdr *h, u64 goid,
			       gomodel_emit_fn emit, void *ctx)
{
	uintptr_t tid1 = (uintptr_t)hmap_get(&g->running, h->pid, goid);
	bool walked, walked_there;
	u64 cur = thread_goroutine(g, h->pid, h->tid, &walked);

	if (tid1 && tid1 - 1 != h->tid) {
		struct coro_event_hdr o = implied(h, 0, 0, false);
		u64 there = thread_goroutine(g, h->pid, (u32)(tid1 - 1), &walked_there);

		o.tid = (u32)(tid1 - 1);
		o.cur = goid;
		o.flags &= (u8)~CORO_EVF_CUR_UNKNOWN;
		if (there == goid)
			emit_switch(g, &o, false, goid, 0, CORO_R_YIELD, 0, emit, ctx);
		else
			hmap_del(&g->running, h->pid, goid);
	}
	if (cur && cur != goid && (cur == h->cur || walked)) {
		struct coro_event_hdr o = *h;

		o.cur = cur;
		o.flags &= (u8)~CORO_EVF_CUR_UNKNOWN;
		emit_switch(g, &o, false, cur, 0, CORO_R_YIELD, 0, emit, ctx);
		return true;
	}
	return false;
}

static void apply_status(struct gomodel *g, const struct coro_ev_go_status *e,
			 gomodel_emit_fn emit, void *ctx)
{
	const struct coro_event_hdr *h = &e->hdr;
	u32 o = e->old_status, n = e->new_status;
	u64 id = e->goid;
	bool walked;

	if (!id)
		return;
	walked = o == CORO_GO_DEAD && n == CORO_GO_RUNNABLE &&
		 hmap_get(&g->seen, h->pid, id) == SEEN_WALKED_RUNNABLE;
	hmap_put(&g->seen, h->pid, id, n == CORO_GO_DEAD ? SEEN_ENDED : SEEN_ALIVE);
	/*
	 * newproc1's return, for a goroutine the walk found runnable first:
	 * newproc1 gives the g its status and goid before it returns, so the
	 * walk can read them before the probe on its ret stamps the creation
	 * (the thread held in between past the walk's last read). Goids are
	 * never reused and the new g runs nowhere until newproc1 has returned:
	 * this is the creation the walk saw the end of. The walk's view stands
	 * (runnable since the walk, no parent, as any goroutine found there).
	 */
	if (walked)
		return;
	if (o == CORO_GO_DEAD && n == CORO_GO_RUNNABLE) {
		struct coro_ev_create c = {.hdr = implied(h, CORO_EV_CREATE, sizeof(c), true)};

		c.id = id;
		c.parent = h->cur;
		emit(ctx, &c.hdr);
		emit_id(h, false, CORO_EV_READY, id, emit, ctx);
	} else if (n == CORO_GO_RUNNING && (o == CORO_GO_RUNNABLE || o == CORO_GO_WAITING)) {
		struct coro_event_hdr in = *h;

		/* Switched out just now: the scheduler runs the thread until this one. */
		if (missed_switch_outs(g, h, id, emit, ctx))
			in.cur = 0;
		emit_switch(g, &in, true, in.cur == id ? 0 : in.cur, id, CORO_R_YIELD, 0, emit,
			    ctx);
	} else if (o == CORO_GO_RUNNING && n == CORO_GO_WAITING) {
		emit_switch_at(g, h, true, id, 0, e->reason, e->obj, coro_record_stack(h), emit,
			       ctx);
	} else if ((o == CORO_GO_RUNNING || o == CORO_GO_SYSCALL) && n == CORO_GO_RUNNABLE) {
		emit_switch(g, h, true, id, 0, CORO_R_YIELD, 0, emit, ctx);
	} else if (o == CORO_GO_WAITING && n == CORO_GO_RUNNABLE) {
		emit_id(h, true, CORO_EV_READY, id, emit, ctx);
	} else if (o == CORO_GO_RUNNING && n == CORO_GO_DEAD) {
		emit_id(h, true, CORO_EV_EXIT, id, emit, ctx);
		emit_switch(g, h, false, id, 0, CORO_R_DONE, 0, emit, ctx);
	}
}

/*
 * A goroutine alive at attach, unless the probes said something of it
 * first: the walk's records are stamped after its last read, so what the
 * probes said before is newer than what the walk read, or as new. A
 * goroutine they saw end was read as it ended, or its g as newproc1 reused
 * it (with the dead goroutine's goid still in it): nothing of it is kept.
 */
static void apply_walked(struct gomodel *g, const struct coro_rec_go_g *r, gomodel_emit_fn emit,
			 void *ctx)
{
	struct coro_event_hdr h = r->hdr;
	struct coro_ev_name nm = {0};
	void *seen;

	if (!r->goid)
		return;
	seen = hmap_get(&g->seen, h.pid, r->goid);
	if (seen == SEEN_ENDED)
		return;
	h.cur = 0;
	h.lost_before = 0;
	/* Of no thread, unless it runs on one: the model's view of threads stays as it is. */
	h.flags = r->hdr.tid ? CORO_EVF_CUR_UNKNOWN : CORO_EVF_NO_THREAD;
	nm.hdr = implied(&h, CORO_EV_NAME, sizeof(nm), true);
	nm.hdr.flags = CORO_EVF_NO_THREAD;
	nm.id = r->goid;
	memcpy(nm.name, r->name, sizeof(nm.name));
	nm.name[sizeof(nm.name) - 1] = 0;
	if (seen) {
		/* The probes' state is newer; its name only the walk knows. */
		emit(ctx, &nm.hdr);
		return;
	}
	hmap_put(&g->seen, h.pid, r->goid,
		 r->status == CORO_GO_RUNNABLE ? SEEN_WALKED_RUNNABLE : SEEN_ALIVE);
	switch (r->status) {
	case CORO_GO_RUNNABLE:
		emit(ctx, &nm.hdr);
		emit_id(&h, false, CORO_EV_READY, r->goid, emit, ctx);
		break;
	case CORO_GO_RUNNING:
	case CORO_GO_SYSCALL:
		emit(ctx, &nm.hdr);
		if (h.tid) {
			emit_switch(g, &h, false, 0, r->goid, CORO_R_YIELD, 0, emit, ctx);
			hmap_put(&g->thread, h.pid, h.tid,
				 (void *)(uintptr_t)((r->goid + 1) | THREAD_WALKED));
		}
		break;
	case CORO_GO_WAITING:
	case CORO_GO_PREEMPTED:
		emit(ctx, &nm.hdr);
		/*
		 * Its last thread is not known: in and out at once on thread 0,
		 * which no real thread is, so no real thread's view changes.
		 */
		h.tid = 0;
		emit_switch(g, &h, false, 0, r->goid, CORO_R_YIELD, 0, emit, ctx);
		emit_switch_at(g, &h, false, r->goid, 0,
			       r->status == CORO_GO_PREEMPTED ? CORO_R_YIELD : r->reason, r->obj,
			       coro_record_stack(&r->hdr), emit, ctx);
		break;
	}
}

void gomodel_apply(struct gomodel *g, const struct coro_event_hdr *rec, gomodel_emit_fn emit,
		   void *ctx)
{
	if (rec->kind == CORO_EV_GO_STATUS)
		apply_status(g, (const struct coro_ev_go_status *)rec, emit, ctx);
	else if (rec->kind == CORO_REC_GO_G)
		apply_walked(g, (const struct coro_rec_go_g *)rec, emit, ctx);
	else
		emit(ctx, rec);
}
