/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Live capture: load the BPF side, attach to the targets, read the ring
 * buffer, and feed every record both to the raw capture and to the
 * pipeline. In that order, in one place:
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
#include "pipeline.h"
#include "switchfam.h"
#include "raw.h"
#include "stacks.h"

/*
 * USDT spec slots (attach.c): the pool, and what one object, one user other
 * than root, and all such users together may take of it. Root's own
 * objects (system libraries, the invoker's programs) always find room.
 */
#define USDT_SPEC_SLOTS		16384
#define USDT_SPECS_PER_OBJECT	512
#define USDT_SPECS_PER_USER	(USDT_SPEC_SLOTS / 8)
#define USDT_SPECS_ALL_USERS	(USDT_SPEC_SLOTS / 2)

struct corobpf_bpf;
struct ring_buffer;
struct bpf_link;
struct bpf_program;
struct usdt_table;

struct capture_opts {
	u32 *pids;
	u32 npids;
	char **argv; /* launch mode: the command and its arguments */
	u64 duration_ns; /* 0: until the targets exit or a signal */
	u64 ring_bytes;
	bool no_sched;	 /* without the kernel's scheduling view (sched_switch/wakeup) */
	bool system_wide; /* -a: every process whose objects carry probes (pids: a filter) */
	const char *comm; /* -a --comm: only processes whose name starts so */
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
};

struct target {
	u32 pid;
	int pidfd;
	bool launched;
	bool forked; /* --follow: a descendant of a target, admitted at its fork */
	bool exited;
	int wait_status; /* launched: waitpid status; -1 unknown */
	bool rescan;	 /* ld.so changed its link map */
	bool libload_attached;
	struct hmap objects; /* (dev, inode) of objects already examined */
	u32 probe_sites;
	u32 probe_sites_ignored; /* --switch: probes found but not used */
	/* Objects that define context functions, kept until the path is chosen. */
	struct target_swobj {
		int fd; /* -1, or the descriptor `path` names (/proc/self/fd/N) */
		char *path, *shown;
		u32 families;
	} *swobjs;
	size_t nswobjs;
	bool switch_mode; /* traced through the switch-function path */
	bool fcontext_calls; /* Boost.Context switches probed at their call sites */
	s64 fc_delta_jump, fc_delta_ontop;
	u32 switch_sites;
	u64 start_ts; /* when corobpf took it on, before attaching */
	char comm[16];
	char exe[4096];
	u32 ppid;
};

struct capture {
	const struct capture_opts *opts;
	struct corobpf_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nlinks, cap_links;
	int *link_fds; /* uprobe_multi links (raw fds: libbpf 1.1 cannot make them) */
	size_t nlink_fds, cap_link_fds;
	bool uprobe_multi; /* the kernel has them (6.6+) */
	struct usdt_table *usdt; /* USDT attached by corobpf through them (usdt.h), or NULL */
	pthread_t detacher; /* destroys the links while the outputs are finished */
	bool detaching;
	struct target *targets;
	size_t ntargets;
	pid_t child;	 /* launched command, held until capture_run */
	int release_fd;	 /* write end of the pipe the child waits on */
	int launch_err_fd; /* read end: errno if its exec failed, EOF once it succeeded */
	int epfd;
	struct hmap seen_threads;
	u64 ustats[CORO_USTAT_MAX];
	struct pipeline *pipeline;
	struct raw_writer *raw;
	u32 end_reason;
	u64 ctx_switches; /* switch-function path: raw switch records read (the end says if none) */
	/*
	 * USDT argument-spec slots (libbpf's spec map, USDT_SPEC_SLOTS) taken so
	 * far: in all, and per owner of the object file (uid -> count) for the
	 * objects -a and --follow find on their own.
	 */
	u32 usdt_specs_used;
	u32 usdt_specs_users;	/* taken by objects owned by other users than root */
	struct hmap usdt_specs_by_owner;
	/* Objects a process maps that corobpf was not allowed to open, and why. */
	u32 open_denied;
	int open_denied_errno;
	/* Objects searched, for the "no probes" error. */
	char **searched;
	size_t nsearched;
	/* -a: objects on disk examined (dev, inode), processes to rescan, processes announced. */
	struct hmap global_objects;
	struct hmap rescan_pids;
	struct hmap announced;
	u32 global_sites;
	struct stack_resolver *stk; /* --stacks */
};

/* Set by the signal handlers (the signal number); capture_run stops when it sees it. */
extern volatile sig_atomic_t capture_stop_signal;

/*
 * SIGINT/SIGTERM/SIGHUP stop tracing (a second one quits at once, removing
 * temporary outputs) and are passed on to the launched command; SIGPIPE is
 * ignored. The launched command gets the original dispositions back.
 */
void capture_install_signals(void);
void capture_restore_signals(void);
/* The launched command gets the descriptor limit corobpf started with (capture_open raises it). */
void capture_restore_limits(void);
void capture_set_signal_child(pid_t pid);

int capture_preflight(void);
int capture_open(struct capture *c, const struct capture_opts *opts);
int capture_targets(struct capture *c);
int capture_attach(struct capture *c);
/* Feeds records into p (and raw, if not NULL) until the end. Returns 0 or an exit code. */
int capture_run(struct capture *c, struct pipeline *p, struct raw_writer *raw);
/* Launch mode: the command's exit status as a shell would report it (waits if needed). */
int capture_wait_child(struct capture *c);
void capture_kill_child(struct capture *c);
void capture_detach_async(struct capture *c);
void capture_close(struct capture *c); /* waits for the detach */

/*
 * What attach.c (attach.h) and usdt.c use of the capture: the programs, the
 * links that must live until the end, and the records that say what was
 * attached.
 */
/* The BPF program of a probe name ("create", ...) or an internal one ("@libload", "@ctx", "@ctx_multi"). */
struct bpf_program *capture_prog_for_probe(struct capture *c, const char *name);
/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (kernel 6.6), absent from Debian 12's headers. */
#define CORO_BPF_TRACE_UPROBE_MULTI 48
/* prog at n offsets of path for pid (0: every process), with semaphores (refs may be NULL). */
int capture_attach_uprobe_multi(struct capture *c, const struct bpf_program *prog, u32 pid,
				const char *path, const u64 *offsets, const u64 *refs,
				const u64 *cookies, u32 n);
int capture_add_link(struct capture *c, struct bpf_link *link);
/* The switch-function path attached in an object (a CORO_REC_SWITCH record). */
void capture_emit_switch(struct capture *c, u32 pid, u32 family, const char *path,
			 const char *sites, const char *limits, u32 nsites, u32 stepped);
void capture_emit_object(struct capture *c, u32 pid, const char *path, u32 probes, bool late);
void capture_emit(struct capture *c, const struct coro_event_hdr *rec);

#endif
