/* SPDX-License-Identifier: MIT */
/*
 * corosched.h: a small M:N coroutine scheduler instrumented with corobpf's
 * probes (usdt/corobpf.h). It exists to give corobpf something real to trace
 * and to check itself against: the scheduler records its own ground truth
 * (see COROBPF_TRUTH below) independently of the probes.
 *
 *     sched_start(2);
 *     co_spawn(acceptor, NULL, "acceptor");
 *     sched_wait_all();
 *     sched_stop();
 *
 * THE MODEL
 *	N worker threads share one run queue. A coroutine runs on whichever
 *	worker picks it and may resume on another one after any suspension.
 *	Coroutines are never preempted: they run until they yield, sleep,
 *	block on a channel, wait group, barrier or join, or finish. Idle
 *	workers sleep on a condition variable; nothing spins.
 *
 *	Ids are 64-bit, handed out from 1 upwards and never reused. Id 0 means
 *	"no coroutine" (main, or any thread that is not running a coroutine);
 *	it is the parent of coroutines spawned from outside the scheduler.
 *
 * BLOCKING CALLS AND CANCELLATION
 *	co_yield, co_sleep_us, chan_send, chan_recv, co_wg_wait,
 *	co_barrier_wait and co_join are the suspension points. They may only
 *	be called from a coroutine (elsewhere they return -EPERM) and return 0
 *	on success or a negative errno:
 *	  -ECANCELED  the caller was cancelled (co_cancel). Every later
 *	              blocking call fails the same way, without suspending:
 *	              the coroutine should clean up and return. Whatever it
 *	              returns, its exit status is -ECANCELED.
 *	  -EPIPE      the channel was closed.
 *
 * EXIT STATUS
 *	A coroutine's status is the int its function returns, or the value
 *	passed to co_exit(): 0 for success, a negative errno for an error.
 *	A coroutine cancelled before it finished always exits with -ECANCELED.
 *
 * PROBES (usdt/corobpf.h), exactly one per transition
 *	co_spawn	create(id, parent), name(id, name) if named, ready(id)
 *	co_set_name	name(id, name)
 *	any wakeup	ready(id), on the waker's thread while the waker runs (channel
 *			ops, wait groups, barriers, joins, co_cancel) or on a worker
 *			between two switches (timers, joiners of a finished coroutine)
 *	co_yield	ready(self) from the yielder itself, then it switches out
 *	worker loop	switch(from, to, reason, obj) once per change of what the
 *			worker runs: switch(A, B, ...) straight from A to B, or
 *			switch(A, 0, ...) then later switch(0, B, 0, 0) around an idle
 *			spell. reason: CORO_YIELD, CORO_WAIT (obj: the channel, wait
 *			group, barrier or, for co_join, the target's record), CORO_SLEEP
 *			(obj 0) or CORO_DONE (obj 0). A yielder that is the only
 *			runnable coroutine still gets switch(A, 0, CORO_YIELD, 0) and
 *			switch(0, A, 0, 0), so each co_yield() is one switch out and in.
 *	finishing	exit(id, status) from the coroutine, then its CORO_DONE switch
 *	co_span_*	span_begin(name) / span_end(name)
 *	Every probe but the span probes fires under the scheduler lock, so their
 *	order in time is the order of the transitions: a ready always comes
 *	before the switch to that coroutine, and only a yielder is made ready
 *	while it still runs.
 *
 * GROUND TRUTH
 *	If the environment variable COROBPF_TRUTH names a file, sched_wait_all()
 *	writes (and atomically replaces) it with one JSON object per coroutine
 *	ever created, in id order:
 *	    {"id":"0x1f","parent":"0x0","name":"worker-3","status":0,"switch_ins":12}
 *	"name" is its last name, null if it never had one; "status" is null
 *	for one that has not finished, and "switch_ins" counts how often a
 *	worker switched to it (exactly the switch probes whose `to` is it).
 *	"announced", present once a tracer was told of the coroutine, is what
 *	the last announce said: {"reason":N,"obj":"0x..."} (reason 0 running,
 *	CORO_YIELD runnable, else why it waits and on what).
 *
 * ANNOUNCE
 *	A worker answers a tracer's request (CORO_ANNOUNCE_WANTED) at the top
 *	of its loop, under the scheduler lock: one announce per coroutine not
 *	finished, then CORO_ANNOUNCE_DONE. The first worker wakes at least
 *	every 100 ms while idle to see a request.
 *
 * THREADS
 *	Every function is thread-safe. Thread-local variables are not
 *	coroutine-local: a coroutine may wake up on a different thread.
 */
