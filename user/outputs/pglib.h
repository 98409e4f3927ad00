/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pglib.h: libpq for the PostgreSQL store, loaded when a store is opened
 * (dlopen), not linked: every other run of corobpf stays without it and the
 * TLS and Kerberos libraries it brings. Internal to the store: pgparams.c,
 * pgconn.c and pgstore.c call libpq through the `pq` table below.
 */
#ifndef COROBPF_PGLIB_H
#define COROBPF_PGLIB_H

#include <libpq-fe.h>
#include "util.h"

/* libpq's functions, loaded by pq_load() (dlopen: the other outputs never load libpq). */
struct pq_table {
	__typeof__(&PQclear) clear;
	__typeof__(&PQconninfoFree) conninfoFree;
	__typeof__(&PQconninfoParse) conninfoParse;
	__typeof__(&PQconnectPoll) connectPoll;
	__typeof__(&PQconnectStartParams) connectStartParams;
	__typeof__(&PQconsumeInput) consumeInput;
	__typeof__(&PQcancel) cancel;
	__typeof__(&PQerrorMessage) errorMessage;
	__typeof__(&PQfinish) finish;
	__typeof__(&PQflush) flush;
	__typeof__(&PQfreeCancel) freeCancel;
	__typeof__(&PQgetCancel) getCancel;
	__typeof__(&PQgetResult) getResult;
	__typeof__(&PQgetvalue) getvalue;
	__typeof__(&PQisBusy) isBusy;
	__typeof__(&PQntuples) ntuples;
	__typeof__(&PQputCopyData) putCopyData;
	__typeof__(&PQputCopyEnd) putCopyEnd;
	__typeof__(&PQresetPoll) resetPoll;
	__typeof__(&PQresetStart) resetStart;
	__typeof__(&PQresultErrorField) resultErrorField;
	__typeof__(&PQresultErrorMessage) resultErrorMessage;
	__typeof__(&PQresultStatus) resultStatus;
	__typeof__(&PQsendQuery) sendQuery;
	__typeof__(&PQsendQueryParams) sendQueryParams;
	__typeof__(&PQsetNoticeReceiver) setNoticeReceiver;
	__typeof__(&PQsetnonblocking) setnonblocking;
	__typeof__(&PQsocket) socket;
	__typeof__(&PQstatus) status;
	__typeof__(&PQtransactionStatus) transactionStatus;
};

extern struct pq_table pq;

/* The calls the store makes on results; the rest go through pgc_*() below. */
#define PQclear (pq.clear)
#define PQgetvalue (pq.getvalue)
#define PQntuples (pq.ntuples)

/* 0, or -1 with the reason (libpq is missing) in err. */
int pq_load(char *err, size_t errlen);

#endif /* COROBPF_PGLIB_H */
