// SPDX-License-Identifier: MIT
/*
 * demo: a small coroutine "server" on corosched, the workload the README traces.
 *
 *     demo [-d SECS] [-w WORKERS] [-r RATE]
 *     demo --pingpong N [-w WORKERS] [--wait [--again]]
 *
 * Server mode: an "acceptor" coroutine spawns one "req-N" handler per incoming request
 * (RATE per second for SECS seconds). A handler opens a "request" span, sleeps to simulate
 * reading the request, sends a query to a pool of "db-worker-N" coroutines over a channel
 * and waits for the reply on its own channel inside a "db.query" span, yields, and renders
 * the response. About one request in forty fails (exit status -EIO), and one slow request is
 * cancelled by a "watchdog" while it waits (-ECANCELED). A "metrics" coroutine ticks every
 * 100 ms. At the end the acceptor waits for every handler, closes the database queue and
 * everything exits; demo prints one summary line and exits 0.
 *
 * Ping-pong mode, for benchmarks: "ping" and "pong" pass a token N times over two unbuffered
 * channels, two switches per round trip; one worker by default, so no thread ever sleeps
 * and probes fire as fast as the scheduler can switch. Prints the elapsed time and the
 * number of switch and ready probes fired. With --wait it prints "READY <pid>" and waits for
 * SIGUSR1 before starting, so a tracer can attach (and tests can stall the tracer) first;
 * --again then waits for a second SIGUSR1 and runs once more on the same worker threads.
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corosched.h"

#define DB_WORKERS 4
#define SLOW_REQUEST 10		/* the request the watchdog cancels */

static struct {
	double duration_s;
	unsigned int workers;
	unsigned int rate;
	long pingpong;
	bool wait, again;
} opt = {
	.duration_s = 3,
	.workers = 2,
	.rate = 200,
};

static co_chan_t *db_queue;
static co_wg_t *handlers;
static atomic_bool stopping;
static atomic_ulong served, failed, cancelled, in_flight;

/* One query from a handler to a db worker. Both hold a reference: either may go first. */
struct db_request {
	atomic_int refs;
	uint64_t query;
	co_chan_t *reply;	/* capacity 1: the db worker never blocks on a gone handler */
};

