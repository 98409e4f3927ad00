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
static int NALL; /* every finding, F[] keeping the first 64 */

static void on_finding(void *ctx, const struct finding *f)
{
	NALL++;
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
	NALL = 0;
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

	/* A scheduler's own sleep (its probes say so): a stall at the threshold. */
	start();
	suspend_then_resume(S, CORO_R_SLEEP);
	stop();
	CHECK_EQ(NF, 1);
	f = find(FK_STALL);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ(f->id, 7);
	CHECK_EQ(f->ts, 3000);
	CHECK_EQ(f->dur, S);
	CHECK_EQ(f->reason, CORO_R_SLEEP);
	CHECK_EQ(f->obj, 0x55);
	CHECK(f->has_waker && f->waker == 9);
	CHECK_STR(f->name, "waiter");
	CHECK(!f->open);
	/* Its parent was alive when found: the chain names it. */
	CHECK_EQ(f->nchain, 1);
	CHECK_EQ(f->chain[0].id, 9);
	start();
	suspend_then_resume(S - 1, CORO_R_SLEEP);
	stop();
	CHECK_EQ(NF, 0);
}

/*
 * A wait on an object, over the threshold, is a stall only with evidence
 * that it lasted longer than it had to: passed over (a later waiter on the
 * same object woken first), or inside an open span (work in progress). An
 * idle worker's wait for work is not.
 */
