// SPDX-License-Identifier: MIT
/* The detectors on synthetic streams, at the edges of their thresholds. */
#include "unit.h"
#include "stream.h"
#include "analyze.h"

#define MS 1000000ULL
#define S 1000000000ULL

static struct capture_info ci;
static struct pipeline P;
static union rec_buf B;
static struct finding F[64];
static int NF;

static void on_finding(void *ctx, const struct finding *f)
{
	if (NF < 64)
		F[NF++] = *f;
}

static void start(void)
{
	struct analyze_opts o;
	struct model_observer obs = {0};
	struct finding_sink fs = {.finding = on_finding};

	memset(&ci, 0, sizeof(ci));
	NF = 0;
	analyze_opts_default(&o);
	pipeline_init(&P, &ci, &o);
	pipeline_add_observer(&P, &obs, &fs);
	pipeline_begin(&P);
	pipeline_feed(&P, mk_process(&B, 1, CORO_PROC_LAUNCHED));
}

static void feed(struct coro_event_hdr *h)
{
	pipeline_feed(&P, h);
}

static void stop(void)
{
	pipeline_finish(&P);
	pipeline_free(&P);
}

static int count(enum finding_kind k)
{
	int n = 0;

	for (int i = 0; i < NF; i++)
		n += F[i].kind == k;
	return n;
}

static const struct finding *find(enum finding_kind k)
{
	for (int i = 0; i < NF; i++)
		if (F[i].kind == k)
			return &F[i];
	return NULL;
}

/* Coroutine 7 suspended for `dur` (reason, obj), then woken by 9 (running briefly) and run. */
static void suspend_then_resume(u64 dur, u32 reason)
{
	feed(mk_create(&B, 1, 1000, 0, 9, 0));
	feed(mk_create(&B, 1, 1000, 0, 7, 9));
	feed(mk_name(&B, 1, 1000, 0, 7, "waiter"));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, reason, 0x55));
	feed(mk_switch(&B, 2, 3000 + dur - 50, 0, 9, 0, 0));
	feed(mk_ready(&B, 2, 3000 + dur, 9, 7));
	feed(mk_switch(&B, 2, 3000 + dur + 10, 9, 0, CORO_R_YIELD, 0));
	feed(mk_switch(&B, 1, 3000 + dur + 100, 0, 7, 0, 0));
	feed(mk_exit(&B, 1, 3000 + dur + 200, 7, 7, 0));
	feed(mk_switch(&B, 1, 3000 + dur + 300, 7, 0, CORO_R_DONE, 0));
}

TEST(stall_at_the_threshold)
{
	const struct finding *f;

	start();
	suspend_then_resume(S, CORO_R_WAIT);
	stop();
	CHECK_EQ(NF, 1);
	f = find(FK_STALL);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ(f->id, 7);
	CHECK_EQ(f->ts, 3000);
	CHECK_EQ(f->dur, S);
	CHECK_EQ(f->reason, CORO_R_WAIT);
	CHECK_EQ(f->obj, 0x55);
	CHECK(f->has_waker && f->waker == 9);
	CHECK_STR(f->name, "waiter");
	CHECK(!f->open);
	/* Its parent was alive when found: the chain names it. */
	CHECK_EQ(f->nchain, 1);
	CHECK_EQ(f->chain[0].id, 9);
	start();
	suspend_then_resume(S - 1, CORO_R_WAIT);
	stop();
	CHECK_EQ(NF, 0);
}

