// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel side of corobpf: one program per probe of the probe ABI
 * (usdt/corobpf.h), all writing into one ring buffer.
 *
 * Cost discipline: the uprobe trap itself is ~0.5 us; everything here must
 * stay small next to it. No wakeup per event (the reader is woken only when
 * a lot of data waits, at most once per millisecond per CPU), one task
 * storage lookup per event, no hash maps on the hot path.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "coro_abi.h"

#define E2BIG 7 /* errno.h is not for BPF */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space between open and load. */
const volatile __u64 wakeup_bytes = 1 << 20;	  /* wake the reader when this much waits */
const volatile __u64 wakeup_min_gap_ns = 1000000; /* ...but at most once per ms per CPU */
const volatile bool sched_view = true; /* off-CPU stretches of traced threads (--no-sched) */
/*
 * -a: probes are attached for every process; a process is admitted on its
 * first probe hit if it passes the filters (comm prefix, pid list), and the
 * verdict is kept in `traced`.
 */
const volatile bool system_wide = false;
#define COMM_FILTER_MAX 16 /* --comm, repeatable: a process passes if its name starts with any */
const volatile char comm_filter[COMM_FILTER_MAX][16] = {};
const volatile __u32 comm_filter_len[COMM_FILTER_MAX] = {};
const volatile __u32 ncomm_filter = 0;
/*
 * --follow: probes are attached for every process too, but only the targets
 * and the processes they fork (admitted at the fork, before the child runs)
 * are in `traced`; nothing is admitted on sight.
 */
const volatile bool follow = false;
#define PID_FILTER_MAX 16
const volatile __u32 pid_filter[PID_FILTER_MAX] = {};
const volatile __u32 npid_filter = 0;

/*
 * Set by user space when tracing stops: detaching uprobes costs the kernel
 * ~50 ms each (serialised), so the programs fall silent at once and the
 * links are destroyed in the background.
 */
volatile __u32 stopped;
/* A launched process held at each link-map change until user space has looked (0: none). */
volatile __u32 hold_tgid;
/*
 * A command launched through a script (or any file the kernel runs through
 * an interpreter): held at each exec, in its new image before its first
 * instruction, until user space has attached to that image (0: none).
 */
volatile __u32 exec_hold_tgid;
/*
 * A launched ELF command, at its first exec only (this is cleared there):
 * held in its new image before its first instruction, so that user space
 * checks that the file the kernel runs is the file it examined and
 * attached to, before letting it run. exec_check_held says it was held (the
 * hold comes only once its exec record is in the ring).
 */
volatile __u32 exec_check_tgid;
volatile __u32 exec_check_held;
/* corobpf's own process: the parent of what it launched (see held_by_live_tracer()). */
volatile __u32 tracer_tgid;

/*
 * A hold's SIGSTOP is answered by corobpf's SIGCONT, or, if corobpf dies,
 * by the parent-death SIGCONT the launched program gets when it is
 * reparented. corobpf has several threads: the thread that launched the
 * program may exit (and the program be reparented, continued) while
 * another thread still keeps the probes attached; a hold after that would
 * never be answered. So a program is held only while its parent is a
 * corobpf thread that is not exiting (PF_EXITING).
 */
static __always_inline bool held_by_live_tracer(struct task_struct *task)
{
	if (!tracer_tgid)
		return true;
	return BPF_CORE_READ(task, real_parent, tgid) == (int)tracer_tgid &&
	       !(BPF_CORE_READ(task, real_parent, flags) & 0x4 /* PF_EXITING */);
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by user space (--ring-size) */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CORO_STAT_MAP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* This CPU's wakeup policy (submit_flags()). */
struct wakeup_state {
	__u64 last;    /* the last forced wakeup, CLOCK_BOOTTIME */
	__u64 submits; /* records submitted: the ring's fill is looked at every WAKEUP_CHECK_EVERY */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wakeup_state);
} last_wakeup SEC(".maps");

/* FOLLOWED: forked by a traced process under --follow (its exit is reported from here). */
enum { VERDICT_TRACED = 1, VERDICT_IGNORED = 2, VERDICT_FOLLOWED = 3 };

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);  /* pid */
	__type(value, __u8); /* verdict */
} traced SEC(".maps");

/* Freed by the kernel when the thread exits: no cleanup, no stale tids. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct coro_task_state);
} task_state SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	/* Atomic: a preempted program and another on the same CPU must not lose counts. */
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline struct coro_task_state *task_state_get(void)
{
	struct coro_task_state *st;

	if (stopped)
		return NULL;
	st = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		stat_inc(CORO_STAT_NO_TASK_STATE);
	return st;
}

static __always_inline void fill_hdr(struct coro_event_hdr *hdr, struct coro_task_state *st,
				     __u32 size, __u8 kind, __u32 pid, __u32 tid)
{
	hdr->size = size;
	hdr->kind = kind;
	hdr->flags = 0;
	hdr->pid = pid;
	hdr->tid = tid;
	/* Taken after the reservation, so ring order and time order agree closely. */
	hdr->ts = bpf_ktime_get_boot_ns();
	if (st) {
		hdr->cur = st->cur;
		hdr->lost_before = st->lost;
		if (!st->cur_valid)
			hdr->flags = CORO_EVF_CUR_UNKNOWN;
		st->lost = 0;
	} else {
		hdr->cur = 0;
		hdr->lost_before = 0;
		hdr->flags = CORO_EVF_CUR_UNKNOWN | CORO_EVF_NO_THREAD;
	}
}

/*
 * Reserve a record for thread (pid, tid) and fill its header. On failure the
 * loss is counted globally and on the thread, so that the thread's next
 * event carries the hole in lost_before.
 */
static __always_inline void *event_reserve_for(struct coro_task_state *st, __u32 size, __u8 kind,
					       __u32 pid, __u32 tid)
{
	struct coro_event_hdr *hdr;

	if (stopped)
		return NULL;
	hdr = bpf_ringbuf_reserve(&events, size, 0);
	if (!hdr) {
		stat_inc(CORO_STAT_RING_FULL);
		if (st)
			st->lost++;
		return NULL;
	}
	fill_hdr(hdr, st, size, kind, pid, tid);
	return hdr;
}

/* A record about the current thread. */
static __always_inline void *event_reserve(struct coro_task_state *st, __u32 size, __u8 kind)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	return event_reserve_for(st, size, kind, pid_tgid >> 32, (__u32)pid_tgid);
}

/*
 * The ring's fill is looked at on every 16th record of a CPU, not on each:
 * the query is a helper call, ~15 ns of the switch path's record on the
 * test VM (docs/performance.md), and a per-CPU count is a few loads. A
 * wakeup comes at most 15 records later than it would, next to the
 * wakeup_bytes (a quarter of the ring) already waiting. Unlocked: a program
 * preempted on this CPU may skip or repeat one look, nothing else.
 */
#define WAKEUP_CHECK_EVERY 16

static __always_inline __u64 submit_flags(__u64 ts)
{
	__u32 zero = 0;
	struct wakeup_state *w = bpf_map_lookup_elem(&last_wakeup, &zero);

	if (!w || (w->submits++ & (WAKEUP_CHECK_EVERY - 1)))
		return BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < wakeup_bytes ||
	    ts - w->last < wakeup_min_gap_ns)
		return BPF_RB_NO_WAKEUP;
	w->last = ts;
	stat_inc(CORO_STAT_WAKEUPS);
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void event_submit(void *rec)
{
	bpf_ringbuf_submit(rec, submit_flags(((struct coro_event_hdr *)rec)->ts));
}

/*
 * The kernel sometimes runs a thread again with no sched_switch call that
 * brings it back (issue 18: about 1 return in 1,000 under load, on 6.18;
 * a second program on the tracepoint misses the same returns, so no
 * program here can see them: docs/design.md). A thread seen
 * running (one of its own probes, or its next switch-out) with off_ts still
 * set missed its offcpu_end: it is emitted now, flagged late, so the
 * stretch ends at the thread's next record rather than never.
 */
