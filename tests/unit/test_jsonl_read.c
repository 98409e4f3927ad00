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
	CHECK_EQ(output_open(&out, b, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
	pipeline_init(&p, &ci, NULL);
	CHECK_EQ(pipeline_add_output(&p, &out, err, sizeof(err)), 0);
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

/* Names made in user space longer than a name field: written whole, read back the same. */
TEST(long_names_round_trip)
{
	char a[300], b[300], err[512], name100[101], name300[301];
	struct capture_info ci = {0}, ci2;
	u32 pids[1] = {TPID};
	struct jsonl_reader *r;
	const struct coro_event_hdr *h;
	struct output out;
	struct pipeline p;
	union rec_buf rb;
	char *ea, *eb, *all;
	int ret;

	memset(name100, 'a', 100);
	name100[100] = 0;
	for (int i = 0; i < 300; i++)
		name300[i] = (char)('a' + i % 26);
	name300[300] = 0;
	snprintf(a, sizeof(a), "%s/long-a.jsonl", dir);
	snprintf(b, sizeof(b), "%s/long-b.jsonl", dir);
	ci.version = 1;
	ci.start_ts = 1000;
	ci.npids = 1;
	ci.pids = pids;
	CHECK_EQ(output_open(&out, a, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
	pipeline_init(&p, &ci, NULL);
	pipeline_add_output(&p, &out, err, sizeof(err));
	pipeline_begin(&p);
	pipeline_feed(&p, mk_process(&rb, 1000, CORO_PROC_LAUNCHED));
	pipeline_feed(&p, mk_create(&rb, 2, 1100, 0, 7, 0));
	mk_name(&rb, 2, 1110, 0, 7, "");
	coro_name_record(&rb.name, name100);
	pipeline_feed(&p, &rb.hdr);
	pipeline_feed(&p, mk_create(&rb, 2, 1200, 0, 8, 0));
	mk_name(&rb, 2, 1210, 0, 8, "");
	coro_name_record(&rb.name, name300);
	CHECK(rb.hdr.flags & CORO_EVF_STR_TRUNCATED);
	pipeline_feed(&p, &rb.hdr);
	pipeline_finish(&p);
	CHECK_EQ(output_close(&out, err, sizeof(err)), 0);
	pipeline_free(&p);

	/* Whole in the events and in the coroutines' lines: 100 bytes, and 255 of 300, cut. */
	all = unit_slurp(a);
	name300[255] = '"';
	name300[256] = 0;
	CHECK(all && strstr(all, name100));
	CHECK(all && strstr(all, name300));
	CHECK(all && strstr(all, "\"name_truncated\":true"));
	free(all);

	r = jsonl_reader_open(a, &ci2, err, sizeof(err));
	CHECK(r != NULL);
	if (!r)
		return;
	CHECK_EQ(output_open(&out, b, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
	pipeline_init(&p, &ci2, NULL);
	CHECK_EQ(pipeline_add_output(&p, &out, err, sizeof(err)), 0);
	pipeline_begin(&p);
	while ((ret = jsonl_reader_next(r, &h)) == 1)
		pipeline_feed(&p, h);
	CHECK_EQ(ret, 0);
	pipeline_finish(&p);
	CHECK_EQ(output_close(&out, err, sizeof(err)), 0);
	pipeline_free(&p);
	jsonl_reader_close(r);
	capture_info_free(&ci2);
	ea = event_lines(a);
	eb = event_lines(b);
	CHECK(ea && eb && strstr(ea, name300));
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

static void unknown_of_0x1(void *ctx, const struct coro *c)
{
	if (c->id == 0x1)
		*(u64 *)ctx = c->t_state[CS_UNKNOWN];
}

/* A file with a valid header and then `body`, read through the model: what it counted. */
static int model_of_body(const char *body, struct model_anomalies *anom, u64 *unknown_ns)
{
	struct model_observer obs = {.ctx = unknown_ns, .coroutine_end = unknown_of_0x1};
	char path[300], err[512];
	FILE *f;
	struct capture_info ci;
	struct jsonl_reader *r;
	struct pipeline p;
	const struct coro_event_hdr *h;
	int ret;

	snprintf(path, sizeof(path), "%s/m.jsonl", dir);
	f = fopen(path, "w");
	fputs("{\"type\":\"header\",\"schema\":1,\"start_ts\":5,\"pids\":[7]}\n", f);
	fputs(body, f);
	fclose(f);
	r = jsonl_reader_open(path, &ci, err, sizeof(err));
	if (!r)
		return -2;
	*unknown_ns = 0;
	pipeline_init(&p, &ci, NULL);
	pipeline_add_observer(&p, &obs, NULL);
	pipeline_begin(&p);
	while ((ret = jsonl_reader_next(r, &h)) == 1)
		pipeline_feed(&p, h);
	pipeline_finish(&p);
	*anom = p.model.anom;
	pipeline_free(&p);
	jsonl_reader_close(r);
	capture_info_free(&ci);
	return ret;
}

#define PROC7 "{\"type\":\"process\",\"ts\":5,\"pid\":7,\"exe\":\"/x\",\"mode\":\"launched\"}\n"
#define RUN1 "{\"type\":\"event\",\"ev\":\"switch\",\"ts\":10,\"pid\":7,\"tid\":7," \
	     "\"from\":\"0x0\",\"to\":\"0x1\",\"reason\":\"unknown\",\"obj\":\"0x0\"}\n"
#define TRAILER "{\"type\":\"trailer\",\"last_ts\":100,\"end_reason\":\"signal\"," \
		"\"lost\":{\"events\":9}}\n"

TEST(holes_count_whatever_record_follows)
{
	struct model_anomalies a;
	u64 unknown;

	/*
	 * A JSONL written before `lost` had `id`: a hole before a create, whose
	 * line says nothing of what ran, is counted all the same, and the
	 * coroutine the thread ran is unknown from its previous record (ts 10).
	 */
	CHECK_EQ(model_of_body(PROC7 RUN1
			       "{\"type\":\"lost\",\"ts\":40,\"pid\":7,\"tid\":7,\"count\":4}\n"
			       "{\"type\":\"event\",\"ev\":\"create\",\"ts\":40,\"pid\":7,\"tid\":7,"
			       "\"id\":\"0x2\",\"parent\":\"0x1\"}\n" TRAILER,
			       &a, &unknown),
		 0);
	CHECK_EQ(a.lost_events, 4);
	CHECK_EQ(unknown, 90);
	/*
	 * A hole before a record of no line of its own (a sample) stands alone at
	 * its ts; with `id` the thread runs that coroutine from there on: unknown
	 * only from 10 to 40.
	 */
	CHECK_EQ(model_of_body(PROC7 RUN1
			       "{\"type\":\"lost\",\"ts\":40,\"pid\":7,\"tid\":7,\"count\":5,"
			       "\"id\":\"0x1\",\"alone\":true}\n"
			       "{\"type\":\"event\",\"ev\":\"exit\",\"ts\":60,\"pid\":7,\"tid\":7,"
			       "\"id\":\"0x1\",\"status\":0}\n" TRAILER,
			       &a, &unknown),
		 0);
	CHECK_EQ(a.lost_events, 5);
	CHECK_EQ(unknown, 30);
	/* A hole whose event line is of a kind this version does not read: counted still. */
	CHECK_EQ(model_of_body(PROC7 RUN1
			       "{\"type\":\"lost\",\"ts\":40,\"pid\":7,\"tid\":7,\"count\":6,"
			       "\"id\":\"0x1\"}\n"
			       "{\"type\":\"event\",\"ev\":\"from_the_future\",\"ts\":40,\"pid\":7,"
			       "\"tid\":7}\n" TRAILER,
			       &a, &unknown),
		 0);
	CHECK_EQ(a.lost_events, 6);
	CHECK_EQ(unknown, 30);
	/* An off-CPU stretch whose return went unseen says so, and is counted again. */
	CHECK_EQ(model_of_body(PROC7 RUN1
			       "{\"type\":\"event\",\"ev\":\"offcpu\",\"ts\":20,\"pid\":7,\"tid\":7,"
			       "\"id\":\"0x1\",\"dur\":5,\"state\":\"sleeping\",\"runq\":0,\"cpu\":0,"
			       "\"late\":true}\n" TRAILER,
			       &a, &unknown),
		 0);
	CHECK_EQ(a.offcpu_late, 1);
}

TEST(deep_stack_lines_are_read_past)
{
	/* 40 frames of 7 fields: objects in an array are not the line's own fields. */
	char *body = malloc(128 * 1024), *p = body, err[512];

	p += sprintf(p, "{\"type\":\"thread\",\"pid\":7,\"tid\":7}\n"
			"{\"type\":\"stack\",\"id\":3,\"pid\":7,\"frames\":[");
	for (int i = 0; i < 40; i++)
		p += sprintf(p, "%s{\"ip\":\"0x%x\",\"func\":\"f%d\",\"off\":1,\"obj\":\"/x\","
			     "\"rel\":\"0x1\",\"file\":\"x.c\",\"line\":%d}",
			     i ? "," : "", 0x1000 + i, i, i);
	sprintf(p, "]}\n" TRAILER);
	CHECK_EQ(read_body(body, err, sizeof(err)), 3); /* thread, stats, end */
	/* 127 frames of long C++ names: more text than a line keeps, none of it kept. */
	p = body + sprintf(body, "{\"type\":\"thread\",\"pid\":7,\"tid\":7}\n"
			   "{\"type\":\"stack\",\"id\":3,\"pid\":7,\"frames\":[");
	for (int i = 0; i < 127; i++)
		p += sprintf(p, "%s{\"ip\":\"0x%x\",\"func\":\"%0300d\"}", i ? "," : "",
			     0x1000 + i, i);
	sprintf(p, "]}\n" TRAILER);
	CHECK_EQ(read_body(body, err, sizeof(err)), 3);
	free(body);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	RUN(round_trip_keeps_every_event);
	RUN(long_names_round_trip);
	RUN(hostile_lines_are_errors_with_their_line);
	RUN(holes_count_whatever_record_follows);
	RUN(deep_stack_lines_are_read_past);
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			return 1;
	}
	return unit_done();
}
