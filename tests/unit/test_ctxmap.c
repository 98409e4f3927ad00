// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/model/ctxmap.c: raw context records of the switch-function
 * path in, probe-ABI records out, on synthetic streams shaped like what the
 * BPF side sends for ucontext and Boost.Context.
 */
#include <errno.h>
#include "unit.h"
#include "ctxmap.h"
#include "kinds.h"
#include "raw.h"

#define PID 200
#define TID 200 /* the main thread */

static struct ctxmap X;
static union {
	struct coro_event_hdr hdr;
	u8 bytes[256];
} out[64];
static int nout;

static void collect(void *ctx, const struct coro_event_hdr *rec)
{
	(void)ctx;
	if (nout < 64)
		memcpy(out[nout++].bytes, rec, rec->size);
}

static void feed(const void *rec)
{
	ctxmap_apply(&X, rec, collect, NULL);
}

static void hdr(struct coro_event_hdr *h, size_t size, unsigned kind, u64 ts, u64 cur, bool cur_known)
{
	memset(h, 0, size);
	h->size = (u16)size;
	h->kind = (u8)kind;
	h->pid = PID;
	h->tid = TID;
	h->ts = ts;
	h->cur = cur;
	h->flags = cur_known ? 0 : CORO_EVF_CUR_UNKNOWN;
}

static void process(bool launched)
{
	struct {
		struct coro_rec_process r;
		char exe[8];
	} p;

	hdr(&p.r.hdr, sizeof(p), CORO_REC_PROCESS, 1, 0, true);
	p.r.mode = launched ? CORO_PROC_LAUNCHED : CORO_PROC_ATTACHED;
	strcpy(p.r.comm, "app");
	strcpy(p.exe, "/app");
	feed(&p);
}

static void switch_path(u32 family)
{
	struct {
		struct coro_rec_switch r;
		char text[8];
	} s;

	hdr(&s.r.hdr, sizeof(s), CORO_REC_SWITCH, 2, 0, true);
	s.r.family = family;
	memcpy(s.text, "/l\0x\0\0", 6);
	feed(&s);
}

static void ctx_create(u64 ts, u64 cur, bool known, u32 fam, u64 id, u64 lo, u64 hi)
{
	struct coro_ev_ctx_create e;

	hdr(&e.hdr, sizeof(e), CORO_EV_CTX_CREATE, ts, cur, known);
	e.id = id;
	e.stack_lo = lo;
	e.stack_hi = hi;
	e.family = fam;
	feed(&e);
}

static void ctx_switch(u64 ts, u64 cur, bool known, u32 fam, u64 from, u64 to, bool from_current)
{
	struct coro_ev_ctx_switch e;

	hdr(&e.hdr, sizeof(e), CORO_EV_CTX_SWITCH, ts, cur, known);
	e.from = from;
	e.to = to;
	e.family = fam;
	e.flags = from_current ? CORO_CTXF_FROM_CURRENT : 0;
	feed(&e);
}

static void ctx_exit(u64 ts, u64 cur, u32 fam)
{
	struct coro_ev_ctx_exit e;

	hdr(&e.hdr, sizeof(e), CORO_EV_CTX_EXIT, ts, cur, true);
	e.family = fam;
	feed(&e);
}

/* getcontext(uc): the running context saved there, no switch. */
static void ctx_save(u64 ts, u64 cur, bool known, u64 uc)
{
	struct coro_ev_ctx_switch e;

	hdr(&e.hdr, sizeof(e), CORO_EV_CTX_SWITCH, ts, cur, known);
	e.from = uc;
	e.family = CORO_FAM_UCONTEXT;
	e.flags = CORO_CTXF_SAVE;
	feed(&e);
}

/* pth_exit(value), as the BPF side writes it since exits carry a value. */
static void ctx_exit_status(u64 ts, u64 cur, u32 fam, s64 status)
{
	struct coro_ev_ctx_exit_status e;

	hdr(&e.e.hdr, sizeof(e), CORO_EV_CTX_EXIT, ts, cur, true);
	e.e.family = fam;
	e.status = status;
	feed(&e);
}

