// SPDX-License-Identifier: MIT
/*
 * Plain ucontext coroutines, no corobpf probes: what the switch-function
 * path must see through makecontext, swapcontext and setcontext alone.
 *
 *     uctx rr K R         K coroutines resumed round-robin by main; each
 *                         yields R times (swapcontext back to main), so it
 *                         runs R+1 times and then returns to main through
 *                         uc_link
 *     uctx chain K R      the same, but each finishes with setcontext straight
 *                         to main instead of returning
 *     uctx threads T K R  T threads, each running `rr K R` on its own
 *     uctx custom K R     as rr, but every switch goes through the program's
 *                         own task_switch(from, to), taking the coroutines'
 *                         records (struct co *): what --switch uprobe:... follows
 *     uctx loop N         one coroutine, N round trips (the benchmark: prints the
 *                         time per swapcontext, "ns/iter")
 *     uctx jump N         getcontext/setcontext as a jump, no coroutine made by
 *                         it: main jumps back N times to a context it saved
 *                         with getcontext, then runs one coroutine that does
 *                         the same, yields once and returns
 *     uctx recover        error recovery: main saves a context with getcontext
 *                         and resumes a coroutine, which jumps back to it with
 *                         setcontext (a switch to main; it is never resumed)
 *     uctx nop5fork N     calls its nop5_switch(from, to), whose first instruction
 *                         is a five-byte nop, N times, then forks a child that
 *                         calls it N times and exits with 7; prints "CHILD
 *                         exited <status>" or "CHILD killed <signal>": what a
 *                         uprobe on that nop must not break
 *     uctx recycle K R    one ucontext_t made K times with makecontext: each
 *                         incarnation yields R times; even ones return, odd
 *                         ones are abandoned after their first run and the
 *                         context made again
 *
 * When the run is over it prints, per thread, "MAIN <tid> <main context
 * address>" and per coroutine "CO <tid> <ucontext address> <times it was
 * resumed>" (custom: "MAINTASK <tid> <address>" and "TASK <tid> <struct co
 * address> <times resumed>"), then "DONE". recycle prints a CO line per
 * incarnation, in order, with " returned", " abandoned" or " unused" (made,
 * never run, made again); jump prints
 * "JUMPS <number of setcontext jumps>", recover "RECOVERED".
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK (64 * 1024)

struct co {
	ucontext_t uc;
	unsigned resumes;
	char *stack;
};

struct run {
	ucontext_t main;
	struct co *cos;
	struct co main_co; /* custom: main as a task record */
	unsigned k, r, cur;
	bool chain, custom;
	pid_t tid;
};

/*
 * nop5fork: a switch function that begins with a five-byte nop (as -mnop-mcount or a
 * hot-patch area leaves one), which a kernel that optimizes uprobes turns into a call.
 */
void nop5_switch(void *from, void *to);
__asm__(".text\n.globl nop5_switch\n.type nop5_switch, @function\nnop5_switch:\n"
	"\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tret\n.size nop5_switch, .-nop5_switch\n");

static void nop5_calls(unsigned n)
{
	static char a, b;

	for (unsigned i = 0; i < n; i++)
		nop5_switch(i & 1 ? &b : &a, i & 1 ? &a : &b);
}

static void nop5fork(unsigned n)
{
	int status;
	pid_t pid;

	nop5_calls(n);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		nop5_calls(n);
		_exit(7);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		perror("fork");
		exit(1);
	}
	if (WIFSIGNALED(status))
		printf("CHILD killed %d\n", WTERMSIG(status));
	else
		printf("CHILD exited %d\n", WEXITSTATUS(status));
}

