/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Names of code addresses in live (and recently gone) traced processes: the
 * function symbol holding an address, from the object mapped there.
 */
#ifndef COROBPF_ADDRNAMES_H
#define COROBPF_ADDRNAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct goelf_wrapper;

/*
 * The function at `addr` in live process pid, for naming a context by the
 * function it was made to run (QEMU's coroutine entry): "symbol" or
 * "symbol+0xOFF" from the object mapped there, "object+0xVADDR" where it
 * has no symbol (a static function of a stripped binary), else "0xADDR".
 * Cached per (pid, addr) for the run.
 */
void addrname_at(uint32_t pid, uint64_t addr, char *name, size_t len);
/*
 * addrname_at for a goroutine's start (runtime.g.startpc), and in *w
 * how to find the function a `go f(x)` wrapper calls through its closure,
 * with the wrapper's code where the process has it (w->n 0 if the name
 * needs nothing more: goelf.h).
 */
void addrname_goroutine(uint32_t pid, uint64_t addr, char *name, size_t len,
			      struct goelf_wrapper *w);
/* The function holding addr in live process pid, as addrname_at names it, less "+0xOFF". */
void addrname_func_at(uint32_t pid, uint64_t addr, char *name, size_t len);
/*
 * The load bias (address less vaddr) of the last position-independent object of pid in which
 * addrname_at() found a name: to name an address of it once the process is gone.
 */
bool addrname_bias_of(uint32_t pid, uint64_t *bias);
/* Learn that bias for the object at path from pid's mappings now, while it lives. */
void addrname_learn_bias(uint32_t pid, const char *path);
/*
 * addrname_at's name of addr in the executable at path, shown as
 * `shown` ("qemu-img+0x3be50" where it has no symbol), in a process whose
 * executable's code began at start_code (the kernel's mm->start_code):
 * for an address of a process gone by the time it is named. False if addr
 * is not in the executable's code.
 */
bool addrname_in_exe(const char *path, const char *shown, uint64_t start_code,
			   uint64_t addr, char *name, size_t len);

#endif
