// SPDX-License-Identifier: MIT
/*
 * GNU Pth (an M:1 thread library that switches with ucontext), no corobpf
 * probes: the switch-function path must see its threads through the
 * ucontext family, named as pth names them.
 *
 *     pth K R    K threads named "worker-<i>", each yielding R times and
 *                ending with pth_exit(i + 1) (a small integer as the
 *                pointer, as programs do); and one named "victim" that
 *                yields until main, having joined the workers, cancels it
 *                with pth_cancel (deferred: it ends at its next
 *                pth_cancel_point, through pth_exit(PTH_CANCELED))
 *
 * When the run is over it prints "THREAD <name> <times it was resumed>
 * <exit value>" for each worker, "CANCELLED victim <times it was
 * resumed>" if pth_join gave PTH_CANCELED, then "DONE".
 */
#include <pth.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct worker {
	char name[32];
	unsigned r, resumes, value;
};

static void *work(void *p)
{
	struct worker *w = p;

	w->resumes++;
	for (unsigned i = 0; i < w->r; i++) {
		pth_yield(NULL);
		w->resumes++;
	}
	pth_exit((void *)(uintptr_t)w->value);
	return NULL;
}

static void *victim(void *p)
{
	unsigned *resumes = p;

	for (;;) {
		++*resumes;
		pth_cancel_point();
		pth_yield(NULL);
	}
	return NULL;
}

static pth_t spawn(const char *name, void *(*fn)(void *), void *arg)
{
	pth_attr_t attr = pth_attr_new();
	pth_t t;

	pth_attr_set(attr, PTH_ATTR_NAME, name);
	pth_attr_set(attr, PTH_ATTR_JOINABLE, TRUE);
	t = pth_spawn(attr, fn, arg);
	pth_attr_destroy(attr);
	return t;
}

int main(int argc, char **argv)
{
	unsigned k, r, victim_resumes = 0;
	struct worker *ws;
	pth_t *ts, v;
	void *vvalue = NULL;
	char vname[16];

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
	/*
	 * Its name from writable memory, as the workers' are: a literal's page
	 * may not be mapped in yet when pth_attr_set reads it, and the BPF side
	 * cannot fault it in (the name is then unreadable).
	 */
	snprintf(vname, sizeof(vname), "victim");
	v = spawn(vname, victim, &victim_resumes);
	for (unsigned i = 0; i < k; i++) {
		snprintf(ws[i].name, sizeof(ws[i].name), "worker-%u", i);
		ws[i].r = r;
		ws[i].value = i + 1;
		ts[i] = spawn(ws[i].name, work, &ws[i]);
	}
	for (unsigned i = 0; i < k; i++) {
		void *value = NULL;

		pth_join(ts[i], &value);
		if ((uintptr_t)value != ws[i].value)
			fprintf(stderr, "pth_join gave %p for %s\n", value, ws[i].name);
	}
	pth_cancel(v);
	pth_join(v, &vvalue);
	for (unsigned i = 0; i < k; i++)
		printf("THREAD %s %u %u\n", ws[i].name, ws[i].resumes, ws[i].value);
	if (vvalue == PTH_CANCELED)
		printf("CANCELLED victim %u\n", victim_resumes);
	printf("DONE\n");
	pth_kill();
	return 0;
}
