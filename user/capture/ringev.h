/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ringev.h: what the live capture does with each record the BPF side sends
 * through the ring buffer, before passing it on to the sink. One handler
 * per concern, run in this order on every record:
 *
 *   named          a QEMU coroutine's entry address (CORO_EV_CTX_ENTRY): named
 *                  from the live process's mappings, it goes on as a
 *                  CORO_EV_NAME record through every handler below instead;
 *                  a new goroutine's function (CORO_EV_GO_ENTRY) likewise
 *   checked        malformed or of a kind not born in BPF: counted, dropped
 *                  (switch-function switches counted: the end says if none)
 *   objects        exec, dlopen (ld.so's hook): the process's maps rescanned
 *                  by the capture after this batch (targets, -a, --follow)
 *   processes      admitted by the BPF side (-a, --follow): a process record
 *                  before its first event; gone: forgotten
 *   stacks         --stacks: the resolver told of exec, exit, new mappings
 *   threads        first seen: a thread record before its first event
 *   forwarded      the record itself; with a stack, rewritten to carry the
 *                  capture's stack id instead of the registers and bytes
 *
 * The stack resolver writes records of its own (mappings, stack
 * definitions) straight into the sink, ahead of the record that needs
 * them: that is the one place a record handler emits more than one record.
 */
#ifndef COROBPF_RINGEV_H
#define COROBPF_RINGEV_H

#include <stddef.h>
#include <errno.h>

#include "attach.h"
#include "recsink.h"
#include "stackres.h"
#include "util.h"

struct ringev {
	/* Set by the capture: before the run (settings), at its start (sink, targets). */
	bool system_wide;
	bool follow;
	u64 *ustats;			/* the capture's CORO_USTAT_* counters */
	struct stack_resolver *stk;	/* --stacks, or NULL */
	const struct record_sink *sink;
	struct target *targets;		/* -p, -- CMD: flagged for rescans */
	size_t ntargets;
	/* Kept here, read by the capture. */
	struct hmap seen_threads; /* (pid, tid) already announced by a thread record */
	struct hmap announced;	  /* -a, --follow: admitted processes, pid -> its exe (owned) */
	struct hmap rescan_pids;  /* -a, --follow: processes whose maps changed */
	u64 ctx_switches;	  /* switch-function path: switch records read */
	/* C++20: (pid, frame) -> its coroutine's name index + 1, named already (CXXNAME_DESTROYED). */
	struct hmap cxx_named;
	/* Batched path: (pid, tid) -> the thread's coroutine after its last batch (batch.c). */
	struct hmap batch_cur;
	/*
	 * Set by the capture around a read of the ring: the events that read
	 * may take before it returns (0: all there are; a batched record counts
	 * the records it holds). A producer faster than
	 * this reader would otherwise keep one read going for ever, and with it
	 * -d, the signals and every check between reads.
	 */
	u32 budget;
};

void ringev_init(struct ringev *ev);
void ringev_free(struct ringev *ev);
/* One record from the ring (ring_buffer_sample_fn's shape); ctx is the struct ringev. */
int ringev_record(void *ctx, void *data, size_t size);

/*
 * The ring buffer's callback (ring_buffer_sample_fn): ringev_record(), then RINGEV_BUDGET_SPENT
 * (which ends libbpf's read, this record taken) once ev->budget events
 * were read.
 */
#define RINGEV_BUDGET_SPENT (-EAGAIN)
int ringev_ring_record(void *ctx, void *data, size_t size);
/* A launched script's image proved to be a program (it switched, or ended): its held records. */
void ringev_emit_held(struct ringev *ev, struct target *t, u64 ts);
/* The target of that pid, or NULL. */
struct target *ringev_find_target(const struct ringev *ev, u32 pid);

#endif /* COROBPF_RINGEV_H */
