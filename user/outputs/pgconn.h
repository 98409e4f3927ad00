/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The PostgreSQL store's connections (pgstore.c, docs/store.md), made with the parameters
 * pgparams.h parsed, through libpq (pglib.h): every wait on the server bounded, so that no
 * server, lock or network holds a run.
 *
 * Every call that waits for the server polls its socket 100 ms at a time (libpq's
 * asynchronous API: nothing blocks in libpq) and ends early when
 *   - its timeout passes (--store-timeout: connecting, a lock, one command; the server is
 *     told the lock and statement timeouts too, and a server that says nothing is given them
 *     and a second more),
 *   - a signal stops the run while the store is being opened (connecting, the schema),
 *   - tracing was stopped (-d, a signal) and no connection of the store has sent or received
 *     anything for PG_STALL_MS: the server stopped answering, the raw capture keeps the rows,
 *   - the store failed on another of its connections (give_up).
 * A command given up on is cancelled (PQcancel, on a thread of its own: it connects to the
 * server and may hang as long as the server does) and its connection closed.
 *
 * The server's notices and warnings go through the terminal escaping (log.h), at most
 * PG_NOTICES_SHOWN of them per store.
 *
 * Internal to the store: pgstore.c and this module use libpq through the `pq` table (pglib.h).
 */
#ifndef COROBPF_PGCONN_H
#define COROBPF_PGCONN_H

#include <signal.h>
#include <stdatomic.h>
#include "pglib.h"
#include "pgparams.h"

#define PG_STALL_MS 1000     /* once tracing stopped: no answer for this long ends a wait */
#define PG_ANSWER_GRACE_MS 1000 /* a server's own timeout answers; one that says nothing is
				 * given this much more */
#define PG_NOTICES_SHOWN 20  /* the server's messages shown per store */

/* Why a call ended without doing what it was asked. */
enum pg_end {
	PG_OK,
	PG_FAILED,   /* the server refused, or the connection failed: libpq says why */
	PG_TIMEOUT,  /* a --store-timeout passed */
	PG_STOPPED,  /* a signal stopped the run while the store was being opened */
	PG_STALLED,  /* tracing stopped and the server answered nothing for PG_STALL_MS */
	PG_GIVEN_UP, /* the store failed elsewhere, or the run did */
};

/* What every wait of one store watches; shared by its connections. */
struct pg_watch {
	volatile sig_atomic_t *stop; /* the run's stop signal (capture.h), or NULL */
	atomic_bool opening;	     /* connecting, the schema: a signal ends every wait */
	atomic_bool stopping;	     /* tracing was stopped on request (-d, a signal) */
	atomic_bool give_up;
	_Atomic u64 moved_ns;	     /* the last time a connection sent or received anything */
	_Atomic u64 stop_ns;	     /* when a stop was first seen (0: not yet) */
};

/* The server's notices and warnings, shown escaped (PG_NOTICES_SHOWN at most). */
struct pg_notices {
	const char *shown; /* the store, as messages name it */
	atomic_uint seen;
	atomic_uint warnings_unshown; /* past PG_NOTICES_SHOWN: said at warning level (-q) */
};

/* One connection and how its last call went. */
struct pg_link {
	PGconn *conn; /* NULL before the first connection, and once given up */
	struct pg_watch *watch;
	const struct pg_params *params;
	const struct pg_timeouts *t;
	struct pg_notices *notices;
	enum pg_end end;  /* of the last call that failed */
	char sqlstate[6]; /* the server's error code, when it refused ("" otherwise) */
	char why[768];	  /* why it failed: one line, for a message */
};

/* Connects (again, if it was connected): bounded by the connect timeout. 0 or -1. */
int pgc_connect(struct pg_link *l);
/* Whether the connection is gone (never made, given up, or lost). */
bool pgc_lost(const struct pg_link *l);
/*
 * One command, its results read to the last: 0 when every one has status `ok` (the last in
 * *res if res), or -1 with l->end, l->sqlstate and l->why. nparams < 0: sql is sent as it is
 * (several statements may follow one another). The answer is waited for the statement
 * timeout, or wait_ms if not 0.
 */
int pgc_exec(struct pg_link *l, const char *sql, int nparams, const char *const *params,
	     ExecStatusType ok, PGresult **res, u32 wait_ms);
/* COPY ... FROM STDIN with the given pieces of data, one after the other: 0 or -1. */
int pgc_copy(struct pg_link *l, const char *sql, const char *const *data, const size_t *len,
	     int npieces);
/* Sleeps ms, watched: 0, or -1 with l->end when the wait must end. */
int pgc_sleep(struct pg_link *l, u32 ms);
/* Cancels the command in progress, if any (bounded), and closes the connection. */
void pgc_abandon(struct pg_link *l);

#endif