#ifndef COROSCHED_H
#define COROSCHED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORO_API __attribute__((visibility("default")))

typedef int (*co_fn)(void *arg);
typedef struct co_chan co_chan_t;
typedef struct co_wg co_wg_t;
typedef struct co_barrier co_barrier_t;

/*
 * Start `nworkers` worker threads (0: two). Coroutines spawned before this
 * wait on the run queue. Returns 0 or a negative errno.
 */
CORO_API int sched_start(unsigned int nworkers);

/*
 * Block the calling thread (not a coroutine) until every coroutine spawned
 * so far has finished, then write the ground-truth file if COROBPF_TRUTH is
 * set. Returns 0, or -EPERM if called from a coroutine.
 */
CORO_API int sched_wait_all(void);

/* sched_wait_all(), then stop and join the workers and free everything. */
CORO_API void sched_stop(void);

/* Counters since start, for benchmarks: every probe the scheduler fired. */
struct sched_stats {
	uint64_t created;	/* create probes (coroutines spawned) */
	uint64_t readies;	/* ready probes */
	uint64_t switches;	/* switch probes */
	uint64_t exits;		/* exit probes */
	uint64_t announces;	/* lists of what exists given to a tracer (CORO_ANNOUNCE_DONE) */
};
CORO_API void sched_get_stats(struct sched_stats *st);

/*
 * Spawn a coroutine running fn(arg). `name` is copied (NULL: unnamed). Its
 * parent is the calling coroutine, or 0. Returns the new id, or 0 when out
 * of memory.
 */
CORO_API uint64_t co_spawn(co_fn fn, void *arg, const char *name);

/* Stack size for coroutines spawned from now on (default 128 KiB). */
CORO_API void co_set_stack_size(size_t bytes);

/* The calling coroutine's id, or 0 outside a coroutine. */
CORO_API uint64_t co_self(void);

/* Rename the calling coroutine (fires the name probe again). */
CORO_API void co_set_name(const char *name);

/* Give the worker to the next runnable coroutine; always suspends. */
CORO_API int co_yield(void);

/* Suspend for at least `us` microseconds. */
CORO_API int co_sleep_us(uint64_t us);

/* Finish the calling coroutine with `status`. Does not return. */
CORO_API __attribute__((noreturn)) void co_exit(int status);

/*
 * Ask coroutine `id` to finish: if it is blocked, its blocking call returns
 * -ECANCELED now; otherwise its next one does. Returns 0, or -ESRCH if it
 * does not exist or has already finished.
 */
CORO_API int co_cancel(uint64_t id);

/*
 * Wait until coroutine `id` finishes and store its status in *status (may
 * be NULL). -ESRCH: no such coroutine; -EDEADLK: it is the caller.
 */
CORO_API int co_join(uint64_t id, int *status);

/* Status of a finished coroutine, without waiting: 0, -EBUSY or -ESRCH. */
CORO_API int co_exit_status(uint64_t id, int *status);

/*
 * Channels of pointers, FIFO, bounded: `capacity` messages are buffered
 * (0: every send waits for a receiver). chan_close() wakes every waiter
 * with -EPIPE; receivers still get the buffered messages first. Free a
 * channel only when no coroutine can touch it any more.
 */
CORO_API co_chan_t *chan_new(size_t capacity);
CORO_API void chan_free(co_chan_t *ch);
CORO_API int chan_send(co_chan_t *ch, void *msg);
CORO_API int chan_recv(co_chan_t *ch, void **msg);
CORO_API void chan_close(co_chan_t *ch);

/*
 * Wait group: co_wg_add() from anywhere, co_wg_wait() from a coroutine
 * until the counter drops to zero.
 */
CORO_API co_wg_t *co_wg_new(void);
CORO_API void co_wg_free(co_wg_t *wg);
CORO_API void co_wg_add(co_wg_t *wg, long n);
CORO_API void co_wg_done(co_wg_t *wg);
CORO_API int co_wg_wait(co_wg_t *wg);

/*
 * Barrier for `n` coroutines, reusable: the n-th arrival releases the
 * others and gets 1, the others get 0.
 */
CORO_API co_barrier_t *co_barrier_new(unsigned int n);
CORO_API void co_barrier_free(co_barrier_t *b);
CORO_API int co_barrier_wait(co_barrier_t *b);

/* A named region in the calling coroutine (span_begin / span_end probes). */
CORO_API void co_span_begin(const char *name);
CORO_API void co_span_end(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* COROSCHED_H */
