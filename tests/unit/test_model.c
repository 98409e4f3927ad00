// SPDX-License-Identifier: MIT
/* The model fed synthetic streams: every edge case of the issue, asserted exactly. */
#include <time.h>
#include "unit.h"
#include "stream.h"

static struct capture_info ci;
static struct pipeline P;
static struct seen S;
static union rec_buf B;

static void start(u32 mode)
{
	memset(&ci, 0, sizeof(ci));
	pipeline_init(&P, &ci, NULL);
	seen_attach(&P, &S);
	pipeline_begin(&P);
	pipeline_feed(&P, mk_process(&B, 1, mode));
}

static void feed(struct coro_event_hdr *h)
{
	pipeline_feed(&P, h);
}

static void stop(void)
{
	pipeline_finish(&P);
}

static void done(void)
{
	CHECK_EQ(S.pairing_errors, 0);
	pipeline_free(&P);
}

TEST(lifecycle_times_are_exact)
{
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_name(&B, 1, 1010, 0, 7, "worker"));
	feed(mk_ready(&B, 1, 1100, 0, 7));
	feed(mk_switch(&B, 2, 1300, 0, 7, 0, 0));		/* runnable 200 */
	feed(mk_switch(&B, 2, 1800, 7, 0, CORO_R_WAIT, 0xabc)); /* running 500 */
	feed(mk_ready(&B, 1, 2800, 0, 7));			/* suspended 1000 */
	feed(mk_switch(&B, 1, 2850, 0, 7, 0, 0));		/* runnable 50 */
	feed(mk_exit(&B, 1, 2950, 7, 7, -5));			/* running 100 */
	feed(mk_switch(&B, 1, 2960, 7, 0, CORO_R_DONE, 0));
	stop();
	CHECK_EQ(S.nended, 1);
	c = seen_find(&S, 7, 0);
	CHECK(c != NULL);
	if (!c)
		return done();
	CHECK(c->created_seen);
	CHECK_EQ(c->created_ts, 1000);
	CHECK_EQ(c->end, CE_EXIT);
	CHECK_EQ(c->end_ts, 2950);
	CHECK_EQ(c->status, -5);
	CHECK_STR(c->name, "worker");
	CHECK_EQ(c->t_state[CS_NEW], 100);
	CHECK_EQ(c->t_state[CS_RUNNABLE], 250);
	CHECK_EQ(c->t_state[CS_RUNNING], 600);
	CHECK_EQ(c->t_state[CS_SUSPENDED], 1000);
	CHECK_EQ(c->t_suspended[CORO_R_WAIT], 1000);
	CHECK_EQ(c->longest_susp, 1000);
	CHECK_EQ(c->longest_susp_obj, 0xabc);
	CHECK_EQ(c->switch_ins, 2);
	CHECK_EQ(c->readies, 2);
	CHECK(!c->uncertain);
	/* The final switch out of an exited coroutine must not resurrect it. */
	CHECK_EQ(P.model.coroutines, 1);
	CHECK_EQ(P.model.anom.switch_from_mismatch, 0);
	done();
}

TEST(attach_mid_life_creates_implicitly)
{
	const struct coro *c;

	start(CORO_PROC_ATTACHED);
	/* First sight of 9 is being switched out; of 10, being switched in. */
	B.hdr.flags = 0;
	feed(mk_switch(&B, 3, 500, 9, 10, CORO_R_SLEEP, 0));
	feed(mk_switch(&B, 3, 900, 10, 0, CORO_R_YIELD, 0));
	stop();
	CHECK_EQ(S.nended, 2);
	c = seen_find(&S, 9, 0);
	CHECK(c && !c->created_seen);
	CHECK(c && c->end == CE_TRACE_END);
	CHECK(c && c->end_state == CS_SUSPENDED && c->end_reason == CORO_R_SLEEP);
	CHECK(c && c->switch_ins == 0);
	c = seen_find(&S, 10, 0);
	CHECK(c && !c->created_seen && c->switch_ins == 1);
	CHECK(c && c->t_state[CS_RUNNING] == 400);
	/* A yield leaves it runnable, not suspended. */
	CHECK(c && c->end_state == CS_RUNNABLE);
	done();
}

TEST(cur_unknown_on_attach_gives_null_waker)
{
	struct coro_event_hdr *h;

	start(CORO_PROC_ATTACHED);
	h = mk_ready(&B, 4, 100, 0, 11);
	h->flags = CORO_EVF_CUR_UNKNOWN;
	feed(h);
	stop();
	CHECK_EQ(S.nended, 1);
	CHECK(!S.ended[0].has_waker);
	done();
	/* Launched: no switch yet means "no coroutine", which is certain. */
	start(CORO_PROC_LAUNCHED);
	h = mk_ready(&B, 4, 100, 0, 11);
	h->flags = CORO_EVF_CUR_UNKNOWN;
	feed(h);
	stop();
	CHECK(S.ended[0].has_waker && S.ended[0].waker == 0);
	done();
}

