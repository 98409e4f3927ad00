/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The event ABI: the only types the BPF programs and user space share.
 *
 * Every record the BPF side submits to the ring buffer starts with a
 * struct coro_event_hdr; `size` covers the whole record. Fields are
 * fixed-width, there are no pointers into the kernel, and the layout is the
 * on-disk layout of the raw capture (user/record/raw.h), so it is append-only:
 * new kinds get new numbers, retired kinds keep theirs as a comment, and
 * existing payloads only grow at their end (readers take `size` from the
 * header and accept records longer than they know).
 *
 * ABI version 1.
 */
#ifndef COROBPF_EVENT_ABI_H
#define COROBPF_EVENT_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define CORO_EVENT_ABI_VERSION 1

/* Bytes of a name or span label kept; 63 characters and the NUL. */
#define CORO_STR_LEN 64

/*
 * Record kinds. 1..127 are born in BPF; 128..255 are written by user space
 * into the same stream (process and thread metadata, loss counters, the
 * end of a capture): see user/record/raw.h. Append-only.
 */
enum coro_event_kind {
	CORO_EV_CREATE = 1,
	CORO_EV_NAME = 2,
	CORO_EV_READY = 3,
	CORO_EV_SWITCH = 4,
	CORO_EV_EXIT = 5,
	CORO_EV_SPAN_BEGIN = 6,
	CORO_EV_SPAN_END = 7,
	CORO_EV_LIBLOAD = 8, /* ld.so changed the link map (dlopen/dlclose) */
	CORO_EV_OFFCPU_BEGIN = 9, /* a traced thread left the CPU */
	CORO_EV_OFFCPU_END = 10,  /* ...and came back: the whole stretch */
	CORO_EV_PROC_NEW = 11,	  /* -a: a process fired its first probe and is traced from now */
	CORO_EV_EXEC = 12,	  /* a process called exec (-a: any; else a traced one) */
	CORO_EV_PROC_GONE = 13,	  /* -a: a traced process ended */
	/*
	 * The switch-function path (unmodified schedulers): raw facts from
	 * uprobes on context functions, turned into CREATE/SWITCH/EXIT by user
	 * space (user/model/ctxmap.c), which knows what the raw values identify.
	 */
	CORO_EV_CTX_CREATE = 14, /* a context was made */
	CORO_EV_CTX_SWITCH = 15, /* a thread switched contexts */
	CORO_EV_CTX_EXIT = 16,	 /* the thread's current context finished */
	CORO_EV_SAMPLE = 17,	 /* --stacks: a timer sample of a thread running a coroutine (hdr.cur) */
	/*
	 * The function a context was made to run, by address: user space names
	 * it from the process's mappings while it lives and passes a NAME on
	 * (the raw capture never holds this kind).
	 */
	CORO_EV_CTX_ENTRY = 18,
	/*
	 * Go (unmodified): a goroutine's status changed (runtime.casgstatus),
	 * raw; user space turns it into CREATE/READY/SWITCH/EXIT
	 * (user/model/gomodel.c).
	 */
	CORO_EV_GO_STATUS = 19,
	/*
	 * A new goroutine's start function, by address: turned into a NAME by
	 * user space while the process lives (never in the raw capture).
	 */
	CORO_EV_GO_ENTRY = 20,
	/*
	 * C++20 coroutines in unmodified programs (docs/cxx20.md): raw facts
	 * from uprobes on coroutine bodies, destroy clones and the stores of a
	 * frame's resume pointer, turned into CREATE/SWITCH/EXIT by user space
	 * (user/model/cxxmap.c), which keeps each thread's stack of resumes.
	 */
	CORO_EV_CXX = 21,
	CORO_EV_CXX_AWAIT = 22, /* an awaiter's await_suspend was called: what the frame waits on */
	/*
	 * The awaiter's type of the CORO_EV_CXX_AWAIT that follows (struct
	 * coro_ev_cxx_awaiter): born in user space (ringev.c) from the name the
	 * attach found for that call site, so the raw capture needs no table;
	 * never from BPF.
	 */
	CORO_EV_CXX_AWAITER = 23,
	/*
	 * The batched probe path (usdt/corobpf.h, BATCHED PATH): records a
	 * thread appended to its own buffer, copied out by the BPF side
	 * (struct coro_ev_batch). User space splits it into the CREATE, READY,
	 * SWITCH and EXIT records the trap path would have sent (batch.c), so
	 * captures never hold this kind.
	 */
	CORO_EV_BATCH = 24,
	/*
	 * What exists when a tracer attaches (usdt/corobpf.h, WHAT EXISTS WHEN A
	 * TRACER ATTACHES): one coroutine the scheduler listed (struct
	 * coro_ev_announce), and the end of its list (struct coro_ev_announce_done).
	 */
	CORO_EV_ANNOUNCE = 25,
	CORO_EV_ANNOUNCE_DONE = 26,
	CORO_EV_BPF_MAX = 127,
};

/*
 * coro_ev_switch.reason: the probe SDK's CORO_YIELD... (usdt/corobpf.h) are the
 * one definition; the event ABI carries them unchanged (probe ABI v1).
 */
#include "corobpf.h"
#if COROBPF_PROBE_ABI != 1
#error "the event ABI carries the switch reasons of probe ABI 1"
#endif
enum coro_switch_reason {
	CORO_R_UNKNOWN = CORO_UNKNOWN,
	CORO_R_YIELD = CORO_YIELD,
	CORO_R_WAIT = CORO_WAIT,
	CORO_R_SLEEP = CORO_SLEEP,
	CORO_R_IO = CORO_IO,
	CORO_R_DONE = CORO_DONE,
};

