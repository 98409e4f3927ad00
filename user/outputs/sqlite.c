// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * SQLite output: a backend of the tables (tables.h), which define the
 * columns and fill the rows. Every value is bound as a parameter, never
 * pasted into SQL. Coroutine ids, objects and wakers are 64-bit values
 * stored as INTEGER (the same bits, so ids above 2^63 read as negative
 * numbers; show them with printf('0x%x', id)).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include "counters.h"
#include "finding.h"
#include "sqlite.h"
#include "tables.h"

/* SQLite's own: the capture's facts and counters, a key and a value of any type each. */
static const char meta_schema[] = "CREATE TABLE meta (key TEXT PRIMARY KEY, value);\n";

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

/*
 * The tables SQLite makes with their first row (TABLE_LAZY): spans (its
 * index and its view with it) in a trace with spans; awaiters in a trace
 * with a C++20 wait whose awaiter's type is known (docs/cxx20.md), keyed as
 * the rows that wait has elsewhere (events: its switch; slices: the
 * suspended slice it opens; findings: a stall of it), by coroutine uid and
 * the time it began; lost in a trace with a hole a thread's later record
 * carried, one row per hole, as the JSONL's `lost` records, whatever record
 * came after it (events carry theirs in lost_before too; off-CPU records
 * and samples have no column for it), its counts adding up to the meta key
 * lost_attributed. Every other database keeps the schema it always had.
 */
static const char *const made_with[T_NTABLES] = {
	/* Nearest rank, as the JSONL's span_stats: the ceil(p/100 * N)-th smallest. */
	[T_SPANS] = "CREATE VIEW span_stats AS\n"
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
		    "  FROM r GROUP BY name;\n",
};
static const char spans_indexes[] = "CREATE INDEX spans_name_dur ON spans (name, dur_ns);\n";

struct sqlite_sink {
	sqlite3 *db;
	sqlite3_stmt *ins[T_NTABLES]; /* INSERT INTO each table (a lazy one's once it exists) */
	sqlite3_stmt *meta_st;
	struct model *m;
	char err[512];
	struct table_rows tr;
};

static void fail(struct sqlite_sink *s, const char *what)
{
	if (!s->err[0])
		snprintf(s->err, sizeof(s->err), "%s: %s", what, sqlite3_errmsg(s->db));
}

/* Insert the row bound to st, and leave st clean for the next. */
static void step_stmt(struct sqlite_sink *s, sqlite3_stmt *st, const char *what)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		fail(s, what);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Bind helpers: columns count from 1. */
#define BI(st, i, v) sqlite3_bind_int64(st, i, (sqlite3_int64)(v))
#define BT(st, i, t) sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT)

/* A name the traced program gave, made valid UTF-8. */
static void bind_name(sqlite3_stmt *st, int i, const char *str, size_t len)
{
	char buf[3 * CORO_NAME_MAX + 1], *clean = buf;

	if (3 * len + 1 > sizeof(buf))
		clean = xmalloc(3 * len + 1);
	utf8_sanitize(clean, 3 * len + 1, str, len);
	BT(st, i, clean);
	if (clean != buf)
		free(clean);
}

/* A row's values onto st, from parameter `first` (1: the table's first column). */
static void bind_row(sqlite3_stmt *st, const struct row *r, int from, int to, int first)
{
	char list[1024];

	for (int i = from; i < to; i++) {
		int p = first + i - from;

		switch (r->v[i].kind) {
		case ROW_INT:
			BI(st, p, r->v[i].i);
			break;
		case ROW_TEXT:
			if (r->t->cols[i].type == COL_NAME)
				bind_name(st, p, r->v[i].s, r->v[i].len);
			else
				sqlite3_bind_text(st, p, r->v[i].s, (int)r->v[i].len,
						  SQLITE_TRANSIENT);
			break;
		case ROW_TIDS: {
			size_t n = 0;

			/* Comma separated, as many as 1 KiB holds. */
			list[0] = 0;
			for (u32 k = 0; k < r->v[i].len && n + 16 < sizeof(list); k++)
				n += snprintf(list + n, sizeof(list) - n, "%s%u", k ? "," : "",
					      r->v[i].tids[k]);
			BT(st, p, list);
			break;
		}
		default:
			break;
		}
	}
}

static int prepare_insert(struct sqlite_sink *s, enum table_id t)
{
	char sql[256];
	size_t n = snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES (", tables[t].name);

	for (u32 i = 0; i < tables[t].ncols; i++)
		n += snprintf(sql + n, sizeof(sql) - n, i ? ",?" : "?");
	snprintf(sql + n, sizeof(sql) - n, ")");
	return sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->ins[t], NULL);
}

/* A lazy table's first row: the table made (and what comes with it), its insert prepared. */
static __attribute__((noinline, cold)) bool make_table(struct sqlite_sink *s, enum table_id t)
{
	const struct table *tb = &tables[t];
	char sql[8192], *msg = NULL;
	size_t n;

	if (s->err[0])
		return false;
	n = tables_sqlite_create(tb, sql, sizeof(sql));
	snprintf(sql + n, sizeof(sql) - n, ";\n%s", made_with[t] ? made_with[t] : "");
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(s->err, sizeof(s->err), "cannot create the %s table: %s", tb->name, msg);
		sqlite3_free(msg);
		return false;
	}
	if (prepare_insert(s, t) != SQLITE_OK) {
		fail(s, "cannot prepare a statement");
		return false;
	}
	return true;
}

