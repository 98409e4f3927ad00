/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The raw capture: the boundary between collecting and understanding.
 *
 * A file is a header (struct raw_file_header, then `npids` u32 pids) and a
 * sequence of blocks. A block is a struct raw_block_header and `len` bytes
 * of records, protected by a CRC-32 of those bytes. Records are exactly what
 * the ring buffer delivered (bpf/coro_abi.h) plus the user-space records
 * defined here, which share the same header. Every record's size is a
 * multiple of 8 and at least sizeof(struct coro_event_hdr).
 *
 * Because a block is written whole or not at all, a capture cut short (the
 * tracer killed, the disk full) reads back up to its last complete block;
 * a clean capture ends with a CORO_REC_END record.
 *
 * All integers are little-endian (the capture's machine; only x86-64 and
 * arm64 hosts are supported).
 */
#ifndef COROBPF_RAW_H
#define COROBPF_RAW_H

#include <stdio.h>
#include "coro_abi.h"
#include "util.h"

#define RAW_MAGIC "COROBPF\x1a"
#define RAW_FORMAT_VERSION 1
#define RAW_BLOCK_MAGIC 0x4b4c4243u /* "CBLK" */
#define RAW_MAX_BLOCK (4u << 20)
#define RAW_MAX_PIDS 4096

/*
 * A coro_event_hdr.flags bit of records read back from JSONL only (the event
 * ABI's flags grow from bit 0): the record had its thread's state, but its
 * line does not say what ran there (create, name, exit; a ready of unknown
 * waker; a span or off-CPU line of no coroutine). The thread's view takes its
 * time, so that a hole after it starts there, and learns nothing of hdr.cur.
 */
#define CORO_EVF_CUR_UNSAID (1u << 7)

/*
 * A coroutine's name made in user space (C++20's functions, Go's, QEMU's
 * entries: ringev.c) may be longer than a CORO_EV_NAME's name field holds.
 * Such a record is longer than struct coro_ev_name: its name runs on past
 * the field to a NUL within the record, at most CORO_NAME_MAX - 1 bytes,
 * CORO_EVF_STR_TRUNCATED if it was cut there. Names the BPF side reads stay
 * within CORO_STR_LEN.
 */
#define CORO_NAME_MAX 256
/* Room for the longest name record (as a union member: u64 aligned). */
#define CORO_NAME_REC_MAX ROUND_UP(offsetof(struct coro_ev_name, name) + CORO_NAME_MAX, 8)

/* A name record of up to CORO_NAME_MAX - 1 bytes of name at rec (CORO_NAME_REC_MAX bytes). */
void coro_name_record(struct coro_ev_name *rec, const char *name);

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

enum coro_proc_mode {
	CORO_PROC_ATTACHED = 1, /* -p: attached to a running process */
	CORO_PROC_LAUNCHED = 2, /* -- CMD: traced from its first instruction */
	CORO_PROC_FORKED = 3,	/* --follow: forked by a traced process, traced from the fork */
};