TEST(id_reuse_makes_new_incarnations)
{
	const struct coro *a, *b;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 5, 0));
	feed(mk_name(&B, 1, 101, 0, 5, "first"));
	feed(mk_switch(&B, 1, 110, 0, 5, 0, 0));
	feed(mk_exit(&B, 1, 150, 5, 5, 0));
	feed(mk_switch(&B, 1, 151, 5, 0, CORO_R_DONE, 0));
	feed(mk_create(&B, 1, 200, 0, 5, 0));
	feed(mk_name(&B, 1, 201, 0, 5, "second"));
	feed(mk_switch(&B, 1, 210, 0, 5, 0, 0));
	stop();
	CHECK_EQ(S.nended, 2);
	a = seen_find(&S, 5, 0);
	b = seen_find(&S, 5, 1);
	CHECK(a && b && a->uid != b->uid);
	CHECK(a && !strcmp(a->name, "first") && a->end == CE_EXIT && a->switch_ins == 1);
	CHECK(b && !strcmp(b->name, "second") && b->end == CE_TRACE_END && b->switch_ins == 1);
	CHECK(b && b->created_ts == 200);
	CHECK_EQ(P.model.anom.recreate_live, 0);
	done();
}

TEST(create_of_live_id_supersedes)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 5, 0));
	feed(mk_switch(&B, 1, 110, 0, 5, 0, 0));
	feed(mk_switch(&B, 1, 120, 5, 0, CORO_R_WAIT, 1));
	feed(mk_create(&B, 1, 200, 0, 5, 0)); /* its exit was lost */
	stop();
	CHECK_EQ(S.nended, 2);
	CHECK(S.ended[0].end == CE_SUPERSEDED && S.ended[0].end_ts == 200);
	CHECK_EQ(P.model.anom.recreate_live, 1);
	done();
}

TEST(name_before_create_is_one_coroutine)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_name(&B, 1, 100, 0, 8, "early"));
	feed(mk_create(&B, 1, 101, 0, 8, 3));
	stop();
	CHECK_EQ(S.nended, 1);
	CHECK(S.ended[0].created_seen && S.ended[0].parent == 3);
	CHECK_STR(S.ended[0].name, "early");
	/* Fully observed: its life starts at create, nothing unknown about it. */
	CHECK(!S.ended[0].uncertain);
	CHECK_EQ(S.ended[0].t_state[CS_UNKNOWN], 0);
	CHECK_EQ(S.ended[0].first_ts, 101);
	done();
}

TEST(done_switch_after_exit_on_an_unknown_thread)
{
	struct coro_event_hdr *h;

	/* Attached mid-life: the thread's coroutine is unknown to the BPF side too. */
	start(CORO_PROC_ATTACHED);
	h = mk_exit(&B, 1, 100, 0, 9, 0);
	h->flags = CORO_EVF_CUR_UNKNOWN;
	feed(h);
	h = mk_switch(&B, 1, 110, 9, 0, CORO_R_DONE, 0);
	h->flags = CORO_EVF_CUR_UNKNOWN;
	feed(h);
	stop();
	/* One coroutine, exited: its last switch out resurrects nothing. */
	CHECK_EQ(P.model.coroutines, 1);
	CHECK_EQ(S.nended, 1);
	CHECK(S.ended[0].end == CE_EXIT);
	done();
}

TEST(event_without_thread_state_says_nothing_about_the_thread)
{
	struct coro_event_hdr *h;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	/* ld.so's hook, or a thread whose state could not be allocated: cur 0 means nothing. */
	h = mk_ready(&B, 1, 120, 0, 8);
	h->flags = CORO_EVF_CUR_UNKNOWN | CORO_EVF_NO_THREAD;
	feed(h);
	feed(mk_switch(&B, 1, 130, 7, 0, CORO_R_WAIT, 1));
	stop();
	CHECK_EQ(P.model.anom.cur_desync, 0);
	CHECK(seen_find(&S, 7, 0) && !seen_find(&S, 7, 0)->uncertain);
	CHECK(seen_find(&S, 8, 0) && !seen_find(&S, 8, 0)->has_waker);
	done();
}

TEST(reorder_fixes_cross_cpu_order)
{
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 120, 7, 0, CORO_R_WAIT, 9));
	/* Ring order: T2's switch-in first, then T1's ready that happened before it. */
	feed(mk_switch(&B, 2, 1001, 0, 7, 0, 0));
	feed(mk_create(&B, 3, 1050, 0, 99, 0)); /* a newer record gets in between */
	feed(mk_ready(&B, 1, 1000, 0, 7));
	feed(mk_switch(&B, 2, 1100, 7, 0, CORO_R_WAIT, 9));
	stop();
	c = seen_find(&S, 7, 0);
	CHECK(c != NULL);
	/* Without reordering the ready would land while running and turn the wait into runnable. */
	CHECK(c && c->end_state == CS_SUSPENDED);
	CHECK(c && c->t_state[CS_RUNNABLE] == 1);
	CHECK(c && c->t_suspended[CORO_R_WAIT] == 880);
	CHECK_EQ(P.reorder.late, 0);
	done();
}

