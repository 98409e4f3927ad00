/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Live capture: load the BPF side, attach to the targets, read the ring
 * buffer, and write every record into the sink it is handed (recsink.h:
 * for corobpf trace, the raw capture and the pipeline). In that order, in
 * one place:
 *
 *   capture_preflight  privileges and kernel features, with exact errors (preflight.h)
 *   capture_open       open the skeleton, size the ring, load
 *   capture_targets    -p PIDs: check them; -- CMD: fork it, held before exec
 *   capture_attach     find objects with probes, attach (and ld.so's hook)
 *   capture_run        release the launched command, poll until the end
 *   capture_close      detach, free
 */
#ifndef COROBPF_CAPTURE_H
#define COROBPF_CAPTURE_H

#include <signal.h>
#include <sys/types.h>
#include "announce.h"
#include "attach.h"
#include "launch.h"
#include "attachctx.h"
#include "capture_opts.h"
#include "execgate.h"
#include "recsink.h"
#include "ringev.h"
#include "stackres.h"
#include "stopper.h"
#include "switchfam.h"
#include "unseen.h"

struct corobpf_bpf;
struct ring_buffer;

struct capture {
	const struct capture_opts *opts; /* read-only: the session's, lent to attaching too */
	struct corobpf_bpf *skel;
	struct ring_buffer *rb;
	/* Lent to attach.c and usdt.c: the programs, the links, what they attached. */
	struct attach_ctx attach;
	struct announce_reqs announce; /* the processes asked what exists (announce.h) */
	/* The ring buffer's record handlers (ringev.h) and what they keep. */
	struct ringev ev;
	pthread_t detacher; /* destroys the links while the outputs are finished */
	bool detaching;
	struct target *targets;
	size_t ntargets;
	struct attach_launch launch; /* -- CMD: the child, held until capture_run */
	int epfd;
	u64 ustats[CORO_USTAT_MAX];
	const struct record_sink *sink; /* capture_run's, through `watch` */
	/* In front of capture_run's sink: the newest ts given it (a target's exit record, capture.c). */
	struct record_watch watch;
	u64 read_ns; /* time spent reading the ring (and handing its records on) */
	struct stopper stopper; /* the probes silenced at -d or a signal, on time */
	u32 end_reason;
	struct stack_resolver *stk; /* --stacks */
	struct execgate *gate; /* -a, --follow: execs held until attached (execgate.h), or NULL */
	/*
	 * Called on every turn of capture_run's loop (at least every 100 ms,
	 * at once after a signal), after the ring was read: the status line and
	 * the flight recorder. NULL: none.
	 */
	void (*tick)(void *ctx);
	void *tick_ctx;
	/* What the switch-function path attached for each target (unseen.h). */
	struct unseen unseen;
};

int capture_open(struct capture *c, const struct capture_opts *opts);
int capture_targets(struct capture *c);
int capture_attach(struct capture *c);
/*
 * Writes every record into sink (recsink.h) until the end: first the
 * targets' process records and what capture_attach attached, then the
 * ring's, in order. Returns 0 or an exit code.
 */
int capture_run(struct capture *c, const struct record_sink *sink);
/* Launch mode: the command's exit status as a shell would report it (waits if needed). */
int capture_wait_child(struct capture *c);
void capture_kill_child(struct capture *c);
void capture_detach_async(struct capture *c);
void capture_close(struct capture *c); /* waits for the detach */

#endif
