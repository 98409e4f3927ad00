// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * SQLite and CSV outputs. Every value is bound as a parameter, never pasted
 * into SQL. Coroutine ids, objects and wakers are 64-bit values stored as
 * INTEGER (the same bits, so ids above 2^63 read as negative numbers; show
 * them with printf('0x%x', id)).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "counters.h"
#include "finding.h"
#include "sqlite.h"

static const char schema[] =
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value);\n"
	"CREATE TABLE processes (pid INTEGER, comm TEXT, exe TEXT, mode TEXT, ppid INTEGER,\n"
	"  start_ts INTEGER, exit_ts INTEGER, exit_code INTEGER, signal INTEGER);\n"
	"CREATE TABLE threads (pid INTEGER, tid INTEGER, comm TEXT, first_ts INTEGER);\n"
	"CREATE TABLE switch_paths (pid INTEGER, ts INTEGER, family TEXT, object TEXT,\n"
	"  uprobes INTEGER, single_stepped INTEGER, sites TEXT, limits TEXT);\n"
	"CREATE TABLE coroutines (uid INTEGER PRIMARY KEY, id INTEGER, pid INTEGER,\n"
	"  parent_id INTEGER, parent_uid INTEGER, name TEXT, status INTEGER,\n"
	"  created_ts INTEGER, first_seen_ts INTEGER, exited_ts INTEGER, ended_ts INTEGER,\n"
	"  end TEXT, state_at_end TEXT, reason_at_end TEXT, obj_at_end INTEGER,\n"
	"  running_ns INTEGER, runnable_ns INTEGER, suspended_ns INTEGER, new_ns INTEGER,\n"
	"  unknown_ns INTEGER, longest_suspended_ns INTEGER, switch_ins INTEGER,\n"
	"  readies INTEGER, threads TEXT, open_spans TEXT, name_truncated INTEGER,\n"
	"  uncertain INTEGER, offcpu_ns INTEGER, blocked_ns INTEGER, runq_ns INTEGER,\n"
	"  create_stack INTEGER, park_stack INTEGER);\n"
	"CREATE TABLE offcpu (pid INTEGER, tid INTEGER, uid INTEGER, id INTEGER, start_ts INTEGER,\n"
	"  end_ts INTEGER, dur_ns INTEGER, state TEXT, runq_ns INTEGER, cpu INTEGER);\n"
	"CREATE TABLE events (ts INTEGER, pid INTEGER, tid INTEGER, ev TEXT, id INTEGER,\n"
	"  uid INTEGER, parent INTEGER, waker INTEGER, to_id INTEGER, to_uid INTEGER,\n"
	"  reason TEXT, obj INTEGER, status INTEGER, name TEXT, depth INTEGER,\n"
	"  lost_before INTEGER, stack INTEGER);\n"
	"CREATE TABLE slices (uid INTEGER, pid INTEGER, tid INTEGER, state TEXT, reason TEXT,\n"
	"  obj INTEGER, start_ts INTEGER, end_ts INTEGER, dur_ns INTEGER);\n"
	"CREATE TABLE findings (kind TEXT, pid INTEGER, tid INTEGER, coroutine_uid INTEGER,\n"
	"  coroutine_id INTEGER, name TEXT, ts INTEGER, dur_ns INTEGER, open INTEGER,\n"
	"  state TEXT, reason TEXT, obj INTEGER, waker INTEGER, span TEXT, count INTEGER,\n"
	"  peak_per_s INTEGER, chain TEXT, stack INTEGER, samples INTEGER, key_frame TEXT,\n"
	"  key_samples INTEGER);\n"
	"CREATE TABLE stacks (id INTEGER PRIMARY KEY, pid INTEGER, nframes INTEGER);\n"
	"CREATE TABLE frames (stack_id INTEGER, depth INTEGER, ip INTEGER, func TEXT,\n"
	"  func_off INTEGER, object TEXT, rel INTEGER, file TEXT, line INTEGER);\n";

/* Created after the rows: cheaper than maintaining them during the inserts. */
static const char indexes[] =
	"CREATE INDEX coroutines_pid_parent ON coroutines (pid, parent_uid);\n"
	"CREATE INDEX coroutines_name ON coroutines (name);\n"
	"CREATE INDEX events_uid ON events (uid, ts);\n"
	"CREATE INDEX events_ev ON events (ev, pid);\n"
	"CREATE INDEX slices_uid ON slices (uid, start_ts);\n"
	"CREATE INDEX slices_state ON slices (state, dur_ns);\n"
	"CREATE INDEX findings_kind ON findings (kind, dur_ns);\n"
	"CREATE INDEX offcpu_uid ON offcpu (uid, start_ts);\n"
	"CREATE INDEX frames_stack ON frames (stack_id, depth);\n";

enum stmt {
	ST_PROCESS, ST_THREAD, ST_CORO, ST_EVENT, ST_SLICE, ST_FINDING, ST_META, ST_OFFCPU,
	ST_STACK, ST_FRAME, ST_N
};

