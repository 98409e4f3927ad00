/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * liverec.h: the records user space adds to a live capture (records.h says
 * what each holds): a process taken on, a thread first seen, a process's
 * exit, an object or switch functions attached. Each is built here and
 * written into the capture's sink at once (what they read of /proc:
 * procfs.h).
 */
#ifndef COROBPF_LIVEREC_H
#define COROBPF_LIVEREC_H

#include "attach.h"
#include "attachctx.h"
#include "raw.h" /* the records */
#include "recsink.h"

/* CORO_REC_PROCESS, stamped with t->start_ts: before its probes were attached. */
void liverec_process(const struct record_sink *s, const struct target *t);
/* CORO_REC_THREAD; `known`: the name the BPF side read, for a thread already gone from /proc. */
void liverec_thread(const struct record_sink *s, u32 pid, u32 tid, u64 ts, const char *known);
/* CORO_REC_PROC_EXIT, stamped now; wait_status -1: unknown. */
void liverec_proc_exit(const struct record_sink *s, u32 pid, int wait_status);
/* ...stamped ts (the exit's own time, when the BPF side saw it). */
void liverec_proc_exit_at(const struct record_sink *s, u32 pid, int wait_status, u64 ts);
/* CORO_REC_OBJECT or CORO_REC_SWITCH: what attaching found (attachctx.h). */
void liverec_found(const struct record_sink *s, const struct attach_found *f);

#endif /* COROBPF_LIVEREC_H */
