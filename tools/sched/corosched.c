// SPDX-License-Identifier: MIT
/*
 * corosched: an M:N coroutine scheduler with corobpf probes. See corosched.h
 * for the API; this comment is about how it stays correct.
 *
 * ONE LOCK
 *	S.lock protects everything: the run queue, the timer heap, every
 *	coroutine's state, channels, wait groups and barriers. Every blocking
 *	operation has to take the run queue lock to suspend or wake anyway, so
 *	a lock per object would only add a second acquisition and a lock order.
 *
 * THE LOCK IS HANDED ACROSS SWITCHES
 *	A coroutine that suspends takes S.lock, registers itself where its
 *	waker will find it (a wait queue, the timer heap), and switches to its
 *	worker's loop *with the lock held*. The worker loop marks it blocked
 *	and switches to the next coroutine, still holding it; the coroutine
 *	that resumes releases it. Every switch stays on one OS thread, so the
 *	mutex is always unlocked by the thread that locked it.
 *	This closes the classic M:N race: a waker needs S.lock to find a
 *	waiter, and gets it only after the waiter's registers are saved and it
 *	is marked blocked, so a coroutine can never be resumed on another
 *	worker while its own worker is still on its stack. No "wakeup pending"
 *	flag is needed because no waker can run in that window.
 *
 * PROBES
 *	Every probe that describes a state change fires under S.lock, at the
 *	moment of the change, so their order in time is the order of the
 *	changes: ready(X) always precedes the switch to X, and exit(X) the
 *	switch out of X. A switch probe fires once per change of what a worker
 *	runs, from the worker loop, which is also where switch_ins is counted.
 *
 * THREAD-LOCALS AND MIGRATION
 *	A coroutine may suspend on one thread and resume on another, and the
 *	compiler assumes the thread pointer never changes inside a function.
 *	So the current worker is only ever read through this_worker(), which
 *	is not inlined, and no worker pointer is kept across a switch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "corobpf.h"
#include "corosched.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define CORO_ASAN 1
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__) || __has_feature(thread_sanitizer)
#define CORO_TSAN 1
#include <sanitizer/tsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#define CORO_VALGRIND 1
#include <valgrind/valgrind.h>
#endif
#endif

#define DEFAULT_WORKERS 2
#define DEFAULT_STACK (128 * 1024)
#define STACK_CACHE_MAX 64
#define NOT_IN_HEAP ((size_t)-1)
#define ANNOUNCE_POLL_NS (100 * 1000000ull)

enum co_state {
	CO_READY,	/* on the run queue */
	CO_RUNNING,	/* on a worker (including while it switches out) */
	CO_BLOCKED,	/* registered on a wait queue or the timer heap */
	CO_DONE,	/* finished; the record stays for join and the truth file */
};

struct coro;

/* FIFO of blocked coroutines, linked through coro.wq_prev/wq_next. */
struct co_waitq {
	struct coro *head, *tail;
};

struct co_stack {
	void *map;		/* mapping, guard page first */
	size_t map_size;
	unsigned int vg_id;	/* valgrind's handle for the stack */
};

struct coro {
	uint64_t id;
	uint64_t parent;
	char *name;
	co_fn fn;
	void *arg;
	void *sp;			/* saved stack pointer while not running */
	struct co_stack stack;
	enum co_state state;
	int status;
	bool cancel_req;		/* co_cancel() was called before it finished */
	int wake_result;		/* what its blocking call returns */
	uint64_t switch_ins;
	/* The worker threads it ran on, in first-run order (for the truth file; 8 kept). */
	int tids[8];
	unsigned int ntids;
	struct coro *rq_next;
	struct co_waitq *waitq;		/* the queue it blocks on, or NULL */
	struct coro *wq_prev, *wq_next;
	void *msg;			/* channel message being sent or received */
	uint64_t deadline_ns;		/* CLOCK_MONOTONIC, while sleeping */
	int park_reason;		/* why it last switched out (CORO_*), and on what */
	uint64_t park_obj;
	/* What the last announce said of it (CORO_*; -1: never announced), for the truth file. */
	int announced_reason;
	uint64_t announced_obj;
	size_t heap_idx;		/* slot in the timer heap or NOT_IN_HEAP */
	struct co_waitq joiners;
	void *asan_fake_stack;
	void *tsan_fiber;
};

struct worker {
	pthread_t thread;
	void *sp;			/* the loop's context while a coroutine runs */
	struct coro *current;
	int tid;
	int out_reason;			/* why `current` switched back, and on what */
	const void *stack_lo;		/* this thread's stack, for ASan */
	size_t stack_size;
	void *asan_fake_stack;
	void *tsan_fiber;
};

struct co_chan {
	size_t cap, count, head;
	void **buf;
	bool closed;
	struct co_waitq senders, receivers;
};

