// SPDX-License-Identifier: MIT
/*
 * spans: span workloads for the span tests (suite_23_spans.py), with the
 * true duration of every span measured by the program itself.
 *
 *     spans TRUTH_FILE
 *
 * On two worker threads, at once:
 *   - "tx": span "transaction" held across a 300 ms co_sleep_us(), with a
 *     nested span "tx.step" (about 2 ms of work) inside it, before the sleep;
 *   - "queries": 1000 spans "query", each a few to a few tens of
 *     microseconds of work, no suspension;
 *   - "migrant": span "migrate" held across 10 sleeps of 1 ms; after each,
 *     the coroutine may resume on the other worker (the threads it ran on
 *     inside the span are in the truth file);
 *   - "leaver": opens span "orphan", sleeps 150 ms and exits inside it.
 *
 * The truth file: one JSON object a line per span the program closed,
 *     {"name":"query","dur_ns":12345,"depth":1,"tids":[101]}
 * dur_ns from a CLOCK_BOOTTIME reading just before span_begin to one just
 * after span_end (corobpf's clock; its own duration, probe to probe, lies
 * inside), tids the threads the coroutine ran on inside it; then
 *     {"unclosed":"orphan"}
 * for the span left open. Prints "DONE" at the end.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "corosched.h"

#define NQUERIES 1000

static FILE *truth;
static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void work_us(unsigned us)
{
	uint64_t end = now_ns() + us * 1000ULL;
	volatile uint64_t x = 0;

	while (now_ns() < end)
		x++;
}

static void record(const char *name, uint64_t dur, int depth, const pid_t *tids, int ntids)
{
	pthread_mutex_lock(&truth_lock);
	fprintf(truth, "{\"name\":\"%s\",\"dur_ns\":%" PRIu64 ",\"depth\":%d,\"tids\":[", name,
		dur, depth);
	for (int i = 0; i < ntids; i++)
		fprintf(truth, "%s%d", i ? "," : "", (int)tids[i]);
	fprintf(truth, "]}\n");
	pthread_mutex_unlock(&truth_lock);
}

static int tx(void *arg)
{
	uint64_t t0, t1, s0, s1;
	pid_t tid = gettid();

	(void)arg;
	t0 = now_ns();
	co_span_begin("transaction");
	s0 = now_ns();
	co_span_begin("tx.step");
	work_us(2000);
	co_span_end("tx.step");
	s1 = now_ns();
	co_sleep_us(300000);
	co_span_end("transaction");
	t1 = now_ns();
	record("tx.step", s1 - s0, 2, &tid, 1);
	tid = gettid();
	record("transaction", t1 - t0, 1, &tid, 1); /* threads: not asserted for it */
	return 0;
}

static int queries(void *arg)
{
	(void)arg;
	for (int i = 0; i < NQUERIES; i++) {
		pid_t tid = gettid();
		uint64_t t0 = now_ns(), t1;

		co_span_begin("query");
		/* 2..50 us, spread so the percentiles are apart. */
		work_us(2 + (unsigned)(i * 7919 % 49));
		co_span_end("query");
		t1 = now_ns();
		record("query", t1 - t0, 1, &tid, 1);
		if (i % 50 == 49)
			co_yield();
	}
	return 0;
}

static int migrant(void *arg)
{
	pid_t tids[32];
	int ntids = 0;
	uint64_t t0, t1;

	(void)arg;
	t0 = now_ns();
	co_span_begin("migrate");
	for (int i = 0; i < 10; i++) {
		pid_t t = gettid();

		if (!ntids || tids[ntids - 1] != t)
			tids[ntids++] = t;
		work_us(200);
		co_sleep_us(1000);
	}
	if (tids[ntids - 1] != gettid())
		tids[ntids++] = gettid();
	co_span_end("migrate");
	t1 = now_ns();
	record("migrate", t1 - t0, 1, tids, ntids);
	return 0;
}

static int leaver(void *arg)
{
	(void)arg;
	co_span_begin("orphan");
	co_sleep_us(150000);
	pthread_mutex_lock(&truth_lock);
	fprintf(truth, "{\"unclosed\":\"orphan\"}\n");
	pthread_mutex_unlock(&truth_lock);
	return 0; /* inside its span */
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: spans TRUTH_FILE\n");
		return 2;
	}
	truth = fopen(argv[1], "w");
	if (!truth) {
		perror(argv[1]);
		return 1;
	}
	if (sched_start(2)) {
		fprintf(stderr, "spans: sched_start failed\n");
		return 1;
	}
	co_spawn(tx, NULL, "tx");
	co_spawn(queries, NULL, "queries");
	co_spawn(migrant, NULL, "migrant");
	co_spawn(leaver, NULL, "leaver");
	sched_stop();
	fclose(truth);
	printf("DONE\n");
	return 0;
}
