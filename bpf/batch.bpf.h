/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The batched probe path, kernel side (usdt/corobpf.h, BATCHED PATH;
 * docs/probes.md). Included by corobpf.bpf.c after its helpers.
 *
 * A traced thread appends its create/ready/switch/exit records to a buffer
 * in its own memory and traps only on its first record and on a full
 * buffer (the `batch` probe, which hands over the buffer's address). The
 * records are copied out of the thread, in one read, whenever it cannot
 * run user code: at that trap, when it leaves the CPU (sched_switch: prev
 * is current, its memory readable), on a timer tick while it runs, at
 * do_exit (before exit_mm), and before its string probes' own records.
 * Ring order is thus each thread's order, and a thread's records reach the
 * ring before the kernel events that follow them (off-CPU, exit).
 *
 * The thread owns its buffer's `word` ((generation << 32) | records
 * written); this side keeps what it has copied of the generation it last
 * read (batch_threads) and starts again at 0 when the generation changes.
 * The reads cannot fault pages in: a failed read is counted and retried at
 * the next harvest, and counted as lost (by record) only when the thread
 * is about to reuse the buffer or end.
 */
#ifndef COROBPF_BATCH_BPF_H
#define COROBPF_BATCH_BPF_H

/* `batched` (set by user space with the batch probe) is in corobpf.bpf.c, before admitted(). */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32); /* tid */
	__type(value, struct coro_batch_slots);
} batch_threads SEC(".maps");

#define BATCH_REC_SIZE sizeof(struct corobpf_batch_rec)
#define BATCH_BYTES_MAX (CORO_BATCH_RECS_MAX * BATCH_REC_SIZE)
_Static_assert(CORO_BATCH_RECS_MAX == COROBPF_BATCH_RECS, "a full buffer fits one ring record");
_Static_assert(BATCH_REC_SIZE == 40, "the record layout of usdt/corobpf.h");
#define BATCH_READ_MASK 16383
_Static_assert(BATCH_BYTES_MAX <= BATCH_READ_MASK, "a full buffer fits the mask");

struct batch_scratch {
	__u64 busy;
	struct coro_ev_batch ev;
	struct corobpf_batch_rec rec[CORO_BATCH_RECS_MAX];
	/* Room up to the mask the verifier follows (BATCH_READ_MASK). */
	__u8 __pad[BATCH_READ_MASK + 1 - BATCH_BYTES_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch_scratch);
} batch_scratch SEC(".maps");

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		__sync_fetch_and_add(v, n);
}

/*
 * Copy out what the current thread (pid, tid) wrote since the last copy.
 * `final`: it is about to reuse the buffer (a full buffer's trap) or end,
 * so what cannot be read now is lost (and counted).
 */
/*
 * Kernel 6.10 and later. Programs on uprobe_multi links run preemptible: a
 * harvest preempted between its copy and its record would let the thread's
 * sched_switch write the off-CPU record first, with the coroutine the
 * thread ran before the records being copied.
 */
extern void bpf_preempt_disable(void) __weak __ksym;
extern void bpf_preempt_enable(void) __weak __ksym;

static __noinline int batch_harvest_locked(struct coro_batch_thread *bt,
					   struct coro_task_state *st, __u32 pid, __u32 tid,
					   bool final);

static __noinline int batch_harvest(struct coro_batch_thread *bt, struct coro_task_state *st,
				    __u32 pid, __u32 tid, bool final)
{
	if (bpf_ksym_exists(bpf_preempt_disable)) {
		bpf_preempt_disable();
		batch_harvest_locked(bt, st, pid, tid, final);
		bpf_preempt_enable();
		return 0;
	}
	return batch_harvest_locked(bt, st, pid, tid, final);
}