static const struct coro_ev_exit *ex(int i)
{
	CHECK(i < nout && out[i].hdr.kind == CORO_EV_EXIT);
	return (const void *)out[i].bytes;
}

static const struct coro_ev_switch *sw(int i)
{
	CHECK(i < nout && out[i].hdr.kind == CORO_EV_SWITCH);
	return (const void *)out[i].bytes;
}

static void reset(void)
{
	ctxmap_free(&X);
	ctxmap_init(&X);
	nout = 0;
}

#define MAIN CTXMAP_MAIN_ID(TID)

TEST(ucontext_launched)
{
	const u64 A = 0x5000, B = 0x6000, MAIN_UC = 0x7ffd000;
	struct coro_rec_thread th;

	reset();
	process(true);
	switch_path(CORO_FAM_UCONTEXT);
	hdr(&th.hdr, sizeof(th), CORO_REC_THREAD, 9, 0, true);
	strcpy(th.comm, "worker");
	feed(&th);
	nout = 0;

	/* makecontext before any switch: the thread runs its main context. */
	ctx_create(10, 0, false, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	CHECK_EQ(nout, 3);
	CHECK_EQ(sw(0)->from, 0);
	CHECK_EQ(sw(0)->to, MAIN);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_NAME);
	CHECK_STR(((struct coro_ev_name *)out[1].bytes)->name, "main");
	CHECK_EQ(out[2].hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(((struct coro_ev_create *)out[2].bytes)->id, A);
	CHECK_EQ(((struct coro_ev_create *)out[2].bytes)->parent, MAIN);
	CHECK_EQ(out[2].hdr.cur, MAIN);
	CHECK(!(out[2].hdr.flags & CORO_EVF_CUR_UNKNOWN));

	/* swapcontext(&main_uc, A): main saves itself somewhere; that address is main now. */
	nout = 0;
	ctx_switch(20, 0, false, CORO_FAM_UCONTEXT, MAIN_UC, A, false);
	CHECK_EQ(nout, 1);
	CHECK_EQ(sw(0)->from, MAIN);
	CHECK_EQ(sw(0)->to, A);
	CHECK_EQ(sw(0)->hdr.cur, MAIN);
	/* A runs; the BPF side reports cur = A; back to main by its save area. */
	ctx_switch(30, A, true, CORO_FAM_UCONTEXT, A, MAIN_UC, false);
	CHECK_EQ(sw(1)->from, A);
	CHECK_EQ(sw(1)->to, MAIN);
	CHECK_EQ(sw(1)->reason, CORO_R_UNKNOWN);

	/* B returns from its function (__start_context), then setcontext(uc_link = main). */
	ctx_create(40, MAIN_UC, true, CORO_FAM_UCONTEXT, B, 0x3000, 0x4000);
	ctx_switch(50, MAIN_UC, true, CORO_FAM_UCONTEXT, MAIN_UC, B, false);
	nout = 0;
	ctx_exit(60, B, CORO_FAM_UCONTEXT);
	CHECK_EQ(nout, 1);
	CHECK_EQ(out[0].hdr.kind, CORO_EV_EXIT);
	CHECK_EQ(((struct coro_ev_exit *)out[0].bytes)->id, B);
	ctx_switch(70, B, true, CORO_FAM_UCONTEXT, 0, MAIN_UC, true);
	CHECK_EQ(sw(1)->from, B);
	CHECK_EQ(sw(1)->to, MAIN);
	CHECK_EQ(sw(1)->reason, CORO_R_DONE);
	/* An exit with nothing known to exit is counted, not invented. */
	CHECK_EQ(X.exits_unknown, 0);
}

TEST(fcontext_ranges_reuse_and_cur)
{
	const u64 TOP1 = 0x20000, TOP2 = 0x28000, MAINSP = 0x7fff0000;

	reset();
	process(true);
	switch_path(CORO_FAM_FCONTEXT);
	ctx_create(10, 0, false, CORO_FAM_FCONTEXT, TOP1, TOP1 - 0x10000, TOP1);
	nout = 0;
	/* Into the fiber: `to` is its saved stack pointer, inside its stack. */
	ctx_switch(20, 0, false, CORO_FAM_FCONTEXT, MAINSP, TOP1 - 0x40, false);
	CHECK_EQ(sw(0)->from, MAIN);
	CHECK_EQ(sw(0)->to, TOP1);
	/* The BPF side's cur is the raw value; other records get it translated. */
	{
		struct coro_ev_offcpu_begin o;

		hdr(&o.hdr, sizeof(o), CORO_EV_OFFCPU_BEGIN, 25, TOP1 - 0x40, true);
		feed(&o);
		CHECK_EQ(out[1].hdr.cur, TOP1);
	}
	/* Back to main: main's handle was remembered when it left. */
	ctx_switch(30, TOP1 - 0x40, true, CORO_FAM_FCONTEXT, TOP1 - 0x300, MAINSP, false);
	CHECK_EQ(sw(2)->from, TOP1);
	CHECK_EQ(sw(2)->to, MAIN);
	/* A new stack over the old one: the old fiber is gone. */
	nout = 0;
	ctx_create(40, MAINSP, true, CORO_FAM_FCONTEXT, TOP2, TOP1 - 0x8000, TOP2);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[0].hdr.kind, CORO_EV_EXIT);
	CHECK_EQ(((struct coro_ev_exit *)out[0].bytes)->id, TOP1);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(((struct coro_ev_create *)out[1].bytes)->id, TOP2);
	CHECK_EQ(X.stacks_reused, 1);
}

