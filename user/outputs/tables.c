// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tables of the SQL outputs: each table's columns once, and the fillers
 * of its rows. See tables.h.
 *
 * A table's columns are one list (X(enum, name, type, flags) per column):
 * the list makes the table's definition and the names its filler sets
 * values by, so that a column is defined in one place.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "tables.h"

#define COL_ENUM(e, name, type, flags) e,
#define COL_DEF(e, name, type, flags) {name, type, flags},
#define TABLE(id, name, list, flags, wrap)                                                         \
	[id] = {name, list##_cols, sizeof(list##_cols) / sizeof(list##_cols[0]), flags, wrap}

/* clang-format off */
#define PROCESSES(X) \
	X(PR_PID, "pid", COL_INT, 0) \
	X(PR_COMM, "comm", COL_NAME, 0) \
	X(PR_EXE, "exe", COL_TEXT, 0) \
	X(PR_MODE, "mode", COL_TEXT, 0) \
	X(PR_PPID, "ppid", COL_INT, 0) \
	X(PR_START_TS, "start_ts", COL_INT, 0) \
	X(PR_EXIT_TS, "exit_ts", COL_INT, 0) \
	X(PR_EXIT_CODE, "exit_code", COL_INT, 0) \
	X(PR_SIGNAL, "signal", COL_INT, 0)

#define THREADS(X) \
	X(TH_PID, "pid", COL_INT, 0) \
	X(TH_TID, "tid", COL_INT, 0) \
	X(TH_COMM, "comm", COL_NAME, 0) \
	X(TH_FIRST_TS, "first_ts", COL_INT, 0)

#define SWITCH_PATHS(X) \
	X(SW_PID, "pid", COL_INT, 0) \
	X(SW_TS, "ts", COL_INT, 0) \
	X(SW_FAMILY, "family", COL_TEXT, 0) \
	X(SW_OBJECT, "object", COL_TEXT, 0) \
	X(SW_UPROBES, "uprobes", COL_INT, 0) \
	X(SW_STEPPED, "single_stepped", COL_INT, 0) \
	X(SW_SITES, "sites", COL_TEXT, 0) \
	X(SW_LIMITS, "limits", COL_TEXT, 0)

#define COROUTINES(X) \
	X(CO_UID, "uid", COL_INT, COL_SQLITE_KEY) \
	X(CO_ID, "id", COL_ID, 0) \
	X(CO_PID, "pid", COL_INT, 0) \
	X(CO_PARENT_ID, "parent_id", COL_ID, 0) \
	X(CO_PARENT_UID, "parent_uid", COL_INT, 0) \
	X(CO_NAME, "name", COL_NAME, 0) \
	X(CO_STATUS, "status", COL_INT, 0) \
	X(CO_CREATED_TS, "created_ts", COL_INT, 0) \
	X(CO_FIRST_SEEN_TS, "first_seen_ts", COL_INT, 0) \
	X(CO_EXITED_TS, "exited_ts", COL_INT, 0) \
	X(CO_ENDED_TS, "ended_ts", COL_INT, 0) \
	X(CO_END, "end", COL_TEXT, 0) \
	X(CO_STATE_AT_END, "state_at_end", COL_TEXT, 0) \
	X(CO_REASON_AT_END, "reason_at_end", COL_TEXT, 0) \
	X(CO_OBJ_AT_END, "obj_at_end", COL_ID, 0) \
	X(CO_RUNNING_NS, "running_ns", COL_INT, 0) \
	X(CO_RUNNABLE_NS, "runnable_ns", COL_INT, 0) \
	X(CO_SUSPENDED_NS, "suspended_ns", COL_INT, 0) \
	X(CO_NEW_NS, "new_ns", COL_INT, 0) \
	X(CO_UNKNOWN_NS, "unknown_ns", COL_INT, 0) \
	X(CO_LONGEST_SUSPENDED_NS, "longest_suspended_ns", COL_INT, 0) \
	X(CO_SWITCH_INS, "switch_ins", COL_INT, 0) \
	X(CO_READIES, "readies", COL_INT, 0) \
	X(CO_THREADS, "threads", COL_TIDS, 0) \
	X(CO_OPEN_SPANS, "open_spans", COL_TEXT, 0) \
	X(CO_NAME_TRUNCATED, "name_truncated", COL_INT, 0) \
	X(CO_UNCERTAIN, "uncertain", COL_INT, 0) \
	X(CO_OFFCPU_NS, "offcpu_ns", COL_INT, 0) \
	X(CO_BLOCKED_NS, "blocked_ns", COL_INT, 0) \
	X(CO_RUNQ_NS, "runq_ns", COL_INT, 0) \
	X(CO_CREATE_STACK, "create_stack", COL_STACK, 0) \
	X(CO_PARK_STACK, "park_stack", COL_STACK, 0)

#define OFFCPU(X) \
	X(OF_PID, "pid", COL_INT, 0) \
	X(OF_TID, "tid", COL_INT, 0) \
	X(OF_UID, "uid", COL_INT, 0) \
	X(OF_ID, "id", COL_ID, 0) \
	X(OF_START_TS, "start_ts", COL_INT, 0) \
	X(OF_END_TS, "end_ts", COL_INT, 0) \
	X(OF_DUR_NS, "dur_ns", COL_INT, 0) \
	X(OF_STATE, "state", COL_TEXT, 0) \
	X(OF_RUNQ_NS, "runq_ns", COL_INT, 0) \
	X(OF_CPU, "cpu", COL_INT, 0)

#define EVENTS(X) \
	X(EVT_TS, "ts", COL_INT, 0) \
	X(EVT_PID, "pid", COL_INT, 0) \
	X(EVT_TID, "tid", COL_INT, 0) \
	X(EVT_EV, "ev", COL_TEXT, 0) \
	X(EVT_ID, "id", COL_ID, 0) \
	X(EVT_UID, "uid", COL_INT, 0) \
	X(EVT_PARENT, "parent", COL_ID, 0) \
	X(EVT_WAKER, "waker", COL_ID, 0) \
	X(EVT_TO_ID, "to_id", COL_ID, 0) \
	X(EVT_TO_UID, "to_uid", COL_INT, 0) \
	X(EVT_REASON, "reason", COL_TEXT, 0) \
	X(EVT_OBJ, "obj", COL_ID, 0) \
	X(EVT_STATUS, "status", COL_INT, 0) \
	X(EVT_NAME, "name", COL_NAME, 0) \
	X(EVT_DEPTH, "depth", COL_INT, 0) \
	X(EVT_LOST_BEFORE, "lost_before", COL_INT, 0) \
	X(EVT_STACK, "stack", COL_STACK, 0)

#define SLICES(X) \
	X(SL_UID, "uid", COL_INT, 0) \
	X(SL_PID, "pid", COL_INT, 0) \
	X(SL_TID, "tid", COL_INT, 0) \
	X(SL_STATE, "state", COL_TEXT, 0) \
	X(SL_REASON, "reason", COL_TEXT, 0) \
	X(SL_OBJ, "obj", COL_ID, 0) \
	X(SL_START_TS, "start_ts", COL_INT, 0) \
	X(SL_END_TS, "end_ts", COL_INT, 0) \
	X(SL_DUR_NS, "dur_ns", COL_INT, 0)

#define FINDINGS(X) \
	X(FI_KIND, "kind", COL_TEXT, 0) \
	X(FI_PID, "pid", COL_INT, 0) \
	X(FI_TID, "tid", COL_INT, 0) \
	X(FI_COROUTINE_UID, "coroutine_uid", COL_INT, 0) \
	X(FI_COROUTINE_ID, "coroutine_id", COL_ID, 0) \
	X(FI_NAME, "name", COL_NAME, 0) \
	X(FI_TS, "ts", COL_INT, 0) \
	X(FI_DUR_NS, "dur_ns", COL_INT, 0) \
	X(FI_OPEN, "open", COL_INT, 0) \
	X(FI_STATE, "state", COL_TEXT, 0) \
	X(FI_REASON, "reason", COL_TEXT, 0) \
	X(FI_OBJ, "obj", COL_ID, 0) \
	X(FI_WAKER, "waker", COL_ID, 0) \
	X(FI_SPAN, "span", COL_NAME, 0) \
	X(FI_COUNT, "count", COL_INT, 0) \
	X(FI_PEAK_PER_S, "peak_per_s", COL_INT, 0) \
	X(FI_CHAIN, "chain", COL_TEXT, 0) \
	X(FI_STACK, "stack", COL_STACK, 0) \
	X(FI_SAMPLES, "samples", COL_INT, 0) \
	X(FI_KEY_FRAME, "key_frame", COL_TEXT, 0) \
	X(FI_KEY_SAMPLES, "key_samples", COL_INT, 0)

#define STACKS(X) \
	X(ST_ID, "id", COL_INT, COL_SQLITE_KEY) \
	X(ST_PID, "pid", COL_INT, 0) \
	X(ST_NFRAMES, "nframes", COL_INT, 0)

#define FRAMES(X) \
	X(FR_STACK_ID, "stack_id", COL_INT, 0) \
	X(FR_DEPTH, "depth", COL_INT, 0) \
	X(FR_IP, "ip", COL_ID, 0) \
	X(FR_FUNC, "func", COL_TEXT, 0) \
	X(FR_FUNC_OFF, "func_off", COL_INT, 0) \
	X(FR_OBJECT, "object", COL_TEXT, 0) \
	X(FR_REL, "rel", COL_ID, 0) \
	X(FR_FILE, "file", COL_TEXT, 0) \
	X(FR_LINE, "line", COL_INT, 0)

#define SPANS(X) \
	X(SP_SERIAL, "serial", COL_INT, COL_SQLITE_KEY) \
	X(SP_PARENT, "parent", COL_INT, 0) \
	X(SP_NAME, "name", COL_NAME, 0) \
	X(SP_PID, "pid", COL_INT, 0) \
	X(SP_TID, "tid", COL_INT, 0) \
	X(SP_COROUTINE_UID, "coroutine_uid", COL_INT, 0) \
	X(SP_COROUTINE_ID, "coroutine_id", COL_ID, 0) \
	X(SP_DEPTH, "depth", COL_INT, 0) \
	X(SP_BEGIN_TS, "begin_ts", COL_INT, 0) \
	X(SP_END_TS, "end_ts", COL_INT, 0) \
	X(SP_DUR_NS, "dur_ns", COL_INT, 0) \
	X(SP_CLOSED, "closed", COL_INT, 0) \
	X(SP_SLOW, "slow", COL_INT, 0) \
	X(SP_RUNNING_NS, "running_ns", COL_INT, 0) \
	X(SP_RUNNABLE_NS, "runnable_ns", COL_INT, 0) \
	X(SP_SUSPENDED_NS, "suspended_ns", COL_INT, 0) \
	X(SP_OFFCPU_NS, "offcpu_ns", COL_INT, 0) \
	X(SP_BLOCKED_NS, "blocked_ns", COL_INT, 0) \
	X(SP_RUNQ_NS, "runq_ns", COL_INT, 0) \
	X(SP_UNKNOWN_NS, "unknown_ns", COL_INT, 0) \
	X(SP_LONGEST_SUSPENDED_NS, "longest_suspended_ns", COL_INT, 0) \
	X(SP_LONGEST_REASON, "longest_reason", COL_TEXT, 0) \
	X(SP_LONGEST_OBJ, "longest_obj", COL_ID, 0) \
	X(SP_STACK, "stack", COL_STACK, 0)

#define AWAITERS(X) \
	X(AW_PID, "pid", COL_INT, 0) \
	X(AW_UID, "uid", COL_INT, 0) \
	X(AW_ID, "id", COL_ID, 0) \
	X(AW_TS, "ts", COL_INT, 0) \
	X(AW_OBJ, "obj", COL_ID, 0) \
	X(AW_AWAITER, "awaiter", COL_NAME, 0)

#define LOST(X) \
	X(LO_TS, "ts", COL_INT, 0) \
	X(LO_PID, "pid", COL_INT, 0) \
	X(LO_TID, "tid", COL_INT, 0) \
	X(LO_COUNT, "count", COL_INT, 0)
/* clang-format on */

enum { PROCESSES(COL_ENUM) };
enum { THREADS(COL_ENUM) };
enum { SWITCH_PATHS(COL_ENUM) };
enum { COROUTINES(COL_ENUM) };
enum { OFFCPU(COL_ENUM) };
enum { EVENTS(COL_ENUM) };
enum { SLICES(COL_ENUM) };
enum { FINDINGS(COL_ENUM) };
enum { STACKS(COL_ENUM) };
enum { FRAMES(COL_ENUM) };
enum { SPANS(COL_ENUM) };
enum { AWAITERS(COL_ENUM) };
enum { LOST(COL_ENUM) };

static const struct column processes_cols[] = {PROCESSES(COL_DEF)};
static const struct column threads_cols[] = {THREADS(COL_DEF)};
static const struct column switch_paths_cols[] = {SWITCH_PATHS(COL_DEF)};
static const struct column coroutines_cols[] = {COROUTINES(COL_DEF)};
static const struct column offcpu_cols[] = {OFFCPU(COL_DEF)};
static const struct column events_cols[] = {EVENTS(COL_DEF)};
static const struct column slices_cols[] = {SLICES(COL_DEF)};
static const struct column findings_cols[] = {FINDINGS(COL_DEF)};
static const struct column stacks_cols[] = {STACKS(COL_DEF)};
static const struct column frames_cols[] = {FRAMES(COL_DEF)};
static const struct column spans_cols[] = {SPANS(COL_DEF)};
static const struct column awaiters_cols[] = {AWAITERS(COL_DEF)};
static const struct column lost_cols[] = {LOST(COL_DEF)};

/* clang-format off */
const struct table tables[T_NTABLES] = {
	TABLE(T_PROCESSES, "processes", processes, 0, 86),
	TABLE(T_THREADS, "threads", threads, 0, 86),
	TABLE(T_SWITCH_PATHS, "switch_paths", switch_paths, 0, 86),
	TABLE(T_COROUTINES, "coroutines", coroutines, 0, 86),
	TABLE(T_OFFCPU, "offcpu", offcpu, 0, 90),
	TABLE(T_EVENTS, "events", events, 0, 86),
	TABLE(T_SLICES, "slices", slices, 0, 86),
	TABLE(T_FINDINGS, "findings", findings, 0, 86),
	TABLE(T_STACKS, "stacks", stacks, 0, 86),
	TABLE(T_FRAMES, "frames", frames, 0, 86),
	TABLE(T_SPANS, "spans", spans, TABLE_LAZY, 90),
	TABLE(T_AWAITERS, "awaiters", awaiters, TABLE_LAZY, 86),
	TABLE(T_LOST, "lost", lost, TABLE_LAZY | TABLE_SQLITE_ONLY, 86),
};
/* clang-format on */

_Static_assert(sizeof(coroutines_cols) / sizeof(coroutines_cols[0]) <= ROW_MAX, "ROW_MAX");
_Static_assert(T_NSTORE == T_NTABLES - 1, "one table SQLite alone has, the last");
_Static_assert(PR_EXIT_TS == PROCESS_EXIT_COL && PR_SIGNAL == PR_EXIT_TS + 2,
	       "a process's exit is its last three columns");

/* ---- the schemas ---- */

const char *col_sqlite_type(const struct column *c)
{
	if (c->flags & COL_SQLITE_KEY)
		return "INTEGER PRIMARY KEY";
	return c->type == COL_TEXT || c->type == COL_NAME || c->type == COL_TIDS ? "TEXT"
										  : "INTEGER";
}

const char *col_pg_type(const struct column *c)
{
	return c->type == COL_TEXT || c->type == COL_NAME || c->type == COL_TIDS ? "text"
										  : "bigint";
}

/* Columns "name type", ", " between, lines broken before the column that would pass wrap. */
static size_t put_columns(char *buf, size_t len, size_t n, const struct table *t, size_t line,
			  bool pg)
{
	for (u32 i = 0; i < t->ncols; i++) {
		const struct column *c = &t->cols[i];
		char one[96];
		int k = snprintf(one, sizeof(one), pg ? "\"%s\" %s%s" : "%s %s%s", c->name,
				 pg ? col_pg_type(c) : col_sqlite_type(c), i + 1 < t->ncols ? "," : ")");

		if (i && n - line + 1 + (size_t)k > t->sqlite_wrap) {
			n += snprintf(buf + n, n < len ? len - n : 0, "\n  ");
			line = n - 2;
		} else if (i) {
			n += snprintf(buf + n, n < len ? len - n : 0, " ");
		}
		n += snprintf(buf + n, n < len ? len - n : 0, "%s", one);
	}
	return n;
}

size_t tables_sqlite_create(const struct table *t, char *buf, size_t len)
{
	size_t n = snprintf(buf, len, "CREATE TABLE %s (", t->name);

	return put_columns(buf, len, n, t, 0, false);
}

size_t tables_pg_create(const struct table *t, char *buf, size_t len)
{
	size_t n = snprintf(buf, len, "CREATE TABLE %s (capture_id bigint, ", t->name);

	return put_columns(buf, len, n, t, 0, true);
}

/* ---- filling rows ---- */

static void row_init(struct row *r, enum table_id t)
{
	r->t = &tables[t];
	for (u32 i = 0; i < r->t->ncols; i++)
		r->v[i].kind = ROW_NULL;
	r->used = 0;
	r->update = false;
}

static inline void set_int(struct row *r, int col, s64 v)
{
	r->v[col].kind = ROW_INT;
	r->v[col].i = v;
}

static inline void set_text(struct row *r, int col, const char *s, size_t len)
{
	r->v[col].kind = ROW_TEXT;
	r->v[col].s = s;
	r->v[col].len = len;
}

/* A string of up to max bytes, up to its first NUL. */
static inline void set_str(struct row *r, int col, const char *s, size_t max)
{
	set_text(r, col, s, strnlen(s, max));
}

static inline void set_evstr(struct row *r, int col, struct ev_str str)
{
	set_text(r, col, str.s, str.len);
}

/* A NUL-terminated string (a name from the program's tables, a symbol, a path). */
static inline void set_cstr(struct row *r, int col, const char *s)
{
	set_text(r, col, s, strlen(s));
}

static void row_event(struct row *r, const struct event *ev)
{
	row_init(r, T_EVENTS);
	set_int(r, EVT_TS, ev->ts);
	set_int(r, EVT_PID, ev->pid);
	set_int(r, EVT_TID, ev->tid);
	set_cstr(r, EVT_EV, event_kind_name(ev->kind));
	if (ev->c)
		set_int(r, EVT_UID, ev->c->uid);
	if (ev->lost_before)
		set_int(r, EVT_LOST_BEFORE, ev->lost_before);
	if (ev->stack)
		set_int(r, EVT_STACK, ev->stack);
	switch (ev->kind) {
	case EV_CREATE:
		set_int(r, EVT_ID, ev->create.id);
		set_int(r, EVT_PARENT, ev->create.parent);
		break;
	case EV_NAME:
		set_int(r, EVT_ID, ev->name.id);
		set_evstr(r, EVT_NAME, ev->name.name);
		break;
	case EV_READY:
		set_int(r, EVT_ID, ev->ready.id);
		if (ev->cur_known)
			set_int(r, EVT_WAKER, ev->cur);
		break;
	case EV_ANNOUNCE:
		set_int(r, EVT_ID, ev->announce.id);
		set_int(r, EVT_PARENT, ev->announce.parent);
		set_evstr(r, EVT_NAME, ev->announce.name);
		set_cstr(r, EVT_REASON, ev->announce.reason ? coro_reason_name(ev->announce.reason)
							      : "running");
		set_int(r, EVT_OBJ, ev->announce.obj);
		break;
	case EV_SWITCH:
		set_int(r, EVT_ID, ev->sw.from);
		set_int(r, EVT_TO_ID, ev->sw.to);
		if (ev->to)
			set_int(r, EVT_TO_UID, ev->to->uid);
		set_cstr(r, EVT_REASON, coro_reason_name(ev->sw.reason));
		set_int(r, EVT_OBJ, ev->sw.obj);
		break;
	case EV_EXIT:
		set_int(r, EVT_ID, ev->exit.id);
		set_int(r, EVT_STATUS, ev->exit.status);
		break;
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
		if (ev->span.owner_known)
			set_int(r, EVT_ID, ev->span.owner);
		set_evstr(r, EVT_NAME, ev->span.name);
		set_int(r, EVT_DEPTH, ev->span.depth);
		break;
	default:
		break;
	}
}

void tables_event_rows(struct table_rows *tr, const struct event *ev, row_out_fn out, void *ctx)
{
	struct row r;
	s32 status;

	if (__builtin_expect(ev->lost_before != 0, 0) && !(tr->skip & (1u << T_LOST))) {
		/* The hole in its thread's events before it. */
		row_init(&r, T_LOST);
		set_int(&r, LO_TS, ev->ts);
		set_int(&r, LO_PID, ev->pid);
		set_int(&r, LO_TID, ev->tid);
		set_int(&r, LO_COUNT, ev->lost_before);
		out(ctx, &r);
	}
	switch (ev->kind) {
	case EV_SWITCH:
		if (__builtin_expect(ev->sw.awaiter.len != 0, 0)) {
			/* A C++20 wait's awaiter type, keyed as the wait's rows elsewhere. */
			row_init(&r, T_AWAITERS);
			set_int(&r, AW_PID, ev->pid);
			if (ev->c)
				set_int(&r, AW_UID, ev->c->uid);
			set_int(&r, AW_ID, ev->sw.from);
			set_int(&r, AW_TS, ev->ts);
			set_int(&r, AW_OBJ, ev->sw.obj);
			set_evstr(&r, AW_AWAITER, ev->sw.awaiter);
			out(ctx, &r);
		}
		/* fall through */
	case EV_CREATE:
	case EV_NAME:
	case EV_READY:
	case EV_EXIT:
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
	case EV_ANNOUNCE:
	case EV_ANNOUNCE_DONE:
		row_event(&r, ev);
		out(ctx, &r);
		break;
	case EV_OFFCPU_END:
		row_init(&r, T_OFFCPU);
		set_int(&r, OF_PID, ev->pid);
		set_int(&r, OF_TID, ev->tid);
		if (ev->c) {
			set_int(&r, OF_UID, ev->c->uid);
			set_int(&r, OF_ID, ev->c->id);
		}
		set_int(&r, OF_START_TS, ev->offcpu.start);
		set_int(&r, OF_END_TS, ev->ts);
		set_int(&r, OF_DUR_NS, ev->ts - MIN(ev->offcpu.start, ev->ts));
		set_cstr(&r, OF_STATE, coro_offcpu_state_name(ev->offcpu.state));
		set_int(&r, OF_RUNQ_NS, ev->offcpu.runq_ns);
		set_int(&r, OF_CPU, ev->offcpu.cpu);
		out(ctx, &r);
		break;
	case EV_PROCESS:
		row_init(&r, T_PROCESSES);
		set_int(&r, PR_PID, ev->pid);
		set_evstr(&r, PR_COMM, ev->process.comm);
		set_evstr(&r, PR_EXE, ev->process.exe);
		set_cstr(&r, PR_MODE, coro_proc_mode_name(ev->process.mode));
		set_int(&r, PR_PPID, ev->process.ppid);
		set_int(&r, PR_START_TS, ev->ts);
		out(ctx, &r);
		break;
	case EV_THREAD:
		row_init(&r, T_THREADS);
		set_int(&r, TH_PID, ev->pid);
		set_int(&r, TH_TID, ev->tid);
		set_evstr(&r, TH_COMM, ev->comm.comm);
		set_int(&r, TH_FIRST_TS, ev->ts);
		out(ctx, &r);
		break;
	case EV_SWITCH_PATH:
		row_init(&r, T_SWITCH_PATHS);
		set_int(&r, SW_PID, ev->pid);
		set_int(&r, SW_TS, ev->ts);
		set_cstr(&r, SW_FAMILY, coro_family_name(ev->switch_path.family));
		set_evstr(&r, SW_OBJECT, ev->switch_path.path);
		set_int(&r, SW_UPROBES, ev->switch_path.uprobes);
		set_int(&r, SW_STEPPED, ev->switch_path.stepped);
		set_evstr(&r, SW_SITES, ev->switch_path.sites);
		set_evstr(&r, SW_LIMITS, ev->switch_path.limits);
		out(ctx, &r);
		break;
	case EV_PROC_GONE:
	case EV_PROC_EXIT:
		/* The exit of the process's row that has none yet. */
		row_init(&r, T_PROCESSES);
		r.update = true;
		status = ev->proc_exit.status;
		set_int(&r, PR_PID, ev->pid);
		set_int(&r, PR_EXIT_TS, ev->ts);
		if (status >= 0 && WIFEXITED(status))
			set_int(&r, PR_EXIT_CODE, WEXITSTATUS(status));
		if (status >= 0 && WIFSIGNALED(status))
			set_int(&r, PR_SIGNAL, WTERMSIG(status));
		out(ctx, &r);
		break;
	default:
		break;
	}
}

void tables_slice_row(struct row *r, const struct coro *c, enum coro_state state, u64 start,
		      u64 end, u32 tid, u32 reason, u64 obj)
{
	row_init(r, T_SLICES);
	set_int(r, SL_UID, c->uid);
	set_int(r, SL_PID, c->pid);
	if (state == CS_RUNNING && tid)
		set_int(r, SL_TID, tid);
	set_cstr(r, SL_STATE, coro_state_name(state));
	if (state == CS_SUSPENDED) {
		set_cstr(r, SL_REASON, coro_reason_name(reason));
		set_int(r, SL_OBJ, obj);
	}
	set_int(r, SL_START_TS, start);
	set_int(r, SL_END_TS, end);
	set_int(r, SL_DUR_NS, end - start);
}

void tables_coroutine_row(struct row *r, const struct coro *c)
{
	/* The open spans' names, made valid, comma separated: as many as 1 KiB holds. */
	const size_t room = 1024;
	char *spans = r->scratch;
	size_t n = 0;

	row_init(r, T_COROUTINES);
	set_int(r, CO_UID, c->uid);
	set_int(r, CO_ID, c->id);
	set_int(r, CO_PID, c->pid);
	set_int(r, CO_PARENT_ID, c->parent);
	if (c->parent_uid)
		set_int(r, CO_PARENT_UID, c->parent_uid);
	set_str(r, CO_NAME, coro_name(c), CORO_NAME_MAX);
	if (c->end == CE_EXIT) {
		set_int(r, CO_STATUS, c->status);
		set_int(r, CO_EXITED_TS, c->end_ts);
	}
	if (c->created_seen)
		set_int(r, CO_CREATED_TS, c->created_ts);
	set_int(r, CO_FIRST_SEEN_TS, c->first_ts);
	set_int(r, CO_ENDED_TS, c->end_ts);
	set_cstr(r, CO_END, coro_end_name(c->end));
	if (c->end != CE_EXIT) {
		set_cstr(r, CO_STATE_AT_END, coro_state_name(c->end_state));
		if (c->end_state == CS_SUSPENDED) {
			set_cstr(r, CO_REASON_AT_END, coro_reason_name(c->end_reason));
			set_int(r, CO_OBJ_AT_END, c->end_obj);
		}
	}
	set_int(r, CO_RUNNING_NS, c->t_state[CS_RUNNING]);
	set_int(r, CO_RUNNABLE_NS, c->t_state[CS_RUNNABLE]);
	set_int(r, CO_SUSPENDED_NS, c->t_state[CS_SUSPENDED]);
	set_int(r, CO_NEW_NS, c->t_state[CS_NEW]);
	set_int(r, CO_UNKNOWN_NS, c->t_state[CS_UNKNOWN]);
	set_int(r, CO_LONGEST_SUSPENDED_NS, c->longest_susp);
	set_int(r, CO_SWITCH_INS, c->switch_ins);
	set_int(r, CO_READIES, c->readies);
	r->v[CO_THREADS].kind = ROW_TIDS;
	r->v[CO_THREADS].tids = c->tids;
	r->v[CO_THREADS].len = c->ntids;
	if (c->nspans) {
		spans[0] = 0;
		for (u32 i = 0; i < c->nspans && n + 3 * CORO_STR_LEN + 2 < room; i++) {
			if (i)
				spans[n++] = ',';
			utf8_sanitize(spans + n, room - n, c->spans[i].name, CORO_STR_LEN);
			n += strlen(spans + n);
		}
		set_text(r, CO_OPEN_SPANS, spans, n);
		r->used = n + 1;
	}
	set_int(r, CO_NAME_TRUNCATED, c->name_truncated);
	set_int(r, CO_UNCERTAIN, c->uncertain);
	set_int(r, CO_OFFCPU_NS, c->t_offcpu);
	set_int(r, CO_BLOCKED_NS, c->t_blocked);
	set_int(r, CO_RUNQ_NS, c->t_runq);
	if (c->create_stack)
		set_int(r, CO_CREATE_STACK, c->create_stack);
	if (c->park_stack)
		set_int(r, CO_PARK_STACK, c->park_stack);
}

void tables_finding_row(struct table_rows *tr, struct row *r, const struct finding *f)
{
	char *chain = r->scratch;
	size_t n = 0, room = FINDING_CHAIN * (3 * CORO_NAME_MAX + 24);
	u32 have = finding_fields(f);

	_Static_assert(FINDING_CHAIN * (3 * CORO_NAME_MAX + 24) <= sizeof(r->scratch), "a chain");
	row_init(r, T_FINDINGS);
	set_cstr(r, FI_KIND, finding_kind_name(f->kind));
	set_int(r, FI_PID, f->pid);
	if (f->tid)
		set_int(r, FI_TID, f->tid);
	if (f->uid)
		set_int(r, FI_COROUTINE_UID, f->uid);
	if (finding_names_id(f))
		set_int(r, FI_COROUTINE_ID, f->id);
	if (f->uid)
		set_str(r, FI_NAME, f->name, CORO_NAME_MAX);
	set_int(r, FI_TS, f->ts);
	set_int(r, FI_DUR_NS, f->dur);
	set_int(r, FI_OPEN, f->open);
	if (have & FF_STATE)
		set_cstr(r, FI_STATE, coro_state_name(f->state));
	if (have & (FF_WAIT | FF_CAUSE_WAIT)) {
		set_cstr(r, FI_REASON, coro_reason_name(f->reason));
		set_int(r, FI_OBJ, f->obj);
	}
	if (have & FF_WAKER)
		set_int(r, FI_WAKER, f->waker);
	if (have & FF_SPAN)
		set_str(r, FI_SPAN, f->span, CORO_STR_LEN);
	if (have & FF_SLOW)
		/* The analyzer makes it just before the span's row: marked slow there. */
		tr->slow_serial = f->span_serial;
	if (have & FF_STORM) {
		set_int(r, FI_COUNT, f->count);
		set_int(r, FI_PEAK_PER_S, f->peak);
	}
	chain[0] = 0;
	for (u32 i = 0; i < f->nchain; i++) {
		n += snprintf(chain + n, room - n, "%s0x%llx ", i ? " < " : "",
			      (unsigned long long)f->chain[i].id);
		utf8_sanitize(chain + n, room - n, f->chain[i].name, CORO_NAME_MAX);
		n += strlen(chain + n);
	}
	if (n)
		set_text(r, FI_CHAIN, chain, n);
	r->used = n + 1;
	if (f->stack)
		set_int(r, FI_STACK, f->stack);
	if (have & FF_SAMPLES) {
		set_int(r, FI_SAMPLES, f->samples);
		if (have & FF_KEY) {
			set_str(r, FI_KEY_FRAME, f->key_frame, sizeof(f->key_frame));
			set_int(r, FI_KEY_SAMPLES, f->key_samples);
		}
	}
}

void tables_span_row(struct table_rows *tr, struct row *r, const struct span_done *d)
{
	const struct coro_span *sp = d->sp;

	row_init(r, T_SPANS);
	set_int(r, SP_SERIAL, sp->serial);
	if (sp->parent)
		set_int(r, SP_PARENT, sp->parent);
	set_str(r, SP_NAME, sp->name, CORO_STR_LEN);
	set_int(r, SP_PID, d->pid);
	if (d->tid)
		set_int(r, SP_TID, d->tid);
	if (d->uid) {
		set_int(r, SP_COROUTINE_UID, d->uid);
		set_int(r, SP_COROUTINE_ID, d->id);
	}
	set_int(r, SP_DEPTH, d->depth);
	set_int(r, SP_BEGIN_TS, sp->ts);
	if (d->closed)
		set_int(r, SP_END_TS, d->end);
	/* Unclosed: how long it had been open when its owner (or the trace) ended. */
	set_int(r, SP_DUR_NS, d->dur);
	set_int(r, SP_CLOSED, d->closed);
	set_int(r, SP_SLOW, d->closed && tr->slow_serial == sp->serial);
	if (d->uid) {
		set_int(r, SP_RUNNING_NS, d->in.running);
		set_int(r, SP_RUNNABLE_NS, d->in.runnable);
		set_int(r, SP_SUSPENDED_NS, d->in.suspended);
		set_int(r, SP_OFFCPU_NS, d->in.offcpu);
		set_int(r, SP_BLOCKED_NS, d->in.blocked);
		set_int(r, SP_RUNQ_NS, d->in.runq);
		set_int(r, SP_UNKNOWN_NS, d->in.unknown);
		set_int(r, SP_LONGEST_SUSPENDED_NS, sp->longest_ns);
		if (sp->longest_ns) {
			set_cstr(r, SP_LONGEST_REASON, coro_reason_name(sp->longest_reason));
			set_int(r, SP_LONGEST_OBJ, sp->longest_obj);
		}
	}
	if (sp->stack)
		set_int(r, SP_STACK, sp->stack);
}

void tables_stack_rows(const struct model *m, row_out_fn out, void *ctx)
{
	const struct sym_stack *stk;
	size_t it = 0;
	struct row r;

	if (!m->sym)
		return;
	while ((stk = symbolizer_next(m->sym, &it))) {
		row_init(&r, T_STACKS);
		set_int(&r, ST_ID, stk->id);
		set_int(&r, ST_PID, stk->pid);
		set_int(&r, ST_NFRAMES, stk->n);
		out(ctx, &r);
		for (u32 i = 0; i < stk->n; i++) {
			const struct sym_frame *f = stk->frames[i];

			row_init(&r, T_FRAMES);
			set_int(&r, FR_STACK_ID, stk->id);
			set_int(&r, FR_DEPTH, i);
			set_int(&r, FR_IP, f->ip);
			if (f->func) {
				set_cstr(&r, FR_FUNC, f->func);
				set_int(&r, FR_FUNC_OFF, f->func_off);
			}
			if (f->obj) {
				set_cstr(&r, FR_OBJECT, f->obj);
				set_int(&r, FR_REL, f->rel);
			}
			if (f->file) {
				set_cstr(&r, FR_FILE, f->file);
				set_int(&r, FR_LINE, f->line);
			}
			out(ctx, &r);
		}
	}
}
