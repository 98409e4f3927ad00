// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/model/cxxmap.c: raw C++20 coroutine facts in, probe-ABI
 * records out, on synthetic streams shaped like what the BPF side sends for
 * the bodies GCC and Clang emit.
 */
#include "unit.h"
#include "cxxcoro.h"
#include "cxxmap.h"
#include "kinds.h"
#include "raw.h"

#define PID 300
#define T1 300
#define T2 301
#define RESUME 0x401000ull /* a body's address: a suspended frame's first word */
#define SP 0x7ffd0000ull   /* the scheduler's call into a body */

static struct cxxmap X;
static union {
	struct coro_event_hdr hdr;
	u8 bytes[256];
} out[64];
static int nout;
static char awaiter_of[64][CORO_STR_LEN]; /* X.awaiter as each record was emitted ("": NULL) */

static void collect(void *ctx, const struct coro_event_hdr *rec)
{
	(void)ctx;
	if (nout < 64) {
		snprintf(awaiter_of[nout], sizeof(awaiter_of[nout]), "%s",
			 X.awaiter ? X.awaiter : "");
		memcpy(out[nout++].bytes, rec, rec->size);
	}
}

static u64 now;

static void cxx(u32 tid, u8 op, u64 frame, u64 sp, u64 word, u64 prev, u64 prev_word)
{
	struct coro_ev_cxx e;

	memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	e.hdr.kind = op == CORO_CXX_AWAIT ? CORO_EV_CXX_AWAIT : CORO_EV_CXX;
	e.hdr.flags = CORO_EVF_CUR_UNKNOWN;
	e.hdr.pid = PID;
	e.hdr.tid = tid;
	e.hdr.ts = ++now;
	e.frame = frame;
	e.sp = sp;
	e.word = word;
	e.prev = prev;
	e.prev_word = prev_word;
	e.op = op;
	cxxmap_apply(&X, &e.hdr, collect, NULL);
}

/* The BPF side's records, by what happened. */
#define create(t, f) cxx(t, CORO_CXX_CREATE, f, 0, 0, 0, 0)
#define start(t, f) cxx(t, CORO_CXX_START, f, 0, 0, 0, 0)
#define enter(t, f, sp, prev, pw) cxx(t, CORO_CXX_BODY, f, sp, RESUME, prev, pw)
#define leave(t, f, sp, word) cxx(t, CORO_CXX_RETURN, f, sp, word, 0, 0)
#define destroy(t, f) cxx(t, CORO_CXX_DESTROY, f, 0, 0, 0, 0)

static const struct coro_event_hdr *rec(int i)
{
	static const union {
		struct coro_event_hdr hdr;
		u8 bytes[256];
	} none;

	CHECK(i < nout);
	return i < nout ? &out[i].hdr : &none.hdr;
}

static void check_switch(int i, u64 from, u64 to, u32 reason, u32 tid)
{
	const struct coro_ev_switch *s = (const void *)rec(i);

	CHECK_EQ(s->hdr.kind, CORO_EV_SWITCH);
	CHECK_EQ(s->from, from);
	CHECK_EQ(s->to, to);
	CHECK_EQ(s->reason, reason);
	CHECK_EQ(s->hdr.tid, tid);
	CHECK_EQ(s->hdr.cur, from);
}

static void check_exit(int i, u64 id)
{
	const struct coro_ev_exit *e = (const void *)rec(i);

	CHECK_EQ(e->hdr.kind, CORO_EV_EXIT);
	CHECK_EQ(e->id, id);
}

static void check_create(int i, u64 id, u64 parent)
{
	const struct coro_ev_create *c = (const void *)rec(i);

	CHECK_EQ(c->hdr.kind, CORO_EV_CREATE);
	CHECK_EQ(c->id, id);
	CHECK_EQ(c->parent, parent);
}

static void reset(void)
{
	cxxmap_free(&X);
	cxxmap_init(&X);
	nout = 0;
}