static const char *const stmt_sql[ST_N] = {
	[ST_PROCESS] = "INSERT INTO processes VALUES (?,?,?,?,?,?,NULL,NULL,NULL)",
	[ST_THREAD] = "INSERT INTO threads VALUES (?,?,?,?)",
	[ST_CORO] = "INSERT INTO coroutines VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
		    "?,?,?,?,?,?,?,?,?)",
	[ST_EVENT] = "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[ST_SLICE] = "INSERT INTO slices VALUES (?,?,?,?,?,?,?,?,?)",
	[ST_FINDING] = "INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	[ST_STACK] = "INSERT INTO stacks VALUES (?,?,?)",
	[ST_FRAME] = "INSERT INTO frames VALUES (?,?,?,?,?,?,?,?,?)",
	[ST_META] = "INSERT OR REPLACE INTO meta VALUES (?,?)",
	[ST_OFFCPU] = "INSERT INTO offcpu VALUES (?,?,?,?,?,?,?,?,?,?)",
};

/*
 * The spans table, its index and its view exist only in a trace with spans,
 * made with the first span that ends: a trace without spans keeps the
 * schema it always had.
 */
static const char spans_schema[] =
	"CREATE TABLE spans (serial INTEGER PRIMARY KEY, parent INTEGER, name TEXT, pid INTEGER,\n"
	"  tid INTEGER, coroutine_uid INTEGER, coroutine_id INTEGER, depth INTEGER,\n"
	"  begin_ts INTEGER, end_ts INTEGER, dur_ns INTEGER, closed INTEGER, slow INTEGER,\n"
	"  running_ns INTEGER, runnable_ns INTEGER, suspended_ns INTEGER, offcpu_ns INTEGER,\n"
	"  blocked_ns INTEGER, runq_ns INTEGER, unknown_ns INTEGER, longest_suspended_ns INTEGER,\n"
	"  longest_reason TEXT, longest_obj INTEGER, stack INTEGER);\n"
	/* Nearest rank, as the JSONL's span_stats: the ceil(p/100 * N)-th smallest. */
	"CREATE VIEW span_stats AS\n"
	"  WITH r AS (SELECT name, dur_ns, suspended_ns, offcpu_ns,\n"
	"    ROW_NUMBER() OVER (PARTITION BY name ORDER BY dur_ns) AS rn,\n"
	"    COUNT(*) OVER (PARTITION BY name) AS n FROM spans WHERE closed)\n"
	"  SELECT name, n AS count, SUM(dur_ns) AS total_ns,\n"
	"    MIN(CASE WHEN rn >= (50 * n + 99) / 100 THEN dur_ns END) AS p50_ns,\n"
	"    MIN(CASE WHEN rn >= (95 * n + 99) / 100 THEN dur_ns END) AS p95_ns,\n"
	"    MIN(CASE WHEN rn >= (99 * n + 99) / 100 THEN dur_ns END) AS p99_ns,\n"
	"    MAX(dur_ns) AS max_ns, SUM(suspended_ns) AS suspended_ns,\n"
	"    SUM(offcpu_ns) AS offcpu_ns,\n"
	"    ROUND(1.0 * SUM(suspended_ns) / MAX(SUM(dur_ns), 1), 4) AS suspended_share,\n"
	"    ROUND(1.0 * SUM(offcpu_ns) / MAX(SUM(dur_ns), 1), 4) AS offcpu_share\n"
	"  FROM r GROUP BY name;\n";
static const char spans_indexes[] = "CREATE INDEX spans_name_dur ON spans (name, dur_ns);\n";

/*
 * The awaiters table likewise exists only in a trace with a C++20 wait whose
 * awaiter's type is known (docs/cxx20.md): one row per such wait, keyed as
 * the rows that wait has elsewhere (events: its switch; slices: the
 * suspended slice it opens; findings: a stall of it), by coroutine uid and
 * the time it began. Every other database keeps the schema it always had.
 */
static const char awaiters_schema[] =
	"CREATE TABLE awaiters (pid INTEGER, uid INTEGER, id INTEGER, ts INTEGER, obj INTEGER,\n"
	"  awaiter TEXT);\n";

/*
 * The lost table likewise exists only in a trace with a hole a thread's later
 * record carried: one row per hole, as the JSONL's `lost` records, whatever
 * record came after it (events carry theirs in lost_before too; off-CPU
 * records and samples have no column for it). Its counts add up to the meta
 * key lost_attributed.
 */
static const char lost_schema[] =
	"CREATE TABLE lost (ts INTEGER, pid INTEGER, tid INTEGER, count INTEGER);\n";

struct sqlite_sink {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	struct model *m;
	char err[512];
	u64 rows;
	sqlite3_stmt *span_st; /* INSERT INTO spans, once the table exists */
	sqlite3_stmt *awaiter_st; /* INSERT INTO awaiters, once the table exists */
	sqlite3_stmt *lost_st; /* INSERT INTO lost, once the table exists */
	u64 slow_serial;       /* the span the last slow_span finding named (before its row) */
};

