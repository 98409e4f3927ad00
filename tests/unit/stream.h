/* SPDX-License-Identifier: MIT */
/*
 * Synthetic record streams for unit tests: build records as the BPF side and
 * the capture layer would, and collect what the model hands its observers.
 */
#ifndef COROBPF_TEST_STREAM_H
#define COROBPF_TEST_STREAM_H

#include <string.h>
#include "kinds.h"
#include "model.h"
#include "pipeline.h"
#include "raw.h"

#define TPID 100

static inline void hdr_fill(struct coro_event_hdr *h, size_t size, unsigned kind, u32 tid, u64 ts,
			    u64 cur)
{
	memset(h, 0, size);
	h->size = size;
	h->kind = kind;
	h->pid = TPID;
	h->tid = tid;
	h->ts = ts;
	h->cur = cur;
}

/* Records are built into this buffer; feed() consumes them immediately. */
union rec_buf {
	struct coro_event_hdr hdr;
	struct coro_ev_create create;
	struct coro_ev_name name;
	struct coro_ev_ready ready;
	struct coro_ev_switch sw;
	struct coro_ev_exit exit;
	struct coro_ev_span span;
	struct coro_rec_thread thread;
	struct coro_rec_proc_exit pexit;
	struct coro_rec_end end;
	struct coro_ev_offcpu_begin offb;
	struct coro_ev_offcpu_end offe;
	char raw[512];
};