/* coro_event_hdr.flags */
enum coro_event_flags {
	CORO_EVF_STR_TRUNCATED = 1 << 0, /* the string was longer than CORO_STR_LEN - 1 */
	CORO_EVF_STR_FAULT = 1 << 1,	 /* the string could not be read: empty */
	CORO_EVF_CUR_UNKNOWN = 1 << 2,	 /* no switch seen on this thread yet: hdr.cur is 0 by default */
	CORO_EVF_NO_THREAD = 1 << 3,	 /* no per-thread state: hdr.cur and lost_before mean nothing */
	/*
	 * offcpu_end: the kernel ran the thread again without the sched_switch
	 * program seeing it come back; the stretch is closed at the thread's
	 * next record (this one's ts), which is later than the real return.
	 */
	CORO_EVF_OFFCPU_LATE = 1 << 4,
	/*
	 * Sent by an interpreter's session program (bpf/interp.bpf.h): asyncio's,
	 * Lua's. -a attaches them for every process: user space (ctxmap.c) gives
	 * such a process its switch_path records by them, should its mappings be
	 * gone before it could read them.
	 */
	CORO_EVF_RT_ASYNCIO = 1 << 5,
	CORO_EVF_RT_LUA = 1 << 6,
};

struct coro_event_hdr {
	__u16 size;  /* bytes in the whole record, header included */
	__u8 kind;   /* enum coro_event_kind */
	__u8 flags;  /* enum coro_event_flags */
	/*
	 * Events this thread produced but could not submit (ring buffer full)
	 * since its previous submitted event: tells the model exactly where
	 * its knowledge has a hole.
	 */
	__u32 lost_before;
	__u32 pid; /* process (tgid) */
	__u32 tid; /* thread */
	__u64 ts;  /* CLOCK_BOOTTIME, ns */
	/*
	 * The coroutine current on this thread before the event, as the BPF
	 * side tracks it from switch probes (0: the scheduler or none known).
	 * It is the waker of a ready event and the owner of a span.
	 */
	__u64 cur;
};

struct coro_ev_create {
	struct coro_event_hdr hdr;
	__u64 id;
	__u64 parent;
};

struct coro_ev_name {
	struct coro_event_hdr hdr;
	__u64 id;
	char name[CORO_STR_LEN];
};

/*
 * CORO_EV_ANNOUNCE: a coroutine alive when the scheduler answered a tracer's
 * request. reason 0: running now; CORO_R_YIELD: runnable; CORO_R_WAIT,
 * CORO_R_SLEEP, CORO_R_IO: suspended, waiting on obj.
 */
struct coro_ev_announce {
	struct coro_event_hdr hdr;
	__u64 id;
	__u64 parent;
	__u64 obj;
	__u32 reason;
	__u32 __pad;
	char name[CORO_STR_LEN];
};

/* CORO_EV_ANNOUNCE_DONE: the list is complete; asked: the request's count it answers. */
struct coro_ev_announce_done {
	struct coro_event_hdr hdr;
	__u64 asked;
};

struct coro_ev_ready {
	struct coro_event_hdr hdr; /* hdr.cur is the waker */
	__u64 id;
};

struct coro_ev_switch {
	struct coro_event_hdr hdr;
	__u64 from;
	__u64 to;
	__u64 obj;
	__u32 reason; /* enum coro_switch_reason */
	__u32 __pad;
};

struct coro_ev_exit {
	struct coro_event_hdr hdr;
	__u64 id;
	__s64 status;
};

struct coro_ev_span {
	struct coro_event_hdr hdr; /* hdr.cur owns the span */
	char name[CORO_STR_LEN];
};

struct coro_ev_libload {
	struct coro_event_hdr hdr;
};

/* hdr.pid: the process (PROC_NEW, EXEC, PROC_GONE). */
struct coro_ev_proc {
	struct coro_event_hdr hdr;
	__s32 exit_code; /* PROC_GONE: the wait status (exit code << 8 | signal); PROC_NEW of a fork: the parent */
	__u32 __pad;
	char comm[16];
};

/*
 * --stacks: CREATE, SWITCH, CTX_CREATE, CTX_SWITCH and SAMPLE records carry a
 * struct coro_stack_ref right after their payload (records without one are
 * shorter: hdr.size says). The user stack of the thread at the probe: the
 * spawn site at a create, the suspension point at a switch fired on the
 * stack of the coroutine being left. So do OFFCPU_BEGIN (where the
 * coroutine blocked) and, added later, SPAN_BEGIN (where the span began).
 */
enum coro_stack_how {
	CORO_STACK_NONE = 0,	   /* no stack: it could not be taken (counted: CORO_STAT_STACK_LOST) */
	CORO_STACK_KERNEL_ID = 1,  /* BPF, --stacks=fp: an id in the kernel's stack map */
	CORO_STACK_SAMPLE = 2,	   /* BPF, --stacks=dwarf: a struct coro_stack_sample follows */
	CORO_STACK_CAPTURE_ID = 3, /* user space: a stack id of the capture (CORO_REC_STACK) */
	/*
	 * User space, never in a capture: `id` return addresses (__u64, innermost
	 * first) follow, walked by user space itself (Go's parked goroutines).
	 */
	CORO_STACK_IPS = 4,
};

struct coro_stack_ref {
	__u32 id;  /* CORO_STACK_KERNEL_ID, CORO_STACK_CAPTURE_ID */
	__u32 how; /* enum coro_stack_how */
};

/*
 * --stacks=dwarf: the registers the unwinder starts from and the top of the
 * user stack, `len` bytes from sp (then padding to 8). User space unwinds it
 * with the objects' .eh_frame and replaces it by a capture stack id.
 */