static __always_inline void offcpu_close_late(struct coro_task_state *st, __u32 pid, __u32 tid)
{
	struct coro_ev_offcpu_end *e;
	__u64 start = st->off_ts;

	if (!start)
		return;
	st->off_ts = 0;
	e = event_reserve_for(st, sizeof(*e), CORO_EV_OFFCPU_END, pid, tid);
	if (!e)
		return;
	e->hdr.flags |= CORO_EVF_OFFCPU_LATE;
	e->start = start;
	/* When it came back is not known: no run queue time is claimed. */
	e->runq_ns = 0;
	e->state = st->off_state;
	e->cpu = bpf_get_smp_processor_id();
	event_submit(e);
}

/* The current thread's state for a probe: it is running, so an open off-CPU stretch ends. */
static __always_inline struct coro_task_state *task_state_running(void)
{
	struct coro_task_state *st = task_state_get();

	if (st && st->off_ts) {
		__u64 pid_tgid = bpf_get_current_pid_tgid();

		offcpu_close_late(st, pid_tgid >> 32, (__u32)pid_tgid);
	}
	return st;
}

/*
 * --stacks. fp: the kernel walks the frame pointers into its stack map (one
 * id per distinct stack: the deduplication happens here). dwarf: the record
 * is built in a per-CPU buffer with the registers and the top of the user
 * stack after it, then copied into the ring at its real length; user space
 * unwinds it from .eh_frame.
 */
enum { STACKS_OFF = 0, STACKS_FP = 1, STACKS_DWARF = 2 };
const volatile __u32 stack_mode = STACKS_OFF;
const volatile __u32 stack_bytes = 4096; /* --stack-bytes, at most CORO_STACK_BYTES_MAX */

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384); /* resized by user space (--stack-map) */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, CORO_STACK_DEPTH * sizeof(__u64));
} stackmap SEC(".maps");

/* The largest record that carries a stack (a span_begin), then its ref and sample. */
#define STACK_REC_MAX 96
struct stack_scratch {
	__u64 busy;
	__u8 buf[STACK_REC_MAX + sizeof(struct coro_stack_ref) + sizeof(struct coro_stack_sample) +
		 CORO_STACK_BYTES_MAX + 8192]; /* what the verifier sees of the last read */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_scratch);
} stack_scratch SEC(".maps");

/*
 * Where a record that carries a stack is built: in the ring (no stacks, or
 * fp: `size` grows by the ref), or in this CPU's scratch buffer (dwarf). A
 * thread preempted inside a program on this CPU holds the buffer: the other
 * one goes to the ring without a stack.
 */
struct stk_rec {
	void *rec;
	struct stack_scratch *scratch;
	struct coro_task_state *st;
};

/*
 * sample_always: a constant, true in programs user space may make sleepable
 * (span_begin): they cannot use the stack map, so they copy the stack as
 * dwarf does in either mode, and user space unwinds it.
 */
static __always_inline void *stk_reserve_any(struct stk_rec *r, struct coro_task_state *st,
					     __u32 size, __u8 kind, bool sample_always)
{
	__u64 pid_tgid;
	__u32 zero = 0;
	struct stack_scratch *s;

	r->scratch = NULL;
	r->st = st;
	r->rec = NULL;
	if (stack_mode == STACKS_OFF) {
		r->rec = event_reserve(st, size, kind);
		return r->rec;
	}
	if ((stack_mode == STACKS_DWARF || sample_always) && !stopped) {
		s = bpf_map_lookup_elem(&stack_scratch, &zero);
		if (s && !__sync_lock_test_and_set(&s->busy, 1ULL)) {
			pid_tgid = bpf_get_current_pid_tgid();
			r->scratch = s;
			r->rec = s->buf;
			fill_hdr((struct coro_event_hdr *)s->buf, st, size, kind, pid_tgid >> 32,
				 (__u32)pid_tgid);
			return r->rec;
		}
	}
	r->rec = event_reserve(st, size + sizeof(struct coro_stack_ref), kind);
	if (r->rec) {
		struct coro_stack_ref *ref = r->rec + size;

		ref->id = 0;
		ref->how = CORO_STACK_NONE;
	}
	return r->rec;
}

static __always_inline void *stk_reserve(struct stk_rec *r, struct coro_task_state *st,
					 __u32 size, __u8 kind)
{
	return stk_reserve_any(r, st, size, kind, false);
}

/*
 * Take the stack into the record reserved by stk_reserve(); `size`: its
 * payload's. ctx: the program's (for the kernel's walk); regs: the user
 * registers (the same for uprobes; the task's saved ones for a perf event).
 * no_map: a constant, as stk_reserve_any()'s sample_always.
 */
static __always_inline void stk_take_any(struct stk_rec *r, void *ctx, struct pt_regs *regs,
					 __u32 size, bool no_map)
{
	struct coro_stack_ref *ref;
	struct coro_stack_sample *smp;
	__u32 n, got, off;
	long id;

	if (stack_mode == STACKS_OFF || size > STACK_REC_MAX)
		return;
	if (!r->scratch) {
		ref = r->rec + size;
		if (no_map || stack_mode != STACKS_FP)
			goto lost; /* a sample without the buffer */
		id = bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
		if (id < 0)
			goto lost;
		ref->id = (__u32)id;
		ref->how = CORO_STACK_KERNEL_ID;
		return;
	}
	ref = (void *)r->scratch->buf + size;
	smp = (void *)(ref + 1);
	ref->id = 0;
	ref->how = CORO_STACK_SAMPLE;
	smp->ip = PT_REGS_IP(regs);
	smp->sp = PT_REGS_SP(regs);
	smp->bp = PT_REGS_FP(regs);
	smp->__pad = 0;
	/*
	 * Page by page: a coroutine's stack may end (and its mapping with it)
	 * a few hundred bytes above sp. What could be read is kept.
	 */
	n = stack_bytes;
	if (n > CORO_STACK_BYTES_MAX)
		n = CORO_STACK_BYTES_MAX;
	got = 0;
	for (int i = 0; i < CORO_STACK_BYTES_MAX / 4096 + 1; i++) {
		__u32 want = i == 0 ? 4096 - (__u32)(smp->sp & 4095) : 4096;

		if (got >= n)
			break;
		if (want > n - got)
			want = n - got;
		if (!want || got >= CORO_STACK_BYTES_MAX)
			break;
		/* Masks the compiler may not drop: they are what the verifier follows. */
		off = got;
		asm volatile("" : "+r"(want), "+r"(off));
		off &= CORO_STACK_BYTES_MAX - 1;
		want &= 8191;
		if (bpf_probe_read_user((__u8 *)(smp + 1) + off, want, (const void *)(smp->sp + got)))
			break;
		got += want;
	}
	got &= ~7u;
	if (got) {
		smp->len = got;
		((struct coro_event_hdr *)r->rec)->size = size + sizeof(*ref) + sizeof(*smp) + got;
		return;
	}
	smp->len = 0;
	ref->how = CORO_STACK_NONE;
	((struct coro_event_hdr *)r->rec)->size = size + sizeof(*ref);
	stat_inc(CORO_STAT_STACK_LOST);
	return;
lost:
	ref->id = 0;
	ref->how = CORO_STACK_NONE;
	stat_inc(CORO_STAT_STACK_LOST);
}

static __always_inline void stk_take(struct stk_rec *r, void *ctx, struct pt_regs *regs, __u32 size)
{
	stk_take_any(r, ctx, regs, size, false);
}

static __always_inline void stk_submit(struct stk_rec *r)
{
	struct coro_event_hdr *hdr = r->rec;
	__u32 size;

	if (!r->scratch) {
		event_submit(hdr);
		return;
	}
	size = hdr->size;
	if (size > sizeof(r->scratch->buf))
		size = sizeof(r->scratch->buf);
	if (bpf_ringbuf_output(&events, r->scratch->buf, size, submit_flags(hdr->ts))) {
		stat_inc(CORO_STAT_RING_FULL);
		/* The record and the losses it was to report: on the thread's next one. */
		if (r->st)
			r->st->lost += hdr->lost_before + 1;
	}
	r->scratch->busy = 0;
}

