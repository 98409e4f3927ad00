// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * PostgreSQL output. The pipeline's callbacks format rows in COPY's binary format into one
 * buffer per table; a full buffer is handed to the writer threads through a queue (a mutex held
 * for a pointer swap, never for network time) and sent there as one COPY. The tables and their
 * columns are those of the SQLite output (tables.h), in the same order, after capture_id; 64-bit
 * values are stored as bigint with the same bits, as there.
 *
 * What the server spends per row decides the rate (docs/store.md, measured on PostgreSQL 15):
 * binary COPY spares it parsing decimal text. A table per capture (partitions) would spare it
 * the BRIN index too, but every query over all captures would lock and plan one partition per
 * capture, and a default server refuses a query over some thousands of them.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "counters.h"
#include "finding.h"
#include "log.h"
#include "pgconn.h"
#include "pgstore.h"
#include "tables.h"

#define PG_BATCH (1u << 20)	    /* bytes of rows per COPY */
#define PG_QUEUE_MAX (512ull << 20) /* handed over, not sent: beyond, the store fell behind */
#define PG_WRITERS 3		    /* connections sending COPYs side by side */
#define PG_SPARE 8		    /* sent batches' buffers kept for the next ones */
#define PG_RETRIES 5		    /* reconnections after a lost one, 0.1 s to 1.6 s apart */
#define PG_SAY_WAIT_S 3		    /* the end waits this long for the server: said */

/* The store's own tables: its schema's version, the captures, their counters. */
static const char store_tables[] =
	"CREATE TABLE corobpf_schema (version integer NOT NULL);\n"
	"CREATE TABLE captures (capture_id bigint PRIMARY KEY, hostname text, kernel text,\n"
	"  boot_time text, start_ts bigint, start_time text, realtime_offset_ns bigint,\n"
	"  tool_version text, end_ts bigint, end_reason text, events bigint, samples bigint,\n"
	"  coroutines bigint, input_error text, complete boolean NOT NULL DEFAULT false,\n"
	"  stored_at timestamptz NOT NULL DEFAULT now());\n"
	"CREATE TABLE capture_meta (capture_id bigint, key text, value bigint);\n";

/* Version 2 added the awaiters table; a version 1 store gets it (ensure_schema()). */
static const char awaiters_index[] =
	"CREATE INDEX awaiters_capture ON awaiters (capture_id, uid, ts);\n";

/*
 * The documented queries (docs/store.md) group by process and kind across captures. The three
 * tables that take a row per event get BRIN indexes on capture_id: a capture's rows arrive
 * together, and a B-tree maintained per row would cost the server twice the time per row (a
 * BRIN index a third more).
 */
static const char indexes[] =
	"CREATE INDEX processes_capture ON processes (capture_id, pid);\n"
	"CREATE INDEX processes_exe ON processes (exe);\n"
	"CREATE INDEX threads_capture ON threads (capture_id, pid);\n"
	"CREATE INDEX switch_paths_capture ON switch_paths (capture_id);\n"
	"CREATE INDEX capture_meta_capture ON capture_meta (capture_id, key);\n"
	"CREATE INDEX coroutines_capture ON coroutines (capture_id, pid, uid);\n"
	"CREATE INDEX offcpu_capture ON offcpu USING brin (capture_id);\n"
	"CREATE INDEX events_capture ON events USING brin (capture_id);\n"
	"CREATE INDEX slices_capture ON slices USING brin (capture_id);\n"
	"CREATE INDEX findings_capture ON findings (capture_id, kind);\n"
	"CREATE INDEX findings_kind ON findings (kind, dur_ns);\n"
	"CREATE INDEX spans_capture ON spans (capture_id, name);\n"
	"CREATE INDEX stacks_capture ON stacks (capture_id, id);\n"
	"CREATE INDEX frames_capture ON frames (capture_id, stack_id, depth);\n";

/*
 * The store's tables: those of tables.h it has (T_NSTORE), then its counters. In the order a
 * capture's rows are deleted, and the names COPY is given (names_init()).
 */
enum { T_META = T_NSTORE, T_N };
static const char *table_name[T_N];

/* capture_meta's row: a counter's key and value. */
static const struct column meta_cols[] = {{"key", COL_TEXT, 0}, {"value", COL_INT, 0}};
static const struct table meta_table = {"capture_meta", meta_cols, 2, 0, 0};

/* The schema (schema_sql()) and a version 1 store's change to version 2 (upgrade_sql()). */
static char *schema_text, *upgrade_text;

static void names_init(void)
{
	char *sql;
	size_t n, cap = 32768;

	if (schema_text)
		return;
	for (int t = 0; t < T_NSTORE; t++)
		table_name[t] = tables[t].name;
	table_name[T_META] = "capture_meta";
	sql = xmalloc(cap);
	n = snprintf(sql, cap, "%s", store_tables);
	for (int t = 0; t < T_NSTORE; t++) {
		n += tables_pg_create(&tables[t], sql + n, cap - n);
		n += snprintf(sql + n, cap - n, ";\n");
	}
	snprintf(sql + n, cap - n, "%s%s", awaiters_index, indexes);
	schema_text = sql;
	sql = xmalloc(4096);
	n = tables_pg_create(&tables[T_AWAITERS], sql, 4096);
	snprintf(sql + n, 4096 - n, ";\n%sUPDATE corobpf_schema SET version = 2", awaiters_index);
	upgrade_text = sql;
}

enum msg_kind { MSG_BEGIN, MSG_COPY, MSG_FINISH, MSG_QUIT };