struct coro_stack_sample {
	__u64 ip, sp, bp;
	__u32 len;
	__u32 __pad;
};

/* Bytes of user stack a sample may copy (--stack-bytes). */
#define CORO_STACK_BYTES_MAX 16384
/* Frames of a stack kept (the kernel's limit for its stack map, too). */
#define CORO_STACK_DEPTH 127

/*
 * A perf-event sample (--sample-hz) of a traced thread while it runs a
 * coroutine (hdr.cur): a struct coro_stack_ref follows, the stack it is
 * running on at that moment.
 */
struct coro_ev_sample {
	struct coro_event_hdr hdr;
	__u32 cpu;
	__u32 __pad;
};

/* Families of context functions the switch-function path knows. Append-only. */
enum coro_ctx_family {
	CORO_FAM_UCONTEXT = 1, /* glibc makecontext/swapcontext/setcontext: ids are ucontext_t addresses */
	CORO_FAM_FCONTEXT = 2, /* Boost.Context make/jump/ontop_fcontext: ids come from stack ranges */
	CORO_FAM_PTH = 3,      /* GNU Pth's names and exits, on top of ucontext */
	CORO_FAM_CUSTOM = 4,   /* --switch uprobe:...: ids are the values named on the command line */
	CORO_FAM_RUBY = 5,     /* libruby's coroutine_transfer: ids are coroutine_context addresses */
	CORO_FAM_QEMU = 6,     /* qemu_coroutine_switch: ids are Coroutine addresses */
	CORO_FAM_GREENLET = 7, /* Python greenlet's g_switchstack: ids are greenlet::Greenlet addresses */
	CORO_FAM_GO = 8,       /* Go's runtime.casgstatus: ids are goids */
	CORO_FAM_CXX20 = 9, /* C++20 coroutine bodies (GCC, Clang): ids are frame addresses */
	CORO_FAM_ASYNCIO = 10, /* CPython's asyncio tasks (the _asyncio module): ids are Task addresses */
	CORO_FAM_LUA = 11,     /* Lua 5.4 and LuaJIT coroutines (lua_resume): ids are lua_State addresses */
};

/* hdr.cur: the raw current context of the creating thread. */
struct coro_ev_ctx_create {
	struct coro_event_hdr hdr;
	__u64 id;	/* ucontext: its address; fcontext: the top of its stack */
	__u64 stack_lo; /* the stack it will run on, [lo, hi); 0, 0 if not known */
	__u64 stack_hi;
	__u32 family; /* enum coro_ctx_family */
	__u32 __pad;
};

/* hdr.cur: the raw current context before the switch. */
struct coro_ev_ctx_switch {
	struct coro_event_hdr hdr;
	__u64 from; /* raw: a context address, or an address on the stack being left */
	__u64 to;   /* raw: a context address, or an address on the stack to run */
	__u32 family;
	__u32 flags; /* enum coro_ctx_switch_flags */
};

enum coro_ctx_switch_flags {
	CORO_CTXF_FROM_CURRENT = 1 << 0, /* the function names no "from": it is hdr.cur */
	CORO_CTXF_FROM_DONE = 1 << 1,	 /* "from" finished: it will never run again (QEMU's terminate) */
	/*
	 * No switch: the running context was saved into `from` (getcontext);
	 * `to` is 0. A later switch to `from` resumes whoever saved it.
	 */
	CORO_CTXF_SAVE = 1 << 2,
	/*
	 * `from` runs on the thread's own stack (the mapping that holds the
	 * main thread's start of stack, or another thread's TLS block, which
	 * glibc puts at the top of its stack): the thread's main context. Said
	 * once per thread, of a family that names `from`.
	 */
	CORO_CTXF_FROM_MAIN = 1 << 3,
	/*
	 * No switch: `from` is the thread's main context (greenlet: a switch
	 * to the main greenlet is under way); `to` is 0.
	 */
	CORO_CTXF_MAIN = 1 << 4,
};

/* hdr.cur: the raw context that finished. */
struct coro_ev_ctx_exit {
	struct coro_event_hdr hdr;
	__u32 family;
	__u32 __pad;
};

/*
 * What the BPF side writes since exits carry a value (older captures have
 * the short record: status 0).
 */
struct coro_ev_ctx_exit_status {
	struct coro_ev_ctx_exit e;
	__s64 status; /* raw: the value the context exited with (pth_exit's), or 0 */
};

/* hdr.cur: the raw current context. Turned into a CORO_EV_NAME by user space (ringev.c). */
struct coro_ev_ctx_entry {
	struct coro_event_hdr hdr;
	__u64 id;   /* the context, raw */
	__u64 addr; /* the function it was made to run, in the process's address space */
	/*
	 * Where the process's executable has its code (the kernel's
	 * mm->start_code): its load bias, for naming addr once the process is
	 * gone (a short run read after its exit).
	 */
	__u64 start_code;
};

/*
 * The BPF cookie of a switch-function uprobe: what the instruction it sits
 * on means and where the values are. Registers are numbered as the x86-64
 * encoding does (rax 0 ... rsp 4 ... rdi 7, r8..r15 8..15).
 */