struct co_wg {
	long count;
	struct co_waitq waiters;
};

struct co_barrier {
	unsigned int n, arrived;
	unsigned long generation;
	struct co_waitq waiters;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work_cv;		/* idle workers */
	pthread_cond_t done_cv;		/* sched_wait_all() */
	struct coro *rq_head, *rq_tail;
	struct coro **timers;		/* min-heap on deadline_ns */
	size_t ntimers, timers_cap;
	struct coro **all;		/* every coroutine, at index id - 1 */
	size_t nall, all_cap;
	uint64_t live;			/* spawned and not finished */
	unsigned int nidle;
	bool stopping;
	struct worker *workers;
	unsigned int nworkers;
	struct sched_stats stats;
	size_t stack_size;
	struct co_stack stack_cache[STACK_CACHE_MAX];
	size_t ncached;
} S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.stack_size = DEFAULT_STACK,
};

/* Ids start at 1: 0 is "no coroutine" in the probe ABI. */
static _Atomic uint64_t next_id = 1;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread struct worker *tls_worker;

extern void corosched_switch(void **save_sp, void *load_sp);
extern void corosched_trampoline(void);

static void init_condvars(void)
{
	pthread_condattr_t attr;

	/* Timer deadlines are monotonic; so must the idle wait be. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&S.work_cv, &attr);
	pthread_cond_init(&S.done_cv, &attr);
	pthread_condattr_destroy(&attr);
}

static void ensure_init(void)
{
	pthread_once(&init_once, init_condvars);
}

/* Never inlined: see THREAD-LOCALS AND MIGRATION above. */
static __attribute__((noinline)) struct worker *this_worker(void)
{
	struct worker *w = tls_worker;

	__asm__ __volatile__("" : "+r"(w));
	return w;
}

static struct coro *current_coro(void)
{
	struct worker *w = this_worker();

	return w ? w->current : NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- stacks ---------------------------------------------------------------------------- */

static int stack_alloc(struct co_stack *st, size_t usable)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t size = (usable + (size_t)page - 1) / (size_t)page * (size_t)page + (size_t)page;
	void *map;

	pthread_mutex_lock(&S.lock);
	if (S.ncached && S.stack_cache[S.ncached - 1].map_size == size) {
		*st = S.stack_cache[--S.ncached];
		pthread_mutex_unlock(&S.lock);
		return 0;
	}
	pthread_mutex_unlock(&S.lock);

	map = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		return -errno;
	/* The lowest page stays inaccessible: an overflow faults instead of corrupting. */
	if (mprotect(map, (size_t)page, PROT_NONE)) {
		int err = -errno;

		munmap(map, size);
		return err;
	}
	st->map = map;
	st->map_size = size;
#ifdef CORO_VALGRIND
	st->vg_id = VALGRIND_STACK_REGISTER((char *)map + page, (char *)map + size);
#endif
	return 0;
}

static void stack_release_locked(struct co_stack *st)
{
	if (!st->map)
		return;
	if (S.ncached < STACK_CACHE_MAX) {
		S.stack_cache[S.ncached++] = *st;
	} else {
#ifdef CORO_VALGRIND
		VALGRIND_STACK_DEREGISTER(st->vg_id);
#endif
		munmap(st->map, st->map_size);
	}
	st->map = NULL;
}

static __attribute__((unused)) void stack_bounds(const struct co_stack *st, const void **lo,
						 size_t *size)
{
	long page = sysconf(_SC_PAGESIZE);

	*lo = (char *)st->map + page;
	*size = st->map_size - (size_t)page;
}

static void coro_main(struct coro *co);

/* Lay out a frame that corosched_switch() "returns" from into the trampoline. */
static void init_stack(struct coro *co)
{
	uintptr_t top = ((uintptr_t)co->stack.map + co->stack.map_size) & ~(uintptr_t)15;
	/* 8 slots: mxcsr+fpucw, r15, r14, r13, r12, rbx, rbp, return address */
	uint64_t *sp = (uint64_t *)(top - 80);

	sp[0] = 0x1f80 | (0x037full << 32);	/* ABI default MXCSR and x87 control word */
	sp[1] = 0;				/* r15 */
	sp[2] = 0;				/* r14 */
	sp[3] = (uint64_t)(uintptr_t)coro_main;	/* r13: entry */
	sp[4] = (uint64_t)(uintptr_t)co;	/* r12: argument */
	sp[5] = 0;				/* rbx */
	sp[6] = 0;				/* rbp: ends frame-pointer walks */
	sp[7] = (uint64_t)(uintptr_t)corosched_trampoline;
	co->sp = sp;
}

/* ---- switching, with what sanitizers need to follow it ---------------------------------- */

/*
 * ThreadSanitizer sees each coroutine as a thread of its own, so S.lock handed across a
 * switch looks like an unlock by the wrong thread. Tell it what happens: the context we
 * leave releases the lock and the one we enter acquires it. The switches themselves do
 * synchronize (flag 0): both sides run on one OS thread, one after the other.
 */
static inline void tsan_lock_leaves(void)
{
#ifdef CORO_TSAN
	__tsan_mutex_pre_unlock(&S.lock, 0);
	__tsan_mutex_post_unlock(&S.lock, 0);
#endif
}

static inline void tsan_lock_arrives(void)
{
#ifdef CORO_TSAN
	__tsan_mutex_pre_lock(&S.lock, 0);
	__tsan_mutex_post_lock(&S.lock, 0, 0);
#endif
}

/*
 * From a coroutine back to its worker's loop. S.lock is held and stays
 * held; the coroutine continues here, on whichever worker resumes it.
 */
static void switch_out_locked(struct coro *self, int reason, uint64_t obj)
{
	struct worker *w = this_worker();

	w->out_reason = reason;
	self->park_reason = reason;
	self->park_obj = obj;
	/*
	 * Fired here, on the coroutine's own stack, not in the worker's loop:
	 * a stack taken at this probe (corobpf --stacks) is where it parks.
	 */
	S.stats.switches++;
	CORO_PROBE(switch, self->id, 0, reason, obj);
#ifdef CORO_ASAN
	__sanitizer_start_switch_fiber(reason == CORO_DONE ? NULL : &self->asan_fake_stack,
				       w->stack_lo, w->stack_size);
#endif
	tsan_lock_leaves();
#ifdef CORO_TSAN
	__tsan_switch_to_fiber(w->tsan_fiber, 0);
#endif
	corosched_switch(&self->sp, w->sp);
	/* w is stale from here on: we may be on another thread. */
#ifdef CORO_ASAN
	__sanitizer_finish_switch_fiber(self->asan_fake_stack, NULL, NULL);
#endif
	tsan_lock_arrives();
}

/* From a worker's loop into coroutine `co`; returns when a coroutine switches back. */
static void switch_in_locked(struct worker *w, struct coro *co)
{
#ifdef CORO_ASAN
	const void *lo;
	size_t size;

	stack_bounds(&co->stack, &lo, &size);
	__sanitizer_start_switch_fiber(&w->asan_fake_stack, lo, size);
#endif
	tsan_lock_leaves();
#ifdef CORO_TSAN
	__tsan_switch_to_fiber(co->tsan_fiber, 0);
#endif
	corosched_switch(&w->sp, co->sp);
#ifdef CORO_ASAN
	__sanitizer_finish_switch_fiber(w->asan_fake_stack, NULL, NULL);
#endif
	tsan_lock_arrives();
}

static void worker_init_fiber(struct worker *w)
{
#ifdef CORO_ASAN
	pthread_attr_t attr;
	void *lo;

	pthread_getattr_np(pthread_self(), &attr);
	pthread_attr_getstack(&attr, &lo, &w->stack_size);
	pthread_attr_destroy(&attr);
	w->stack_lo = lo;
#endif
#ifdef CORO_TSAN
	w->tsan_fiber = __tsan_get_current_fiber();
#endif
	(void)w;
}

/* ---- run queue, wait queues, timer heap (all under S.lock) ------------------------------ */

static void rq_push_locked(struct coro *co)
{
	co->state = CO_READY;
	co->rq_next = NULL;
	if (S.rq_tail)
		S.rq_tail->rq_next = co;
	else
		S.rq_head = co;
	S.rq_tail = co;
}

static struct coro *rq_pop_locked(void)
{
	struct coro *co = S.rq_head;

	if (co) {
		S.rq_head = co->rq_next;
		if (!S.rq_head)
			S.rq_tail = NULL;
		co->rq_next = NULL;
	}
	return co;
}

static void waitq_push(struct co_waitq *q, struct coro *co)
{
	co->waitq = q;
	co->wq_next = NULL;
	co->wq_prev = q->tail;
	if (q->tail)
		q->tail->wq_next = co;
	else
		q->head = co;
	q->tail = co;
}

static void waitq_remove(struct coro *co)
{
	struct co_waitq *q = co->waitq;

	if (co->wq_prev)
		co->wq_prev->wq_next = co->wq_next;
	else
		q->head = co->wq_next;
	if (co->wq_next)
		co->wq_next->wq_prev = co->wq_prev;
	else
		q->tail = co->wq_prev;
	co->waitq = NULL;
	co->wq_prev = co->wq_next = NULL;
}

static struct coro *waitq_pop(struct co_waitq *q)
{
	struct coro *co = q->head;

	if (co)
		waitq_remove(co);
	return co;
}

static void heap_set(size_t i, struct coro *co)
{
	S.timers[i] = co;
	co->heap_idx = i;
}

static void heap_sift_up(size_t i)
{
	struct coro *co = S.timers[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (S.timers[parent]->deadline_ns <= co->deadline_ns)
			break;
		heap_set(i, S.timers[parent]);
		i = parent;
	}
	heap_set(i, co);
}

static void heap_sift_down(size_t i)
{
	struct coro *co = S.timers[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= S.ntimers)
			break;
		if (c + 1 < S.ntimers && S.timers[c + 1]->deadline_ns < S.timers[c]->deadline_ns)
			c++;
		if (co->deadline_ns <= S.timers[c]->deadline_ns)
			break;
		heap_set(i, S.timers[c]);
		i = c;
	}
	heap_set(i, co);
}