TEST(stall_of_a_wait_needs_evidence)
{
	const struct finding *f;

	start();
	suspend_then_resume(2 * S, CORO_R_WAIT);
	stop();
	CHECK_EQ(NF, 0);
	/* 7 waits on 0x55 from 3000, 8 from 4000; 8 is woken first, 7 a second later. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 8, CORO_R_WAIT, 0x55));
	feed(mk_switch(&B, 1, 4000, 8, 0, CORO_R_WAIT, 0x55));
	feed(mk_ready(&B, 2, 5000, 0, 8));
	feed(mk_switch(&B, 1, 6000, 0, 8, 0, 0));
	feed(mk_exit(&B, 1, 7000, 8, 8, 0));
	feed(mk_switch(&B, 1, 8000, 8, 0, CORO_R_DONE, 0));
	feed(mk_ready(&B, 2, 3000 + S, 0, 7));
	feed(mk_switch(&B, 1, 3000 + S + 10, 0, 7, 0, 0));
	stop();
	CHECK_EQ(NF, 1);
	f = find(FK_STALL);
	CHECK(f && f->id == 7 && f->dur == S && f->obj == 0x55);
	/* The first of two woken first, the second later: waiting its turn, no stall. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 8, CORO_R_WAIT, 0x55));
	feed(mk_switch(&B, 1, 4000, 8, 0, CORO_R_WAIT, 0x55));
	feed(mk_ready(&B, 2, 5000, 0, 7));
	feed(mk_ready(&B, 2, 4000 + 2 * S, 0, 8));
	stop();
	CHECK_EQ(count(FK_STALL), 0);
	/* Inside a span of its own: work in progress waited. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_span(&B, true, 1, 2500, 7, "request"));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 0x55));
	feed(mk_ready(&B, 2, 3000 + S, 0, 7));
	stop();
	CHECK_EQ(count(FK_STALL), 1);
}

TEST(lost_wakeup_at_trace_end_and_process_exit)
{
	const struct finding *f;

	/* Waiting on an object when the trace ends, alone: a wait for work, perhaps. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 0x77));
	feed(mk_create(&B, 1, 3000 + S, 0, 8, 0)); /* the trace goes on to here */
	stop();
	CHECK_EQ(NF, 0);
	/* ...passed over by 8, which waited on it later and was woken: exactly the threshold. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 8, CORO_R_WAIT, 0x77));
	feed(mk_switch(&B, 1, 4000, 8, 0, CORO_R_WAIT, 0x77));
	feed(mk_ready(&B, 2, 5000, 0, 8));
	feed(mk_create(&B, 1, 3000 + S, 0, 9, 0)); /* the trace goes on to here */
	stop();
	CHECK_EQ(count(FK_LOST_WAKEUP), 1);
	f = find(FK_LOST_WAKEUP);
	CHECK(f && f->id == 7 && f->open && f->dur == S && f->obj == 0x77);
	CHECK(f && f->state == CS_SUSPENDED && f->reason == CORO_R_WAIT);
	/* New and never started for the threshold: a leak, not a lost wakeup. */
	CHECK_EQ(count(FK_LEAK), 0);
	/* The lone one ending with its process, which exits: its wakeup never came. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_IO, 4));
	feed(mk_proc_exit(&B, 3000 + 2 * S, 0));
	stop();
	CHECK_EQ(count(FK_LOST_WAKEUP), 1);
	/* ...killed by a signal: it did not end, it was ended. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_IO, 4));
	feed(mk_proc_exit(&B, 3000 + 2 * S, 15));
	stop();
	CHECK_EQ(NF, 0);
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
	feed(mk_proc_exit(&B, 3000 + 2 * S, 0));
	stop();
	CHECK_EQ(count(FK_LEAK), 2);
	CHECK_EQ(count(FK_LOST_WAKEUP), 0);
	/* The trace ending, not the process: only the one never started. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 8, 0, 0));
	feed(mk_switch(&B, 1, 3000, 8, 0, CORO_R_UNKNOWN, 0));
	feed(mk_create(&B, 1, 3000 + 2 * S, 0, 9, 0));
	stop();
	CHECK_EQ(count(FK_LEAK), 1);
	CHECK_EQ(count(FK_LOST_WAKEUP), 0);
}

/* 8 made ready on thread 2 at ts, run at once and parked again: work that waited meanwhile. */
static void other_ready(u64 ts)
{
	feed(mk_ready(&B, 2, ts, 0, 8));
	feed(mk_switch(&B, 2, ts + 1, 0, 8, 0, 0));
	feed(mk_switch(&B, 2, ts + 2, 8, 0, CORO_R_SLEEP, 0));
}

TEST(long_run_and_sched_latency_edges)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_ready(&B, 1, 2000, 0, 7));
	feed(mk_switch(&B, 1, 2000 + 10 * MS, 0, 7, 0, 0));	   /* runnable exactly 10 ms */
	other_ready(2000 + 20 * MS);
	feed(mk_switch(&B, 1, 2000 + 60 * MS, 7, 0, CORO_R_YIELD, 0)); /* ran exactly 50 ms */
	feed(mk_switch(&B, 1, 2000 + 60 * MS + 10 * MS - 1, 0, 7, 0, 0)); /* runnable 10 ms - 1 */
	other_ready(2000 + 80 * MS);
	feed(mk_switch(&B, 1, 2000 + 120 * MS - 2, 7, 0, CORO_R_YIELD, 0)); /* ran 50 ms - 1 */
	stop();
	CHECK_EQ(count(FK_SCHED_LATENCY), 1);
	CHECK_EQ(count(FK_LONG_RUN), 1);
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->dur == 50 * MS && !find(FK_LONG_RUN)->open);
	CHECK(find(FK_SCHED_LATENCY) && find(FK_SCHED_LATENCY)->dur == 10 * MS);
	CHECK_EQ(NF, 2);
	/* Still running at the end, long, while other work came: an open long run. */
	start();
	feed(mk_create(&B, 1, 500, 0, 8, 0));
	feed(mk_switch(&B, 1, 1000, 0, 7, 0, 0));
	other_ready(1000 + 10 * MS);
	feed(mk_create(&B, 2, 1000 + 80 * MS, 0, 9, 0));
	stop();
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->open);
	/* Nothing else had work meanwhile: holding the worker held nobody up. */
	start();
	feed(mk_switch(&B, 1, 1000, 0, 7, 0, 0));
	feed(mk_create(&B, 2, 1000 + 80 * MS, 0, 8, 0));
	stop();
	CHECK_EQ(count(FK_LONG_RUN), 0);
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

/*
 * Spans open when the trace ends, in a live coroutine and a thread: in progress, no finding,
 * unless open for the slow-span threshold (100 ms) already. One its coroutine's exit left
 * open is a finding however short.
 */
