// SPDX-License-Identifier: MIT
/*
 * scenarios: corosched workloads for the integration tests.
 *
 *     scenarios [--wait] [--linger MS] [--workers N] NAME
 *
 * Each scenario spawns a fixed number of coroutines (listed by `scenarios
 * --list`), waits for all of them, checks its own results (message order,
 * exit statuses, counts) and prints "DONE NAME coroutines=N" on success
 * (exit 0) or what went wrong on stderr (exit 1). How often each coroutine
 * was switched in varies from run to run: with COROBPF_TRUTH set, the
 * scheduler writes the exact numbers (see tools/sched/corosched.h).
 *
 * --wait      Start the workers, print "READY <pid>" on stdout, flush, and
 *             block until SIGUSR1 arrives before spawning anything, so a
 *             test can attach a tracer with -p in between. A signal rather
 *             than a line on stdin: the tracer may own the terminal, and
 *             `kill -USR1` needs no pipe kept open. SIGUSR1 is blocked before
 *             READY is printed, so a signal sent right after is never lost.
 * --linger MS After the scenario (and the truth file), stay alive MS ms.
 * --exit-code N  Exit with N after a successful run (tests a tracer's exit status).
 * --workers N Worker threads (default 2).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "corosched.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static atomic_int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "scenarios: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	atomic_fetch_add(&failures, 1);
}

static uint64_t spawn(co_fn fn, void *arg, const char *fmt, ...)
{
	char name[128];
	va_list ap;
	uint64_t id;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	id = co_spawn(fn, arg, name);
	if (!id) {
		fprintf(stderr, "scenarios: co_spawn(%s) failed\n", name);
		exit(1);
	}
	return id;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void expect_status(uint64_t id, int want, const char *what)
{
	int status = 0, err = co_exit_status(id, &status);

	if (err)
		fail("%s (0x%" PRIx64 "): co_exit_status: %s", what, id, strerror(-err));
	else if (status != want)
		fail("%s (0x%" PRIx64 "): status %d, want %d", what, id, status, want);
}

/* ---- one_sleep: 1 coroutine sleeps 50 ms once ----------------------------------------------- */

static uint64_t one_sleep_id;
static uint64_t one_sleep_slept_us;

static int one_sleep_fn(void *arg)
{
	uint64_t t0 = now_us();
	int err = co_sleep_us(50000);

	one_sleep_slept_us = now_us() - t0;
	return err;
}

static int one_sleep_spawn(void)
{
	one_sleep_id = spawn(one_sleep_fn, NULL, "sleeper");
	return 1;
}

static void one_sleep_check(void)
{
	expect_status(one_sleep_id, 0, "sleeper");
	if (one_sleep_slept_us < 50000)
		fail("one_sleep: slept %" PRIu64 " us, want >= 50000", one_sleep_slept_us);
}

/* ---- concurrent20: 20 coroutines at once, each sleeps then yields --------------------------- */

#define CONC_N 20
static uint64_t conc_ids[CONC_N];

static int conc_fn(void *arg)
{
	int i = (int)(intptr_t)arg, err;

	err = co_sleep_us(5000 + 200 * (unsigned int)i);
	if (!err)
		err = co_yield();
	return err;
}

static int concurrent20_spawn(void)
{
	for (int i = 0; i < CONC_N; i++)
		conc_ids[i] = spawn(conc_fn, (void *)(intptr_t)i, "conc-%d", i);
	return CONC_N;
}

static void concurrent20_check(void)
{
	for (int i = 0; i < CONC_N; i++)
		expect_status(conc_ids[i], 0, "conc");
}

/*
 * ---- many_suspends: one coroutine calls a blocking operation 500 times -----------------------
 * 167 yields and 167 sleeps always suspend; 166 receives wait for a feeder that sleeps before
 * each send, so they (almost always) suspend too. 2 coroutines.
 */
#define SUSPENDS 500
static uint64_t susp_id, susp_feeder_id;
static co_chan_t *susp_chan;
static int susp_received;

static int susp_feeder_fn(void *arg)
{
	for (int i = 0; i < SUSPENDS; i++) {
		if (i % 3 != 2)
			continue;
		co_sleep_us(200);
		if (chan_send(susp_chan, (void *)(intptr_t)(i + 1)))
			return -EPIPE;
	}
	return 0;
}