static int heap_insert_locked(struct coro *co)
{
	if (S.ntimers == S.timers_cap) {
		size_t cap = S.timers_cap ? 2 * S.timers_cap : 64;
		struct coro **t = realloc(S.timers, cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		S.timers = t;
		S.timers_cap = cap;
	}
	S.timers[S.ntimers++] = co;
	heap_sift_up(S.ntimers - 1);
	return 0;
}

static void heap_remove_locked(struct coro *co)
{
	size_t i = co->heap_idx;
	struct coro *last = S.timers[--S.ntimers];

	co->heap_idx = NOT_IN_HEAP;
	if (i == S.ntimers)
		return;
	heap_set(i, last);
	heap_sift_up(i);
	heap_sift_down(last->heap_idx);
}

/* ---- state changes (all under S.lock) ---------------------------------------------------- */

static void make_ready_locked(struct coro *co)
{
	S.stats.readies++;
	CORO_PROBE(ready, co->id);
	rq_push_locked(co);
	if (S.nidle)
		pthread_cond_signal(&S.work_cv);
}

/* `co` is blocked and already off its queue or heap: make it runnable. */
static void wake_locked(struct coro *co, int result)
{
	co->wake_result = result;
	make_ready_locked(co);
}

static void wake_all_locked(struct co_waitq *q, int result)
{
	struct coro *co;

	while ((co = waitq_pop(q)))
		wake_locked(co, result);
}

/* Block on `q` (CORO_WAIT on obj) until a waker or co_cancel() wakes us. */
static int wait_on_locked(struct coro *self, struct co_waitq *q, const void *obj)
{
	waitq_push(q, self);
	switch_out_locked(self, CORO_WAIT, (uint64_t)(uintptr_t)obj);
	return self->wake_result;
}

/*
 * Wake every sleeper whose deadline has passed, except one still running: a coroutine
 * whose sleep is already over when its worker gets back to the loop has not had its
 * switch probe yet, and its ready must not come first. It stays in the heap for the
 * next round, which comes right after that probe.
 */
static void fire_due_timers_locked(void)
{
	struct coro *held = NULL;
	uint64_t now;

	if (!S.ntimers)
		return;
	now = now_ns();
	while (S.ntimers && S.timers[0]->deadline_ns <= now) {
		struct coro *co = S.timers[0];

		heap_remove_locked(co);
		if (co->state == CO_RUNNING)
			held = co;
		else
			wake_locked(co, 0);
	}
	/* Cannot fail: it was in the heap a moment ago, so there is room. */
	if (held)
		heap_insert_locked(held);
}

static void finish_locked(struct coro *co)
{
	co->state = CO_DONE;
	wake_all_locked(&co->joiners, 0);
	stack_release_locked(&co->stack);
#ifdef CORO_TSAN
	__tsan_destroy_fiber(co->tsan_fiber);
	co->tsan_fiber = NULL;
#endif
	if (--S.live == 0)
		pthread_cond_broadcast(&S.done_cv);
}

/* What happens to the coroutine that just switched back to its worker. */
static void settle_locked(struct coro *co, int reason)
{
	switch (reason) {
	case CORO_DONE:
		finish_locked(co);
		break;
	case CORO_YIELD:
		/* Its ready probe fired in co_yield(), before it switched out. */
		rq_push_locked(co);
		break;
	default:
		co->state = CO_BLOCKED;
		break;
	}
}

static void idle_wait_locked(void)
{
	/*
	 * The first worker looks for a tracer's announce request at least every 100 ms, even
	 * with nothing to do (usdt/corobpf.h asks that a request not wait long).
	 */
	bool first = tls_worker == &S.workers[0];

	S.nidle++;
	if (S.ntimers || first) {
		uint64_t d = S.ntimers ? S.timers[0]->deadline_ns : UINT64_MAX;
		uint64_t poll = now_ns() + ANNOUNCE_POLL_NS;

		if (first && poll < d)
			d = poll;
		struct timespec ts = {
			.tv_sec = (time_t)(d / 1000000000ull),
			.tv_nsec = (long)(d % 1000000000ull),
		};

		pthread_cond_timedwait(&S.work_cv, &S.lock, &ts);
	} else {
		pthread_cond_wait(&S.work_cv, &S.lock);
	}
	S.nidle--;
}

/* A worker thread the coroutine runs on, kept the first time (under S.lock). */
static void note_thread(struct coro *co, int tid)
{
	for (unsigned int i = 0; i < co->ntids; i++)
		if (co->tids[i] == tid)
			return;
	if (co->ntids < sizeof(co->tids) / sizeof(co->tids[0]))
		co->tids[co->ntids++] = tid;
}

/*
 * A tracer that attached since we last answered is told what exists (usdt/corobpf.h, "What
 * exists when a tracer attaches"). Under S.lock, so the list holds still: no coroutine is
 * between its switch probe and its settling while we hold it.
 */
static void announce_if_wanted_locked(void)
{
	if (!CORO_ANNOUNCE_WANTED())
		return;
	for (size_t i = 0; i < S.nall; i++) {
		struct coro *co = S.all[i];
		int reason;
		uint64_t obj = 0;

		if (!co || co->state == CO_DONE)
			continue;
		if (co->state == CO_RUNNING) {
			reason = 0;
		} else if (co->state == CO_READY) {
			reason = CORO_YIELD;
		} else {
			reason = co->park_reason;
			obj = co->park_obj;
		}
		co->announced_reason = reason;
		co->announced_obj = obj;
		CORO_PROBE(announce, co->id, co->parent, co->name, reason, obj);
	}
	S.stats.announces++;
	CORO_ANNOUNCE_DONE();
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct coro *from = NULL, *next;
	int reason = 0;

	tls_worker = w;
	worker_init_fiber(w);
	w->tid = (int)syscall(SYS_gettid);
	pthread_mutex_lock(&S.lock);
	for (;;) {
		/* Timers first, while `from` still counts as running (see there). */
		fire_due_timers_locked();
		if (from)
			settle_locked(from, reason);
		announce_if_wanted_locked();
		next = rq_pop_locked();
		/* `from` said its switch out itself (switch_out_locked). */
		from = NULL;
		if (!next) {
			if (S.stopping)
				break;
			idle_wait_locked();
			continue;
		}
		S.stats.switches++;
		CORO_PROBE(switch, 0, next->id, 0, 0);
		next->state = CO_RUNNING;
		next->switch_ins++;
		note_thread(next, w->tid);
		w->current = next;
		switch_in_locked(w, next);
		/* Whoever runs on this worker switched back: that is w->current. */
		from = w->current;
		reason = w->out_reason;
		w->current = NULL;
	}
	pthread_mutex_unlock(&S.lock);
	return NULL;
}

/* First code of every coroutine, reached through corosched_trampoline. */
static void coro_main(struct coro *co)
{
#ifdef CORO_ASAN
	__sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
	/* The worker switched here holding S.lock (see the top of this file). */
	tsan_lock_arrives();
	pthread_mutex_unlock(&S.lock);
	co_exit(co->fn(co->arg));
}

/* ---- ground truth ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_seq_len(const unsigned char *s)
{
	size_t n, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* Valid UTF-8 goes out as is; invalid bytes as \u00XX, so the line stays JSON. */
static void json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		size_t n;

		if (*s == '"' || *s == '\\') {
			fputc('\\', f);
			fputc(*s++, f);
		} else if (*s == '\n') {
			fputs("\\n", f);
			s++;
		} else if (*s == '\t') {
			fputs("\\t", f);
			s++;
		} else if (*s < 0x20 || *s == 0x7f) {
			fprintf(f, "\\u%04x", *s++);
		} else if (*s < 0x80) {
			fputc(*s++, f);
		} else if ((n = utf8_seq_len(s))) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fprintf(f, "\\u%04x", *s++);
		}
	}
	fputc('"', f);
}