static void fail(struct sqlite_sink *s, const char *what)
{
	if (!s->err[0])
		snprintf(s->err, sizeof(s->err), "%s: %s", what, sqlite3_errmsg(s->db));
}

/* Insert the row bound to st (counted), and leave st clean for the next. */
static void step_stmt(struct sqlite_sink *s, sqlite3_stmt *st)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		fail(s, "cannot insert a row");
	else
		s->rows++;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static void step(struct sqlite_sink *s, enum stmt k)
{
	if (s->st[k])
		step_stmt(s, s->st[k]);
}

/* Bind helpers: columns count from 1. */
#define BI(st, i, v) sqlite3_bind_int64(st, i, (sqlite3_int64)(v))
#define BT(st, i, t) sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT)
#define BS(st, i, str) sqlite3_bind_text(st, i, (str).s, (int)(str).len, SQLITE_TRANSIENT)

static void bind_str(sqlite3_stmt *st, int i, const char *str, size_t len)
{
	char buf[3 * CORO_STR_LEN + 1];

	utf8_sanitize(buf, sizeof(buf), str, len);
	BT(st, i, buf);
}

static void bind_name(sqlite3_stmt *st, int i, const char *name)
{
	bind_str(st, i, name, CORO_STR_LEN);
}

static void meta(struct sqlite_sink *s, const char *key, const char *text, s64 num, bool is_num)
{
	sqlite3_stmt *st = s->st[ST_META];

	BT(st, 1, key);
	if (is_num)
		BI(st, 2, num);
	else if (text)
		BT(st, 2, text);
	step(s, ST_META);
}

static void sq_begin(void *ctx, const struct capture_info *ci)
{
	struct sqlite_sink *s = ctx;
	char when[80];

	fmt_wall_time(when, sizeof(when), ci->start_ts, ci->realtime_offset, false);
	meta(s, "schema_version", NULL, SQLITE_SCHEMA_VERSION, true);
	meta(s, "tool", "corobpf", 0, false);
	meta(s, "tool_version", ci->tool_version, 0, false);
	meta(s, "clock", "boottime", 0, false);
	meta(s, "start_ts", NULL, (s64)ci->start_ts, true);
	meta(s, "start_time", when[0] ? when : NULL, 0, false);
	meta(s, "realtime_offset_ns", NULL, ci->realtime_offset, true);
	meta(s, "kernel", ci->kernel, 0, false);
	meta(s, "hostname", ci->hostname, 0, false);
}

