/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * From Go's goroutine status changes to coroutines: the Go family's stage
 * between the reorder buffer and the switch-function stage (ctxmap.h).
 *
 * The uprobe on runtime.casgstatus reports raw changes (CORO_EV_GO_STATUS:
 * goid, old and new status, hdr.cur the thread's goroutine before); the walk
 * of runtime.allgs at attach reports the goroutines alive then
 * (CORO_REC_GO_G). This stage turns both into the probe ABI's records, so
 * the model and every output treat Go as any coroutine runtime:
 *
 * - a coroutine is a goroutine, its id the goid (goids are never reused);
 * - Gdead -> Grunnable (newproc1): CREATE, parent hdr.cur (the goroutine
 *   that ran the `go` statement), then READY;
 * - Grunnable or Gwaiting -> Grunning: SWITCH from the scheduler (0) to it,
 *   on the thread that runs it;
 * - Grunning -> Gwaiting: SWITCH to the scheduler with the wait reason and
 *   object the BPF side mapped (gp.waiting's channel);
 * - Grunning -> Grunnable (Gosched, preemption) and Gsyscall -> Grunnable
 *   (a syscall that lost its P): SWITCH to the scheduler, a yield;
 * - Gwaiting -> Grunnable: READY, the waker hdr.cur;
 * - Grunning -> Gdead: EXIT, then its last SWITCH (done);
 * - Grunning <-> Gsyscall: nothing: the goroutine keeps its thread, so the
 *   thread's off-CPU time in the syscall is the goroutine's (blocking).
 *
 * A goroutine the GC parked by asynchronous preemption (no casgstatus) is
 * switched out where it is next seen: on its thread when that thread runs
 * another, or on its old thread when it runs somewhere else. The walk's
 * records are stamped after its last read: a walk record of a goroutine the
 * probes already reported gives its name only (the probes' state is newer),
 * and one of a goroutine they saw end gives nothing (it was read as it
 * ended, or its g as newproc1 reused it); newproc1's return after the walk
 * found its g runnable (with its goid) gives nothing either. A goroutine
 * found parked is switched in and out at the instant of the walk on thread
 * 0 (its last thread is not known; no real thread is 0), so it is
 * suspended, with its reason and object, from there.
 *
 * Every other record passes untouched.
 */
#ifndef COROBPF_GOMODEL_H
#define COROBPF_GOMODEL_H

#include "coro_abi.h"
#include "util.h"

struct gomodel {
	struct hmap seen;    /* (pid, goid) reported by probes or the walk: alive, or ended */
	struct hmap running; /* (pid, goid) -> tid + 1, the thread it runs on */
	struct hmap thread;  /* (pid, tid) -> goid + 1, what the stage said runs there */
};

typedef void (*gomodel_emit_fn)(void *ctx, const struct coro_event_hdr *rec);

void gomodel_init(struct gomodel *g);
/* Pass `rec` on to emit (translated, or as it is). */
void gomodel_apply(struct gomodel *g, const struct coro_event_hdr *rec, gomodel_emit_fn emit,
		   void *ctx);
void gomodel_free(struct gomodel *g);

#endif