struct msg {
	struct msg *next;
	enum msg_kind kind;
	int table;
	char *data; /* COPY rows, or the captures row's fields (MSG_BEGIN, MSG_FINISH) */
	size_t len, cap;
	u64 rows;
};

struct pgbuf {
	char *p;
	size_t len, cap;
	u64 rows;
};

/* A process's row waits for its exit: written at the end. */
struct pg_proc {
	u32 pid;
	bool exited;
	struct row *exit; /* the exit's row (tables.h: PROCESS_EXIT_COL on) */
	char *row;	  /* the fields up to start_ts, formatted */
	size_t rowlen;
};

struct pg_writer {
	struct pg_sink *s;
	struct pg_link link; /* its connection (pgconn.h) */
	pthread_t thread;
	bool started;
};

struct pg_sink {
	/* The pipeline's side. */
	struct model *m;
	struct pgbuf buf[T_N];
	char idtext[24];
	u64 capture_id;
	struct pg_proc *procs;
	size_t nprocs, capprocs;
	struct table_rows tr;
	bool begun;

	/* Shared: the queue. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct msg *head, **tail;
	u64 queued;
	struct pg_writer writers[PG_WRITERS];
	bool begin_done; /* the captures row is written: COPYs may go */
	int inflight;	 /* messages taken, not yet done */
	int running;	 /* writer threads not yet ended */
	/*
	 * Buffers of sent batches, reused: a new one of a MiB is a fresh mapping whose every page
	 * faults and is cleared, a tenth of the pipeline's time for this output.
	 */
	char *spare[PG_SPARE];
	size_t spare_cap[PG_SPARE];
	int nspare;
	atomic_bool stop_formatting; /* the writer failed or skips: rows are not formatted */

	/* The connections: what they are made with, and what their waits watch. */
	struct pg_params params;
	struct pg_opts opts;
	struct pg_watch watch;
	struct pg_notices notices;
	const char *shown; /* params.shown: the store as messages name it */

	/* The writers' side (read by the pipeline's side only after the join). */
	char *replay_from;
	bool failed, skipped, finished;
	char err[1024];
	u64 rows_stored;
};

/* ---- formatting (the pipeline's thread) ---- */

static void buf_reserve(struct pgbuf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return;
	b->cap = MAX(b->cap * 2, MAX(b->len + more, (size_t)PG_BATCH + 4096));
	b->p = realloc(b->p, b->cap);
	if (!b->p)
		abort();
}

/* COPY's binary format: big-endian integers, a field is its length (-1: NULL) and its bytes. */
static inline char *put_be16(char *p, u16 v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
	return p + 2;
}

static inline char *put_be32(char *p, u32 v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static inline char *put_int_field(char *p, s64 v)
{
	u64 be = htobe64((u64)v);

	p = put_be32(p, 8);
	memcpy(p, &be, 8);
	return p + 8;
}

/* A text field: valid UTF-8 (the server refuses any other), NUL never sent. */
static void put_text_field(struct pgbuf *b, const char *s, size_t maxlen)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char high = 0;
	size_t n = 0, len;
	char *p;

	while (n < maxlen && u[n])
		high |= u[n++];
	if (!(high & 0x80)) {
		/* ASCII, as nearly every name is: valid as it is. */
		buf_reserve(b, 4 + n);
		p = put_be32(b->p + b->len, (u32)n);
		memcpy(p, s, n);
		b->len += 4 + n;
		return;
	}
	buf_reserve(b, 4 + 3 * n + 1);
	p = b->p + b->len;
	utf8_sanitize(p + 4, 3 * n + 1, s, n);
	len = strlen(p + 4);
	put_be32(p, (u32)len);
	b->len += 4 + len;
}

/* COPY text format: backslash, tab, newline and carriage return escaped, NUL never sent. */
static void put_text(struct pgbuf *b, const char *s, size_t maxlen)
{
	char stackbuf[3 * 256 + 1], *clean = stackbuf;
	size_t need = 3 * maxlen + 1;
	char *p;

	if (need > sizeof(stackbuf))
		clean = xcalloc(1, need);
	utf8_sanitize(clean, need, s, maxlen);
	buf_reserve(b, 2 * strlen(clean) + 2);
	p = b->p + b->len;
	for (const char *c = clean; *c; c++) {
		switch (*c) {
		case '\\': *p++ = '\\'; *p++ = '\\'; break;
		case '\t': *p++ = '\\'; *p++ = 't'; break;
		case '\n': *p++ = '\\'; *p++ = 'n'; break;
		case '\r': *p++ = '\\'; *p++ = 'r'; break;
		default: *p++ = *c; break;
		}
	}
	b->len = p - b->p;
	if (clean != stackbuf)
		free(clean);
}

