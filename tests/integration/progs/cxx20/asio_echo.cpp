/* SPDX-License-Identifier: MIT */
/*
 * asio_echo: Boost.Asio C++20 coroutines (co_spawn, awaitable, steady_timer) doing a TCP echo
 * over 127.0.0.1 on an ephemeral port, on two threads running one io_context; traced
 * unmodified by suite_22_cxx20.py.
 *
 *     asio_echo [CLIENTS [MESSAGES]]     counters to $COROBPF_TRUTH
 *
 * Its own counters, per coroutine function of this file: how many ran (one per frame: each
 * counts itself when its body starts) and how many times their bodies were entered: the start,
 * then once after each co_await of an awaitable (every one suspends: asio's awaitable is never
 * ready, the thread's pump resumes the body when the awaited frame ends). A co_await of
 * this_coro::executor does not suspend and is not counted. Asio's own coroutines (co_spawn's
 * entry point, the initiation of each asynchronous operation) are not in the counters. No
 * coroutine here resumes another from its body (see listener), so every switch in of one of
 * these coroutines is one of the counted entries.
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <boost/asio.hpp>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

struct counter {
	const char *fn;
	std::atomic<long> ran{0}, resumes{0};
};

static counter c_listener{"listener"}, c_session{"echo_session"}, c_client{"client"},
	c_roundtrip{"roundtrip"}, c_ticker{"ticker"};

enum { MSG = 32 };

static awaitable<void> echo_session(tcp::socket s, int messages)
{
	c_session.ran++;
	c_session.resumes++;
	char buf[MSG];
	for (int i = 0; i < messages; i++) {
		co_await asio::async_read(s, asio::buffer(buf), use_awaitable);
		c_session.resumes++;
		co_await asio::async_write(s, asio::buffer(buf), use_awaitable);
		c_session.resumes++;
	}
}

static awaitable<void> listener(tcp::acceptor &acc, int clients, int messages)
{
	c_listener.ran++;
	c_listener.resumes++;
	auto ex = co_await asio::this_coro::executor;
	for (int i = 0; i < clients; i++) {
		tcp::socket s = co_await acc.async_accept(use_awaitable);
		c_listener.resumes++;
		/*
		 * co_spawn runs the new coroutine thread at once, up to its first suspension: from
		 * here that would be a nested resume, which hands the thread back to this body
		 * (a switch in that no co_await of ours counts). From a handler it is not.
		 */
		asio::post(ex, [ex, s = std::move(s), messages]() mutable {
			asio::co_spawn(ex, echo_session(std::move(s), messages), asio::detached);
		});
	}
}

/* One message out and its echo back, awaited by the client: a child awaitable. */
static awaitable<int> roundtrip(tcp::socket &s, int i)
{
	c_roundtrip.ran++;
	c_roundtrip.resumes++;
	char out[MSG], in[MSG];
	memset(out, 'a' + i % 26, sizeof(out));
	co_await asio::async_write(s, asio::buffer(out), use_awaitable);
	c_roundtrip.resumes++;
	co_await asio::async_read(s, asio::buffer(in), use_awaitable);
	c_roundtrip.resumes++;
	co_return memcmp(in, out, sizeof(in)) == 0;
}

static std::atomic<long> echoed{0};

static awaitable<void> client(tcp::endpoint at, int messages)
{
	c_client.ran++;
	c_client.resumes++;
	auto ex = co_await asio::this_coro::executor;
	tcp::socket s(ex);
	co_await s.async_connect(at, use_awaitable);
	c_client.resumes++;
	asio::steady_timer t(ex);
	for (int i = 0; i < messages; i++) {
		echoed += co_await roundtrip(s, i);
		c_client.resumes++;
		if (i % 4 == 3) {
			t.expires_after(std::chrono::microseconds(200));
			co_await t.async_wait(use_awaitable);
			c_client.resumes++;
		}
	}
}

static awaitable<void> ticker(int ticks)
{
	c_ticker.ran++;
	c_ticker.resumes++;
	asio::steady_timer t(co_await asio::this_coro::executor);
	for (int i = 0; i < ticks; i++) {
		t.expires_after(std::chrono::milliseconds(1));
		co_await t.async_wait(use_awaitable);
		c_ticker.resumes++;
	}
}

int main(int argc, char **argv)
{
	int clients = argc > 1 ? atoi(argv[1]) : 4;
	int messages = argc > 2 ? atoi(argv[2]) : 10;
	asio::io_context ctx;
	tcp::acceptor acc(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
	tcp::endpoint at = acc.local_endpoint();

	asio::co_spawn(ctx, listener(acc, clients, messages), asio::detached);
	for (int i = 0; i < clients; i++)
		asio::co_spawn(ctx, client(at, messages), asio::detached);
	asio::co_spawn(ctx, ticker(5), asio::detached);
	std::thread second([&] { ctx.run(); });
	ctx.run();
	second.join();

	printf("port %u echoed %ld of %d\n", at.port(), echoed.load(), clients * messages);
	const char *truth = getenv("COROBPF_TRUTH");
	if (truth) {
		FILE *f = fopen(truth, "w");
		if (!f) {
			perror(truth);
			return 1;
		}
		for (counter *c : {&c_listener, &c_session, &c_client, &c_roundtrip, &c_ticker})
			fprintf(f, "{\"fn\":\"%s\",\"ran\":%ld,\"resumes\":%ld}\n", c->fn,
				c->ran.load(),
				c->resumes.load());
		fclose(f);
	}
	return echoed == clients * messages ? 0 : 2;
}
