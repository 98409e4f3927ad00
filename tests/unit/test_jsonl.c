// SPDX-License-Identifier: MIT
/*
 * The JSONL writer: a small synthetic stream against a golden file
 * (tests/unit/golden/basic.jsonl; UPDATE_GOLDEN=1 rewrites it), escaping of
 * hostile names, and the hash map and JSON helpers underneath.
 */
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include "unit.h"
#include "stream.h"
#include "jsonl.h"
#include "output.h"

TEST(golden_basic)
{
	char tmp[] = "/tmp/corobpf-test-jsonl-XXXXXX";
	char path[300];
	const char *golden = "tests/unit/golden/basic.jsonl";
	char *got, *want;

	if (!mkdtemp(tmp))
		return;
	snprintf(path, sizeof(path), "%s/basic.jsonl", tmp);
	write_basic(path, -1);
	got = unit_slurp(path);
	CHECK(got != NULL);
	if (getenv("UPDATE_GOLDEN")) {
		FILE *f = fopen(golden, "wb");

		fputs(got, f);
		fclose(f);
	}
	want = unit_slurp(golden);
	CHECK(want != NULL);
	if (got && want && strcmp(got, want)) {
		unit_failed_checks++;
		fprintf(stderr, "%s differs from %s:\n%s\n(diff %s %s; UPDATE_GOLDEN=1 rewrites)\n",
			path, golden, got, path, golden);
	} else {
		unlink(path);
		rmdir(tmp);
	}
	/* The pieces a reader relies on, independent of the golden file. */
	CHECK_CONTAINS(got, "\"id\":\"0xdeadbeefcafef00d\"");
	CHECK_CONTAINS(got, "\"name\":\"say \\\"hi\\\"\\\\\\n\\u0001\\ufffd\"");
	CHECK_CONTAINS(got, "{\"type\":\"lost\",\"ts\":1400,\"pid\":100,\"tid\":2,\"count\":2,\"id\":\"0x0\"}");
	CHECK_CONTAINS(got, "\"status\":-125");
	CHECK_CONTAINS(got, "\"exit_code\":3");
	CHECK_CONTAINS(got, "\"start_time\":\"2023-11-14T22:13:20.000001000Z\"");
	free(got);
	free(want);
}

TEST(existing_output_needs_force)
{
	char tmp[] = "/tmp/corobpf-test-out-XXXXXX";
	char path[300], err[256];
	struct outfile f;

	if (!mkdtemp(tmp))
		return;
	snprintf(path, sizeof(path), "%s/x.jsonl", tmp);
	close(open(path, O_WRONLY | O_CREAT, 0644));
	CHECK(outfile_open(&f, path, false, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "--force");
	CHECK_EQ(outfile_open(&f, path, true, err, sizeof(err)), 0);
	/* Not under its name until committed. */
	CHECK(write(f.fd, "new", 3) == 3);
	{
		char *old = unit_slurp(path);

		CHECK_STR(old, "");
		free(old);
	}
	CHECK_EQ(outfile_commit(&f, err, sizeof(err)), 0);
	{
		char *now = unit_slurp(path);

		CHECK_STR(now, "new");
		free(now);
	}
	snprintf(path, sizeof(path), "%s/nodir/x.jsonl", tmp);
	CHECK(outfile_open(&f, path, false, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "cannot create");
	snprintf(path, sizeof(path), "rm -rf %s", tmp);
	CHECK_EQ(system(path), 0);
}

TEST(hmap_matches_a_reference)
{
	enum { N = 5000 };
	static u64 keys[N];
	static bool present[N];
	struct hmap m;
	u64 seed = 42;

	hmap_init(&m);
	for (int i = 0; i < N; i++)
		keys[i] = (u64)i * 0x10000; /* pointer-like ids, many colliding low bits */
	for (int round = 0; round < 200000; round++) {
		int i;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		i = (seed >> 33) % N;
		if ((seed >> 20) & 1) {
			hmap_put(&m, 7, keys[i], &present[i]);
			present[i] = true;
		} else {
			void *v = hmap_del(&m, 7, keys[i]);

			CHECK((v != NULL) == present[i]);
			present[i] = false;
		}
	}
	{
		size_t n = 0;

		for (int i = 0; i < N; i++) {
			CHECK((hmap_get(&m, 7, keys[i]) != NULL) == present[i]);
			CHECK(hmap_get(&m, 8, keys[i]) == NULL);
			n += present[i];
		}
		CHECK_EQ(m.len, n);
	}
	hmap_free(&m);
}

/*
 * A finding's line carries the fields its kind fills (finding.h's table),
 * those its values allow, and no other kind's: every value set, each kind
 * in turn.
 */
TEST(finding_fields_follow_the_table)
{
	static const struct {
		u32 field;
		const char *key;
	} keys[] = {
		{FF_STATE, "\"state\""},
		{FF_WAIT | FF_CAUSE_WAIT, "\"obj\""},
		{FF_AWAITER, "\"awaiter\""},
		{FF_SPAN, "\"span\""},
		{FF_SLOW, "\"cause\""},
		{FF_STORM, "\"peak_per_s\""},
		{FF_SAMPLES, "\"samples\""},
		{FF_KEY, "\"key_frame\""},
	};

	for (int k = 0; k < FK_NKINDS; k++) {
		struct finding f = {.kind = k, .pid = 1, .id = 2, .uid = 3, .state = CS_SUSPENDED,
				    .reason = CORO_R_WAIT, .obj = 4, .has_waker = true, .waker = 5,
				    .count = 6, .peak = 7, .samples = 8, .samples_kept = 8,
				    .has_key = true, .cause = SPAN_CAUSE_SUSPENDED};
		u32 have, fields = finding_kinds[k].fields;
		char text[4096];
		struct obuf o;
		FILE *tmp = tmpfile();
		size_t len;

		strcpy(f.awaiter, "Awaiter");
		strcpy(f.span, "span");
		strcpy(f.key_frame, "main+0x1");
		have = finding_fields(&f);
		CHECK(finding_kind_name(k)[0] != '?');
		CHECK_EQ(have & ~fields, 0);
		obuf_open_fd(&o, fileno(tmp), false);
		jsonl_write_finding(&o, &f, true);
		obuf_close(&o);
		rewind(tmp);
		len = fread(text, 1, sizeof(text) - 1, tmp);
		text[len] = 0;
		fclose(tmp);
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			CHECK_EQ(strstr(text, keys[i].key) != NULL, (have & keys[i].field) != 0);
		/* A waker its kind has: given, or null when not known. */
		CHECK_EQ(strstr(text, "\"waker\":\"0x5\"") != NULL, (fields & FF_WAKER) != 0);
	}
}

int main(void)
{
	RUN(golden_basic);
	RUN(finding_fields_follow_the_table);
	RUN(existing_output_needs_force);
	RUN(hmap_matches_a_reference);
	return unit_done();
}
