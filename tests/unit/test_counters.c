// SPDX-License-Identifier: MIT
/*
 * The counters table (user/model/counters.c): consistent, and every output it
 * drives says every counter: the JSONL trailer (and its reader reads the
 * capture's counters back), the text summary. The Perfetto capture summary
 * is checked in test_perfetto.c, SQLite and all of them byte for byte
 * against the previous build by tools/outputs_identical.sh.
 */
#include <unistd.h>
#include "unit.h"
#include "stream.h"
#include "counters.h"
#include "jsonl_read.h"
#include "summary.h"

static char dir[] = "/tmp/corobpf-test-counters-XXXXXX";

/* The meta keys sqlite.c writes besides the counters. */
static const char *const other_meta[] = {
	"schema_version", "tool", "tool_version", "clock", "start_ts", "start_time",
	"realtime_offset_ns", "kernel", "hostname", "end_reason", "events", "samples",
	"coroutines", "input_error",
};

TEST(table_is_consistent)
{
	CHECK(ncounters > 0 && ncounters <= COUNTERS_MAX);
	for_each_counter(c) {
		CHECK(c->group < CG_NGROUPS);
		CHECK(c->json && c->json[0]);
		switch (c->src) {
		case CSRC_BPF:
			CHECK(c->index < CORO_STAT_MAX);
			break;
		case CSRC_USER:
			CHECK(c->index < CORO_USTAT_MAX);
			break;
		case CSRC_ANOM:
			CHECK(c->index % sizeof(u64) == 0);
			CHECK(c->index < sizeof(struct model_anomalies));
			break;
		case CSRC_FN:
			CHECK(c->get != NULL);
			break;
		default:
			CHECK(!"unknown source");
		}
		CHECK(!(c->text && c->say));
		/* The reader's "group.key" buffer. */
		CHECK(strlen(counter_group_json[c->group]) + 1 + strlen(c->json) < 64);
		for (const struct counter *d = counters; d < c; d++) {
			CHECK(!(d->group == c->group && !strcmp(d->json, c->json)));
			CHECK(!(d->sql && c->sql && !strcmp(d->sql, c->sql)));
			CHECK(!(d->perfetto && c->perfetto && !strcmp(d->perfetto, c->perfetto)));
			/* Two counters in one slot would be read back and reported twice. */
			CHECK(!(d->src == c->src && c->src != CSRC_FN && d->index == c->index));
		}
		for (size_t i = 0; c->sql && i < ARRAY_SIZE(other_meta); i++)
			CHECK(strcmp(c->sql, other_meta[i]) != 0);
	}
}

/* A stats record with every slot non-zero and distinct. */
static void fill_stats(struct coro_rec_stats *st, u64 ts)
{
	hdr_fill(&st->hdr, sizeof(*st), CORO_REC_STATS, 0, ts, 0);
	st->hdr.pid = 0;
	for (u32 k = 0; k < CORO_STAT_MAX; k++)
		st->bpf[k] = 1000 + 10 * k;
	for (u32 k = 0; k < CORO_USTAT_MAX; k++)
		st->user[k] = 2000 + 10 * k;
}

/*
 * A short stream with a loss and a stats record through the pipeline into
 * `path` (NULL: none), the text summary into `summary` (NULL: none).
 */