/*
 * Strings. The probe header passes the pointer and never touches it (a bad
 * one must not crash the traced program); reading it is all ours. The fast
 * read cannot fault pages in, so it fails alike on a bad pointer and on a
 * good string whose page is not in the page tables yet (a literal in a
 * .rodata page the program never read, memory swapped out). Only then, in
 * the string probes' programs, which user space makes sleepable when the
 * kernel allows it (strings_sleepable), the string is read again through the
 * page fault handler: a good string comes in, a bad pointer fails as before
 * and is counted. The fast path stays the common one: spans are hot. The
 * slow read sleeps with the record reserved, so the reader waits at it (not
 * past it) while the page comes in, once per page the program never read.
 */
const volatile bool strings_sleepable = false;

/* Kernel 6.12 and later; older kernels fault the pages in by bpf_copy_from_user() instead. */
extern int bpf_copy_from_user_str(void *dst, u32 dst__sz, const void *unsafe_ptr__ign,
				  u64 flags) __weak __ksym;
#ifndef bpf_ksym_exists /* libbpf 1.2 and later have it */
#define bpf_ksym_exists(sym)                                                                       \
	({                                                                                         \
		_Static_assert(!__builtin_constant_p(!!sym), #sym " should be marked __weak");     \
		!!sym;                                                                             \
	})
#endif
#define COPY_STR_PAD_ZEROS 1 /* BPF_F_PAD_ZEROS: none of a failed read's bytes stay */

/* Sleepable programs only: bpf_probe_read_user_str()'s result, page faults allowed. */
static __always_inline long read_user_str_faulting(char *dst, __u64 uptr)
{
	char c;

	if (bpf_ksym_exists(bpf_copy_from_user_str))
		return bpf_copy_from_user_str(dst, CORO_STR_LEN, (const void *)uptr,
					      COPY_STR_PAD_ZEROS);
	/*
	 * Fault in the page of the first byte, and the next one if the label
	 * may run into it (that touch fails harmlessly where no page follows),
	 * then read again without faulting.
	 */
	if (bpf_copy_from_user(&c, 1, (const void *)uptr))
		return -1;
	if ((uptr & 4095) > 4096 - CORO_STR_LEN)
		bpf_copy_from_user(&c, 1, (const void *)((uptr | 4095) + 1));
	return bpf_probe_read_user_str(dst, CORO_STR_LEN, (const void *)uptr);
}

/* may_fault: a constant, true only in the programs user space may make sleepable. */
static __always_inline void read_label(char *dst, __u64 uptr, struct coro_event_hdr *hdr,
				       bool may_fault)
{
	long n;

	/* Ring memory is reused: no bytes of an older record after the NUL. */
	__builtin_memset(dst, 0, CORO_STR_LEN);
	n = bpf_probe_read_user_str(dst, CORO_STR_LEN, (const void *)uptr);
	if (n < 0 && may_fault && strings_sleepable)
		n = read_user_str_faulting(dst, uptr);

	if (n < 0) {
		/* A bad pointer, or a page that could not be faulted in: keep the event, say so. */
		dst[0] = '\0';
		hdr->flags |= CORO_EVF_STR_FAULT;
		stat_inc(CORO_STAT_STR_FAULT);
		return;
	}
	if (n == CORO_STR_LEN) {
		const void *last = (const void *)(uptr + CORO_STR_LEN - 1);
		char c = 0;
		long err;

		/*
		 * Exactly 63 characters, or more? Look at the byte we dropped
		 * (the faulting read stops before it: it may sit alone in a page
		 * not faulted in yet).
		 */
		err = bpf_probe_read_user(&c, 1, last);
		if (err && may_fault && strings_sleepable)
			err = bpf_copy_from_user(&c, 1, last);
		if (!err && c)
			hdr->flags |= CORO_EVF_STR_TRUNCATED;
	}
}

static __always_inline bool filters_pass(__u32 pid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	char comm[16];

	if (npid_filter) {
		bool found = false;

		for (int i = 0; i < PID_FILTER_MAX; i++)
			if (i < npid_filter && pid_filter[i] == pid)
				found = true;
		if (!found)
			return false;
	}
	if (ncomm_filter) {
		bool any = false;

		/* The process's name (its main thread's), not the firing thread's. */
		bpf_probe_read_kernel_str(comm, sizeof(comm), task->group_leader->comm);
		for (int f = 0; f < COMM_FILTER_MAX; f++) {
			bool same = f < ncomm_filter;

			for (int i = 0; i < 16; i++)
				if (i < comm_filter_len[f] && comm[i] != comm_filter[f][i])
					same = false;
			any = any || same;
		}
		return any;
	}
	return true;
}

/* False if the ring had no room (counted). */
static __always_inline void proc_submit(struct coro_ev_proc *e, __u8 kind,
					struct task_struct *task, __s32 code)
{
	e->exit_code = code;
	e->__pad = 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->group_leader->comm);
	/* Rare, and user space must act on an exec (scan the new image) soon. */
	bpf_ringbuf_submit(e, kind == CORO_EV_EXEC ? BPF_RB_FORCE_WAKEUP : 0);
}

static __always_inline bool emit_proc(__u8 kind, __u32 pid, struct task_struct *task, __s32 code)
{
	struct coro_ev_proc *e = event_reserve_for(NULL, sizeof(*e), kind, pid, pid);

	if (!e)
		return false;
	proc_submit(e, kind, task, code);
	return true;
}

/* Set by user space: --probe-path batched attaches the batch probe and this (batch.bpf.h). */
const volatile bool batched = false;
/*
 * Set by user space on either path when it can read threads' buffers (the shared registry):
 * a trap-path session reads what a program appends while another session's batch semaphore
 * is up (batch.bpf.h), as a batched one does.
 */
const volatile bool batch_reads = false;
/*
 * CLOCK_BOOTTIME when the session started, set by user space once it has
 * attached (after its targets' process records): the batched path reads no
 * buffer before (0), and a record stamped earlier (in a buffer another
 * session made a thread fill) is not this session's.
 */
volatile __u64 session_start_ts;

/*
 * -a, batched: a process is admitted at its first trap, a thread's first
 * batch, which comes after the records in it; other threads may have
 * written their first record just before too (each traps right after it).
 * The process record must come first: it takes the time of the batch's
 * first record (first_ts), less a millisecond for those other threads, but
 * not before the process started nor before the session. A record still
 * earlier (a thread preempted for longer between its first record and its
 * trap) is counted as unknown_pid, as any record of a process not yet
 * announced.
 */
#define PROC_NEW_BATCHED_SLACK_NS 1000000ull
static __always_inline void emit_proc_new_batched(__u32 pid, struct task_struct *task,
						  __u64 first_ts)
{
	struct coro_ev_proc *e = event_reserve_for(NULL, sizeof(*e), CORO_EV_PROC_NEW, pid, pid);
	__u64 ts, floor = task->group_leader->start_boottime;

	if (!e)
		return;
	ts = first_ts && first_ts < e->hdr.ts ? first_ts : e->hdr.ts;
	ts = ts > PROC_NEW_BATCHED_SLACK_NS ? ts - PROC_NEW_BATCHED_SLACK_NS : 0;
	if (floor < session_start_ts)
		floor = session_start_ts;
	e->hdr.ts = ts > floor ? ts : floor < e->hdr.ts ? floor : e->hdr.ts;
	e->exit_code = 0;
	e->__pad = 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->group_leader->comm);
	bpf_ringbuf_submit(e, 0);
}

/*
 * -p / --: the uprobes fire only in the targets. -a: admit or ignore on first
 * sight. first_ts: the batch probe's first record (0: the record is now).
 */