static void db_request_put(struct db_request *req)
{
	if (atomic_fetch_sub(&req->refs, 1) == 1) {
		chan_free(req->reply);
		free(req);
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Deterministic "randomness" per request, so runs are comparable. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static int db_worker(void *arg)
{
	void *msg;

	while (!chan_recv(db_queue, &msg)) {
		struct db_request *req = msg;
		uint64_t h = mix(req->query);
		int err;

		/* Simulated disk and network: 0.2 to 1.5 ms. */
		co_sleep_us(200 + h % 1300);
		err = (h >> 20) % 40 == 0 ? -EIO : 0;
		chan_send(req->reply, (void *)(intptr_t)err);
		db_request_put(req);
	}
	return 0;
}

/* Returns the query's result, or -ECANCELED if this handler was cancelled meanwhile. */
static int db_query(uint64_t query)
{
	struct db_request *req = calloc(1, sizeof(*req));
	void *result;
	int err;

	if (!req || !(req->reply = chan_new(1))) {
		free(req);
		return -ENOMEM;
	}
	atomic_init(&req->refs, 2);
	req->query = query;
	co_span_begin("db.query");
	err = chan_send(db_queue, req);
	if (err) {
		db_request_put(req);	/* the db worker never got it */
		db_request_put(req);
	} else {
		err = chan_recv(req->reply, &result);
		if (!err)
			err = (int)(intptr_t)result;
		db_request_put(req);
	}
	co_span_end("db.query");
	return err;
}

static int handler(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg, h = mix(n);
	int err;

	atomic_fetch_add(&in_flight, 1);
	co_span_begin("request");
	/* Reading and parsing the request: 50 to 300 us; the slow one waits on "upstream". */
	err = co_sleep_us(n == SLOW_REQUEST ? 500000 : 50 + h % 250);
	if (!err)
		err = db_query(n);
	if (!err)
		err = co_yield();
	if (!err && h % 5 == 0)
		err = db_query(n + 1000000);	/* some requests need a second query */
	if (!err) {
		co_span_begin("render");
		err = co_sleep_us(50 + h % 100);
		co_span_end("render");
	}
	co_span_end("request");

	if (err == -ECANCELED)
		atomic_fetch_add(&cancelled, 1);
	else if (err)
		atomic_fetch_add(&failed, 1);
	else
		atomic_fetch_add(&served, 1);
	atomic_fetch_sub(&in_flight, 1);
	co_wg_done(handlers);
	return err;
}

static int watchdog(void *arg)
{
	uint64_t victim = (uint64_t)(uintptr_t)arg;

	/* The slow request blew its 50 ms budget. */
	co_sleep_us(50000);
	co_cancel(victim);
	return 0;
}

static int metrics(void *arg)
{
	while (!atomic_load(&stopping)) {
		co_span_begin("metrics.tick");
		/* A real server would export these; reading them is enough to show the span. */
		(void)atomic_load(&in_flight);
		co_span_end("metrics.tick");
		co_sleep_us(100000);
	}
	return 0;
}

static int acceptor(void *arg)
{
	uint64_t start = now_ns(), end = start + (uint64_t)(opt.duration_s * 1e9), n;
	uint64_t period = 1000000000ull / opt.rate;
	char name[32];

	for (n = 0;; n++) {
		uint64_t due = start + n * period, now = now_ns(), id;

		if (due >= end)
			break;
		/* Sleep until the next arrival; the deadline absorbs our own overhead. */
		if (due > now)
			co_sleep_us((due - now) / 1000);
		snprintf(name, sizeof(name), "req-%" PRIu64, n);
		co_wg_add(handlers, 1);
		id = co_spawn(handler, (void *)(uintptr_t)n, name);
		if (!id) {
			co_wg_done(handlers);
			continue;
		}
		if (n == SLOW_REQUEST)
			co_spawn(watchdog, (void *)(uintptr_t)id, "watchdog");
	}
	/* Graceful shutdown: drain the handlers, then the database, then the rest. */
	co_wg_wait(handlers);
	chan_close(db_queue);
	atomic_store(&stopping, true);
	return 0;
}

static int run_server(void)
{
	struct sched_stats st;
	char name[32];
	int err;

	db_queue = chan_new(16);
	handlers = co_wg_new();
	if (!db_queue || !handlers)
		return 1;
	err = sched_start(opt.workers);
	if (err) {
		fprintf(stderr, "demo: cannot start %u workers: %s\n", opt.workers, strerror(-err));
		return 1;
	}
	for (int i = 0; i < DB_WORKERS; i++) {
		snprintf(name, sizeof(name), "db-worker-%d", i);
		co_spawn(db_worker, NULL, name);
	}
	co_spawn(metrics, NULL, "metrics");
	co_spawn(acceptor, NULL, "acceptor");
	sched_wait_all();
	sched_get_stats(&st);
	printf("demo: %lu requests: %lu served, %lu failed, %lu cancelled; %" PRIu64
	       " coroutines, %" PRIu64 " switches on %u workers\n",
	       served + failed + cancelled, (unsigned long)served, (unsigned long)failed,
	       (unsigned long)cancelled, st.created, st.switches, opt.workers);
	sched_stop();
	chan_free(db_queue);
	co_wg_free(handlers);
	return 0;
}

static co_chan_t *ping_to_pong, *pong_to_ping;

static int ping(void *arg)
{
	void *token = NULL;

	for (long i = 0; i < opt.pingpong; i++)
		if (chan_send(ping_to_pong, token) || chan_recv(pong_to_ping, &token))
			return -EPIPE;
	return 0;
}

static int pong(void *arg)
{
	void *token;

	for (long i = 0; i < opt.pingpong; i++)
		if (chan_recv(ping_to_pong, &token) || chan_send(pong_to_ping, token))
			return -EPIPE;
	return 0;
}

static void wait_sigusr1(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigwait(&set, &sig);
}

static int run_pingpong(void)
{
	struct sched_stats st;
	uint64_t t0, elapsed;
	int round;

	ping_to_pong = chan_new(0);
	pong_to_ping = chan_new(0);
	if (opt.wait) {
		sigset_t set;

		/* Blocked (in the workers too) before READY is printed: no signal is missed. */
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		printf("READY %d\n", (int)getpid());
		fflush(stdout);
		wait_sigusr1();
	}
	if (!ping_to_pong || !pong_to_ping || sched_start(opt.workers))
		return 1;
	for (round = 0; round < (opt.again ? 2 : 1); round++) {
		if (round)
			wait_sigusr1();
		t0 = now_ns();
		co_spawn(pong, NULL, "pong");
		co_spawn(ping, NULL, "ping");
		sched_wait_all();
		elapsed = now_ns() - t0;
		sched_get_stats(&st);
		/*
		 * Every probe fired so far (cumulative over runs): created + one name each +
		 * readies + switches + exits. The overload test sums them.
		 */
		printf("pingpong: rounds=%ld switches=%" PRIu64 " readies=%" PRIu64
		       " created=%" PRIu64 " exits=%" PRIu64 " elapsed_ns=%" PRIu64
		       " ns_per_switch=%.1f\n",
		       opt.pingpong, st.switches, st.readies, st.created, st.exits, elapsed,
		       st.switches ? (double)elapsed / (double)st.switches : 0.0);
		fflush(stdout);
	}
	sched_stop();
	chan_free(ping_to_pong);
	chan_free(pong_to_ping);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: demo [-d SECS] [-w WORKERS] [-r RATE]\n"
		"       demo --pingpong N [-w WORKERS] [--wait [--again]]\n"
		"\n"
		"  -d SECS        run time (default 3)\n"
		"  -w WORKERS     worker threads (default 2; 1 with --pingpong)\n"
		"  -r RATE        requests per second (default 200)\n"
		"  --pingpong N   pass a token N times between two coroutines, print the time\n"
		"  --wait         (pingpong) print READY <pid>, start on SIGUSR1\n"
		"  --again        (with --wait) then wait for SIGUSR1 again and run once more\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pingpong", required_argument, NULL, 'p' },
		{ "wait", no_argument, NULL, 'W' },
		{ "again", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool workers_set = false;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "d:w:r:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			opt.duration_s = strtod(optarg, &end);
			if (*end || opt.duration_s <= 0)
				goto bad;
			break;
		case 'w':
			opt.workers = (unsigned int)strtoul(optarg, &end, 10);
			if (*end || !opt.workers)
				goto bad;
			workers_set = true;
			break;
		case 'r':
			opt.rate = (unsigned int)strtoul(optarg, &end, 10);
			if (*end || !opt.rate)
				goto bad;
			break;
		case 'p':
			opt.pingpong = strtol(optarg, &end, 10);
			if (*end || opt.pingpong <= 0)
				goto bad;
			break;
		case 'W':
			opt.wait = true;
			break;
		case 'A':
			opt.again = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	if (opt.pingpong) {
		if (!workers_set)
			opt.workers = 1;
		return run_pingpong();
	}
	return run_server();
bad:
	usage(stderr);
	return 2;
}
