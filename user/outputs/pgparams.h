/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pgparams.h: what the PostgreSQL store is opened with (docs/store.md):
 * --store-timeout, and the connection URI, read by libpq (pglib.h) and
 * written again without its password for every message. The command line
 * checks a store's URI with it before anything runs; pgconn.c connects
 * with the parameters it parsed.
 */
#ifndef COROBPF_PGPARAMS_H
#define COROBPF_PGPARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include "util.h"

/* --store-timeout: how long to wait for the server, in ms (0: for ever). */
struct pg_timeouts {
	u32 connect_ms;	  /* to connect (a URI's connect_timeout, unless given here) */
	u32 lock_ms;	  /* for a lock: the schema's, or a table's another session holds */
	u32 statement_ms; /* for one command, a COPY batch among them */
	bool connect_set; /* connect= was given */
};

#define PG_CONNECT_TIMEOUT_S 10
#define PG_LOCK_TIMEOUT_S 10
#define PG_STATEMENT_TIMEOUT_S 60

void pg_timeouts_default(struct pg_timeouts *t);
/* "connect=SECS,lock=SECS,statement=SECS", any of them: 0, or -1 with the reason in err. */
int pg_timeouts_parse(struct pg_timeouts *t, const char *arg, char *err, size_t errlen);

/* Whether `path` is a libpq connection URI this output takes. */
bool pgstore_is_uri(const char *path);
/* Whether libpq can be loaded (the store's errors say why not, when it opens). */
bool pgstore_libpq_loads(void);
/*
 * `uri` as messages show it: parsed by libpq and written again without the
 * password (user:secret@, password=..., %70assword=..., sslpassword=...,
 * a value that is itself a conninfo holding one). A URI libpq cannot read
 * is not shown at all.
 */
void pgstore_shown_uri(const char *uri, char *buf, size_t len);
/*
 * The same, and whether libpq reads the URI: 0, or -1 with the reason in
 * err (which quotes nothing of it). *secret: it holds a password.
 */
int pgstore_check_uri(const char *uri, char *shown, size_t shownlen, bool *secret, char *err,
		      size_t errlen);

/* What a connection is made with: a conninfo (URI or key=value) parsed by libpq. */
struct pg_params {
	const char **keys, **vals; /* NULL-terminated, for PQconnectStartParams() */
	int connect_timeout_ms;	   /* the conninfo's connect_timeout, or -1 */
	char shown[512];	   /* as messages show it: pgstore_shown_uri() */
};

/* 0, or -1 with the reason in err (which never quotes the conninfo: it may hold a password). */
int pg_params_parse(struct pg_params *p, const char *conninfo, char *err, size_t errlen);
void pg_params_free(struct pg_params *p);

#endif /* COROBPF_PGPARAMS_H */