struct coro_rec_process {
	struct coro_event_hdr hdr; /* pid, ts */
	u32 mode;		   /* enum coro_proc_mode */
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

/* User-space counters carried in CORO_REC_STATS (after the BPF ones). Append-only. */
enum coro_user_stat {
	CORO_USTAT_RECORDS = 0,	     /* records read from the ring buffer */
	CORO_USTAT_BAD_RECORDS = 1,  /* records from the ring that failed validation */
	CORO_USTAT_LATE_ATTACH = 2,  /* objects attached after they were mapped */
	CORO_USTAT_ATTACH_FAIL = 3,  /* objects with probes that could not be attached */
	CORO_USTAT_STACK_UNRESOLVED = 4, /* --stacks: refs that gave no stack (kept without) */
	CORO_USTAT_STACK_UNMAPPED = 5,	 /* --stacks: stacks with addresses in no mapping read */
	/*
	 * Objects refused: probes that would harm the target, or past their
	 * share of USDT spec slots.
	 */
	CORO_USTAT_ATTACH_REFUSED = 6,
	/*
	 * -a, --follow: execs the exec gate held, then let go at --exec-gate's
	 * timeout before their program was attached (its first probes can be missed).
	 */
	CORO_USTAT_GATE_TIMEOUTS = 7,
	/*
	 * The batched path (docs/probes.md). Records stamped before the session
	 * (or their thread) started, in a buffer it met already in use: not
	 * this session's, left out.
	 */
	CORO_USTAT_BATCH_BEFORE = 8,
	/* The BPF side's losses of the batched path (enum coro_stat), carried here. */
	CORO_USTAT_BATCH_UNREAD = 9,	    /* CORO_STAT_BATCH_UNREAD: records */
	CORO_USTAT_BATCH_FINAL_UNREAD = 10, /* CORO_STAT_BATCH_FINAL_UNREAD: last copies */
	CORO_USTAT_BATCH_GEN_JUMPS = 11,    /* CORO_STAT_BATCH_GEN_JUMPS: buffers started again */
	CORO_USTAT_BATCH_UNREGISTERED = 12, /* CORO_STAT_BATCH_UNREGISTERED: buffers */
	/*
	 * Records whose time was ahead of their copy or behind their buffer's
	 * previous record (a program writing its own): clamped into that range.
	 */
	CORO_USTAT_BATCH_CLAMPED = 13,
	CORO_USTAT_MAX = 14,
};

/* The counters up to CORO_USTAT_GATE_TIMEOUTS: older captures' stats records end there. */
#define CORO_USTAT_V1_MAX 8

struct coro_rec_stats {
	struct coro_event_hdr hdr;   /* ts */
	u64 bpf[CORO_STAT_MAX];	     /* sums of the per-CPU BPF counters (enum coro_stat) */
	u64 user[CORO_USTAT_MAX];    /* enum coro_user_stat; older captures have fewer (zero) */
};
#define CORO_REC_STATS_V1_SIZE (offsetof(struct coro_rec_stats, user) + CORO_USTAT_V1_MAX * 8)

enum coro_end_reason {
	CORO_END_TARGETS_EXITED = 1,
	CORO_END_SIGNAL = 2,
	CORO_END_DURATION = 3,
	CORO_END_ERROR = 4,
};

struct coro_rec_end {
	struct coro_event_hdr hdr; /* ts */
	u32 reason;		   /* enum coro_end_reason */
	u32 __pad;
};

struct raw_file_header {
	char magic[8];	    /* RAW_MAGIC */
	u32 version;	    /* RAW_FORMAT_VERSION */
	u32 header_size;    /* this struct plus the pid array */
	u32 abi_version;    /* CORO_EVENT_ABI_VERSION of the records */
	u32 clock_id;	    /* CLOCK_BOOTTIME */
	u64 start_ts;	    /* clock_id ns when the capture started */
	s64 realtime_offset; /* CLOCK_REALTIME - clock_id, ns, at start */
	char tool_version[32];
	char kernel[64];   /* uname -r */
	char hostname[64];
	u32 flags;
	u32 npids;
	u32 pids[]; /* the processes named at start (-p, or the launched one) */
};

struct raw_block_header {
	u32 magic; /* RAW_BLOCK_MAGIC */
	u32 len;   /* bytes of records that follow */
	u32 nrecords;
	u32 crc32; /* zlib crc32 of the record bytes */
};

/* What a capture says about itself: the decoded file header. */
struct capture_info {
	u32 version, abi_version, clock_id, flags;
	u64 start_ts;
	s64 realtime_offset;
	char tool_version[32];
	char kernel[64];
	char hostname[64];
	u32 npids;
	u32 *pids;
};

void capture_info_init_live(struct capture_info *ci, const u32 *pids, u32 npids);
void capture_info_free(struct capture_info *ci);

/* Record validation shared by the ring reader and the file reader. */
bool coro_record_valid(const struct coro_event_hdr *h, size_t avail, const char **why);
const char *coro_kind_name(unsigned kind);
/*
 * The stack ref of a record that may carry one (CREATE, SWITCH, CTX_CREATE,
 * CTX_SWITCH taken with --stacks), or NULL; and the size of its payload
 * without it.
 */
const struct coro_stack_ref *coro_stack_ref_of(const struct coro_event_hdr *h);
size_t coro_stack_base_size(unsigned kind);
/* The capture stack id a record names (0: none). */
u32 coro_record_stack(const struct coro_event_hdr *h);
/* enum coro_ctx_family as text ("ucontext", "boost-context", "pth", "custom"), and back (0: unknown). */
const char *coro_family_name(u32 family);
u32 coro_family_parse(const char *name);

/* ---- writer ---- */
struct raw_writer;

struct raw_writer *raw_writer_open(int fd, const struct capture_info *ci, char *err,
				   size_t errlen);
void raw_writer_append(struct raw_writer *w, const struct coro_event_hdr *rec);
int raw_writer_flush(struct raw_writer *w); /* write out the current block */
int raw_writer_close(struct raw_writer *w); /* flush; free; 0 or -errno */

/* ---- reader ---- */
struct raw_reader;

struct raw_reader *raw_reader_open(const char *path, struct capture_info *ci, char *err,
				   size_t errlen);
/*
 * Next record: 1 and *rec (valid until the next call), 0 at a clean end,
 * or -1 with raw_reader_error() saying what is wrong and where.
 */
int raw_reader_next(struct raw_reader *r, const struct coro_event_hdr **rec);
const char *raw_reader_error(const struct raw_reader *r);
u64 raw_reader_records(const struct raw_reader *r);
bool raw_reader_saw_end(const struct raw_reader *r);
void raw_reader_close(struct raw_reader *r);

#endif
