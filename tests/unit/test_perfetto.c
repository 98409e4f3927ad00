// SPDX-License-Identifier: MIT
/*
 * The Perfetto writer on the fixed synthetic stream (stream.h): decoded with
 * protoc against tests/perfetto/corobpf_trace.proto, checked for the format's
 * rules by tests/perfetto/check.py, and listed one packet per line against a
 * golden text (tests/perfetto/golden/; UPDATE_GOLDEN=1 rewrites). Once with a
 * track per coroutine, once with every coroutine on packed lanes.
 */
#include <unistd.h>
#include "unit.h"
#include "stream.h"
#include "pb.h"
#include "perfetto.h"
#include "pf_wire.h"
#include "counters.h"

static void golden(const char *name, int max_tracks)
{
	char dir[] = "/tmp/corobpf-test-pf-XXXXXX", trace[300], text[300], cmd[1024], gold[300];
	char *got, *want;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	snprintf(trace, sizeof(trace), "%s/%s.pftrace", dir, name);
	snprintf(text, sizeof(text), "%s/%s.txt", dir, name);
	snprintf(gold, sizeof(gold), "tests/perfetto/golden/%s.txt", name);
	write_basic(trace, max_tracks);
	/* Checked for the format's rules, then listed one packet per line. */
	snprintf(cmd, sizeof(cmd), "python3 tests/perfetto/check.py --dump %s > %s", trace, text);
	CHECK_EQ(system(cmd), 0);
	got = unit_slurp(text);
	if (getenv("UPDATE_GOLDEN")) {
		FILE *f = fopen(gold, "wb");

		fputs(got ? got : "", f);
		fclose(f);
	}
	want = unit_slurp(gold);
	CHECK(got && want);
	if (got && want && strcmp(got, want)) {
		unit_failed_checks++;
		fprintf(stderr, "%s: decoded trace differs from %s (diff %s %s; UPDATE_GOLDEN=1 "
			"rewrites)\n", name, gold, text, gold);
	}
	if (!unit_failed_checks) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		CHECK_EQ(system(cmd), 0);
	}
	free(got);
	free(want);
}

TEST(golden_tracks)
{
	golden("basic", -1);
}

TEST(golden_packed_lanes)
{
	golden("basic-lanes", 0);
}

/* Nested lengths: one reserved byte, moved for content of 128 bytes and more. */
TEST(pb_nested_lengths)
{
	static const size_t sizes[] = {0, 1, 127, 128, 300, 16383, 16384, 20000};
	static u8 buf[65536], text[20000];

	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (u8)('a' + i % 26);
	for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
		struct pb pb;
		size_t outer, inner, n = sizes[k], pos, len;
		u64 v;
		int shift;

		pb_init(&pb, buf, sizeof(buf));
		outer = pb_begin(&pb, 1);
		inner = pb_begin(&pb, 2);
		pb_bytes(&pb, 3, text, n);
		pb_end(&pb, inner);
		pb_uint(&pb, 4, 99);
		pb_end(&pb, outer);
		CHECK(!pb.overflow);
		/* Decode: tag 1 LEN, length, tag 2 LEN, length, tag 3 LEN, length, text, tag 4 = 99. */
		pos = 0;
		for (int level = 0; level < 3; level++) {
			CHECK_EQ(buf[pos], ((level + 1) << 3) | PB_LEN);
			pos++;
			{
				size_t start = pos;

				for (v = 0, shift = 0; buf[pos] & 0x80; pos++, shift += 7)
					v |= (u64)(buf[pos] & 0x7f) << shift;
				v |= (u64)buf[pos++] << shift;
				/* Minimal: exactly as many length bytes as the value needs. */
				CHECK_EQ(pos - start, pb_varint_size(v));
			}
			len = v;
			if (level == 0)
				CHECK_EQ(pos + len, pb.len);
			if (level == 2)
				CHECK_EQ(len, n);
		}
		CHECK(memcmp(buf + pos, text, n) == 0);
		pos += n;
		CHECK_EQ(buf[pos], (4 << 3) | PB_VARINT);
		CHECK_EQ(buf[pos + 1], 99);
		CHECK_EQ(pos + 2, pb.len);
	}
	/* Overflow is sticky and never writes past the buffer. */
	{
		struct pb pb;
		u8 small[16];

		pb_init(&pb, small, sizeof(small));
		pb_bytes(&pb, 1, text, 100);
		CHECK(pb.overflow);
		CHECK(pb.len <= sizeof(small));
	}
}

