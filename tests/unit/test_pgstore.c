// SPDX-License-Identifier: MIT
/*
 * The PostgreSQL store's URIs: which -o it takes, and how messages show them (never with the
 * password, in either of the places libpq reads one from).
 */
#include <string.h>
#include "unit.h"
#include "pgstore.h"

static const char *shown(const char *uri)
{
	static char buf[512];

	pgstore_shown_uri(uri, buf, sizeof(buf));
	return buf;
}

TEST(uris_choose_the_store)
{
	CHECK(pgstore_is_uri("postgresql://h/db"));
	CHECK(pgstore_is_uri("postgres://"));
	CHECK(!pgstore_is_uri("postgresql:/h/db"));
	CHECK(!pgstore_is_uri("trace.db"));
	CHECK(!pgstore_is_uri("./postgresql://x"));
}

TEST(shown_uris_leave_the_password_out)
{
	CHECK_STR(shown("postgresql://u:secret@h:5432/db"), "postgresql://u@h:5432/db");
	CHECK_STR(shown("postgresql://u@h/db"), "postgresql://u@h/db");
	CHECK_STR(shown("postgres://h/db?sslmode=require"), "postgres://h/db?sslmode=require");
	CHECK_STR(shown("postgresql://u:pw@/db?host=/tmp/s&password=x&sslmode=off"),
		  "postgresql://u@/db?host=/tmp/s&sslmode=off");
	CHECK_STR(shown("postgresql:///db?password=x"), "postgresql:///db");
	CHECK_STR(shown("postgresql://u:p@w@h/db"), "postgresql://u@h/db");
	CHECK(!strstr(shown("postgresql://u:hunter2@h/db?password=hunter2"), "hunter2"));
	/* An '@' in the path or the parameters is no user part. */
	CHECK_STR(shown("postgresql://h/db?application_name=a@b"),
		  "postgresql://h/db?application_name=a@b");
}

int main(void)
{
	RUN(uris_choose_the_store);
	RUN(shown_uris_leave_the_password_out);
	return unit_done();
}