static __noinline int batch_harvest_locked(struct coro_batch_thread *bt,
					   struct coro_task_state *st, __u32 pid, __u32 tid,
					   bool final)
{
	struct batch_scratch *s;
	__u32 zero = 0, head, gen, n, first;
	__u64 word, buf, bytes, size;

	if (!bt || stopped)
		return 0;
	s = bpf_map_lookup_elem(&batch_scratch, &zero);
	/* A program this one interrupted on this CPU holds it: the next harvest takes these. */
	if (!s || __sync_lock_test_and_set(&s->busy, 1ULL))
		return 0;
	buf = bt->buf;
	if (bpf_probe_read_user(&word, sizeof(word), (const void *)buf)) {
		stat_inc(CORO_STAT_BATCH_DEFERRED);
		goto out;
	}
	gen = word >> 32;
	head = (__u32)word;
	if (gen != bt->gen) {
		bt->gen = gen;
		bt->consumed = 0;
	}
	if (head > CORO_BATCH_RECS_MAX)
		head = CORO_BATCH_RECS_MAX;
	first = bt->consumed;
	if (head <= first)
		goto out;
	n = head - first;
	if (first >= CORO_BATCH_RECS_MAX || n > CORO_BATCH_RECS_MAX)
		goto out;
	bytes = (__u64)n * BATCH_REC_SIZE;
	/* What the verifier follows: the read stays in the scratch buffer. */
	asm volatile("" : "+r"(bytes));
	bytes &= BATCH_READ_MASK;
	if (bpf_probe_read_user(s->rec, bytes,
				(const void *)(buf + offsetof(struct corobpf_batch, rec) +
					       (__u64)first * BATCH_REC_SIZE))) {
		if (final) {
			stat_add(CORO_STAT_BATCH_UNREAD, n);
			bt->consumed = head;
			if (st)
				st->lost += n;
		} else {
			stat_inc(CORO_STAT_BATCH_DEFERRED);
		}
		goto out;
	}
	bt->consumed = head;
	size = sizeof(struct coro_ev_batch) + bytes;
	fill_hdr(&s->ev.hdr, st, size, CORO_EV_BATCH, pid, tid);
	s->ev.n = n;
	s->ev.first = first;
	s->ev.buf = buf;
	/* The thread's coroutine, as the trap path tracks it: for the kernel's records that follow. */
	if (st) {
		for (int i = 0; i < CORO_BATCH_RECS_MAX; i++) {
			int j = (int)n - 1 - i;

			if (j < 0)
				break;
			if (s->rec[j & (CORO_BATCH_RECS_MAX - 1)].kind == CORO_EV_SWITCH) {
				st->cur = s->rec[j & (CORO_BATCH_RECS_MAX - 1)].a1;
				st->cur_valid = 1;
				break;
			}
		}
	}
	if (bpf_ringbuf_output(&events, &s->ev, size, submit_flags(s->ev.hdr.ts))) {
		stat_add(CORO_STAT_RING_FULL, n);
		stat_add(CORO_STAT_BATCH_RING_FULL, n);
		if (st)
			st->lost += s->ev.hdr.lost_before + n;
	}
out:
	s->busy = 0;
	return 0;
}

/* The current thread's records, if it has a buffer: before anything else of it enters the ring. */
static __always_inline void batch_harvest_current(bool final)
{
	__u64 pid_tgid;
	__u32 tid;
	struct coro_batch_slots *v;
	struct coro_task_state *st;

	if (!batched || stopped)
		return;
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	v = bpf_map_lookup_elem(&batch_threads, &tid);
	if (!v)
		return;
	st = bpf_task_storage_get(&task_state, bpf_get_current_task_btf(), 0, 0);
	for (int i = 0; i < CORO_BATCH_SLOTS; i++)
		if (v->slot[i].buf)
			batch_harvest(&v->slot[i], st, pid_tgid >> 32, tid, final);
}

/*
 * The batch probe: the thread's first record (its buffer made known) or a
 * full buffer (copied out now; the thread starts it again on return).
 */