/* A C++20 wait's awaiter type: its row (the table made with the first). */
static __attribute__((noinline, cold)) void sq_awaiter(struct sqlite_sink *s,
							const struct event *ev)
{
	sqlite3_stmt *st;
	char *msg = NULL;

	if (!s->awaiter_st) {
		if (s->err[0])
			return;
		if (sqlite3_exec(s->db, awaiters_schema, NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(s->err, sizeof(s->err), "cannot create the awaiters table: %s",
				 msg);
			sqlite3_free(msg);
			return;
		}
		if (sqlite3_prepare_v3(s->db, "INSERT INTO awaiters VALUES (?,?,?,?,?,?)", -1,
				       SQLITE_PREPARE_PERSISTENT, &s->awaiter_st,
				       NULL) != SQLITE_OK) {
			fail(s, "cannot prepare a statement");
			return;
		}
	}
	st = s->awaiter_st;
	BI(st, 1, ev->pid);
	if (ev->c)
		BI(st, 2, ev->c->uid);
	BI(st, 3, ev->sw.from);
	BI(st, 4, ev->ts);
	BI(st, 5, ev->sw.obj);
	bind_str(st, 6, ev->sw.awaiter.s, ev->sw.awaiter.len);
	step_stmt(s, st);
}

/* A hole in a thread's events, before ev: its row (the table made with the first). */
static __attribute__((noinline, cold)) void sq_lost(struct sqlite_sink *s, const struct event *ev)
{
	sqlite3_stmt *st;
	char *msg = NULL;

	if (!s->lost_st) {
		if (s->err[0])
			return;
		if (sqlite3_exec(s->db, lost_schema, NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(s->err, sizeof(s->err), "cannot create the lost table: %s", msg);
			sqlite3_free(msg);
			return;
		}
		if (sqlite3_prepare_v3(s->db, "INSERT INTO lost VALUES (?,?,?,?)", -1,
				       SQLITE_PREPARE_PERSISTENT, &s->lost_st, NULL) != SQLITE_OK) {
			fail(s, "cannot prepare a statement");
			return;
		}
	}
	st = s->lost_st;
	BI(st, 1, ev->ts);
	BI(st, 2, ev->pid);
	BI(st, 3, ev->tid);
	BI(st, 4, ev->lost_before);
	step_stmt(s, st);
}

static void sq_event(struct sqlite_sink *s, const struct event *ev)
{
	sqlite3_stmt *st = s->st[ST_EVENT];

	BI(st, 1, ev->ts);
	BI(st, 2, ev->pid);
	BI(st, 3, ev->tid);
	BT(st, 4, event_kind_name(ev->kind));
	if (ev->c)
		BI(st, 6, ev->c->uid);
	if (ev->lost_before)
		BI(st, 16, ev->lost_before);
	if (ev->stack)
		BI(st, 17, ev->stack);
	switch (ev->kind) {
	case EV_CREATE:
		BI(st, 5, ev->create.id);
		BI(st, 7, ev->create.parent);
		break;
	case EV_NAME:
		BI(st, 5, ev->name.id);
		bind_str(st, 14, ev->name.name.s, ev->name.name.len);
		break;
	case EV_READY:
		BI(st, 5, ev->ready.id);
		if (ev->cur_known)
			BI(st, 8, ev->cur);
		break;
	case EV_SWITCH:
		BI(st, 5, ev->sw.from);
		BI(st, 9, ev->sw.to);
		if (ev->to)
			BI(st, 10, ev->to->uid);
		BT(st, 11, coro_reason_name(ev->sw.reason));
		BI(st, 12, ev->sw.obj);
		if (__builtin_expect(ev->sw.awaiter.len != 0, 0))
			sq_awaiter(s, ev);
		break;
	case EV_EXIT:
		BI(st, 5, ev->exit.id);
		BI(st, 13, ev->exit.status);
		break;
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
		if (ev->span.owner_known)
			BI(st, 5, ev->span.owner);
		bind_str(st, 14, ev->span.name.s, ev->span.name.len);
		BI(st, 15, ev->span.depth);
		break;
	default:
		break;
	}
	step(s, ST_EVENT);
}

static void sq_event_cb(void *ctx, const struct event *ev)
{
	struct sqlite_sink *s = ctx;

	if (__builtin_expect(ev->lost_before != 0, 0))
		sq_lost(s, ev);
	switch (ev->kind) {
	case EV_CREATE:
	case EV_NAME:
	case EV_READY:
	case EV_SWITCH:
	case EV_EXIT:
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
		sq_event(s, ev);
		break;
	case EV_OFFCPU_END: {
		sqlite3_stmt *st = s->st[ST_OFFCPU];

		BI(st, 1, ev->pid);
		BI(st, 2, ev->tid);
		if (ev->c) {
			BI(st, 3, ev->c->uid);
			BI(st, 4, ev->c->id);
		}
		BI(st, 5, ev->offcpu.start);
		BI(st, 6, ev->ts);
		BI(st, 7, ev->ts - MIN(ev->offcpu.start, ev->ts));
		BT(st, 8, coro_offcpu_state_name(ev->offcpu.state));
		BI(st, 9, ev->offcpu.runq_ns);
		BI(st, 10, ev->offcpu.cpu);
		step(s, ST_OFFCPU);
		break;
	}
	case EV_PROCESS: {
		sqlite3_stmt *st = s->st[ST_PROCESS];
		char comm[64];

		BI(st, 1, ev->pid);
		utf8_sanitize(comm, sizeof(comm), ev->process.comm.s, ev->process.comm.len);
		BT(st, 2, comm);
		BS(st, 3, ev->process.exe);
		BT(st, 4, coro_proc_mode_name(ev->process.mode));
		BI(st, 5, ev->process.ppid);
		BI(st, 6, ev->ts);
		step(s, ST_PROCESS);
		break;
	}
	case EV_THREAD: {
		sqlite3_stmt *st = s->st[ST_THREAD];
		char comm[64];

		BI(st, 1, ev->pid);
		BI(st, 2, ev->tid);
		utf8_sanitize(comm, sizeof(comm), ev->comm.comm.s, ev->comm.comm.len);
		BT(st, 3, comm);
		BI(st, 4, ev->ts);
		step(s, ST_THREAD);
		break;
	}
	case EV_SWITCH_PATH: {
		sqlite3_stmt *ins;

		/* Prepared here: a few per process at most. */
		if (sqlite3_prepare_v2(s->db, "INSERT INTO switch_paths VALUES (?,?,?,?,?,?,?,?)",
				       -1, &ins, NULL) != SQLITE_OK) {
			fail(s, "cannot prepare an insert");
			break;
		}
		BI(ins, 1, ev->pid);
		BI(ins, 2, ev->ts);
		BT(ins, 3, coro_family_name(ev->switch_path.family));
		BS(ins, 4, ev->switch_path.path);
		BI(ins, 5, ev->switch_path.uprobes);
		BI(ins, 6, ev->switch_path.stepped);
		BS(ins, 7, ev->switch_path.sites);
		BS(ins, 8, ev->switch_path.limits);
		if (sqlite3_step(ins) != SQLITE_DONE)
			fail(s, "cannot record a switch path");
		sqlite3_finalize(ins);
		break;
	}
	case EV_PROC_GONE:
	case EV_PROC_EXIT: {
		s32 status = ev->proc_exit.status;
		sqlite3_stmt *up;

		/* The one UPDATE: prepared here, processes end rarely. */
		if (sqlite3_prepare_v2(s->db, "UPDATE processes SET exit_ts = ?, exit_code = ?, "
				       "signal = ? WHERE pid = ? AND exit_ts IS NULL", -1, &up,
				       NULL) != SQLITE_OK) {
			fail(s, "cannot prepare an update");
			break;
		}
		BI(up, 1, ev->ts);
		if (status >= 0 && WIFEXITED(status))
			BI(up, 2, WEXITSTATUS(status));
		if (status >= 0 && WIFSIGNALED(status))
			BI(up, 3, WTERMSIG(status));
		BI(up, 4, ev->pid);
		if (sqlite3_step(up) != SQLITE_DONE)
			fail(s, "cannot record a process exit");
		sqlite3_finalize(up);
		break;
	}
	default:
		break;
	}
}

static void sq_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			u64 end, u32 tid, u32 reason, u64 obj)
{
	struct sqlite_sink *s = ctx;
	sqlite3_stmt *st = s->st[ST_SLICE];

	BI(st, 1, c->uid);
	BI(st, 2, c->pid);
	if (state == CS_RUNNING && tid)
		BI(st, 3, tid);
	BT(st, 4, coro_state_name(state));
	if (state == CS_SUSPENDED) {
		BT(st, 5, coro_reason_name(reason));
		BI(st, 6, obj);
	}
	BI(st, 7, start);
	BI(st, 8, end);
	BI(st, 9, end - start);
	step(s, ST_SLICE);
}

static void sq_coroutine_end(void *ctx, const struct coro *c)
{
	struct sqlite_sink *s = ctx;
	sqlite3_stmt *st = s->st[ST_CORO];
	char list[1024];
	size_t n = 0;

	BI(st, 1, c->uid);
	BI(st, 2, c->id);
	BI(st, 3, c->pid);
	BI(st, 4, c->parent);
	if (c->parent_uid)
		BI(st, 5, c->parent_uid);
	bind_name(st, 6, c->name);
	if (c->end == CE_EXIT) {
		BI(st, 7, c->status);
		BI(st, 10, c->end_ts);
	}
	if (c->created_seen)
		BI(st, 8, c->created_ts);
	BI(st, 9, c->first_ts);
	BI(st, 11, c->end_ts);
	BT(st, 12, coro_end_name(c->end));
	if (c->end != CE_EXIT) {
		BT(st, 13, coro_state_name(c->end_state));
		if (c->end_state == CS_SUSPENDED) {
			BT(st, 14, coro_reason_name(c->end_reason));
			BI(st, 15, c->end_obj);
		}
	}
	BI(st, 16, c->t_state[CS_RUNNING]);
	BI(st, 17, c->t_state[CS_RUNNABLE]);
	BI(st, 18, c->t_state[CS_SUSPENDED]);
	BI(st, 19, c->t_state[CS_NEW]);
	BI(st, 20, c->t_state[CS_UNKNOWN]);
	BI(st, 21, c->longest_susp);
	BI(st, 22, c->switch_ins);
	BI(st, 23, c->readies);
	list[0] = 0;
	for (u32 i = 0; i < c->ntids && n + 16 < sizeof(list); i++)
		n += snprintf(list + n, sizeof(list) - n, "%s%u", i ? "," : "", c->tids[i]);
	BT(st, 24, list);
	if (c->nspans) {
		n = 0;
		list[0] = 0;
		for (u32 i = 0; i < c->nspans && n + 3 * CORO_STR_LEN + 2 < sizeof(list); i++) {
			if (i)
				list[n++] = ',';
			utf8_sanitize(list + n, sizeof(list) - n, c->spans[i].name, CORO_STR_LEN);
			n += strlen(list + n);
		}
		BT(st, 25, list);
	}
	BI(st, 26, c->name_truncated);
	BI(st, 27, c->uncertain);
	BI(st, 28, c->t_offcpu);
	BI(st, 29, c->t_blocked);
	BI(st, 30, c->t_runq);
	if (c->create_stack)
		BI(st, 31, c->create_stack);
	if (c->park_stack)
		BI(st, 32, c->park_stack);
	step(s, ST_CORO);
}

static void sq_finding(void *ctx, const struct finding *f)
{
	struct sqlite_sink *s = ctx;
	sqlite3_stmt *st = s->st[ST_FINDING];
	char chain[FINDING_CHAIN * (3 * CORO_STR_LEN + 24)];
	u32 have = finding_fields(f);
	size_t n = 0;

	BT(st, 1, finding_kind_name(f->kind));
	BI(st, 2, f->pid);
	if (f->tid)
		BI(st, 3, f->tid);
	if (f->uid)
		BI(st, 4, f->uid);
	if (finding_names_id(f))
		BI(st, 5, f->id);
	if (f->uid)
		bind_name(st, 6, f->name);
	BI(st, 7, f->ts);
	BI(st, 8, f->dur);
	BI(st, 9, f->open);
	if (have & FF_STATE)
		BT(st, 10, coro_state_name(f->state));
	if (have & (FF_WAIT | FF_CAUSE_WAIT)) {
		BT(st, 11, coro_reason_name(f->reason));
		BI(st, 12, f->obj);
	}
	if (have & FF_WAKER)
		BI(st, 13, f->waker);
	if (have & FF_SPAN)
		bind_name(st, 14, f->span);
	if (have & FF_SLOW)
		/* The analyzer makes it just before the span's row: marked slow there. */
		s->slow_serial = f->span_serial;
	if (have & FF_STORM) {
		BI(st, 15, f->count);
		BI(st, 16, f->peak);
	}
	chain[0] = 0;
	for (u32 i = 0; i < f->nchain; i++) {
		n += snprintf(chain + n, sizeof(chain) - n, "%s0x%llx ", i ? " < " : "",
			      (unsigned long long)f->chain[i].id);
		utf8_sanitize(chain + n, sizeof(chain) - n, f->chain[i].name, CORO_STR_LEN);
		n += strlen(chain + n);
	}
	if (n)
		BT(st, 17, chain);
	if (f->stack)
		BI(st, 18, f->stack);
	if (have & FF_SAMPLES) {
		BI(st, 19, f->samples);
		if (have & FF_KEY) {
			BT(st, 20, f->key_frame);
			BI(st, 21, f->key_samples);
		}
	}
	step(s, ST_FINDING);
}

/* A span instance ended: its row (the table made with the first). */
static void sq_span_done(void *ctx, const struct span_done *d)
{
	struct sqlite_sink *s = ctx;
	const struct coro_span *sp = d->sp;
	sqlite3_stmt *st;
	char *msg = NULL;

	if (!s->span_st) {
		if (s->err[0])
			return;
		if (sqlite3_exec(s->db, spans_schema, NULL, NULL, &msg) != SQLITE_OK) {
			snprintf(s->err, sizeof(s->err), "cannot create the spans table: %s", msg);
			sqlite3_free(msg);
			return;
		}
		if (sqlite3_prepare_v3(s->db, "INSERT INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,"
				       "?,?,?,?,?,?,?,?,?,?,?)", -1, SQLITE_PREPARE_PERSISTENT,
				       &s->span_st, NULL) != SQLITE_OK) {
			fail(s, "cannot prepare a statement");
			return;
		}
	}
	st = s->span_st;
	BI(st, 1, sp->serial);
	if (sp->parent)
		BI(st, 2, sp->parent);
	bind_name(st, 3, sp->name);
	BI(st, 4, d->pid);
	if (d->tid)
		BI(st, 5, d->tid);
	if (d->uid) {
		BI(st, 6, d->uid);
		BI(st, 7, d->id);
	}
	BI(st, 8, d->depth);
	BI(st, 9, sp->ts);
	if (d->closed)
		BI(st, 10, d->end);
	/* Unclosed: how long it had been open when its owner (or the trace) ended. */
	BI(st, 11, d->dur);
	BI(st, 12, d->closed);
	BI(st, 13, d->closed && s->slow_serial == sp->serial);
	if (d->uid) {
		BI(st, 14, d->in.running);
		BI(st, 15, d->in.runnable);
		BI(st, 16, d->in.suspended);
		BI(st, 17, d->in.offcpu);
		BI(st, 18, d->in.blocked);
		BI(st, 19, d->in.runq);
		BI(st, 20, d->in.unknown);
		BI(st, 21, sp->longest_ns);
		if (sp->longest_ns) {
			BT(st, 22, coro_reason_name(sp->longest_reason));
			BI(st, 23, sp->longest_obj);
		}
	}
	if (sp->stack)
		BI(st, 24, sp->stack);
	step_stmt(s, st);
}

static void sq_finish(void *ctx, const struct model *m)
{
	struct sqlite_sink *s = ctx;
	char *msg = NULL;

	meta(s, "end_reason", coro_end_reason_name(m->end_reason), 0, false);
	meta(s, "events", NULL, (s64)m->events, true);
	meta(s, "samples", NULL, (s64)m->samples, true);
	meta(s, "coroutines", NULL, (s64)m->coroutines, true);
	for_each_counter(c)
		if (c->sql)
			meta(s, c->sql, NULL, (s64)counter_value(c, m), true);
	/* Every stack defined, whether or not a row names it (frames innermost first, depth 0). */
	if (m->sym) {
		const struct sym_stack *stk;
		size_t it = 0;

		while ((stk = symbolizer_next(m->sym, &it))) {
			sqlite3_stmt *st = s->st[ST_STACK];

			BI(st, 1, stk->id);
			BI(st, 2, stk->pid);
			BI(st, 3, stk->n);
			step(s, ST_STACK);
			for (u32 i = 0; i < stk->n; i++) {
				const struct sym_frame *f = stk->frames[i];

				st = s->st[ST_FRAME];
				BI(st, 1, stk->id);
				BI(st, 2, i);
				BI(st, 3, f->ip);
				if (f->func) {
					BT(st, 4, f->func);
					BI(st, 5, f->func_off);
				}
				if (f->obj) {
					BT(st, 6, f->obj);
					BI(st, 7, f->rel);
				}
				if (f->file) {
					BT(st, 8, f->file);
					BI(st, 9, f->line);
				}
				step(s, ST_FRAME);
			}
		}
	}
	if (m->input_error)
		meta(s, "input_error", m->input_error, 0, false);
	if (sqlite3_exec(s->db, indexes, NULL, NULL, &msg) != SQLITE_OK ||
	    (s->span_st && sqlite3_exec(s->db, spans_indexes, NULL, NULL, &msg) != SQLITE_OK)) {
		if (!s->err[0])
			snprintf(s->err, sizeof(s->err), "cannot create the indexes: %s", msg);
		sqlite3_free(msg);
	}
}

/*
 * The database is written through the descriptor of the output's temporary
 * file, never opened by name: SQLite would open the name again (resolving
 * symbolic links itself), and whoever can rename in the output directory
 * could make root create or overwrite any file through it. A small VFS
 * serves the main database from that descriptor. With journal_mode=OFF
 * SQLite opens no journal; its own temporary files (the sort for the
 * indexes, when it outgrows memory) have no name of ours and go to the
 * default VFS, which creates them with O_EXCL under a random name and
 * unlinks them at once. Anything else asked for by name is refused.
 */
#define FD_VFS_NAME "corobpf-fd"
#define FD_DB_PREFIX "corobpf-fd:"

struct fd_file {
	sqlite3_file base;
	int fd; /* the output's, closed by its owner */
};

static sqlite3_vfs *fd_vfs_base;

static int fd_close(sqlite3_file *f)
{
	return SQLITE_OK;
}

static int fd_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	int fd = ((struct fd_file *)f)->fd;
	char *p = buf;

	while (amt > 0) {
		ssize_t n = pread(fd, p, amt, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return SQLITE_IOERR_READ;
		if (n == 0) {
			/* SQLite's contract: a short read is zero-filled. */
			memset(p, 0, amt);
			return SQLITE_IOERR_SHORT_READ;
		}
		p += n;
		off += n;
		amt -= n;
	}
	return SQLITE_OK;
}

static int fd_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	int fd = ((struct fd_file *)f)->fd;
	const char *p = buf;

	while (amt > 0) {
		ssize_t n = pwrite(fd, p, amt, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && (errno == ENOSPC || errno == EDQUOT) ? SQLITE_FULL
									    : SQLITE_IOERR_WRITE;
		p += n;
		off += n;
		amt -= n;
	}
	return SQLITE_OK;
}

static int fd_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return ftruncate(((struct fd_file *)f)->fd, size) < 0 ? SQLITE_IOERR_TRUNCATE : SQLITE_OK;
}