TEST(spans_open_at_the_trace_end)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_span(&B, true, 1, 3000, 7, "long"));
	feed(mk_span(&B, true, 1, 3000 + 50 * MS, 7, "short"));
	feed(mk_span(&B, true, 2, 3000, 0, "tlong"));
	feed(mk_span(&B, true, 2, 3000 + 60 * MS, 0, "tshort"));
	feed(mk_create(&B, 3, 1000, 0, 9, 0));
	feed(mk_switch(&B, 3, 2000, 0, 9, 0, 0));
	feed(mk_span(&B, true, 3, 3000 + 90 * MS, 9, "left"));
	feed(mk_exit(&B, 3, 3000 + 91 * MS, 9, 9, 0));
	feed(mk_switch(&B, 3, 3000 + 92 * MS, 9, 0, CORO_R_DONE, 0));
	feed(mk_switch(&B, 1, 3000 + 100 * MS, 7, 7, CORO_R_YIELD, 0)); /* the trace's last record */
	stop();
	CHECK_EQ(count(FK_UNMATCHED_SPAN), 3);
	for (int i = 0; i < NF; i++) {
		if (F[i].kind != FK_UNMATCHED_SPAN)
			continue;
		if (!strcmp(F[i].span, "long") || !strcmp(F[i].span, "tlong"))
			CHECK(F[i].open && F[i].dur == 100 * MS);
		else
			CHECK(!strcmp(F[i].span, "left") && !F[i].open && F[i].dur == MS);
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
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, state));
	other_ready(4000); /* work waited for the blocked thread */
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
	/* Preempted for 100 ms: waiting for a CPU, neither blocking nor running. */
	start();
	run_with_offcpu(101 * MS, 100 * MS, 100 * MS, CORO_OFF_PREEMPTED);
	stop();
	CHECK_EQ(NF, 0);
	/* On the CPU 60 ms of a 160 ms run: a long run of 160 ms. */
	start();
	run_with_offcpu(160 * MS, 100 * MS, 100 * MS, CORO_OFF_PREEMPTED);
	stop();
	CHECK_EQ(count(FK_LONG_RUN), 1);
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->dur == 160 * MS);
	/* Blocked 200 ms with no other work meanwhile: it held nobody up. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, 3000, 3000 + 200 * MS, 7, CORO_OFF_SLEEPING, 0));
	feed(mk_switch(&B, 1, 4000 + 200 * MS, 7, 0, CORO_R_YIELD, 0));
	stop();
	CHECK_EQ(NF, 0);
	/*
	 * ...but a ready in the middle of it comes late (another thread's batched
	 * records, copied out a second later): then it did.
	 */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, 3000, 3000 + 200 * MS, 7, CORO_OFF_SLEEPING, 0));
	feed(mk_switch(&B, 1, 4000 + 200 * MS, 7, 0, CORO_R_YIELD, 0));
	feed(mk_create(&B, 1, 1000 + S, 0, 9, 0));
	CHECK_EQ(NF, 0);
	feed(mk_ready(&B, 2, 3000 + 100 * MS, 0, 8));
	CHECK_EQ(count(FK_BLOCKING), 1);
	stop();
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

/* The process is traced through the switch functions of `family` (its switch record). */
static void switch_family(u32 family)
{
	static const char text[] = "/lib/x.so\0f+0x0\0";
	struct coro_rec_switch *sw = (void *)B.raw;

	hdr_fill(&B.hdr, ROUND_UP(sizeof(*sw) + sizeof(text), 8), CORO_REC_SWITCH, TPID, 1, 0);
	memcpy(sw->text, text, sizeof(text));
	sw->family = family;
	sw->sites = 1;
	feed(&B.hdr);
}

/* Thread 1 blocked in the kernel from `at` for `dur`, running `cur`. */
static void blocked(u64 at, u64 dur, u64 cur)
{
	feed(mk_off_begin(&B, 1, at, cur, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, at, at + dur, cur, CORO_OFF_SLEEPING, 0));
}

/*
 * A greenlet hub (1) running greenlets 2 and 3 in turn on thread 1: the
 * hub is the thread's scheduler once it switched to two of them.
 */