static inline struct coro_event_hdr *mk_create(union rec_buf *b, u32 tid, u64 ts, u64 cur, u64 id,
					       u64 parent)
{
	hdr_fill(&b->hdr, sizeof(b->create), CORO_EV_CREATE, tid, ts, cur);
	b->create.id = id;
	b->create.parent = parent;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_name(union rec_buf *b, u32 tid, u64 ts, u64 cur, u64 id,
					     const char *name)
{
	hdr_fill(&b->hdr, sizeof(b->name), CORO_EV_NAME, tid, ts, cur);
	b->name.id = id;
	strncpy(b->name.name, name, CORO_STR_LEN - 1);
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_ready(union rec_buf *b, u32 tid, u64 ts, u64 cur, u64 id)
{
	hdr_fill(&b->hdr, sizeof(b->ready), CORO_EV_READY, tid, ts, cur);
	b->ready.id = id;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_switch(union rec_buf *b, u32 tid, u64 ts, u64 from, u64 to,
					       u32 reason, u64 obj)
{
	hdr_fill(&b->hdr, sizeof(b->sw), CORO_EV_SWITCH, tid, ts, from);
	b->sw.from = from;
	b->sw.to = to;
	b->sw.reason = reason;
	b->sw.obj = obj;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_exit(union rec_buf *b, u32 tid, u64 ts, u64 cur, u64 id,
					     s64 status)
{
	hdr_fill(&b->hdr, sizeof(b->exit), CORO_EV_EXIT, tid, ts, cur);
	b->exit.id = id;
	b->exit.status = status;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_span(union rec_buf *b, bool begin, u32 tid, u64 ts,
					     u64 cur, const char *name)
{
	hdr_fill(&b->hdr, sizeof(b->span), begin ? CORO_EV_SPAN_BEGIN : CORO_EV_SPAN_END, tid, ts,
		 cur);
	strncpy(b->span.name, name, CORO_STR_LEN - 1);
	return &b->hdr;
}

/* Thread tid (running coroutine cur) off the CPU from start to end, runq of it runnable. */
static inline struct coro_event_hdr *mk_off_begin(union rec_buf *b, u32 tid, u64 ts, u64 cur,
						  u32 state)
{
	hdr_fill(&b->hdr, sizeof(b->offb), CORO_EV_OFFCPU_BEGIN, tid, ts, cur);
	b->offb.state = state;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_off_end(union rec_buf *b, u32 tid, u64 start, u64 end,
						u64 cur, u32 state, u64 runq)
{
	hdr_fill(&b->hdr, sizeof(b->offe), CORO_EV_OFFCPU_END, tid, end, cur);
	b->offe.start = start;
	b->offe.state = state;
	b->offe.runq_ns = runq;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_proc_exit(union rec_buf *b, u64 ts, s32 status)
{
	hdr_fill(&b->hdr, sizeof(b->pexit), CORO_REC_PROC_EXIT, TPID, ts, 0);
	b->pexit.status = status;
	return &b->hdr;
}

static inline struct coro_event_hdr *mk_process(union rec_buf *b, u64 ts, u32 mode)
{
	struct coro_rec_process *p = (void *)b->raw;
	size_t size = ROUND_UP(sizeof(*p) + 6, 8);

	hdr_fill(&b->hdr, size, CORO_REC_PROCESS, TPID, ts, 0);
	p->mode = mode;
	strcpy(p->comm, "test");
	strcpy(p->exe, "/test");
	return &b->hdr;
}

/* What the observers saw: every ended coroutine, copied. */
#define MAX_ENDED 64
struct seen {
	struct coro ended[MAX_ENDED];
	int nended;
	int intervals;
	u64 interval_ns[CS_NSTATES];
	/* enter/interval pairing, per uid (small uids only) */
	int open_state[MAX_ENDED * 64];
	u64 open_since[MAX_ENDED * 64];
	bool is_open[MAX_ENDED * 64];
	int pairing_errors;
};

static inline void seen_coroutine_end(void *ctx, const struct coro *c)
{
	struct seen *s = ctx;

	/* Its last interval has been closed before it ends. */
	if (c->uid < MAX_ENDED * 64 && s->is_open[c->uid] && c->end != CE_EXIT)
		s->pairing_errors++;
	if (c->uid < MAX_ENDED * 64)
		s->is_open[c->uid] = false;

	if (s->nended < MAX_ENDED) {
		s->ended[s->nended] = *c;
		/* The pointers die with the coroutine. */
		s->ended[s->nended].tids = NULL;
		s->ended[s->nended].spans = NULL;
		s->nended++;
	}
}

static inline void seen_interval(void *ctx, const struct coro *c, enum coro_state st, u64 start,
				 u64 end, u32 tid, u32 reason, u64 obj)
{
	struct seen *s = ctx;

	s->intervals++;
	s->interval_ns[st] += end - start;
	/* Every interval closes exactly what enter() opened. */
	if (c->uid < MAX_ENDED * 64) {
		if (!s->is_open[c->uid] || s->open_state[c->uid] != (int)st ||
		    s->open_since[c->uid] != start)
			s->pairing_errors++;
		s->is_open[c->uid] = false;
	}
}

static inline void seen_enter(void *ctx, const struct coro *c, u64 ts)
{
	struct seen *s = ctx;

	if (c->uid >= MAX_ENDED * 64)
		return;
	if (s->is_open[c->uid])
		s->pairing_errors++; /* entered a state without closing the previous one */
	s->is_open[c->uid] = true;
	s->open_state[c->uid] = c->state;
	s->open_since[c->uid] = ts;
}

static inline void seen_attach(struct pipeline *p, struct seen *s)
{
	struct model_observer obs = {0};

	memset(s, 0, sizeof(*s));
	obs.ctx = s;
	obs.coroutine_end = seen_coroutine_end;
	obs.interval = seen_interval;
	obs.enter = seen_enter;
	pipeline_add_observer(p, &obs, NULL);
}

static inline const struct coro *seen_find(const struct seen *s, u64 id, int nth)
{
	for (int i = 0; i < s->nended; i++)
		if (s->ended[i].id == id && nth-- == 0)
			return &s->ended[i];
	return NULL;
}

#include "output.h"

/*
 * A fixed stream through the pipeline into `path`, in the format its
 * extension names: a named coroutine with a hostile name that is created,
 * runs, opens a span, waits, loses events, runs again, closes the span and
 * exits; a child created by it; the process exits. Golden files of every
 * output format are this stream.
 */
static inline void write_basic(const char *path, int max_tracks)
{
	struct capture_info ci = {0};
	u32 pids[1] = {TPID};
	struct output out;
	struct pipeline p;
	union rec_buf b;
	char err[256];

	ci.version = 1;
	ci.start_ts = 1000;
	ci.realtime_offset = 1700000000000000000LL;
	strcpy(ci.tool_version, "test");
	strcpy(ci.kernel, "6.18.0-test");
	strcpy(ci.hostname, "host");
	ci.npids = 1;
	ci.pids = pids;
	CHECK_EQ(output_open(&out, path, OUT_AUTO, true, NULL, err, sizeof(err)), 0);
	if (max_tracks >= 0) /* -1: the default */
		out.max_tracks = (u32)max_tracks;
	pipeline_init(&p, &ci, NULL);
	pipeline_add_output(&p, &out, err, sizeof(err));
	pipeline_begin(&p);
	pipeline_feed(&p, mk_process(&b, 1000, CORO_PROC_LAUNCHED));
	hdr_fill(&b.hdr, sizeof(b.thread), CORO_REC_THREAD, 2, 1100, 0);
	strcpy(b.thread.comm, "worker-0");
	pipeline_feed(&p, &b.hdr);
	pipeline_feed(&p, mk_create(&b, 2, 1100, 0, 0xdeadbeefcafef00dULL, 0));
	pipeline_feed(&p, mk_name(&b, 2, 1110, 0, 0xdeadbeefcafef00dULL, "say \"hi\"\\\n\x01\xff"));
	pipeline_feed(&p, mk_ready(&b, 2, 1120, 0, 0xdeadbeefcafef00dULL));
	pipeline_feed(&p, mk_switch(&b, 2, 1200, 0, 0xdeadbeefcafef00dULL, 0, 0));
	pipeline_feed(&p, mk_span(&b, true, 2, 1210, 0xdeadbeefcafef00dULL, "request"));
	pipeline_feed(&p, mk_switch(&b, 2, 1300, 0xdeadbeefcafef00dULL, 0, CORO_R_WAIT, 0x7f00));
	{
		struct coro_event_hdr *h = mk_ready(&b, 2, 1400, 0, 0xdeadbeefcafef00dULL);

		h->lost_before = 2;
		pipeline_feed(&p, h);
	}
	pipeline_feed(&p, mk_switch(&b, 2, 1500, 0, 0xdeadbeefcafef00dULL, 0, 0));
	pipeline_feed(&p, mk_span(&b, false, 2, 1510, 0xdeadbeefcafef00dULL, "request"));
	pipeline_feed(&p, mk_exit(&b, 2, 1600, 0xdeadbeefcafef00dULL, 0xdeadbeefcafef00dULL, -125));
	pipeline_feed(&p, mk_switch(&b, 2, 1610, 0xdeadbeefcafef00dULL, 0, CORO_R_DONE, 0));
	pipeline_feed(&p, mk_create(&b, 2, 1700, 0, 3, 0xdeadbeefcafef00dULL));
	pipeline_feed(&p, mk_proc_exit(&b, 2000, 256 * 3));
	pipeline_finish(&p);
	CHECK_EQ(output_close(&out, err, sizeof(err)), 0);
	pipeline_free(&p);
}


#endif
