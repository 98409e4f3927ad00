/* SPDX-License-Identifier: MIT */
/*
 * corobpf_coro.hpp: the probes of corobpf.h fired by a C++20 coroutine task library, from its
 * promise type, with one line changed. C++20, header-only, g++ 12 and clang++ 14 and later.
 *
 * corobpf is to trace C++20 coroutines without any change to the program (issue 16: ids the
 * frame addresses, names the coroutine functions). This header adds what the binary does not
 * show: why each coroutine suspended and on what (a join, a channel, a timer), and exact
 * creation parents. Wrap the library's promise type:
 *
 *     #include "corobpf_coro.hpp"
 *
 *     template <class T> struct task {
 *             struct promise { ... };                         // the library's own promise
 *             using promise_type = corobpf::traced<promise>;  // the one line
 *             ...
 *     };
 *
 * traced<P> derives from P (so P's members, constructors and handles keep working) and
 * adds the hooks below; nothing else of the library changes.
 *
 * WHAT IT FIRES (probes of usdt/corobpf.h; the id of a coroutine is its frame address,
 * std::coroutine_handle<>::address(), the same id corobpf gives it without the adapter)
 *
 *   create(id, parent), name(id, fn)
 *	In initial_suspend(), which the ramp (the function the caller calls) runs. `parent` is
 *	the adapted coroutine running on this thread then, or 0. `fn` is the coroutine
 *	function's unqualified name (__builtin_FUNCTION() at the call the compiler makes), a
 *	string literal.
 *   switch(running, id, CORO_YIELD or 0, 0)
 *	When the body is entered: its first run (right in the ramp if initial_suspend does not
 *	suspend) and every resume. `running` is the adapted coroutine that was on the thread
 *	(one resuming another directly: a nested resume) or 0 (an executor's loop).
 *   switch(id, back, reason, obj)
 *	When the body leaves at a co_await or co_yield that suspends, before the awaiter's
 *	await_suspend runs (once it has run, another thread may already resume the coroutine).
 *	`back` is whoever entered it, which the thread runs again; a symmetric transfer to
 *	another coroutine follows as that coroutine's switch in from `back`.
 *   exit(id, status)
 *	In final_suspend(): status 0, or -1 if the body ended by an exception
 *	(unhandled_exception() was called); then switch(id, back, CORO_DONE, 0). A coroutine
 *	destroyed before its final suspension exits in the promise's destructor with
 *	-ECANCELED.
 *
 *   ready(id), span_begin(str), span_end(str)
 *	Not from the promise: where the library queues a coroutine, corobpf::ready(handle)
 *	(one nop, as CORO_PROBE(ready)); around a region of a body, a corobpf::span named by
 *	a string that outlives it (begins where constructed, ends where destroyed, across
 *	suspensions).
 *
 * REASONS AND OBJECTS
 *	Every co_await goes through traced<P>::await_transform (after P's own, if it has one),
 *	which wraps the awaiter. An awaiter says why its coroutine waits with two optional
 *	members:
 *
 *	    int corobpf_reason() const;            // CORO_YIELD, CORO_WAIT, CORO_SLEEP, CORO_IO
 *	    std::uintptr_t corobpf_object() const; // what it waits on (a pointer, an fd), or 0
 *
 *	(the object may also be returned as a pointer). Without them: std::suspend_always and
 *	any co_yield are CORO_YIELD, everything else CORO_WAIT on object 0. A task library
 *	gives its join awaiter CORO_WAIT and the child's frame address, its scheduling awaiter
 *	CORO_YIELD, its channel CORO_WAIT and the channel's address.
 *
 * COST
 *	Not traced: each hook (the first run, every suspension and resume, the end) is a load
 *	of a probe semaphore and a branch not taken, as the string probes of corobpf.h; no
 *	thread-local is touched and no argument evaluated. Each frame grows by 16 bytes.
 *	Traced: one probe hit per switch, as corobpf.h; the create and name probes once per
 *	coroutine. COROBPF_DISABLE compiles the hooks away as it does the probes.
 *
 *	COROBPF_CORO_ON_TRACED(), if defined before including this header, is evaluated in
 *	every traced branch, and only there: the integration tests count with it that an
 *	untraced run takes none (tests/integration/suite_22_cxx20.py).
 *
 * LIMITS
 *	- A tracer attaching while coroutines are in flight sees each of them from its next
 *	  resume on; one detaching leaves the frames it saw running consistent.
 *	- An await_suspend() returning false (do not suspend after all) shows as a suspension
 *	  and an immediate resume, since the switch out fires before await_suspend runs.
 *	- A frame whose promise is aligned beyond 16 bytes breaks
 *	  coroutine_handle<P>::from_promise inside P (traced<P> is the frame's promise).
 *	- The hooks assume the compiler calls initial_suspend, final_suspend and the promise's
 *	  await_transform and yield_value, which C++20 guarantees; a library that resumes its
 *	  coroutines without these being called (none standard) is not seen.
 */