/* Resumed by the scheduler, suspended, resumed, finished at its final suspend point. */
TEST(resume_suspend_final)
{
	reset();
	create(T1, 0xa0);
	check_create(0, 0xa0, 0);
	enter(T1, 0xa0, SP, 0, 0);
	leave(T1, 0xa0, SP, RESUME);
	enter(T1, 0xa0, SP, 0xa0, RESUME);
	leave(T1, 0xa0, SP, 0);
	CHECK_EQ(nout, 6);
	check_switch(1, 0, 0xa0, CORO_R_UNKNOWN, T1);
	check_switch(2, 0xa0, 0, CORO_R_UNKNOWN, T1);
	check_switch(3, 0, 0xa0, CORO_R_UNKNOWN, T1);
	check_exit(4, 0xa0);
	check_switch(5, 0xa0, 0, CORO_R_DONE, T1);
	/* Destroyed later: ended already, nothing more. */
	destroy(T1, 0xa0);
	CHECK_EQ(nout, 6);
}

/*
 * A parent creates a child and transfers to it (a tail call: same stack
 * pointer); the child's end transfers back. Their returns come together
 * (the kernel's chained return probes): the newest one only counts.
 */
TEST(symmetric_transfer_and_join)
{
	reset();
	create(T1, 0xa0);
	enter(T1, 0xa0, SP, 0, 0);
	create(T1, 0xb0);
	check_create(2, 0xb0, 0xa0);
	enter(T1, 0xb0, SP, 0xa0, RESUME);
	check_switch(3, 0xa0, 0xb0, CORO_R_UNKNOWN, T1);
	leave(T1, 0xb0, SP, RESUME); /* the child suspends: to the scheduler */
	leave(T1, 0xa0, SP, RESUME); /* chained: nothing */
	CHECK_EQ(nout, 5);
	check_switch(4, 0xb0, 0, CORO_R_UNKNOWN, T1);
	enter(T1, 0xb0, SP, 0xb0, RESUME);
	/* At its final suspend point it hands the thread to its parent. */
	enter(T1, 0xa0, SP, 0xb0, 0);
	check_exit(6, 0xb0);
	check_switch(7, 0xb0, 0xa0, CORO_R_DONE, T1);
	destroy(T1, 0xb0);
	leave(T1, 0xa0, SP, RESUME);
	leave(T1, 0xb0, SP, 0);
	CHECK_EQ(nout, 9);
	check_switch(8, 0xa0, 0, CORO_R_UNKNOWN, T1);
}

/* A generator resumed from inside a body (deeper on the stack): the resumer is switched in again. */
TEST(nested_resume)
{
	reset();
	enter(T1, 0xa0, SP, 0, 0);
	create(T1, 0xc0);
	enter(T1, 0xc0, SP - 0x100, 0xa0, RESUME);
	leave(T1, 0xc0, SP - 0x100, RESUME);
	CHECK_EQ(nout, 4);
	check_switch(2, 0xa0, 0xc0, CORO_R_UNKNOWN, T1);
	check_switch(3, 0xc0, 0xa0, CORO_R_UNKNOWN, T1);
	/* Cancelled while suspended. */
	destroy(T1, 0xc0);
	check_exit(4, 0xc0);
	CHECK_EQ(((const struct coro_ev_exit *)rec(4))->hdr.cur, 0xa0);
}