enum coro_ctx_op {
	CORO_CTXOP_SWITCH = 1, /* from = reg A + delta (or current if A is none), to = reg B */
	CORO_CTXOP_CREATE = 2, /* id = reg A; stack from the ucontext at A, or [A - reg B, A) */
	CORO_CTXOP_EXIT = 3,   /* the current context finished */
	CORO_CTXOP_NAME = 4,   /* pth_attr_set(attr A, field B, value C): remember a name */
	CORO_CTXOP_SPAWN = 5,  /* pth_spawn(attr A): the next create takes attr A's name */
	CORO_CTXOP_SAVE = 6,   /* getcontext(reg A): the current context saved there */
	/*
	 * Go's casgstatus(gp A, old B, new C); the cookie's delta field is the
	 * slot of the binary's struct offsets in the go_offsets map.
	 */
	CORO_CTXOP_GO = 7,
	CORO_CTXOP_MAIN = 8, /* reg A is the thread's main context, about to be switched to */
};

#define CORO_CTX_REG_NONE 0xff
#define CORO_CTX_COOKIE(op, a, b, c, fam, flags, delta)                                          \
	((__u64)(op) | (__u64)(a) << 8 | (__u64)(b) << 16 | (__u64)(c) << 24 |                    \
	 (__u64)(fam) << 32 | (__u64)(flags) << 40 | (__u64)(__u16)(delta) << 48)
#define CORO_CTX_COOKIE_OP(k) ((__u32)((k) & 0xff))
#define CORO_CTX_COOKIE_A(k) ((__u32)(((k) >> 8) & 0xff))
#define CORO_CTX_COOKIE_B(k) ((__u32)(((k) >> 16) & 0xff))
#define CORO_CTX_COOKIE_C(k) ((__u32)(((k) >> 24) & 0xff))
#define CORO_CTX_COOKIE_FAM(k) ((__u32)(((k) >> 32) & 0xff))
#define CORO_CTX_COOKIE_FLAGS(k) ((__u32)(((k) >> 40) & 0xff))
#define CORO_CTX_COOKIE_DELTA(k) ((__s64)(__s16)(__u16)((k) >> 48))

enum coro_ctx_cookie_flags {
	CORO_CTXC_STACK_UCONTEXT = 1 << 0, /* CREATE: the stack is in the ucontext_t at A */
	CORO_CTXC_STACK_REGS = 1 << 1,	   /* CREATE: the stack is [A - B, A) */
	/*
	 * SWITCH: reg C holds QEMU's CoroutineAction; COROUTINE_TERMINATE
	 * (CORO_QEMU_TERMINATE) says `from` finished.
	 */
	CORO_CTXC_ACTION_QEMU = 1 << 2,
	/* EXIT: only when reg A is nonzero (greenlet's did_finish(NULL) is a dealloc, not an end). */
	CORO_CTXC_EXIT_IF_A = 1 << 3,
	/* CREATE: the word at A is the function the context runs (QEMU's Coroutine.entry). */
	CORO_CTXC_ENTRY_AT_A = 1 << 4,
	/* EXIT: reg A is the value the context exits with (pth_exit's). */
	CORO_CTXC_EXIT_STATUS_A = 1 << 5,
	/*
	 * GO: reg A is a goroutine just made, its goid set (newproc1's return;
	 * at its Gdead -> Grunnable in casgstatus the goid is not assigned yet).
	 */
	CORO_CTXC_GO_CREATED = 1 << 6,
	/*
	 * -a: attached for one process (its libc's ucontext, attach.c): taken
	 * whenever that process started (the others, for every process, only in
	 * the processes started after the session began).
	 */
	CORO_CTXC_THIS_PID = 1 << 7,
};

/* QEMU's enum CoroutineAction (include/qemu/coroutine_int.h): the coroutine returned. */
#define CORO_QEMU_TERMINATE 2

/* pth_attr_set's field number for a thread's name (pth.h: PTH_ATTR_NAME). */
#define CORO_PTH_ATTR_NAME 1

/*
 * Go. The runtime's goroutine states (runtime2.go, stable since Go 1.13):
 * the values casgstatus is called with. The Gscan bit never reaches it.
 */
enum coro_go_status {
	CORO_GO_IDLE = 0,
	CORO_GO_RUNNABLE = 1,
	CORO_GO_RUNNING = 2,
	CORO_GO_SYSCALL = 3,
	CORO_GO_WAITING = 4,
	CORO_GO_DEAD = 6,
	CORO_GO_COPYSTACK = 8,
	CORO_GO_PREEMPTED = 9,
};

/* Slots of the go_offsets map: distinct layouts of runtime.g in one run. */
#define CORO_GO_SLOTS 64
/* Wait reasons a slot maps (Go's waitReason is a uint8; 1.19 has 27). */
#define CORO_GO_REASONS 64

/*
 * Where a Go binary keeps what the BPF side reads (user/elf/goelf.c: from
 * its DWARF, else a table by release). Offsets in bytes.
 */
struct coro_go_offsets {
	__u16 g_goid;	    /* runtime.g.goid (int64) */
	__u16 g_m;	    /* runtime.g.m (*m) */
	__u16 g_waiting;    /* runtime.g.waiting (*sudog) */
	__u16 g_waitreason; /* runtime.g.waitreason (uint8) */
	__u16 g_startpc;    /* runtime.g.startpc (uintptr) */
	__u16 m_curg;	    /* runtime.m.curg (*g) */
	__u16 sudog_c;	    /* runtime.sudog.c (*hchan) */
	__u16 sudog_elem;   /* runtime.sudog.elem (the semaphore's address in semacquire) */
	/* waitReason -> enum coro_switch_reason, from the binary's own waitReasonStrings. */
	__u8 reason[CORO_GO_REASONS];
	/* --stacks: runtime.g.sched's pc and bp (gobuf), where a parking goroutine was left. */
	__u16 g_sched_pc;
	__u16 g_sched_bp;
	/* runtime.g.sched.ctxt: a new goroutine's closure (its `go` statement's funcval). */
	__u16 g_sched_ctxt;
	__u8 __pad[2];
};