static int fd_sync(sqlite3_file *f, int flags)
{
	return fdatasync(((struct fd_file *)f)->fd) < 0 ? SQLITE_IOERR_FSYNC : SQLITE_OK;
}

static int fd_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct stat st;

	if (fstat(((struct fd_file *)f)->fd, &st) < 0)
		return SQLITE_IOERR_FSTAT;
	*size = st.st_size;
	return SQLITE_OK;
}

/* One connection, on a file no other process knows as a database: no locks to take. */
static int fd_lock(sqlite3_file *f, int level)
{
	return SQLITE_OK;
}

static int fd_check_reserved_lock(sqlite3_file *f, int *out)
{
	*out = 0;
	return SQLITE_OK;
}

static int fd_file_control(sqlite3_file *f, int op, void *arg)
{
	return SQLITE_NOTFOUND;
}

static int fd_sector_size(sqlite3_file *f)
{
	return 4096; /* the unix VFS's default */
}

static int fd_device_characteristics(sqlite3_file *f)
{
	return SQLITE_IOCAP_POWERSAFE_OVERWRITE; /* as the unix VFS says of local disks */
}

static const sqlite3_io_methods fd_io = {
	.iVersion = 1, /* no shared memory (no WAL), no memory mapping */
	.xClose = fd_close,
	.xRead = fd_read,
	.xWrite = fd_write,
	.xTruncate = fd_truncate,
	.xSync = fd_sync,
	.xFileSize = fd_file_size,
	.xLock = fd_lock,
	.xUnlock = fd_lock,
	.xCheckReservedLock = fd_check_reserved_lock,
	.xFileControl = fd_file_control,
	.xSectorSize = fd_sector_size,
	.xDeviceCharacteristics = fd_device_characteristics,
};