/* GCC's ramp runs the body to the initial suspend point, and its destroy runs the body again. */
TEST(gcc_ramp_start_and_destroy_run)
{
	reset();
	create(T1, 0xa0);
	start(T1, 0xa0);
	enter(T1, 0xa0, SP - 0x40, 0, 0);
	leave(T1, 0xa0, SP - 0x40, RESUME);
	CHECK_EQ(nout, 1);
	enter(T1, 0xa0, SP, 0xa0, RESUME);
	leave(T1, 0xa0, SP, RESUME);
	CHECK_EQ(nout, 3);
	destroy(T1, 0xa0);
	enter(T1, 0xa0, SP - 0x80, 0xa0, RESUME);
	leave(T1, 0xa0, SP - 0x80, 0x1234);
	CHECK_EQ(nout, 4);
	check_exit(3, 0xa0);
	/* A start long after the creation is a resume. */
	create(T1, 0xa0);
	enter(T1, 0xd0, SP, 0, 0);
	start(T1, 0xa0);
	enter(T1, 0xa0, SP - 0x40, 0xd0, RESUME);
	check_switch(6, 0xd0, 0xa0, CORO_R_UNKNOWN, T1);
}

/* A worker queues it for the other; the other resumes it before the first has returned. */
TEST(migration_before_the_return)
{
	reset();
	enter(T1, 0xa0, SP, 0, 0);
	enter(T2, 0xa0, SP + 0x1000, 0, 0);
	CHECK_EQ(nout, 3);
	check_switch(1, 0xa0, 0, CORO_R_UNKNOWN, T1);
	check_switch(2, 0, 0xa0, CORO_R_UNKNOWN, T2);
	leave(T1, 0xa0, SP, RESUME); /* late: said already */
	CHECK_EQ(nout, 3);
	leave(T2, 0xa0, SP + 0x1000, RESUME);
	check_switch(3, 0xa0, 0, CORO_R_UNKNOWN, T2);
}

/* A frame freed unseen and made again: the old incarnation ends first. */
TEST(frame_reused)
{
	reset();
	create(T1, 0xa0);
	create(T1, 0xa0);
	CHECK_EQ(nout, 3);
	check_exit(1, 0xa0);
	check_create(2, 0xa0, 0);
	CHECK_EQ(X.frames_reused, 1);
}

/* An await_suspend seen: the next switch out is a wait on the awaiter. */
TEST(await_is_a_wait)
{
	reset();
	enter(T1, 0xa0, SP, 0, 0);
	cxx(T1, CORO_CXX_AWAIT, 0xa0, 0, 0x5000, 0, 0);
	leave(T1, 0xa0, SP, RESUME);
	{
		const struct coro_ev_switch *s = (const void *)rec(1);

		CHECK_EQ(s->reason, CORO_R_WAIT);
		CHECK_EQ(s->obj, 0x5000);
	}
}

/* The capture's awaiter record before an await: its type goes with that wait only. */
static void awaiter(u32 tid, u64 frame, const char *name)
{
	struct coro_ev_cxx_awaiter a;

	memset(&a, 0, sizeof(a));
	a.hdr.size = sizeof(a);
	a.hdr.kind = CORO_EV_CXX_AWAITER;
	a.hdr.pid = PID;
	a.hdr.tid = tid;
	a.hdr.ts = now + 1;
	a.frame = frame;
	snprintf(a.name, sizeof(a.name), "%s", name);
	cxxmap_apply(&X, &a.hdr, collect, NULL);
}