/* A trace written through the whole pipeline into a temporary directory. */
struct pf_run {
	char dir[64], path[300];
	struct capture_info ci;
	u32 pids[1];
	struct output out;
	struct pipeline p;
};

static bool pf_run_open(struct pf_run *r, const char *file, int max_tracks)
{
	char err[256];

	memset(r, 0, sizeof(*r));
	snprintf(r->dir, sizeof(r->dir), "/tmp/corobpf-test-pf-XXXXXX");
	if (!mkdtemp(r->dir)) {
		CHECK(!"mkdtemp");
		return false;
	}
	snprintf(r->path, sizeof(r->path), "%s/%s", r->dir, file);
	r->pids[0] = TPID;
	r->ci.version = 1;
	r->ci.npids = 1;
	r->ci.pids = r->pids;
	CHECK_EQ(output_open(&r->out, r->path, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
	r->out.max_tracks = (u32)max_tracks;
	pipeline_init(&r->p, &r->ci, NULL);
	pipeline_add_output(&r->p, &r->out, err, sizeof(err));
	pipeline_begin(&r->p);
	return true;
}

static void pf_run_close(struct pf_run *r)
{
	char err[256];

	pipeline_finish(&r->p);
	CHECK_EQ(output_close(&r->out, err, sizeof(err)), 0);
	pipeline_free(&r->p);
}

/* The directory goes unless a check failed (then it is kept to look at). */
static void pf_run_cleanup(struct pf_run *r)
{
	char cmd[128];

	if (!unit_failed_checks) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", r->dir);
		CHECK_EQ(system(cmd), 0);
	}
}

/* The checked trace, one packet per line (check.py --dump; NULL if it fails the check): free it. */
static char *pf_run_dump(struct pf_run *r)
{
	char cmd[1024], text[400];

	snprintf(text, sizeof(text), "%s/dump.txt", r->dir);
	snprintf(cmd, sizeof(cmd), "python3 tests/perfetto/check.py --dump %s > %s", r->path, text);
	CHECK_EQ(system(cmd), 0);
	return unit_slurp(text);
}

/*
 * More distinct names than the writer keeps interned: interning restarts
 * (the packet clears incremental state, ids start again at 1), the checker
 * still resolves every name, and names before and after the restart are
 * right. With packed lanes too, whose names are cached per coroutine.
 */
static void many_names(int max_tracks)
{
	struct pf_run r;
	struct pipeline *p = &r.p;
	char *dump;
	union rec_buf b;
	const int n = 5000;
	u64 ts = 1000;

	if (!pf_run_open(&r, "names.pftrace", max_tracks))
		return;
	pipeline_feed(p, mk_process(&b, ts, CORO_PROC_LAUNCHED));
	for (int i = 1; i <= n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "task-%d", i);
		pipeline_feed(p, mk_create(&b, 2, ts += 10, 0, (u64)i, 0));
		pipeline_feed(p, mk_name(&b, 2, ts += 10, 0, (u64)i, name));
		pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, (u64)i, 0, 0));
		pipeline_feed(p, mk_exit(&b, 2, ts += 10, (u64)i, (u64)i, 0));
		pipeline_feed(p, mk_switch(&b, 2, ts += 10, (u64)i, 0, CORO_R_DONE, 0));
	}
	pipeline_feed(p, mk_proc_exit(&b, ts += 10, 0));
	pf_run_close(&r);
	dump = pf_run_dump(&r);
	CHECK(dump != NULL);
	if (dump) {
		/* The first and the last coroutine's run slices carry their names. */
		CHECK_CONTAINS(dump, max_tracks ? " task-1 " : "task-1: running");
		CHECK_CONTAINS(dump, max_tracks ? " task-5000 " : "task-5000: running");
		CHECK_CONTAINS(dump, "interning restarts");
		free(dump);
	}
	pf_run_cleanup(&r);
}