static int susp_fn(void *arg)
{
	for (int i = 0; i < SUSPENDS; i++) {
		void *msg;
		int err;

		switch (i % 3) {
		case 0:
			err = co_yield();
			break;
		case 1:
			err = co_sleep_us(100);
			break;
		default:
			err = chan_recv(susp_chan, &msg);
			if (!err && (intptr_t)msg != i + 1)
				fail("many_suspends: got %ld, want %d", (long)(intptr_t)msg, i + 1);
			susp_received++;
			break;
		}
		if (err)
			return err;
	}
	return 0;
}

static int many_suspends_spawn(void)
{
	susp_chan = chan_new(0);
	susp_id = spawn(susp_fn, NULL, "suspender");
	susp_feeder_id = spawn(susp_feeder_fn, NULL, "feeder");
	return 2;
}

static void many_suspends_check(void)
{
	expect_status(susp_id, 0, "suspender");
	expect_status(susp_feeder_id, 0, "feeder");
	if (susp_received != SUSPENDS / 3)
		fail("many_suspends: received %d, want %d", susp_received, SUSPENDS / 3);
	chan_free(susp_chan);
}

/* ---- chan_pc: 1 producer, 1 consumer, 200 messages in order -------------------------------- */

#define PC_MSGS 200
static uint64_t pc_prod_id, pc_cons_id;
static co_chan_t *pc_chan;
static int pc_received;

static int pc_producer_fn(void *arg)
{
	for (int i = 1; i <= PC_MSGS; i++) {
		int err = chan_send(pc_chan, (void *)(intptr_t)i);

		if (err)
			return err;
	}
	chan_close(pc_chan);
	return 0;
}

static int pc_consumer_fn(void *arg)
{
	void *msg;
	int err;

	while (!(err = chan_recv(pc_chan, &msg))) {
		if ((intptr_t)msg != pc_received + 1)
			fail("chan_pc: got %ld, want %d", (long)(intptr_t)msg, pc_received + 1);
		pc_received++;
	}
	return err == -EPIPE ? 0 : err;
}

static int chan_pc_spawn(void)
{
	pc_chan = chan_new(4);
	pc_cons_id = spawn(pc_consumer_fn, NULL, "consumer");
	pc_prod_id = spawn(pc_producer_fn, NULL, "producer");
	return 2;
}

static void chan_pc_check(void)
{
	expect_status(pc_prod_id, 0, "producer");
	expect_status(pc_cons_id, 0, "consumer");
	if (pc_received != PC_MSGS)
		fail("chan_pc: received %d, want %d", pc_received, PC_MSGS);
	chan_free(pc_chan);
}

/* ---- n_producers: 4 producers x 100 messages, 1 consumer, per-producer order --------------- */

#define NP_PRODUCERS 4
#define NP_MSGS 100
static uint64_t np_ids[NP_PRODUCERS + 1];
static co_chan_t *np_chan;
static int np_next[NP_PRODUCERS];

static int np_producer_fn(void *arg)
{
	intptr_t p = (intptr_t)arg;

	for (intptr_t i = 0; i < NP_MSGS; i++) {
		int err = chan_send(np_chan, (void *)(p << 16 | i));

		if (err)
			return err;
	}
	return 0;
}

static int np_consumer_fn(void *arg)
{
	for (int n = 0; n < NP_PRODUCERS * NP_MSGS; n++) {
		void *msg;
		int err = chan_recv(np_chan, &msg), p, i;

		if (err)
			return err;
		p = (int)((intptr_t)msg >> 16);
		i = (int)((intptr_t)msg & 0xffff);
		if (p < 0 || p >= NP_PRODUCERS || i != np_next[p])
			fail("n_producers: got %d/%d out of order", p, i);
		else
			np_next[p]++;
	}
	return 0;
}

static int n_producers_spawn(void)
{
	np_chan = chan_new(8);
	for (int p = 0; p < NP_PRODUCERS; p++)
		np_ids[p] = spawn(np_producer_fn, (void *)(intptr_t)p, "producer-%d", p);
	np_ids[NP_PRODUCERS] = spawn(np_consumer_fn, NULL, "consumer");
	return NP_PRODUCERS + 1;
}

