// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the store is opened with (pgparams.h): --store-timeout, and the
 * connection parameters and the form messages show them in.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pglib.h"
#include "pgparams.h"

/* ---- --store-timeout ---- */

void pg_timeouts_default(struct pg_timeouts *t)
{
	t->connect_ms = PG_CONNECT_TIMEOUT_S * 1000;
	t->lock_ms = PG_LOCK_TIMEOUT_S * 1000;
	t->statement_ms = PG_STATEMENT_TIMEOUT_S * 1000;
	t->connect_set = false;
}

int pg_timeouts_parse(struct pg_timeouts *t, const char *arg, char *err, size_t errlen)
{
	static const char *const names[] = {"connect", "lock", "statement"};
	u32 *fields[] = {&t->connect_ms, &t->lock_ms, &t->statement_ms};
	const char *p = arg;

	if (!*p) {
		snprintf(err, errlen, "invalid --store-timeout '' (connect=SECS, lock=SECS, "
			 "statement=SECS, separated by commas)");
		return -1;
	}
	while (*p) {
		size_t k = strcspn(p, "=,"), i;
		char *end;
		double v;

		for (i = 0; i < ARRAY_SIZE(names); i++)
			if (strlen(names[i]) == k && !strncmp(p, names[i], k))
				break;
		if (i == ARRAY_SIZE(names) || p[k] != '=') {
			snprintf(err, errlen, "invalid --store-timeout '%s' (connect=SECS, lock=SECS, "
				 "statement=SECS, separated by commas)", arg);
			return -1;
		}
		errno = 0;
		v = strtod(p + k + 1, &end);
		if (errno || end == p + k + 1 || (*end && *end != ',') || !(v >= 0 && v <= 86400)) {
			snprintf(err, errlen, "invalid --store-timeout %s '%s' (seconds, 0 to 86400; "
				 "0 waits for ever)", names[i], arg);
			return -1;
		}
		/* A fraction of a millisecond is a millisecond: never 0, which means no limit. */
		*fields[i] = (u32)ceil(v * 1000);
		if (i == 0)
			t->connect_set = true;
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* ---- connection parameters and how messages show them ---- */

bool pgstore_is_uri(const char *path)
{
	return !strncmp(path, "postgresql://", 13) || !strncmp(path, "postgres://", 11);
}

bool pgstore_libpq_loads(void)
{
	char err[256];

	return !pq_load(err, sizeof(err));
}

static bool is_secret(const char *keyword)
{
	return !strcmp(keyword, "password") || !strcmp(keyword, "sslpassword");
}

/* libpq's message about a conninfo, its quoted parts (which may hold a password) left out. */
static void elide_quoted(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	for (const char *p = src; *p && n + 8 < len; p++) {
		const char *close;

		if (*p == '\n')
			break;
		if (*p == '"' && (close = strchr(p + 1, '"'))) {
			n += snprintf(dst + n, len - n, "\"...\"");
			p = close;
			continue;
		}
		dst[n++] = *p;
	}
	dst[n] = 0;
}

/*
 * An '@' of a password written as it is (user:p@ss@host) ends the user part where libpq
 * looks, and the rest of the password becomes the host name, which messages show: refused.
 */
static bool uri_has_two_ats(const char *uri)
{
	const char *p = strstr(uri, "://");
	size_t k;
	int ats = 0;

	if (!p)
		return false;
	p += 3;
	k = strcspn(p, "/?");
	for (size_t i = 0; i < k; i++)
		ats += p[i] == '@';
	return ats > 1;
}

static PQconninfoOption *parse(const char *conninfo, char *err, size_t errlen)
{
	PQconninfoOption *opts;
	char *why = NULL;

	if (pq_load(err, errlen))
		return NULL;
	if (uri_has_two_ats(conninfo)) {
		snprintf(err, errlen, "its user part holds two '@': write an '@' of the user name or "
			 "password as %%40");
		return NULL;
	}
	opts = pq.conninfoParse(conninfo, &why);
	if (!opts) {
		char msg[256];

		elide_quoted(msg, sizeof(msg), why ? why : "out of memory");
		snprintf(err, errlen, "libpq cannot read it: %s", msg);
		free(why); /* PQfreemem is free() on every platform corobpf runs on */
	}
	return opts;
}

static const char *opt_val(const PQconninfoOption *opts, const char *keyword)
{
	for (const PQconninfoOption *o = opts; o->keyword; o++)
		if (o->val && !strcmp(o->keyword, keyword))
			return o->val;
	return NULL;
}

/* Whether a value is itself a conninfo with a password (a dbname libpq could expand). */
static bool value_hides_secret(const char *val)
{
	PQconninfoOption *inner;
	char *why = NULL;
	bool secret = false;

	if (!strchr(val, '=') && !pgstore_is_uri(val))
		return false;
	inner = pq.conninfoParse(val, &why);
	free(why);
	if (!inner)
		return false;
	for (const PQconninfoOption *o = inner; o->keyword; o++)
		secret |= o->val && is_secret(o->keyword);
	pq.conninfoFree(inner);
	return secret;
}

/* Appends s percent-encoded but for the characters in `plain` and letters and digits. */
static size_t put_enc(char *buf, size_t len, size_t n, const char *s, const char *plain)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *c = (const unsigned char *)s; *c && n + 4 < len; c++) {
		if (isalnum(*c) || (*c < 0x80 && strchr(plain, *c))) {
			buf[n++] = *c;
		} else {
			buf[n++] = '%';
			buf[n++] = hex[*c >> 4];
			buf[n++] = hex[*c & 15];
		}
	}
	buf[n] = 0;
	return n;
}