/*
 * --stacks: every suspended slice names a stack (500 distinct ones, one
 * frame each at an address in no mapping: "0x..." frames, each used six
 * times), with interning restarting several times on the way: a stack
 * interned before a restart is defined again after it. The checker
 * resolves every callstack, and the last one names its address.
 */
TEST(callstacks_across_interning_restarts)
{
	struct pf_run r;
	struct pipeline *p = &r.p;
	char cmd[1200];
	union rec_buf b;
	const int n = 3000;
	u64 ts = 1000;

	perfetto_intern_max = 1024;
	if (!pf_run_open(&r, "stacks.pftrace", PERFETTO_DEFAULT_MAX_TRACKS)) {
		perfetto_intern_max = PERFETTO_INTERN_MAX;
		return;
	}
	pipeline_feed(p, mk_process(&b, ts, CORO_PROC_LAUNCHED));
	for (int i = 1; i <= n; i++) {
		struct {
			struct coro_rec_stack st;
			u64 ip;
		} def = {0};
		struct {
			struct coro_ev_switch sw;
			struct coro_stack_ref ref;
		} out_sw;
		u32 sid = (u32)(i - 1) % 500 + 1;

		def.st.hdr.size = sizeof(def);
		def.st.hdr.kind = CORO_REC_STACK;
		def.st.hdr.pid = def.st.hdr.tid = TPID;
		def.st.id = sid;
		def.st.nframes = 1;
		def.ip = 0x100000 + (u64)sid;
		pipeline_feed(p, mk_create(&b, 2, ts += 10, 0, (u64)i, 0));
		pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, (u64)i, 0, 0));
		if (i <= 500)
			pipeline_feed(p, &def.st.hdr);
		mk_switch(&b, 2, ts += 10, (u64)i, 0, CORO_R_WAIT, 0x42);
		memcpy(&out_sw.sw, &b.sw, sizeof(out_sw.sw));
		out_sw.sw.hdr.size = sizeof(out_sw);
		out_sw.ref.id = sid;
		out_sw.ref.how = CORO_STACK_CAPTURE_ID;
		pipeline_feed(p, &out_sw.sw.hdr);
		pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, (u64)i, 0, 0));
		pipeline_feed(p, mk_exit(&b, 2, ts += 10, (u64)i, (u64)i, 0));
		pipeline_feed(p, mk_switch(&b, 2, ts += 10, (u64)i, 0, CORO_R_DONE, 0));
	}
	pipeline_feed(p, mk_proc_exit(&b, ts += 10, 0));
	pf_run_close(&r);
	perfetto_intern_max = PERFETTO_INTERN_MAX;
	snprintf(cmd, sizeof(cmd),
		 "python3 -c \"import sys; sys.path.insert(0, 'tests/perfetto'); import check; "
		 "t = check.check('%s'); cs = [e[3]['_callstack'] for e in t.events if "
		 "'_callstack' in e[3]]; restarts = sum(1 for p in t.packets[1:] if "
		 "check.one(p, 'sequence_flags', 0) & 1); "
		 "assert len(cs) == %d, len(cs); assert cs[-1] == [('0x%x', None, None)], cs[-1]; "
		 "assert restarts >= 3, restarts\"",
		 r.path, n, 0x100000 + (n - 1) % 500 + 1);
	CHECK_EQ(system(cmd), 0);
	pf_run_cleanup(&r);
}

/*
 * Coroutines still alive when the trace ends, in different states: each
 * end instant names its own state. (Their names were once formatted into
 * one buffer and interned by its address: every one after the first took
 * the first one's name.)
 */