TEST(ready_while_running_keeps_it_runnable)
{
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	/* A waker on another thread beats the wait's switch out. */
	feed(mk_ready(&B, 2, 150, 0, 7));
	feed(mk_switch(&B, 1, 160, 7, 0, CORO_R_WAIT, 4));
	feed(mk_switch(&B, 2, 300, 0, 7, 0, 0));
	stop();
	c = seen_find(&S, 7, 0);
	CHECK(c && c->t_state[CS_SUSPENDED] == 0);
	CHECK(c && c->t_state[CS_RUNNABLE] == 140);
	CHECK(c && c->switch_ins == 2);
	done();
}

TEST(lost_events_make_state_unknown)
{
	struct coro_event_hdr *h;
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_switch(&B, 1, 200, 0, 7, 0, 0));
	/* Thread 1 lost 3 events (7 switched out, 8 in, say); BPF says 8 runs now. */
	h = mk_ready(&B, 1, 900, 8, 9);
	h->lost_before = 3;
	feed(h);
	feed(mk_switch(&B, 1, 1000, 8, 7, CORO_R_YIELD, 0));
	stop();
	c = seen_find(&S, 7, 0);
	CHECK(c != NULL);
	/* Running 200..200 (the thread's last certain event), unknown 200..1000, then running. */
	CHECK(c && c->uncertain);
	CHECK(c && c->t_state[CS_UNKNOWN] == 800);
	CHECK(c && c->t_state[CS_RUNNING] == 0);
	CHECK(c && c->switch_ins == 2);
	CHECK_EQ(P.model.anom.lost_events, 3);
	/* 8 was never created in the stream: BPF's cur says it runs from 900 on. */
	c = seen_find(&S, 8, 0);
	CHECK(c && !c->created_seen && c->end_state == CS_RUNNABLE);
	CHECK(c && c->t_state[CS_RUNNING] == 100);
	CHECK(c && c->switch_ins == 0); /* its switch in was lost: not invented */
	done();
}

TEST(spans_follow_migration)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	feed(mk_span(&B, true, 1, 120, 7, "request"));
	feed(mk_span(&B, true, 1, 130, 7, "db.query"));
	feed(mk_switch(&B, 1, 140, 7, 0, CORO_R_IO, 5));
	feed(mk_ready(&B, 2, 150, 0, 7));
	feed(mk_switch(&B, 2, 160, 0, 7, 0, 0));
	feed(mk_span(&B, false, 2, 170, 7, "db.query"));
	feed(mk_span(&B, false, 2, 180, 7, "nope"));
	stop();
	CHECK_EQ(S.nended, 1);
	CHECK_EQ(S.ended[0].nspans, 1); /* "request" still open */
	CHECK_EQ(S.ended[0].spans_unmatched_end, 1);
	CHECK_EQ(P.model.anom.span_unmatched_end, 1);
	done();
}

/*
 * Span ends that close nothing, in a process taken on running whose trace is whole from 200:
 * of a coroutine seen mid-life, of one created before 200 and of a thread, its begin may be
 * older than the trace (no anomaly); of a coroutine created after 200, a bug. Launched, all
 * four are.
 */
static void span_ends_before_and_after(u32 mode)
{
	struct coro_event_hdr *h;

	memset(&ci, 0, sizeof(ci));
	pipeline_init(&P, &ci, NULL);
	seen_attach(&P, &S);
	pipeline_begin(&P);
	h = mk_process(&B, 1, mode);
	h->cur = 200;
	feed(h);
	feed(mk_switch(&B, 1, 100, 0, 7, 0, 0));
	feed(mk_span(&B, false, 1, 110, 7, "a"));
	feed(mk_create(&B, 2, 150, 0, 8, 0));
	feed(mk_switch(&B, 2, 160, 0, 8, 0, 0));
	feed(mk_span(&B, false, 2, 170, 8, "b"));
	feed(mk_create(&B, 3, 300, 0, 9, 0));
	feed(mk_switch(&B, 3, 310, 0, 9, 0, 0));
	feed(mk_span(&B, false, 3, 320, 9, "c"));
	feed(mk_span(&B, false, 4, 330, 0, "d"));
	stop();
}

TEST(span_end_begun_before_the_trace)
{
	span_ends_before_and_after(CORO_PROC_ATTACHED);
	CHECK_EQ(P.model.anom.span_begun_before_trace, 3);
	CHECK_EQ(P.model.anom.span_unmatched_end, 1);
	done();
	span_ends_before_and_after(CORO_PROC_LAUNCHED);
	CHECK_EQ(P.model.anom.span_begun_before_trace, 0);
	CHECK_EQ(P.model.anom.span_unmatched_end, 4);
	done();
}