/* The exit columns of a process's row still without an exit (tables.h: PROCESS_EXIT_COL). */
static void update_process(struct sqlite_sink *s, const struct row *r)
{
	const struct table *t = r->t;
	sqlite3_stmt *up;
	char sql[256];
	size_t n = snprintf(sql, sizeof(sql), "UPDATE %s SET ", t->name);

	for (u32 i = PROCESS_EXIT_COL; i < t->ncols; i++)
		n += snprintf(sql + n, sizeof(sql) - n, "%s%s = ?", i > PROCESS_EXIT_COL ? ", " : "",
			      t->cols[i].name);
	snprintf(sql + n, sizeof(sql) - n, " WHERE %s = ? AND %s IS NULL", t->cols[0].name,
		 t->cols[PROCESS_EXIT_COL].name);
	/* Prepared here: processes end rarely. */
	if (sqlite3_prepare_v2(s->db, sql, -1, &up, NULL) != SQLITE_OK) {
		fail(s, "cannot prepare an update");
		return;
	}
	bind_row(up, r, PROCESS_EXIT_COL, t->ncols, 1);
	bind_row(up, r, 0, 1, t->ncols - PROCESS_EXIT_COL + 1);
	if (sqlite3_step(up) != SQLITE_DONE)
		fail(s, "cannot record a process exit");
	sqlite3_finalize(up);
}

static void sq_row(void *ctx, const struct row *r)
{
	struct sqlite_sink *s = ctx;
	enum table_id t = (enum table_id)(r->t - tables);
	sqlite3_stmt *st = s->ins[t];

	if (r->update) {
		update_process(s, r);
		return;
	}
	if (!st) {
		if (!(r->t->flags & TABLE_LAZY) || !make_table(s, t))
			return;
		st = s->ins[t];
	}
	bind_row(st, r, 0, r->t->ncols, 1);
	step_stmt(s, st, "cannot insert a row");
}

static void meta(struct sqlite_sink *s, const char *key, const char *text, s64 num, bool is_num)
{
	sqlite3_stmt *st = s->meta_st;

	BT(st, 1, key);
	if (is_num)
		BI(st, 2, num);
	else if (text)
		BT(st, 2, text);
	step_stmt(s, st, "cannot insert a row");
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

static void sq_event(void *ctx, const struct event *ev)
{
	struct sqlite_sink *s = ctx;

	tables_event_rows(&s->tr, ev, sq_row, s);
}

static void sq_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			u64 end, u32 tid, u32 reason, u64 obj)
{
	struct row r;

	tables_slice_row(&r, c, state, start, end, tid, reason, obj);
	sq_row(ctx, &r);
}

static void sq_coroutine_end(void *ctx, const struct coro *c)
{
	struct row r;

	tables_coroutine_row(&r, c);
	sq_row(ctx, &r);
}

static void sq_finding(void *ctx, const struct finding *f)
{
	struct sqlite_sink *s = ctx;
	struct row r;

	tables_finding_row(&s->tr, &r, f);
	sq_row(s, &r);
}

/* A span instance ended: its row (the table made with the first). */
static void sq_span_done(void *ctx, const struct span_done *d)
{
	struct sqlite_sink *s = ctx;
	struct row r;

	tables_span_row(&s->tr, &r, d);
	sq_row(s, &r);
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
	/* Every stack defined, whether or not a row names it. */
	tables_stack_rows(m, sq_row, s);
	if (m->input_error)
		meta(s, "input_error", m->input_error, 0, false);
	if (sqlite3_exec(s->db, indexes, NULL, NULL, &msg) != SQLITE_OK ||
	    (s->ins[T_SPANS] && sqlite3_exec(s->db, spans_indexes, NULL, NULL, &msg) != SQLITE_OK)) {
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
	char name[64], schema[16384], *msg = NULL;
	size_t n = snprintf(schema, sizeof(schema), "%s", meta_schema);

	s->m = m;
	snprintf(name, sizeof(name), FD_DB_PREFIX "%d", fd);
	for (int t = 0; t < T_NTABLES; t++) {
		if (tables[t].flags & TABLE_LAZY)
			continue;
		n += tables_sqlite_create(&tables[t], schema + n, sizeof(schema) - n);
		n += snprintf(schema + n, sizeof(schema) - n, ";\n");
	}
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
	for (int t = 0; t < T_NTABLES; t++) {
		if (tables[t].flags & TABLE_LAZY)
			continue;
		if (prepare_insert(s, t) != SQLITE_OK)
			goto fail_prepare;
	}
	if (sqlite3_prepare_v3(s->db, "INSERT OR REPLACE INTO meta VALUES (?,?)", -1,
			       SQLITE_PREPARE_PERSISTENT, &s->meta_st, NULL) != SQLITE_OK)
		goto fail_prepare;
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = sq_begin;
	obs->event = sq_event;
	obs->interval = sq_interval;
	obs->coroutine_end = sq_coroutine_end;
	obs->finish = sq_finish;
	obs->span_done = sq_span_done;
	fs->ctx = s;
	fs->finding = sq_finding;
	return s;
fail_prepare:
	snprintf(err, errlen, "cannot prepare a statement: %s", sqlite3_errmsg(s->db));
fail:
	for (int t = 0; t < T_NTABLES; t++)
		sqlite3_finalize(s->ins[t]);
	sqlite3_finalize(s->meta_st);
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
	for (int t = 0; t < T_NTABLES; t++)
		sqlite3_finalize(s->ins[t]);
	sqlite3_finalize(s->meta_st);
	if (sqlite3_close(s->db) != SQLITE_OK && !s->err[0])
		snprintf(s->err, sizeof(s->err), "cannot close: %s", sqlite3_errmsg(s->db));
	if (s->err[0]) {
		snprintf(err, errlen, "%s", s->err);
		ret = -1;
	}
	free(s);
	return ret;
}