static void write_truth_locked(void)
{
	const char *path = getenv("COROBPF_TRUTH");
	char tmp[4096];
	FILE *f;
	size_t i;

	if (!path || !*path)
		return;
	/* Write beside it and rename, so a reader never sees half a file. */
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "corosched: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	for (i = 0; i < S.nall; i++) {
		struct coro *co = S.all[i];

		if (!co)
			continue;
		fprintf(f, "{\"id\":\"0x%llx\",\"parent\":\"0x%llx\",\"name\":",
			(unsigned long long)co->id, (unsigned long long)co->parent);
		if (co->name)
			json_string(f, co->name);
		else
			fputs("null", f);
		if (co->state == CO_DONE)
			fprintf(f, ",\"status\":%d", co->status);
		else
			fputs(",\"status\":null", f);
		fprintf(f, ",\"switch_ins\":%llu", (unsigned long long)co->switch_ins);
		if (co->announced_reason >= 0)
			fprintf(f, ",\"announced\":{\"reason\":%d,\"obj\":\"0x%llx\"}",
				co->announced_reason, (unsigned long long)co->announced_obj);
		fputs(",\"threads\":[", f);
		for (unsigned int t = 0; t < co->ntids; t++)
			fprintf(f, "%s%d", t ? "," : "", co->tids[t]);
		fputs("]}\n", f);
	}
	if (fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "corosched: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
	}
}

