// SPDX-License-Identifier: MIT
/*
 * ldhwcaps.c: the CPU-dependent parts of ld.so's search, as glibc 2.36's x86
 * rules make them (ldhwcaps.h).
 */
#include <cpuid.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "ldhwcaps.h"

#define LD_DEFAULT_PLATFORM	"x86_64"

/* The CPUID bits glibc 2.36 looks at for hwcap subdirectories and $PLATFORM. */
struct cpu_caps {
	bool intel;
	bool v2, v3, v4;	/* x86-64 psABI levels, as glibc-hwcaps uses them */
	bool avx512cd, avx512er, avx512pf, avx512_1;
	bool haswell;		/* glibc's "haswell" platform features */
};

/*
 * Read CPUID ourselves rather than through __builtin_cpu_supports(): clang
 * 14 knows neither the level names nor lzcnt and movbe. Like glibc, count an
 * AVX or AVX-512 feature only when the kernel saves its register state
 * (XCR0), since ld.so would not consider it usable otherwise.
 */
static void cpu_caps_read(struct cpu_caps *c)
{
	unsigned int a, b, cx, d, ecx1 = 0, ebx7 = 0, ecx_ext = 0, xcr0 = 0, xcr0_hi;
	bool avx_os = false, avx512_os = false, avx, avx2, fma, f16c, avx512;

	memset(c, 0, sizeof(*c));
	if (!__get_cpuid(0, &a, &b, &cx, &d))
		return;
	/* "GenuineIntel" in EBX, EDX, ECX */
	c->intel = b == 0x756e6547 && d == 0x49656e69 && cx == 0x6c65746e;
	if (a >= 1 && __get_cpuid(1, &a, &b, &ecx1, &d) && (ecx1 & (1u << 27))) {
		__asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
		avx_os = (xcr0 & 0x6) == 0x6;
		avx512_os = avx_os && (xcr0 & 0xe0) == 0xe0;
	}
	__get_cpuid_count(7, 0, &a, &ebx7, &cx, &d);
	__get_cpuid(0x80000001, &a, &b, &ecx_ext, &d);

#define BIT(reg, n) (((reg) >> (n)) & 1)
	avx = avx_os && BIT(ecx1, 28);
	avx2 = avx && BIT(ebx7, 5);
	fma = avx && BIT(ecx1, 12);
	f16c = avx && BIT(ecx1, 29);
	avx512 = avx512_os && BIT(ebx7, 16);
	c->v2 = BIT(ecx1, 0) && BIT(ecx1, 9) && BIT(ecx1, 13) && BIT(ecx1, 19) &&
		BIT(ecx1, 20) && BIT(ecx1, 23) && BIT(ecx_ext, 0);
	c->v3 = c->v2 && avx && avx2 && fma && f16c && BIT(ebx7, 3) && BIT(ebx7, 8) &&
		BIT(ecx_ext, 5) && BIT(ecx1, 22);
	c->avx512cd = avx512 && BIT(ebx7, 28);
	c->avx512er = avx512 && BIT(ebx7, 27);
	c->avx512pf = avx512 && BIT(ebx7, 26);
	c->avx512_1 = c->avx512cd && BIT(ebx7, 30) && BIT(ebx7, 17) && BIT(ebx7, 31);
	c->v4 = c->v3 && avx512 && c->avx512_1;
	c->haswell = avx2 && fma && BIT(ebx7, 3) && BIT(ebx7, 8) && BIT(ecx_ext, 5) &&
		     BIT(ecx1, 22) && BIT(ecx1, 23);
#undef BIT
}

void ld_hwcaps_init(struct ld_hwcaps *st)
{
	const char *elems[4];
	const char *platform = NULL;
	bool avx512_1 = false;
	struct cpu_caps c;
	int k = 0, mask, j;

	/* glibc's x86 rules: only Intel CPUs get a platform other than AT_PLATFORM's. */
	cpu_caps_read(&c);
	if (c.intel && c.avx512cd) {
		if (c.avx512er) {
			if (c.avx512pf)
				platform = "xeon_phi";
		} else {
			avx512_1 = c.avx512_1;
		}
	}
	if (c.intel && !platform && c.haswell)
		platform = "haswell";
	snprintf(st->platform, sizeof(st->platform), "%s",
		 platform ? platform : LD_DEFAULT_PLATFORM);

	st->n_subdirs = 0;
	if (c.v4)
		strcpy(st->subdirs[st->n_subdirs++], "glibc-hwcaps/x86-64-v4/");
	if (c.v3)
		strcpy(st->subdirs[st->n_subdirs++], "glibc-hwcaps/x86-64-v3/");
	if (c.v2)
		strcpy(st->subdirs[st->n_subdirs++], "glibc-hwcaps/x86-64-v2/");

	/* Legacy: hwcap names in bit order (x86_64 is bit 1, avx512_1 bit 2). */
	elems[k++] = "tls";
	elems[k++] = "x86_64";
	if (avx512_1)
		elems[k++] = "avx512_1";
	elems[k++] = st->platform;
	for (mask = (1 << k) - 1; mask >= 0; mask--) {
		char *d = st->subdirs[st->n_subdirs++];

		d[0] = '\0';
		for (j = 0; j < k; j++) {
			if (mask & (1 << (k - 1 - j))) {
				strcat(d, elems[j]);
				strcat(d, "/");
			}
		}
	}
}