static void n_producers_check(void)
{
	for (int i = 0; i <= NP_PRODUCERS; i++)
		expect_status(np_ids[i], 0, "n_producers");
	for (int p = 0; p < NP_PRODUCERS; p++)
		if (np_next[p] != NP_MSGS)
			fail("n_producers: producer %d delivered %d", p, np_next[p]);
	chan_free(np_chan);
}

/* ---- barrier: 8 coroutines meet 3 times ---------------------------------------------------- */

#define BAR_N 8
#define BAR_ROUNDS 3
static uint64_t bar_ids[BAR_N];
static co_barrier_t *bar;
static atomic_int bar_serial;

static int bar_fn(void *arg)
{
	int i = (int)(intptr_t)arg;

	for (int r = 0; r < BAR_ROUNDS; r++) {
		int ret;

		/* Arrive in a different order every round. */
		co_sleep_us(100 * (unsigned int)((i * 3 + r * 5) % BAR_N));
		ret = co_barrier_wait(bar);
		if (ret < 0)
			return ret;
		if (ret == 1)
			atomic_fetch_add(&bar_serial, 1);
	}
	return 0;
}

static int barrier_spawn(void)
{
	bar = co_barrier_new(BAR_N);
	for (int i = 0; i < BAR_N; i++)
		bar_ids[i] = spawn(bar_fn, (void *)(intptr_t)i, "barrier-%d", i);
	return BAR_N;
}

static void barrier_check(void)
{
	for (int i = 0; i < BAR_N; i++)
		expect_status(bar_ids[i], 0, "barrier");
	if (bar_serial != BAR_ROUNDS)
		fail("barrier: %d rounds completed, want %d", (int)bar_serial, BAR_ROUNDS);
	co_barrier_free(bar);
}

/* ---- yield: 4 coroutines x 100 yields (each is switched in exactly 101 times) --------------- */

#define YIELD_N 4
#define YIELD_TIMES 100
static uint64_t yield_ids[YIELD_N];

static int yield_fn(void *arg)
{
	for (int i = 0; i < YIELD_TIMES; i++) {
		int err = co_yield();

		if (err)
			return err;
	}
	return 0;
}

static int yield_spawn(void)
{
	for (int i = 0; i < YIELD_N; i++)
		yield_ids[i] = spawn(yield_fn, NULL, "yielder-%d", i);
	return YIELD_N;
}

static void yield_check(void)
{
	for (int i = 0; i < YIELD_N; i++)
		expect_status(yield_ids[i], 0, "yielder");
}

/* ---- stress1000: 1000 unnamed coroutines, 3 yields each (4 switch-ins each) ------------------ */

#define STRESS_N 1000
static uint64_t stress_ids[STRESS_N];

static int stress_fn(void *arg)
{
	for (int i = 0; i < 3; i++)
		if (co_yield())
			return -ECANCELED;
	return 0;
}

static int stress1000_spawn(void)
{
	for (int i = 0; i < STRESS_N; i++) {
		stress_ids[i] = co_spawn(stress_fn, NULL, NULL);
		if (!stress_ids[i]) {
			fprintf(stderr, "scenarios: co_spawn failed\n");
			exit(1);
		}
	}
	return STRESS_N;
}

static void stress1000_check(void)
{
	for (int i = 0; i < STRESS_N; i++)
		expect_status(stress_ids[i], 0, "stress");
}

/*
 * ---- spawn_tree: depth 4, fanout 3 -------------------------------------------------------------
 * The root (level 0, parent 0) spawns 3 children, each of those 3 more, down to level 4:
 * 1 + 3 + 9 + 27 + 81 = 121 coroutines. Every node joins its children. Names are the path
 * from the root: "tree", "tree.0", "tree.0.2", ...
 */
#define TREE_DEPTH 4
#define TREE_FANOUT 3
#define TREE_TOTAL (1 + 3 + 9 + 27 + 81)
static uint64_t tree_root_id;
static atomic_int tree_nodes;

struct tree_node {
	int level;
	char path[64];
};