/* ---- spans, searched and indexed alike ---- */

/* What apply_span() told the observers, per span record in order. */
#define SPAN_OPS 120000
static struct {
	bool matched[SPAN_OPS];
	u32 depth[SPAN_OPS];
	u32 n;
	char open_at_end[64][CORO_STR_LEN]; /* coroutine 7's open spans when it last ended */
	u32 nopen_at_end;
	u32 cap_at_end;
} SP;

static void span_event(void *ctx, const struct event *ev)
{
	if (ev->kind != EV_SPAN_BEGIN && ev->kind != EV_SPAN_END)
		return;
	if (SP.n < SPAN_OPS) {
		SP.matched[SP.n] = ev->kind == EV_SPAN_BEGIN || ev->span.matched;
		SP.depth[SP.n] = ev->span.depth;
		SP.n++;
	}
}

static void span_coroutine_end(void *ctx, const struct coro *c)
{
	SP.nopen_at_end = MIN(c->nspans, 64);
	SP.cap_at_end = c->cap_spans;
	for (u32 i = 0; i < SP.nopen_at_end; i++)
		memcpy(SP.open_at_end[i], c->spans[i].name, CORO_STR_LEN);
}

static void start_spans(void)
{
	struct model_observer obs = {.event = span_event, .coroutine_end = span_coroutine_end};

	memset(&SP, 0, sizeof(SP));
	memset(&ci, 0, sizeof(ci));
	pipeline_init(&P, &ci, NULL);
	seen_attach(&P, &S);
	pipeline_add_observer(&P, &obs, NULL);
	pipeline_begin(&P);
	pipeline_feed(&P, mk_process(&B, 1, CORO_PROC_LAUNCHED));
}

TEST(spans_deep_stack_ends_cost_no_search)
{
	/* The review's case: a deep stack, then ends naming spans that are not open. */
	enum { DEPTH = 50000, ENDS = 50000 };
	char name[32];
	u64 ts = 100;
	clock_t t0;
	double secs;

	start_spans();
	feed(mk_create(&B, 1, ts++, 0, 7, 0));
	feed(mk_switch(&B, 1, ts++, 0, 7, 0, 0));
	t0 = clock();
	for (int i = 0; i < DEPTH; i++) {
		snprintf(name, sizeof(name), "layer.%d", i);
		feed(mk_span(&B, true, 1, ts++, 7, name));
	}
	for (int i = 0; i < ENDS; i++) {
		snprintf(name, sizeof(name), "no.such.span.%d", i);
		feed(mk_span(&B, false, 1, ts++, 7, name));
	}
	/* A real one in the middle closes it and everything inside, and nothing outside. */
	feed(mk_span(&B, false, 1, ts++, 7, "layer.2"));
	feed(mk_span(&B, false, 1, ts++, 7, "layer.0"));
	feed(mk_span(&B, false, 1, ts++, 7, "layer.0"));
	stop(); /* the records wait in the reorder window until here */
	secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	CHECK_EQ(P.model.anom.span_unmatched_end, ENDS + 1);
	CHECK_EQ(SP.n, DEPTH + ENDS + 3);
	CHECK_EQ(SP.depth[DEPTH - 1], DEPTH);
	CHECK(SP.matched[DEPTH + ENDS] && SP.depth[DEPTH + ENDS] == DEPTH);
	CHECK(SP.matched[DEPTH + ENDS + 1] && SP.depth[DEPTH + ENDS + 1] == 2);
	CHECK(!SP.matched[DEPTH + ENDS + 2] && SP.depth[DEPTH + ENDS + 2] == 0);
	/* With no span open, it holds no span memory. */
	CHECK_EQ(SP.cap_at_end, 0);
	/* A search per end was 50,000 x 50,000 name compares: many seconds. */
	if (secs > 2.0) {
		fprintf(stderr, "  %.2f s for %d unmatched ends at depth %d\n", secs, ENDS, DEPTH);
		CHECK(secs <= 2.0);
	}
	CHECK_EQ(P.model.spans.index.len, 0);
	done();
}

/*
 * A random walk of begins and ends, the stack depth crossing the indexed
 * threshold both ways, few names (so ends close several at once) and some
 * never opened; spans of a coroutine and of a bare thread; the coroutine
 * ending with spans open and coming back at the same address. Each answer
 * must be the one a plain search of the stack gives.
 */