static void enqueue(struct pg_sink *s, struct msg *msg)
{
	pthread_mutex_lock(&s->lock);
	if (msg->kind == MSG_COPY && s->queued + msg->len > PG_QUEUE_MAX) {
		/* Never wait on the network: stop storing, the run goes on. */
		atomic_store(&s->stop_formatting, true);
		if (!s->err[0])
			snprintf(s->err, sizeof(s->err), "the server fell behind by more than %llu "
				 "MiB of rows", PG_QUEUE_MAX >> 20);
		s->failed = true;
		pthread_mutex_unlock(&s->lock);
		free(msg->data);
		free(msg);
		return;
	}
	s->queued += msg->len;
	msg->next = NULL;
	*s->tail = msg;
	s->tail = &msg->next;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void send_msg(struct pg_sink *s, enum msg_kind kind, int t, char *data, size_t len,
		     u64 rows)
{
	struct msg *msg = xcalloc(1, sizeof(*msg));

	msg->kind = kind;
	msg->table = t;
	msg->data = data;
	msg->len = len;
	msg->rows = rows;
	enqueue(s, msg);
}

static void hand_over(struct pg_sink *s, int t)
{
	struct pgbuf *b = &s->buf[t];
	struct msg *msg;

	if (!b->len)
		return;
	msg = xcalloc(1, sizeof(*msg));
	msg->kind = MSG_COPY;
	msg->table = t;
	msg->data = b->p;
	msg->len = b->len;
	msg->cap = b->cap;
	msg->rows = b->rows;
	enqueue(s, msg);
	memset(b, 0, sizeof(*b));
	pthread_mutex_lock(&s->lock);
	if (s->nspare) {
		s->nspare--;
		b->p = s->spare[s->nspare];
		b->cap = s->spare_cap[s->nspare];
	}
	pthread_mutex_unlock(&s->lock);
}

/* The row's first ncols values into b, after the capture id; true when b is a batch to send. */
static bool row_format(struct pgbuf *b, u64 capture_id, const struct row *r, u32 ncols)
{
	char *p, list[1024];

	buf_reserve(b, 2 + 12 * (size_t)(ncols + 1));
	p = b->p + b->len;
	p = put_be16(p, (u16)(ncols + 1));
	p = put_int_field(p, (s64)capture_id);
	for (u32 i = 0; i < ncols; i++) {
		const char *text = r->v[i].s;
		size_t len = r->v[i].len, n = 0;

		switch (r->v[i].kind) {
		case ROW_INT:
			p = put_int_field(p, r->v[i].i);
			continue;
		case ROW_TIDS:
			/* Comma separated, as many as 1 KiB holds. */
			list[0] = 0;
			for (u32 k = 0; k < r->v[i].len && n + 16 < sizeof(list); k++)
				n += snprintf(list + n, sizeof(list) - n, "%s%u", k ? "," : "",
					      r->v[i].tids[k]);
			text = list;
			len = n;
			/* fall through */
		case ROW_TEXT:
			b->len = p - b->p;
			put_text_field(b, text, len);
			buf_reserve(b, 12 * (size_t)(ncols - i));
			p = b->p + b->len;
			continue;
		default:
			p = put_be32(p, (u32)-1);
		}
	}
	b->len = p - b->p;
	b->rows++;
	return b->len >= PG_BATCH;
}

static void row_emit(struct pg_sink *s, int t, const struct row *r)
{
	if (row_format(&s->buf[t], s->capture_id, r, r->t->ncols))
		hand_over(s, t);
}

static bool formatting(struct pg_sink *s)
{
	return s->begun && !atomic_load_explicit(&s->stop_formatting, memory_order_relaxed);
}

/* FNV-1a over what identifies a run: the same in a live run and in a replay of its --raw. */
static u64 capture_id_of(const struct capture_info *ci)
{
	u64 h = 0xcbf29ce484222325ull;
	u64 nums[2] = {ci->start_ts, (u64)ci->realtime_offset};
	const unsigned char *parts[3] = {(const void *)ci->hostname, (const void *)ci->kernel,
					 (const void *)nums};
	size_t lens[3] = {strnlen(ci->hostname, sizeof(ci->hostname)),
			  strnlen(ci->kernel, sizeof(ci->kernel)), sizeof(nums)};

	for (int i = 0; i < 3; i++) {
		for (size_t j = 0; j < lens[i]; j++)
			h = (h ^ parts[i][j]) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	return h & 0x7fffffffffffffffull; /* a positive bigint */
}

static void pg_begin(void *ctx, const struct capture_info *ci)
{
	struct pg_sink *s = ctx;
	struct pgbuf b = {0};
	char when[80], boot[80];

	s->capture_id = capture_id_of(ci);
	snprintf(s->idtext, sizeof(s->idtext), "%llu", (unsigned long long)s->capture_id);
	fmt_wall_time(when, sizeof(when), ci->start_ts, ci->realtime_offset, false);
	fmt_wall_time(boot, sizeof(boot), 0, ci->realtime_offset, false);
	/* The captures row's fields as COPY text: the writer inserts it from there. */
	buf_reserve(&b, 4096);
	b.len = snprintf(b.p, b.cap, "%s\t", s->idtext);
	put_text(&b, ci->hostname, sizeof(ci->hostname));
	b.p[b.len++] = '\t';
	put_text(&b, ci->kernel, sizeof(ci->kernel));
	b.p[b.len++] = '\t';
	if (boot[0])
		put_text(&b, boot, sizeof(boot));
	else
		b.len += snprintf(b.p + b.len, b.cap - b.len, "\\N");
	b.len += snprintf(b.p + b.len, b.cap - b.len, "\t%llu\t", (unsigned long long)ci->start_ts);
	put_text(&b, when, sizeof(when));
	b.len += snprintf(b.p + b.len, b.cap - b.len, "\t%lld\t", (long long)ci->realtime_offset);
	put_text(&b, ci->tool_version, sizeof(ci->tool_version));
	b.p[b.len++] = '\n';
	s->begun = true;
	send_msg(s, MSG_BEGIN, T_N, b.p, b.len, 1);
}

/*
 * A process's row waits for its exit, written at the end: its columns up to the exit's
 * formatted now (the count of all), the exit's kept (tables.h, PROCESS_EXIT_COL).
 */
static void pg_process_row(struct pg_sink *s, const struct row *r)
{
	struct pgbuf b = {0};
	struct pg_proc *p;

	if (r->update) {
		/* As SQLite's UPDATE: the process's row still without an exit. */
		for (size_t i = 0; i < s->nprocs; i++) {
			p = &s->procs[i];
			if (p->pid == (u32)r->v[0].i && !p->exited) {
				p->exited = true;
				p->exit = xmalloc(sizeof(*p->exit));
				memcpy(p->exit, r, sizeof(*r));
			}
		}
		return;
	}
	row_format(&b, s->capture_id, r, PROCESS_EXIT_COL);
	put_be16(b.p, (u16)(r->t->ncols + 1));
	if (s->nprocs == s->capprocs) {
		s->capprocs = s->capprocs ? 2 * s->capprocs : 16;
		s->procs = realloc(s->procs, s->capprocs * sizeof(*s->procs));
		if (!s->procs)
			abort();
	}
	p = &s->procs[s->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = (u32)r->v[0].i;
	p->row = b.p;
	p->rowlen = b.len;
}

/* A row of the tables (tables.h): into its table's batch. */
static void pg_row(void *ctx, const struct row *r)
{
	struct pg_sink *s = ctx;
	int t = (int)(r->t - tables);

	if (t == T_PROCESSES)
		pg_process_row(s, r);
	else if (t < T_NSTORE)
		row_emit(s, t, r);
}

static void pg_event_cb(void *ctx, const struct event *ev)
{
	struct pg_sink *s = ctx;

	if (formatting(s))
		tables_event_rows(&s->tr, ev, pg_row, s);
}

static void pg_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			u64 end, u32 tid, u32 reason, u64 obj)
{
	struct pg_sink *s = ctx;
	struct row r;

	if (!formatting(s))
		return;
	tables_slice_row(&r, c, state, start, end, tid, reason, obj);
	pg_row(s, &r);
}

static void pg_coroutine_end(void *ctx, const struct coro *c)
{
	struct pg_sink *s = ctx;
	struct row r;

	if (!formatting(s))
		return;
	tables_coroutine_row(&r, c);
	pg_row(s, &r);
}

static void pg_finding(void *ctx, const struct finding *f)
{
	struct pg_sink *s = ctx;
	struct row r;

	if (!formatting(s))
		return;
	tables_finding_row(&s->tr, &r, f);
	pg_row(s, &r);
}

static void pg_span_done(void *ctx, const struct span_done *d)
{
	struct pg_sink *s = ctx;
	struct row r;

	if (!formatting(s))
		return;
	tables_span_row(&s->tr, &r, d);
	pg_row(s, &r);
}

static void meta_row(struct pg_sink *s, const char *key, s64 v)
{
	struct row r = {.t = &meta_table};

	r.v[0].kind = ROW_TEXT;
	r.v[0].s = key;
	r.v[0].len = strlen(key);
	r.v[1].kind = ROW_INT;
	r.v[1].i = v;
	row_emit(s, T_META, &r);
}

static void pg_finish(void *ctx, const struct model *m)
{
	struct pg_sink *s = ctx;
	struct pgbuf b = {0};

	/*
	 * Tracing was stopped on request (-d, a signal, top's q): from now on the store waits for
	 * a server that moves data, not for one that stopped answering (pgconn.h).
	 */
	if (s->opts.live && (m->end_reason == CORO_END_SIGNAL || m->end_reason == CORO_END_DURATION))
		atomic_store(&s->watch.stopping, true);
	if (!formatting(s))
		return;
	for_each_counter(c)
		if (c->sql)
			meta_row(s, c->sql, (s64)counter_value(c, m));
	for (size_t i = 0; i < s->nprocs; i++) {
		struct pg_proc *p = &s->procs[i];
		struct pgbuf *pb = &s->buf[T_PROCESSES];
		u32 ncols = tables[T_PROCESSES].ncols;
		char *q;

		buf_reserve(pb, p->rowlen + (ncols - PROCESS_EXIT_COL) * 12);
		q = pb->p + pb->len;
		memcpy(q, p->row, p->rowlen);
		q += p->rowlen;
		for (u32 k = PROCESS_EXIT_COL; k < ncols; k++)
			if (p->exit && p->exit->v[k].kind == ROW_INT)
				q = put_int_field(q, p->exit->v[k].i);
			else
				q = put_be32(q, (u32)-1);
		pb->len = q - pb->p;
		pb->rows++;
	}
	tables_stack_rows(m, pg_row, s);
	for (int t = 0; t < T_N; t++)
		hand_over(s, t);
	/* end_ts, end_reason, events, samples, coroutines, input_error: the captures row's rest. */
	buf_reserve(&b, 4096);
	b.len = snprintf(b.p, b.cap, "%llu\t%s\t%llu\t%llu\t%llu\t",
			 (unsigned long long)m->last_ts, coro_end_reason_name(m->end_reason),
			 (unsigned long long)m->events, (unsigned long long)m->samples,
			 (unsigned long long)m->coroutines);
	/* A parameter, not COPY text: as it is (valid UTF-8), tabs and backslashes included. */
	if (m->input_error) {
		size_t n = strlen(m->input_error);

		buf_reserve(&b, 3 * n + 1);
		utf8_sanitize(b.p + b.len, 3 * n + 1, m->input_error, n);
		b.len += strlen(b.p + b.len);
	}
	b.p[b.len] = 0;
	s->finished = true;
	send_msg(s, MSG_FINISH, T_N, b.p, b.len, 0);
}

/* ---- the writer thread ---- */

static bool exec_ok(struct pg_link *l, const char *sql, int nparams, const char *const *params,
		    ExecStatusType ok, PGresult **out)
{
	return !pgc_exec(l, sql, nparams, params, ok, out, 0);
}

/*
 * A session's settings, made on each connection. Its COPYs commit without waiting for their
 * WAL to reach the disk (a setting of the session, not of the server): the transaction that
 * marks the capture complete waits as the server is set to, and its WAL comes after every
 * row's. A server crash before it leaves the capture incomplete, never complete with rows
 * missing. The lock and statement timeouts are the server's to apply: a lock someone holds,
 * or a command that hangs, fails there, and the server lets go of what it waited for.
 */
static bool session_setup(struct pg_link *l)
{
	char sql[160];

	snprintf(sql, sizeof(sql), "SET synchronous_commit = off; SET statement_timeout = %u; "
		 "SET lock_timeout = %u", l->t->statement_ms, l->t->lock_ms);
	return exec_ok(l, sql, -1, NULL, PGRES_COMMAND_OK, NULL);
}

/* After a lost connection: a few attempts, further apart each time, each bounded and watched. */
static bool reconnect(struct pg_link *l)
{
	char why[sizeof(l->why)];

	for (int i = 0; i < PG_RETRIES; i++) {
		if (pgc_sleep(l, 100u << i))
			return false;
		if (!pgc_connect(l) && session_setup(l))
			return true;
		/* A server that does not answer in time, or a stop: no more attempts. */
		if (l->end != PG_FAILED)
			break;
	}
	if (l->end == PG_FAILED || l->end == PG_TIMEOUT) {
		snprintf(why, sizeof(why), "%s", l->why);
		snprintf(l->why, sizeof(l->why), "the connection was lost and could not be made "
			 "again (%.600s)", why);
	}
	return false;
}

static void writer_fail(struct pg_sink *s, const char *what, const struct pg_link *l)
{
	pthread_mutex_lock(&s->lock);
	/* The first failure is the one to tell; those it caused (given up) are not. */
	if (!s->err[0] && l->end != PG_GIVEN_UP)
		snprintf(s->err, sizeof(s->err), "%s: %s", what, l->why);
	s->failed = true;
	pthread_mutex_unlock(&s->lock);
	atomic_store(&s->stop_formatting, true);
	/* The capture cannot be complete now: what the other writers wait for is given up. */
	atomic_store(&s->watch.give_up, true);
}

/* One COPY: 0, or -1 (the reason in l->why). */
static int copy_once(struct pg_link *l, int t, const char *data, size_t len)
{
	/* The binary format's signature, flags and header extension; the trailer, a -1 count. */
	static const char header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
	static const char trailer[2] = "\377\377";
	const char *pieces[3] = {header, data, trailer};
	size_t lens[3] = {sizeof(header), len, sizeof(trailer)};
	char sql[192];

	if (t == T_N) {
		snprintf(sql, sizeof(sql), "COPY captures (capture_id, hostname, kernel, "
			 "boot_time, start_ts, start_time, realtime_offset_ns, tool_version) "
			 "FROM STDIN");
		return pgc_copy(l, sql, &data, &len, 1);
	}
	snprintf(sql, sizeof(sql), "COPY %s FROM STDIN (FORMAT binary)", table_name[t]);
	return pgc_copy(l, sql, pieces, lens, 3);
}

static bool do_begin(struct pg_sink *s, struct pg_link *l, struct msg *msg)
{
	const char *params[1] = {s->idtext};
	char sql[256];
	PGresult *res = NULL;

	if (!exec_ok(l, "SELECT complete FROM captures WHERE capture_id = $1", 1, params,
		     PGRES_TUPLES_OK, &res))
		return false;
	if (PQntuples(res) == 1 && !strcmp(PQgetvalue(res, 0, 0), "t")) {
		PQclear(res);
		s->skipped = true;
		atomic_store(&s->stop_formatting, true);
		return true;
	}
	if (PQntuples(res) == 1) {
		/* A run or upload that failed left it incomplete: replaced whole. */
		PQclear(res);
		if (!exec_ok(l, "BEGIN", 0, NULL, PGRES_COMMAND_OK, NULL))
			return false;
		for (int t = 0; t < T_N; t++) {
			snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE capture_id = $1",
				 table_name[t]);
			if (!exec_ok(l, sql, 1, params, PGRES_COMMAND_OK, NULL))
				return false;
		}
		if (!exec_ok(l, "DELETE FROM captures WHERE capture_id = $1", 1, params,
			     PGRES_COMMAND_OK, NULL) ||
		    !exec_ok(l, "COMMIT", 0, NULL, PGRES_COMMAND_OK, NULL))
			return false;
	} else {
		PQclear(res);
	}
	/* Incomplete until MSG_FINISH: a reader never takes a partial capture for a whole one. */
	return !copy_once(l, T_N, msg->data, msg->len);
}

static bool do_finish(struct pg_sink *s, struct pg_link *l, struct msg *msg)
{
	const char *params[7];
	char *f[7], *p = msg->data;

	/* end_ts, end_reason, events, samples, coroutines (tab-separated), input_error (the rest). */
	for (int i = 0; i < 5; i++) {
		f[i] = p;
		p = strchr(p, '\t');
		if (p)
			*p++ = 0;
		else
			p = f[i] + strlen(f[i]);
	}
	f[5] = p;
	for (int i = 0; i < 6; i++)
		params[i] = f[i];
	params[5] = f[5][0] ? f[5] : NULL;
	params[6] = s->idtext;
	/* Its commit waits as the server is set to (session_setup()): after every row's WAL. */
	return exec_ok(l, "BEGIN", 0, NULL, PGRES_COMMAND_OK, NULL) &&
	       exec_ok(l, "SET LOCAL synchronous_commit TO DEFAULT", 0, NULL, PGRES_COMMAND_OK,
		       NULL) &&
	       exec_ok(l, "UPDATE captures SET end_ts = $1, end_reason = $2, events = $3, "
		       "samples = $4, coroutines = $5, input_error = $6, complete = true "
		       "WHERE capture_id = $7", 7, params, PGRES_COMMAND_OK, NULL) &&
	       exec_ok(l, "COMMIT", 0, NULL, PGRES_COMMAND_OK, NULL);
}

/*
 * The next message this writer may take, or NULL: COPYs only after the captures row is
 * written, the end only when no COPY is in flight, QUIT left for every writer to see. COPYs
 * into one table go side by side: the events table takes most rows, and one backend alone on
 * it is the slowest of all (docs/store.md).
 */
static struct msg *take(struct pg_sink *s)
{
	struct msg *msg = s->head;

	if (!msg || msg->kind == MSG_QUIT)
		return msg;
	if (msg->kind == MSG_COPY && !s->begin_done)
		return NULL;
	if ((msg->kind == MSG_FINISH || msg->kind == MSG_BEGIN) && s->inflight)
		return NULL;
	s->head = msg->next;
	if (!s->head)
		s->tail = &s->head;
	s->queued -= msg->len;
	s->inflight++;
	return msg;
}

static void *writer_main(void *arg)
{
	struct pg_writer *w = arg;
	struct pg_sink *s = w->s;
	struct pg_link *l = &w->link;

	for (;;) {
		struct msg *msg;
		bool ok = false, skip;

		pthread_mutex_lock(&s->lock);
		while (!(msg = take(s)))
			pthread_cond_wait(&s->cond, &s->lock);
		skip = s->failed || s->skipped;
		pthread_mutex_unlock(&s->lock);
		if (msg->kind == MSG_QUIT)
			break;
		if (skip) {
			ok = true;
		} else {
			for (int attempt = 0; attempt < 2 && !ok; attempt++) {
				if (msg->kind == MSG_BEGIN)
					ok = do_begin(s, l, msg);
				else if (msg->kind == MSG_COPY)
					ok = !copy_once(l, msg->table, msg->data, msg->len);
				else
					ok = do_finish(s, l, msg);
				/* Failed with the connection: sent again on a new one. */
				if (ok || attempt || l->end != PG_FAILED || !pgc_lost(l) ||
				    !reconnect(l))
					break;
			}
		}
		if (!ok) {
			char what[160];

			if (msg->kind == MSG_COPY)
				snprintf(what, sizeof(what), "cannot store rows of %s",
					 table_name[msg->table]);
			else
				snprintf(what, sizeof(what), "cannot %s the capture",
					 msg->kind == MSG_BEGIN ? "register" : "mark complete");
			writer_fail(s, what, l);
		}
		pthread_mutex_lock(&s->lock);
		if (ok && !skip)
			s->rows_stored += msg->rows;
		if (msg->kind == MSG_BEGIN)
			s->begin_done = true;
		if (msg->kind == MSG_COPY && s->nspare < PG_SPARE) {
			s->spare[s->nspare] = msg->data;
			s->spare_cap[s->nspare++] = msg->cap;
			msg->data = NULL;
		}
		s->inflight--;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		free(msg->data);
		free(msg);
	}
	pthread_mutex_lock(&s->lock);
	s->running--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- the schema ---- */

#define SCHEMA_LOCK 2020202020 /* pg_advisory_xact_lock()'s key: the schema is made under it */

/* Whether the schema is there, and its version. 0, or -1 (the reason in l->why). */
static int schema_version(struct pg_link *l, bool *exists, int *version)
{
	PGresult *res = NULL;

	if (!exec_ok(l, "SELECT to_regclass('corobpf_schema') IS NOT NULL", 0, NULL,
		     PGRES_TUPLES_OK, &res))
		return -1;
	*exists = !strcmp(PQgetvalue(res, 0, 0), "t");
	PQclear(res);
	*version = 0;
	if (!*exists)
		return 0;
	if (!exec_ok(l, "SELECT max(version) FROM corobpf_schema", 0, NULL, PGRES_TUPLES_OK, &res))
		return -1;
	*version = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/*
 * The schema lock was not had: who holds it, and what to do. The session that holds it is
 * another user's, perhaps: what the server says of it is shown escaped, as every message is.
 */
static void lock_failed(struct pg_sink *s, struct pg_link *l, char *err, size_t errlen)
{
	static const char who[] =
		"SELECT l.pid, coalesce(a.usename, '?'), coalesce(nullif(a.application_name, ''), "
		"'?'), coalesce(host(a.client_addr), 'local') FROM pg_locks l "
		"LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
		"WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND "
		"l.objid = 2020202020 AND l.objsubid = 1 AND "
		"l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
		"LIMIT 1";
	char holder[512] = "", todo[256];
	PGresult *res = NULL;

	if (l->end == PG_STOPPED) {
		snprintf(err, errlen, "%s: %s while waiting for the schema lock "
			 "(pg_advisory_lock(%d)), which another session holds: nothing was stored",
			 s->shown, l->why, SCHEMA_LOCK);
		return;
	}
	if (l->end != PG_TIMEOUT && strcmp(l->sqlstate, "55P03")) {
		snprintf(err, errlen, "%s: cannot create or check the schema: %s", s->shown, l->why);
		return;
	}
	snprintf(todo, sizeof(todo), "find it in pg_locks (locktype 'advisory', objid %d) and end "
		 "it, or wait until it lets go, then run again", SCHEMA_LOCK);
	if (!pgc_lost(l) && exec_ok(l, "ROLLBACK", 0, NULL, PGRES_COMMAND_OK, NULL) &&
	    exec_ok(l, who, 0, NULL, PGRES_TUPLES_OK, &res)) {
		if (PQntuples(res) == 1) {
			snprintf(holder, sizeof(holder), ": pid %s (user %s, application %s, from "
				 "%s)", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
				 PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3));
			snprintf(todo, sizeof(todo), "end that session (SELECT "
				 "pg_terminate_backend(%s)) or wait until it lets go, then run again",
				 PQgetvalue(res, 0, 0));
		}
		PQclear(res);
	}
	snprintf(err, errlen, "%s: cannot create the schema: another session holds corobpf's "
		 "schema lock (pg_advisory_lock(%d))%s, and did for longer than %g s "
		 "(--store-timeout lock=SECS sets how long to wait): %s", s->shown, SCHEMA_LOCK,
		 holder, s->opts.timeouts.lock_ms / 1000.0, todo);
}

static int ensure_schema(struct pg_sink *s, struct pg_link *l, char *err, size_t errlen)
{
	const struct pg_timeouts *t = &s->opts.timeouts;
	/* The server's lock timeout applies; a server that says nothing is given it too. */
	u32 lock_wait = t->lock_ms && (!t->statement_ms || t->lock_ms < t->statement_ms)
				? t->lock_ms : 0;
	char lock[64];
	bool exists;
	int version;

	/*
	 * A store made already needs no lock: a session that holds it (any user of the database
	 * may) holds up only the creation of a schema.
	 */
	if (schema_version(l, &exists, &version))
		goto fail;
	if (exists && version == PGSTORE_SCHEMA_VERSION)
		return 0;
	/* One corobpf creates the schema; the others wait on the lock and find it. */
	snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%d)", SCHEMA_LOCK);
	if (!exec_ok(l, "BEGIN", 0, NULL, PGRES_COMMAND_OK, NULL))
		goto fail;
	if (pgc_exec(l, lock, 0, NULL, PGRES_TUPLES_OK, NULL, lock_wait)) {
		lock_failed(s, l, err, errlen);
		return -1;
	}
	if (schema_version(l, &exists, &version))
		goto fail;
	if (!exists) {
		char ins[80];

		snprintf(ins, sizeof(ins), "INSERT INTO corobpf_schema VALUES (%d)",
			 PGSTORE_SCHEMA_VERSION);
		if (!exec_ok(l, schema_text, -1, NULL, PGRES_COMMAND_OK, NULL) ||
		    !exec_ok(l, ins, 0, NULL, PGRES_COMMAND_OK, NULL))
			goto fail;
		version = PGSTORE_SCHEMA_VERSION;
	} else if (version == 1) {
		/* Version 2 only adds the awaiters table: the store is brought up to it. */
		if (!exec_ok(l, upgrade_text, -1, NULL, PGRES_COMMAND_OK, NULL))
			goto fail;
		version = 2;
	}
	if (version != PGSTORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "%s: the store's schema is version %d, this corobpf writes "
			 "version %d: %s", s->shown, version, PGSTORE_SCHEMA_VERSION,
			 version > PGSTORE_SCHEMA_VERSION ? "use a newer corobpf, or another database"
							  : "use another database");
		exec_ok(l, "ROLLBACK", 0, NULL, PGRES_COMMAND_OK, NULL);
		return -1;
	}
	if (!exec_ok(l, "COMMIT", 0, NULL, PGRES_COMMAND_OK, NULL))
		goto fail;
	return 0;
fail:
	if (l->end == PG_STOPPED)
		snprintf(err, errlen, "%s: %s while checking the schema: nothing was stored",
			 s->shown, l->why);
	else
		snprintf(err, errlen, "%s: cannot create or check the schema: %s", s->shown,
			 l->why);
	return -1;
}