static int tree_fn(void *arg)
{
	struct tree_node *node = arg, *kids[TREE_FANOUT];
	uint64_t ids[TREE_FANOUT];
	int ret = 0;

	atomic_fetch_add(&tree_nodes, 1);
	if (node->level == TREE_DEPTH)
		goto out;
	for (int i = 0; i < TREE_FANOUT; i++) {
		kids[i] = calloc(1, sizeof(*kids[i]));
		if (!kids[i])
			abort();
		kids[i]->level = node->level + 1;
		snprintf(kids[i]->path, sizeof(kids[i]->path), "%.40s.%d", node->path, i);
		ids[i] = spawn(tree_fn, kids[i], "%s", kids[i]->path);
		co_yield();
	}
	for (int i = 0; i < TREE_FANOUT; i++) {
		int status = -1, err = co_join(ids[i], &status);

		if (err || status)
			ret = err ? err : status;
	}
out:
	free(node);
	return ret;
}

static int spawn_tree_spawn(void)
{
	struct tree_node *root = calloc(1, sizeof(*root));

	if (!root)
		abort();
	strcpy(root->path, "tree");
	tree_root_id = spawn(tree_fn, root, "tree");
	return TREE_TOTAL;
}

static void spawn_tree_check(void)
{
	expect_status(tree_root_id, 0, "tree");
	if (tree_nodes != TREE_TOTAL)
		fail("spawn_tree: %d nodes ran, want %d", (int)tree_nodes, TREE_TOTAL);
}

/*
 * ---- cancel: 14 coroutines ---------------------------------------------------------------------
 * Cancelled while blocked in chan_recv (3), co_sleep_us (3), chan_send on a full channel (1),
 * co_barrier_wait (1) and co_join (1); by itself while running, failing its next co_yield (1);
 * right after being spawned, while runnable (1); one that ignores -ECANCELED and returns 0
 * (1). All of these exit -ECANCELED.
 * One finishes before its cancel (co_cancel gives -ESRCH, status 0), and the controller
 * that cancels them all exits 0.
 */
static co_chan_t *cancel_rx_chan, *cancel_tx_chan;
static co_barrier_t *cancel_barrier;
static uint64_t cancel_recv_ids[3], cancel_sleep_ids[3], cancel_send_id, cancel_barrier_id,
	cancel_join_id, cancel_yield_id, cancel_unstarted_id, cancel_ignore_id, cancel_late_id,
	cancel_controller_id;

static int expect_cancelled(int err, const char *what)
{
	if (err != -ECANCELED)
		fail("cancel: %s returned %d, want -ECANCELED", what, err);
	return err;
}

static int cancel_recv_fn(void *arg)
{
	void *msg;

	return expect_cancelled(chan_recv(cancel_rx_chan, &msg), "chan_recv");
}

static int cancel_sleep_fn(void *arg)
{
	return expect_cancelled(co_sleep_us(10 * 1000 * 1000), "co_sleep_us");
}

static int cancel_send_fn(void *arg)
{
	/* Capacity 1: the first send fills the buffer, the second blocks. */
	if (chan_send(cancel_tx_chan, (void *)1))
		fail("cancel: first chan_send failed");
	return expect_cancelled(chan_send(cancel_tx_chan, (void *)2), "chan_send");
}

static int cancel_barrier_fn(void *arg)
{
	return expect_cancelled(co_barrier_wait(cancel_barrier), "co_barrier_wait");
}

static int cancel_join_fn(void *arg)
{
	return expect_cancelled(co_join(cancel_sleep_ids[0], NULL), "co_join");
}

/* Cancels itself while running: the next suspension point fails, without switching. */
static int cancel_yield_fn(void *arg)
{
	int err;

	for (int i = 0; i < 5; i++)
		co_yield();
	if ((err = co_cancel(co_self())))
		fail("cancel: co_cancel(self) = %d", err);
	return expect_cancelled(co_yield(), "co_yield");
}

static int cancel_ignore_fn(void *arg)
{
	expect_cancelled(co_sleep_us(10 * 1000 * 1000), "co_sleep_us");
	/* Returns success anyway: the scheduler still reports -ECANCELED. */
	return 0;
}

static int cancel_late_fn(void *arg)
{
	return co_sleep_us(1000);
}