static int fd_vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
		       int *out_flags)
{
	struct fd_file *ff = (struct fd_file *)f;
	char *end;
	long fd;

	if (!name)
		return fd_vfs_base->xOpen(fd_vfs_base, name, f, flags, out_flags);
	f->pMethods = NULL;
	if (!(flags & SQLITE_OPEN_MAIN_DB) || strncmp(name, FD_DB_PREFIX, strlen(FD_DB_PREFIX)))
		return SQLITE_CANTOPEN;
	fd = strtol(name + strlen(FD_DB_PREFIX), &end, 10);
	if (*end || fd < 0)
		return SQLITE_CANTOPEN;
	ff->fd = (int)fd;
	f->pMethods = &fd_io;
	if (out_flags)
		*out_flags = flags;
	return SQLITE_OK;
}

/* Nothing of ours has a name: no journal to delete (SQLite asks when journal_mode changes). */
static int fd_vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	return SQLITE_OK;
}

static int fd_vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	*out = 0; /* no hot journal, no WAL */
	return SQLITE_OK;
}

static int fd_vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	sqlite3_snprintf(n, out, "%s", name);
	return SQLITE_OK;
}

static int fd_vfs_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	return fd_vfs_base->xRandomness(fd_vfs_base, n, out);
}

static int fd_vfs_sleep(sqlite3_vfs *vfs, int us)
{
	return fd_vfs_base->xSleep(fd_vfs_base, us);
}