static __always_inline bool admitted_at(__u64 first_ts)
{
	__u32 pid;
	__u8 verdict, *v;
	long err;

	if (!system_wide && !follow)
		return true;
	pid = bpf_get_current_pid_tgid() >> 32;
	v = bpf_map_lookup_elem(&traced, &pid);
	if (follow)
		return v && (*v == VERDICT_TRACED || *v == VERDICT_FOLLOWED);
	if (v)
		return *v == VERDICT_TRACED;
	verdict = filters_pass(pid) ? VERDICT_TRACED : VERDICT_IGNORED;
	/* Two threads at once: one inserts and announces it, the other follows the verdict. */
	err = bpf_map_update_elem(&traced, &pid, &verdict, BPF_NOEXIST);
	if (err == -E2BIG) {
		/* No room to remember it: this event is not traced, and says so. */
		if (verdict == VERDICT_TRACED)
			stat_inc(CORO_STAT_MAP_FULL);
		return false;
	}
	if (err == 0 && verdict == VERDICT_TRACED) {
		/* first_ts: admitted by a batch (its trap, or a copy of a buffer met: batch_admitted). */
		if (batched || first_ts)
			emit_proc_new_batched(pid, bpf_get_current_task_btf(), first_ts);
		else
			emit_proc(CORO_EV_PROC_NEW, pid, bpf_get_current_task_btf(), 0);
	}
	return verdict == VERDICT_TRACED;
}

static __always_inline bool admitted(void)
{
	return admitted_at(0);
}

#include "batch.bpf.h"

SEC("usdt")
int BPF_USDT(coro_create, __u64 id, __u64 parent)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	/* Batched, it traps only nested in an append (a signal handler's): earlier records first. */
	batch_harvest_probe();
	st = task_state_running();
	struct stk_rec r;
	struct coro_ev_create *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_CREATE);

	if (!e)
		return 0;
	e->id = id;
	e->parent = parent;
	stk_take(&r, ctx, ctx, sizeof(*e));
	stk_submit(&r);
	return 0;
}

SEC("usdt")
int BPF_USDT(coro_name, __u64 id, __u64 str)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	batch_harvest_probe_sleepable();
	st = task_state_running();
	struct coro_ev_name *e = event_reserve(st, sizeof(*e), CORO_EV_NAME);

	if (!e)
		return 0;
	e->id = id;
	read_label(e->name, str, &e->hdr, true);
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(coro_ready, __u64 id)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	/* Batched, it traps only nested in an append (a signal handler's): earlier records first. */
	batch_harvest_probe();
	st = task_state_running();
	struct coro_ev_ready *e = event_reserve(st, sizeof(*e), CORO_EV_READY);

	if (!e)
		return 0;
	e->id = id;
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(coro_switch, __u64 from, __u64 to, __u64 reason, __u64 obj)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	/* Batched, it traps only nested in an append (a signal handler's): earlier records first. */
	batch_harvest_probe();
	st = task_state_running();
	struct stk_rec r;
	struct coro_ev_switch *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_SWITCH);

	/* Track the thread's coroutine even when the event itself is lost. */
	if (st) {
		st->cur = to;
		st->cur_valid = 1;
	}
	if (!e)
		return 0;
	e->from = from;
	e->to = to;
	e->obj = obj;
	e->reason = (__u32)reason;
	e->__pad = 0;
	stk_take(&r, ctx, ctx, sizeof(*e));
	stk_submit(&r);
	return 0;
}

SEC("usdt")
int BPF_USDT(coro_exit, __u64 id, __s64 status)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	/* Batched, it traps only nested in an append (a signal handler's): earlier records first. */
	batch_harvest_probe();
	st = task_state_running();
	struct coro_ev_exit *e = event_reserve(st, sizeof(*e), CORO_EV_EXIT);

	if (!e)
		return 0;
	e->id = id;
	e->status = status;
	event_submit(e);
	return 0;
}

/* What exists when a tracer attaches: one coroutine of the scheduler's list. */
SEC("usdt")
int BPF_USDT(coro_announce, __u64 id, __u64 parent, __u64 str, __u64 reason, __u64 obj)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	batch_harvest_probe_sleepable();
	st = task_state_running();
	struct coro_ev_announce *e = event_reserve(st, sizeof(*e), CORO_EV_ANNOUNCE);

	if (!e)
		return 0;
	e->id = id;
	e->parent = parent;
	e->obj = obj;
	e->reason = (__u32)reason;
	e->__pad = 0;
	if (str)
		read_label(e->name, str, &e->hdr, true);
	else
		__builtin_memset(e->name, 0, sizeof(e->name));
	event_submit(e);
	return 0;
}

/* ...and its end: every coroutine not listed did not exist when it was given. */
SEC("usdt")
int BPF_USDT(coro_announce_done, __u64 asked)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	batch_harvest_probe();
	st = task_state_running();
	struct coro_ev_announce_done *e = event_reserve(st, sizeof(*e), CORO_EV_ANNOUNCE_DONE);

	if (!e)
		return 0;
	e->asked = asked;
	event_submit(e);
	return 0;
}

static __always_inline int span_event(__u64 str, __u8 kind)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	batch_harvest_probe_sleepable();
	st = task_state_running();
	struct coro_ev_span *e = event_reserve(st, sizeof(*e), kind);

	if (!e)
		return 0;
	read_label(e->name, str, &e->hdr, true);
	event_submit(e);
	return 0;
}

/*
 * --stacks: a span_begin carries where the span began (a slow_span finding
 * names it), always as a copy of the stack: the program may be sleepable.
 */
SEC("usdt")
int BPF_USDT(coro_span_begin, __u64 str)
{
	struct coro_task_state *st;

	if (!admitted())
		return 0;
	batch_harvest_probe_sleepable();
	st = task_state_running();
	struct stk_rec r;
	struct coro_ev_span *e = stk_reserve_any(&r, st, sizeof(*e), CORO_EV_SPAN_BEGIN, true);

	if (!e)
		return 0;
	read_label(e->name, str, &e->hdr, true);
	stk_take_any(&r, ctx, ctx, sizeof(*e), true);
	stk_submit(&r);
	return 0;
}

SEC("usdt")
int BPF_USDT(coro_span_end, __u64 str)
{
	return span_event(str, CORO_EV_SPAN_END);
}

/*
 * The switch-function path: one program for every uprobe on a context
 * function (swapcontext, jump_fcontext, ...); its cookie says what the
 * instruction means and which registers hold the contexts there (user
 * space chose the cheapest instruction and followed the arguments to it).
 */
#if defined(__TARGET_ARCH_x86)
/*
 * A register of the probed instruction, by encoding number (r < 16 always;
 * user space encodes it). One load at a constant offset per case: the
 * verifier refuses a context load at a computed offset, and reading through
 * bpf_probe_read_kernel() instead (two nested calls) cost about 50 ns per
 * register on every switch on the test VM (docs/performance.md, "What the
 * numbers say"). Each load is written in asm: the compiler would merge loads
 * written in C into one at a looked-up offset, which the verifier refuses.
 */
#define CTX_LOAD(regs, field)                                                                      \
	({                                                                                         \
		__u64 __v;                                                                         \
		asm volatile("%0 = *(u64 *)(%1 + %2)"                                              \
			     : "=r"(__v)                                                           \
			     : "r"(regs), "i"(__builtin_offsetof(struct pt_regs, field)));         \
		__v;                                                                               \
	})

static __always_inline __u64 ctx_reg(struct pt_regs *regs, __u32 r)
{
	switch (r & 15) {
	case 0: return CTX_LOAD(regs, ax);
	case 1: return CTX_LOAD(regs, cx);
	case 2: return CTX_LOAD(regs, dx);
	case 3: return CTX_LOAD(regs, bx);
	case 4: return CTX_LOAD(regs, sp);
	case 5: return CTX_LOAD(regs, bp);
	case 6: return CTX_LOAD(regs, si);
	case 7: return CTX_LOAD(regs, di);
	case 8: return CTX_LOAD(regs, r8);
	case 9: return CTX_LOAD(regs, r9);
	case 10: return CTX_LOAD(regs, r10);
	case 11: return CTX_LOAD(regs, r11);
	case 12: return CTX_LOAD(regs, r12);
	case 13: return CTX_LOAD(regs, r13);
	case 14: return CTX_LOAD(regs, r14);
	default: return CTX_LOAD(regs, r15);
	}
}

struct own_stack {
	__u64 top; /* an address at the top of the thread's own stack */
	bool in;   /* the mapping found holds it */
};

static long own_stack_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct own_stack *c = data;

	c->in = c->top >= vma->vm_start && c->top < vma->vm_end;
	return 0;
}

/*
 * Whether sp is on the current thread's own stack, the one it started on:
 * the mapping that holds it holds the main thread's start of stack, or
 * another thread's TLS block (fsbase), which glibc puts at the top of the
 * thread's stack. A coroutine's stack is a mapping (or memory) of its own.
 */