/* ---- scheduler ------------------------------------------------------------------------------ */

int sched_start(unsigned int nworkers)
{
	unsigned int i;
	int err;

	ensure_init();
	if (S.workers)
		return -EBUSY;
	if (!nworkers)
		nworkers = DEFAULT_WORKERS;
	S.workers = calloc(nworkers, sizeof(*S.workers));
	if (!S.workers)
		return -ENOMEM;
	for (i = 0; i < nworkers; i++) {
		err = pthread_create(&S.workers[i].thread, NULL, worker_main, &S.workers[i]);
		if (err) {
			S.nworkers = i;
			sched_stop();
			return -err;
		}
		S.nworkers = i + 1;
	}
	return 0;
}

int sched_wait_all(void)
{
	if (this_worker())
		return -EPERM;
	ensure_init();
	pthread_mutex_lock(&S.lock);
	while (S.live)
		pthread_cond_wait(&S.done_cv, &S.lock);
	write_truth_locked();
	pthread_mutex_unlock(&S.lock);
	return 0;
}

void sched_stop(void)
{
	unsigned int i;
	size_t j;

	if (this_worker())
		return;
	if (S.nworkers)
		sched_wait_all();
	pthread_mutex_lock(&S.lock);
	S.stopping = true;
	pthread_cond_broadcast(&S.work_cv);
	pthread_mutex_unlock(&S.lock);
	for (i = 0; i < S.nworkers; i++)
		pthread_join(S.workers[i].thread, NULL);
	free(S.workers);
	S.workers = NULL;
	S.nworkers = 0;

	for (j = 0; j < S.nall; j++) {
		struct coro *co = S.all[j];

		if (!co)
			continue;
		stack_release_locked(&co->stack);
		free(co->name);
		free(co);
	}
	free(S.all);
	S.all = NULL;
	S.nall = S.all_cap = 0;
	/* Without workers nothing ran: whatever was queued is gone with the records. */
	S.rq_head = S.rq_tail = NULL;
	S.live = 0;
	while (S.ncached) {
		struct co_stack *st = &S.stack_cache[--S.ncached];

#ifdef CORO_VALGRIND
		VALGRIND_STACK_DEREGISTER(st->vg_id);
#endif
		munmap(st->map, st->map_size);
	}
	free(S.timers);
	S.timers = NULL;
	S.ntimers = S.timers_cap = 0;
	S.stopping = false;
}

