// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/model/gomodel.c: Go's raw goroutine status changes and
 * the walk's goroutines in, probe-ABI records out, on synthetic streams
 * shaped like what the BPF side sends from runtime.casgstatus and
 * newproc1's return.
 */
#include "unit.h"
#include "gomodel.h"
#include "kinds.h"
#include "raw.h"

#define PID 300
#define T1 300
#define T2 301

static struct gomodel G;
static union {
	struct coro_event_hdr hdr;
	struct coro_ev_create create;
	struct coro_ev_ready ready;
	struct coro_ev_switch sw;
	struct coro_ev_exit exit;
	struct coro_ev_name name;
	u8 bytes[256];
} out[32];
static int nout;

static void collect(void *ctx, const struct coro_event_hdr *rec)
{
	(void)ctx;
	if (nout < 32)
		memcpy(out[nout++].bytes, rec, rec->size);
}

static void status(u32 tid, u64 ts, u64 cur, u64 goid, u32 old, u32 new, u8 reason, u64 obj)
{
	struct coro_ev_go_status e;

	memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	e.hdr.kind = CORO_EV_GO_STATUS;
	e.hdr.pid = PID;
	e.hdr.tid = tid;
	e.hdr.ts = ts;
	e.hdr.cur = cur;
	e.goid = goid;
	e.old_status = old;
	e.new_status = new;
	e.reason = reason;
	e.obj = obj;
	gomodel_apply(&G, &e.hdr, collect, NULL);
}

static void walked(u32 tid, u64 ts, u64 goid, u32 st, u8 reason, u64 obj)
{
	struct coro_rec_go_g r;

	memset(&r, 0, sizeof(r));
	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_REC_GO_G;
	r.hdr.pid = PID;
	r.hdr.tid = tid;
	r.hdr.ts = ts;
	r.goid = goid;
	r.status = st;
	r.reason = reason;
	r.obj = obj;
	strcpy(r.name, "main.parked");
	gomodel_apply(&G, &r.hdr, collect, NULL);
}