/* Frames of a parking goroutine's stack the BPF side walks (Grunning -> Gwaiting, --stacks). */
#define CORO_GO_PARK_DEPTH 32

/*
 * hdr.cur: the goroutine current on the thread before the change (0: the
 * scheduler); at a creation, the creator; at a ready, the waker.
 */
struct coro_ev_go_status {
	struct coro_event_hdr hdr;
	__u64 goid;
	__u64 obj;	   /* Gwaiting: the channel (gp.waiting->c), else the sudog's elem */
	__u32 old_status;  /* enum coro_go_status */
	__u32 new_status;
	__u8 waitreason;   /* Gwaiting: the runtime's waitReason */
	__u8 reason;	   /* ...mapped: enum coro_switch_reason */
	__u8 __pad[6];
	/*
	 * --stacks, Grunning -> Gwaiting: a struct coro_stack_ref of
	 * CORO_STACK_IPS follows, then CORO_GO_PARK_DEPTH addresses (the ref's
	 * id are used): where the goroutine parks, walked from its g.sched by
	 * its frame pointers (the probe runs on the thread's system stack).
	 * User space turns it into a capture stack id.
	 */
};

/* Words of a new goroutine's closure read with it (struct coro_ev_go_entry). */
#define CORO_GO_CTXT_WORDS 3

/* hdr.cur: the creator. Turned into a CORO_EV_NAME by user space (ringev.c). */
struct coro_ev_go_entry {
	struct coro_event_hdr hdr;
	__u64 goid;
	__u64 startpc; /* runtime.g.startpc: the function the goroutine runs */
	/*
	 * The closure it starts with (runtime.g.sched.ctxt, 0 if unread), its
	 * words 1.. and the word each of those points to (0 where unreadable):
	 * where the closure the compiler wraps a `go f(x)` statement in keeps
	 * f when f is a function value or a closure, and f's code address.
	 */
	__u64 ctxt;
	__u64 ctxt_word[CORO_GO_CTXT_WORDS];
	__u64 ctxt_deref[CORO_GO_CTXT_WORDS];
};

/*
 * C++20 coroutines (CORO_EV_CXX, CORO_EV_CXX_AWAIT). The BPF cookie of a
 * site: what it is, where the frame is (register + displacement), and the
 * index of its coroutine's (or awaiter's) name, capture-wide.
 */
enum coro_cxx_op {
	/*
	 * A body's entry (frame = A; delta: where GCC keeps the frame's resume
	 * index, 0 if unknown); a session: its return is CORO_CXX_RETURN.
	 */
	CORO_CXX_BODY = 1,
	CORO_CXX_DESTROY = 2, /* a destroy or cleanup clone's entry (frame = A) */
	CORO_CXX_CREATE = 3,  /* a store of a body's address: frame = A + delta */
	CORO_CXX_AWAIT = 4,   /* a call of Awaiter::await_suspend(handle): frame = A (rsi) */
	CORO_CXX_RETURN = 5,  /* (records only) the body returned */
	CORO_CXX_START = 6,   /* a ramp calls the body (frame = A): its first run, part of the creation */
	/*
	 * A body hands over to another by calling its resume function (GCC
	 * without optimization compiles a symmetric transfer as a call): the
	 * body running on the thread is suspended from here.
	 */
	CORO_CXX_XFER = 7,
	/*
	 * The entry of a Clang ramp of its own that runs an eager coroutine's
	 * body up to its first suspension inline (user/elf/cxxcoro.c): a
	 * session, `frame` being the stack pointer at the entry. Its return
	 * (CORO_CXX_RAMP_RETURN, records only) is the end of that first run.
	 */
	CORO_CXX_RAMP = 8,
	CORO_CXX_RAMP_RETURN = 9,
};

#define CORO_CXX_COOKIE(op, a, delta, fn)                                                          \
	((__u64)(op) | (__u64)(a) << 8 | (__u64)(__u16)(delta) << 16 | (__u64)(__u32)(fn) << 32)
#define CORO_CXX_COOKIE_OP(k) ((__u32)((k) & 0xff))
#define CORO_CXX_COOKIE_A(k) ((__u32)(((k) >> 8) & 0xff))
#define CORO_CXX_COOKIE_DELTA(k) ((__s64)(__s16)(__u16)((k) >> 16))
#define CORO_CXX_COOKIE_FN(k) ((__u32)((k) >> 32))

/* CORO_EV_CXX_AWAITER: the class whose await_suspend the frame called, demangled. */
struct coro_ev_cxx_awaiter {
	struct coro_event_hdr hdr;
	__u64 frame;
	char name[CORO_STR_LEN];
};

enum coro_cxx_flags {
	CORO_CXXF_WORD_UNREAD = 1 << 0, /* `word` could not be read */
	CORO_CXXF_PREV_UNREAD = 1 << 1, /* `prev_word` could not be read */
	/*
	 * RETURN of a GCC body whose cookie gave the place of the frame's
	 * resume index (BODY: delta): `prev_word` is that index (2: the initial
	 * suspend point).
	 */
	CORO_CXXF_INDEX = 1 << 2,
	/*
	 * AWAIT: the frame's first word was 0 at the call, its final suspend
	 * point (the compilers null the resume pointer before the final
	 * awaiter's await_suspend, as done() must say true there): the switch
	 * out that follows is its end, not a wait.
	 */
	CORO_CXXF_FINAL = 1 << 3,
};