void sched_get_stats(struct sched_stats *st)
{
	pthread_mutex_lock(&S.lock);
	*st = S.stats;
	pthread_mutex_unlock(&S.lock);
}

static int register_locked(struct coro *co)
{
	size_t idx = co->id - 1;

	if (idx >= S.all_cap) {
		size_t cap = S.all_cap ? S.all_cap : 256;
		struct coro **all;

		while (cap <= idx)
			cap *= 2;
		all = realloc(S.all, cap * sizeof(*all));
		if (!all)
			return -ENOMEM;
		memset(all + S.all_cap, 0, (cap - S.all_cap) * sizeof(*all));
		S.all = all;
		S.all_cap = cap;
	}
	S.all[idx] = co;
	if (idx >= S.nall)
		S.nall = idx + 1;
	return 0;
}

static struct coro *lookup_locked(uint64_t id)
{
	if (id == 0 || id > S.nall)
		return NULL;
	return S.all[id - 1];
}

uint64_t co_spawn(co_fn fn, void *arg, const char *name)
{
	struct coro *co;
	size_t stack_size;

	ensure_init();
	co = calloc(1, sizeof(*co));
	if (!co)
		return 0;
	if (name && !(co->name = strdup(name)))
		goto err;
	pthread_mutex_lock(&S.lock);
	stack_size = S.stack_size;
	pthread_mutex_unlock(&S.lock);
	if (stack_alloc(&co->stack, stack_size))
		goto err;
	co->fn = fn;
	co->arg = arg;
	co->announced_reason = -1;
	co->heap_idx = NOT_IN_HEAP;
	co->parent = co_self();
	init_stack(co);
#ifdef CORO_TSAN
	co->tsan_fiber = __tsan_create_fiber(0);
#endif
	co->id = atomic_fetch_add(&next_id, 1);

	pthread_mutex_lock(&S.lock);
	if (register_locked(co)) {
		stack_release_locked(&co->stack);
		pthread_mutex_unlock(&S.lock);
		goto err;
	}
	S.live++;
	S.stats.created++;
	CORO_PROBE(create, co->id, co->parent);
	if (co->name)
		CORO_PROBE(name, co->id, co->name);
	make_ready_locked(co);
	pthread_mutex_unlock(&S.lock);
	return co->id;
err:
	free(co->name);
	free(co);
	return 0;
}