TEST(trace_end_names_each_state)
{
	struct pf_run r;
	struct pipeline *p = &r.p;
	char *dump;
	union rec_buf b;
	u64 ts = 1000;

	if (!pf_run_open(&r, "end.pftrace", PERFETTO_DEFAULT_MAX_TRACKS))
		return;
	pipeline_feed(p, mk_process(&b, ts, CORO_PROC_LAUNCHED));
	/* 1 parks waiting, 2 is made ready but never runs again, 3 is left running. */
	for (u64 id = 1; id <= 3; id++)
		pipeline_feed(p, mk_create(&b, 2, ts += 10, 0, id, 0));
	pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, 1, 0, 0));
	pipeline_feed(p, mk_switch(&b, 2, ts += 10, 1, 0, CORO_R_WAIT, 0x42));
	pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, 2, 0, 0));
	pipeline_feed(p, mk_switch(&b, 2, ts += 10, 2, 0, CORO_R_YIELD, 0));
	pipeline_feed(p, mk_switch(&b, 2, ts += 10, 0, 3, 0, 0));
	pf_run_close(&r);
	dump = pf_run_dump(&r);
	CHECK(dump != NULL);
	if (dump) {
		CHECK_CONTAINS(dump, "trace end: suspended");
		CHECK_CONTAINS(dump, "trace end: runnable");
		CHECK_CONTAINS(dump, "trace end: running");
		free(dump);
	}
	pf_run_cleanup(&r);
}

/*
 * The capture summary at its largest: every counter of the table non-zero,
 * stacks lost, a damaged capture. track_event() keeps PF_MAX_ARGS arguments;
 * a counter added past that room would push the last ones out, and fails here.
 */
TEST(capture_summary_names_every_counter)
{
	struct pf_run r;
	struct pipeline *p = &r.p;
	struct coro_rec_stats st;
	union rec_buf b;
	char want[200], *dump, *summary;

	if (!pf_run_open(&r, "counters.pftrace", PERFETTO_DEFAULT_MAX_TRACKS))
		return;
	pipeline_feed(p, mk_process(&b, 1000, CORO_PROC_LAUNCHED));
	hdr_fill(&st.hdr, sizeof(st), CORO_REC_STATS, 0, 1100, 0);
	st.hdr.pid = 0;
	for (u32 k = 0; k < CORO_STAT_MAX; k++)
		st.bpf[k] = 1000 + k;
	for (u32 k = 0; k < CORO_USTAT_MAX; k++)
		st.user[k] = 2000 + k;
	pipeline_feed(p, &st.hdr);
	p->model.input_error = "at byte 42: a test";
	pf_run_close(&r);
	dump = pf_run_dump(&r);
	summary = dump ? strstr(dump, "capture summary") : NULL;
	CHECK(summary != NULL);
	if (summary) {
		*strchrnul(summary, '\n') = 0;
		for_each_counter(c) {
			u64 *v = counter_stat(c, st.bpf, st.user);

			if (!c->perfetto)
				continue;
			if (v)
				snprintf(want, sizeof(want), " %s=%llu", c->perfetto,
					 (unsigned long long)*v);
			else
				snprintf(want, sizeof(want), " %s=", c->perfetto);
			CHECK_CONTAINS(summary, want);
		}
		CHECK_CONTAINS(summary, " samples=0");
		CHECK_CONTAINS(summary, " end=none");
		CHECK_CONTAINS(summary, " capture damaged=at byte 42: a test");
	}
	free(dump);
	pf_run_cleanup(&r);
}

TEST(interning_restarts)
{
	/* 5000 coroutines' names overflow this; the default is larger. */
	perfetto_intern_max = 4096;
	many_names(100000);
	many_names(0);
	perfetto_intern_max = PERFETTO_INTERN_MAX;
}

int main(void)
{
	RUN(pb_nested_lengths);
	RUN(interning_restarts);
	RUN(trace_end_names_each_state);
	RUN(capture_summary_names_every_counter);
	RUN(callstacks_across_interning_restarts);
	RUN(golden_tracks);
	RUN(golden_packed_lanes);
	return unit_done();
}
