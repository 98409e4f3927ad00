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
 *
 * Go's walks at an attach (gowalk.h) are held here until the ring's
 * records from before them have gone into the sink: the walk is stamped
 * when it ended, and the probes' records of the time it took are still in
 * the ring then. Ahead of them in the sink, the reorder buffer would let
 * the walk push out records older than those (late records).
 */
#ifndef COROBPF_RINGEV_H
#define COROBPF_RINGEV_H

#include <stddef.h>
#include <errno.h>

#include "announce.h"
#include "attach.h"
#include "batch.h"
#include "capture_opts.h"
#include "recsink.h"
#include "stackres.h"
#include "util.h"

struct ringev {
	/* Set by the capture: before the run (settings), at its start (sink, targets). */
	const struct capture_opts *opts; /* -a, --follow */
	u64 *ustats;			/* the capture's CORO_USTAT_* counters */
	struct stack_resolver *stk;	/* --stacks, or NULL */
	const struct record_sink *sink;
	struct target *targets;		/* -p, -- CMD: flagged for rescans */
	size_t ntargets;
	u64 session_start; /* every probe attached (target.traced_from) */
	/* Kept here, read by the capture. */
	struct hmap seen_threads; /* (pid, tid) already announced by a thread record */
	u32 seen_pid, seen_tid;	  /* the last thread found there (a run of one thread's records) */
	bool seen_any;
	struct hmap announced;	  /* -a, --follow: admitted processes, pid -> its exe (owned) */
	struct hmap rescan_pids;  /* -a, --follow: processes whose maps changed */
	u64 ctx_switches;	  /* switch-function path: switch records read */
	/*
	 * -a: the switch-function and interpreters' plans attached for every
	 * process, by object (attachctx.h's global_plans); and the (pid, object)
	 * whose switch_path records were written.
	 */
	const struct hmap *global_plans;
	struct hmap plans_said;
	/* C++20: (pid, frame) -> its coroutine's name index + 1, named already (CXXNAME_DESTROYED). */
	struct hmap cxx_named;
	/* The processes asked what exists (announce.h): their answers end with announce_done. */
	struct announce_reqs *announce;
	/* Batched path: the threads' coroutines, the split records given to ringev_record(). */
	struct batch_state batch;
	/*
	 * Set by the capture around a read of the ring: the events that read
	 * may take before it returns (0: all there are; a batched record counts
	 * the records it holds). A producer faster than
	 * this reader would otherwise keep one read going for ever, and with it
	 * -d, the signals and every check between reads.
	 */
	u32 budget;
	/* Go: walks at an attach, held until the ring's records before them have gone. */
	struct coro_rec_go_g **walks;
	u32 *nwalk;
	size_t nwalks;
	u64 walks_ts; /* the oldest held walk's time */
};

void ringev_init(struct ringev *ev);
/*
 * -a: process pid is traced; for each object it maps now that a plan attached
 * for every process is on (global_plans), its switch_path records, once per
 * (pid, object): so each process says through which families it is traced.
 */
void ringev_global_plans_for(struct ringev *ev, u32 pid, u64 ts);
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

/*
 * Go: hold a walk's n records (gowalk_process's, taken over: freed here),
 * to go into the sink just before the first ring record stamped at or after
 * them, or at ringev_release_walks(), whichever comes first.
 */
void ringev_hold_walk(struct ringev *ev, struct coro_rec_go_g *gs, u32 n);
/* Every walk held goes into the sink now: the ring was read to its end after them. */
void ringev_release_walks(struct ringev *ev);
/* A launched script's image proved to be a program (it switched, or ended): its held records. */
void ringev_emit_held(struct ringev *ev, struct target *t, u64 ts);
/* The target of that pid, or NULL. */
struct target *ringev_find_target(const struct ringev *ev, u32 pid);

#endif /* COROBPF_RINGEV_H */