TEST(spans_indexed_agree_with_a_search)
{
	static const char *names[] = {"req", "db.query", "parse", "lock", "io", "retry"};
	static char ref[2][4096][CORO_STR_LEN]; /* [0] coroutine 7 on thread 1, [1] thread 2 */
	static bool want_matched[SPAN_OPS];
	static u32 want_depth[SPAN_OPS];
	u32 nref[2] = {0, 0}, nops = 0;
	u64 seed = 12345, ts = 100;
	int mismatches = 0;

	start_spans();
	feed(mk_create(&B, 1, ts++, 0, 7, 0));
	feed(mk_switch(&B, 1, ts++, 0, 7, 0, 0));
	while (nops < SPAN_OPS - 2) {
		u32 who, *n, r;
		char name[32];
		bool begin;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		r = (u32)(seed >> 33);
		who = r & 1;
		n = &nref[who];
		if (who == 0 && nops % 9973 == 9972) {
			/* Ends with its spans open; a new incarnation starts with none. */
			feed(mk_exit(&B, 1, ts++, 7, 7, 0));
			feed(mk_switch(&B, 1, ts++, 7, 0, CORO_R_DONE, 0));
			feed(mk_create(&B, 1, ts++, 0, 7, 0));
			feed(mk_switch(&B, 1, ts++, 0, 7, 0, 0));
			*n = 0;
			continue;
		}
		/* Depth wanders across the threshold (16) and far past it. */
		begin = (r >> 1) % 100 < (*n < 8 ? 75 : *n < 40 ? 52 : *n < 300 ? 48 : 30);
		if (begin && *n == 4096)
			begin = false;
		if ((r >> 8) % 10 == 0)
			snprintf(name, sizeof(name), "once.%u", (unsigned)nops); /* never opened */
		else
			snprintf(name, sizeof(name), "%s", names[(r >> 12) % 6]);
		want_depth[nops] = begin ? *n + 1 : *n;
		if (begin) {
			snprintf(ref[who][(*n)++], CORO_STR_LEN, "%s", name);
			want_matched[nops] = true;
		} else {
			u32 i = *n;

			while (i-- > 0 && strcmp(ref[who][i], name))
				;
			want_matched[nops] = i != (u32)-1;
			if (want_matched[nops])
				*n = i;
		}
		feed(mk_span(&B, begin, who ? 2 : 1, ts++, who ? 0 : 7, name));
		nops++;
	}
	stop();
	CHECK_EQ(SP.n, nops);
	for (u32 i = 0; i < nops && i < SP.n; i++) {
		if (SP.matched[i] != want_matched[i] || SP.depth[i] != want_depth[i]) {
			if (mismatches++ < 5)
				fprintf(stderr, "  op %u: matched %d depth %u, a search says %d %u\n", i,
					SP.matched[i], SP.depth[i], want_matched[i], want_depth[i]);
		}
	}
	CHECK_EQ(mismatches, 0);
	/* The last incarnation's spans, outermost first, as the outputs list them. */
	CHECK_EQ(SP.nopen_at_end, MIN(nref[0], 64));
	for (u32 i = 0; i < SP.nopen_at_end; i++)
		CHECK_STR(SP.open_at_end[i], ref[0][i]);
	/* Left in the index: only the thread's spans (at most one entry each). */
	CHECK(P.model.spans.index.len <= nref[1]);
	done();
}

TEST(process_exit_closes_everything)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 100, 0, 7, 0));
	feed(mk_create(&B, 1, 101, 0, 8, 0));
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	feed(mk_proc_exit(&B, 500, 0));
	/* A thread of a reused pid starts clean: no stale current coroutine. */
	feed(mk_switch(&B, 1, 600, 0, 9, 0, 0));
	stop();
	CHECK_EQ(S.nended, 3);
	CHECK(S.ended[0].id == 7 && S.ended[0].end == CE_PROCESS_EXIT && S.ended[0].end_ts == 500);
	CHECK(S.ended[0].end_state == CS_RUNNING);
	CHECK(S.ended[1].id == 8 && S.ended[1].end == CE_PROCESS_EXIT);
	CHECK_EQ(P.model.anom.switch_from_mismatch, 0);
	done();
}

TEST(switch_from_mismatch_is_counted)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_switch(&B, 1, 110, 0, 7, 0, 0));
	/* The scheduler claims 8 was running; BPF (hdr.cur) and the model say 7. */
	{
		struct coro_event_hdr *h = mk_switch(&B, 1, 120, 8, 0, CORO_R_WAIT, 0);

		h->cur = 7;
		feed(h);
	}
	stop();
	CHECK_EQ(P.model.anom.switch_from_mismatch, 1);
	/* 7's state is not guessed: unknown from then on. */
	CHECK(seen_find(&S, 7, 0) && seen_find(&S, 7, 0)->end_state == CS_UNKNOWN);
	done();
}

