// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libpq, loaded at run time for the PostgreSQL store (pglib.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "pglib.h"

struct pq_table pq;

/*
 * libpq is loaded when a store is opened (or a store URI is on the command line), not linked:
 * every other run of corobpf (and its replay speed and memory) stays without it and the TLS
 * and Kerberos libraries it brings.
 */
int pq_load(char *err, size_t errlen)
{
	static const struct {
		size_t off;
		const char *name;
	} funcs[] = {
#define F(field, fn) {offsetof(struct pq_table, field), #fn}
		F(clear, PQclear),
		F(conninfoFree, PQconninfoFree),
		F(conninfoParse, PQconninfoParse),
		F(connectPoll, PQconnectPoll),
		F(connectStartParams, PQconnectStartParams),
		F(consumeInput, PQconsumeInput),
		F(cancel, PQcancel),
		F(errorMessage, PQerrorMessage),
		F(finish, PQfinish),
		F(flush, PQflush),
		F(freeCancel, PQfreeCancel),
		F(getCancel, PQgetCancel),
		F(getResult, PQgetResult),
		F(getvalue, PQgetvalue),
		F(isBusy, PQisBusy),
		F(ntuples, PQntuples),
		F(putCopyData, PQputCopyData),
		F(putCopyEnd, PQputCopyEnd),
		F(resetPoll, PQresetPoll),
		F(resetStart, PQresetStart),
		F(resultErrorField, PQresultErrorField),
		F(resultErrorMessage, PQresultErrorMessage),
		F(resultStatus, PQresultStatus),
		F(sendQuery, PQsendQuery),
		F(sendQueryParams, PQsendQueryParams),
		F(setNoticeReceiver, PQsetNoticeReceiver),
		F(setnonblocking, PQsetnonblocking),
		F(socket, PQsocket),
		F(status, PQstatus),
		F(transactionStatus, PQtransactionStatus),
#undef F
	};
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static bool loaded;
	struct pq_table t;
	void *h;
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (loaded)
		goto out;
	h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load libpq (install Debian's libpq5): %s", dlerror());
		ret = -1;
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(funcs); i++) {
		void *fn = dlsym(h, funcs[i].name);

		if (!fn) {
			snprintf(err, errlen, "libpq.so.5 lacks %s, which corobpf calls: install a "
				 "newer libpq5", funcs[i].name);
			ret = -1;
			goto out;
		}
		memcpy((char *)&t + funcs[i].off, &fn, sizeof(fn));
	}
	pq = t;
	loaded = true;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}