static __always_inline bool on_own_stack(__u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct own_stack c = {};

	c.top = task->pid == task->tgid ? BPF_CORE_READ(task, mm, start_stack)
					: BPF_CORE_READ(task, thread.fsbase);
	if (!c.top || bpf_find_vma(task, sp, own_stack_vma, &c, 0))
		return false;
	return c.in;
}

static __always_inline void ctx_switch(struct pt_regs *regs, __u64 k, struct coro_task_state *st)
{
	struct stk_rec r;
	struct coro_ev_ctx_switch *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_CTX_SWITCH);
	__u32 a = CORO_CTX_COOKIE_A(k);
	__u64 to = ctx_reg(regs, CORO_CTX_COOKIE_B(k));

	if (st) {
		st->cur = to;
		st->cur_valid = 1;
	}
	if (!e)
		return;
	if (a == CORO_CTX_REG_NONE) {
		e->from = e->hdr.cur;
		e->flags = CORO_CTXF_FROM_CURRENT;
	} else {
		e->from = ctx_reg(regs, a) + CORO_CTX_COOKIE_DELTA(k);
		e->flags = 0;
		/* Once per thread: the switch is made on the stack of `from`. */
		if (st && !st->main_seen && on_own_stack(PT_REGS_SP(regs))) {
			e->flags |= CORO_CTXF_FROM_MAIN;
			st->main_seen = 1;
		}
	}
	if ((CORO_CTX_COOKIE_FLAGS(k) & CORO_CTXC_ACTION_QEMU) &&
	    ctx_reg(regs, CORO_CTX_COOKIE_C(k)) == CORO_QEMU_TERMINATE)
		e->flags |= CORO_CTXF_FROM_DONE;
	e->to = to;
	e->family = CORO_CTX_COOKIE_FAM(k);
	stk_take(&r, regs, regs, sizeof(*e));
	stk_submit(&r);
}

static __always_inline void ctx_create(struct pt_regs *regs, __u64 k, struct coro_task_state *st)
{
	struct stk_rec r;
	struct coro_ev_ctx_create *e = stk_reserve(&r, st, sizeof(*e), CORO_EV_CTX_CREATE);
	__u32 flags = CORO_CTX_COOKIE_FLAGS(k);
	__u64 id = ctx_reg(regs, CORO_CTX_COOKIE_A(k));

	if (!e)
		return;
	e->id = id;
	e->stack_lo = e->stack_hi = 0;
	if (flags & CORO_CTXC_STACK_UCONTEXT) {
		/* glibc x86-64 ucontext_t: uc_stack.ss_sp at 16, ss_size at 32. */
		__u64 sp = 0, size = 0;

		if (!bpf_probe_read_user(&sp, sizeof(sp), (const void *)(id + 16)) &&
		    !bpf_probe_read_user(&size, sizeof(size), (const void *)(id + 32))) {
			e->stack_lo = sp;
			e->stack_hi = sp + size;
		}
	} else if (flags & CORO_CTXC_STACK_REGS) {
		__u64 size = ctx_reg(regs, CORO_CTX_COOKIE_B(k));

		e->stack_hi = id;
		e->stack_lo = id - size;
	}
	e->family = CORO_CTX_COOKIE_FAM(k);
	e->__pad = 0;
	stk_take(&r, regs, regs, sizeof(*e));
	stk_submit(&r);

	/* QEMU: the coroutine's entry function, for user space to name it by. */
	if (flags & CORO_CTXC_ENTRY_AT_A) {
		struct coro_ev_ctx_entry *n = event_reserve(st, sizeof(*n), CORO_EV_CTX_ENTRY);
		__u64 addr = 0;

		if (n) {
			struct task_struct *task = bpf_get_current_task_btf();

			bpf_probe_read_user(&addr, sizeof(addr), (const void *)id);
			n->id = id;
			n->addr = addr;
			n->start_code = BPF_CORE_READ(task, mm, start_code);
			event_submit(n);
		}
	}

	/* Pth: a thread spawned with a named attr gets that name. */
	if (st && st->pth_spawning) {
		struct coro_ev_name *n = event_reserve(st, sizeof(*n), CORO_EV_NAME);

		st->pth_spawning = 0;
		if (!n)
			return;
		n->id = id;
		__builtin_memcpy(n->name, st->pth_name, CORO_STR_LEN);
		n->hdr.flags |= st->pth_name_flags;
		event_submit(n);
	}
}

/*
 * Go: where each binary keeps a goroutine's fields, one slot per layout
 * (user space fills it before attaching; the cookie names the slot).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CORO_GO_SLOTS);
	__type(key, __u32);
	__type(value, struct coro_go_offsets);
} go_offsets SEC(".maps");

/* A word of the target's memory; 0 and *fault set if it cannot be read. */
static __always_inline __u64 go_word(__u64 addr, bool *fault)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr)) {
		*fault = true;
		return 0;
	}
	return v;
}

struct go_park_rec {
	struct coro_ev_go_status e;
	struct coro_stack_ref ref;
	__u64 ips[CORO_GO_PARK_DEPTH];
};

/*
 * --stacks: a goroutine parking (gopark -> mcall saved its context in
 * g.sched, then park_m runs on the system stack, where the probe is): its
 * stack, from sched.pc and the chain of frame pointers from sched.bp, each
 * frame above the last. A bad chain ends the walk; every read is checked.
 */
static __always_inline struct coro_ev_go_status *go_park_reserve(struct coro_task_state *st,
								 __u64 gp,
								 struct coro_go_offsets *o)
{
	struct go_park_rec *r = event_reserve(st, sizeof(*r), CORO_EV_GO_STATUS);
	__u64 fr[2], bp;
	__u32 n = 0;
	bool fault = false;

	if (!r)
		return NULL;
	__builtin_memset(r->ips, 0, sizeof(r->ips));
	r->ips[0] = go_word(gp + o->g_sched_pc, &fault);
	bp = go_word(gp + o->g_sched_bp, &fault);
	if (r->ips[0])
		n = 1;
	for (__u32 i = 1; i < CORO_GO_PARK_DEPTH && n == i && bp; i++) {
		if (bpf_probe_read_user(fr, sizeof(fr), (const void *)bp) || !fr[1])
			break;
		r->ips[i] = fr[1];
		n++;
		if (fr[0] <= bp)
			break;
		bp = fr[0];
	}
	r->ref.id = n;
	r->ref.how = n ? CORO_STACK_IPS : CORO_STACK_NONE;
	return &r->e;
}

/*
 * A new goroutine's closure, for its name: a `go f(x)` statement starts it
 * in a closure the compiler made, which calls f through its own words when
 * f is a function value or a closure (user/elf/goelf.c follows the
 * wrapper's loads through these). Read now: the closure is garbage once the
 * goroutine has called f. Unreadable words stay 0; they count as no fault.
 */
static __always_inline void go_entry_ctxt(struct coro_ev_go_entry *n, __u64 gp,
					  struct coro_go_offsets *o)
{
	bool fault = false;
	__u64 c;

	__builtin_memset(n->ctxt_word, 0, sizeof(n->ctxt_word));
	__builtin_memset(n->ctxt_deref, 0, sizeof(n->ctxt_deref));
	c = o->g_sched_ctxt ? go_word(gp + o->g_sched_ctxt, &fault) : 0;
	n->ctxt = c;
	if (!c)
		return;
	for (__u32 i = 0; i < CORO_GO_CTXT_WORDS; i++) {
		__u64 w = go_word(c + 8 * (i + 1), &fault);

		n->ctxt_word[i] = w;
		if (w)
			n->ctxt_deref[i] = go_word(w, &fault);
	}
}

/*
 * runtime.casgstatus(gp, oldval, newval): every ordinary change of a
 * goroutine's status. The thread's goroutine is the g in r14 (Go's
 * register ABI), or on the system stack that g's m.curg: the creator at a
 * creation, the waker at a ready. A creation is seen at newproc1's return
 * (its goid is set after the status change). Stack growth (Gcopystack) and
 * a new g's Gidle are no change of what runs. The thread's current
 * goroutine (cur) changes where the goroutine starts or stops running on
 * it, not at a syscall: the thread still runs it there.
 */
