/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The records user space adds to the stream (processes, threads, objects,
 * exits, statistics, the end, stack definitions...), beside those the ring
 * buffer delivers (bpf/coro_abi.h). They share its header, struct
 * coro_event_hdr, and its rules: every record's size is a multiple of 8 and
 * at least the header's; kinds are numbered on from 128 and append-only;
 * payloads only grow at their end. The raw capture (raw.h) holds both, as
 * they were; record/kinds.h says what each kind is.
 *
 * All integers are little-endian (the capture's machine; only x86-64 and
 * arm64 hosts are supported).
 */
#ifndef COROBPF_RECORDS_H
#define COROBPF_RECORDS_H

#include "coro_abi.h"
#include "capture_info.h" /* struct capture_info, enum coro_user_stat */
#include "event.h" /* enum coro_proc_mode, enum coro_end_reason */
#include "util.h"

/*
 * A coro_event_hdr.flags bit of records read back from JSONL, and of a
 * scheduler's list (announce, announce_done: set as they come from the ring)
 * (the event ABI's flags grow from bit 0): the record had its thread's state,
 * but does not say what ran there (create, name, exit; a ready of unknown
 * waker; a span or off-CPU line of no coroutine; a list, about the scheduler's
 * coroutines). The thread's view takes its time, so that a hole after it
 * starts there, and learns nothing of hdr.cur.
 */
#define CORO_EVF_CUR_UNSAID (1u << 7)

/*
 * Room for the longest name record (kinds.h, coro_name_record(); as a union
 * member: u64 aligned). Names the BPF side reads stay within CORO_STR_LEN.
 */
#define CORO_NAME_REC_MAX ROUND_UP(offsetof(struct coro_ev_name, name) + CORO_NAME_MAX, 8)

/* User-space record kinds, in the same numbering as enum coro_event_kind. Append-only. */
enum coro_rec_kind {
	CORO_REC_PROCESS = 128,	  /* a traced process: struct coro_rec_process */
	CORO_REC_THREAD = 129,	  /* a thread first seen: struct coro_rec_thread */
	CORO_REC_OBJECT = 130,	  /* probes attached in an object: struct coro_rec_object */
	CORO_REC_PROC_EXIT = 131, /* a traced process ended: struct coro_rec_proc_exit */
	CORO_REC_STATS = 132,	  /* loss and throughput counters so far: struct coro_rec_stats */
	CORO_REC_END = 133,	  /* the capture ended cleanly: struct coro_rec_end */
	CORO_REC_SWITCH = 134,	  /* switch-function uprobes attached: struct coro_rec_switch */
	CORO_REC_MAP = 135,	  /* --stacks: an executable mapping of a process: struct coro_rec_map */
	CORO_REC_STACK = 136,	  /* --stacks: a distinct user stack: struct coro_rec_stack */
	CORO_REC_GO_G = 137,	  /* Go: a goroutine alive at attach: struct coro_rec_go_g */
	/*
	 * A hole in a thread's events whose next record has no JSONL line of its
	 * own (a stack sample), read back from JSONL: the header alone, with
	 * lost_before, and cur as that record had it (CORO_EVF_CUR_UNKNOWN: not
	 * certain). Never in a raw capture.
	 */
	CORO_REC_LOST = 138,
};

/*
 * hdr.cur: of a process taken on running (CORO_PROC_ATTACHED), the time
 * (CLOCK_BOOTTIME) its probes were all attached, the session's start: from
 * then on its trace is whole, so a coroutine created later has all its spans
 * in it (before, a span_begin could fire before its probe was attached). 0
 * otherwise, and in captures older than this.
 */
struct coro_rec_process {
	struct coro_event_hdr hdr; /* pid, ts; cur: above */
	u32 mode;		   /* enum coro_proc_mode (event.h) */
	u32 ppid;
	char comm[16];
	char exe[]; /* NUL-terminated, padded to 8 */
};

struct coro_rec_thread {
	struct coro_event_hdr hdr; /* pid, tid, ts (of its first event) */
	char comm[16];
};

