// SPDX-License-Identifier: MIT
/*
 * redzone N: a leaf function keeps live data in the 128 bytes below its
 * stack pointer (the x86-64 red zone) across a probe site, N times, and
 * counts the times that data changed. Built with COROBPF_NOP5, whose site
 * the kernel may turn into a call (which pushes below the stack pointer):
 * traced or not, the count must be 0. Each call also fires coroutine
 * 0x700+i through create and exit, so the trace can be checked too.
 * Prints "redzone: K of N clobbered" and exits 1 if K > 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include "corobpf.h"

#if !defined(__x86_64__)
#error "the red zone test is for x86-64"
#endif

__attribute__((noinline)) static long leaf(long v)
{
	long out;

	/* The compiler may keep a leaf's locals there; this does so explicitly. */
	__asm__ __volatile__("movq %[v], -8(%%rsp)\n\t"
			     "movq %[v], -16(%%rsp)\n\t"
			     "movq %[v], -64(%%rsp)\n\t"
			     "movq %[v], -128(%%rsp)" ::[v] "r"(v)
			     : "memory");
	CORO_PROBE(create, v, 0);
	__asm__ __volatile__("movq -8(%%rsp), %[o]\n\t"
			     "xorq -16(%%rsp), %[o]\n\t"
			     "xorq -64(%%rsp), %[o]\n\t"
			     "xorq -128(%%rsp), %[o]"
			     : [o] "=r"(out)::"memory");
	CORO_PROBE(exit, v, 0);
	return out; /* v ^ v ^ v ^ v: 0 when intact */
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, bad = 0;

	for (long i = 0; i < n; i++)
		bad += leaf(0x700 + i) != 0;
	printf("redzone: %ld of %ld clobbered\n", bad, n);
	return bad != 0;
}