static void hub_start(void)
{
	switch_family(CORO_FAM_GREENLET);
	feed(mk_switch(&B, 1, 1000, 1, 2, 0, 0));
	feed(mk_switch(&B, 1, 2000, 2, 1, 0, 0));
	feed(mk_switch(&B, 1, 3000, 1, 3, 0, 0));
	feed(mk_switch(&B, 1, 4000, 3, 1, 0, 0));
}

TEST(switch_path_blocking_needs_work_waiting)
{
	const struct finding *f;

	/* The hub waiting for work: never a finding. */
	start();
	hub_start();
	blocked(5000, 300 * MS, 1);
	feed(mk_switch(&B, 1, 6000 + 300 * MS, 1, 2, 0, 0));
	feed(mk_switch(&B, 1, 7000 + 300 * MS, 2, 1, 0, 0));
	feed(mk_switch(&B, 1, 8000 + 300 * MS, 1, 3, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
	/* A greenlet blocked 300 ms; the hub runs the other at once after it: a blocking call. */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	blocked(6000, 300 * MS, 2);
	feed(mk_switch(&B, 1, 7000 + 300 * MS, 2, 1, 0, 0));
	CHECK_EQ(NF, 0); /* no evidence yet: the hub has the thread */
	feed(mk_switch(&B, 1, 8000 + 300 * MS, 1, 3, 0, 0));
	stop();
	CHECK_EQ(NF, 1);
	f = find(FK_BLOCKING);
	CHECK(f && f->id == 2 && f->ts == 6000 && f->dur == 300 * MS);
	/* ...but the hub waits for work in the kernel first: nothing waited for the thread. */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	blocked(6000, 300 * MS, 2);
	feed(mk_switch(&B, 1, 7000 + 300 * MS, 2, 1, 0, 0));
	blocked(8000 + 300 * MS, 2 * MS, 1);
	feed(mk_switch(&B, 1, 9000 + 302 * MS, 1, 3, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
	/* Two contexts handing the thread to each other: neither's wait is evidence for the other. */
	start();
	switch_family(CORO_FAM_GREENLET);
	feed(mk_switch(&B, 1, 1000, 1, 2, 0, 0));
	blocked(2000, 300 * MS, 2);
	feed(mk_switch(&B, 1, 3000 + 300 * MS, 2, 1, 0, 0));
	blocked(4000 + 300 * MS, 300 * MS, 1);
	feed(mk_switch(&B, 1, 5000 + 600 * MS, 1, 2, 0, 0));
	feed(mk_switch(&B, 1, 6000 + 600 * MS, 2, 1, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
	/*
	 * A pool thread's greenlet idle 5 s, then ending: the context that
	 * started it takes the thread back (its own choice, not a scheduler's),
	 * and waits for work itself.
	 */
	start();
	switch_family(CORO_FAM_GREENLET);
	feed(mk_switch(&B, 1, 1000, 1, 2, 0, 0));
	blocked(2000, 5 * S, 2);
	feed(mk_exit(&B, 1, 3000 + 5 * S, 2, 2, 0));
	feed(mk_switch(&B, 1, 4000 + 5 * S, 2, 1, CORO_R_DONE, 0));
	blocked(5000 + 5 * S, 2 * MS, 1);
	feed(mk_switch(&B, 1, 6000 + 5 * S + 2 * MS, 1, 3, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
	/* A greenlet blocked 300 ms, then one made only after it: it waited for nothing. */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	blocked(6000, 300 * MS, 2);
	feed(mk_switch(&B, 1, 7000 + 300 * MS, 2, 1, 0, 0));
	feed(mk_create(&B, 1, 8000 + 300 * MS, 1, 4, 1));
	feed(mk_switch(&B, 1, 9000 + 300 * MS, 1, 4, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
	/* A greenlet on the CPU 100 ms, the other run right after it: a long run. */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	feed(mk_switch(&B, 1, 5000 + 100 * MS, 2, 1, 0, 0));
	feed(mk_switch(&B, 1, 6000 + 100 * MS, 1, 3, 0, 0));
	stop();
	CHECK_EQ(count(FK_LONG_RUN), 1);
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->id == 2);
	/* Its last run cut by its process's end: nothing can have waited after it. */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	feed(mk_proc_exit(&B, 5000 + 100 * MS, 0));
	stop();
	CHECK_EQ(NF, 0);
}

TEST(blocked_at_the_end_is_not_running)
{
	/* Blocked from 1 ms into its run to the end of the trace, 2 s later: not a long run. */
	start();
	feed(mk_create(&B, 1, 500, 0, 8, 0));
	feed(mk_switch(&B, 1, 1000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 1000 + MS, 7, CORO_OFF_SLEEPING));
	other_ready(1000 + 10 * MS);
	feed(mk_create(&B, 2, 1000 + 2 * S, 0, 9, 0));
	stop();
	CHECK_EQ(count(FK_LONG_RUN), 0);
	/* The same after 100 ms on the CPU: a long run, still so at the end. */
	start();
	feed(mk_create(&B, 1, 500, 0, 8, 0));
	feed(mk_switch(&B, 1, 1000, 0, 7, 0, 0));
	other_ready(1000 + 10 * MS);
	feed(mk_off_begin(&B, 1, 1000 + 100 * MS, 7, CORO_OFF_SLEEPING));
	feed(mk_create(&B, 2, 1000 + 2 * S, 0, 9, 0));
	stop();
	CHECK_EQ(count(FK_LONG_RUN), 1);
	CHECK(find(FK_LONG_RUN) && find(FK_LONG_RUN)->open);
}

/* 7 found parked on 0x77 at ts (Go's walk at an attach): named, in and out on thread 0. */
static void found_parked(u64 ts)
{
	feed(mk_name(&B, 0, ts, 0, 7, "main.worker"));
	feed(mk_switch(&B, 0, ts, 0, 7, 0, 0));
	feed(mk_switch(&B, 0, ts, 7, 0, CORO_R_WAIT, 0x77));
}

TEST(suspended_since_before_the_attach)
{
	/* Passed over by 8 and still waiting at the end, 2 s later: how long before, unknown. */
	start();
	found_parked(1000);
	feed(mk_create(&B, 1, 2000, 0, 8, 0));
	feed(mk_switch(&B, 1, 3000, 0, 8, 0, 0));
	feed(mk_switch(&B, 1, 4000, 8, 0, CORO_R_WAIT, 0x77));
	feed(mk_ready(&B, 2, 5000, 0, 8));
	feed(mk_switch(&B, 1, 6000, 0, 8, 0, 0));
	feed(mk_exit(&B, 1, 7000, 8, 8, 0));
	feed(mk_create(&B, 1, 1000 + 2 * S, 0, 9, 0));
	stop();
	CHECK_EQ(NF, 0);
	/* Woken 2 s after it was found: no stall either. */
	start();
	found_parked(1000);
	feed(mk_create(&B, 1, 2000, 0, 8, 0));
	feed(mk_switch(&B, 1, 3000, 0, 8, 0, 0));
	feed(mk_switch(&B, 1, 4000, 8, 0, CORO_R_WAIT, 0x77));
	feed(mk_ready(&B, 2, 5000, 0, 8));
	feed(mk_switch(&B, 1, 6000, 0, 8, 0, 0));
	feed(mk_exit(&B, 1, 7000, 8, 8, 0));
	feed(mk_ready(&B, 2, 1000 + 2 * S, 0, 7));
	feed(mk_switch(&B, 1, 2000 + 2 * S, 0, 7, 0, 0));
	stop();
	CHECK_EQ(NF, 0);
}

TEST(go_goroutines_parked_at_exit_leak)
{
	const struct finding *f;

	/* A worker parked on a channel, a runtime goroutine idle: the program exits. */
	start();
	switch_family(CORO_FAM_GO);
	feed(mk_create(&B, 1, 1000, 0, 7, 1));
	feed(mk_name(&B, 1, 1000, 0, 7, "main.worker"));
	feed(mk_create(&B, 1, 1000, 0, 9, 1));
	feed(mk_name(&B, 1, 1000, 0, 9, "runtime.bgsweep"));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 9, CORO_R_WAIT, 0x77));
	feed(mk_switch(&B, 1, 4000, 9, 0, CORO_R_SLEEP, 0));
	feed(mk_proc_exit(&B, 4000 + 2 * S, 0));
	stop();
	CHECK_EQ(NF, 1);
	f = find(FK_LEAK);
	CHECK(f && f->id == 7 && f->open && f->state == CS_SUSPENDED && f->obj == 0x77);
	/* The trace ending instead: still parked, no finding (Go loses no wakeup). */
	start();
	switch_family(CORO_FAM_GO);
	feed(mk_create(&B, 1, 1000, 0, 7, 1));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 3000, 7, 0, CORO_R_WAIT, 0x77));
	feed(mk_create(&B, 1, 3000 + 2 * S, 0, 8, 0));
	stop();
	CHECK_EQ(NF, 0);
}

/*
 * More blocking calls with no ready seen meanwhile than a process holds for
 * a late one (64): the oldest are let go unconfirmed, each counted; a late
 * ready still confirms one of those held.
 */
TEST(held_findings_let_go_are_counted)
{
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1000, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	for (u64 i = 0; i < 70; i++) {
		feed(mk_off_begin(&B, 1, S + i * 20 * MS, 7, CORO_OFF_SLEEPING));
		feed(mk_off_end(&B, 1, S + i * 20 * MS, S + i * 20 * MS + 15 * MS, 7,
				CORO_OFF_SLEEPING, 0));
	}
	feed(mk_create(&B, 1, 3 * S, 0, 9, 0)); /* past the reorder window: all applied */
	CHECK_EQ(NF, 0);
	CHECK_EQ(P.model.anom.findings_unheld, 6);
	/* The 6th call (let go) gets no finding from a late ready; the 7th (held) does. */
	feed(mk_ready(&B, 2, S + 5 * 20 * MS + MS, 0, 8));
	CHECK_EQ(NF, 0);
	feed(mk_ready(&B, 2, S + 6 * 20 * MS + MS, 0, 8));
	CHECK_EQ(count(FK_BLOCKING), 1);
	CHECK(find(FK_BLOCKING) && find(FK_BLOCKING)->ts == S + 6 * 20 * MS);
	stop();

	/* Exactly as many as are held: none let go. */
	start();
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	for (u64 i = 0; i < 64; i++)
		blocked(S + i * 20 * MS, 15 * MS, 7);
	feed(mk_create(&B, 1, 3 * S, 0, 9, 0));
	CHECK_EQ(P.model.anom.findings_unheld, 0);
	stop();

	/*
	 * The switch-function path: a greenlet's blocking calls held per thread
	 * until the thread shows whether work waited (256 at most); past that,
	 * counted (4 blocking calls, then its 7 s run, a long run, at its switch
	 * out), and the first 256 still made when the evidence comes.
	 */
	start();
	hub_start();
	feed(mk_switch(&B, 1, 5000, 1, 2, 0, 0));
	for (u64 i = 0; i < 260; i++)
		blocked(S + i * 20 * MS, 15 * MS, 2);
	feed(mk_switch(&B, 1, 7 * S, 2, 1, 0, 0));
	CHECK_EQ(NALL, 0);
	feed(mk_switch(&B, 1, 7 * S + 1000, 1, 3, 0, 0));
	feed(mk_create(&B, 1, 8 * S, 0, 9, 0)); /* past the reorder window: all applied */
	CHECK_EQ(P.model.anom.findings_unheld_thread, 5);
	CHECK_EQ(NALL, 256);
	stop();
}

int main(void)
{
	RUN(stall_at_the_threshold);
	RUN(stall_of_a_wait_needs_evidence);
	RUN(lost_wakeup_at_trace_end_and_process_exit);
	RUN(leak_never_started_or_nothing_to_wake_it);
	RUN(long_run_and_sched_latency_edges);
	RUN(exit_or_reuse_while_suspended_is_not_a_stall);
	RUN(unmatched_spans);
	RUN(spans_open_at_the_trace_end);
	RUN(spawn_storm_edges);
	RUN(blocking_edges_and_long_run_without_it);
	RUN(switch_path_blocking_needs_work_waiting);
	RUN(blocked_at_the_end_is_not_running);
	RUN(suspended_since_before_the_attach);
	RUN(go_goroutines_parked_at_exit_leak);
	RUN(held_findings_let_go_are_counted);
	return unit_done();
}