TEST(fcontext_attached_follows_handles)
{
	/* Fibers made before the trace: no ranges; identity follows the saved handles. */
	const u64 X1 = 0x9100, Y1 = 0x9200, Y2 = 0x9280, X2 = 0x9180;

	reset();
	process(false);
	switch_path(CORO_FAM_FCONTEXT);
	nout = 0;
	ctx_switch(10, 0, false, CORO_FAM_FCONTEXT, X1, Y1, false); /* X leaves at X1, Y resumes */
	CHECK_EQ(sw(0)->from, X1);
	CHECK_EQ(sw(0)->to, Y1);
	ctx_switch(20, Y1, true, CORO_FAM_FCONTEXT, Y2, X1, false); /* Y leaves at Y2, X resumes */
	CHECK_EQ(sw(1)->from, Y1);
	CHECK_EQ(sw(1)->to, X1);
	ctx_switch(30, X1, true, CORO_FAM_FCONTEXT, X2, Y2, false); /* X leaves at X2, Y resumes */
	CHECK_EQ(sw(2)->from, X1);
	CHECK_EQ(sw(2)->to, Y1);
	CHECK_EQ(nout, 3);
	/* No main context is invented for a process attached mid-life. */
	for (int i = 0; i < nout; i++)
		CHECK(out[i].hdr.kind != CORO_EV_NAME);
}

TEST(other_streams_pass_untouched)
{
	struct coro_ev_switch s;

	/* A process traced through probes. */
	reset();
	process(true);
	hdr(&s.hdr, sizeof(s), CORO_EV_SWITCH, 10, 0, false);
	s.from = 0;
	s.to = 0x1234;
	nout = 0;
	feed(&s);
	CHECK_EQ(nout, 1);
	CHECK(!memcmp(out[0].bytes, &s, sizeof(s)));

	/* A switch-path trace read back from JSONL: translated already, no raw records. */
	reset();
	process(true);
	switch_path(CORO_FAM_UCONTEXT);
	nout = 0;
	s.to = MAIN;
	feed(&s);
	CHECK_EQ(nout, 1);
	CHECK(!memcmp(out[0].bytes, &s, sizeof(s)));
}