TEST(lost_wakeup_at_trace_end_and_process_exit)
{
	const struct finding *f;

	/* Waiting on an object when the trace ends, for exactly the threshold. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 0x77));
	feed(mk_create(&B, 1, 3000 + S, 0, 8, 0)); /* the trace goes on to here */
	stop();
	CHECK_EQ(count(FK_LOST_WAKEUP), 1);
	f = find(FK_LOST_WAKEUP);
	CHECK(f && f->id == 7 && f->open && f->dur == S && f->obj == 0x77);
	CHECK(f && f->state == CS_SUSPENDED && f->reason == CORO_R_WAIT);
	/* New and never started for the threshold: a leak, not a lost wakeup. */
	CHECK_EQ(count(FK_LEAK), 0);
	/* The same one ending with its process. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_IO, 4));
	feed(mk_proc_exit(&B, 3000 + 2 * S, 0));
	stop();
	CHECK_EQ(count(FK_LOST_WAKEUP), 1);
	/* Made ready, never run again. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_ready(&B, 1, 2000, 0, 7));
	feed(mk_create(&B, 1, 2000 + S, 0, 8, 0));
	stop();
	CHECK_EQ(count(FK_LOST_WAKEUP), 1);
	CHECK(find(FK_LOST_WAKEUP) && find(FK_LOST_WAKEUP)->state == CS_RUNNABLE);
	/* Just under the threshold: nothing. A sleep in progress: nothing. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 0x77));
	feed(mk_create(&B, 1, 3000 + S - 1, 0, 8, 0));
	stop();
	CHECK_EQ(NF, 0);
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_SLEEP, 0));
	feed(mk_create(&B, 1, 3000 + 5 * S, 0, 8, 0));
	stop();
	CHECK_EQ(NF, 0);
}

TEST(leak_never_started_or_nothing_to_wake_it)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0)); /* never made ready */
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 8, 0, 0));
	feed(mk_switch(&B, 1, 3000, 8, 0, CORO_R_UNKNOWN, 0)); /* nothing to wait on */
	feed(mk_create(&B, 1, 3000 + 2 * S, 0, 9, 0));
	stop();
	CHECK_EQ(count(FK_LEAK), 2);
	CHECK_EQ(count(FK_LOST_WAKEUP), 0);
}

TEST(long_run_and_sched_latency_edges)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_ready(&B, 1, 2000, 0, 7));
	feed(mk_switch(&B, 1, 2000 + 10 * MS, 0, 7, 0, 0));	   /* runnable exactly 10 ms */
	feed(mk_switch(&B, 1, 2000 + 60 * MS, 7, 0, CORO_R_YIELD, 0)); /* ran exactly 50 ms */
	feed(mk_switch(&B, 1, 2000 + 60 * MS + 10 * MS - 1, 0, 7, 0, 0)); /* runnable 10 ms - 1 */
	feed(mk_switch(&B, 1, 2000 + 120 * MS - 2, 7, 0, CORO_R_YIELD, 0)); /* ran 50 ms - 1 */
	stop();
	CHECK_EQ(count(FK_SCHED_LATENCY), 1);
	CHECK_EQ(count(FK_LONG_RUN), 1);
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->dur == 50 * MS && !find(FK_LONG_RUN)->open);
	CHECK(find(FK_SCHED_LATENCY) && find(FK_SCHED_LATENCY)->dur == 10 * MS);
	CHECK_EQ(NF, 2);
	/* Still running at the end, long: an open long run. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 7, 0, 0));
	feed(mk_create(&B, 2, 1000 + 80 * MS, 0, 8, 0));
	stop();
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->open);
}

TEST(exit_or_reuse_while_suspended_is_not_a_stall)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 1));
	feed(mk_exit(&B, 1, 3000 + 2 * S, 0, 7, -125)); /* the scheduler ends it while it waits */
	feed(mk_create(&B, 1, 4000 + 2 * S, 0, 8, 0));
	feed(mk_switch(&B, 1, 5000 + 2 * S, 0, 8, 0, 0));
	feed(mk_switch(&B, 1, 6000 + 2 * S, 8, 0, CORO_R_WAIT, 1));
	feed(mk_create(&B, 1, 6000 + 4 * S, 0, 8, 0)); /* id reused: its exit was lost */
	feed(mk_exit(&B, 1, 7000 + 4 * S, 0, 8, 0));
	stop();
	CHECK_EQ(count(FK_STALL), 0);
	CHECK_EQ(count(FK_LOST_WAKEUP), 0);
}

TEST(unmatched_spans)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_span(&B, true, 1, 2100, 7, "tx"));
	feed(mk_span(&B, false, 1, 2200, 7, "nope"));
	feed(mk_exit(&B, 1, 2300, 7, 7, 0));
	feed(mk_switch(&B, 1, 2400, 7, 0, CORO_R_DONE, 0));
	stop();
	CHECK_EQ(count(FK_UNMATCHED_SPAN), 2);
	for (int i = 0; i < NF; i++) {
		if (!strcmp(F[i].span, "tx"))
			CHECK(F[i].ts == 2100 && F[i].dur == 200 && !F[i].open);
		else
			CHECK(!strcmp(F[i].span, "nope") && F[i].ts == 2200 && F[i].dur == 0);
	}
}