static __always_inline void go_status(struct pt_regs *regs, __u64 k, struct coro_task_state *st)
{
	__u32 slot = (__u32)CORO_CTX_COOKIE_DELTA(k) & (CORO_GO_SLOTS - 1);
	struct coro_go_offsets *o = bpf_map_lookup_elem(&go_offsets, &slot);
	__u64 gp = ctx_reg(regs, CORO_CTX_COOKIE_A(k));
	__u32 old = (__u32)ctx_reg(regs, CORO_CTX_COOKIE_B(k));
	__u32 new = (__u32)ctx_reg(regs, CORO_CTX_COOKIE_C(k));
	__u64 goid, curgoid = 0, m, curg, obj = 0;
	struct coro_ev_go_status *e;
	bool fault = false;
	__u8 wr = 0;

	if (CORO_CTX_COOKIE_FLAGS(k) & CORO_CTXC_GO_CREATED) {
		old = CORO_GO_DEAD;
		new = CORO_GO_RUNNABLE;
	} else if (old == CORO_GO_DEAD && new == CORO_GO_RUNNABLE) {
		return; /* newproc1 has not given it its goid yet: its return says it */
	}
	if (!o || old == CORO_GO_COPYSTACK || new == CORO_GO_COPYSTACK || old == CORO_GO_IDLE)
		return;
	goid = go_word(gp + o->g_goid, &fault);
	m = go_word(regs->r14 + o->g_m, &fault);
	curg = m ? go_word(m + o->m_curg, &fault) : 0;
	if (curg)
		curgoid = go_word(curg + o->g_goid, &fault);
	if (new == CORO_GO_WAITING) {
		__u64 sg = go_word(gp + o->g_waiting, &fault);

		bpf_probe_read_user(&wr, 1, (const void *)(gp + o->g_waitreason));
		if (sg) {
			obj = go_word(sg + o->sudog_c, &fault);
			if (!obj)
				obj = go_word(sg + o->sudog_elem, &fault);
		}
	}
	if (fault)
		stat_inc(CORO_STAT_GO_FAULT);
	/*
	 * First seen on this thread (attached mid-life, or a new thread): what
	 * it ran before this change. execute() sets m.curg before the status,
	 * so a goroutine starting to run was preceded by the scheduler.
	 */
	if (st && !st->cur_valid) {
		st->cur = new == CORO_GO_RUNNING && old != CORO_GO_SYSCALL ? 0 : curgoid;
		st->cur_valid = 1;
	}
	if (stack_mode != STACKS_OFF && old == CORO_GO_RUNNING && new == CORO_GO_WAITING)
		e = go_park_reserve(st, gp, o);
	else
		e = event_reserve(st, sizeof(*e), CORO_EV_GO_STATUS);
	if (e) {
		e->goid = goid;
		e->obj = obj;
		e->old_status = old;
		e->new_status = new;
		e->waitreason = wr;
		e->reason = o->reason[wr & (CORO_GO_REASONS - 1)];
		__builtin_memset(e->__pad, 0, sizeof(e->__pad));
		event_submit(e);
	}
	if (st) {
		if (new == CORO_GO_RUNNING && old != CORO_GO_SYSCALL)
			st->cur = goid;
		else if ((old == CORO_GO_RUNNING && new != CORO_GO_SYSCALL) ||
			 (old == CORO_GO_SYSCALL && new == CORO_GO_RUNNABLE))
			st->cur = 0;
	}
	if (old == CORO_GO_DEAD && new == CORO_GO_RUNNABLE) {
		struct coro_ev_go_entry *n = event_reserve(st, sizeof(*n), CORO_EV_GO_ENTRY);

		if (n) {
			n->goid = goid;
			n->startpc = go_word(gp + o->g_startpc, &fault);
			go_entry_ctxt(n, gp, o);
			event_submit(n);
		}
	}
}

/*
 * -a attaches most switch-function families for every process (attach.c,
 * global_switch): their switches are taken in the processes started after
 * the session began (a program started under corobpf). A site attached for
 * one process (its libc's ucontext, attach_exec_ucontext) and Go's are taken
 * whenever it started.
 */
static __always_inline bool ctx_wanted(__u64 k)
{
	struct task_struct *task;

	if (!system_wide || CORO_CTX_COOKIE_FAM(k) == CORO_FAM_GO ||
	    (CORO_CTX_COOKIE_FLAGS(k) & CORO_CTXC_THIS_PID))
		return true;
	task = bpf_get_current_task_btf();
	return task->group_leader->start_boottime >= session_start_ts;
}

static __always_inline int ctx_handler(struct pt_regs *regs)
{
	__u64 k = bpf_get_attach_cookie(regs);
	struct coro_task_state *st;

	if (!ctx_wanted(k) || !admitted())
		return 0;
	st = task_state_running();
	switch (CORO_CTX_COOKIE_OP(k)) {
	case CORO_CTXOP_SWITCH:
		ctx_switch(regs, k, st);
		break;
	case CORO_CTXOP_CREATE:
		ctx_create(regs, k, st);
		break;
	case CORO_CTXOP_EXIT: {
		struct coro_ev_ctx_exit_status *e;

		if ((CORO_CTX_COOKIE_FLAGS(k) & CORO_CTXC_EXIT_IF_A) &&
		    !ctx_reg(regs, CORO_CTX_COOKIE_A(k)))
			break;
		e = event_reserve(st, sizeof(*e), CORO_EV_CTX_EXIT);
		if (!e)
			break;
		e->e.family = CORO_CTX_COOKIE_FAM(k);
		e->e.__pad = 0;
		e->status = 0;
		if (CORO_CTX_COOKIE_FLAGS(k) & CORO_CTXC_EXIT_STATUS_A)
			e->status = (__s64)ctx_reg(regs, CORO_CTX_COOKIE_A(k));
		event_submit(e);
		break;
	}
	case CORO_CTXOP_MAIN: {
		/* No switch: what runs stays; `from` is the thread's main context. */
		struct coro_ev_ctx_switch *e = event_reserve(st, sizeof(*e), CORO_EV_CTX_SWITCH);

		if (!e)
			break;
		e->from = ctx_reg(regs, CORO_CTX_COOKIE_A(k));
		e->to = 0;
		e->family = CORO_CTX_COOKIE_FAM(k);
		e->flags = CORO_CTXF_MAIN;
		event_submit(e);
		break;
	}
	case CORO_CTXOP_SAVE: {
		/* No switch: what runs stays (st->cur unchanged), known by one more address. */
		struct coro_ev_ctx_switch *e = event_reserve(st, sizeof(*e), CORO_EV_CTX_SWITCH);

		if (!e)
			break;
		e->from = ctx_reg(regs, CORO_CTX_COOKIE_A(k));
		e->to = 0;
		e->family = CORO_CTX_COOKIE_FAM(k);
		e->flags = CORO_CTXF_SAVE;
		event_submit(e);
		break;
	}
	case CORO_CTXOP_NAME: {
		__u64 attr = ctx_reg(regs, CORO_CTX_COOKIE_A(k));
		struct coro_event_hdr h = {};

		if (!st || ctx_reg(regs, CORO_CTX_COOKIE_B(k)) != CORO_PTH_ATTR_NAME)
			break;
		read_label(st->pth_name, ctx_reg(regs, CORO_CTX_COOKIE_C(k)), &h, false);
		st->pth_name_flags = h.flags;
		st->pth_attr = attr;
		break;
	}
	case CORO_CTXOP_GO:
		go_status(regs, k, st);
		break;
	case CORO_CTXOP_SPAWN:
		if (st) {
			__u64 attr = ctx_reg(regs, CORO_CTX_COOKIE_A(k));

			st->pth_spawning = attr && attr == st->pth_attr;
		}
		break;
	}
	return 0;
}

/* Attached one uprobe at a time (kernels before 6.6). */
SEC("uprobe")
int coro_ctx(struct pt_regs *regs)
{
	return ctx_handler(regs);
}