TEST(intervals_cover_life_without_gaps)
{
	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_ready(&B, 1, 1100, 0, 7));
	feed(mk_switch(&B, 1, 1200, 0, 7, 0, 0));
	feed(mk_switch(&B, 1, 1500, 7, 0, CORO_R_SLEEP, 0));
	feed(mk_ready(&B, 1, 2500, 0, 7));
	feed(mk_switch(&B, 1, 2600, 0, 7, 0, 0));
	feed(mk_exit(&B, 1, 3000, 7, 7, 0));
	stop();
	CHECK_EQ(S.interval_ns[CS_NEW] + S.interval_ns[CS_RUNNABLE] + S.interval_ns[CS_RUNNING] +
			 S.interval_ns[CS_SUSPENDED],
		 2000);
	CHECK_EQ(S.interval_ns[CS_RUNNING], 700);
	done();
}

TEST(memory_bounded_by_live_coroutines)
{
	start(CORO_PROC_LAUNCHED);
	for (u64 i = 1; i <= 20000; i++) {
		u64 ts = i * 500000; /* 500 us apart: the 50 ms window holds ~100 of them */

		feed(mk_create(&B, 1, ts, 0, i, 0));
		feed(mk_switch(&B, 1, ts + 10, 0, i, 0, 0));
		feed(mk_exit(&B, 1, ts + 20, i, i, 0));
		feed(mk_switch(&B, 1, ts + 30, i, 0, CORO_R_DONE, 0));
	}
	/* Everything held is within the reorder window; the model holds only live ones. */
	CHECK(P.model.live <= 1);
	CHECK(P.reorder.len <= 4 * 101);
	stop();
	CHECK_EQ(P.model.coroutines, 20000);
	CHECK_EQ(P.model.peak_live, 1);
	done();
}

/*
 * A cap of 2 live coroutines: the third created is not followed, nor its name, switches,
 * span; once the first exits it is followed from its next event, as one seen mid-life. The
 * two followed are exact, the rest counted; no anomaly is made of it.
 */
TEST(live_cap_follows_what_it_can_and_counts_the_rest)
{
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	model_limit(&P.model, 2, 0);
	for (u64 id = 1; id <= 3; id++) {
		u64 ts = id * 1000;

		feed(mk_create(&B, 1, ts, 0, id, 0));
		feed(mk_name(&B, 1, ts + 10, 0, id, "w"));
		feed(mk_switch(&B, 1, ts + 20, 0, id, 0, 0));
		feed(mk_span(&B, true, 1, ts + 30, id, "s"));
		feed(mk_span(&B, false, 1, ts + 40, id, "s"));
		feed(mk_switch(&B, 1, ts + 50, id, 0, CORO_R_WAIT, 0x77));
	}
	/* 1 exits: room. 3's ready makes it followed, mid-life. */
	feed(mk_ready(&B, 1, 5000, 0, 1));
	feed(mk_switch(&B, 1, 5010, 0, 1, 0, 0));
	feed(mk_exit(&B, 1, 5020, 1, 1, 0));
	feed(mk_switch(&B, 1, 5030, 1, 0, CORO_R_DONE, 0));
	feed(mk_ready(&B, 1, 6000, 0, 3));
	stop();
	CHECK_EQ(P.model.anom.over_cap, 1);
	CHECK_EQ(P.model.anom.over_process_cap, 0);
	/* 3's create, name, both switches and both span events. */
	CHECK_EQ(P.model.anom.events_over_cap, 6);
	CHECK_EQ(P.model.anom.span_unmatched_end, 0);
	CHECK_EQ(P.model.anom.switch_from_mismatch, 0);
	CHECK_EQ(P.model.peak_live, 2);
	c = seen_find(&S, 1, 0);
	CHECK(c && c->created_seen && c->switch_ins == 2 && c->end == CE_EXIT);
	c = seen_find(&S, 2, 0);
	CHECK(c && c->created_seen && c->switch_ins == 1 && !strcmp(c->name, "w"));
	CHECK(c && c->t_state[CS_RUNNING] == 30 && c->end_state == CS_SUSPENDED);
	c = seen_find(&S, 3, 0);
	CHECK(c && !c->created_seen && c->switch_ins == 0 && c->readies == 1 && !c->name[0]);
	CHECK(c && c->first_ts == 6000);
	done();
}

/*
 * A cap of 3 open spans: d and e are not kept and end without closing c; f is kept again
 * once c is closed, g is refused and ends with b, its end then unmatched as it would be
 * without the cap. The spans kept are those a model without caps shows.
 */
