// SPDX-License-Identifier: MIT
/*
 * batch_forger: a program that forges its batched records
 * (suite_hostile_batch.py). It fires ordinary probes, and after each one
 * rewrites the time of the record it appended: an hour ahead, the largest
 * time there is, or long before the tracer started, in turn. Now and then
 * it also starts its buffer again three generations on (its unread records
 * dropped), or goes back a generation over a full buffer (its old records
 * offered again). Prints "READY <pid>" and runs until killed.
 */
#include "corobpf.h"
#include <stdio.h>
#include <unistd.h>

#define HOUR 3600000000000ull

static void forge(unsigned long long k)
{
	unsigned int n = (unsigned int)corobpf_batch_tls.word;
	struct corobpf_batch_rec *r;

	if (!n || n > COROBPF_BATCH_RECS)
		return;
	r = &corobpf_batch_tls.rec[n - 1];
	r->ts = k % 3 == 0 ? r->ts + HOUR : k % 3 == 1 ? ~0ull : 1;
}

int main(void)
{
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	for (unsigned long long i = 1;; i++) {
		unsigned long long id = 0x4000000000ull + i;

		CORO_PROBE(create, id, 0);
		forge(i);
		CORO_PROBE(switch, 0, id, CORO_YIELD, 0);
		forge(i + 1);
		CORO_PROBE(switch, id, 0, CORO_DONE, 0);
		forge(i + 2);
		CORO_PROBE(exit, id, 0);
		if (i % 50 == 0) {
			unsigned long long w = corobpf_batch_tls.word;

			corobpf_batch_tls.word = i % 100 ? ((w >> 32) + 3) << 32
						 : ((w >> 32) - 1) << 32 | COROBPF_BATCH_RECS;
		}
		if (i % 16 == 0)
			usleep(1000);
	}
}