static int cancel_controller_fn(void *arg)
{
	int err;

	/* Let everyone block first (the outcome is the same if some have not). */
	co_sleep_us(20000);
	cancel_unstarted_id = spawn(cancel_sleep_fn, NULL, "cancel-unstarted");
	if ((err = co_cancel(cancel_unstarted_id)))
		fail("cancel: co_cancel(unstarted) = %d", err);
	/* The joiner first, while its target is still alive. */
	if ((err = co_cancel(cancel_join_id)))
		fail("cancel: co_cancel(join) = %d", err);
	for (int i = 0; i < 3; i++) {
		if ((err = co_cancel(cancel_recv_ids[i])))
			fail("cancel: co_cancel(recv) = %d", err);
		if ((err = co_cancel(cancel_sleep_ids[i])))
			fail("cancel: co_cancel(sleep) = %d", err);
	}
	if ((err = co_cancel(cancel_send_id)) || (err = co_cancel(cancel_barrier_id)) ||
	    (err = co_cancel(cancel_ignore_id)))
		fail("cancel: co_cancel = %d", err);
	if ((err = co_join(cancel_late_id, NULL)))
		fail("cancel: co_join(late) = %d", err);
	if ((err = co_cancel(cancel_late_id)) != -ESRCH)
		fail("cancel: co_cancel(finished) = %d, want -ESRCH", err);
	return 0;
}

static int cancel_spawn(void)
{
	cancel_rx_chan = chan_new(0);
	cancel_tx_chan = chan_new(1);
	cancel_barrier = co_barrier_new(2);
	for (int i = 0; i < 3; i++) {
		cancel_recv_ids[i] = spawn(cancel_recv_fn, NULL, "cancel-recv-%d", i);
		cancel_sleep_ids[i] = spawn(cancel_sleep_fn, NULL, "cancel-sleep-%d", i);
	}
	cancel_send_id = spawn(cancel_send_fn, NULL, "cancel-send");
	cancel_barrier_id = spawn(cancel_barrier_fn, NULL, "cancel-barrier");
	cancel_join_id = spawn(cancel_join_fn, NULL, "cancel-join");
	cancel_yield_id = spawn(cancel_yield_fn, NULL, "cancel-yield");
	cancel_ignore_id = spawn(cancel_ignore_fn, NULL, "cancel-ignore");
	cancel_late_id = spawn(cancel_late_fn, NULL, "cancel-late");
	cancel_controller_id = spawn(cancel_controller_fn, NULL, "cancel-controller");
	return 14;	/* cancel-unstarted is spawned by the controller */
}

static void cancel_check(void)
{
	for (int i = 0; i < 3; i++) {
		expect_status(cancel_recv_ids[i], -ECANCELED, "cancel-recv");
		expect_status(cancel_sleep_ids[i], -ECANCELED, "cancel-sleep");
	}
	expect_status(cancel_send_id, -ECANCELED, "cancel-send");
	expect_status(cancel_barrier_id, -ECANCELED, "cancel-barrier");
	expect_status(cancel_join_id, -ECANCELED, "cancel-join");
	expect_status(cancel_yield_id, -ECANCELED, "cancel-yield");
	expect_status(cancel_unstarted_id, -ECANCELED, "cancel-unstarted");
	expect_status(cancel_ignore_id, -ECANCELED, "cancel-ignore");
	expect_status(cancel_late_id, 0, "cancel-late");
	expect_status(cancel_controller_id, 0, "cancel-controller");
	chan_free(cancel_rx_chan);
	chan_free(cancel_tx_chan);
	co_barrier_free(cancel_barrier);
}

/* ---- error_exits: 7 coroutines, statuses by return and by co_exit() ------------------------- */

struct exit_case {
	const char *name;
	int status;
	bool via_exit;
	uint64_t id;
};

static struct exit_case exit_cases[] = {
	{ "ret-ok", 0, false, 0 },
	{ "ret-eio", -EIO, false, 0 },
	{ "ret-einval", -EINVAL, false, 0 },
	{ "ret-enomem", -ENOMEM, false, 0 },
	{ "exit-ok", 0, true, 0 },
	{ "exit-eio", -EIO, true, 0 },
	{ "exit-enomem", -ENOMEM, true, 0 },
};

/* co_exit() from a few real frames down, not from the coroutine's function itself. */
static __attribute__((noinline)) void exit_inner(int status)
{
	co_exit(status);
}

static __attribute__((noinline)) int exit_middle(int status)
{
	exit_inner(status);
	return 1;
}

