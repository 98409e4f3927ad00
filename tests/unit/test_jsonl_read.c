// SPDX-License-Identifier: MIT
/* Reading JSONL back: the golden stream round trip, and hostile input. */
#include <unistd.h>
#include "unit.h"
#include "stream.h"
#include "jsonl_read.h"

static char dir[] = "/tmp/corobpf-test-jr-XXXXXX";

/* The "type":"event" and "lost" lines of a JSONL file, concatenated. */
static char *event_lines(const char *path)
{
	char *all = unit_slurp(path), *out = calloc(1, all ? strlen(all) + 1 : 1), *line, *save;

	for (line = all ? strtok_r(all, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "\"type\":\"event\"") || strstr(line, "\"type\":\"lost\"")) {
			strcat(out, line);
			strcat(out, "\n");
		}
	free(all);
	return out;
}

TEST(round_trip_keeps_every_event)
{
	char a[300], b[300], err[512];
	struct capture_info ci;
	struct jsonl_reader *r;
	struct output out;
	struct pipeline p;
	const struct coro_event_hdr *h;
	char *ea, *eb;
	int ret;

	snprintf(a, sizeof(a), "%s/a.jsonl", dir);
	snprintf(b, sizeof(b), "%s/b.jsonl", dir);
	write_basic(a, -1);
	CHECK(jsonl_file_looks_like(a));
	r = jsonl_reader_open(a, &ci, err, sizeof(err));
	CHECK(r != NULL);
	if (!r)
		return;
	CHECK_EQ(ci.npids, 1);
	CHECK_EQ(ci.pids[0], TPID);
	CHECK_EQ(ci.start_ts, 1000);
	CHECK_EQ(output_open(&out, b, OUT_AUTO, true, err, sizeof(err)), 0);
	pipeline_init(&p, &ci, NULL);
	CHECK_EQ(output_attach(&out, &p, err, sizeof(err)), 0);
	pipeline_begin(&p);
	while ((ret = jsonl_reader_next(r, &h)) == 1)
		pipeline_feed(&p, h);
	/* The golden stream has no trailer from a live run: it ends without one. */
	CHECK_EQ(ret, 0);
	pipeline_finish(&p);
	CHECK_EQ(output_close(&out, err, sizeof(err)), 0);
	pipeline_free(&p);
	jsonl_reader_close(r);
	capture_info_free(&ci);
	ea = event_lines(a);
	eb = event_lines(b);
	/*
	 * An invalid byte was written as the escape \ufffd; read back, it is the
	 * character U+FFFD, which is written as itself: the same JSON string.
	 */
	for (char *q; ea && (q = strstr(ea, "\\ufffd"));)
		memmove(q + 3, q + 6, strlen(q + 6) + 1), memcpy(q, "\xef\xbf\xbd", 3);
	CHECK(ea && eb && strlen(ea) > 100);
	CHECK_STR(eb, ea);
	free(ea);
	free(eb);
}

/* A file with a valid header and then `body`: the reader's verdict and message. */
static int read_body(const char *body, char *err, size_t errlen)
{
	char path[300];
	FILE *f;
	struct capture_info ci;
	struct jsonl_reader *r;
	const struct coro_event_hdr *h;
	int ret, n = 0;

	snprintf(path, sizeof(path), "%s/x.jsonl", dir);
	f = fopen(path, "w");
	fputs("{\"type\":\"header\",\"schema\":1,\"start_ts\":5,\"pids\":[7,8]}\n", f);
	fputs(body, f);
	fclose(f);
	r = jsonl_reader_open(path, &ci, err, errlen);
	if (!r)
		return -2;
	while ((ret = jsonl_reader_next(r, &h)) == 1)
		n++;
	snprintf(err, errlen, "%s", jsonl_reader_error(r));
	jsonl_reader_close(r);
	capture_info_free(&ci);
	return ret < 0 ? -1 : n;
}

TEST(hostile_lines_are_errors_with_their_line)
{
	static const char *bad[] = {
		"{\"type\":\"event\",\"ev\":\"create\",\"id\":\"0x1\"",	     /* cut */
		"{\"type\":\"event\",\"ev\":\"name\",\"id\":\"0x1\",\"name\":\"\\x41\"}", /* bad escape */
		"{\"type\":\"event\",\"ev\":\"name\",\"id\":\"0x1\",\"name\":\"\\u12\"}",   /* short \\u */
		"{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":1}}}}}}",	     /* too deep */
		"[1,2,3]",						     /* not an object */
		"{\"type\":\"event\",\"ev\":\"create\"}",		     /* fields missing */
		"{\"type\":\"event\",\"ev\":\"switch\",\"from\":\"0xzz\",\"to\":\"0x1\"}",
		"{\"type\":\"lost\"} trailing",
		"{\"type\":1e999999}",
	};
	char err[512];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char body[512];

		snprintf(body, sizeof(body), "{\"type\":\"thread\",\"pid\":7,\"tid\":7}\n%s\n", bad[i]);
		CHECK_EQ(read_body(body, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "line 3");
	}
	/* Surrogate pairs and lone surrogates decode; huge counters keep their bits. */
	CHECK_EQ(read_body("{\"type\":\"event\",\"ev\":\"name\",\"pid\":7,\"tid\":7,\"id\":\"0x1\","
			   "\"name\":\"\\ud83d\\ude00 \\udc00\"}\n"
			   "{\"type\":\"trailer\",\"last_ts\":18446744073709551615,"
			   "\"end_reason\":\"signal\",\"lost\":{\"events\":3}}\n",
			   err, sizeof(err)),
		 3); /* name, stats, end */
	/* No trailer: an error after the records, which are kept. */
	CHECK_EQ(read_body("{\"type\":\"thread\",\"pid\":7,\"tid\":7}\n", err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "without its trailer");
	/* Not JSONL at all, or another schema. */
	{
		char path[300];
		FILE *f;
		struct capture_info ci;

		snprintf(path, sizeof(path), "%s/y.jsonl", dir);
		f = fopen(path, "w");
		fputs("{\"type\":\"header\",\"schema\":2}\n", f);
		fclose(f);
		CHECK(jsonl_reader_open(path, &ci, err, sizeof(err)) == NULL);
		CHECK_CONTAINS(err, "schema 2");
	}
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(round_trip_keeps_every_event);
	RUN(hostile_lines_are_errors_with_their_line);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			return 1;
	}
	return unit_done();
}
