/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go binaries: what the Go family needs to know of one (docs/go.md).
 *
 * A Go program carries its runtime: runtime.casgstatus is where a
 * goroutine's status changes (switchfam.c plans the uprobe there, as for
 * any family); this module says where the runtime keeps the fields the BPF
 * side reads (struct coro_go_offsets), and where the list of every
 * goroutine is, for the walk at attach (gowalk.h).
 *
 * The offsets come from the binary's DWARF (libdw: the members of
 * runtime.g, runtime.m and runtime.sudog), which `go build` writes unless
 * told not to (-ldflags=-w, or -s); without it, from a table of the
 * releases whose layout is known (goelf_release_known), by the version the
 * binary records in .go.buildinfo. Wait reasons are mapped by their text,
 * read from the binary's runtime.waitReasonStrings (the numbering changes
 * between releases; the texts are what the runtime prints), else by the
 * table's release.
 */
#ifndef COROBPF_GOELF_H
#define COROBPF_GOELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <gelf.h>
#include "coro_abi.h"

struct goelf_info {
	char version[32]; /* "go1.19.8", from .go.buildinfo; "" if not found */
	struct coro_go_offsets offs;
	bool from_dwarf;	/* offsets from the binary's DWARF (else the release table) */
	bool reasons_by_text;	/* wait reasons from its waitReasonStrings (else the table) */
	/* For the walk at attach (vaddrs; 0 if the symbol is missing). */
	uint64_t allgs;		/* runtime.allgs: a []*g (pointer, length, capacity) */
	uint16_t g_status;	/* runtime.g.atomicstatus (uint32) */
	uint16_t m_procid;	/* runtime.m.procid (uint64: the thread id on Linux) */
	/*
	 * A parked goroutine's saved context, runtime.g.sched (a gobuf): its
	 * pc, sp and frame pointer, offsets in runtime.g (for its stack), and
	 * the closure a goroutine that has not run yet starts with (its name).
	 */
	uint16_t g_sched_pc, g_sched_sp, g_sched_bp, g_sched_ctxt;
	bool pie;		/* ET_DYN: vaddrs move by the load bias */
	uint64_t phdr_vaddr;	/* PT_PHDR's vaddr: with AT_PHDR, the load bias of a PIE */
};

/*
 * Read what the Go family needs from the Go binary at `path`. 0, or a
 * negative errno with a message in err (not naming the path: the caller
 * knows how to show it) naming the release and what to do (-ENOTSUP:
 * neither DWARF nor a known release).
 */
int goelf_read(const char *path, struct goelf_info *gi, char *err, size_t errlen);

/*
 * Functions by Go's own table (.gopclntab, which `go build -ldflags=-s`
 * keeps: the runtime needs it for tracebacks), for binaries without a
 * symbol table. Go 1.18 and later's layout. False if elf has none or the
 * name is not there.
 */
bool goelf_func_by_name(Elf *elf, const char *name, uint64_t *vaddr, uint64_t *size);

/*
 * The function of a Go binary at vaddr, as a goroutine's name: "pkg.fn",
 * or "pkg.fn+0xOFF" inside one, as Go's own traceback names the goroutine:
 * a closure of the program is "pkg.fn.funcN"; a `go f(x)` statement starts
 * the goroutine in a closure the compiler made ("main.main.func3", marked
 * in the table as a wrapper, which tracebacks leave out) that calls f:
 * named after f when it calls f directly. runtime.main, the main
 * goroutine's, is "main", the name of every family's main context. False
 * if elf is not a Go binary or nothing is there.
 */
bool goelf_func_at(Elf *elf, uint64_t vaddr, char *name, size_t len);

/* The most loads a wrapper makes from its closure to the function it calls. */
#define GOELF_WRAPPER_LOADS 4

/*
 * A `go f(x)` wrapper that calls f through its closure (f a function value,
 * or a closure called with arguments: `go func(i int) {...}(i)`): f's code
 * address is the word at (... the word at (ctxt + off[0]) ...) + off[n-1],
 * ctxt the closure the goroutine started with (runtime.g.sched.ctxt, until
 * it first runs). n is 0 for any other function.
 */
struct goelf_wrapper {
	uint64_t entry, end; /* the wrapper's code (vaddrs) */
	uint32_t n;
	int32_t off[GOELF_WRAPPER_LOADS];
};

/*
 * goelf_func_at, and in *w how to find f when the name is a wrapper's that
 * calls f through its closure (w->n > 0): name it then by
 * goelf_wrapper_target() or goelf_wrapper_callee(). 1 if named, 0 if not
 * (as goelf_func_at's false).
 */
int goelf_goroutine_start(Elf *elf, uint64_t vaddr, char *name, size_t len,
			  struct goelf_wrapper *w);

/* A word of the target's memory (or of a copy of it) at addr; false if it cannot be read. */
typedef bool (*goelf_read_fn)(void *ctx, uint64_t addr, uint64_t *word);

/* f's code address (as the process sees it) from the closure ctxt, through read; 0 if unknown. */
uint64_t goelf_wrapper_target(const struct goelf_wrapper *w, uint64_t ctxt, goelf_read_fn read,
			      void *rctx);

/*
 * Once it ran: an address in f from the goroutine's stack, frames[0] where
 * it was left (g.sched.pc) and then its frames' return addresses, innermost
 * first (w's entry and end in the same terms: as the process sees them):
 * the frame the wrapper called. 0 if the wrapper is not among them.
 */
uint64_t goelf_wrapper_callee(const struct goelf_wrapper *w, const uint64_t *frames, uint32_t n);

/*
 * goelf_goroutine_start on the Go binary at path (a PIE's vaddr: the
 * address less its load bias; w may be NULL), for a name needed after the
 * process is gone. False if it cannot say.
 */
bool goelf_func_at_path(const char *path, uint64_t vaddr, char *name, size_t len,
			struct goelf_wrapper *w);

/*
 * Go's function table of one binary, opened once for many look-ups: how the
 * stack symbolizer names the frames of a Go binary without a symbol table
 * (stacks.h). It points into elf's data: free it before elf is closed.
 * NULL if elf has no table of a layout goelf reads.
 */
struct goelf_funcs;
struct goelf_funcs *goelf_funcs_open(Elf *elf);

/*
 * The function holding vaddr, as the table names it ("main.main.func3": a
 * frame is the code it runs, not the goroutine's name of goelf_func_at),
 * and *off, vaddr less its entry. NULL if no function of the table holds it.
 */
const char *goelf_funcs_at(const struct goelf_funcs *t, uint64_t vaddr, uint64_t *off);
void goelf_funcs_free(struct goelf_funcs *t);

/* The corobpf reason of a Go wait reason's text ("chan receive" -> CORO_R_WAIT). */
uint8_t goelf_reason_of(const char *text);

/* The releases the table covers, for messages and docs ("go1.19"). */
const char *goelf_releases_known(void);

#endif
