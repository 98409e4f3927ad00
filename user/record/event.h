/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The decoded event: what the model tells its observers about each record it
 * applied. Observers (the detectors and the writers) see this, never a
 * record's layout: the model decodes the record once, applies it, and hands
 * over the kind, the header's facts, the coroutine, thread and process it
 * concerns as the model sees them after applying it, and the payload with
 * exactly the fields the writers use.
 *
 * Kinds keep the numbers of the records they come from (bpf/coro_abi.h,
 * user/record/records.h; kinds.c checks each beside its row), so a kind is named
 * the same way in every output; records that never reach observers (contexts
 * of the switch-function path, stack definitions) have no kind here.
 *
 * Strings are a pointer and a length, valid during the callback only; the
 * bytes are those the record carried (not sanitized, no NUL inside `len`).
 * A span's and a comm's point at the record's fixed field of CORO_STR_LEN
 * (16 for a comm) bytes, which the model copies whole; a name's, at up to
 * CORO_NAME_MAX - 1 bytes.
 */
#ifndef COROBPF_EVENT_H
#define COROBPF_EVENT_H

#include <string.h>
#include "util.h"

struct coro;
struct coro_thread;
struct coro_process;

/*
 * The longest name a name event carries, its NUL included: one made in user
 * space (C++20's functions, Go's, QEMU's entries) may be longer than the
 * CORO_STR_LEN the BPF side reads (kinds.h, coro_name_record()).
 */
#define CORO_NAME_MAX 256

/* Kinds up to this one are born in BPF (bpf/coro_abi.h), those above in user space. */
#define EV_BPF_MAX 127

enum event_kind {
	EV_CREATE = 1,
	EV_NAME = 2,
	EV_READY = 3,
	EV_SWITCH = 4,
	EV_EXIT = 5,
	EV_SPAN_BEGIN = 6,
	EV_SPAN_END = 7,
	EV_LIBLOAD = 8,
	EV_OFFCPU_BEGIN = 9,
	EV_OFFCPU_END = 10, /* the whole stretch off the CPU */
	EV_PROC_NEW = 11,
	EV_EXEC = 12,
	EV_PROC_GONE = 13, /* -a, --follow: the kernel saw a traced process end */
	EV_SAMPLE = 17,
	EV_ANNOUNCE = 25,      /* a coroutine the scheduler listed for a tracer that attached */
	EV_ANNOUNCE_DONE = 26, /* ...and the end of that list */
	EV_PROCESS = 128,     /* a traced process announced */
	EV_THREAD = 129,      /* a thread's name */
	EV_OBJECT = 130,      /* probes attached in an object */
	EV_PROC_EXIT = 131,   /* user space saw a traced process end */
	EV_STATS = 132,	      /* loss counters so far (the model keeps them) */
	EV_END = 133,	      /* the capture ended cleanly */
	EV_SWITCH_PATH = 134, /* switch-function uprobes attached in an object */
	EV_LOST = 138,	      /* a hole alone: lost_before, before a record of no line (JSONL) */
};

/* How a traced process came to be traced (EV_PROCESS). */
enum coro_proc_mode {
	CORO_PROC_ATTACHED = 1, /* -p: attached to a running process */
	CORO_PROC_LAUNCHED = 2, /* -- CMD: traced from its first instruction */
	CORO_PROC_FORKED = 3,	/* --follow: forked by a traced process, traced from the fork */
};

/* Why the capture ended (EV_END). */
enum coro_end_reason {
	CORO_END_TARGETS_EXITED = 1,
	CORO_END_SIGNAL = 2,
	CORO_END_DURATION = 3,
	CORO_END_ERROR = 4,
};

/* Names in the outputs (event.c): "create", "offcpu", "process_exit", ... */
const char *event_kind_name(enum event_kind kind);
/* enum coro_ctx_family as text ("ucontext", "boost-context", "pth", "custom"), and back (0: unknown). */
const char *coro_family_name(u32 family);
u32 coro_family_parse(const char *name);
const char *coro_reason_name(u32 reason);	     /* enum coro_switch_reason */
const char *coro_end_reason_name(u32 reason);   /* enum coro_end_reason */
const char *coro_proc_mode_name(u32 mode);	     /* enum coro_proc_mode */
const char *coro_offcpu_state_name(u32 state);  /* enum coro_offcpu_state */

struct ev_str {
	const char *s;
	u32 len;
};

/* A fixed-size field: up to its first NUL. */
static inline struct ev_str str_field(const char *s, size_t max)
{
	return (struct ev_str){s, (u32)strnlen(s, max)};
}