#define UNRESERVED "-._~"

/*
 * The parameters as a URI, without a password: user and a single host in the authority, the
 * database as the path, the rest as parameters in libpq's order. Equivalent to what was
 * given for everything but the password, so that a command a message prints works.
 */
static void rebuild(char *buf, size_t len, const char *scheme, const PQconninfoOption *opts,
		    bool *secret)
{
	static const char hidden[] = "(not shown: it holds a password)";
	const char *user = opt_val(opts, "user"), *host = opt_val(opts, "host");
	const char *port = opt_val(opts, "port"), *db = opt_val(opts, "dbname");
	/* A socket directory, an abstract socket or a list go as parameters. */
	bool netloc_host = host && *host && host[0] != '/' && host[0] != '@' && !strchr(host, ',') &&
			   (!port || !strchr(port, ','));
	bool first = true;
	size_t n;

	*secret = false;
	/* A value that is itself a connection string with a password: not shown either. */
	if (user && value_hides_secret(user)) {
		*secret = true;
		user = hidden;
	}
	if (db && value_hides_secret(db)) {
		*secret = true;
		db = hidden;
	}
	n = snprintf(buf, len, "%s://", scheme);
	if (n >= len)
		return;
	if (user) {
		n = put_enc(buf, len, n, user, UNRESERVED);
		n = put_enc(buf, len, n, "@", "@");
	}
	if (netloc_host) {
		bool v6 = strchr(host, ':') != NULL;

		n = put_enc(buf, len, n, v6 ? "[" : "", "[");
		n = put_enc(buf, len, n, host, v6 ? UNRESERVED ":" : UNRESERVED);
		n = put_enc(buf, len, n, v6 ? "]" : "", "]");
		if (port) {
			n = put_enc(buf, len, n, ":", ":");
			n = put_enc(buf, len, n, port, "");
		}
	}
	if (db) {
		n = put_enc(buf, len, n, "/", "/");
		n = put_enc(buf, len, n, db, UNRESERVED);
	}
	for (const PQconninfoOption *o = opts; o->keyword; o++) {
		const char *val = o->val;

		if (!val || !strcmp(o->keyword, "user") || !strcmp(o->keyword, "dbname") ||
		    (netloc_host && (!strcmp(o->keyword, "host") || !strcmp(o->keyword, "port"))))
			continue;
		if (is_secret(o->keyword)) {
			*secret = true;
			continue;
		}
		if (value_hides_secret(val)) {
			*secret = true;
			val = hidden;
		}
		n = put_enc(buf, len, n, first ? "?" : "&", "?&");
		n = put_enc(buf, len, n, o->keyword, "_");
		n = put_enc(buf, len, n, "=", "=");
		n = put_enc(buf, len, n, val, UNRESERVED "/:@,");
		first = false;
	}
}

int pgstore_check_uri(const char *conninfo, char *shown, size_t shownlen, bool *secret,
		      char *err, size_t errlen)
{
	PQconninfoOption *opts = parse(conninfo, err, errlen);
	const char *scheme = !strncmp(conninfo, "postgres://", 11) ? "postgres" : "postgresql";

	*secret = false;
	if (!opts) {
		/* Nothing of it is known to be safe to show. */
		snprintf(shown, shownlen, "%s://(not shown: not a URI libpq reads)", scheme);
		return -1;
	}
	rebuild(shown, shownlen, scheme, opts, secret);
	pq.conninfoFree(opts);
	return 0;
}

void pgstore_shown_uri(const char *uri, char *buf, size_t len)
{
	char err[256];
	bool secret;

	pgstore_check_uri(uri, buf, len, &secret, err, sizeof(err));
}

int pg_params_parse(struct pg_params *p, const char *conninfo, char *err, size_t errlen)
{
	PQconninfoOption *opts;
	const char *timeout;
	bool secret, named = false;
	int n = 0;

	memset(p, 0, sizeof(*p));
	p->connect_timeout_ms = -1;
	if (pgstore_check_uri(conninfo, p->shown, sizeof(p->shown), &secret, err, errlen))
		return -1;
	opts = parse(conninfo, err, errlen);
	if (!opts)
		return -1;
	for (const PQconninfoOption *o = opts; o->keyword; o++)
		n++;
	p->keys = xcalloc(n + 2, sizeof(*p->keys));
	p->vals = xcalloc(n + 2, sizeof(*p->vals));
	n = 0;
	for (const PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val)
			continue;
		named |= !strcmp(o->keyword, "application_name") ||
			 !strcmp(o->keyword, "fallback_application_name");
		p->keys[n] = xstrdup(o->keyword);
		p->vals[n++] = xstrdup(o->val);
	}
	/* pg_stat_activity (and a message naming who holds a lock) says it is corobpf. */
	if (!named) {
		p->keys[n] = xstrdup("fallback_application_name");
		p->vals[n++] = xstrdup("corobpf");
	}
	/* As libpq takes it: 0 or less never gives up, and 2 s is the least. */
	timeout = opt_val(opts, "connect_timeout");
	if (timeout) {
		int s = atoi(timeout);

		p->connect_timeout_ms = s <= 0 ? 0 : MAX(s, 2) * 1000;
	}
	pq.conninfoFree(opts);
	return 0;
}

void pg_params_free(struct pg_params *p)
{
	for (int i = 0; p->keys && p->keys[i]; i++) {
		free((char *)p->keys[i]);
		/* The password among them: not left in freed memory. */
		explicit_bzero((char *)p->vals[i], strlen(p->vals[i]));
		free((char *)p->vals[i]);
	}
	free(p->keys);
	free(p->vals);
	p->keys = p->vals = NULL;
}
