/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Live capture: load the BPF side, attach to the targets, read the ring
 * buffer, and write every record into the sink it is handed (recsink.h:
 * for corobpf trace, the raw capture and the pipeline). In that order, in
 * one place:
 *
 *   capture_preflight  privileges and kernel features, with exact errors
 *   capture_open       open the skeleton, size the ring, load
 *   capture_targets    -p PIDs: check them; -- CMD: fork it, held before exec
 *   capture_attach     find objects with probes, attach (and ld.so's hook)
 *   capture_run        release the launched command, poll until the end
 *   capture_close      detach, free
 */
#ifndef COROBPF_CAPTURE_H
#define COROBPF_CAPTURE_H

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include "attach.h"
#include "attachctx.h"
#include "execgate.h"
#include "recsink.h"
#include "ringev.h"
#include "stackres.h"
#include "switchfam.h"

struct corobpf_bpf;
struct ring_buffer;

struct capture_opts {
	u32 *pids;
	u32 npids;
	char **argv; /* launch mode: the command and its arguments */
	u64 duration_ns; /* 0: until the targets exit or a signal */
	u64 ring_bytes;
	bool no_sched;	 /* without the kernel's scheduling view (sched_switch/wakeup) */
	bool system_wide; /* -a: every process whose objects carry probes (pids: a filter) */
	/* -a --comm (repeatable): only processes whose name starts with one of these */
	const char *const *comms;
	u32 ncomms;
	/*
	 * --follow: the targets' probe objects are attached for every process
	 * (pid -1) and the BPF side admits the targets and, at fork, their
	 * descendants; exec'd images are scanned like -a's. Probes only.
	 */
	bool follow;
	/*
	 * The switch-function path (--switch). Automatic by default: a process
	 * without corobpf probes is traced through every family its libraries
	 * provide. switch_forced: the families (and custom functions) given,
	 * even where probes exist (which are then left alone); switch_none: never.
	 */
	u32 switch_families; /* 1 << enum coro_ctx_family */
	bool switch_forced;
	bool switch_none;
	struct switch_custom *custom;
	size_t ncustom;
	u32 stacks;	  /* enum stack_mode (stacks.h) */
	u32 stack_bytes;  /* dwarf: bytes of user stack copied per event */
	u32 stack_map;	  /* fp: entries of the kernel stack map */
	u32 sample_hz;	  /* --stacks: perf-event samples of running coroutines per second per CPU (0: none) */
	/* -a, --follow: the exec gate's longest hold (execgate.h); 0: no gate. */
	u32 exec_gate_ms;
	u32 probe_path; /* --probe-path: enum probe_path (batch.h), resolved by batch_path_choose() */
	/* -- CMD: the command's stdout is corobpf's stderr (top's snapshots own stdout). */
	bool stdout_to_stderr;
};

struct capture {
	const struct capture_opts *opts;
	struct corobpf_bpf *skel;
	struct ring_buffer *rb;
	/* Lent to attach.c and usdt.c: the programs, the links, what they attached. */
	struct attach_ctx attach;
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
	struct record_sink watch;
	const struct record_sink *outer;
	u64 newest_ts;
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
	/*
	 * What the switch-function path attached for each target ("lua
	 * (libluajit-5.1.so.2.1.0: LuaJIT 2.1)"): a run that saw no switch says
	 * what it looked for.
	 */
	struct looked_for {
		u32 pid;
		char what[128];
	} looked[16];
	u32 nlooked;
};

/* Set by the signal handlers (the signal number); capture_run stops when it sees it. */
extern volatile sig_atomic_t capture_stop_signal;

/*
 * SIGINT/SIGTERM/SIGHUP stop tracing (a second one quits at once, removing
 * temporary outputs) and are passed on to the launched command; SIGPIPE is
 * ignored. The launched command gets the original dispositions back.
 */
void capture_install_signals(void);
/*
 * From now on (a pid) or no longer (-1), signals are passed on to pid. The
 * launched command gets the dispositions and the descriptor limit corobpf
 * started with back before its exec (capture_open raises the limit), and
 * is continued (SIGCONT) by the kernel if corobpf dies (a dlopen hold).
 */
void capture_set_signal_child(pid_t pid);

int capture_preflight(void);
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