TEST(spawn_storm_edges)
{
	/* 1000 children within a second: at the threshold, not above it. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 5, 0, 0));
	for (u64 i = 0; i < 1000; i++)
		feed(mk_create(&B, 1, 2000 + i * (S / 1000 - 1), 5, 100 + i, 5));
	stop();
	CHECK_EQ(count(FK_SPAWN_STORM), 0);
	/* 1001: one storm, pinned to the parent, counted whole. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 5, 0, 0));
	for (u64 i = 0; i < 3000; i++)
		feed(mk_create(&B, 1, 2000 + i * 100000, 5, 100 + i, 5));
	stop();
	CHECK_EQ(count(FK_SPAWN_STORM), 1);
	if (find(FK_SPAWN_STORM)) {
		CHECK_EQ(find(FK_SPAWN_STORM)->id, 5);
		CHECK_EQ(find(FK_SPAWN_STORM)->count, 3000);
		CHECK_EQ(find(FK_SPAWN_STORM)->peak, 3000);
	}
	/* Two bursts two seconds apart: two storms. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 5, 0, 0));
	for (u64 i = 0; i < 1500; i++)
		feed(mk_create(&B, 1, 2000 + i * 1000, 5, 100 + i, 5));
	for (u64 i = 0; i < 1500; i++)
		feed(mk_create(&B, 1, 3 * S + i * 1000, 5, 5000 + i, 5));
	stop();
	CHECK_EQ(count(FK_SPAWN_STORM), 2);
}

/* 7 runs on thread 1 for `run` ns; inside it, its thread is off the CPU `off` ns (`runq` of it runnable). */
static void run_with_offcpu(u64 run, u64 off, u64 runq, u32 state)
{
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, state));
	feed(mk_off_end(&B, 1, 3000, 3000 + off, 7, state, runq));
	feed(mk_switch(&B, 1, 2000 + run, 7, 0, CORO_R_YIELD, 0));
}

TEST(blocking_edges_and_long_run_without_it)
{
	const struct finding *f;

	/* Blocked exactly 10 ms (12 ms off the CPU, 2 ms of it waiting for one). */
	start();
	run_with_offcpu(13 * MS, 12 * MS, 2 * MS, CORO_OFF_SLEEPING);
	stop();
	CHECK_EQ(count(FK_BLOCKING), 1);
	f = find(FK_BLOCKING);
	CHECK(f && f->id == 7 && f->tid == 1 && f->ts == 3000 && f->dur == 10 * MS);
	CHECK(f && f->offcpu_state == CORO_OFF_SLEEPING);
	/* One nanosecond less: nothing. Disk wait counts like sleeping. */
	start();
	run_with_offcpu(13 * MS, 12 * MS, 2 * MS + 1, CORO_OFF_SLEEPING);
	stop();
	CHECK_EQ(NF, 0);
	start();
	run_with_offcpu(13 * MS, 12 * MS, 0, CORO_OFF_DISK);
	stop();
	CHECK_EQ(count(FK_BLOCKING), 1);
	/* Preempted for 100 ms: waiting for a CPU, not blocking (but a long run). */
	start();
	run_with_offcpu(101 * MS, 100 * MS, 100 * MS, CORO_OFF_PREEMPTED);
	stop();
	CHECK_EQ(count(FK_BLOCKING), 0);
	CHECK_EQ(count(FK_LONG_RUN), 1);
	/* A 300 ms run of which 280 ms blocked: blocking, and no long run (20 ms on the worker). */
	start();
	run_with_offcpu(300 * MS, 280 * MS, 0, CORO_OFF_SLEEPING);
	stop();
	CHECK_EQ(count(FK_BLOCKING), 1);
	CHECK_EQ(count(FK_LONG_RUN), 0);
	/* The scheduler itself off the CPU (no coroutine running): nothing to pin. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 0, 0, 0));
	feed(mk_off_begin(&B, 1, 2000, 0, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, 2000, 2000 + S, 0, CORO_OFF_SLEEPING, 0));
	stop();
	CHECK_EQ(NF, 0);
}

int main(void)
{
	RUN(stall_at_the_threshold);
	RUN(lost_wakeup_at_trace_end_and_process_exit);
	RUN(leak_never_started_or_nothing_to_wake_it);
	RUN(long_run_and_sched_latency_edges);
	RUN(exit_or_reuse_while_suspended_is_not_a_stall);
	RUN(unmatched_spans);
	RUN(spawn_storm_edges);
	RUN(blocking_edges_and_long_run_without_it);
	return unit_done();
}
