// SPDX-License-Identifier: MIT
/*
 * The tables of the SQL outputs (user/outputs/tables.h): each table's
 * definition makes a schema SQLite takes with exactly its columns and
 * types, the store's the same columns after the capture's; an event gives
 * the rows it should.
 */
#include <sqlite3.h>
#include "unit.h"
#include "stream.h"
#include "tables.h"

TEST(schemas_are_the_definitions)
{
	sqlite3 *db;
	char sql[8192], q[128];

	CHECK_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
	for (int t = 0; t < T_NTABLES; t++) {
		const struct table *tb = &tables[t];
		sqlite3_stmt *st;
		u32 n = 0;

		CHECK(tb->ncols > 0 && tb->ncols <= ROW_MAX);
		tables_sqlite_create(tb, sql, sizeof(sql));
		CHECK(strstr(sql, "CREATE TABLE ") == sql);
		CHECK_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		snprintf(q, sizeof(q), "PRAGMA table_info(%s)", tb->name);
		CHECK_EQ(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
		while (sqlite3_step(st) == SQLITE_ROW && n < tb->ncols) {
			const struct column *c = &tb->cols[n++];

			CHECK_STR((const char *)sqlite3_column_text(st, 1), c->name);
			CHECK_STR((const char *)sqlite3_column_text(st, 2),
				  c->type == COL_TEXT || c->type == COL_NAME || c->type == COL_TIDS
					  ? "TEXT"
					  : "INTEGER");
			CHECK_EQ(sqlite3_column_int(st, 5), (c->flags & COL_SQLITE_KEY) != 0);
		}
		CHECK_EQ(n, tb->ncols);
		sqlite3_finalize(st);
		/* The store's: the capture first, then the same columns, quoted. */
		tables_pg_create(tb, sql, sizeof(sql));
		CHECK(strstr(sql, "(capture_id bigint, \"") != NULL);
		for (u32 i = 0; i < tb->ncols; i++) {
			snprintf(q, sizeof(q), "\"%s\" %s", tb->cols[i].name,
				 col_pg_type(&tb->cols[i]));
			CHECK(strstr(sql, q) != NULL);
		}
	}
	sqlite3_close(db);
}

static struct {
	int rows[T_NTABLES];
	int updates;
} seen;

static void count_row(void *ctx, const struct row *r)
{
	seen.rows[r->t - tables]++;
	seen.updates += r->update;
}

/* An event gives its rows, a table skipped none, a process's exit the update of its row. */
TEST(event_rows)
{
	static union rec_buf B;
	struct table_rows tr = {0};
	struct event ev;

	memset(&seen, 0, sizeof(seen));
	CHECK(event_decode(&ev, mk_name(&B, 7, 10, 0, 0x42, "worker")));
	ev.lost_before = 3;
	tables_event_rows(&tr, &ev, count_row, NULL);
	CHECK_EQ(seen.rows[T_EVENTS], 1);
	CHECK_EQ(seen.rows[T_LOST], 1);
	tr.skip = 1u << T_LOST;
	tables_event_rows(&tr, &ev, count_row, NULL);
	CHECK_EQ(seen.rows[T_EVENTS], 2);
	CHECK_EQ(seen.rows[T_LOST], 1);
	CHECK(event_decode(&ev, mk_proc_exit(&B, 9, 0x0900)));
	tables_event_rows(&tr, &ev, count_row, NULL);
	CHECK_EQ(seen.rows[T_PROCESSES], 1);
	CHECK_EQ(seen.updates, 1);
}

int main(void)
{
	RUN(schemas_are_the_definitions);
	RUN(event_rows);
	return unit_done();
}
