// SPDX-License-Identifier: MIT
/*
 * span_attach: spans open when a tracer attaches (suite_23_spans.py).
 *
 *     span_attach TRUTH_FILE ORPHAN_FILE
 *
 * Two workers run one coroutine after another, each inside a span "req"
 * held across a 5 ms sleep; the main thread holds a span "tick" of its own,
 * outside any coroutine, across the same sleep. A tracer attaching at any
 * moment thus finds most of them inside a span, whose span_end it sees and
 * whose span_begin it cannot have.
 *
 * Once ORPHAN_FILE exists, worker 0 runs one more coroutine, created after
 * it saw the file, that ends a span "orphan" it never began: a real bug,
 * which a tracer attached before the file appeared must report. It then
 * writes TRUTH_FILE: "orphan ID" (ID in hex), and goes on as before.
 */
#include "corobpf.h"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static const char *truth, *orphan_file;

static void *worker(void *arg)
{
	unsigned long long t = (unsigned long long)(long)arg;
	int orphaned = t != 0;

	for (unsigned long long i = 0;; i++) {
		unsigned long long id = (t + 1) << 32 | (i + 1);

		CORO_PROBE(create, id, 0);
		CORO_PROBE(switch, 0, id, CORO_YIELD, 0);
		if (!orphaned && !access(orphan_file, F_OK)) {
			FILE *f;

			CORO_PROBE(span_end, "orphan");
			orphaned = 1;
			f = fopen(truth, "w");
			if (f) {
				fprintf(f, "orphan %llx\n", id);
				fclose(f);
			}
		} else {
			CORO_PROBE(span_begin, "req");
			usleep(5000);
			CORO_PROBE(span_end, "req");
		}
		CORO_PROBE(switch, id, 0, CORO_DONE, 0);
		CORO_PROBE(exit, id, 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[2];

	if (argc != 3) {
		fprintf(stderr, "usage: span_attach TRUTH_FILE ORPHAN_FILE\n");
		return 2;
	}
	truth = argv[1];
	orphan_file = argv[2];
	for (long t = 0; t < 2; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		CORO_PROBE(span_begin, "tick");
		usleep(5000);
		CORO_PROBE(span_end, "tick");
	}
}
