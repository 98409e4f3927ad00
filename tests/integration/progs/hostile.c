// SPDX-License-Identifier: MIT
/*
 * hostile [--wait] N: the target of the hostile_elf tests, which rewrite its
 * probe notes the way a hostile or broken object would have them, and check
 * that corobpf refuses to attach and that this program's own results stay
 * what they are untraced. It prints
 *
 *     loop: K of N wrong      iterations of a hot loop whose result differs
 *                             from the one computed without the probed code
 *     ro_const: 4242          a constant in .rodata
 *     relro_const: 4242       a constant in .data.rel.ro (read-only once ld.so
 *                             has relocated it)
 *     bss_counter: 0          a .bss word it never writes
 *
 * and exits 1 if anything is not as written above. The loop's probed step
 * is two `add`s with 32-bit immediates, at the global labels hostile_insn
 * (bytes 48 05 50 50 50 50) and hostile_insn90 (48 05 90 90 90 90: the
 * one-byte nop inside an instruction), so that a test can move a site into
 * the middle of either; then at hostile_insn5 a five-byte nop between the
 * stack steps of a COROBPF_NOP5 site, whose step down is not an
 * instruction but the last five bytes of a `movabs` immediate before it
 * (a real step down comes earlier); the three variables are global for the
 * tests to find them by symbol.
 * With --wait it prints "READY <pid>" and waits for SIGUSR1 before the
 * loop (for corobpf -p); the values are read after that, so a semaphore
 * the kernel incremented at attach shows in them.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "corobpf.h"

#if !defined(__x86_64__)
#error "the hostile ELF tests are for x86-64"
#endif

const unsigned short hostile_ro_const = 4242;
/* A pointer makes it need a relocation: .data.rel.ro, written by ld.so, then made read-only. */
const struct relro_const {
	const char *tag;
	unsigned short value;
} hostile_relro_const = { "relro", 4242 };
volatile unsigned short hostile_bss_counter;

#define STEP_IMM 0x50505050UL
#define STEP_IMM90 0xffffffff90909090UL /* $-0x6f6f6f70, sign-extended */
/* Its last five bytes are `lea -128(%rsp),%rsp` (48 8d 64 24 80). */
#define STEP_IMM5 0x8024648d48000000UL

__attribute__((noinline)) static unsigned long step(unsigned long x, unsigned long i)
{
	/*
	 * rax pins the encoding to 48 05 imm32: the immediate starts 2 bytes in,
	 * and its bytes (0x50, push %rax) are an instruction the kernel accepts
	 * to probe, so a uprobe moved there changes the sum instead of failing.
	 */
	__asm__ __volatile__(".globl hostile_insn, hostile_insn90\n"
			     "hostile_insn: addq $0x50505050, %%rax\n"
			     "hostile_insn90: addq $-0x6f6f6f70, %%rax"
			     : "+a"(x));
	/*
	 * A uprobe at the step a five-byte site's note implies (five bytes before
	 * the nop) would land inside the movabs and change its immediate.
	 */
	__asm__ __volatile__(".globl hostile_insn5\n"
			     "lea -128(%%rsp), %%rsp\n"
			     "movabsq $0x8024648d48000000, %%rcx\n"
			     "hostile_insn5: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
			     "lea 128(%%rsp), %%rsp\n"
			     "addq %%rcx, %%rax"
			     : "+a"(x)
			     :
			     : "rcx");
	CORO_PROBE(ready, i);
	return x;
}

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

int main(int argc, char **argv)
{
	unsigned long n, wrong = 0, acc = 0x12345;
	unsigned short ro, relro, bss;
	bool wait = false;

	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		wait = true;
		argv++;
		argc--;
	}
	n = argc > 1 ? strtoul(argv[1], NULL, 0) : 101;
	if (wait) {
		sigset_t mask, old;

		sigemptyset(&mask);
		sigaddset(&mask, SIGUSR1);
		sigprocmask(SIG_BLOCK, &mask, &old);
		signal(SIGUSR1, on_usr1);
		printf("READY %d\n", (int)getpid());
		fflush(stdout);
		while (!go)
			sigsuspend(&old);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	CORO_PROBE(create, 1, 0);
	for (unsigned long i = 0; i < n; i++) {
		unsigned long want = acc + STEP_IMM + STEP_IMM90 + STEP_IMM5;

		acc = step(acc, i);
		if (acc != want) {
			wrong++;
			acc = want;
		}
	}
	CORO_PROBE(exit, 1, 0);
	/* Through volatile pointers: the values in memory, not what the compiler knows. */
	ro = *(const volatile unsigned short *)&hostile_ro_const;
	relro = *(const volatile unsigned short *)&hostile_relro_const.value;
	bss = hostile_bss_counter;
	printf("loop: %lu of %lu wrong\nro_const: %u\nrelro_const: %u\nbss_counter: %u\n", wrong,
	       n, ro, relro, bss);
	return wrong || ro != 4242 || relro != 4242 || bss != 0;
}