/*
 * Attached through uprobe_multi links (kernel 6.6 and later; user space sets
 * the attach type): all of an object's sites in one link, detached at once
 * instead of one ~50 ms unregistration each.
 */
SEC("uprobe")
int coro_ctx_multi(struct pt_regs *regs)
{
	return ctx_handler(regs);
}
#else
/* The switch-function path decodes x86-64 only. */
SEC("uprobe")
int coro_ctx(struct pt_regs *regs)
{
	return 0;
}

SEC("uprobe")
int coro_ctx_multi(struct pt_regs *regs)
{
	return 0;
}
#endif

/*
 * C++20 coroutines in unmodified programs (docs/cxx20.md): one program for
 * every site user/elf/cxxcoro.c planned, attached as a uprobe session
 * (kernel 6.13+): a body's entry returns 0 so that its return runs the
 * program again, with the frame kept in the session cookie; every other
 * site returns 1 (no return probe). Raw facts only: user space
 * (user/model/cxxmap.c) keeps each thread's stack of resumes.
 */
extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;

#if defined(__TARGET_ARCH_x86)
static __always_inline __u64 cxx_word(__u64 frame, __u8 *flags, __u8 unread)
{
	__u64 w = 0;

	if (bpf_probe_read_user(&w, sizeof(w), (const void *)frame))
		*flags |= unread;
	return w;
}

SEC("uprobe")
int coro_cxx(struct pt_regs *regs)
{
	__u64 k = bpf_get_attach_cookie(regs), frame, *cookie;
	__u32 op = CORO_CXX_COOKIE_OP(k);
	bool session = op == CORO_CXX_BODY || op == CORO_CXX_RAMP;
	/* Masked: the verifier knows a kfunc's bool only as a scalar, and checks the return value. */
	__u32 ret = session ? (__u32)bpf_session_is_return() & 1 : 0;
	struct coro_task_state *st;
	struct coro_ev_cxx *e;

	if (!admitted())
		return 1;
	cookie = session ? bpf_session_cookie() : NULL;
	if (ret) {
		frame = cookie ? *cookie : 0;
	} else if (op == CORO_CXX_RAMP) {
		/* No frame yet: the entry's stack pointer pairs it with its return. */
		frame = regs->sp;
		if (cookie)
			*cookie = frame;
	} else {
		frame = ctx_reg(regs, CORO_CXX_COOKIE_A(k));
		if (op != CORO_CXX_BODY)
			frame += CORO_CXX_COOKIE_DELTA(k);
		if (cookie)
			*cookie = frame;
	}
	st = task_state_running();
	e = event_reserve(st, sizeof(*e), op == CORO_CXX_AWAIT ? CORO_EV_CXX_AWAIT : CORO_EV_CXX);
	if (e) {
		e->frame = frame;
		e->sp = 0;
		e->word = e->prev = e->prev_word = 0;
		e->fn = CORO_CXX_COOKIE_FN(k);
		e->op = ret ? (op == CORO_CXX_RAMP ? CORO_CXX_RAMP_RETURN : CORO_CXX_RETURN) : op;
		e->flags = 0;
		e->__pad = 0;
		if (op == CORO_CXX_BODY) {
			e->word = cxx_word(frame, &e->flags, CORO_CXXF_WORD_UNREAD);
			if (ret && (e->flags & CORO_CXXF_WORD_UNREAD))
				stat_inc(CORO_STAT_CXX_UNREAD);
		}
		if (op == CORO_CXX_AWAIT) {
			__u8 unread = 0;

			e->word = regs->di; /* the awaiter */
			if (!cxx_word(frame, &unread, 1) && !unread)
				e->flags |= CORO_CXXF_FINAL;
		}
		if (ret && op == CORO_CXX_BODY) {
			__u16 idx = 0;

			e->sp = regs->sp - 8; /* the return address popped: the entry's rsp */
			if (CORO_CXX_COOKIE_DELTA(k) &&
			    !bpf_probe_read_user(&idx, sizeof(idx),
						 (const void *)(frame + CORO_CXX_COOKIE_DELTA(k)))) {
				e->prev_word = idx;
				e->flags |= CORO_CXXF_INDEX;
			}
		}
		if (op == CORO_CXX_BODY && !ret) {
			e->sp = regs->sp;
			if (st && st->cxx_last) {
				e->prev = st->cxx_last;
				e->prev_word = cxx_word(st->cxx_last, &e->flags, CORO_CXXF_PREV_UNREAD);
			}
		}
		event_submit(e);
	}
	if (st && op == CORO_CXX_BODY && !ret && st->cxx_destroying != frame)
		st->cxx_last = frame;
	/* GCC's destroy calls the body at once: any other record first, and it was not that. */
	if (st)
		st->cxx_destroying = op == CORO_CXX_DESTROY ? frame : 0;
	/* Only a body's or a ramp's entry asks for its return. */
	return session && !ret ? 0 : 1;
}
#else
SEC("uprobe")
int coro_cxx(struct pt_regs *regs)
{
	return 1;
}
#endif

#if defined(__TARGET_ARCH_x86)
#include "interp.bpf.h"
#else
/* The interpreters' structures are read as x86-64 builds lay them out. */
SEC("uprobe")
int coro_rt(struct pt_regs *regs)
{
	return 1;
}
#endif

/*
 * --stacks with --sample-hz: a CPU-clock perf event on every CPU. When it
 * interrupts a traced thread running a coroutine, the user stack it runs
 * on: what a long run is doing. Every other thread costs a task storage
 * lookup, 99 times a second per CPU by default.
 */
const volatile bool sample_runs = false;

SEC("perf_event")
int coro_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task;
	struct coro_task_state *st;
	struct coro_ev_sample *e;
	struct stk_rec r;

	if (!sample_runs || stopped)
		return 0;
	batch_harvest_current(BATCH_COPY);
	task = bpf_get_current_task_btf();
	st = bpf_task_storage_get(&task_state, task, 0, 0);
	if (!st || !st->cur_valid || !st->cur)
		return 0;
	e = stk_reserve(&r, st, sizeof(*e), CORO_EV_SAMPLE);
	if (!e)
		return 0;
	e->cpu = bpf_get_smp_processor_id();
	e->__pad = 0;
	stk_take(&r, ctx, (struct pt_regs *)bpf_task_pt_regs(task), sizeof(*e));
	stk_submit(&r);
	return 0;
}

/*
 * ld.so calls _dl_debug_state() whenever the link map changes (the hook
 * debuggers use): tell user space to look for newly mapped objects.
 */
SEC("uprobe")
int coro_libload(struct pt_regs *ctx)
{
	struct coro_ev_libload *e;

	/* --follow watches ld.so of every process: only the followed ones count. */
	if (follow && !admitted())
		return 0;
	e = event_reserve(NULL, sizeof(*e), CORO_EV_LIBLOAD);
	if (!e)
		return 0;
	/*
	 * A launched command on the switch-function path waits until its new
	 * objects are attached: a runtime's extension module (greenlet) starts
	 * switching microseconds after its dlopen. Held only with its record
	 * sure to reach the ring (reserved: user space always sees why it
	 * stopped and sends SIGCONT), and stopped before the record can be
	 * read: a reader quick enough to send its SIGCONT between the record
	 * and the stop left the program stopped for good (as the exec hold
	 * below already knew).
	 */
	if (hold_tgid && (__u32)(bpf_get_current_pid_tgid() >> 32) == hold_tgid &&
	    held_by_live_tracer(bpf_get_current_task_btf()))
		bpf_send_signal(19 /* SIGSTOP */);
	/* User space must react soon: probes in the new object fire meanwhile. */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * The kernel's view under the coroutines: when a traced thread (one with
 * per-thread state, created by its first probe) leaves the CPU and comes
 * back. Every other thread on the machine costs two task storage lookups.
 */
