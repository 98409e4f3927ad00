// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The store's connections (pgconn.h): the server's notices, and every wait on the server
 * bounded.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "log.h"
#include "pgconn.h"

/* ---- the server's notices ---- */

static void on_notice(void *arg, const PGresult *res)
{
	struct pg_notices *nt = arg;
	const char *sev = pq.resultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = pq.resultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = pq.resultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = pq.resultErrorField(res, PG_DIAG_MESSAGE_HINT);
	unsigned int k = atomic_fetch_add(&nt->seen, 1);
	bool warning;
	char line[2048];

	if (!sev)
		sev = "NOTICE";
	warning = !strcmp(sev, "WARNING");
	if (k >= PG_NOTICES_SHOWN) {
		if (warning)
			atomic_fetch_add(&nt->warnings_unshown, 1);
		return;
	}
	/* What the server chose to say: log_msg() escapes it for the terminal. */
	snprintf(line, sizeof(line), "%s: the server says: %s: %s%s%s%s%s", nt->shown, sev,
		 msg ? msg : "", detail ? "; detail: " : "", detail ? detail : "",
		 hint ? "; hint: " : "", hint ? hint : "");
	if (warning)
		log_warn("%s", line);
	else
		log_info("%s", line);
	if (k + 1 == PG_NOTICES_SHOWN && warning)
		log_warn("%s: the server's further messages are not shown (counted at the end)",
			 nt->shown);
	else if (k + 1 == PG_NOTICES_SHOWN)
		log_info("%s: the server's further messages are not shown (counted at the end)",
			 nt->shown);
}

/* ---- waiting ---- */

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * How long a call may wait: a --store-timeout (0: for ever), by its name for the message, and
 * when the wait ends (0: never; a grace later than the timeout for a command, whose own
 * timeout the server applies and answers).
 */
struct limit {
	const char *name;
	u32 ms;
	u64 deadline;
};

static struct limit limit_of(const char *name, u32 ms, u32 grace_ms)
{
	struct limit lim = {name, ms, 0};

	if (ms)
		lim.deadline = now_ns() + ((u64)ms + grace_ms) * 1000000ull;
	return lim;
}

/* Why waiting must end now, or PG_OK. */
static enum pg_end watch_check(struct pg_watch *w)
{
	int sig = w->stop ? *w->stop : 0;
	u64 now, since, zero = 0;

	if (atomic_load(&w->give_up))
		return PG_GIVEN_UP;
	if (sig && atomic_load(&w->opening))
		return PG_STOPPED;
	if (!sig && !atomic_load(&w->stopping))
		return PG_OK;
	/* Tracing stopped: a server that still moves data is given the time it takes. */
	now = now_ns();
	atomic_compare_exchange_strong(&w->stop_ns, &zero, now);
	since = MAX(atomic_load(&w->stop_ns), atomic_load(&w->moved_ns));
	return now > since && now - since >= PG_STALL_MS * 1000000ull ? PG_STALLED : PG_OK;
}

static int signal_of(const struct pg_link *l)
{
	return l->watch->stop ? *l->watch->stop : 0;
}

/* One line of libpq's message: its lines joined with "; ", the indents and the last one gone. */
static void one_line(char *dst, size_t len, const char *src)
{
	size_t n = 0;

	if (!src || !*src)
		src = "no reason given";
	for (const char *c = src; *c && n + 3 < len; c++) {
		if (*c != '\n') {
			dst[n++] = *c == '\t' || *c == '\r' ? ' ' : *c;
			continue;
		}
		while (c[1] == '\n' || c[1] == '\t' || c[1] == ' ')
			c++;
		if (c[1]) {
			dst[n++] = ';';
			dst[n++] = ' ';
		}
	}
	while (n && dst[n - 1] == ' ')
		n--;
	dst[n] = 0;
}

/* The connection failed (or the server did): libpq's reason. */
static int fail_conn(struct pg_link *l)
{
	l->end = PG_FAILED;
	l->sqlstate[0] = 0;
	one_line(l->why, sizeof(l->why), l->conn ? pq.errorMessage(l->conn) : "out of memory");
	return -1;
}

