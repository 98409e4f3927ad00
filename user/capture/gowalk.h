/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go, -p: the goroutines alive when corobpf attached, read from the
 * process's memory after the uprobe on casgstatus is in place (so a change
 * made meanwhile is seen by the probe, and user/model/gomodel.c keeps the
 * newer of the two).
 *
 * runtime.allgs is a []*g of every goroutine the program ever made (dead
 * ones are kept for reuse). It is read with process_vm_readv: only the
 * process's memory, through no path; every pointer in it is the target's
 * and is only ever read through the same call, so a lying or changing
 * target gives wrong goroutines at worst, never a read of anything else.
 * The slice's length is bounded, and goroutines are read one by one.
 */
#ifndef COROBPF_GOWALK_H
#define COROBPF_GOWALK_H

#include "goelf.h"
#include "raw.h"

/* The most goroutines one walk reports (the rest are seen when they next change). */
#define GOWALK_MAX (1u << 20)

/*
 * The live goroutines of process pid (its binary described by gi), as
 * CORO_REC_GO_G records stamped now, into *out (malloc'd). Returns how
 * many, or a negative errno (the process gone, its memory not readable).
 */
int gowalk_process(u32 pid, const struct goelf_info *gi, struct coro_rec_go_g **out);

#endif