struct coro_ev_cxx {
	struct coro_event_hdr hdr;
	__u64 frame;
	__u64 sp;   /* BODY, RETURN: rsp at the entry (where the return address was); else 0 */
	/*
	 * BODY, RETURN: the frame's first word (its resume pointer; 0 once at
	 * the final suspend point). AWAIT: the awaiter's address.
	 */
	__u64 word;
	/*
	 * BODY: the frame this thread entered before (0: none) and its first
	 * word now: whether the coroutine that handed over in a symmetric
	 * transfer had reached its final suspend point.
	 */
	__u64 prev, prev_word;
	__u32 fn; /* the cookie's name index */
	__u8 op;  /* enum coro_cxx_op */
	__u8 flags; /* enum coro_cxx_flags */
	__u16 __pad;
};

/*
 * Interpreted runtimes (docs/python.md, docs/lua.md): CPython's asyncio
 * tasks and Lua's coroutines, seen through uprobe sessions (kernel 6.13+:
 * one program sees a function's entry and its return) on the interpreter's
 * own functions. The BPF side reads the interpreter's structures at the
 * offsets of its version (a slot of the py_layouts or lua_layouts map, which
 * user space fills before attaching) and sends the probe ABI's records
 * (CREATE, NAME, SWITCH, EXIT): no record kind of its own.
 *
 * The cookie of a site: what the function is, the layout slot, a reason
 * (CORO_RT_LUA_YIELD_AT) and flags.
 */
enum coro_rt_op {
	/* TaskStepMethWrapper's tp_call(wrapper A): a step of the task at A + sw_task. */
	CORO_RT_PY_STEP = 1,
	/* task_wakeup(task A, future): a step of task A, its awaited future done. */
	CORO_RT_PY_WAKEUP = 2,
	/* Task.__init__(task A, ...): made (and named) when it returns 0. */
	CORO_RT_PY_INIT = 3,
	/* lua_resume(L A, from B): L runs until it yields, returns or fails. */
	CORO_RT_LUA_RESUME = 4,
	/* Lua 5.4's lua_newthread(L): the new thread, returned (LuaJIT's are made at their first resume). */
	CORO_RT_LUA_NEWTHREAD = 5,
	/* lua_resetthread(L A) / lua_closethread(L A, from): a suspended coroutine closed. */
	CORO_RT_LUA_CLOSE = 6,
	/* A call of lua_yield: the reason the cookie gives is why its coroutine now yields. */
	CORO_RT_LUA_YIELD_AT = 7,
};

enum coro_rt_flags {
	/* lua_resume names no resumer (LuaJIT's lua_resume(L, nargs)): it is the thread's current. */
	CORO_RT_F_FROM_CURRENT = 1 << 0,
	/*
	 * Attached mid-life: a task or coroutine made before is named the first
	 * time it runs (an LRU map says which were named).
	 */
	CORO_RT_F_NAME_UNSEEN = 1 << 1,
};

#define CORO_RT_COOKIE(op, slot, reason, flags)                                                    \
	((__u64)(op) | (__u64)(slot) << 8 | (__u64)(reason) << 16 | (__u64)(flags) << 24)
#define CORO_RT_COOKIE_OP(k) ((__u32)((k) & 0xff))
#define CORO_RT_COOKIE_SLOT(k) ((__u32)(((k) >> 8) & 0xff))
#define CORO_RT_COOKIE_REASON(k) ((__u32)(((k) >> 16) & 0xff))
#define CORO_RT_COOKIE_FLAGS(k) ((__u32)(((k) >> 24) & 0xff))

/* Layouts of one run: slots of the py_layouts and lua_layouts maps. */
#define CORO_RT_SLOTS 8

/* CPython's fut_state (Modules/_asynciomodule.c). */
enum coro_py_fut_state {
	CORO_PY_PENDING = 0,
	CORO_PY_CANCELLED = 1,
	CORO_PY_FINISHED = 2,
};

/* Bytes of a coroutine's __qualname__ that py_waits keys hold: what it awaits in. */
#define CORO_PY_QUALNAME 48

/*
 * Where a CPython version keeps what the BPF side reads (user/elf/interp.c:
 * a table by version, checked against the module's own type sizes). Bytes.
 */
struct coro_py_layout {
	__u16 sw_task;	      /* TaskStepMethWrapper.sw_task */
	__u16 fut_state;      /* FutureObj.fut_state (int) */
	__u16 fut_exception;  /* FutureObj.fut_exception */
	__u16 task_waiter;    /* TaskObj.task_fut_waiter */
	__u16 task_coro;      /* TaskObj.task_coro */
	__u16 task_name;      /* TaskObj.task_name (a str) */
	__u16 ob_type;	      /* PyObject.ob_type */
	__u16 tp_name;	      /* PyTypeObject.tp_name (char *) */
	__u16 coro_qualname;  /* PyCoroObject.cr_qualname */
	__u16 coro_state;     /* PyCoroObject.cr_frame_state (int8) */
	__u16 coro_frame;     /* PyCoroObject.cr_iframe: the frame, inline */
	__u16 frame_stacktop; /* _PyInterpreterFrame.stacktop (int, from localsplus) */
	__u16 frame_locals;   /* _PyInterpreterFrame.localsplus */
	__u16 str_state;      /* PyASCIIObject.state (bit CORO_PY_STR_ASCII: compact ASCII) */
	__u16 str_ascii;      /* where a compact ASCII str's characters are */
	__u16 str_utf8;	      /* PyCompactUnicodeObject.utf8 (char *, may be NULL) */
	__s8 suspended;	      /* cr_frame_state of a coroutine suspended at an await */
	__u8 __pad[7];
};

#define CORO_PY_STR_ASCII (1u << 6)

