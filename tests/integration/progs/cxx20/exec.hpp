/* SPDX-License-Identifier: MIT */
/*
 * exec.hpp: a small C++20 coroutine executor for the integration tests (suite_22_cxx20.py),
 * and the ground truth it keeps of every coroutine frame it runs.
 *
 *   task<T>      lazy (suspends at once); `co_await child` starts the child by symmetric
 *                transfer and the child's end transfers back (a join); spawn() runs one on
 *                the executor, which frees its frame when it ends.
 *   generator    lazy; driven by next(), a direct resume from inside another coroutine's
 *                body (a nested resume); it may be destroyed before it ends (cancelled).
 *   eager        runs in its ramp up to its first suspension, frees itself at its end.
 *   scheduler    two worker threads, one run queue each: yield() requeues on the same
 *                worker, to(w) moves to worker w (a migration), event a one-shot wait.
 *
 * Built without the adapter it has no probe at all; with -DWITH_ADAPTER its promises are
 * wrapped in corobpf::traced (usdt/corobpf_coro.hpp) and its awaiters say their reasons.
 *
 * The truth: the executor itself counts, per frame incarnation (frame address from the
 * coroutine_handle), every entry into the body (`resumes`: the first run, each resume by a
 * worker, each symmetric transfer into it), every return into its body from a coroutine it
 * resumed directly (`nested_returns`), its parent (the coroutine running on the creating
 * thread), every suspension with the reason and object the adapter gives it, every time it
 * is put on a run queue (`readies`), the spans it opens, and its exit. With each suspension
 * it keeps the awaiter's type whose await_suspend suspended it (`awaiters`, parallel to
 * `suspends`: the demangled typeid, null where no awaiter suspends it: a nested resume, an
 * eager child's first run).
 * write_truth() prints one JSON line per incarnation, in creation order.
 */
#ifndef CXX20_EXEC_HPP
#define CXX20_EXEC_HPP

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <typeinfo>
#include <unistd.h>
#include <sys/syscall.h>
#include <utility>
#include <vector>

#ifdef WITH_ADAPTER
#include "corobpf_coro.hpp"
#define EX_PROMISE(p) corobpf::traced<p>
#else
#define EX_PROMISE(p) p
#endif

#ifndef CORO_YIELD
/* The reasons of usdt/corobpf.h, for the truth of a build without it. */
#define CORO_YIELD 1
#define CORO_WAIT 2
#define CORO_DONE 5
#endif

