/* SPDX-License-Identifier: MIT */
/*
 * sitebounds.h: whether each probe site of an object starts an instruction.
 *
 * A probe note says where the kernel puts its breakpoint. The bytes there
 * can be our SDK's nop (elfnotes.c checks that) and still be the middle of
 * another instruction: a 0x90 inside an immediate, say. A breakpoint there
 * rewrites that instruction, and the program computes something else. So
 * each site is decoded to from the start of the function that holds it
 * (user/elf/x86dec.c), a straight sweep, as a compiler lays a function
 * out: the site must be where an instruction begins.
 *
 * The function comes from what the object says of itself: its symbol
 * tables (.symtab, .dynsym: a function symbol with a size) and its unwind
 * table (.eh_frame: the FDE that covers the site). Every start they give
 * is decoded from, the earliest function symbol that holds the site and
 * the FDE's; each must reach the site on an instruction boundary. Where
 * neither holds it (assembly written without .size or CFI), the nearest
 * label before it (a code symbol without a size) is its start. A site none
 * of these places cannot be checked, and is refused: every object a C or
 * C++ compiler builds for x86-64 has unwind tables unless built with
 * -fno-asynchronous-unwind-tables, and `strip` keeps them.
 *
 * What the check trusts: an object forged to say that a function starts
 * at the site itself (a false symbol, a false FDE, with the true ones
 * removed) passes it. It stops a site moved into an instruction, which is
 * what a stale or hand-edited note does.
 *
 * Reading is bounded: the symbol tables are streamed (and skipped past
 * ELF_READ_MAX bytes), the unwind tables are read whole only up to
 * ELF_READ_MAX, and at most SITE_BOUNDS_DECODE_MAX bytes of code are
 * decoded per object, whatever the counts the object claims.
 */
#ifndef COROBPF_SITEBOUNDS_H
#define COROBPF_SITEBOUNDS_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of code decoded for one object at most: 16 MiB, a hundred times any function. */
#define SITE_BOUNDS_DECODE_MAX (16ULL << 20)

/* A site that is not (or cannot be shown to be) an instruction's start: `why` says which. */
typedef void (*site_bounds_fn)(void *ctx, size_t idx, const char *why);

/*
 * Check the sites pcs[0..n) (addresses in the object, as libbpf probes
 * them) of the object open as elf on fd. `bad` is called for each site
 * that fails, with its index in pcs and the reason ("is inside the
 * instruction at 0x1234 (bytes 48 05 90 90 90 90) of function step,
 * decoded from its start at 0x1220"), in ascending address order. Returns
 * the number of such sites.
 */
size_t site_bounds_check(Elf *elf, int fd, const uint64_t *pcs, size_t n, site_bounds_fn bad,
			 void *ctx);

#endif /* COROBPF_SITEBOUNDS_H */