/*
 * Where a Lua version keeps what the BPF side reads (user/elf/interp.c: a
 * table by version). Bytes. Lua 5.4's stack slots are a value and a tag
 * byte; LuaJIT's (GC64) are one tagged word.
 */
struct coro_lua_layout {
	__u16 l_status;	   /* lua_State.status (a byte) */
	__u16 l_top;	   /* lua_State.top (a stack slot pointer) */
	/*
	 * 5.4: lua_State.ci, and l_base_ci lua_State.base_ci (whose first
	 * field is its function's slot): a thread not started runs base_ci.
	 * LuaJIT: lua_State.cframe (NULL: it can be resumed); l_base_ci unused.
	 */
	__u16 l_ci;
	__u16 l_base_ci;
	__u16 tv_size;	   /* bytes of a stack slot */
	__u16 tv_tag;	   /* 5.4: where a slot's type tag byte is */
	__u16 fn_proto;	   /* 5.4: LClosure.p; LuaJIT: GCfuncL.pc (the code after the proto) */
	__u16 fn_ffid;	   /* LuaJIT: GCfunc.ffid (a byte; 0: a Lua function) */
	__u16 proto_size;  /* LuaJIT: sizeof(GCproto), between it and its code; 5.4: 0 */
	__u16 pt_source;   /* Proto.source / GCproto.chunkname (a string) */
	__u16 pt_line;	   /* Proto.linedefined / GCproto.firstline (int) */
	__u16 str_tag;	   /* 5.4: TString.tt (a byte): short strings are tag_shrstr */
	__u16 str_len;	   /* 5.4: TString.shrlen (a byte); LuaJIT: GCstr.len (u32) */
	__u16 str_lnglen;  /* 5.4: TString.u.lnglen (a long string's length) */
	__u16 str_data;	   /* where a string's characters are */
	/* 5.4: lua_State.l_G and global_State.mainthread (the state lua_newstate made); else 0 */
	__u16 l_global;
	__u16 g_mainthread;
	__u8 tag_lclosure; /* 5.4: a Lua closure's slot tag (LUA_VLCL, collectable) */
	__u8 tag_shrstr;   /* 5.4: LUA_VSHRSTR */
	__u8 luajit;	   /* 1: LuaJIT GC64 (a function slot: tag 0x1fff7 in bits 47..63) */
	__u8 __pad[3];
};

/* Why a thread was off the CPU: from sched_switch's prev_state. Append-only. */
enum coro_offcpu_state {
	CORO_OFF_PREEMPTED = 0, /* still runnable: waited on a run queue */
	CORO_OFF_SLEEPING = 1,	/* TASK_INTERRUPTIBLE: waiting for an event (read, futex, sleep) */
	CORO_OFF_DISK = 2,	/* TASK_UNINTERRUPTIBLE: usually disk or a kernel lock */
	CORO_OFF_OTHER = 3,	/* stopped, traced, dying, ... */
};

/* hdr: the thread leaving the CPU; hdr.cur: its coroutine. */
struct coro_ev_offcpu_begin {
	struct coro_event_hdr hdr;
	__u32 state; /* enum coro_offcpu_state */
	__u32 cpu;   /* the CPU it left */
};

/* hdr: the thread coming back (hdr.ts: now); hdr.cur: its coroutine all along. */
struct coro_ev_offcpu_end {
	struct coro_event_hdr hdr;
	__u64 start;   /* when it left the CPU */
	__u64 runq_ns; /* of the stretch, the time it was runnable but not running */
	__u32 state;   /* enum coro_offcpu_state, as it left */
	__u32 cpu;     /* the CPU it runs on now */
};

/* Indexes of the per-CPU counters in the `stats` map. Append-only. */
enum coro_stat {
	CORO_STAT_RING_FULL = 0,     /* events dropped: ring buffer full */
	CORO_STAT_STR_FAULT = 1,     /* strings that could not be read (event kept, empty) */
	CORO_STAT_NO_TASK_STATE = 2, /* per-thread state could not be allocated (event kept) */
	CORO_STAT_WAKEUPS = 3,	     /* reader wakeups forced by the BPF side */
	/*
	 * The map of traced processes was full: -a, events of a process that
	 * could not be admitted; --follow, forked processes not followed.
	 */
	CORO_STAT_MAP_FULL = 4,
	/*
	 * --stacks: a stack that could not be taken (the kernel stack map full,
	 * the user stack unreadable, the per-CPU buffer in use): the event is
	 * kept, without its stack.
	 */
	CORO_STAT_STACK_LOST = 5,
	/* Go: a goroutine's fields could not be read at a status change (event kept, zeros). */
	CORO_STAT_GO_FAULT = 6,
	/*
	 * C++20: a body returned and its frame's first word could not be read
	 * (whether it suspended or finished is not known: taken as suspended).
	 */
	CORO_STAT_CXX_UNREAD = 7,
	/*
	 * CORO_STAT_MAX stays the size of the capture's stats record
	 * (user/record/raw.h), which older captures fix; the counters after it
	 * live in the BPF map only (CORO_STAT_MAP_MAX): the capture carries
	 * those that count a loss among its user-space counters
	 * (CORO_USTAT_BATCH_*, user/record/raw.h). Records of the
	 * batched path lost to a full ring are also counted in
	 * CORO_STAT_RING_FULL, one per event, like the trap path's.
	 */
	CORO_STAT_MAX = 8,
	/* Batched path: records dropped, the ring buffer full. */
	CORO_STAT_BATCH_RING_FULL = 8,
	/* Batched path: reads of a thread's buffer that failed (page not present), left for later. */
	CORO_STAT_BATCH_DEFERRED = 9,
	/* Batched path: records lost, their buffer unreadable before the thread reused it or ended. */
	CORO_STAT_BATCH_UNREAD = 10,
	/*
	 * Batched path: last copies (the thread execs or ends) that could not
	 * read the buffer at all: what it wrote since its last copy is lost,
	 * up to 256 records each.
	 */
	CORO_STAT_BATCH_FINAL_UNREAD = 11,
	/*
	 * Batched path: a thread started its buffer again (a new generation)
	 * before this session copied all of the last one: its own doing (a
	 * program rewriting its buffer), or a copy the BPF side could not make.
	 * Up to 256 records lost each.
	 */
	CORO_STAT_BATCH_GEN_JUMPS = 12,
	/*
	 * Batched path: a thread's buffer could not be registered (no memory
	 * for its entry in batch_bufs): its records are read only when its
	 * buffer fills.
	 */
	CORO_STAT_BATCH_UNREGISTERED = 13,
	CORO_STAT_MAP_MAX = 14,
};

