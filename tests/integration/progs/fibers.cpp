// SPDX-License-Identifier: MIT
/*
 * Boost.Fiber, no corobpf probes: the switch-function path must see these
 * fibers through Boost.Context (make_fcontext, jump_fcontext,
 * ontop_fcontext) alone.
 *
 *     fibers K R M    K fibers each yielding R times, plus a producer fiber
 *                     sending M values through a buffered channel of 4 to a
 *                     consumer fiber; main joins them all
 *     fibers loop N   two fibers yielding to each other N times (the benchmark:
 *                     prints the time per yield, "ns/iter")
 *     fibers slow K S K fibers sleeping 2 ms at a time for S seconds; prints
 *                     "READY" once they are all made (to attach to it then)
 *     fibers steal T B  a work-stealing scheduler (waiting, not spinning, when
 *                     idle) on T threads: 2*T fibers each sleeping 150 ms
 *                     twice (fiber sleeps: every scheduler idles in its
 *                     dispatcher meanwhile), and one "blocker" fiber calling
 *                     usleep(B ms) (its thread blocked in the kernel)
 *
 * When the run is over it prints "FIBER <name> <times it was resumed>" for
 * each fiber it made, counted by the fiber itself (its first run counts
 * one; every return from a yield counts one more), and "SUM <values
 * received>", then "DONE".
 */
#include <boost/fiber/all.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace bf = boost::fibers;

#ifdef TAKE_ADDRESS
/*
 * Built as fibers-addr: the program takes the address of jump_fcontext, so
 * corobpf cannot know every call from the call instructions, and must
 * probe the function's entry instead.
 */
void *volatile fcontext_address = (void *)&boost::context::detail::jump_fcontext;
#endif

struct counted {
	std::string name;
	unsigned resumes = 0;
	const void *sp = nullptr; /* steal: an address on its stack (tells it from the dispatchers) */
};

/* A thread of the work-stealing pool: its main context waits (a fiber wait) until done. */
static bf::mutex steal_mtx;
static bf::condition_variable_any steal_cnd;
static bool steal_done;

static void steal_thread(unsigned threads)
{
	/* Returns once all threads made theirs (a barrier inside). */
	bf::use_scheduling_algorithm<bf::algo::work_stealing>(threads, true);
	std::unique_lock<bf::mutex> lk(steal_mtx);
	steal_cnd.wait(lk, [] { return steal_done; });
}

int main(int argc, char **argv)
{
	std::vector<counted> counts;

	if (argc == 3 && !strcmp(argv[1], "loop")) {
		unsigned n = (unsigned)strtoul(argv[2], nullptr, 0);
		counts.resize(2);
		auto pinger = [&](counted *c) {
			c->resumes++;
			for (unsigned i = 0; i < n; i++) {
				boost::this_fiber::yield();
				c->resumes++;
			}
		};
		counts[0].name = "ping";
		counts[1].name = "pong";
		auto t0 = std::chrono::steady_clock::now();
		bf::fiber a(pinger, &counts[0]), b(pinger, &counts[1]);
		a.join();
		b.join();
		auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0);
		printf("%.1f ns/iter (one yield)\n", ns.count() / (2.0 * n + 2));
	} else if (argc == 4 && !strcmp(argv[1], "slow")) {
		unsigned k = (unsigned)atoi(argv[2]);
		auto until = std::chrono::steady_clock::now() +
			     std::chrono::milliseconds((long)(atof(argv[3]) * 1000));
		std::vector<bf::fiber> fs;

		counts.resize(k);
		for (unsigned i = 0; i < k; i++) {
			counts[i].name = "sleeper-" + std::to_string(i);
			fs.emplace_back([&, i] {
				counted *c = &counts[i];
				c->resumes++;
				while (std::chrono::steady_clock::now() < until) {
					boost::this_fiber::sleep_for(std::chrono::milliseconds(2));
					c->resumes++;
				}
			});
		}
		printf("READY\n");
		fflush(stdout);
		for (auto &f : fs)
			f.join();
	} else if (argc == 4 && !strcmp(argv[1], "steal")) {
		unsigned t = (unsigned)atoi(argv[2]), k = 2 * t;
		long block_ms = atol(argv[3]);
		std::vector<std::thread> threads;
		std::vector<bf::fiber> fs;

		for (unsigned i = 1; i < t; i++)
			threads.emplace_back(steal_thread, t);
		bf::use_scheduling_algorithm<bf::algo::work_stealing>(t, true);
		counts.resize(k + 1);
		for (unsigned i = 0; i < k; i++) {
			counts[i].name = "sleeper-" + std::to_string(i);
			fs.emplace_back([&, i] {
				counted *c = &counts[i];
				int here;
				c->sp = &here;
				c->resumes++;
				for (int j = 0; j < 2; j++) {
					boost::this_fiber::sleep_for(std::chrono::milliseconds(150));
					c->resumes++;
				}
			});
		}
		counts[k].name = "blocker";
		fs.emplace_back([&] {
			counted *c = &counts[k];
			int here;
			c->sp = &here;
			c->resumes++;
			usleep((useconds_t)block_ms * 1000);
		});
		for (auto &f : fs)
			f.join();
		{
			std::unique_lock<bf::mutex> lk(steal_mtx);
			steal_done = true;
		}
		steal_cnd.notify_all();
		for (auto &th : threads)
			th.join();
		for (auto &c : counts)
			printf("FIBER %s %u %p\n", c.name.c_str(), c.resumes, c.sp);
		printf("DONE\n");
		return 0;
	} else if (argc == 4) {
		unsigned k = (unsigned)atoi(argv[1]), r = (unsigned)atoi(argv[2]),
			 m = (unsigned)atoi(argv[3]);
		std::vector<bf::fiber> fs;
		bf::buffered_channel<unsigned> ch(4);
		unsigned long sum = 0;

		counts.resize(k + 2);
		for (unsigned i = 0; i < k; i++) {
			counts[i].name = "yielder-" + std::to_string(i);
			fs.emplace_back([&, i] {
				counted *c = &counts[i];
				c->resumes++;
				for (unsigned j = 0; j < r; j++) {
					boost::this_fiber::yield();
					c->resumes++;
				}
			});
		}
		counts[k].name = "producer";
		counts[k + 1].name = "consumer";
		/*
		 * Producer and consumer yield after every channel operation, and the
		 * round-robin scheduler runs the producer first in every round, so
		 * neither ever waits on the channel: each of their suspensions is a
		 * yield, which they count.
		 */
		fs.emplace_back([&] {
			counted *c = &counts[k];
			c->resumes++;
			for (unsigned v = 1; v <= m; v++) {
				ch.push(v);
				boost::this_fiber::yield();
				c->resumes++;
			}
			ch.close();
		});
		fs.emplace_back([&] {
			counted *c = &counts[k + 1];
			unsigned v;
			c->resumes++;
			while (ch.pop(v) == bf::channel_op_status::success) {
				sum += v;
				boost::this_fiber::yield();
				c->resumes++;
			}
		});
		for (auto &f : fs)
			f.join();
		printf("SUM %lu\n", sum);
	} else {
		fprintf(stderr, "usage: fibers K R M | fibers loop N | fibers slow K SECONDS | "
			"fibers steal T BLOCK_MS\n");
		return 2;
	}
	for (auto &c : counts)
		printf("FIBER %s %u\n", c.name.c_str(), c.resumes);
	printf("DONE\n");
	return 0;
}