#ifndef COROBPF_CORO_HPP
#define COROBPF_CORO_HPP

#if __cplusplus < 202002L
#error "corobpf_coro.hpp needs C++20 (-std=c++20)"
#endif

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "corobpf.h"

#ifndef COROBPF_CORO_ON_TRACED
#define COROBPF_CORO_ON_TRACED() ((void)0)
#endif

namespace corobpf {

namespace detail {

/* The adapted coroutine whose body runs on this thread, 0 for none (read only when traced). */
inline thread_local std::uint64_t running = 0;

enum class point { initial, body, yield, final };

template <class T> constexpr std::uint64_t to_u64(T v)
{
	if constexpr (std::is_pointer_v<T>)
		return reinterpret_cast<std::uintptr_t>(v);
	else
		return static_cast<std::uint64_t>(v);
}

/* The awaiter of `co_await e` as the language finds it: member, then free operator co_await. */
template <class T> decltype(auto) awaiter_of(T &&t)
{
	if constexpr (requires { std::forward<T>(t).operator co_await(); })
		return std::forward<T>(t).operator co_await();
	else if constexpr (requires { operator co_await(std::forward<T>(t)); })
		return operator co_await(std::forward<T>(t));
	else
		return std::forward<T>(t);
}

template <class A> int reason_of(const A &a, point at)
{
	if constexpr (requires { a.corobpf_reason(); })
		return a.corobpf_reason();
	else if (at == point::yield || std::is_same_v<std::remove_cvref_t<A>, std::suspend_always>)
		return CORO_YIELD;
	else
		return CORO_WAIT;
}

template <class A> std::uint64_t object_of(const A &a)
{
	if constexpr (requires { a.corobpf_object(); })
		return to_u64(a.corobpf_object());
	else
		return 0;
}

} /* namespace detail */

/* The coroutine of h became runnable: call it where the library puts h on a run queue. */
inline void ready(std::coroutine_handle<> h) noexcept
{
	CORO_PROBE(ready, detail::to_u64(h.address()));
}

/* A named region of the running coroutine, open while this object lives. */
class span {
public:
	explicit span(const char *name) noexcept : name_(name)
	{
		CORO_PROBE(span_begin, name_);
	}
	~span()
	{
		CORO_PROBE(span_end, name_);
	}
	span(const span &) = delete;
	span &operator=(const span &) = delete;

private:
	const char *name_;
};

template <class P> struct traced : P {
	using P::P;

	traced() = default;
	traced(const traced &) = delete;
	traced &operator=(const traced &) = delete;

	/* Exit of a coroutine destroyed before its final suspension: cancelled. */
	~traced()
	{
		if (!exited_ && CORO_PROBE_ENABLED(exit)) {
			COROBPF_CORO_ON_TRACED();
			CORO_PROBE(exit, id(), -ECANCELED);
		}
	}

	std::uint64_t id() noexcept
	{
		return detail::to_u64(std::coroutine_handle<traced>::from_promise(*this).address());
	}

	/*
	 * The wrapped awaiter. A is a reference to an lvalue operand (the program owns it
	 * across the suspension), else a value moved in: an rvalue may be a temporary of
	 * initial_suspend() or final_suspend(), gone when they return.
	 */
	template <class A, detail::point At> struct awaiter {
		A aw;
		traced *self;

		/* A final awaiter's calls must not throw (C++20), so neither do ours then. */
		static constexpr bool final = At == detail::point::final;

		bool await_ready() noexcept(final)
		{
			bool ready = aw.await_ready();
			/* A final awaiter that does not suspend: the body ends here. */
			if (At == detail::point::final && ready)
				self->leave(CORO_DONE, 0);
			return ready;
		}

		template <class H> auto await_suspend(H h) noexcept(final)
		{
			/* Before the awaiter runs: from then on another thread may resume us. */
			if constexpr (At == detail::point::final)
				self->leave(CORO_DONE, 0);
			else if constexpr (At != detail::point::initial)
				self->leave(detail::reason_of(aw, At), detail::object_of(aw));
			using R = decltype(aw.await_suspend(pass(h)));
			if constexpr (std::is_same_v<R, bool>) {
				bool suspend = aw.await_suspend(pass(h));
				if (!suspend)
					self->enter();
				return suspend;
			} else {
				return aw.await_suspend(pass(h));
			}
		}

		decltype(auto) await_resume() noexcept(final)
		{
			self->enter();
			return aw.await_resume();
		}

		/* The handle the awaiter takes: ours, the library's promise's, or a plain one. */
		template <class H> auto pass(H h)
		{
			using library_handle = std::coroutine_handle<P>;

			if constexpr (requires { aw.await_suspend(h); })
				return h;
			else if constexpr (requires(library_handle l) { aw.await_suspend(l); })
				return library_handle::from_address(h.address());
			else
				return std::coroutine_handle<>(h);
		}
	};

	template <detail::point At, class T> auto wrap(T &&t)
	{
		using R = decltype(detail::awaiter_of(std::forward<T>(t)));
		using A = std::conditional_t<std::is_lvalue_reference_v<R>, R,
					     std::remove_cvref_t<R>>;
		return awaiter<A, At>{detail::awaiter_of(std::forward<T>(t)), this};
	}

	/*
	 * Called by the ramp. The default argument is evaluated where the compiler calls this,
	 * in the coroutine function: its name.
	 */
	auto initial_suspend(const char *fn = __builtin_FUNCTION())
	{
		if (CORO_PROBE_ENABLED(create)) {
			COROBPF_CORO_ON_TRACED();
			CORO_PROBE(create, id(), detail::running);
			CORO_PROBE(name, id(), fn);
		}
		/* A promise that names its frames itself may take the name too. */
		if constexpr (requires(P &p) { p.initial_suspend(fn); })
			return wrap<detail::point::initial>(P::initial_suspend(fn));
		else
			return wrap<detail::point::initial>(P::initial_suspend());
	}

	auto final_suspend() noexcept
	{
		exited_ = true;
		if (CORO_PROBE_ENABLED(exit)) {
			COROBPF_CORO_ON_TRACED();
			CORO_PROBE(exit, id(), failed_ ? -1 : 0);
		}
		return wrap<detail::point::final>(P::final_suspend());
	}

	void unhandled_exception()
	{
		failed_ = true;
		P::unhandled_exception();
	}

	template <class T> auto await_transform(T &&t)
	{
		if constexpr (requires(P &p) { p.await_transform(std::forward<T>(t)); })
			return wrap<detail::point::body>(P::await_transform(std::forward<T>(t)));
		else
			return wrap<detail::point::body>(std::forward<T>(t));
	}

	template <class V>
	auto yield_value(V &&v)
		requires requires(P &p) { p.yield_value(std::forward<V>(v)); }
	{
		return wrap<detail::point::yield>(P::yield_value(std::forward<V>(v)));
	}

	/*
	 * The body is entered. on_ says whether this entry was seen traced: a suspension is
	 * reported only for such an entry, so that the thread's running coroutine stays right
	 * whatever a tracer attaches or detaches in between.
	 */
	void enter() noexcept
	{
		if (!CORO_PROBE_ENABLED(switch) || on_)
			return;
		COROBPF_CORO_ON_TRACED();
		back_ = detail::running;
		detail::running = id();
		on_ = true;
		CORO_PROBE(switch, back_, detail::running, back_ ? CORO_YIELD : CORO_UNKNOWN, 0);
	}

	void leave(int reason, std::uint64_t obj) noexcept
	{
		if (!on_)
			return;
		COROBPF_CORO_ON_TRACED();
		on_ = false;
		detail::running = back_;
		CORO_PROBE(switch, id(), back_, reason, obj);
	}

private:
	std::uint64_t back_ = 0;
	bool on_ = false, exited_ = false, failed_ = false;
};

} /* namespace corobpf */

#endif /* COROBPF_CORO_HPP */