namespace ex {

/* ---- the truth ---- */

struct record {
	std::uint64_t id, parent;
	std::string name;
	long resumes = 0, nested_returns = 0, readies = 0;
	std::vector<std::string> spans;
	std::vector<std::pair<int, std::uint64_t>> suspends;
	std::vector<const std::type_info *> awaiters; /* parallel to suspends: NULL for none */
	std::vector<long> tids;
	bool exited = false;
	int status = 0;
};

struct truth {
	bool keep = true;	/* false: a benchmark run, nothing recorded */
	std::mutex m;
	std::vector<std::unique_ptr<record>> all;
	std::map<std::uint64_t, record *> live;
	std::atomic<long> bench_resumes{0};
};

inline truth &T()
{
	static truth t;
	return t;
}

/* The coroutine whose body runs on this thread, as the executor knows it (0: none). */
inline thread_local std::uint64_t running = 0;

inline std::uint64_t addr(std::coroutine_handle<> h)
{
	return reinterpret_cast<std::uintptr_t>(h.address());
}

inline void on_create(std::uint64_t id, const char *name)
{
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	auto r = std::make_unique<record>();
	r->id = id;
	r->parent = running;
	r->name = name;
	T().live[id] = r.get();
	T().all.push_back(std::move(r));
}

/* The body of id is entered on this thread. */
inline void on_enter(std::uint64_t id)
{
	if (!T().keep) {
		T().bench_resumes.fetch_add(1, std::memory_order_relaxed);
		return;
	}
	long tid = syscall(SYS_gettid);
	std::lock_guard<std::mutex> g(T().m);
	record *r = T().live.at(id);
	r->resumes++;
	if (r->tids.empty() || std::find(r->tids.begin(), r->tids.end(), tid) == r->tids.end())
		r->tids.push_back(tid);
}

/*
 * awaiter: the type of the awaiter suspending it (&typeid: a constant, so the awaiters'
 * code keeps the shape it has without the truth), NULL for none.
 */
inline void on_suspend(std::uint64_t id, int reason, std::uint64_t obj,
		       const std::type_info *awaiter = nullptr)
{
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	T().live.at(id)->suspends.emplace_back(reason, obj);
	T().live.at(id)->awaiters.push_back(awaiter);
}

/* h is put on a run queue: the adapter's build says so with corobpf::ready. */
inline void on_ready(std::coroutine_handle<> h)
{
#ifdef WITH_ADAPTER
	corobpf::ready(h);
#endif
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	T().live.at(addr(h))->readies++;
}

/* The running coroutine opens a span (the adapter's build: a corobpf::span). */
inline void on_span(const char *name)
{
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	T().live.at(running)->spans.push_back(name);
}

#ifdef WITH_ADAPTER
#define EX_SPAN(var, name) corobpf::span var(name); ex::on_span(name)
#else
#define EX_SPAN(var, name) ex::on_span(name)
#endif

inline void on_nested_return(std::uint64_t id)
{
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	T().live.at(id)->nested_returns++;
}

inline void on_exit(std::uint64_t id, int status)
{
	if (!T().keep)
		return;
	std::lock_guard<std::mutex> g(T().m);
	record *r = T().live.at(id);
	r->exited = true;
	r->status = status;
	T().live.erase(id);
}

inline long total_resumes()
{
	std::lock_guard<std::mutex> g(T().m);
	long n = T().bench_resumes.load();
	for (auto &r : T().all)
		n += r->resumes;
	return n;
}

inline void write_truth(FILE *f)
{
	std::lock_guard<std::mutex> g(T().m);
	for (auto &r : T().all) {
		fprintf(f, "{\"id\":\"0x%llx\",\"parent\":\"0x%llx\",\"name\":\"%s\","
			   "\"resumes\":%ld,"
			   "\"nested_returns\":%ld,\"readies\":%ld,\"exited\":%s,\"status\":%d,"
			   "\"suspends\":[",
			(unsigned long long)r->id, (unsigned long long)r->parent, r->name.c_str(),
			r->resumes, r->nested_returns, r->readies, r->exited ? "true" : "false",
			r->status);
		for (size_t i = 0; i < r->suspends.size(); i++)
			fprintf(f, "%s[%d,\"0x%llx\"]", i ? "," : "", r->suspends[i].first,
				(unsigned long long)r->suspends[i].second);
		fprintf(f, "],\"awaiters\":[");
		for (size_t i = 0; i < r->awaiters.size(); i++) {
			/* Demangled as corobpf demangles a symbol: the runtime's demangler. */
			int st = 0;
			char *d = r->awaiters[i] ? abi::__cxa_demangle(r->awaiters[i]->name(),
								     nullptr, nullptr, &st)
						 : nullptr;

			if (r->awaiters[i])
				fprintf(f, "%s\"%s\"", i ? "," : "", d ? d : r->awaiters[i]->name());
			else
				fprintf(f, "%snull", i ? "," : "");
			free(d);
		}
		fprintf(f, "],\"spans\":[");
		for (size_t i = 0; i < r->spans.size(); i++)
			fprintf(f, "%s\"%s\"", i ? "," : "", r->spans[i].c_str());
		fprintf(f, "],\"tids\":[");
		for (size_t i = 0; i < r->tids.size(); i++)
			fprintf(f, "%s%ld", i ? "," : "", r->tids[i]);
		fprintf(f, "]}\n");
	}
}

/*
 * The executor resumes h from its loop or from another body (nested), counting the entry;
 * the thread's running coroutine is the resumer again once h's body returns.
 */
inline void resume(std::coroutine_handle<> h)
{
	std::uint64_t back = running;
	on_enter(addr(h));
	running = addr(h);
	h.resume();
	running = back;
}

/*
 * Every frame's name comes from the function that made it: the promise's first hook is
 * initial_suspend(), whose default argument the compiler evaluates in the coroutine function.
 * The test's table (suite_22_cxx20.py) maps these to the demangled signatures.
 */
struct promise_common {
	std::uint64_t self = 0;