/*
 * CORO_EV_BATCH: `n` struct corobpf_batch_rec of one thread, in its order,
 * from `first` (its index in the thread's buffer). hdr.ts is when they were
 * copied (no record of them can be later); hdr.cur and the
 * CORO_EVF_CUR_UNKNOWN flag are the thread's before the first record;
 * hdr.lost_before, the events lost before it. Never in a capture.
 */
struct coro_ev_batch {
	struct coro_event_hdr hdr;
	__u32 n;
	__u32 first;
	__u64 buf; /* the buffer's address in the thread's process */
	/*
	 * Records stamped before this time are not this session's (written
	 * before it started, or before the thread did: a forked child's copy
	 * of its parent's records): the first copy of a buffer the session
	 * met already in use; 0 otherwise.
	 */
	__u64 floor;
	/* struct corobpf_batch_rec rec[n] follow */
};

/* Records one ring record carries at most (a full buffer: one record). */
#define CORO_BATCH_RECS_MAX 256

/* One session's view of one buffer of a thread (map batch_threads, bpf/batch.bpf.h). */
struct coro_batch_thread {
	__u64 buf;	 /* struct corobpf_batch's address (0: slot unused) */
	__u32 pid;
	__u32 gen;	 /* the generation of the word when last read */
	__u32 consumed;	 /* records of that generation already copied out */
	__u32 fresh;	 /* met, its generation not read yet: a change is no jump */
	__u64 floor;	 /* for the next copy: coro_ev_batch.floor (0: none) */
};

/*
 * A thread's buffers: one per executable or shared object whose probes it
 * fired (a program and an instrumented library); a third replaces the
 * second.
 */
#define CORO_BATCH_SLOTS 2

/*
 * Where a thread's buffers are (map batch_bufs: task storage, shared by
 * every session through a pin in bpffs, user/capture/batch.c): a thread
 * tells corobpf once, at its first record, so a session that starts later
 * learns them here. Only addresses, for the image that registered them:
 * what each session has read of them is its own (batch_threads). The
 * layout is the pin's (its name carries CORO_BATCH_REG_VERSION).
 */
#define CORO_BATCH_REG_VERSION 1
struct coro_batch_reg {
	__u64 exec_id; /* the task's self_exec_id then: another image never reads them */
	__u64 tp;      /* its thread pointer then: a forked child, same tp, has the same buffers */
	__u64 buf[CORO_BATCH_SLOTS];
};

/*
 * The end of a run: one buffer's unread records, in the output of the
 * iterator coro_batch_tails (bpf/batch.bpf.h), `n` struct corobpf_batch_rec
 * after it.
 */
struct coro_batch_tail {
	__u32 pid;
	__u32 tid;
	__u32 n;
	__u32 first; /* the first one's index in the buffer */
	__u64 buf;
	__u64 floor; /* as coro_ev_batch.floor */
	__u64 ts;    /* when they were read */
};

/* Per-thread state, in task local storage. */
struct coro_task_state {
	__u64 cur;  /* current coroutine on this thread */
	__u32 lost; /* submits failed since the last successful one */
	__u32 cur_valid; /* a switch was seen on this thread */
	__u64 off_ts;	 /* left the CPU at (0: on it) */
	__u64 wake_ts;	 /* woken at, while off it (0: not yet) */
	__u32 off_state; /* enum coro_offcpu_state */
	__u32 pth_spawning; /* Pth: in a pth_spawn whose attr carries pth_name */
	__u64 pth_attr;	    /* Pth: the attr pth_name was last set on */
	char pth_name[CORO_STR_LEN];
	__u8 pth_name_flags; /* CORO_EVF_STR_* of pth_name */
	__u8 main_seen;	     /* a switch from the thread's own stack was said (FROM_MAIN) */
	__u8 __pad2[6];
	__u64 cxx_last; /* C++20: the frame whose body this thread entered last */
	/*
	 * C++20: the frame whose destroy clone this thread entered: GCC's runs
	 * the body next, which is no resume and leaves cxx_last as it was.
	 */
	__u64 cxx_destroying;
	/*
	 * Lua: why the coroutine running on this thread yields (a call of
	 * lua_yield whose site says: nginx's ngx.sleep, a cosocket), taken by
	 * the lua_resume it returns to.
	 */
	__u32 rt_reason;
	__u8 rt_mark; /* the CORO_EVF_RT_* of the interpreter program running on this thread */
	__u8 __pad3[3];
};
/*
 * Go keeps its goroutine in hdr.cur like any family: `cur` is the goid the
 * thread runs (0: its scheduler), kept through a syscall, so off-CPU
 * stretches, samples and spans go to the goroutine that made them.
 */

#endif /* COROBPF_EVENT_ABI_H */