TEST(span_cap_keeps_the_outer_spans_exact)
{
	static const char *const seq[] = {"+a", "+b", "+c", "+d", "+e", "-e", "-d", "-c",
					  "+f", "+g", "-b", "-g", "-a"};
	u64 ts = 1000;

	start(CORO_PROC_LAUNCHED);
	model_limit_spans(&P.model, 3, 0);
	feed(mk_create(&B, 1, ts, 0, 1, 0));
	feed(mk_switch(&B, 1, ts += 10, 0, 1, 0, 0));
	for (size_t i = 0; i < ARRAY_SIZE(seq); i++)
		feed(mk_span(&B, seq[i][0] == '+', 1, ts += 10, 1, seq[i] + 1));
	feed(mk_switch(&B, 1, ts += 10, 1, 0, CORO_R_WAIT, 0));
	stop();
	CHECK_EQ(P.model.anom.spans_over_cap, 3);
	CHECK_EQ(P.model.anom.spans_over_process_cap, 0);
	CHECK_EQ(P.model.anom.span_unmatched_end, 1);
	/* a, b, c, f: closed, each once; d, e, g never entered the statistics. */
	CHECK_EQ(P.model.spans.stats.instances, 4);
	CHECK_EQ(P.model.open_spans, 0);
	CHECK_EQ(P.model.span_refused.len, 0);
	done();
}

/* Reorder on its own: jittered timestamps come out sorted by (ts, arrival), none lost. */
static u64 ro_last_ts, ro_last_id, ro_count, ro_bad;

static void ro_emit(void *ctx, const struct coro_event_hdr *h)
{
	const struct coro_ev_create *e = (const void *)h;

	if (h->ts < ro_last_ts || (h->ts == ro_last_ts && e->id < ro_last_id))
		ro_bad++;
	ro_last_ts = h->ts;
	ro_last_id = e->id;
	ro_count++;
}

static void ro_start(struct reorder *r, u64 window)
{
	ro_last_ts = ro_last_id = ro_count = ro_bad = 0;
	reorder_init(r, window, ro_emit, NULL);
}

TEST(reorder_random_jitter)
{
	struct reorder r;
	union rec_buf b;
	u64 seed = 7, late_jitter = 0;

	ro_start(&r, 10000);
	for (u64 i = 1; i <= 300000; i++) {
		u64 ts = 1000000 + i * 100, jitter;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		/* One record in eight is up to 5 us late (within the 10 us window). */
		jitter = (seed >> 40) % 8 == 0 ? (seed >> 20) % 5000 : 0;
		late_jitter += jitter != 0;
		/* Equal timestamps keep arrival order: ids grow with arrival. */
		mk_create(&b, 1, ts - jitter, 0, i, 0);
		reorder_push(&r, &b.hdr);
		if (r.len > 200)
			ro_bad++; /* the window holds ~100 records, never the whole stream */
	}
	reorder_drain(&r);
	CHECK_EQ(ro_count, 300000);
	CHECK_EQ(ro_bad, 0);
	CHECK_EQ(r.late, 0);
	CHECK(late_jitter > 30000);
	reorder_free(&r);
}

/*
 * The pipeline's window holds a thread whose records reach the ring 45 ms
 * after the others' (a batched thread on a virtual CPU the host stopped):
 * in time order, none late. Records 60 ms behind are late, and counted.
 */
TEST(reorder_holds_a_thread_stalled_for_45_ms)
{
	struct reorder r;
	union rec_buf b;
	u64 id = 0;

	ro_start(&r, REORDER_WINDOW_NS);
	for (u64 t = 0; t < 200; t++) {
		u64 now = 1000000000ULL + t * 500000; /* thread 1: a record every 0.5 ms */

		mk_create(&b, 1, now, 0, ++id, 0);
		reorder_push(&r, &b.hdr);
		/* At 65 ms, thread 2's records of 20.0 to 20.5 ms arrive. */
		if (t == 130)
			for (u64 k = 0; k < 50; k++) {
				mk_create(&b, 2, 1000000000ULL + 20000000 + k * 10000, 0, ++id, 0);
				reorder_push(&r, &b.hdr);
			}
	}
	CHECK_EQ(r.late, 0);
	CHECK_EQ(ro_bad, 0);
	/* 60 ms behind the newest (and 10 ms behind what has left): late. */
	mk_create(&b, 2, 1000000000ULL + 199 * 500000 - 60000000, 0, ++id, 0);
	reorder_push(&r, &b.hdr);
	reorder_drain(&r);
	CHECK_EQ(r.late, 1);
	CHECK_EQ(ro_count, 251);
	CHECK_EQ(r.cut, 0);
	reorder_free(&r);
}

/* What the window holds is capped in bytes: a flood is cut to it, in order, none lost. */
TEST(reorder_window_cut_to_its_bytes)
{
	struct reorder r;
	union rec_buf b;
	u64 held = 0;

	ro_start(&r, REORDER_WINDOW_NS);
	r.max_bytes = 64 << 10;
	for (u64 i = 1; i <= 100000; i++) {
		mk_create(&b, 1, 1000000 + i, 0, i, 0); /* a record a nanosecond: all in the window */
		reorder_push(&r, &b.hdr);
		if (r.bytes > held)
			held = r.bytes;
	}
	CHECK(held <= 64 << 10);
	CHECK(held > 60 << 10);
	CHECK(r.cut > 90000);
	reorder_drain(&r);
	CHECK_EQ(r.bytes, 0);
	CHECK_EQ(ro_count, 100000);
	CHECK_EQ(ro_bad, 0);
	CHECK_EQ(r.late, 0);
	reorder_free(&r);
}