/* A wait ended early: why, in words; what it waited for is given up. */
static int fail_wait(struct pg_link *l, enum pg_end end, const struct limit *lim)
{
	int sig = signal_of(l);

	l->end = end;
	l->sqlstate[0] = 0;
	switch (end) {
	case PG_TIMEOUT:
		snprintf(l->why, sizeof(l->why), "the server did not answer within %g s "
			 "(--store-timeout %s=SECS sets how long to wait)", lim->ms / 1000.0,
			 lim->name);
		break;
	case PG_STOPPED:
		snprintf(l->why, sizeof(l->why), "stopped by SIG%s",
			 sig ? sigabbrev_np(sig) : "INT");
		break;
	case PG_STALLED:
		snprintf(l->why, sizeof(l->why), "the server did not answer for %g s after "
			 "tracing stopped", PG_STALL_MS / 1000.0);
		break;
	default:
		snprintf(l->why, sizeof(l->why), "given up: the store failed");
		break;
	}
	pgc_abandon(l);
	return -1;
}

/* Until the socket is ready for `events`: PG_OK, or why not. */
static enum pg_end wait_socket(struct pg_link *l, short events, const struct limit *lim)
{
	for (;;) {
		struct pollfd pfd = {.fd = pq.socket(l->conn), .events = events};
		enum pg_end end = watch_check(l->watch);
		u64 now = now_ns();
		int ms = 100, r;

		if (end)
			return end;
		if (lim->deadline && now >= lim->deadline)
			return PG_TIMEOUT;
		if (pfd.fd < 0)
			return PG_FAILED;
		if (lim->deadline)
			ms = (int)MIN((u64)ms, (lim->deadline - now + 999999) / 1000000);
		r = poll(&pfd, 1, ms);
		if (r > 0) {
			atomic_store(&l->watch->moved_ns, now_ns());
			return PG_OK;
		}
		if (r < 0 && errno != EINTR)
			return PG_FAILED;
	}
}

/*
 * A call begins: that is activity too. A writer idle while tracing was stopping (the model's
 * end can take seconds) is not taken for one the server left without an answer.
 */
static void call_begins(struct pg_link *l)
{
	atomic_store(&l->watch->moved_ns, now_ns());
}

/* A wait that ended: 0 when the socket is ready, -1 with the reason otherwise. */
static int waited(struct pg_link *l, enum pg_end end, const struct limit *lim)
{
	if (end == PG_FAILED)
		return fail_conn(l);
	return end ? fail_wait(l, end, lim) : 0;
}

int pgc_connect(struct pg_link *l)
{
	bool uri_timeout = !l->t->connect_set && l->params->connect_timeout_ms >= 0;
	struct limit lim = limit_of("connect", uri_timeout ? (u32)l->params->connect_timeout_ms
							    : l->t->connect_ms, 0);
	bool again = l->conn != NULL;
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	call_begins(l);
	if (again) {
		if (!pq.resetStart(l->conn))
			return fail_conn(l);
	} else {
		l->conn = pq.connectStartParams(l->params->keys, l->params->vals, 0);
		if (!l->conn || pq.status(l->conn) == CONNECTION_BAD)
			return fail_conn(l);
		pq.setNoticeReceiver(l->conn, on_notice, l->notices);
	}
	/* libpq's loop: wait as the last poll says (writing, before the first), poll again. */
	while (st != PGRES_POLLING_OK) {
		enum pg_end end;

		if (st == PGRES_POLLING_FAILED)
			return fail_conn(l);
		end = wait_socket(l, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, &lim);
		if (end) {
			waited(l, end, &lim);
			if (end == PG_TIMEOUT && uri_timeout)
				snprintf(l->why, sizeof(l->why), "the server did not answer within "
					 "%g s (the URI's connect_timeout)", lim.ms / 1000.0);
			return -1;
		}
		st = again ? pq.resetPoll(l->conn) : pq.connectPoll(l->conn);
	}
	/* Nothing may block: a full socket buffer is waited for here, watched. */
	if (pq.setnonblocking(l->conn, 1))
		return fail_conn(l);
	return 0;
}

bool pgc_lost(const struct pg_link *l)
{
	return !l->conn || pq.status(l->conn) == CONNECTION_BAD;
}