static void write_stream(const char *path, FILE *summary, const struct coro_rec_stats *st)
{
	struct capture_info ci = {0};
	u32 pids[1] = {TPID};
	struct model_observer obs;
	struct finding_sink fs;
	struct summary sum;
	struct output out;
	struct pipeline p;
	union rec_buf b;
	struct coro_event_hdr *h;
	char err[256];

	ci.version = 1;
	ci.start_ts = 1000;
	ci.npids = 1;
	ci.pids = pids;
	pipeline_init(&p, &ci, NULL);
	if (path) {
		CHECK_EQ(output_open(&out, path, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
		CHECK_EQ(pipeline_add_output(&p, &out, err, sizeof(err)), 0);
	}
	if (summary) {
		summary_init(&sum, summary, &obs, &fs);
		pipeline_add_observer(&p, &obs, &fs);
	}
	pipeline_begin(&p);
	pipeline_feed(&p, mk_process(&b, 1000, CORO_PROC_LAUNCHED));
	pipeline_feed(&p, mk_create(&b, 2, 1100, 0, 1, 0));
	h = mk_switch(&b, 2, 1200, 0, 1, 0, 0);
	h->lost_before = 7;
	pipeline_feed(&p, h);
	pipeline_feed(&p, &st->hdr);
	pipeline_finish(&p);
	if (path)
		CHECK_EQ(output_close(&out, err, sizeof(err)), 0);
	pipeline_free(&p);
}

TEST(jsonl_trailer_has_every_counter_and_reads_back)
{
	struct coro_rec_stats st, got = {0};
	char path[300], err[512], key[96];
	const struct coro_event_hdr *h;
	struct capture_info ci;
	struct jsonl_reader *r;
	char *text, *trailer;
	int ret, nstats = 0;

	snprintf(path, sizeof(path), "%s/c.jsonl", dir);
	fill_stats(&st, 1300);
	write_stream(path, NULL, &st);
	text = unit_slurp(path);
	trailer = text ? strstr(text, "{\"type\":\"trailer\"") : NULL;
	CHECK(trailer != NULL);
	for_each_counter(c) {
		const char *obj;

		snprintf(key, sizeof(key), "\"%s\":{", counter_group_json[c->group]);
		obj = trailer ? strstr(trailer, key) : NULL;
		CHECK(obj != NULL);
		snprintf(key, sizeof(key), "\"%s\":", c->json);
		CHECK_CONTAINS(obj, key);
	}
	free(text);

	r = jsonl_reader_open(path, &ci, err, sizeof(err));
	CHECK(r != NULL);
	if (!r)
		return;
	while ((ret = jsonl_reader_next(r, &h)) == 1)
		if (h->kind == CORO_REC_STATS) {
			memcpy(&got, h, sizeof(got));
			nstats++;
		}
	CHECK_EQ(ret, 0);
	CHECK_EQ(nstats, 1);
	for_each_counter(c) {
		u64 *want = counter_stat(c, st.bpf, st.user);
		u64 *back = counter_stat(c, got.bpf, got.user);

		if (!want)
			continue;
		if (c->flags & CF_NOT_READ_BACK)
			CHECK_EQ(*back, 0);
		else
			CHECK_EQ(*back, *want);
	}
	jsonl_reader_close(r);
	capture_info_free(&ci);
}

TEST(summary_says_every_counter_with_a_line)
{
	struct coro_rec_stats st;
	char *text = NULL, line[512];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	fill_stats(&st, 1300);
	write_stream(NULL, f, &st);
	fclose(f);
	for_each_counter(c) {
		u64 *v = counter_stat(c, st.bpf, st.user);

		if (!c->text || !v)
			continue;
		snprintf(line, sizeof(line), "\n  %llu %s\n", (unsigned long long)*v, c->text);
		CHECK_CONTAINS(text, line);
	}
	/* Derived: the loss carried by the switch is attributed, the rest is not. */
	snprintf(line, sizeof(line), "\n  %llu of them were lost",
		 (unsigned long long)st.bpf[CORO_STAT_RING_FULL] - 7);
	CHECK_CONTAINS(text, line);
	CHECK_CONTAINS(text, " events have no stack: ");
	free(text);
}

/* The line a stack-lost count makes, for a model with these counts. */
static char *stacks_line(u64 lost, u64 unresolved, u64 samples, u64 samples_nostack)
{
	static struct model m;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	memset(&m, 0, sizeof(m));
	m.stats.bpf[CORO_STAT_STACK_LOST] = lost;
	m.stats.user[CORO_USTAT_STACK_UNRESOLVED] = unresolved;
	m.samples = samples;
	m.samples_nostack = samples_nostack;
	for_each_counter(c)
		if (c->say && c->src == CSRC_BPF && c->index == CORO_STAT_STACK_LOST)
			c->say(f, &m);
	fclose(f);
	return text;
}

/*
 * Samples that went without a stack (one landing in our own probe, the demo's usual case) are
 * said apart from events, with why; events without one are said as such, with where to read.
 */
TEST(summary_says_stack_samples_apart_from_events)
{
	char *t;

	t = stacks_line(3, 0, 5, 3);
	CHECK_STR(t, "  3 of 5 stack samples (--sample-hz) have no stack: 3 not taken in the kernel, "
		     "0 not resolved\n    expected: a sample that lands while one of corobpf's own "
		     "probes is using the CPU's stack buffer goes without; every event has its stack "
		     "(docs/stacks.md, \"Loss\")\n");
	free(t);
	t = stacks_line(3, 1, 5, 2);
	CHECK_STR(t, "  2 events and 2 of 5 stack samples have no stack: 3 not taken in the kernel, "
		     "1 not resolved\n    each is kept without it; the causes, and what to do about "
		     "many: docs/stacks.md, \"Loss\"\n");
	free(t);
	t = stacks_line(2, 0, 0, 0);
	CHECK_STR(t, "  2 events have no stack: 2 not taken in the kernel, 0 not resolved\n    each "
		     "is kept without it; the causes, and what to do about many: docs/stacks.md, "
		     "\"Loss\"\n");
	free(t);
	t = stacks_line(0, 0, 5, 0);
	CHECK_STR(t, "");
	free(t);
}

/* The line late off-CPU ends make: the count's own number, what it changes, nothing to do. */
static char *offcpu_late_line(u64 n)
{
	static struct model m;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	memset(&m, 0, sizeof(m));
	m.anom.offcpu_late = n;
	for_each_counter(c)
		if (c->say && c->json && !strcmp(c->json, "offcpu_late"))
			c->say(f, &m);
	fclose(f);
	return text;
}

TEST(summary_says_late_offcpu_ends_in_their_number)
{
	char *t;

	t = offcpu_late_line(1);
	CHECK_STR(t, "  1 off-CPU stretch ended at its thread's next record: the kernel did not "
		     "show the thread's return to the CPU\n    expected now and then (a few in a "
		     "thousand stretches on some kernels): it reads a little long, with no run-queue "
		     "time; nothing to do (docs/design.md, \"The kernel's view\")\n");
	free(t);
	t = offcpu_late_line(3);
	CHECK_CONTAINS(t, "  3 off-CPU stretches ended at their thread's next record: ");
	CHECK_CONTAINS(t, "): they read a little long, with no run-queue time; nothing to do ");
	free(t);
	t = offcpu_late_line(0);
	CHECK_STR(t, "");
	free(t);
}

/* The line for findings let go: both causes in their numbers, and what holds fewer. */
TEST(summary_says_findings_let_go_by_cause)
{
	static struct model m;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	memset(&m, 0, sizeof(m));
	m.anom.findings_unheld = 6;
	m.anom.findings_unheld_thread = 5;
	f = open_memstream(&text, &len);
	for_each_counter(c)
		if (c->say)
			c->say(f, &m);
	fclose(f);
	CHECK_CONTAINS(text, "  11 blocking calls or long runs were let go before their evidence "
			     "came (6: a process already held 64 ");
	CHECK_CONTAINS(text, "; 5: a thread already held 256 ");
	CHECK_CONTAINS(text, "raise --blocking and --long-run");
	free(text);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(table_is_consistent);
	RUN(jsonl_trailer_has_every_counter_and_reads_back);
	RUN(summary_says_every_counter_with_a_line);
	RUN(summary_says_stack_samples_apart_from_events);
	RUN(summary_says_late_offcpu_ends_in_their_number);
	RUN(summary_says_findings_let_go_by_cause);
	if (!unit_failed_checks) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		CHECK_EQ(system(cmd), 0);
	}
	return unit_done();
}