	void created(std::coroutine_handle<> h, const char *fn)
	{
		self = addr(h);
		on_create(self, fn);
	}
};

/* Coroutines nobody joins (spawned tasks, eager ones): the program ends when none is left. */
struct liveness {
	std::mutex m;
	std::condition_variable cv;
	int live = 0;
};

inline liveness &L()
{
	static liveness l;
	return l;
}

inline void detached_begin()
{
	std::lock_guard<std::mutex> g(L().m);
	L().live++;
}

inline void detached_end()
{
	std::lock_guard<std::mutex> g(L().m);
	if (--L().live == 0)
		L().cv.notify_all();
}

/* ---- task<T> ---- */

template <class T> struct task;

template <class T> struct task_promise_value {
	T value{};
	template <class V> void return_value(V &&v) { value = std::forward<V>(v); }
};
template <> struct task_promise_value<void> {
	void return_void() {}
};

template <class T> struct task_promise : promise_common, task_promise_value<T> {
	std::coroutine_handle<> continuation;
	std::uint64_t cont_id = 0;
	bool detached = false;

	task<T> get_return_object();

	std::suspend_always initial_suspend(const char *fn = __builtin_FUNCTION())
	{
		created(std::coroutine_handle<task_promise>::from_promise(*this), fn);
		return {};
	}

	struct final_awaiter {
		bool await_ready() noexcept { return false; }
		std::coroutine_handle<>
		await_suspend(std::coroutine_handle<task_promise> h) noexcept
		{
			task_promise &p = h.promise();
			on_suspend(p.self, CORO_DONE, 0, &typeid(final_awaiter));
			on_exit(p.self, 0);
			if (p.continuation) {
				/* The join ends: transfer back into the parent's body. */
				std::coroutine_handle<> c = p.continuation;
				on_enter(addr(c));
				running = addr(c);
				return c;
			}
			if (p.detached) {
				h.destroy();
				detached_end();
			}
			return std::noop_coroutine();
		}
		void await_resume() noexcept {}
	};

	final_awaiter final_suspend() noexcept
	{
		return {};
	}

	void unhandled_exception() { std::terminate(); }
};

template <class T> struct task {
	using promise = task_promise<T>;
	using promise_type = EX_PROMISE(promise);
	std::coroutine_handle<promise> h;

	explicit task(std::coroutine_handle<promise> h) : h(h) {}
	task(task &&o) noexcept : h(std::exchange(o.h, {})) {}
	task(const task &) = delete;
	~task()
	{
		if (h)
			h.destroy();
	}

	/* co_await child: start it by symmetric transfer; its end transfers back (a join). */
	struct join {
		std::coroutine_handle<promise> child;

		bool await_ready() { return false; }
		std::coroutine_handle<> await_suspend(std::coroutine_handle<> parent)
		{
			on_suspend(addr(parent), CORO_WAIT, addr(child), &typeid(join));
			child.promise().continuation = parent;
			on_enter(addr(child));
			running = addr(child);
			return child;
		}
		T await_resume()
		{
			if constexpr (!std::is_void_v<T>)
				return std::move(child.promise().value);
		}
		int corobpf_reason() const { return CORO_WAIT; }
		std::uintptr_t corobpf_object() const { return addr(child); }
	};

	join operator co_await() & { return {h}; }
	join operator co_await() && { return {h}; }
};

template <class T> task<T> task_promise<T>::get_return_object()
{
	return task<T>(std::coroutine_handle<task_promise>::from_promise(*this));
}

/* ---- generator: values pulled by a direct resume from another body ---- */

struct generator {
	struct promise : promise_common {
		int value = 0;

