// SPDX-License-Identifier: MIT
/*
 * The PostgreSQL store's URIs: which -o it takes, and how messages show them (never with the
 * password, in any of the forms libpq reads one in), and --store-timeout.
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
	CHECK(!strstr(shown("postgresql://u:hunter2@h/db?password=hunter2"), "hunter2"));
	/* An '@' in the path or the parameters is no user part. */
	CHECK_STR(shown("postgresql://h/db?application_name=a@b"),
		  "postgresql://h/db?application_name=a@b");
}

TEST(shown_uris_leave_out_every_form_of_a_password)
{
	/* libpq decodes a parameter's name: %70assword is password. */
	CHECK_STR(shown("postgresql://u@h/db?%70assword=hunter2&sslmode=require"),
		  "postgresql://u@h/db?sslmode=require");
	CHECK_STR(shown("postgresql://u@h/db?p%61ssword=hunter2"), "postgresql://u@h/db");
	/* A password in the user part, percent-encoded. */
	CHECK_STR(shown("postgresql://u:hun%74er2@h/db"), "postgresql://u@h/db");
	/* The passphrase of a client key is a password too. */
	CHECK_STR(shown("postgresql://h/db?sslpassword=hunter2"), "postgresql://h/db");
	/* key=value conninfo: the same parameters, shown as a URI. */
	CHECK_STR(shown("host=h user=u password=hunter2 dbname=db"), "postgresql://u@h/db");
	CHECK_STR(shown("host=/run/postgresql password='hun ter2' dbname=db"),
		  "postgresql:///db?host=/run/postgresql");
	/* A value that is itself a conninfo with a password is not shown. */
	CHECK(!strstr(shown("postgresql://h/?dbname=host%3Dx%20password%3Dhunter2"), "hunter2"));
	CHECK(!strstr(shown("postgresql://h/db?application_name=password%3Dhunter2%20host%3Dx"),
		      "hunter2"));
	/* An '@' of a password written as it is would leave the rest as the host: not shown. */
	CHECK(!strstr(shown("postgresql://u:hun@ter2@h/db"), "ter2"));
	/* A URI libpq cannot read (here, in its password) is not shown at all. */
	CHECK_STR(shown("postgresql://u:hunter2%zz@h/db"),
		  "postgresql://(not shown: not a URI libpq reads)");
	/* Lists of hosts, IPv6, ports and other parameters come back as libpq reads them. */
	CHECK_STR(shown("postgresql://u:pw@h1:5432,h2:5433/db?connect_timeout=5"),
		  "postgresql://u@/db?connect_timeout=5&host=h1,h2&port=5432,5433");
	CHECK_STR(shown("postgresql://[::1]:5433/db"), "postgresql://[::1]:5433/db");
	CHECK_STR(shown("postgresql://h/db?application_name=a%20b%26c"),
		  "postgresql://h/db?application_name=a%20b%26c");
}

TEST(uri_check_says_whether_a_password_is_there_and_never_quotes_it)
{
	char buf[512], err[256];
	bool secret;

	CHECK_EQ(pgstore_check_uri("postgresql://u@h/db", buf, sizeof(buf), &secret, err,
				   sizeof(err)), 0);
	CHECK(!secret);
	CHECK_EQ(pgstore_check_uri("postgresql://u@h/db?%70assword=x", buf, sizeof(buf), &secret,
				   err, sizeof(err)), 0);
	CHECK(secret);
	CHECK_EQ(pgstore_check_uri("postgresql://u:hunter2%zz@h/db", buf, sizeof(buf), &secret,
				   err, sizeof(err)), -1);
	CHECK(!strstr(err, "hunter2"));
	CHECK(strstr(err, "percent-encoded") != NULL);
	CHECK_EQ(pgstore_check_uri("postgresql://h/db?hunter2=x", buf, sizeof(buf), &secret, err,
				   sizeof(err)), -1);
	CHECK(!strstr(err, "hunter2"));
}

TEST(store_timeouts_parse)
{
	struct pg_timeouts t;
	char err[256];

	pg_timeouts_default(&t);
	CHECK_EQ(t.connect_ms, 10000);
	CHECK_EQ(t.lock_ms, 10000);
	CHECK_EQ(t.statement_ms, 60000);
	CHECK(!t.connect_set);
	CHECK_EQ(pg_timeouts_parse(&t, "lock=2.5,statement=0", err, sizeof(err)), 0);
	CHECK_EQ(t.lock_ms, 2500);
	CHECK_EQ(t.statement_ms, 0);
	CHECK_EQ(t.connect_ms, 10000);
	CHECK(!t.connect_set);
	CHECK_EQ(pg_timeouts_parse(&t, "connect=0.0001", err, sizeof(err)), 0);
	CHECK_EQ(t.connect_ms, 1);
	CHECK(t.connect_set);
	CHECK_EQ(pg_timeouts_parse(&t, "connect", err, sizeof(err)), -1);
	CHECK_EQ(pg_timeouts_parse(&t, "read=1", err, sizeof(err)), -1);
	CHECK_EQ(pg_timeouts_parse(&t, "lock=-1", err, sizeof(err)), -1);
	CHECK_EQ(pg_timeouts_parse(&t, "lock=1x", err, sizeof(err)), -1);
	CHECK_EQ(pg_timeouts_parse(&t, "", err, sizeof(err)), -1);
}

int main(void)
{
	RUN(uris_choose_the_store);
	RUN(shown_uris_leave_the_password_out);
	RUN(shown_uris_leave_out_every_form_of_a_password);
	RUN(uri_check_says_whether_a_password_is_there_and_never_quotes_it);
	RUN(store_timeouts_parse);
	return unit_done();
}
