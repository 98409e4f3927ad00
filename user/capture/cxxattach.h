/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cxxattach.h: C++20 coroutines of unmodified programs, attached
 * (docs/cxx20.md). attach.c calls it for every object it examines, in
 * every mode (-p, a launch, --follow, -a, objects loaded later), next to
 * the USDT probes and independently of the switch-function path: a
 * program may have both.
 *
 * Each object with coroutine bodies gets one uprobe_multi link in session
 * mode (kernel 6.13+) carrying all its sites (user/elf/cxxcoro.h), and a
 * switch_path record (family cxx20) saying what was found and the cost
 * class of the body entries. The names of the coroutines live here for
 * the run, by the capture-wide index the sites' cookies carry: ringev.c
 * turns the first sight of each frame into a NAME record, and each
 * await_suspend call into a CORO_EV_CXX_AWAITER record (the awaiter's
 * type) before it, so the raw capture needs no table.
 */
#ifndef COROBPF_CXXATTACH_H
#define COROBPF_CXXATTACH_H

#include <stdbool.h>
#include "attachctx.h"
#include "util.h"

/* enum bpf_attach_type's BPF_TRACE_UPROBE_SESSION (kernel 6.13). */
#define CORO_BPF_TRACE_UPROBE_SESSION 57

/* The running kernel has uprobe sessions (its BTF says so). Checked once. */
bool cxxattach_supported(void);

/*
 * The coroutines of the object at `path` (shown as `shown`) for pid (-1:
 * every process). Returns the sites attached (0: none there, or they could
 * not be attached: counted and said).
 */
u32 cxxattach_object(struct attach_ctx *a, int pid, const char *path, const char *shown, bool late);

/* The name of a coroutine or awaiter by its capture-wide index; NULL if unknown. */
const char *cxxattach_name(u32 fn);

/* Forget every name (the end of the capture). */
void cxxattach_free(void);

#endif
