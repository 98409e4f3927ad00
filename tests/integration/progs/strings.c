// SPDX-License-Identifier: MIT
/*
 * String arguments the probe header must get right:
 *   0x51  a name built byte by byte in a stack buffer (dead-store elimination
 *         would drop all but what the compiler thinks is read)
 *   0x52  a name formatted by snprintf into a stack buffer
 *   0x53  a literal from a page this program never reads otherwise
 *   0x54  a NULL name: no crash, an unreadable (empty) name, counted
 *   span "stack-span" built in a stack buffer, opened and closed
 */
#include <stdio.h>
#include "corobpf.h"

__attribute__((noinline)) static void name_bytes(unsigned long id)
{
	char buf[16];

	buf[0] = 'b';
	buf[1] = 'y';
	buf[2] = 't';
	buf[3] = 'e';
	buf[4] = 's';
	buf[5] = 0;
	CORO_PROBE(name, id, buf);
}

__attribute__((noinline)) static void name_fmt(unsigned long id, int n)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "fmt-%d", n);
	CORO_PROBE(name, id, buf);
}

__attribute__((noinline)) static void span_stack(void)
{
	char buf[16] = "stack-span";

	CORO_PROBE(span_begin, buf);
	CORO_PROBE(span_end, buf);
}

int main(void)
{
	static const char far_literal[] __attribute__((aligned(4096))) = "far-literal";
	const char *nil = NULL;

	CORO_PROBE(create, 0x51, 0);
	name_bytes(0x51);
	CORO_PROBE(create, 0x52, 0);
	name_fmt(0x52, 42);
	CORO_PROBE(create, 0x53, 0);
	CORO_PROBE(name, 0x53, far_literal);
	CORO_PROBE(create, 0x54, 0);
	CORO_PROBE(name, 0x54, nil);
	span_stack();
	return 0;
}