SEC("usdt")
int BPF_USDT(coro_batch, __u64 buf)
{
	struct coro_batch_slots fresh = {}, *v;
	struct coro_batch_thread *bt = NULL;
	struct coro_task_state *st;
	__u64 pid_tgid, word = 0;
	__u32 tid;

	struct corobpf_batch_rec first = {};

	if (!batched)
		return 0;
	/* Its first record, for the process record of a process admitted now (-a). */
	bpf_probe_read_user(&first, sizeof(first),
			    (const void *)(buf + offsetof(struct corobpf_batch, rec)));
	if (!admitted_at(first.ts))
		return 0;
	st = task_state_running();
	pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)pid_tgid;
	v = bpf_map_lookup_elem(&batch_threads, &tid);
	if (!v) {
		if (bpf_map_update_elem(&batch_threads, &tid, &fresh, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&batch_threads, &tid)) {
			stat_inc(CORO_STAT_MAP_FULL);
			return 0;
		}
		v = bpf_map_lookup_elem(&batch_threads, &tid);
		if (!v)
			return 0;
	}
	for (int i = 0; i < CORO_BATCH_SLOTS; i++)
		if (v->slot[i].buf == buf)
			bt = &v->slot[i];
	if (!bt) {
		/* A new buffer: a free slot, else the last one (its records copied out first). */
		bt = &v->slot[CORO_BATCH_SLOTS - 1];
		for (int i = CORO_BATCH_SLOTS - 1; i >= 0; i--)
			if (!v->slot[i].buf)
				bt = &v->slot[i];
		if (bt->buf)
			batch_harvest(bt, st, pid_tgid >> 32, tid, false);
		bpf_probe_read_user(&word, sizeof(word), (const void *)buf);
		bt->buf = buf;
		bt->pid = pid_tgid >> 32;
		bt->gen = word >> 32;
		bt->consumed = 0;
	}
	batch_harvest(bt, st, pid_tgid >> 32, tid, true);
	return 0;
}

/* Threads that run without leaving the CPU: a CPU-clock tick copies out the one it interrupted. */
SEC("perf_event")
int coro_batch_tick(struct bpf_perf_event_data *ctx)
{
	batch_harvest_current(false);
	return 0;
}

/* The thread's memory is about to go: copy out what it wrote since its last copy, forget it. */
static __always_inline int batch_last_copy(void)
{
	__u32 tid;

	if (!batched)
		return 0;
	batch_harvest_current(true);
	tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&batch_threads, &tid);
	return 0;
}

/*
 * A thread ends (it returned, exited, was killed): coro_proc_exit copies it
 * out first (batch_last_copy), in the same program that may write its
 * process's end, so the records come first in the ring. Since 6.16 the
 * kernel fires sched_process_exit before exit_mm, so its memory is still
 * there (do_exit itself is notrace here: neither a kprobe nor a
 * trampoline); on older kernels the read fails and its unread records are
 * counted lost.
 */

/*
 * A thread execs: its image, buffers included, is about to go. The kernel
 * fires sched_prepare_exec (6.10 and later) past the point of no return but
 * before de_thread and before the memory is replaced: what the thread wrote
 * since its last copy is copied out there and its buffers forgotten (the
 * other threads are copied out at their exit, which de_thread brings
 * about); the new image makes its own known at its first record. Older
 * kernels forget them at sched_process_exec (batch_forget_thread).
 */
SEC("tp_btf/sched_prepare_exec")
int BPF_PROG(coro_batch_exec, struct task_struct *task, struct linux_binprm *bprm)
{
	return batch_last_copy();
}

/*
 * At sched_process_exec, in the new image: no buffer of the old one may be
 * read again (the same address may now hold anything, or the new image's
 * own buffer). Only reached before 6.10 (no sched_prepare_exec): then
 * what the thread wrote since its last copy is gone uncounted (corobpf
 * said so when it attached).
 */
static __always_inline void batch_forget_thread(__u32 tid)
{
	if (batched)
		bpf_map_delete_elem(&batch_threads, &tid);
}

#endif /* COROBPF_BATCH_BPF_H */