/* Sends what libpq holds, reading what the server sends meanwhile (it may wait for that). */
static int flush_all(struct pg_link *l, const struct limit *lim)
{
	int r;

	while ((r = pq.flush(l->conn)) == 1) {
		if (waited(l, wait_socket(l, POLLOUT | POLLIN, lim), lim))
			return -1;
		if (!pq.consumeInput(l->conn))
			return fail_conn(l);
	}
	return r < 0 ? fail_conn(l) : 0;
}

/* The server's refusal, with the option that sets the timeout it names. */
static void refused(struct pg_link *l, const PGresult *res)
{
	const char *code = pq.resultErrorField(res, PG_DIAG_SQLSTATE);
	size_t n;

	l->end = PG_FAILED;
	snprintf(l->sqlstate, sizeof(l->sqlstate), "%s", code ? code : "");
	one_line(l->why, sizeof(l->why), pq.resultErrorMessage(res));
	n = strlen(l->why);
	/* query_canceled (the statement timeout, or a cancel), lock_not_available. */
	if (!strcmp(l->sqlstate, "57014") && n < sizeof(l->why))
		snprintf(l->why + n, sizeof(l->why) - n, " (--store-timeout statement=SECS sets "
			 "how long a command may take)");
	else if (!strcmp(l->sqlstate, "55P03") && n < sizeof(l->why))
		snprintf(l->why + n, sizeof(l->why) - n, " (--store-timeout lock=SECS sets how "
			 "long to wait for a lock)");
}

/*
 * The results of what was sent, up to the last (or to a COPY's start): 0 when all have status
 * ok, the last in *out if out; -1 with the first refusal otherwise.
 */
static int read_results(struct pg_link *l, const struct limit *lim, ExecStatusType ok,
			PGresult **out)
{
	PGresult *keep = NULL, *res;
	bool bad = false;

	for (;;) {
		ExecStatusType st;

		while (pq.isBusy(l->conn)) {
			if (waited(l, wait_socket(l, POLLIN, lim), lim) ||
			    (!pq.consumeInput(l->conn) && fail_conn(l))) {
				PQclear(keep);
				return -1;
			}
		}
		res = pq.getResult(l->conn);
		if (!res)
			break;
		st = pq.resultStatus(res);
		if (st == PGRES_COPY_IN && ok == PGRES_COPY_IN && !bad) {
			PQclear(keep);
			keep = res;
			break; /* the data comes next, and the command's results after it */
		}
		if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
			/* A COPY nobody asked for (a server of its own mind): the connection goes. */
			PQclear(res);
			PQclear(keep);
			l->end = PG_FAILED;
			l->sqlstate[0] = 0;
			snprintf(l->why, sizeof(l->why), "the server began a COPY that was not "
				 "asked for");
			pgc_abandon(l);
			return -1;
		}
		if (bad) {
			PQclear(res);
		} else if (st == ok) {
			PQclear(keep);
			keep = res;
		} else {
			/* The first refusal is the one to show; the rest are read and dropped. */
			bad = true;
			refused(l, res);
			PQclear(keep);
			keep = NULL;
			PQclear(res);
		}
	}
	if (bad)
		return -1;
	if (!keep)
		return fail_conn(l); /* no result at all: libpq says why */
	if (out)
		*out = keep;
	else
		PQclear(keep);
	return 0;
}

