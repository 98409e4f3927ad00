// SPDX-License-Identifier: MIT
/*
 * spans.c beyond matching: a span's share of its owner's clocks, the
 * longest suspension handed outward, every instance ended once, and the
 * per-name statistics (nearest rank, the bounds on names and samples).
 */
#include <stdlib.h>
#include <string.h>
#include "unit.h"
#include "spans.h"

struct owner {
	struct coro_span *v;
	u32 n, cap;
	bool indexed;
};

static struct span_stack stack_of(struct owner *o)
{
	return (struct span_stack){o, &o->v, &o->n, &o->cap, &o->indexed};
}

/* Names as records carry them: CORO_STR_LEN bytes (span_push() copies them whole). */
static const char *N(const char *s)
{
	static char buf[8][CORO_STR_LEN];
	static int i;
	char *b = buf[i++ % 8];

	memset(b, 0, CORO_STR_LEN);
	strncpy(b, s, CORO_STR_LEN - 1);
	return b;
}

static struct span_done got[64];
static int ngot;

static void done(void *ctx, const struct span_done *d)
{
	(void)ctx;
	if (ngot < 64)
		got[ngot++] = *d;
}

static struct span_ender ender(u64 end, const struct span_time *now)
{
	return (struct span_ender){.d = {.pid = 1, .tid = 2, .id = 3, .uid = 4, .end = end},
				   .now = now, .done = done};
}

TEST(shares_are_the_clocks_difference_and_longest_goes_outward)
{
	struct span_table t;
	struct owner o = {0};
	struct span_stack st = stack_of(&o);
	struct span_time k = {0};
	struct span_ender e;

	span_table_init(&t);
	ngot = 0;
	k.running = 100;
	span_push(&t, &st, N("tx"), 1000, &k, 0);
	k.running = 150;
	span_push(&t, &st, N("step"), 1050, &k, 0);
	/* Inside step: a 300 ns sleep, ran 20 more with 5 of them off the CPU. */
	k.suspended = 300;
	k.susp[3] = 300;
	span_note_suspension(o.v, o.n, 1100, 300, 3, 0xabc);
	k.running = 170;
	k.offcpu = 5;
	k.blocked = 5;
	e = ender(1500, &k);
	CHECK(span_pop(&t, &st, N("step"), &e));
	CHECK_EQ(ngot, 1);
	CHECK_EQ(got[0].depth, 2);
	CHECK_EQ(got[0].dur, 450);
	CHECK_EQ(got[0].in.running, 15);
	CHECK_EQ(got[0].in.offcpu, 5);
	CHECK_EQ(got[0].in.suspended, 300);
	CHECK_EQ(got[0].sp->parent, 1);
	CHECK(got[0].closed);
	/* tx had no suspension of its own while innermost: step's is handed to it. */
	k.running = 200;
	e = ender(2000, &k);
	CHECK(span_pop(&t, &st, N("tx"), &e));
	CHECK_EQ(ngot, 2);
	CHECK_EQ(got[1].dur, 1000);
	CHECK_EQ(got[1].in.running + got[1].in.offcpu + got[1].in.suspended, 400);
	CHECK_EQ(got[1].sp->longest_ns, 300);
	CHECK_EQ(got[1].sp->longest_obj, 0xabc);
	span_table_free(&t);
}

TEST(a_pop_ends_the_inner_ones_innermost_first_and_unclosed_ones_end_once)
{
	struct span_table t;
	struct owner o = {0};
	struct span_stack st = stack_of(&o);
	struct span_ender e = ender(100, NULL);
	size_t n;

	span_table_init(&t);
	ngot = 0;
	span_push(&t, &st, N("a"), 10, NULL, 0);
	span_push(&t, &st, N("b"), 20, NULL, 0);
	span_push(&t, &st, N("c"), 30, NULL, 0);
	CHECK(span_pop(&t, &st, N("b"), &e));
	CHECK_EQ(ngot, 2);
	CHECK_STR(got[0].sp->name, "c");
	CHECK_STR(got[1].sp->name, "b");
	CHECK_EQ(o.n, 1);
	e = ender(200, NULL);
	span_end_open(&t, o.v, o.n, &e);
	CHECK_EQ(ngot, 3);
	CHECK(!got[2].closed);
	CHECK_EQ(got[2].dur, 190);
	span_stats_seal(&t);
	struct span_name_stats *const *v = span_stats_names(&t, &n);
	CHECK_EQ(n, 3);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i]->name, "a"))
			CHECK_EQ(v[i]->count * 10 + v[i]->unclosed, 1);
	free(o.v);
	span_forget(&t, &o, NULL, 0, &o.indexed);
	span_table_free(&t);
}

TEST(percentiles_are_nearest_rank)
{
	struct span_table t;
	struct owner o = {0};
	struct span_stack st = stack_of(&o);
	struct span_ender e;
	size_t n;

	span_table_init(&t);
	ngot = 0;
	/* Durations 1..200, pushed in a scrambled order. */
	for (u64 i = 0; i < 200; i++) {
		u64 d = (i * 37) % 200 + 1;

		span_push(&t, &st, N("q"), 1000, NULL, 0);
		e = ender(1000 + d, NULL);
		CHECK(span_pop(&t, &st, N("q"), &e));
	}
	span_stats_seal(&t);
	struct span_name_stats *const *v = span_stats_names(&t, &n);
	CHECK_EQ(n, 1);
	CHECK_EQ(v[0]->count, 200);
	CHECK_EQ(v[0]->total, 200 * 201 / 2);
	CHECK_EQ(span_stats_percentile(v[0], 50), 100);
	CHECK_EQ(span_stats_percentile(v[0], 95), 190);
	CHECK_EQ(span_stats_percentile(v[0], 99), 198);
	CHECK_EQ(span_stats_percentile(v[0], 100), 200);
	CHECK_EQ(v[0]->max, 200);
	CHECK(!v[0]->approx);
	span_table_free(&t);
}

TEST(names_past_the_bound_go_together)
{
	struct span_table t;
	struct owner o = {0};
	struct span_stack st = stack_of(&o);
	struct span_ender e;
	char name[32];
	size_t n, others = 0;

	span_table_init(&t);
	for (int i = 0; i < SPAN_STATS_NAMES + 10; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		span_push(&t, &st, N(name), 0, NULL, 0);
		e = ender(5, NULL);
		e.done = NULL;
		CHECK(span_pop(&t, &st, N(name), &e));
	}
	span_stats_seal(&t);
	struct span_name_stats *const *v = span_stats_names(&t, &n);
	CHECK_EQ(n, SPAN_STATS_NAMES + 1);
	for (size_t i = 0; i < n; i++)
		if (v[i]->other) {
			others++;
			CHECK_EQ(v[i]->count, 10);
			CHECK_EQ(i, n - 1);
		}
	CHECK_EQ(others, 1);
	span_table_free(&t);
}

int main(void)
{
	RUN(shares_are_the_clocks_difference_and_longest_goes_outward);
	RUN(a_pop_ends_the_inner_ones_innermost_first_and_unclosed_ones_end_once);
	RUN(percentiles_are_nearest_rank);
	RUN(names_past_the_bound_go_together);
	return unit_done();
}