TEST(awaiter_of_a_wait)
{
	reset();
	enter(T1, 0xa0, SP, 0, 0);
	awaiter(T1, 0xa0, "Sleep");
	CHECK_EQ(nout, 1); /* held, not passed on */
	cxx(T1, CORO_CXX_AWAIT, 0xa0, 0, 0x5000, 0, 0);
	leave(T1, 0xa0, SP, RESUME);
	CHECK_EQ(nout, 2);
	check_switch(1, 0xa0, 0, CORO_R_WAIT, T1);
	CHECK(!strcmp(awaiter_of[1], "Sleep"));
	CHECK(!X.awaiter);
	/* The next switch out without an await has none left over. */
	enter(T1, 0xa0, SP, 0, 0);
	leave(T1, 0xa0, SP, RESUME);
	CHECK_EQ(nout, 4);
	check_switch(3, 0xa0, 0, CORO_R_UNKNOWN, T1);
	CHECK(!strcmp(awaiter_of[3], ""));
	/* Clang's eager first run ends at an await: the wait back to the creator has it. */
	enter(T1, 0xd0, SP, 0, 0);
	create(T1, 0xb0);
	awaiter(T1, 0xb0, "std::suspend_always");
	cxx(T1, CORO_CXX_AWAIT, 0xb0, 0, 0x6000, 0, 0);
	CHECK_EQ(nout, 8);
	check_switch(7, 0xb0, 0xd0, CORO_R_WAIT, T1);
	CHECK(!strcmp(awaiter_of[7], "std::suspend_always"));
	CHECK(!strcmp(awaiter_of[6], ""));
	/* Its end is done: no awaiter, the final one's record notwithstanding. */
	enter(T2, 0xb0, SP, 0, 0);
	awaiter(T2, 0xb0, "final_awaiter");
	cxx(T2, CORO_CXX_AWAIT, 0xb0, 0, 0x6008, 0, 0);
	leave(T2, 0xb0, SP, 0);
	check_switch(nout - 1, 0xb0, 0, CORO_R_DONE, T2);
	CHECK(!strcmp(awaiter_of[nout - 1], ""));
}

/*
 * Clang's eager coroutine: its ramp, called by the creator's body, runs it up
 * to its first suspension; the await_suspend called there for a frame never
 * entered ends that first run (from the creator to it, back as a wait). Once
 * entered, an await is a wait only.
 */
TEST(clang_ramp_first_run)
{
	reset();
	enter(T1, 0xd0, SP, 0, 0);
	create(T1, 0xa0);
	cxx(T1, CORO_CXX_AWAIT, 0xa0, 0, 0x5000, 0, 0);
	CHECK_EQ(nout, 4);
	check_create(1, 0xa0, 0xd0);
	check_switch(2, 0xd0, 0xa0, CORO_R_UNKNOWN, T1);
	CHECK(rec(2)->ts < rec(3)->ts);
	{
		const struct coro_ev_switch *s = (const void *)rec(3);

		CHECK_EQ(s->from, 0xa0);
		CHECK_EQ(s->to, 0xd0);
		CHECK_EQ(s->reason, CORO_R_WAIT);
		CHECK_EQ(s->obj, 0x5000);
	}
	leave(T1, 0xd0, SP, RESUME);
	enter(T2, 0xa0, SP + 0x1000, 0, 0);
	cxx(T2, CORO_CXX_AWAIT, 0xa0, 0, 0x6000, 0, 0);
	CHECK_EQ(nout, 6);
	/* A lazy one: entered first, no first run to count. */
	create(T1, 0xb0);
	enter(T1, 0xb0, SP, 0, 0);
	cxx(T1, CORO_CXX_AWAIT, 0xb0, 0, 0x5000, 0, 0);
	CHECK_EQ(nout, 8);
}

/* Other records pass untouched, except what runs on a thread running a C++ coroutine. */
TEST(other_records)
{
	struct coro_ev_ready r;

	reset();
	memset(&r, 0, sizeof(r));
	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_EV_READY;
	r.hdr.pid = PID;
	r.hdr.tid = T1;
	r.hdr.cur = 7;
	cxxmap_apply(&X, &r.hdr, collect, NULL);
	CHECK_EQ(rec(0)->cur, 7);
	enter(T1, 0xa0, SP, 0, 0);
	cxxmap_apply(&X, &r.hdr, collect, NULL);
	CHECK_EQ(rec(2)->cur, 0xa0);
	r.hdr.pid = PID + 1;
	cxxmap_apply(&X, &r.hdr, collect, NULL);
	CHECK_EQ(rec(3)->cur, 7);
}

