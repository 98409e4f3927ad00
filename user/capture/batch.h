/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * batch.h: the batched probe path, user side (usdt/corobpf.h, BATCHED
 * PATH; bpf/batch.bpf.h; docs/probes.md).
 *
 * A CORO_EV_BATCH ring record holds one thread's records as the thread
 * wrote them into its buffer. It is split here, live, into exactly the
 * CREATE, READY, SWITCH and EXIT records the trap path sends, with the
 * header the BPF side would have given each (the thread's coroutine before
 * it, the losses before it), and each goes through ringev_record() like any
 * record: the raw capture, the model and the outputs never see a batch.
 *
 * At the end of a run the BPF side is silent; what threads still alive
 * wrote since their last copy is read from their memory (a task iterator,
 * coro_batch_tails) and split the same way, up to the moment tracing
 * stopped.
 *
 * Where threads' buffers are outlives a session: a registry pinned in
 * bpffs (batch_setup), so that a later session, or one alongside, learns
 * them without the threads telling again. corobpf never writes into a
 * target.
 */
#ifndef COROBPF_BATCH_H
#define COROBPF_BATCH_H

#include <stddef.h>
#include "coro_abi.h"
#include "util.h"

/*
 * What the user side keeps of the batched path, and where the records it
 * splits go: the ring's record handler (ringev_record()), which takes each
 * as it takes a record from the ring.
 */
/* What a batch split into (batch_state.out). */
struct batch_split {
	u32 n;	       /* records */
	u32 switches;  /* of which switches */
	u64 newest_ts; /* the newest record's time */
};

/* The largest record a batch splits into: a switch. */
#define BATCH_OUT_MAX sizeof(struct coro_ev_switch)

struct batch_state {
	struct hmap cur; /* (pid, tid) -> the thread's coroutine after its last batch */
	u64 *ustats;	 /* the capture's CORO_USTAT_* counters */
	/* A batch's records, back to back in `split` (len bytes): one thread's, in order. */
	void (*out)(void *ctx, const u8 *recs, size_t len, const struct batch_split *sp);
	void *out_ctx;
	u64 split_total; /* records split (a trap-path session: read beside a batched one) */
	u8 split[CORO_BATCH_RECS_MAX * BATCH_OUT_MAX] __attribute__((aligned(8)));
};

/* --probe-path. */
enum probe_path {
	PROBE_PATH_AUTO = 0, /* the default: see batch_path_default() */
	PROBE_PATH_TRAP = 1, /* one uprobe trap per event, as before */
	PROBE_PATH_BATCHED = 2,
};

/* The path a run uses for what it was asked: batched needs no --stacks (the records carry none). */
enum probe_path batch_path_choose(enum probe_path asked, bool stacks, const char **why);
const char *batch_path_name(enum probe_path p);

/*
 * Split a CORO_EV_BATCH record of `size` bytes into the trap path's records,
 * handed to bs->out together. A malformed one is counted
 * (CORO_USTAT_BAD_RECORDS) and dropped. Remembers each thread's coroutine
 * for its tail (batch_tails_emit).
 */
int batch_split(struct batch_state *bs, const struct coro_ev_batch *b, size_t size);

/* Any other record, while some thread has batches: its thread's newest time (see batch_split). */
void batch_note(struct batch_state *bs, const struct coro_event_hdr *h);

/* Events a ring record holds (a batch: its records; any other: one), for the read budget. */
u32 batch_events_in(const void *data, size_t size);

/*
 * At the end of a run, as soon as the BPF side is silent (before threads
 * fill their buffers again): read what each thread this session traces
 * wrote after its last copy and before stop_ts. Then, once the ring is
 * drained (the threads' earlier copies split first), split what was read.
 * Returns the records split.
 */
struct batch_tails;
struct corobpf_bpf;
struct batch_tails *batch_tails_collect(struct corobpf_bpf *skel, u64 stop_ts);
u64 batch_tails_emit(struct batch_state *bs, struct batch_tails *tails);

/*
 * The batched path's BPF counters after CORO_STAT_MAX (enum coro_stat): summed over the CPUs;
 * those that are no loss (deferred copies) or are counted already (a full ring) said at the end;
 * the losses carried in the capture's user-space counters (CORO_USTAT_BATCH_*), which every
 * output reports.
 */
void batch_stat_sums(int stats_fd, u64 sums[CORO_STAT_MAP_MAX]);
void batch_say_counters(int stats_fd);
void batch_carry_counters(int stats_fd, u64 *ustats);

void batch_forget_all(struct batch_state *bs);

struct corobpf_bpf;
struct attach_ctx;

/* CPU-clock ticks per second that copy out threads running without a switch: under the reorder window. */
#define BATCH_TICK_HZ 250

/*
 * On the trap path, when it cannot read threads' buffers (no registry, an old kernel): warn that
 * another session's batched path takes the probes it shares.
 */
void batch_check_elsewhere(struct corobpf_bpf *skel, enum probe_path path, const char *when);

/*
 * At the end, on the trap path: how many of its events it read from threads' buffers, appended
 * while another session's batched path was on (with --stacks: events without a stack).
 */
void batch_say_read_on_trap(const struct batch_state *bs, enum probe_path path, bool stacks);

/*
 * Between open and load: the BPF side's part of the path, and the shared registry of thread
 * buffers. Batched: the batch probe and the copies. The trap path: the copies too (a program
 * appends instead of trapping while another session's batch semaphore is up) when the kernel
 * can read a thread's last records and the registry is there to say where the buffers are;
 * with uprobe_multi (multi), a probe after each batch site copies a full buffer out
 * (coro_batch_full). running_targets: the session traces processes that ran before it (-p, -a,
 * --follow), which an earlier session may have met: without the shared registry (said why)
 * their buffers are learnt only when they fill, which is then a warning.
 */
void batch_setup(struct corobpf_bpf *skel, enum probe_path path, bool running_targets,
		 bool multi);

/* Whether this session copies threads' buffers out (batch_setup decided: the BPF side's flag). */
bool batch_reads(const struct corobpf_bpf *skel);

/*
 * After load, when it reads buffers: the exec hook and a tick per CPU (links kept by a).
 * 0, or an exit code having said what failed.
 */
int batch_attach(struct corobpf_bpf *skel, struct attach_ctx *a, enum probe_path path);

#endif /* COROBPF_BATCH_H */