TEST(exec_starts_over)
{
	struct coro_ev_proc e;

	reset();
	process(true);
	switch_path(CORO_FAM_UCONTEXT);
	ctx_create(10, 0, false, CORO_FAM_UCONTEXT, 0x5000, 0, 0);
	hdr(&e.hdr, sizeof(e), CORO_EV_EXEC, 20, 0, false);
	e.hdr.flags |= CORO_EVF_NO_THREAD;
	strcpy(e.comm, "newprog");
	feed(&e);
	nout = 0;
	/* The new program's thread starts in its main context again, named again. */
	ctx_create(30, 0, false, CORO_FAM_UCONTEXT, 0x6000, 0, 0);
	CHECK_EQ(nout, 3);
	CHECK_EQ(sw(0)->to, MAIN);
	CHECK_STR(((struct coro_ev_name *)out[1].bytes)->name, "main");
}

TEST(greenlet_main_and_qemu_terminate)
{
	const u64 G = 0x9000, MAIN_G = 0x8000, Q = 0xa000, LEADER = 0xb000;

	/* Greenlet, launched: from is the current one; main is the greenlet never made. */
	reset();
	process(true);
	switch_path(CORO_FAM_GREENLET);
	ctx_create(10, 0, false, CORO_FAM_GREENLET, G, 0, 0);
	nout = 0;
	ctx_switch(20, 0, false, CORO_FAM_GREENLET, 0, G, true);
	CHECK_EQ(sw(0)->from, MAIN);
	CHECK_EQ(sw(0)->to, G);
	ctx_switch(30, G, true, CORO_FAM_GREENLET, G, MAIN_G, true);
	CHECK_EQ(sw(1)->from, G);
	CHECK_EQ(sw(1)->to, MAIN);
	ctx_switch(40, MAIN_G, true, CORO_FAM_GREENLET, MAIN_G, G, true);
	CHECK_EQ(sw(2)->from, MAIN);
	ctx_exit(50, G, CORO_FAM_GREENLET);
	CHECK_EQ(out[3].hdr.kind, CORO_EV_EXIT);
	ctx_switch(60, G, true, CORO_FAM_GREENLET, G, MAIN_G, true);
	CHECK_EQ(sw(4)->to, MAIN);
	CHECK_EQ(sw(4)->reason, CORO_R_DONE);

	/* QEMU: a terminate ends `from` at its last switch out. */
	reset();
	process(true);
	switch_path(CORO_FAM_QEMU);
	nout = 0;
	ctx_switch(10, 0, false, CORO_FAM_QEMU, LEADER, Q, false);
	CHECK_EQ(sw(2)->from, MAIN); /* after the thread's start and name */
	{
		struct coro_ev_ctx_switch e;

		hdr(&e.hdr, sizeof(e), CORO_EV_CTX_SWITCH, 20, Q, true);
		e.from = Q;
		e.to = LEADER;
		e.family = CORO_FAM_QEMU;
		e.flags = CORO_CTXF_FROM_DONE;
		feed(&e);
	}
	CHECK_EQ(nout, 5);
	CHECK_EQ(out[3].hdr.kind, CORO_EV_EXIT);
	CHECK_EQ(((struct coro_ev_exit *)out[3].bytes)->id, Q);
	CHECK_EQ(sw(4)->from, Q);
	CHECK_EQ(sw(4)->to, MAIN);
	CHECK_EQ(sw(4)->reason, CORO_R_DONE);
}

/* A switch record as the BPF side writes it, with flags. */
static void ctx_switch_flags(u64 ts, u64 cur, bool known, u32 fam, u64 from, u64 to, u32 flags)
{
	struct coro_ev_ctx_switch e;

	hdr(&e.hdr, sizeof(e), CORO_EV_CTX_SWITCH, ts, cur, known);
	e.from = from;
	e.to = to;
	e.family = fam;
	e.flags = flags;
	feed(&e);
}