static int exec_within(struct pg_link *l, const struct limit *lim, const char *sql,
		       int nparams, const char *const *params, ExecStatusType ok, PGresult **res)
{
	int sent;

	if (!l->conn) {
		l->end = PG_FAILED;
		snprintf(l->why, sizeof(l->why), "not connected");
		return -1;
	}
	call_begins(l);
	if (nparams < 0)
		sent = pq.sendQuery(l->conn, sql);
	else
		sent = pq.sendQueryParams(l->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (!sent)
		return fail_conn(l);
	if (flush_all(l, lim))
		return -1;
	return read_results(l, lim, ok, res);
}

int pgc_exec(struct pg_link *l, const char *sql, int nparams, const char *const *params,
	     ExecStatusType ok, PGresult **res, u32 wait_ms)
{
	struct limit lim = wait_ms ? limit_of("lock", wait_ms, PG_ANSWER_GRACE_MS)
				   : limit_of("statement", l->t->statement_ms, PG_ANSWER_GRACE_MS);

	return exec_within(l, &lim, sql, nparams, params, ok, res);
}

/* Queues a piece of COPY data (a few MiB at most) and sends it. */
static int copy_piece(struct pg_link *l, const char *p, size_t n, const struct limit *lim)
{
	int r;

	while ((r = pq.putCopyData(l->conn, p, (int)n)) == 0) {
		if (waited(l, wait_socket(l, POLLOUT, lim), lim))
			return -1;
		if (pq.flush(l->conn) < 0)
			return fail_conn(l);
	}
	if (r < 0)
		return fail_conn(l);
	return flush_all(l, lim);
}

int pgc_copy(struct pg_link *l, const char *sql, const char *const *data, const size_t *len,
	     int npieces)
{
	/* The statement timeout runs from the COPY command to its end, data included. */
	struct limit lim = limit_of("statement", l->t->statement_ms, PG_ANSWER_GRACE_MS);
	PGresult *res = NULL;
	int r;

	if (exec_within(l, &lim, sql, -1, NULL, PGRES_COPY_IN, &res))
		return -1;
	PQclear(res);
	for (int i = 0; i < npieces; i++) {
		/* libpq takes data in pieces of any size; a few MiB at a time keeps its buffer small. */
		for (size_t off = 0; off < len[i];) {
			size_t n = MIN(len[i] - off, (size_t)(4u << 20));

			if (copy_piece(l, data[i] + off, n, &lim))
				return -1;
			off += n;
		}
	}
	while ((r = pq.putCopyEnd(l->conn, NULL)) == 0) {
		if (waited(l, wait_socket(l, POLLOUT, &lim), &lim))
			return -1;
		if (pq.flush(l->conn) < 0)
			return fail_conn(l);
	}
	if (r < 0)
		return fail_conn(l);
	if (flush_all(l, &lim))
		return -1;
	return read_results(l, &lim, PGRES_COMMAND_OK, NULL);
}

int pgc_sleep(struct pg_link *l, u32 ms)
{
	u64 end = now_ns() + (u64)ms * 1000000ull;

	for (;;) {
		enum pg_end why = watch_check(l->watch);
		u64 now = now_ns();
		struct timespec ts;
		u64 step;

		if (why) {
			struct limit none = {"connect", 0, 0};

			return fail_wait(l, why, &none);
		}
		if (now >= end)
			return 0;
		step = MIN(end - now, 100000000ull);
		ts.tv_sec = 0;
		ts.tv_nsec = (long)step;
		nanosleep(&ts, NULL);
	}
}

/* ---- giving up on a command ---- */

/* A cancel request on a thread of its own: it may hang as long as the server does. */
struct cancel_job {
	PGcancel *cancel;
	atomic_int refs; /* the thread's and the waiter's: the last one frees it */
	atomic_bool done;
};

static void cancel_job_put(struct cancel_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1) {
		pq.freeCancel(j->cancel);
		free(j);
	}
}

static void *cancel_main(void *arg)
{
	struct cancel_job *j = arg;
	char why[256];

	pq.cancel(j->cancel, why, sizeof(why));
	atomic_store(&j->done, true);
	cancel_job_put(j);
	return NULL;
}

void pgc_abandon(struct pg_link *l)
{
	struct cancel_job *j;
	pthread_attr_t attr;
	pthread_t t;

	if (!l->conn)
		return;
	/*
	 * A command in progress is cancelled, so that the server lets go of what it waits for
	 * (a lock), not only when it next writes to the closed connection. Waited for half a
	 * second at most: a server that never answers keeps the thread, not the run.
	 */
	if (pq.status(l->conn) == CONNECTION_OK &&
	    pq.transactionStatus(l->conn) == PQTRANS_ACTIVE) {
		j = xcalloc(1, sizeof(*j));
		j->cancel = pq.getCancel(l->conn);
		atomic_init(&j->refs, 2);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (j->cancel && !pthread_create(&t, &attr, cancel_main, j)) {
			for (int i = 0; i < 50 && !atomic_load(&j->done); i++)
				nanosleep(&(struct timespec){0, 10000000L}, NULL);
			cancel_job_put(j);
		} else {
			if (j->cancel)
				pq.freeCancel(j->cancel);
			free(j);
		}
		pthread_attr_destroy(&attr);
	}
	pq.finish(l->conn);
	l->conn = NULL;
}