static __always_inline __u32 offcpu_state(bool preempt, unsigned int prev_state)
{
	if (preempt || prev_state == 0)
		return CORO_OFF_PREEMPTED;
	if (prev_state & 0x1) /* TASK_INTERRUPTIBLE */
		return CORO_OFF_SLEEPING;
	if (prev_state & 0x2) /* TASK_UNINTERRUPTIBLE */
		return CORO_OFF_DISK;
	return CORO_OFF_OTHER;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(coro_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct coro_task_state *st;
	__u64 now;

	/* prev is current: its batched records go before its off-CPU record. */
	batch_harvest_current(BATCH_COPY);
	if (!sched_view || stopped)
		return 0;
	st = bpf_task_storage_get(&task_state, prev, 0, 0);
	if (st) {
		struct coro_ev_offcpu_begin *b;

		/* Leaving again, it ran since its last switch-out: that stretch ended. */
		offcpu_close_late(st, prev->tgid, prev->pid);
		now = bpf_ktime_get_boot_ns();
		st->off_ts = now;
		st->wake_ts = 0;
		st->off_state = offcpu_state(preempt, prev_state);
		if (stack_mode != STACKS_OFF && st->cur_valid && st->cur &&
		    (st->off_state == CORO_OFF_SLEEPING || st->off_state == CORO_OFF_DISK)) {
			/*
			 * A coroutine's thread blocks in the kernel (prev is the
			 * current task here): where in the coroutine, for a
			 * blocking finding.
			 */
			struct stk_rec r;

			b = stk_reserve(&r, st, sizeof(*b), CORO_EV_OFFCPU_BEGIN);
			if (b) {
				b->hdr.ts = now; /* the stretch's start: its offcpu_end's start */
				b->state = st->off_state;
				b->cpu = bpf_get_smp_processor_id();
				stk_take(&r, ctx, (struct pt_regs *)bpf_task_pt_regs(prev), sizeof(*b));
				stk_submit(&r);
			}
		} else {
			b = event_reserve_for(st, sizeof(*b), CORO_EV_OFFCPU_BEGIN, prev->tgid,
					      prev->pid);
			if (b) {
				b->hdr.ts = now;
				b->state = st->off_state;
				b->cpu = bpf_get_smp_processor_id();
				event_submit(b);
			}
		}
	}
	st = bpf_task_storage_get(&task_state, next, 0, 0);
	if (st && st->off_ts) {
		struct coro_ev_offcpu_end *e;

		now = bpf_ktime_get_boot_ns();
		e = event_reserve_for(st, sizeof(*e), CORO_EV_OFFCPU_END, next->tgid, next->pid);
		if (e) {
			e->start = st->off_ts;
			/* Preempted, it was runnable all along; else from its wakeup on. */
			e->runq_ns = st->off_state == CORO_OFF_PREEMPTED ? now - st->off_ts
					 : st->wake_ts		   ? now - st->wake_ts
								   : 0;
			e->state = st->off_state;
			e->cpu = bpf_get_smp_processor_id();
			event_submit(e);
		}
		st->off_ts = 0;
	}
	return 0;
}

/*
 * An attach to a running process (-p): user space runs this iterator over
 * the process's threads once the tracepoints above are in place. A thread
 * off the CPU now starts its off-CPU stretch here, as if it had left the CPU
 * now (when it really did is not known): its return ends the stretch, and
 * the time it spent blocked since the attach is never taken for its
 * coroutine running (docs/design.md). A thread on a CPU is left alone.
 */
SEC("iter/task")
int coro_attach_offcpu(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct coro_task_state *st;
	struct coro_ev_offcpu_begin *b;

	if (!task || !sched_view || stopped || task->on_cpu)
		return 0;
	st = bpf_task_storage_get(&task_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		stat_inc(CORO_STAT_NO_TASK_STATE);
		return 0;
	}
	/* Seen leaving already (a probe made its state before): its stretch is open. */
	if (st->off_ts)
		return 0;
	st->off_ts = bpf_ktime_get_boot_ns();
	st->wake_ts = 0;
	st->off_state = offcpu_state(false, task->__state);
	b = event_reserve_for(st, sizeof(*b), CORO_EV_OFFCPU_BEGIN, task->tgid, task->pid);
	if (!b)
		return 0;
	b->hdr.ts = st->off_ts;
	b->state = st->off_state;
	b->cpu = task->wake_cpu;
	event_submit(b);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(coro_sched_wakeup, struct task_struct *p)
{
	struct coro_task_state *st;

	if (!sched_view || stopped)
		return 0;
	st = bpf_task_storage_get(&task_state, p, 0, 0);
	if (st && st->off_ts && !st->wake_ts)
		st->wake_ts = bpf_ktime_get_boot_ns();
	return 0;
}

/* exec: a traced process replaces its image (its coroutines are gone); -a: anyone might now carry probes. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(coro_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 pid = p->tgid;
	struct coro_ev_proc *e;
	bool check;
	__u8 *v;

	if (stopped)
		return 0;
	batch_forget_thread(p);
	v = bpf_map_lookup_elem(&traced, &pid);
	if (!system_wide && !v)
		return 0;
	/* A new image: admitted again on its first probe, under the filters. */
	if (system_wide && v && *v == VERDICT_IGNORED)
		bpf_map_delete_elem(&traced, &pid);
	check = exec_check_tgid && pid == exec_check_tgid;
	if (check)
		exec_check_tgid = 0; /* once: a later exec is the program's own */
	e = event_reserve_for(NULL, sizeof(*e), CORO_EV_EXEC, pid, pid);
	if (!e)
		return 0;
	/*
	 * Held only with its record sure to reach the ring (user space then
	 * always sees why it stopped and sends SIGCONT; a lost record lets it
	 * run unheld), and stopped before the record is there to be read, so
	 * that a SIGCONT never comes ahead of the SIGSTOP it answers.
	 */
	if (check && held_by_live_tracer(bpf_get_current_task_btf())) {
		exec_check_held = pid;
		bpf_send_signal(19 /* SIGSTOP */);
	} else if (exec_hold_tgid && pid == exec_hold_tgid &&
		   held_by_live_tracer(bpf_get_current_task_btf())) {
		bpf_send_signal(19 /* SIGSTOP */);
	}
	proc_submit(e, CORO_EV_EXEC, p, 0);
	return 0;
}

/*
 * -p / --: when a target's last thread exited, for its exit record (user
 * space learns of the exit later, from its pidfd, after draining the ring).
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);  /* pid */
	__type(value, __u64); /* CLOCK_BOOTTIME, ns */
} target_exit_ts SEC(".maps");

SEC("tp_btf/sched_process_exit")
int BPF_PROG(coro_proc_exit, struct task_struct *p, bool group_dead)
{
	__u32 pid = p->tgid;
	__u8 *v;

	/*
	 * The batched path: what the thread wrote since its last copy, before
	 * anything of its end enters the ring (under -a and --follow its
	 * process's end record follows at once, below).
	 */
	batch_last_copy();
	if (!group_dead || stopped)
		return 0;
	v = bpf_map_lookup_elem(&traced, &pid);
	if (!v)
		return 0;
	/* -p / --: user space learns of a target's exit from its pidfd (with the status). */
	if ((system_wide && *v == VERDICT_TRACED) || *v == VERDICT_FOLLOWED) {
		emit_proc(CORO_EV_PROC_GONE, pid, p, p->exit_code);
	} else {
		__u64 now = bpf_ktime_get_boot_ns();

		bpf_map_update_elem(&target_exit_ts, &pid, &now, BPF_ANY);
	}
	/* Forgotten at once: a new process given the same pid is not the target. */
	bpf_map_delete_elem(&traced, &pid);
	return 0;
}

/*
 * --follow: a traced process forked a new process (not a thread). It is
 * admitted here, in the parent, before the child's first instruction: the
 * probes it inherited report from the start.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(coro_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = parent->tgid, pid = child->tgid;
	__u8 verdict = VERDICT_FOLLOWED, *v;

	if (!follow || stopped || pid == ppid)
		return 0;
	v = bpf_map_lookup_elem(&traced, &ppid);
	if (!v || (*v != VERDICT_TRACED && *v != VERDICT_FOLLOWED))
		return 0;
	/* The parent's pid rides in exit_code: user space names it as the ppid. */
	if (bpf_map_update_elem(&traced, &pid, &verdict, BPF_ANY) == 0)
		emit_proc(CORO_EV_PROC_NEW, pid, child, (__s32)ppid);
	else
		stat_inc(CORO_STAT_MAP_FULL);
	return 0;
}
