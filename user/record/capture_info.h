/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a capture says about itself: its file header, decoded (raw.h reads
 * it, or makes a live capture's), and the loss counters its stats records
 * carry.
 */
#ifndef COROBPF_CAPTURE_INFO_H
#define COROBPF_CAPTURE_INFO_H

#include "coro_abi.h"
#include "util.h"

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
	/*
	 * Processes asked what exists at the attach (usdt/corobpf.h) whose
	 * scheduler did not answer in time (user/capture/announce.h).
	 */
	CORO_USTAT_ANNOUNCE_UNANSWERED = 14,
	CORO_USTAT_MAX = 15,
};

/* The counters up to CORO_USTAT_GATE_TIMEOUTS: older captures' stats records end there. */
#define CORO_USTAT_V1_MAX 8

/* The counters of a stats record (CORO_REC_STATS), as the model keeps the latest. */
struct capture_stats {
	u64 bpf[CORO_STAT_MAX];	 /* sums of the per-CPU BPF counters (enum coro_stat) */
	u64 user[CORO_USTAT_MAX]; /* enum coro_user_stat */
};

#endif /* COROBPF_CAPTURE_INFO_H */