TEST(offcpu_time_goes_to_the_running_coroutine)
{
	const struct coro *c;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, 3000, 5000, 7, CORO_OFF_SLEEPING, 300));
	feed(mk_off_begin(&B, 1, 6000, 7, CORO_OFF_PREEMPTED));
	feed(mk_off_end(&B, 1, 6000, 6500, 7, CORO_OFF_PREEMPTED, 500));
	feed(mk_switch(&B, 1, 7000, 7, 0, CORO_R_WAIT, 1));
	/* Off the CPU while no coroutine runs there: nobody's. */
	feed(mk_off_begin(&B, 1, 8000, 0, CORO_OFF_SLEEPING));
	feed(mk_off_end(&B, 1, 8000, 9000, 0, CORO_OFF_SLEEPING, 0));
	stop();
	c = seen_find(&S, 7, 0);
	CHECK(c != NULL);
	CHECK(c && c->t_state[CS_RUNNING] == 5000);
	CHECK(c && c->t_offcpu == 2500);
	CHECK(c && c->t_runq == 800);
	CHECK(c && c->t_blocked == 1700);
	done();
}

/*
 * A stretch whose end the kernel did not show (flagged late): the BPF side ends it at the
 * thread's next trap or copy, after records the thread made on the CPU meanwhile (a batched
 * copy's). It was over by the first of those, and it is the time of the coroutine that left
 * the CPU, not of the one running when it is ended: here 7 left at 3000, its thread ran again
 * by 4000 (7 switched out to 8 there), and the stretch was ended late at 9000, 8 running.
 */
TEST(offcpu_ended_late_stops_at_the_threads_next_record)
{
	const struct coro *c7, *c8;
	struct coro_event_hdr *h;

	start(CORO_PROC_LAUNCHED);
	feed(mk_create(&B, 1, 1000, 0, 7, 0));
	feed(mk_create(&B, 1, 1100, 0, 8, 0));
	feed(mk_switch(&B, 1, 2000, 0, 7, 0, 0));
	feed(mk_off_begin(&B, 1, 3000, 7, CORO_OFF_SLEEPING));
	feed(mk_switch(&B, 1, 4000, 7, 8, CORO_R_WAIT, 1));
	h = mk_off_end(&B, 1, 3000, 9000, 8, CORO_OFF_SLEEPING, 0);
	h->flags |= CORO_EVF_OFFCPU_LATE;
	feed(h);
	feed(mk_switch(&B, 1, 10000, 8, 0, CORO_R_WAIT, 1));
	stop();
	c7 = seen_find(&S, 7, 0);
	c8 = seen_find(&S, 8, 0);
	CHECK(c7 && c8);
	CHECK(c7 && c7->t_offcpu == 1000);
	CHECK(c7 && c7->t_blocked == 1000);
	CHECK(c8 && c8->t_offcpu == 0);
	/* No coroutine is off the CPU longer than it ran. */
	CHECK(c8 && c8->t_state[CS_RUNNING] == 6000);
	CHECK_EQ(P.model.anom.offcpu_late, 1);
	done();
}

int main(void)
{
	RUN(lifecycle_times_are_exact);
	RUN(attach_mid_life_creates_implicitly);
	RUN(cur_unknown_on_attach_gives_null_waker);
	RUN(id_reuse_makes_new_incarnations);
	RUN(create_of_live_id_supersedes);
	RUN(name_before_create_is_one_coroutine);
	RUN(done_switch_after_exit_on_an_unknown_thread);
	RUN(event_without_thread_state_says_nothing_about_the_thread);
	RUN(reorder_fixes_cross_cpu_order);
	RUN(ready_while_running_keeps_it_runnable);
	RUN(lost_events_make_state_unknown);
	RUN(spans_follow_migration);
	RUN(span_end_begun_before_the_trace);
	RUN(spans_deep_stack_ends_cost_no_search);
	RUN(spans_indexed_agree_with_a_search);
	RUN(process_exit_closes_everything);
	RUN(switch_from_mismatch_is_counted);
	RUN(intervals_cover_life_without_gaps);
	RUN(memory_bounded_by_live_coroutines);
	RUN(live_cap_follows_what_it_can_and_counts_the_rest);
	RUN(span_cap_keeps_the_outer_spans_exact);
	RUN(reorder_random_jitter);
	RUN(reorder_holds_a_thread_stalled_for_45_ms);
	RUN(reorder_window_cut_to_its_bytes);
	RUN(offcpu_time_goes_to_the_running_coroutine);
	RUN(offcpu_ended_late_stops_at_the_threads_next_record);
	return unit_done();
}