TEST(life_of_a_goroutine)
{
	nout = 0;
	/* main (1) on T1 makes 7: create (parent 1) and ready. */
	status(T1, 10, 1, 7, CORO_GO_DEAD, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[0].hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(out[0].create.id, 7);
	CHECK_EQ(out[0].create.parent, 1);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_READY);
	CHECK_EQ(out[1].hdr.cur, 1);
	/* Runs on T2, from the scheduler. */
	status(T2, 11, 0, 7, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 3);
	CHECK_EQ(out[2].hdr.kind, CORO_EV_SWITCH);
	CHECK_EQ(out[2].sw.from, 0);
	CHECK_EQ(out[2].sw.to, 7);
	/* A syscall and back: nothing, the goroutine keeps T2. */
	status(T2, 12, 7, 7, CORO_GO_RUNNING, CORO_GO_SYSCALL, 0, 0);
	status(T2, 13, 7, 7, CORO_GO_SYSCALL, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 3);
	/* Parks on a channel: a wait on it. */
	status(T2, 14, 7, 7, CORO_GO_RUNNING, CORO_GO_WAITING, CORO_R_WAIT, 0xc000010000);
	CHECK_EQ(nout, 4);
	CHECK_EQ(out[3].sw.from, 7);
	CHECK_EQ(out[3].sw.to, 0);
	CHECK_EQ(out[3].sw.reason, CORO_R_WAIT);
	CHECK_EQ(out[3].sw.obj, 0xc000010000);
	/* main wakes it: ready, the waker main. */
	status(T1, 15, 1, 7, CORO_GO_WAITING, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(out[4].hdr.kind, CORO_EV_READY);
	CHECK_EQ(out[4].ready.id, 7);
	CHECK_EQ(out[4].hdr.cur, 1);
	/* Runs on T1 this time, yields, runs, ends. */
	status(T1, 16, 0, 7, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	status(T1, 17, 7, 7, CORO_GO_RUNNING, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(out[6].sw.reason, CORO_R_YIELD);
	status(T1, 18, 0, 7, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	status(T1, 19, 7, 7, CORO_GO_RUNNING, CORO_GO_DEAD, 0, 0);
	CHECK_EQ(nout, 10);
	CHECK_EQ(out[8].hdr.kind, CORO_EV_EXIT);
	CHECK_EQ(out[8].exit.id, 7);
	CHECK_EQ(out[9].sw.from, 7);
	CHECK_EQ(out[9].sw.reason, CORO_R_DONE);
	/* Stack growth and a g being made are no change. */
	status(T1, 20, 0, 8, CORO_GO_IDLE, CORO_GO_DEAD, 0, 0);
	status(T1, 21, 0, 9, CORO_GO_RUNNING, CORO_GO_COPYSTACK, 0, 0);
	CHECK_EQ(nout, 10);
}

TEST(gc_parked_goroutine_leaves_its_thread)
{
	nout = 0;
	/* 20 runs on T1; the GC parks it without a status change; 21 runs on T1. */
	status(T1, 100, 0, 20, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	status(T1, 101, 20, 21, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 3);
	CHECK_EQ(out[1].sw.from, 20);
	CHECK_EQ(out[1].sw.to, 0);
	CHECK_EQ(out[2].sw.from, 0);
	CHECK_EQ(out[2].sw.to, 21);
	CHECK_EQ(out[2].hdr.cur, 0); /* the thread's view after the switch out */
	/* 22 runs on T2, parked by the GC, made ready, runs on T1 after 21 parks. */
	status(T2, 102, 0, 22, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	status(T1, 103, 21, 21, CORO_GO_RUNNING, CORO_GO_WAITING, CORO_R_WAIT, 0);
	status(T1, 104, 0, 22, CORO_GO_WAITING, CORO_GO_RUNNABLE, 0, 0);
	nout = 0;
	status(T1, 105, 0, 22, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 2);
	/* Its switch out on T2, where it was, first. */
	CHECK_EQ(out[0].hdr.tid, T2);
	CHECK_EQ(out[0].hdr.cur, 22);
	CHECK_EQ(out[0].sw.from, 22);
	CHECK_EQ(out[1].hdr.tid, T1);
	CHECK_EQ(out[1].sw.to, 22);
}

TEST(walk_at_attach)
{
	nout = 0;
	/* Reported by the probes first: the walk's view of it is older; its name is news. */
	status(T1, 200, 0, 30, CORO_GO_WAITING, CORO_GO_RUNNABLE, 0, 0);
	walked(0, 201, 30, CORO_GO_WAITING, CORO_R_WAIT, 0x10);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_NAME);
	CHECK_EQ(out[1].name.id, 30);
	/* Parked: named, in and out on thread 0, suspended on its channel. */
	walked(0, 201, 31, CORO_GO_WAITING, CORO_R_WAIT, 0x10);
	CHECK_EQ(nout, 5);
	CHECK_EQ(out[2].hdr.kind, CORO_EV_NAME);
	CHECK_EQ(out[2].name.id, 31);
	CHECK_STR(out[2].name.name, "main.parked");
	CHECK_EQ(out[3].sw.to, 31);
	CHECK_EQ(out[3].hdr.tid, 0);
	CHECK_EQ(out[4].sw.from, 31);
	CHECK_EQ(out[4].sw.reason, CORO_R_WAIT);
	CHECK_EQ(out[4].sw.obj, 0x10);
	/* Runnable: a ready of no thread. Running: switched in on its thread. */
	walked(0, 201, 32, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(out[6].hdr.kind, CORO_EV_READY);
	CHECK(out[6].hdr.flags & CORO_EVF_NO_THREAD);
	walked(T2, 201, 33, CORO_GO_SYSCALL, 0, 0);
	CHECK_EQ(out[8].sw.to, 33);
	CHECK_EQ(out[8].hdr.tid, T2);
	/* Its state once only. */
	walked(0, 202, 31, CORO_GO_WAITING, CORO_R_WAIT, 0x10);
	CHECK_EQ(nout, 10);
	CHECK_EQ(out[9].hdr.kind, CORO_EV_NAME);
}

TEST(walk_of_an_ended_goroutine_gives_nothing)
{
	nout = 0;
	/*
	 * 40 ends while the walk reads the list (its g is read as it ends, or as
	 * newproc1 reuses it with 40's goid still in it): the walk's record,
	 * stamped after, is older news than the exit, and makes no goroutine.
	 */
	status(T1, 300, 0, 40, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	status(T1, 301, 40, 40, CORO_GO_RUNNING, CORO_GO_DEAD, 0, 0);
	CHECK_EQ(nout, 3);
	walked(0, 302, 40, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(nout, 3);
	/* One made while the walk read: the probes saw its creation, the walk names it. */
	status(T1, 303, 1, 41, CORO_GO_DEAD, CORO_GO_RUNNABLE, 0, 0);
	walked(0, 304, 41, CORO_GO_WAITING, CORO_R_IO, 0);
	CHECK_EQ(nout, 6);
	CHECK_EQ(out[3].hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(out[5].hdr.kind, CORO_EV_NAME);
	CHECK_EQ(out[5].name.id, 41);
}

TEST(creation_stamped_after_the_walk_found_it_runnable)
{
	nout = 0;
	/*
	 * newproc1 gave 60 its status and goid, then its thread was held before the probe on its
	 * ret: the walk read 60 runnable, and the creation is stamped after the walk. One
	 * goroutine, the walk's: no create. Its run after is the probes' as ever.
	 */
	walked(0, 500, 60, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[1].hdr.kind, CORO_EV_READY);
	status(T1, 501, 1, 60, CORO_GO_DEAD, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(nout, 2);
	status(T1 + 10, 502, 0, 60, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 3);
	CHECK_EQ(out[2].hdr.kind, CORO_EV_SWITCH);
	CHECK_EQ(out[2].sw.to, 60);
	/* Found runnable, then run, then its id made again (a forged stream): that create stands. */
	walked(0, 503, 61, CORO_GO_RUNNABLE, 0, 0);
	status(T1 + 11, 504, 0, 61, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 6);
	status(T1 + 11, 505, 61, 61, CORO_GO_RUNNING, CORO_GO_DEAD, 0, 0);
	status(T1, 506, 1, 61, CORO_GO_DEAD, CORO_GO_RUNNABLE, 0, 0);
	CHECK_EQ(out[nout - 1].hdr.kind, CORO_EV_READY);
	CHECK_EQ(out[nout - 2].hdr.kind, CORO_EV_CREATE);
}

TEST(walked_running_goroutine_leaves_its_thread)
{
	nout = 0;
	/*
	 * The walk finds 50 running on T2; the GC stops it there without a
	 * status change, and 51 runs on T2. The BPF side never saw 50 start on
	 * T2 (its cur there is 0): 50 left T2 all the same.
	 */
	walked(T2, 400, 50, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 2);
	CHECK_EQ(out[1].sw.to, 50);
	status(T2, 401, 0, 51, CORO_GO_RUNNABLE, CORO_GO_RUNNING, 0, 0);
	CHECK_EQ(nout, 4);
	CHECK_EQ(out[2].sw.from, 50);
	CHECK_EQ(out[2].sw.to, 0);
	CHECK_EQ(out[2].hdr.cur, 50);
	CHECK_EQ(out[3].sw.from, 0);
	CHECK_EQ(out[3].sw.to, 51);
}

TEST(other_records_pass_untouched)
{
	struct coro_ev_ready r = {.hdr = {.size = sizeof(r), .kind = CORO_EV_READY, .pid = 9}};

	nout = 0;
	r.id = 5;
	gomodel_apply(&G, &r.hdr, collect, NULL);
	CHECK_EQ(nout, 1);
	CHECK(!memcmp(out[0].bytes, &r, sizeof(r)));
}

int main(void)
{
	gomodel_init(&G);
	RUN(life_of_a_goroutine);
	RUN(gc_parked_goroutine_leaves_its_thread);
	RUN(walk_at_attach);
	RUN(walk_of_an_ended_goroutine_gives_nothing);
	RUN(creation_stamped_after_the_walk_found_it_runnable);
	RUN(walked_running_goroutine_leaves_its_thread);
	RUN(other_records_pass_untouched);
	gomodel_free(&G);
	return unit_done();
}