TEST(main_contexts_attached)
{
	const u64 LEADER = 0xb000, Q = 0xa000, Q2 = 0xc000, G = 0x9000, MAIN_G = 0x8000;
	const struct coro_ev_name *n;

	/*
	 * QEMU, attached: the thread's first switch leaves a coroutine made
	 * before the attach (not its own stack); a later one leaves the leader,
	 * on the thread's own stack: that is main, named before it is first seen.
	 */
	reset();
	process(false);
	switch_path(CORO_FAM_QEMU);
	nout = 0;
	ctx_switch(10, Q2, true, CORO_FAM_QEMU, Q2, LEADER, false);
	CHECK_EQ(nout, 1);
	ctx_switch_flags(20, LEADER, true, CORO_FAM_QEMU, LEADER, Q, CORO_CTXF_FROM_MAIN);
	CHECK_EQ(nout, 3);
	n = (const void *)out[1].bytes;
	CHECK_EQ(n->hdr.kind, CORO_EV_NAME);
	CHECK_EQ(n->id, LEADER);
	CHECK_STR(n->name, "main");
	CHECK_EQ(sw(2)->from, LEADER);
	/* Once. */
	ctx_switch_flags(30, Q, true, CORO_FAM_QEMU, Q, LEADER, 0);
	ctx_switch_flags(40, LEADER, true, CORO_FAM_QEMU, LEADER, Q, CORO_CTXF_FROM_MAIN);
	CHECK_EQ(nout, 5);

	/* Greenlet, attached: a switch to the main greenlet says which it is, without a switch. */
	reset();
	process(false);
	switch_path(CORO_FAM_GREENLET);
	nout = 0;
	ctx_switch(10, 0, false, CORO_FAM_GREENLET, 0, G, true);
	CHECK_EQ(nout, 1);
	ctx_switch_flags(20, G, true, CORO_FAM_GREENLET, MAIN_G, 0, CORO_CTXF_MAIN);
	CHECK_EQ(nout, 2);
	n = (const void *)out[1].bytes;
	CHECK_EQ(n->hdr.kind, CORO_EV_NAME);
	CHECK_EQ(n->id, MAIN_G);
	CHECK_STR(n->name, "main");
	ctx_switch(21, G, true, CORO_FAM_GREENLET, G, MAIN_G, true);
	CHECK_EQ(nout, 3);
	CHECK_EQ(sw(2)->to, MAIN_G);

	/* Launched: the main greenlet is the thread's main context, named at the start. */
	reset();
	process(true);
	switch_path(CORO_FAM_GREENLET);
	ctx_create(10, 0, false, CORO_FAM_GREENLET, G, 0, 0);
	ctx_switch(20, 0, false, CORO_FAM_GREENLET, 0, G, true);
	nout = 0;
	ctx_switch_flags(30, G, true, CORO_FAM_GREENLET, MAIN_G, 0, CORO_CTXF_MAIN);
	CHECK_EQ(nout, 0);
	ctx_switch(31, G, true, CORO_FAM_GREENLET, G, MAIN_G, true);
	CHECK_EQ(sw(0)->to, MAIN);
}

