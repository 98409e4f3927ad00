// SPDX-License-Identifier: MIT
/*
 * A shared library whose constructor fires probes: ld.so runs it before the
 * program's main, so only a tracer attached before the first instruction
 * sees them. Built twice: libearly.so (linked) and libdlprobe.so (dlopened).
 */
#include "corobpf.h"

#ifndef CTOR_ID
#define CTOR_ID 0xe1
#define CTOR_NAME "lib-ctor"
#endif

__attribute__((constructor)) static void early_lib_ctor(void)
{
	CORO_PROBE(create, CTOR_ID, 0);
	CORO_PROBE(name, CTOR_ID, CTOR_NAME);
}

void early_lib_fire(unsigned long id, unsigned long parent)
{
	CORO_PROBE(create, id, parent);
	CORO_PROBE(exit, id, 0);
}
