/* SPDX-License-Identifier: MIT */
/*
 * tasks: C++20 coroutines on the executor of exec.hpp, for suite_22_cxx20.py and the bench.
 *
 *     tasks [--no-eager] [--truth PATH] [ROOTS]
 *                          ground truth to PATH, else $COROBPF_TRUTH (JSON lines, one per
 *                          frame incarnation); --no-eager: the roots start no eager coroutine
 *     tasks --bench ROOTS  no truth kept; prints the resumes and the process's CPU time per
 *                          resume (`ns/iter`; the wall time too)
 *
 * Each root moves to a worker, joins a middle task that joins leaves one after another (their
 * frames freed and reused) and migrates, pulls a generator to its end and cancels another,
 * starts an eager watcher that waits on an event and an eager hopper that yields (its
 * await_suspend inlined at -O2: Clang's ramp runs it), then yields and migrates between the two
 * workers. One more root sets the event; with eager coroutines, main first starts one that waits
 * on an event never set (never resumed, never freed). Every frame incarnation is in the truth: its
 * function, parent, entries into its body, returns into it from a nested resume, its
 * suspensions (reason, object) and exit.
 *
 * Built with -DWITH_ADAPTER -DCOUNT_HOOKS, it prints how many of the adapter's traced
 * branches it took (`hooks N`): none when nobody traces it. Built with -DUNRELATED_PROBE, it
 * fires one probe of corobpf.h that is about no coroutine (ready of id 1) as main starts.
 */
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <sys/resource.h>
#include <utility>
#include <vector>

#ifdef COUNT_HOOKS
static std::atomic<long> hooks;
#define COROBPF_CORO_ON_TRACED() hooks.fetch_add(1, std::memory_order_relaxed)
#endif

#include "exec.hpp"

#ifdef UNRELATED_PROBE
/*
 * -DUNRELATED_PROBE: the program uses corobpf.h for something else than its coroutines (one
 * ready probe in a constructor, of no coroutine), and no adapter: they stay traced unmodified.
 */
#include "corobpf.h"
struct unrelated {
	__attribute__((noinline)) unrelated() { CORO_PROBE(ready, 1); }
};
#endif

using ex::event;
using ex::generator;
using ex::task;

static ex::scheduler S;

static task<int> leaf(int i)
{
	co_await S.yield();
	co_return i * 2;
}

static task<int> middle(int n)
{
	int sum = 0;
	for (int i = 0; i < n; i++)
		sum += co_await leaf(i);
	co_await S.to(1 - ex::scheduler::self);
	sum += co_await leaf(100);
	co_return sum;
}

static generator counter(int n)
{
	for (int i = 0; i < n; i++)
		co_yield i;
}

static ex::eager watcher(event *ev, long *seen)
{
	co_await *ev;
	__atomic_add_fetch(seen, 1, __ATOMIC_RELAXED);
}

/*
 * Eager too, but its first suspension is a yield, whose await_suspend the compilers inline at
 * -O2: in Clang's ramp, nothing but the frame's suspend index marks the end of its first run.
 */
static ex::eager hopper(long *hops)
{
	co_await S.yield();
	__atomic_add_fetch(hops, 1, __ATOMIC_RELAXED);
}

/*
 * Eager, waiting on an event nobody sets: suspended on it when the program ends, never resumed
 * (its frame is never freed). Called from main, outside any coroutine and the executor's count.
 */
static ex::eager forgotten(event *never)
{
	co_await *never;
}

/*
 * Member function templates of a class template: their demangled names begin with their return
 * type ("ex::task<int> names_for_a_test::registry<int, long>::lookup<char>(int, long, char)"),
 * which corobpf leaves out. The first is longer than 63 bytes; the second's, with the standard
 * library's types spelled out, longer than 255.
 */
namespace names_for_a_test {
template <class Key, class Value> struct registry {
	template <class Extra> static task<int> lookup(Key, Value, Extra)
	{
		co_await S.yield();
		co_return 1;
	}
	template <class Extra> static task<int> lookup_everything(Key k, Value, Extra)
	{
		co_await S.yield();
		co_return (int)k.size();
	}
};
} /* namespace names_for_a_test */

using long_key = std::map<std::string, std::vector<std::string>>;
using long_extra = std::vector<std::pair<std::string, std::string>>;

static long sum_all, seen, hops;
static bool with_eager = true;

static task<void> root(int k, event *ev)
{
	co_await S.to(k % 2);
	long s = co_await middle(3);
	s += co_await names_for_a_test::registry<int, long>::lookup<char>(k, 2, 'c');
	s += co_await names_for_a_test::registry<long_key, std::string>::lookup_everything<long_extra>(
		long_key(), std::string(), long_extra());
	{
		/* Across no suspension of root's own, but around nested resumes. */
		EX_SPAN(gens, "generators");
		generator g = counter(3);
		int v;
		while (g.next(&v))
			s += v;
	}
	{
		/* Destroyed after two values: cancelled while suspended. */
		generator g = counter(10);
		int v;
		g.next(&v);
		g.next(&v);
		s += v;
	}
	if (with_eager) {
		ex::spawn_eager([ev] { watcher(ev, &seen); });
		ex::spawn_eager([] { hopper(&hops); });
	}
	/* Open across suspensions and migrations. */
	EX_SPAN(hops, "hops");
	for (int j = 0; j < 3; j++) {
		co_await S.yield();
		co_await S.to(j % 2);
	}
	__atomic_add_fetch(&sum_all, s, __ATOMIC_RELAXED);
}

static task<void> setter(event *ev, int rounds)
{
	for (int i = 0; i < rounds; i++)
		co_await S.yield();
	ev->set();
}

int main(int argc, char **argv)
{
	const char *truth = getenv("COROBPF_TRUTH");
	int arg = 1;
	bool bench = false;
	for (; arg < argc && argv[arg][0] == '-'; arg++) {
		if (!strcmp(argv[arg], "--bench"))
			bench = true;
		else if (!strcmp(argv[arg], "--no-eager"))
			with_eager = false;
		else if (!strcmp(argv[arg], "--truth") && arg + 1 < argc)
			truth = argv[++arg];
	}
	int roots = arg < argc ? atoi(argv[arg]) : 8;

#ifdef UNRELATED_PROBE
	unrelated probe;
	(void)probe;
#endif
	ex::T().keep = !bench;
	event ev{&S}, never{&S};
	if (with_eager && !bench) {
		forgotten(&never);
		ex::running = 0;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	S.start();
	for (int k = 0; k < roots; k++)
		S.spawn(root(k, &ev), k % 2);
	S.spawn(setter(&ev, 4), 1);
	S.wait_all();
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* CPU time, every thread's: idle waits do not count, on a busy machine either. */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long resumes = ex::total_resumes();
	double wall = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	double cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
		     (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
	printf("roots %d resumes %ld watchers %ld sum %ld cpu %.1f ns/iter wall %.1f ns\n", roots,
	       resumes, seen, sum_all, cpu / resumes, wall / resumes);
#ifdef COUNT_HOOKS
	printf("hooks %ld\n", hooks.load());
#endif
	if (truth && !bench) {
		FILE *f = fopen(truth, "w");
		if (!f) {
			perror(truth);
			return 1;
		}
		ex::write_truth(f);
		fclose(f);
	}
	return seen == (with_eager ? roots : 0) && hops == seen ? 0 : 2;
}