		generator get_return_object();
		std::suspend_always initial_suspend(const char *fn = __builtin_FUNCTION())
		{
			created(std::coroutine_handle<promise>::from_promise(*this), fn);
			return {};
		}
		std::suspend_always yield_value(int v)
		{
			value = v;
			on_suspend(self, CORO_YIELD, 0, &typeid(std::suspend_always));
			return {};
		}
		struct final_awaiter {
			bool await_ready() noexcept { return false; }
			void await_suspend(std::coroutine_handle<promise> h) noexcept
			{
				on_suspend(h.promise().self, CORO_DONE, 0, &typeid(final_awaiter));
				on_exit(h.promise().self, 0);
			}
			void await_resume() noexcept {}
		};
		final_awaiter final_suspend() noexcept { return {}; }
		void return_void() {}
		void unhandled_exception() { std::terminate(); }
	};
	using promise_type = EX_PROMISE(promise);
	std::coroutine_handle<promise> h;

	explicit generator(std::coroutine_handle<promise> h) : h(h) {}
	generator(generator &&o) noexcept : h(std::exchange(o.h, {})) {}
	generator(const generator &) = delete;
	~generator()
	{
		if (!h)
			return;
		if (!h.done())
			on_exit(h.promise().self, -ECANCELED);
		h.destroy();
	}

	/*
	 * Resume the generator from the running body (a nested resume): that body suspends for
	 * it (a yield, in the adapter's terms), and its body is entered again when the generator
	 * suspends. False once the generator has ended.
	 */
	bool next(int *out)
	{
		std::uint64_t me = running;
		on_suspend(me, CORO_YIELD, 0);
		resume(h);
		on_nested_return(me);
		if (h.done())
			return false;
		*out = h.promise().value;
		return true;
	}
};

inline generator generator::promise::get_return_object()
{
	return generator(std::coroutine_handle<promise>::from_promise(*this));
}

/* ---- eager: runs in its ramp, frees itself at its end ---- */

struct eager {
	struct promise : promise_common {
		eager get_return_object() { return {}; }
		/*
		 * The ramp's first run of the body is counted here: the creator's body is left for
		 * it, and entered again when it first suspends (see spawn_eager).
		 */
		std::suspend_never initial_suspend(const char *fn = __builtin_FUNCTION())
		{
			created(std::coroutine_handle<promise>::from_promise(*this), fn);
			on_enter(self);
			running = self;
			return {};
		}
		struct final_awaiter {
			bool await_ready() noexcept { return false; }
			void await_suspend(std::coroutine_handle<promise> h) noexcept
			{
				on_suspend(h.promise().self, CORO_DONE, 0, &typeid(final_awaiter));
				on_exit(h.promise().self, 0);
				h.destroy();
				detached_end();
			}
			void await_resume() noexcept {}
		};
		final_awaiter final_suspend() noexcept { return {}; }
		void return_void() {}
		void unhandled_exception() { std::terminate(); }
	};
	using promise_type = EX_PROMISE(promise);
};

/* Call an eager coroutine function from a body: its ramp runs it up to its first suspension. */
template <class F> void spawn_eager(F &&f)
{
	std::uint64_t me = running;
	detached_begin();
	on_suspend(me, CORO_YIELD, 0);
	f();
	running = me;
	on_nested_return(me);
}

/* ---- the scheduler ---- */

struct scheduler {
	std::mutex m;
	std::condition_variable cv;
	std::deque<std::coroutine_handle<>> q[2];
	bool stop = false;
	std::thread workers[2];