/* Resumed from a ucontext coroutine (hdr.cur, as ctxmap translated it): switched from and back to it. */
TEST(inside_another_path)
{
	struct coro_ev_cxx e;

	reset();
	memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	e.hdr.kind = CORO_EV_CXX;
	e.hdr.pid = PID;
	e.hdr.tid = T1;
	e.hdr.cur = 0x77;
	e.frame = 0xa0;
	e.sp = SP;
	e.word = RESUME;
	e.op = CORO_CXX_BODY;
	cxxmap_apply(&X, &e.hdr, collect, NULL);
	check_switch(0, 0x77, 0xa0, CORO_R_UNKNOWN, T1);
	e.op = CORO_CXX_RETURN;
	cxxmap_apply(&X, &e.hdr, collect, NULL);
	check_switch(1, 0xa0, 0x77, CORO_R_UNKNOWN, T1);
}

/*
 * GCC -O0: the final awaiter's await_suspend is a real call (the frame's
 * first word already 0: the BPF side flags it) and hands over to the parent
 * by a call (xfer). That is the child's end, not a wait on the final
 * awaiter, whatever the parent's entry says of the frame entered before.
 */
TEST(final_awaiter_is_the_end)
{
	struct coro_ev_cxx e;
	const struct coro_ev_switch *s;

	reset();
	enter(T1, 0xa0, SP, 0, 0);
	awaiter(T1, 0xa0, "task_promise<int>::final_awaiter");
	memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	e.hdr.kind = CORO_EV_CXX_AWAIT;
	e.hdr.pid = PID;
	e.hdr.tid = T1;
	e.hdr.ts = ++now;
	e.frame = 0xa0;
	e.word = 0x5000;
	e.op = CORO_CXX_AWAIT;
	e.flags = CORO_CXXF_FINAL;
	cxxmap_apply(&X, &e.hdr, collect, NULL);
	cxx(T1, CORO_CXX_XFER, 0xa0, 0, 0, 0, 0);
	enter(T1, 0xb0, SP - 0x40, 0, 0);
	CHECK_EQ(nout, 3);
	check_exit(1, 0xa0);
	check_switch(2, 0xa0, 0xb0, CORO_R_DONE, T1);
	s = (const void *)rec(2);
	CHECK_EQ(s->obj, 0);
	CHECK_EQ(awaiter_of[2][0], 0);
	/* The parent suspends; the child's call returns under it: nothing more. */
	leave(T1, 0xb0, SP - 0x40, RESUME);
	check_switch(3, 0xb0, 0, CORO_R_UNKNOWN, T1);
	leave(T1, 0xa0, SP, 0);
	CHECK_EQ(nout, 4);
}

/*
 * A body entered deeper from one at its final suspend point (entered last
 * here, its first word 0): a final awaiter resuming another by a real call.
 */
TEST(entered_from_a_final_suspend_point)
{
	reset();
	enter(T1, 0xa0, SP, 0, 0);
	enter(T1, 0xb0, SP - 0x40, 0xa0, 0);
	CHECK_EQ(nout, 3);
	check_exit(1, 0xa0);
	check_switch(2, 0xa0, 0xb0, CORO_R_DONE, T1);
	leave(T1, 0xb0, SP - 0x40, RESUME);
	check_switch(3, 0xb0, 0, CORO_R_UNKNOWN, T1);
	leave(T1, 0xa0, SP, 0);
	CHECK_EQ(nout, 4);
}

/* A fact of a site whose cookie names coroutine `fn` (ramps and their creations). */
static void cxx_fn(u32 tid, u8 op, u64 frame, u32 fn)
{
	struct coro_ev_cxx e;

	memset(&e, 0, sizeof(e));
	e.hdr.size = sizeof(e);
	e.hdr.kind = CORO_EV_CXX;
	e.hdr.flags = CORO_EVF_CUR_UNKNOWN;
	e.hdr.pid = PID;
	e.hdr.tid = tid;
	e.hdr.ts = ++now;
	e.frame = frame;
	e.fn = fn;
	e.op = op;
	cxxmap_apply(&X, &e.hdr, collect, NULL);
}

