// SPDX-License-Identifier: MIT
/* A static program with no corobpf probes and no context-switch functions. */
#include <stdio.h>

int main(void)
{
	puts("plain");
	return 0;
}
