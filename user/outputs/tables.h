/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tables.h: the tables of the SQL outputs, each one's columns defined once
 * (tables.c), with what fills their rows. The SQLite file (sqlite.c), the
 * PostgreSQL store (pgstore.c) and the CSV (csv.c, the coroutines table)
 * are backends over it: each makes its schema from the definitions
 * (tables_sqlite_create(), tables_pg_create()) and stores the rows the
 * fillers give it, a value per column, in the table's order. docs/sqlite.md
 * describes the columns.
 *
 * A new column is a line of its table's list in tables.c and the line of
 * its filler that sets it: every backend then has it.
 */
#ifndef COROBPF_TABLES_H
#define COROBPF_TABLES_H

#include "finding.h"
#include "model.h"

/* A column's type: what it holds, and how each backend writes it. */
enum col_type {
	COL_INT,   /* INTEGER, bigint: a number (signed 64 bits) */
	COL_ID,	   /* the same, a 64-bit id stored bit for bit; CSV: hex text (0x1f), as JSONL */
	COL_TEXT,  /* TEXT, text: as it is (paths, symbols, fixed words, lists made valid) */
	COL_NAME,  /* TEXT, text: a name the traced program gave, made valid UTF-8 everywhere */
	COL_TIDS,  /* TEXT, text: thread ids, comma separated (CSV: space separated) */
	COL_STACK, /* INTEGER, bigint: a capture stack id (the stacks table); CSV: its frames */
};

/* SQLite: the table's rowid (INTEGER PRIMARY KEY); the store keys rows by capture_id instead. */
#define COL_SQLITE_KEY 1

struct column {
	const char *name;
	u8 type;  /* enum col_type */
	u8 flags; /* COL_* */
};

/* The tables, in the order of SQLite's schema. */
enum table_id {
	T_PROCESSES,
	T_THREADS,
	T_SWITCH_PATHS,
	T_COROUTINES,
	T_OFFCPU,
	T_EVENTS,
	T_SLICES,
	T_FINDINGS,
	T_STACKS,
	T_FRAMES,
	T_SPANS,
	T_AWAITERS,
	T_LOST,
	T_NTABLES
};
/* The tables the PostgreSQL store has too: those SQLite alone has (TABLE_SQLITE_ONLY) come last. */
#define T_NSTORE T_LOST

/*
 * SQLite makes the table with its first row: a trace without any keeps the
 * schema it always had (the store has every table from the start).
 */
#define TABLE_LAZY (1 << 0)
/* SQLite only: the store has no such table. */
#define TABLE_SQLITE_ONLY (1 << 1)

struct table {
	const char *name;
	const struct column *cols;
	u8 ncols;
	u8 flags; /* TABLE_* */
	/*
	 * The width the lines of its SQLite CREATE TABLE were first written to:
	 * a database keeps that text as it was given.
	 */
	u8 sqlite_wrap;
};

extern const struct table tables[T_NTABLES];

/* Columns of one table at most. */
#define ROW_MAX 33

enum row_kind { ROW_NULL, ROW_INT, ROW_TEXT, ROW_TIDS };

/* A row being filled: values in the table's column order; those not set are NULL. */
struct row {
	const struct table *t;
	struct {
		u8 kind; /* enum row_kind */
		s64 i;
		const char *s; /* ROW_TEXT: s, len (no NUL inside); ROW_TIDS: tids, n */
		size_t len;
		const u32 *tids;
	} v[ROW_MAX];
	/* Room for the texts a filler builds (lists, a finding's chain): valid while the row is. */
	char scratch[FINDING_CHAIN * (3 * CORO_NAME_MAX + 24)];
	size_t used;
	/* T_PROCESSES: the exit columns alone, of the process's row still without one. */
	bool update;
};

/*
 * T_PROCESSES: its columns from this one on are the process's exit
 * (exit_ts, exit_code, signal), given by a row of their own (row->update)
 * when the process ends, after its row: SQLite updates the row, the store
 * holds the row until then.
 */
#define PROCESS_EXIT_COL 6

/*
 * What the rows are given to. A backend stores a row of table t (row->t);
 * a row with row->update set carries the exit columns of a process's row
 * written earlier (its pid in column 0), those still unset there.
 */
typedef void (*row_out_fn)(void *ctx, const struct row *r);

/* Per output: what rows remember of each other (the span a slow_span finding names). */
struct table_rows {
	u64 slow_serial;
	u32 skip; /* 1 << enum table_id: tables the backend has not */
};

void tables_event_rows(struct table_rows *tr, const struct event *ev, row_out_fn out, void *ctx);
void tables_slice_row(struct row *r, const struct coro *c, enum coro_state state, u64 start,
		      u64 end, u32 tid, u32 reason, u64 obj);
void tables_coroutine_row(struct row *r, const struct coro *c);
void tables_finding_row(struct table_rows *tr, struct row *r, const struct finding *f);
void tables_span_row(struct table_rows *tr, struct row *r, const struct span_done *d);
/* Every stack the model defined and its frames (innermost first, depth 0). */
void tables_stack_rows(const struct model *m, row_out_fn out, void *ctx);

/* A column's value: whether a filler set it (ROW_NULL: not). */
static inline bool row_has(const struct row *r, int col)
{
	return r->v[col].kind != ROW_NULL;
}

/* Its SQLite CREATE TABLE statement (no ';'), as its databases have it. */
size_t tables_sqlite_create(const struct table *t, char *buf, size_t len);
/* Its PostgreSQL CREATE TABLE statement (no ';'): capture_id first. */
size_t tables_pg_create(const struct table *t, char *buf, size_t len);
/* The SQL types a column has there. */
const char *col_sqlite_type(const struct column *c);
const char *col_pg_type(const struct column *c);

#endif /* COROBPF_TABLES_H */
