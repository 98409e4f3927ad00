// SPDX-License-Identifier: MIT
/*
 * The queue between the reader and the model thread (user/session/modelq.c): every record
 * reaches the inner sink once, whole and in order, on the model thread, whether it waited in
 * memory, in the temporary file, or made the reader wait; flushes are the model thread's and
 * their errors come back to the reader. Built with ThreadSanitizer too (make tsan-test).
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include "log.h"
#include "modelq.h"
#include "unit.h"

struct inner {
	pthread_t reader; /* records must not be handed over on it */
	u64 next;	  /* the sequence number expected next */
	u64 bad;	  /* records out of order, damaged, or on the reader's thread */
	u64 got;
	u32 slow_every;	  /* sleep 1 ms every so many records (a model slower than the reader) */
	int flush_err;	  /* what flush returns */
	u64 flushes, ticks;
};

/* A record of `size` bytes whose payload repeats its sequence number. */
struct rec {
	struct coro_event_hdr h;
	u64 seq[];
};

static void inner_emit(void *ctx, const struct coro_event_hdr *h)
{
	struct inner *in = ctx;
	const struct rec *r = (const void *)h;
	u32 words = (h->size - sizeof(*h)) / 8;

	if (pthread_equal(pthread_self(), in->reader) || h->ts != in->next)
		in->bad++;
	for (u32 i = 0; i < words; i++)
		if (r->seq[i] != h->ts)
			in->bad++;
	in->next = h->ts + 1;
	in->got++;
	if (in->slow_every && in->got % in->slow_every == 0)
		usleep(1000);
}

static int inner_flush(void *ctx)
{
	struct inner *in = ctx;

	in->flushes++;
	return in->flush_err;
}

static void inner_tick(void *ctx)
{
	struct inner *in = ctx;

	in->ticks++;
}

/* n records of varied sizes (32 to 32 + 8 * 300 bytes) through a queue of mem MiB. */
static struct modelq_stats pump(struct inner *in, u64 n, u64 mem, int *finish_ret)
{
	struct record_sink inner = {.emit = inner_emit, .flush = inner_flush, .ctx = in};
	union {
		struct rec r;
		u8 bytes[sizeof(struct coro_event_hdr) + 8 * 300];
	} buf;
	struct modelq_stats st;
	struct record_sink s;
	struct modelq *q;
	char err[256];

	in->reader = pthread_self();
	q = modelq_new(mem << 20, err, sizeof(err));
	CHECK(q != NULL);
	modelq_begin(q, inner, inner_tick, in);
	s = modelq_sink(q);
	for (u64 i = 0; i < n; i++) {
		u32 words = (u32)(i * 7919 % 301);

		memset(&buf.r.h, 0, sizeof(buf.r.h));
		buf.r.h.size = (u16)(sizeof(buf.r.h) + 8 * words);
		buf.r.h.kind = CORO_EV_READY;
		buf.r.h.ts = i;
		for (u32 w = 0; w < words; w++)
			buf.r.seq[w] = i;
		s.emit(s.ctx, &buf.r.h);
		if (i % 100000 == 0)
			s.idle(s.ctx);
	}
	*finish_ret = modelq_finish(q);
	modelq_stats(q, &st);
	modelq_free(q);
	return st;
}

TEST(modelq_every_record_once_in_order_on_the_model_thread)
{
	struct inner in = {0};
	int ret;
	struct modelq_stats st = pump(&in, 300000, 16, &ret);

	CHECK_EQ(ret, 0);
	CHECK_EQ(in.got, 300000);
	CHECK_EQ(in.bad, 0);
	CHECK_EQ(st.records, 300000);
}

TEST(modelq_spills_to_its_file_and_reads_back)
{
	/* 2 MiB of memory, ~400 MiB of records, a model thread that lags: most wait in the file. */
	struct inner in = {.slow_every = 20000};
	int ret;
	struct modelq_stats st;

	setenv("TMPDIR", "/tmp", 1);
	st = pump(&in, 3000000, 2, &ret);
	CHECK_EQ(in.got, 3000000);
	CHECK_EQ(in.bad, 0);
	CHECK(st.spilled > 0);
	CHECK_EQ(st.spill_errno, 0);
	CHECK_EQ(st.waits, 0);
}

TEST(modelq_without_a_file_the_reader_waits)
{
	/* No directory for the file: memory full, the reader waits, nothing is dropped. */
	struct inner in = {.slow_every = 20000};
	int ret;
	struct modelq_stats st;

	setenv("TMPDIR", "/nonexistent-corobpf-test-dir", 1);
	st = pump(&in, 1000000, 2, &ret);
	unsetenv("TMPDIR");
	CHECK_EQ(in.got, 1000000);
	CHECK_EQ(in.bad, 0);
	CHECK_EQ(st.spilled, 0);
	CHECK(st.spill_errno != 0);
	CHECK(st.waits > 0);
}

TEST(modelq_flush_error_comes_back_to_the_reader)
{
	struct inner in = {.flush_err = -ENOSPC};
	struct record_sink inner = {.emit = inner_emit, .flush = inner_flush, .ctx = &in};
	struct coro_event_hdr h = {.size = sizeof(h), .kind = CORO_EV_READY};
	struct record_sink s;
	struct modelq *q;
	char err[256];
	int got = 0;

	in.reader = pthread_self();
	q = modelq_new(4 << 20, err, sizeof(err));
	modelq_begin(q, inner, inner_tick, &in);
	s = modelq_sink(q);
	s.emit(s.ctx, &h);
	/* The first flush asks; a later one returns what the model thread's flush said. */
	for (int i = 0; i < 2000 && !got; i++) {
		got = s.flush(s.ctx);
		usleep(1000);
	}
	CHECK_EQ(got, -ENOSPC);
	CHECK_EQ(modelq_finish(q), -ENOSPC);
	CHECK(in.ticks >= 1);
	CHECK_EQ(in.got, 1);
	modelq_free(q);
}

TEST(modelq_freed_unfinished_stops_its_thread)
{
	/* An abort: the queue freed with records queued and its thread running. */
	struct inner in = {.slow_every = 1000};
	struct record_sink inner = {.emit = inner_emit, .ctx = &in};
	struct coro_event_hdr h = {.size = sizeof(h), .kind = CORO_EV_READY};
	struct record_sink s;
	struct modelq *q;
	char err[256];

	in.reader = pthread_self();
	q = modelq_new(4 << 20, err, sizeof(err));
	modelq_begin(q, inner, NULL, NULL);
	s = modelq_sink(q);
	for (u64 i = 0; i < 200000; i++) {
		h.ts = i;
		s.emit(s.ctx, &h);
	}
	s.idle(s.ctx);
	modelq_free(q);
	CHECK(in.got <= 200000);
	CHECK_EQ(in.bad, 0);
}

TEST(modelq_freed_before_it_began)
{
	/* The capture could not attach: the queue freed before any record, its thread stopped. */
	char err[256];
	struct modelq *q = modelq_new(4 << 20, err, sizeof(err));

	CHECK(q != NULL);
	modelq_free(q);
}

int main(void)
{
	log_level = LOG_QUIET;
	RUN(modelq_every_record_once_in_order_on_the_model_thread);
	RUN(modelq_spills_to_its_file_and_reads_back);
	RUN(modelq_without_a_file_the_reader_waits);
	RUN(modelq_flush_error_comes_back_to_the_reader);
	RUN(modelq_freed_unfinished_stops_its_thread);
	RUN(modelq_freed_before_it_began);
	return unit_done();
}