/* ---- the sink ---- */

static void pg_free(struct pg_sink *s)
{
	for (int t = 0; t < T_N; t++)
		free(s->buf[t].p);
	for (size_t i = 0; i < s->nprocs; i++) {
		free(s->procs[i].row);
		free(s->procs[i].exit);
	}
	free(s->procs);
	for (int i = 0; i < s->nspare; i++)
		free(s->spare[i]);
	while (s->head) {
		struct msg *m = s->head;

		s->head = m->next;
		free(m->data);
		free(m);
	}
	for (int i = 0; i < PG_WRITERS; i++)
		pgc_abandon(&s->writers[i].link);
	pg_params_free(&s->params);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->replay_from);
	free(s);
}

struct pg_sink *pg_sink_open(const char *conninfo, const struct pg_opts *o, char *err,
			     size_t errlen)
{
	struct pg_sink *s = xcalloc(1, sizeof(*s));
	char why[512];

	names_init();
	s->tr.skip = ~0u << T_NSTORE; /* the tables SQLite alone has */
	s->opts = *o;
	s->replay_from = o->replay_from ? xstrdup(o->replay_from) : NULL;
	s->opts.replay_from = NULL;
	pthread_mutex_init(&s->lock, NULL);
	/* Timed waits (wait_for_writers()) on the monotonic clock. */
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	s->tail = &s->head;
	if (pg_params_parse(&s->params, conninfo, why, sizeof(why))) {
		snprintf(err, errlen, "%s: %s", s->params.shown, why);
		goto fail;
	}
	s->shown = s->params.shown;
	s->notices.shown = s->shown;
	s->watch.stop = o->stop;
	atomic_store(&s->watch.opening, true);
	for (int i = 0; i < PG_WRITERS; i++) {
		struct pg_link *l = &s->writers[i].link;

		s->writers[i].s = s;
		l->watch = &s->watch;
		l->params = &s->params;
		l->t = &s->opts.timeouts;
		l->notices = &s->notices;
		if (pgc_connect(l)) {
			if (l->end == PG_STOPPED)
				snprintf(err, errlen, "%s while connecting to %s: nothing was stored",
					 l->why, s->shown);
			else
				snprintf(err, errlen, "cannot connect to %s: %s", s->shown, l->why);
			goto fail;
		}
		if (!session_setup(l)) {
			snprintf(err, errlen, "%s: %s%s", s->shown,
				 l->end == PG_STOPPED ? "" : "cannot set up the session: ", l->why);
			goto fail;
		}
		if (i == 0 && ensure_schema(s, l, err, errlen))
			goto fail;
	}
	atomic_store(&s->watch.opening, false);
	return s;
fail:
	pg_free(s);
	return NULL;
}