TEST(ucontext_getcontext_jumps)
{
	const u64 A = 0x5000, MAIN_UC = 0x7ffd000, AGAIN = 0x7ffd800, IN_A = 0x1800, REC = 0x9000;

	reset();
	process(true);
	switch_path(CORO_FAM_UCONTEXT);
	nout = 0;
	/* getcontext(&again); ...; setcontext(&again) in main: nothing but its start. */
	ctx_save(10, 0, false, AGAIN);
	CHECK_EQ(nout, 2); /* the thread's start in its main context, and its name */
	nout = 0;
	ctx_switch(11, 0, true, CORO_FAM_UCONTEXT, 0, AGAIN, true);
	CHECK_EQ(nout, 0);
	/* Main saves a recovery point, makes A (getcontext first, as programs do), runs it. */
	ctx_save(12, AGAIN, true, REC);
	ctx_save(13, AGAIN, true, A);
	ctx_create(14, AGAIN, true, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	ctx_switch(15, AGAIN, true, CORO_FAM_UCONTEXT, MAIN_UC, A, false);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[0].hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(((struct coro_ev_create *)out[0].bytes)->id, A); /* not main: made */
	CHECK_EQ(sw(1)->from, MAIN);
	CHECK_EQ(sw(1)->to, A);
	/* A jumps within itself, then escapes to main's recovery point. */
	nout = 0;
	ctx_save(20, A, true, IN_A);
	ctx_switch(21, A, true, CORO_FAM_UCONTEXT, 0, IN_A, true);
	CHECK_EQ(nout, 0);
	ctx_switch(22, IN_A, true, CORO_FAM_UCONTEXT, 0, REC, true);
	CHECK_EQ(nout, 1);
	CHECK_EQ(sw(0)->from, A);
	CHECK_EQ(sw(0)->to, MAIN);
	CHECK_EQ(sw(0)->hdr.cur, A);
}

TEST(ucontext_made_again)
{
	const u64 A = 0x5000, MAIN_UC = 0x7ffd000;

	reset();
	process(true);
	switch_path(CORO_FAM_UCONTEXT);
	ctx_create(10, 0, false, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	/* Made again before it ever ran: the first one ends there. */
	nout = 0;
	ctx_create(11, 0, true, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	CHECK_EQ(nout, 2);
	CHECK_EQ(ex(0)->id, A);
	CHECK_EQ(ex(0)->status, 0);
	CHECK_EQ(out[0].hdr.cur, MAIN);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_CREATE);
	/* It runs and returns: made again, no exit to add. */
	ctx_switch(20, 0, true, CORO_FAM_UCONTEXT, MAIN_UC, A, false);
	ctx_exit(21, A, CORO_FAM_UCONTEXT);
	ctx_switch(22, A, true, CORO_FAM_UCONTEXT, 0, MAIN_UC, true);
	nout = 0;
	ctx_create(30, MAIN_UC, true, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	CHECK_EQ(nout, 1);
	CHECK_EQ(out[0].hdr.kind, CORO_EV_CREATE);
	/* It runs, yields, and is abandoned: made again, it ends there. */
	ctx_switch(40, MAIN_UC, true, CORO_FAM_UCONTEXT, MAIN_UC, A, false);
	ctx_switch(41, A, true, CORO_FAM_UCONTEXT, A, MAIN_UC, false);
	nout = 0;
	ctx_create(50, MAIN_UC, true, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	CHECK_EQ(nout, 2);
	CHECK_EQ(ex(0)->id, A);
	CHECK_EQ(X.contexts_remade, 2);
}

TEST(pth_exit_status)
{
	const u64 A = 0x5000, B = 0x6000, SCHED_UC = 0x7ffd000;

	reset();
	process(true);
	switch_path(CORO_FAM_PTH);
	ctx_create(10, 0, false, CORO_FAM_UCONTEXT, A, 0x1000, 0x2000);
	ctx_create(11, 0, true, CORO_FAM_UCONTEXT, B, 0x3000, 0x4000);
	ctx_switch(20, 0, true, CORO_FAM_UCONTEXT, SCHED_UC, A, false);
	nout = 0;
	ctx_exit_status(21, A, CORO_FAM_PTH, 7);
	CHECK_EQ(ex(0)->id, A);
	CHECK_EQ(ex(0)->status, 7);
	ctx_switch(22, A, true, CORO_FAM_UCONTEXT, A, SCHED_UC, false);
	ctx_switch(30, SCHED_UC, true, CORO_FAM_UCONTEXT, SCHED_UC, B, false);
	nout = 0;
	/* PTH_CANCELED, (void *)-1: cancelled. */
	ctx_exit_status(31, B, CORO_FAM_PTH, -1);
	CHECK_EQ(ex(0)->id, B);
	CHECK_EQ(ex(0)->status, -ECANCELED);
}

int main(void)
{
	ctxmap_init(&X);
	RUN(ucontext_launched);
	RUN(fcontext_ranges_reuse_and_cur);
	RUN(fcontext_attached_follows_handles);
	RUN(other_streams_pass_untouched);
	RUN(exec_starts_over);
	RUN(greenlet_main_and_qemu_terminate);
	RUN(main_contexts_attached);
	RUN(ucontext_getcontext_jumps);
	RUN(ucontext_made_again);
	RUN(pth_exit_status);
	ctxmap_free(&X);
	return unit_done();
}