/* custom: the program's own switch function, a scheduler's API in miniature. */
__attribute__((noinline)) void task_switch(struct co *from, struct co *to)
{
	swapcontext(&from->uc, &to->uc);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

static __thread struct run *self;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void body(void)
{
	struct run *run = self;
	struct co *co = &run->cos[run->cur];

	co->resumes++;
	for (unsigned i = 0; i < run->r; i++) {
		if (run->custom)
			task_switch(co, &run->main_co);
		else
			swapcontext(&co->uc, &run->main);
		co->resumes++;
	}
	if (run->chain)
		setcontext(&run->main);
	/* custom: every switch goes through task_switch, the last one too; it is never resumed. */
	if (run->custom)
		task_switch(co, &run->main_co);
	/* Returning goes to uc_link: main. */
}

static void setup_fn(struct run *run, unsigned k, unsigned r, bool chain, bool custom,
		     void (*fn)(void))
{
	memset(run, 0, sizeof(*run));
	run->k = k;
	run->r = r;
	run->chain = chain;
	run->custom = custom;
	run->tid = (pid_t)syscall(SYS_gettid);
	run->cos = calloc(k, sizeof(*run->cos));
	for (unsigned i = 0; i < k; i++) {
		struct co *co = &run->cos[i];

		co->stack = malloc(STACK);
		getcontext(&co->uc);
		co->uc.uc_stack.ss_sp = co->stack;
		co->uc.uc_stack.ss_size = STACK;
		co->uc.uc_link = run->custom ? &run->main_co.uc : &run->main;
		makecontext(&co->uc, fn, 0);
	}
}

static void setup(struct run *run, unsigned k, unsigned r, bool chain, bool custom)
{
	setup_fn(run, k, r, chain, custom, body);
}

static void rr(struct run *run)
{
	self = run;
	for (unsigned pass = 0; pass <= run->r; pass++)
		for (unsigned i = 0; i < run->k; i++) {
			run->cur = i;
			if (run->custom)
				task_switch(&run->main_co, &run->cos[i]);
			else
				swapcontext(&run->main, &run->cos[i].uc);
		}
}

static void report(struct run *run)
{
	pthread_mutex_lock(&print_lock);
	if (run->custom) {
		printf("MAINTASK %d %p\n", run->tid, (void *)&run->main_co);
		for (unsigned i = 0; i < run->k; i++)
			printf("TASK %d %p %u\n", run->tid, (void *)&run->cos[i], run->cos[i].resumes);
		pthread_mutex_unlock(&print_lock);
		return;
	}
	printf("MAIN %d %p\n", run->tid, (void *)&run->main);
	for (unsigned i = 0; i < run->k; i++)
		printf("CO %d %p %u\n", run->tid, (void *)&run->cos[i].uc, run->cos[i].resumes);
	pthread_mutex_unlock(&print_lock);
}

static void release(struct run *run)
{
	for (unsigned i = 0; i < run->k; i++)
		free(run->cos[i].stack);
	free(run->cos);
}

struct thread_arg {
	unsigned k, r;
	struct run run;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;

	setup(&a->run, a->k, a->r, false, false);
	rr(&a->run);
	return NULL;
}

/* jump: the number of jumps left, and the coroutine's own jump target. */
static volatile unsigned jumps_left, jumps_done;

static void jump_body(void)
{
	struct run *run = self;
	struct co *co = &run->cos[0];
	ucontext_t again;

	co->resumes++;
	jumps_left = run->r;
	getcontext(&again);
	if (jumps_left) {
		jumps_left--;
		jumps_done++;
		setcontext(&again);
	}
	swapcontext(&co->uc, &run->main);
	co->resumes++;
}

static void jump(struct run *run, unsigned n)
{
	ucontext_t again;

	jumps_left = n;
	getcontext(&again);
	if (jumps_left) {
		jumps_left--;
		jumps_done++;
		setcontext(&again);
	}
	setup_fn(run, 1, n, false, false, jump_body);
	self = run;
	swapcontext(&run->main, &run->cos[0].uc);
	swapcontext(&run->main, &run->cos[0].uc);
	report(run);
	printf("JUMPS %u\n", jumps_done);
	release(run);
}

/* recover: where the coroutine escapes to. */
static ucontext_t recover_point;
static volatile bool escaped;

static void escape_body(void)
{
	self->cos[0].resumes++;
	escaped = true;
	setcontext(&recover_point);
}

static void recover(struct run *run)
{
	setup_fn(run, 1, 0, false, false, escape_body);
	self = run;
	getcontext(&recover_point);
	if (!escaped)
		swapcontext(&run->main, &run->cos[0].uc);
	report(run);
	printf("RECOVERED\n");
	release(run);
}

/* recycle: one ucontext_t, made again for each incarnation. */
static void recycle(struct run *run, unsigned k, unsigned r)
{
	setup(run, 1, r, false, false);
	self = run;
	/* setup made it once already: an incarnation that never runs. */
	printf("CO %d %p 0 unused\n", run->tid, (void *)&run->cos[0].uc);
	for (unsigned i = 0; i < k; i++) {
		struct co *co = &run->cos[0];
		bool abandon = i % 2;

		co->resumes = 0;
		getcontext(&co->uc);
		co->uc.uc_stack.ss_sp = co->stack;
		co->uc.uc_stack.ss_size = STACK;
		co->uc.uc_link = &run->main;
		makecontext(&co->uc, body, 0);
		run->cur = 0;
		for (unsigned pass = 0; pass <= (abandon ? 0 : r); pass++)
			swapcontext(&run->main, &co->uc);
		printf("CO %d %p %u %s\n", run->tid, (void *)&co->uc, co->resumes,
		       abandon ? "abandoned" : "returned");
	}
	printf("MAIN %d %p\n", run->tid, (void *)&run->main);
	release(run);
}

static void usage(void)
{
	fprintf(stderr, "usage: uctx rr K R | chain K R | custom K R | threads T K R | loop N | "
			"jump N | recover | recycle K R | nop5fork N\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct run run;

	if (argc == 2 && !strcmp(argv[1], "recover")) {
		recover(&run);
		printf("DONE\n");
		return 0;
	}
	if (argc < 3)
		usage();
	if (!strcmp(argv[1], "rr") || !strcmp(argv[1], "chain") || !strcmp(argv[1], "custom")) {
		if (argc != 4)
			usage();
		setup(&run, (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
		      !strcmp(argv[1], "chain"), !strcmp(argv[1], "custom"));
		rr(&run);
		report(&run);
		release(&run);
	} else if (!strcmp(argv[1], "threads")) {
		unsigned t;
		pthread_t *th;
		struct thread_arg *args;

		if (argc != 5)
			usage();
		t = (unsigned)atoi(argv[2]);
		th = calloc(t, sizeof(*th));
		args = calloc(t, sizeof(*args));
		for (unsigned i = 0; i < t; i++) {
			args[i].k = (unsigned)atoi(argv[3]);
			args[i].r = (unsigned)atoi(argv[4]);
			pthread_create(&th[i], NULL, thread_main, &args[i]);
		}
		for (unsigned i = 0; i < t; i++) {
			pthread_join(th[i], NULL);
			report(&args[i].run);
			release(&args[i].run);
		}
		free(th);
		free(args);
	} else if (!strcmp(argv[1], "jump") && argc == 3) {
		jump(&run, (unsigned)atoi(argv[2]));
	} else if (!strcmp(argv[1], "nop5fork") && argc == 3) {
		nop5fork((unsigned)atoi(argv[2]));
	} else if (!strcmp(argv[1], "recycle") && argc == 4) {
		recycle(&run, (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	} else if (!strcmp(argv[1], "loop")) {
		/* One coroutine yielding N times: 2N swapcontext calls, timed here. */
		struct timespec a, b;
		unsigned n = (unsigned)strtoul(argv[2], NULL, 0);

		setup(&run, 1, n, false, false);
		clock_gettime(CLOCK_MONOTONIC, &a);
		rr(&run);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("LOOP %u\n%.1f ns/iter (one swapcontext)\n", run.cos[0].resumes,
		       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (2.0 * n + 2));
		release(&run);
	} else {
		usage();
	}
	printf("DONE\n");
	return 0;
}