	static inline thread_local int self = -1;

	void post(std::coroutine_handle<> h, int w)
	{
		on_ready(h);
		{
			std::lock_guard<std::mutex> g(m);
			q[w].push_back(h);
		}
		cv.notify_all();
	}

	void start()
	{
		for (int w = 0; w < 2; w++)
			workers[w] = std::thread([this, w] { loop(w); });
	}

	void loop(int w)
	{
		self = w;
		std::unique_lock<std::mutex> lk(m);
		for (;;) {
			cv.wait(lk, [&] { return stop || !q[w].empty(); });
			if (q[w].empty())
				return;
			std::coroutine_handle<> h = q[w].front();
			q[w].pop_front();
			lk.unlock();
			resume(h);
			lk.lock();
		}
	}

	/* Run t on worker w; its frame is freed when it ends. */
	void spawn(task<void> t, int w)
	{
		auto h = std::exchange(t.h, {});
		h.promise().detached = true;
		detached_begin();
		post(h, w);
	}

	/* Wait until every spawned and eager coroutine has ended, then stop the workers. */
	void wait_all()
	{
		{
			std::unique_lock<std::mutex> lk(L().m);
			L().cv.wait(lk, [] { return L().live == 0; });
		}
		{
			std::lock_guard<std::mutex> g(m);
			stop = true;
		}
		cv.notify_all();
		for (auto &t : workers)
			t.join();
	}

	/* co_await yield(): requeue on this worker. */
	struct yield_aw {
		scheduler *s;
		bool await_ready() { return false; }
		void await_suspend(std::coroutine_handle<> h)
		{
			on_suspend(addr(h), CORO_YIELD, 0, &typeid(yield_aw));
			s->post(h, self);
		}
		void await_resume() {}
		int corobpf_reason() const { return CORO_YIELD; }
	};
	yield_aw yield() { return {this}; }

	/* co_await to(w): continue on worker w. */
	struct to_aw {
		scheduler *s;
		int w;
		bool await_ready() { return false; }
		void await_suspend(std::coroutine_handle<> h)
		{
			on_suspend(addr(h), CORO_YIELD, 0, &typeid(to_aw));
			s->post(h, w);
		}
		void await_resume() {}
		int corobpf_reason() const { return CORO_YIELD; }
	};
	to_aw to(int w) { return {this, w}; }
};

/* A one-shot event: waiters suspend on it (CORO_WAIT, its address) until set(). */
struct event {
	explicit event(scheduler *s) : s(s) {}
	scheduler *s;
	std::mutex m;
	bool is_set = false;
	std::vector<std::pair<std::coroutine_handle<>, int>> waiters;

	void set()
	{
		std::vector<std::pair<std::coroutine_handle<>, int>> w;
		{
			std::lock_guard<std::mutex> g(m);
			is_set = true;
			w.swap(waiters);
		}
		for (auto &[h, worker] : w)
			s->post(h, worker);
	}

	struct aw {
		event *e;
		bool await_ready() { return false; }
		bool await_suspend(std::coroutine_handle<> h)
		{
			/* Recorded first: once queued, another thread may resume it. */
			on_suspend(addr(h), CORO_WAIT, reinterpret_cast<std::uintptr_t>(e),
				   &typeid(aw));
			std::lock_guard<std::mutex> g(e->m);
			if (e->is_set) {
				/* Set meanwhile: through the queue, not `return false`. */
				e->s->post(h, scheduler::self < 0 ? 0 : scheduler::self);
				return true;
			}
			e->waiters.emplace_back(h, scheduler::self < 0 ? 0 : scheduler::self);
			return true;
		}
		void await_resume() {}
		int corobpf_reason() const { return CORO_WAIT; }
		const void *corobpf_object() const { return e; }
	};
	aw operator co_await() { return {this}; }
};

} /* namespace ex */

#endif /* CXX20_EXEC_HPP */