int pg_sink_attach(struct pg_sink *s, struct model *m, struct model_observer *obs,
		   struct finding_sink *fs, char *err, size_t errlen)
{
	s->m = m;
	for (int i = 0; i < PG_WRITERS; i++) {
		pthread_mutex_lock(&s->lock);
		s->running++;
		pthread_mutex_unlock(&s->lock);
		if (pthread_create(&s->writers[i].thread, NULL, writer_main, &s->writers[i])) {
			pthread_mutex_lock(&s->lock);
			s->running--;
			pthread_mutex_unlock(&s->lock);
			snprintf(err, errlen, "%s: cannot start the writer threads", s->shown);
			return -1;
		}
		s->writers[i].started = true;
	}
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = pg_begin;
	obs->event = pg_event_cb;
	obs->interval = pg_interval;
	obs->coroutine_end = pg_coroutine_end;
	obs->finish = pg_finish;
	obs->span_done = pg_span_done;
	fs->ctx = s;
	fs->finding = pg_finding;
	return 0;
}

/*
 * Until the writers have stored what was handed over (or failed). A wait of more than a few
 * seconds is said, with what ends it: a server may take its time, or have stopped answering.
 */
static void wait_for_writers(struct pg_sink *s, bool discard)
{
	struct timespec start, until;
	bool told = discard;

	clock_gettime(CLOCK_MONOTONIC, &start);
	pthread_mutex_lock(&s->lock);
	while (s->running) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		if (!told && until.tv_sec - start.tv_sec >= PG_SAY_WAIT_S) {
			told = true;
			pthread_mutex_unlock(&s->lock);
			log_info("%s: waiting for the server to store the capture's last rows; "
				 "Ctrl-C stops waiting for a server that does not answer%s%s%s",
				 s->shown, s->replay_from ? ", and " : "",
				 s->replay_from ? s->replay_from : "",
				 s->replay_from ? " keeps the whole capture" : "");
			pthread_mutex_lock(&s->lock);
			continue;
		}
		until.tv_sec += 1;
		pthread_cond_timedwait(&s->cond, &s->lock, &until);
	}
	pthread_mutex_unlock(&s->lock);
}

