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

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, n + 1);
	if (fread(buf, 1, n, f) != (size_t)n)
		n = 0;
	fclose(f);
	return buf;
}

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
	got = slurp(text);
	if (getenv("UPDATE_GOLDEN")) {
		FILE *f = fopen(gold, "wb");

		fputs(got ? got : "", f);
		fclose(f);
	}
	want = slurp(gold);
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

int main(void)
{
	RUN(golden_tracks);
	RUN(golden_packed_lanes);
	return unit_done();
}