void co_set_stack_size(size_t bytes)
{
	if (bytes < 16 * 1024)
		bytes = 16 * 1024;
	pthread_mutex_lock(&S.lock);
	S.stack_size = bytes;
	pthread_mutex_unlock(&S.lock);
}

uint64_t co_self(void)
{
	struct coro *co = current_coro();

	return co ? co->id : 0;
}

void co_set_name(const char *name)
{
	struct coro *self = current_coro();
	char *copy, *old;

	if (!self || !name || !(copy = strdup(name)))
		return;
	pthread_mutex_lock(&S.lock);
	old = self->name;
	self->name = copy;
	CORO_PROBE(name, self->id, self->name);
	pthread_mutex_unlock(&S.lock);
	free(old);
}

int co_yield(void)
{
	struct coro *self = current_coro();
	int ret = 0;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (!self->cancel_req) {
		/* Fired by the yielder itself: it is runnable from this moment. */
		S.stats.readies++;
		CORO_PROBE(ready, self->id);
		switch_out_locked(self, CORO_YIELD, 0);
	}
	if (self->cancel_req)
		ret = -ECANCELED;
	pthread_mutex_unlock(&S.lock);
	return ret;
}

int co_sleep_us(uint64_t us)
{
	struct coro *self = current_coro();
	int ret;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req) {
		ret = -ECANCELED;
		goto out;
	}
	self->deadline_ns = now_ns() + us * 1000;
	ret = heap_insert_locked(self);
	if (ret)
		goto out;
	/* An idle worker may sleep past this new, earlier deadline: let it recompute. */
	if (S.nidle && S.timers[0] == self)
		pthread_cond_signal(&S.work_cv);
	switch_out_locked(self, CORO_SLEEP, 0);
	ret = self->wake_result;
out:
	pthread_mutex_unlock(&S.lock);
	return ret;
}

void co_exit(int status)
{
	struct coro *self = current_coro();

	if (!self) {
		fprintf(stderr, "corosched: co_exit() called outside a coroutine\n");
		abort();
	}
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req)
		status = -ECANCELED;
	self->status = status;
	S.stats.exits++;
	CORO_PROBE(exit, self->id, status);
	switch_out_locked(self, CORO_DONE, 0);
	__builtin_unreachable();
}

int co_cancel(uint64_t id)
{
	struct coro *co;
	int ret = 0;

	pthread_mutex_lock(&S.lock);
	co = lookup_locked(id);
	if (!co || co->state == CO_DONE) {
		ret = -ESRCH;
		goto out;
	}
	co->cancel_req = true;
	if (co->state == CO_BLOCKED) {
		if (co->waitq)
			waitq_remove(co);
		if (co->heap_idx != NOT_IN_HEAP)
			heap_remove_locked(co);
		wake_locked(co, -ECANCELED);
	}
out:
	pthread_mutex_unlock(&S.lock);
	return ret;
}

int co_join(uint64_t id, int *status)
{
	struct coro *self = current_coro(), *co;
	int ret = 0;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	co = lookup_locked(id);
	if (!co)
		ret = -ESRCH;
	else if (co == self)
		ret = -EDEADLK;
	else if (self->cancel_req)
		ret = -ECANCELED;
	else if (co->state != CO_DONE)
		ret = wait_on_locked(self, &co->joiners, co);
	if (!ret && status)
		*status = co->status;
	pthread_mutex_unlock(&S.lock);
	return ret;
}

int co_exit_status(uint64_t id, int *status)
{
	struct coro *co;
	int ret = 0;

	pthread_mutex_lock(&S.lock);
	co = lookup_locked(id);
	if (!co)
		ret = -ESRCH;
	else if (co->state != CO_DONE)
		ret = -EBUSY;
	else if (status)
		*status = co->status;
	pthread_mutex_unlock(&S.lock);
	return ret;
}

void co_span_begin(const char *name)
{
	CORO_PROBE(span_begin, name);
}

void co_span_end(const char *name)
{
	CORO_PROBE(span_end, name);
}

/* ---- channels ------------------------------------------------------------------------------ */

