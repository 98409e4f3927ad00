// SPDX-License-Identifier: MIT
/*
 * GNU Pth (an M:1 thread library that switches with ucontext), no corobpf
 * probes: the switch-function path must see its threads through the
 * ucontext family, named as pth names them.
 *
 *     pth K R    K threads named "worker-<i>", each yielding R times; main
 *                joins them
 *
 * When the run is over it prints "THREAD <name> <times it was resumed>"
 * for each, then "DONE".
 */
#include <pth.h>
#include <stdio.h>
#include <stdlib.h>

struct worker {
	char name[32];
	unsigned r, resumes;
};

static void *work(void *p)
{
	struct worker *w = p;

	w->resumes++;
	for (unsigned i = 0; i < w->r; i++) {
		pth_yield(NULL);
		w->resumes++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned k, r;
	struct worker *ws;
	pth_t *ts;

	if (argc != 3) {
		fprintf(stderr, "usage: pth K R\n");
		return 2;
	}
	k = (unsigned)atoi(argv[1]);
	r = (unsigned)atoi(argv[2]);
	if (!pth_init()) {
		perror("pth_init");
		return 1;
	}
	ws = calloc(k, sizeof(*ws));
	ts = calloc(k, sizeof(*ts));
	for (unsigned i = 0; i < k; i++) {
		pth_attr_t attr = pth_attr_new();

		snprintf(ws[i].name, sizeof(ws[i].name), "worker-%u", i);
		ws[i].r = r;
		pth_attr_set(attr, PTH_ATTR_NAME, ws[i].name);
		pth_attr_set(attr, PTH_ATTR_JOINABLE, TRUE);
		ts[i] = pth_spawn(attr, work, &ws[i]);
		pth_attr_destroy(attr);
	}
	for (unsigned i = 0; i < k; i++)
		pth_join(ts[i], NULL);
	for (unsigned i = 0; i < k; i++)
		printf("THREAD %s %u\n", ws[i].name, ws[i].resumes);
	printf("DONE\n");
	pth_kill();
	return 0;
}