struct event {
	enum event_kind kind;
	u32 pid, tid;
	u64 ts;
	u64 seq;	     /* serial of the record in the model's stream, 1.. */
	u32 lost_before;     /* events its thread lost just before this one */
	u32 stack;	     /* --stacks: the capture stack id it carries (model_stack()), 0: none */
	bool str_truncated;  /* its string was longer than the probe keeps */
	bool str_unreadable; /* its string could not be read: empty */
	bool per_thread;     /* a BPF event about its thread (the thread view follows it) */
	/* The header's flags the model reads (bpf/coro_abi.h, records.h CORO_EVF_*). */
	bool no_thread;	     /* no per-thread state: cur and lost_before mean nothing */
	bool cur_unknown;    /* no switch seen on its thread yet: cur is 0 by default */
	bool cur_unsaid;     /* read back from JSONL, whose line does not say what ran there */
	/*
	 * The coroutine current on the thread before the event (0: none), and
	 * whether that is certain: the waker of a ready, the creator of a
	 * create, the owner of a span.
	 */
	u64 cur;
	bool cur_known;

	const struct coro *c;		 /* the coroutine it is about, or NULL */
	/*
	 * The coroutine it is about (its create, name, ready, exit or span) is
	 * not followed: more were alive than the model's caps allow (model.h,
	 * model_limit()). c is NULL; the event is counted as events_over_cap.
	 * Or a span_begin the caps on open spans did not keep, and its
	 * span_end (model_limit_spans(); c is set): no span is opened or closed.
	 */
	bool over_cap;
	const struct coro *to;		 /* EV_SWITCH: the coroutine switched in */
	const struct coro_thread *thread; /* its thread, if the model holds one for it; or NULL */
	const struct coro_process *proc;  /* its process (c's, if any), if the model knows it */

	union {
		struct {
			u64 id, parent;
		} create;
		struct {
			u64 id;
			struct ev_str name;
		} name;
		struct {
			u64 id; /* the waker is cur, if cur_known */
		} ready;
		struct {
			u64 id, parent, obj;
			/* 0: running; CORO_R_YIELD: runnable; CORO_R_WAIT, _SLEEP, _IO: suspended */
			u32 reason;
			struct ev_str name;
		} announce;
		struct {
			u64 asked; /* the request's count the list answers (usdt/corobpf.h) */
		} announce_done;
		struct {
			u64 from, to, obj;
			u32 reason; /* enum coro_switch_reason */
			/*
			 * A C++20 coroutine's wait: the type of the awaiter whose
			 * await_suspend suspended it, demangled (len 0: not known;
			 * user/model/cxxmap.h). The suspended coroutine's `awaiter`
			 * says the same from its switch out on.
			 */
			struct ev_str awaiter;
		} sw;
		struct {
			u64 id;
			s64 status;
		} exit;
		struct {
			struct ev_str name;
			u64 owner;	  /* coroutine id owning it, 0: the thread */
			bool owner_known;
			u32 depth;	  /* after a begin, before an end */
			bool matched;	  /* EV_SPAN_END closed an open span */
			bool before_trace; /* ...or not, its begin perhaps older than the trace */
		} span;
		struct {
			u64 start;   /* EV_OFFCPU_END: when it left the CPU (ts: when it came back) */
			u64 runq_ns; /* EV_OFFCPU_END: of which runnable but not running */
			u32 state;   /* enum coro_offcpu_state, as it left */
			u32 cpu;     /* begin: the CPU it left; end: the one it runs on now */
			bool late;   /* EV_OFFCPU_END: its return went unseen (CORO_EVF_OFFCPU_LATE) */
			/*
			 * EV_OFFCPU_END: when it was back as the model takes it: ts, or for a late
			 * one the thread's first record since it left, if earlier (apply.c)
			 */
			u64 end;
			/*
			 * EV_OFFCPU_END: whose time the stretch is, as the model takes it: c (the
			 * coroutine running on the thread now), or for a late one the coroutine
			 * that left the CPU (apply.c); NULL: none
			 */
			struct coro *owner;
		} offcpu;
		struct {
			struct ev_str comm, exe;
			u32 mode; /* enum coro_proc_mode */
			u32 ppid;
			u64 traced_from; /* CORO_PROC_ATTACHED: its trace is whole from then (0: unknown) */
		} process;
		struct {
			struct ev_str comm; /* EV_THREAD: the thread's; EV_EXEC: the new program's */
		} comm;
		struct {
			struct ev_str path;
			u32 probes;
			bool late; /* attached after the object was mapped */
		} object;
		struct {
			struct ev_str path, sites, limits;
			u32 family; /* enum coro_ctx_family */
			u32 uprobes, stepped;
		} switch_path;
		struct {
			s32 status; /* EV_PROC_EXIT, EV_PROC_GONE: the wait status, or -1 */
		} proc_exit;
		struct {
			u32 reason; /* enum coro_end_reason */
		} end;
		struct {
			/* CORO_STAT_MAX and nuser <= CORO_USTAT_MAX counters (capture_info.h) */
			const u64 *bpf, *user;
			u32 nuser; /* an older capture's are fewer: the others are 0 */
		} stats;
	};
};

#endif