co_chan_t *chan_new(size_t capacity)
{
	struct co_chan *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->cap = capacity;
	if (capacity && !(ch->buf = calloc(capacity, sizeof(*ch->buf)))) {
		free(ch);
		return NULL;
	}
	return ch;
}

void chan_free(co_chan_t *ch)
{
	if (!ch)
		return;
	free(ch->buf);
	free(ch);
}

static void chan_put_locked(struct co_chan *ch, void *msg)
{
	ch->buf[(ch->head + ch->count++) % ch->cap] = msg;
}

static void *chan_take_locked(struct co_chan *ch)
{
	void *msg = ch->buf[ch->head];

	ch->head = (ch->head + 1) % ch->cap;
	ch->count--;
	return msg;
}

int chan_send(co_chan_t *ch, void *msg)
{
	struct coro *self = current_coro(), *rx;
	int ret = 0;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req) {
		ret = -ECANCELED;
	} else if (ch->closed) {
		ret = -EPIPE;
	} else if ((rx = waitq_pop(&ch->receivers))) {
		/* A receiver waits only while the buffer is empty: hand it over. */
		rx->msg = msg;
		wake_locked(rx, 0);
	} else if (ch->count < ch->cap) {
		chan_put_locked(ch, msg);
	} else {
		/* A receiver takes the message from self->msg and wakes us. */
		self->msg = msg;
		ret = wait_on_locked(self, &ch->senders, ch);
	}
	pthread_mutex_unlock(&S.lock);
	return ret;
}

int chan_recv(co_chan_t *ch, void **msg)
{
	struct coro *self = current_coro(), *tx;
	int ret = 0;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req) {
		ret = -ECANCELED;
	} else if (ch->count) {
		*msg = chan_take_locked(ch);
		/* Room now: the longest-waiting sender's message joins the buffer. */
		if ((tx = waitq_pop(&ch->senders))) {
			chan_put_locked(ch, tx->msg);
			wake_locked(tx, 0);
		}
	} else if ((tx = waitq_pop(&ch->senders))) {
		/* Unbuffered channel: take it straight from the sender. */
		*msg = tx->msg;
		wake_locked(tx, 0);
	} else if (ch->closed) {
		ret = -EPIPE;
	} else {
		ret = wait_on_locked(self, &ch->receivers, ch);
		if (!ret)
			*msg = self->msg;
	}
	pthread_mutex_unlock(&S.lock);
	return ret;
}

void chan_close(co_chan_t *ch)
{
	pthread_mutex_lock(&S.lock);
	if (!ch->closed) {
		ch->closed = true;
		wake_all_locked(&ch->receivers, -EPIPE);
		wake_all_locked(&ch->senders, -EPIPE);
	}
	pthread_mutex_unlock(&S.lock);
}

/* ---- wait groups and barriers ------------------------------------------------------------- */

co_wg_t *co_wg_new(void)
{
	return calloc(1, sizeof(struct co_wg));
}

void co_wg_free(co_wg_t *wg)
{
	free(wg);
}

void co_wg_add(co_wg_t *wg, long n)
{
	pthread_mutex_lock(&S.lock);
	wg->count += n;
	if (wg->count <= 0) {
		wg->count = 0;
		wake_all_locked(&wg->waiters, 0);
	}
	pthread_mutex_unlock(&S.lock);
}

void co_wg_done(co_wg_t *wg)
{
	co_wg_add(wg, -1);
}

int co_wg_wait(co_wg_t *wg)
{
	struct coro *self = current_coro();
	int ret = 0;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req)
		ret = -ECANCELED;
	else if (wg->count > 0)
		ret = wait_on_locked(self, &wg->waiters, wg);
	pthread_mutex_unlock(&S.lock);
	return ret;
}

co_barrier_t *co_barrier_new(unsigned int n)
{
	struct co_barrier *b;

	if (!n)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (b)
		b->n = n;
	return b;
}

void co_barrier_free(co_barrier_t *b)
{
	free(b);
}

int co_barrier_wait(co_barrier_t *b)
{
	struct coro *self = current_coro();
	unsigned long generation;
	int ret;

	if (!self)
		return -EPERM;
	pthread_mutex_lock(&S.lock);
	if (self->cancel_req) {
		ret = -ECANCELED;
	} else if (++b->arrived == b->n) {
		b->arrived = 0;
		b->generation++;
		wake_all_locked(&b->waiters, 0);
		ret = 1;
	} else {
		generation = b->generation;
		ret = wait_on_locked(self, &b->waiters, b);
		/* Cancelled before the round completed: it no longer counts as arrived. */
		if (ret && b->generation == generation)
			b->arrived--;
	}
	pthread_mutex_unlock(&S.lock);
	return ret;
}