static int fd_vfs_current_time(sqlite3_vfs *vfs, double *t)
{
	return fd_vfs_base->xCurrentTime(fd_vfs_base, t);
}

static int fd_vfs_last_error(sqlite3_vfs *vfs, int n, char *out)
{
	return fd_vfs_base->xGetLastError(fd_vfs_base, n, out);
}

static sqlite3_vfs fd_vfs = {
	.iVersion = 1,
	.mxPathname = 64,
	.zName = FD_VFS_NAME,
	.xOpen = fd_vfs_open,
	.xDelete = fd_vfs_delete,
	.xAccess = fd_vfs_access,
	.xFullPathname = fd_vfs_full_pathname,
	.xRandomness = fd_vfs_randomness,
	.xSleep = fd_vfs_sleep,
	.xCurrentTime = fd_vfs_current_time,
	.xGetLastError = fd_vfs_last_error,
};

static int fd_vfs_register(void)
{
	if (fd_vfs_base)
		return SQLITE_OK;
	if (sqlite3_initialize() != SQLITE_OK || !(fd_vfs_base = sqlite3_vfs_find(NULL)))
		return SQLITE_ERROR;
	/* Room for the default VFS's files too: the temporary ones are its. */
	fd_vfs.szOsFile = MAX((int)sizeof(struct fd_file), fd_vfs_base->szOsFile);
	return sqlite3_vfs_register(&fd_vfs, 0);
}