struct coro_rec_object {
	struct coro_event_hdr hdr; /* pid, ts */
	u32 probes;		   /* probe sites attached */
	u32 late;		   /* 1: attached after the object was mapped (dlopen) */
	char path[];		   /* NUL-terminated, padded to 8 */
};

/*
 * The switch-function path on one object of a process (pid 0 with -a):
 * which family, how many uprobes, of the switch sites how many are
 * single-stepped (the expensive kind). Then three NUL-terminated strings:
 * the object's path, its sites ("swapcontext+0x93 (emulated; ...)", "; "
 * between them), and what the family cannot see there (may be empty).
 */
struct coro_rec_switch {
	struct coro_event_hdr hdr; /* pid, ts */
	u32 family;		   /* enum coro_ctx_family */
	u32 sites;
	u32 stepped;
	u32 __pad;
	char text[]; /* path, sites, limits; padded to 8 */
};

/*
 * --stacks. A file mapped executable into a traced process, written before
 * the first stack with an address in it (the process may be gone when the
 * capture is symbolized). CORO_MAPF_RESET: mappings recorded earlier for
 * this pid are gone (the process exec'd, or it is a new process with a
 * reused pid: the first map of every process says so).
 */
enum { CORO_MAPF_RESET = 1 };

struct coro_rec_map {
	struct coro_event_hdr hdr; /* pid, ts */
	u64 start, end;		   /* addresses */
	u64 pgoff;		   /* file offset mapped at start */
	u32 flags;
	u32 build_id_len;	   /* 0: none read */
	u8 build_id[24];	   /* the file's GNU build-id when mapped */
	char path[];		   /* NUL-terminated, padded to 8 */
};

/*
 * A distinct stack of a process, defined once, before the first record that
 * names it (struct coro_stack_ref, CORO_STACK_CAPTURE_ID). ips[0] is where
 * the probe fired; the others are return addresses, innermost first.
 * Definitions are timeless: readers take them when read, not in time order.
 */
struct coro_rec_stack {
	struct coro_event_hdr hdr; /* pid, ts of its first use */
	u32 id;			   /* 1.. within the capture */
	u32 nframes;		   /* at most CORO_STACK_DEPTH */
	u64 ips[];
};

/*
 * Go, -p: a goroutine found alive by the walk of runtime.allgs at attach
 * (user/capture/gowalk.c), in its state then; user/model/gomodel.c makes it
 * a coroutine unless the probes reported it first. --stacks: a parked one's
 * record is followed by a struct coro_stack_ref, where it is parked (walked
 * from its g.sched by its frame pointers).
 */
struct coro_rec_go_g {
	/* pid; tid: its thread if running or in a syscall, else 0; ts: when it was read */
	struct coro_event_hdr hdr;
	u64 goid;
	u64 obj;	/* Gwaiting: the channel it waits on, or 0 */
	u32 status;	/* enum coro_go_status */
	u8 waitreason;	/* Gwaiting: the runtime's */
	u8 reason;	/* ...as enum coro_switch_reason */
	u8 __pad[2];
	char name[CORO_STR_LEN]; /* its function (g.startpc), as ringev names a new one */
};

struct coro_rec_proc_exit {
	struct coro_event_hdr hdr; /* pid, ts */
	s32 status;		   /* waitpid status if known (launched), else -1 */
	u32 __pad;
};

struct coro_rec_stats {
	struct coro_event_hdr hdr;   /* ts */
	u64 bpf[CORO_STAT_MAX];	     /* sums of the per-CPU BPF counters (enum coro_stat) */
	u64 user[CORO_USTAT_MAX];    /* enum coro_user_stat; older captures have fewer (zero) */
};
#define CORO_REC_STATS_V1_SIZE (offsetof(struct coro_rec_stats, user) + CORO_USTAT_V1_MAX * 8)

struct coro_rec_end {
	struct coro_event_hdr hdr; /* ts */
	u32 reason;		   /* enum coro_end_reason (event.h) */
	u32 __pad;
};

#endif /* COROBPF_RECORDS_H */