/*
 * Clang -O2: an eager coroutine's ramp runs its body to a suspension
 * compiled inline, nothing seen but the ramp's return: that ends its first
 * run (from its creator and back). A creation of another coroutine inside
 * that run is not the ramp's; a frame the ramp's run entered or saw suspend
 * (await) is not fresh any more: no second first run.
 */
TEST(clang_ramp_return_ends_the_first_run)
{
	reset();
	enter(T1, 0xb0, SP, 0, 0);
	cxx_fn(T1, CORO_CXX_RAMP, SP - 0x100, 3);
	cxx_fn(T1, CORO_CXX_CREATE, 0xc0, 4); /* another coroutine's, made before */
	cxx_fn(T1, CORO_CXX_CREATE, 0xa0, 3);
	cxx_fn(T1, CORO_CXX_RAMP_RETURN, SP - 0x100, 3);
	CHECK_EQ(nout, 5);
	check_create(1, 0xc0, 0xb0);
	check_create(2, 0xa0, 0xb0);
	check_switch(3, 0xb0, 0xa0, CORO_R_UNKNOWN, T1);
	check_switch(4, 0xa0, 0xb0, CORO_R_UNKNOWN, T1);
	CHECK_EQ(rec(3)->ts + 1, rec(4)->ts);
	/* Its first suspension a call (seen there): the return adds nothing. */
	cxx_fn(T1, CORO_CXX_RAMP, SP - 0x100, 3);
	cxx_fn(T1, CORO_CXX_CREATE, 0xd0, 3);
	cxx(T1, CORO_CXX_AWAIT, 0xd0, 0, 0x5000, 0, 0);
	CHECK_EQ(nout, 8);
	cxx_fn(T1, CORO_CXX_RAMP_RETURN, SP - 0x100, 3);
	CHECK_EQ(nout, 8);
}

/* A coroutine's name: its function as the demangler prints it, less its return type. */
TEST(names_without_the_return_type)
{
	static const char *const cases[][2] = {
		/* A plain function's name has no return type in it. */
		{ "_ZL4leafi", "leaf(int)" },
		/* A member function template's has: dropped. */
		{ "_ZN16names_for_a_test8registryIilE6lookupIcEEN2ex4taskIiEEilT_",
		  "names_for_a_test::registry<int, long>::lookup<char>(int, long, char)" },
		/* In an anonymous namespace, the return type too. */
		{ "_ZN12_GLOBAL__N_11fIiEENS_4taskIT_EES2_", "(anonymous namespace)::f<int>(int)" },
		/* A lambda's call operator, const. */
		{ "_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()(int) const" },
		/* An operator whose symbol has brackets in it. */
		{ "_ZlsRSoRKi", "operator<<(std::ostream&, int const&)" },
		{ "_ZN1AcvNS_1TEEv", "A::operator A::T()" },
		/* Not a mangled name: as it is. */
		{ "not_mangled", "not_mangled" },
	};
	char buf[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cxxcoro_demangle(cases[i][0], buf, sizeof(buf));
		CHECK_STR(buf, cases[i][1]);
	}
}

int main(void)
{
	cxxmap_init(&X);
	RUN(names_without_the_return_type);
	RUN(resume_suspend_final);
	RUN(symmetric_transfer_and_join);
	RUN(nested_resume);
	RUN(gcc_ramp_start_and_destroy_run);
	RUN(migration_before_the_return);
	RUN(frame_reused);
	RUN(await_is_a_wait);
	RUN(awaiter_of_a_wait);
	RUN(clang_ramp_first_run);
	RUN(other_records);
	RUN(inside_another_path);
	RUN(final_awaiter_is_the_end);
	RUN(entered_from_a_final_suspend_point);
	RUN(clang_ramp_return_ends_the_first_run);
	cxxmap_free(&X);
	return unit_done();
}