struct sqlite_sink *sqlite_sink_new(int fd, const char *path, struct model *m,
				    struct model_observer *obs, struct finding_sink *fs, char *err,
				    size_t errlen)
{
	struct sqlite_sink *s = xcalloc(1, sizeof(*s));
	char name[64], *msg = NULL;

	s->m = m;
	snprintf(name, sizeof(name), FD_DB_PREFIX "%d", fd);
	if (fd_vfs_register() != SQLITE_OK) {
		snprintf(err, errlen, "cannot create the database %s: SQLite does not start", path);
		goto fail;
	}
	if (sqlite3_open_v2(name, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
			    FD_VFS_NAME) != SQLITE_OK) {
		snprintf(err, errlen, "cannot create the database %s: %s", path,
			 s->db ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	/* A new file that appears under its name only when complete: no journal needed. */
	if (sqlite3_exec(s->db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
			 "PRAGMA page_size=65536; BEGIN;", NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "cannot create the schema in %s: %s", path, msg);
		sqlite3_free(msg);
		goto fail;
	}
	for (int i = 0; i < ST_N; i++) {
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i],
				       NULL) != SQLITE_OK) {
			snprintf(err, errlen, "cannot prepare a statement: %s", sqlite3_errmsg(s->db));
			goto fail;
		}
	}
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = sq_begin;
	obs->event = sq_event_cb;
	obs->interval = sq_interval;
	obs->coroutine_end = sq_coroutine_end;
	obs->finish = sq_finish;
	obs->span_done = sq_span_done;
	fs->ctx = s;
	fs->finding = sq_finding;
	return s;
fail:
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	free(s);
	return NULL;
}

int sqlite_sink_close(struct sqlite_sink *s, char *err, size_t errlen)
{
	char *msg = NULL;
	int ret = 0;

	if (!s)
		return 0;
	if (!s->err[0] && sqlite3_exec(s->db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(s->err, sizeof(s->err), "cannot commit: %s", msg);
		sqlite3_free(msg);
	}
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_finalize(s->span_st);
	sqlite3_finalize(s->awaiter_st);
	sqlite3_finalize(s->lost_st);
	if (sqlite3_close(s->db) != SQLITE_OK && !s->err[0])
		snprintf(s->err, sizeof(s->err), "cannot close: %s", sqlite3_errmsg(s->db));
	if (s->err[0]) {
		snprintf(err, errlen, "%s", s->err);
		ret = -1;
	}
	free(s);
	return ret;
}