static int exit_case_fn(void *arg)
{
	struct exit_case *c = arg;

	co_yield();
	co_sleep_us(500);
	if (c->via_exit)
		exit_middle(c->status);
	return c->status;
}

static int error_exits_spawn(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(exit_cases); i++)
		exit_cases[i].id = spawn(exit_case_fn, &exit_cases[i], "%s", exit_cases[i].name);
	return (int)ARRAY_SIZE(exit_cases);
}

static void error_exits_check(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(exit_cases); i++)
		expect_status(exit_cases[i].id, exit_cases[i].status, exit_cases[i].name);
}

/*
 * ---- names: 110 coroutines ---------------------------------------------------------------------
 * 101 ASCII names of every length 0..100 (so 62, 63, 64 and 65 bytes around corobpf's 63-byte
 * limit), 8 special ones (UTF-8 of 2, 3 and 4 bytes per character, quotes and backslashes,
 * control characters, a multi-byte character cut by the 63-byte limit in two ways, a
 * coroutine that renames itself) and one without a name.
 */
#define NAMES_ASCII 101
static const char *const special_names[] = {
	"h\xc3\xa9llo w\xc3\xb6rld",				/* héllo wörld */
	/* 数据库-worker-世界 */
	"\xe6\x95\xb0\xe6\x8d\xae\xe5\xba\x93-worker-\xe4\xb8\x96\xe7\x95\x8c",
	"emoji \xf0\x9f\x99\x82\xf0\x9f\x9a\x80",		/* emoji 🙂🚀 */
	"quote\"back\\slash\\\"",
	"ctl\ttab\nnewline\x01\x1f",
	/* 62 x + é: byte 63 is the first half of é */
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xc3\xa9-tail",
	/* 61 x + 世: bytes 62-63 are two thirds of 世 */
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xe4\xb8\x96-tail",
};
static uint64_t names_ids[NAMES_ASCII + ARRAY_SIZE(special_names) + 2];

static int names_fn(void *arg)
{
	return co_yield();
}

static int names_rename_fn(void *arg)
{
	co_yield();
	co_set_name("after-rename");
	return co_yield();
}

static int names_spawn(void)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char name[NAMES_ASCII + 1];
	size_t n = 0;

	for (int len = 0; len < NAMES_ASCII; len++) {
		for (int i = 0; i < len; i++)
			name[i] = alnum[i % 36];
		name[len] = '\0';
		names_ids[n++] = spawn(names_fn, NULL, "%s", name);
	}
	for (size_t i = 0; i < ARRAY_SIZE(special_names); i++)
		names_ids[n++] = spawn(names_fn, NULL, "%s", special_names[i]);
	names_ids[n++] = spawn(names_rename_fn, NULL, "before-rename");
	names_ids[n] = co_spawn(names_fn, NULL, NULL);
	if (!names_ids[n])
		exit(1);
	return (int)ARRAY_SIZE(names_ids);
}

static void names_check(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(names_ids); i++)
		expect_status(names_ids[i], 0, "names");
}

/*
 * ---- spans: 6 coroutines, nested spans held across yields and sleeps ------------------------
 * request > handler > db.query, plus a span named at run time from a stack buffer. Each
 * coroutine opens and closes 5 x 4 spans; with 2 workers they migrate in between.
 */
#define SPAN_N 6
#define SPAN_ITERS 5
static uint64_t span_ids[SPAN_N];

static int span_fn(void *arg)
{
	int n = (int)(intptr_t)arg;

	for (int i = 0; i < SPAN_ITERS; i++) {
		char step[32];

		co_span_begin("request");
		co_yield();
		co_span_begin("handler");
		co_sleep_us(200 + 50 * (unsigned int)n);
		co_span_begin("db.query");
		co_yield();
		co_span_end("db.query");
		snprintf(step, sizeof(step), "step-%d.%d", n, i);
		co_span_begin(step);
		co_sleep_us(100);
		co_span_end(step);
		co_span_end("handler");
		co_yield();
		co_span_end("request");
	}
	return 0;
}

static int spans_spawn(void)
{
	for (int i = 0; i < SPAN_N; i++)
		span_ids[i] = spawn(span_fn, (void *)(intptr_t)i, "span-%d", i);
	return SPAN_N;
}