int pg_sink_close(struct pg_sink *s, bool discard, char *err, size_t errlen)
{
	unsigned int seen, warnings;
	int ret = 0;

	if (!s)
		return 0;
	/* The run failed: nothing the writers wait for matters any more. */
	if (discard)
		atomic_store(&s->watch.give_up, true);
	if (s->writers[0].started) {
		send_msg(s, MSG_QUIT, T_N, NULL, 0, 0);
		wait_for_writers(s, discard);
		for (int i = 0; i < PG_WRITERS; i++)
			if (s->writers[i].started)
				pthread_join(s->writers[i].thread, NULL);
	}
	seen = atomic_load(&s->notices.seen);
	warnings = atomic_load(&s->notices.warnings_unshown);
	if (warnings)
		log_warn("%s: %u more messages from the server were not shown, %u of them "
			 "warnings", s->shown, seen - PG_NOTICES_SHOWN, warnings);
	else if (seen > PG_NOTICES_SHOWN)
		log_info("%s: %u more messages from the server were not shown", s->shown,
			 seen - PG_NOTICES_SHOWN);
	if (discard) {
		pg_free(s);
		return 0;
	}
	if (s->skipped) {
		log_info("%s: capture %s is already stored complete: not stored again", s->shown,
			 s->idtext);
	} else if (s->failed || !s->finished) {
		/* Two lines: the caller's buffer is short, and the command must be whole. */
		log_err("%s: %s; capture %s is left incomplete there (captures.complete = false)",
			s->shown, s->err[0] ? s->err : "the capture did not end", s->idtext);
		if (s->replay_from)
			snprintf(err, errlen, "%s holds all of it: store it with: "
				 "corobpf report %s -o '%s'", s->replay_from, s->replay_from,
				 s->shown);
		else
			snprintf(err, errlen, "%s: the capture's rows are lost (record with "
				 "--raw to keep a copy that can be stored later)", s->shown);
		ret = -1;
	} else {
		log_verbose("%s: capture %s stored (%llu rows)", s->shown, s->idtext,
			    (unsigned long long)s->rows_stored);
	}
	pg_free(s);
	return ret;
}
