// SPDX-License-Identifier: MIT
/* The library half of tests/integration/progs/stacks.c: a parking function in a .so. */
#include "corosched.h"

__attribute__((noinline)) void lib_park_here(unsigned us)
{
	co_sleep_us(us);
	__asm__ volatile("" ::: "memory");
}