static void spans_check(void)
{
	for (int i = 0; i < SPAN_N; i++)
		expect_status(span_ids[i], 0, "span");
}

/* ---- the table ---------------------------------------------------------------------------- */

struct scenario {
	const char *name;
	int (*spawn)(void);	/* spawns, returns how many coroutines it will create in all */
	void (*check)(void);	/* after all of them finished */
	bool in_mixed;
};

static int mixed_spawn(void);
static void mixed_check(void);

static const struct scenario scenarios[] = {
	{ "one_sleep", one_sleep_spawn, one_sleep_check, true },
	{ "concurrent20", concurrent20_spawn, concurrent20_check, true },
	{ "many_suspends", many_suspends_spawn, many_suspends_check, true },
	{ "chan_pc", chan_pc_spawn, chan_pc_check, true },
	{ "n_producers", n_producers_spawn, n_producers_check, true },
	{ "barrier", barrier_spawn, barrier_check, true },
	{ "yield", yield_spawn, yield_check, true },
	{ "mixed", mixed_spawn, mixed_check, false },
	{ "stress1000", stress1000_spawn, stress1000_check, false },
	{ "spawn_tree", spawn_tree_spawn, spawn_tree_check, true },
	{ "cancel", cancel_spawn, cancel_check, true },
	{ "error_exits", error_exits_spawn, error_exits_check, true },
	{ "names", names_spawn, names_check, true },
	{ "spans", spans_spawn, spans_check, true },
};

/*
 * mixed: every scenario except stress1000 at the same time, spawned from main:
 * 1 + 20 + 2 + 2 + 5 + 8 + 4 + 121 + 14 + 7 + 110 + 6 = 300 coroutines.
 */
static int mixed_spawn(void)
{
	int n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
		if (scenarios[i].in_mixed)
			n += scenarios[i].spawn();
	return n;
}

static void mixed_check(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
		if (scenarios[i].in_mixed)
			scenarios[i].check();
}

static void usage(FILE *f)
{
	fprintf(f, "usage: scenarios [--wait] [--linger MS] [--workers N] [--exit-code N] NAME\n"
		   "       scenarios --list\n");
}

static void wait_for_sigusr1(const sigset_t *set)
{
	int sig;

	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	while (sigwait(set, &sig) || sig != SIGUSR1)
		;
}

int main(int argc, char **argv)
{
	const struct scenario *sc = NULL;
	bool wait = false;
	long linger_ms = 0;
	int exit_code = 0;
	unsigned int workers = 2;
	struct sched_stats st;
	sigset_t set;
	int i, expected;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--wait")) {
			wait = true;
		} else if (!strcmp(argv[i], "--linger") && i + 1 < argc) {
			linger_ms = atol(argv[++i]);
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			workers = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--exit-code") && i + 1 < argc) {
			exit_code = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--list")) {
			for (size_t j = 0; j < ARRAY_SIZE(scenarios); j++)
				printf("%s\n", scenarios[j].name);
			return 0;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (i != argc - 1) {
		usage(stderr);
		return 2;
	}
	for (size_t j = 0; j < ARRAY_SIZE(scenarios); j++)
		if (!strcmp(argv[i], scenarios[j].name))
			sc = &scenarios[j];
	if (!sc) {
		fprintf(stderr, "scenarios: unknown scenario '%s' (see --list)\n", argv[i]);
		return 2;
	}

	/* Blocked in every thread (workers inherit it) so only sigwait() sees it. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	if (sched_start(workers)) {
		fprintf(stderr, "scenarios: cannot start the scheduler\n");
		return 1;
	}
	if (wait)
		wait_for_sigusr1(&set);

	expected = sc->spawn();
	sched_wait_all();
	sched_get_stats(&st);
	sc->check();
	if (st.created != (uint64_t)expected)
		fail("%s: %" PRIu64 " coroutines created, want %d", sc->name, st.created, expected);
	if (st.exits != st.created)
		fail("%s: %" PRIu64 " exits for %" PRIu64 " coroutines", sc->name, st.exits,
		     st.created);
	if (!failures)
		printf("DONE %s coroutines=%d\n", sc->name, expected);
	fflush(stdout);
	if (linger_ms > 0)
		usleep((useconds_t)linger_ms * 1000);
	sched_stop();
	return failures ? 1 : exit_code;
}
