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
 * Where a thread's buffers are is kept in batch_bufs, task storage that
 * user space pins in bpffs so that every later session shares it (the
 * thread says so only once, at its first record; corobpf never writes into
 * a target). An entry dies with its task and holds only the addresses, for
 * the image that registered them. What a session has copied of each buffer
 * is its own (batch_threads), so two sessions each get every record: the
 * thread owns the buffer's `word` ((generation << 32) | records written);
 * a session keeps what it copied of the generation it last read and starts
 * again at 0 when the generation changes. A session that meets a buffer
 * already in use (registered before it started) copies it from the start
 * and user space leaves out what was stamped before the session.
 *
 * The reads only ever read the current thread's own memory (a sleepable
 * iterator, the task's, at the end of a run), and cannot fault pages in: a
 * failed read is counted and retried at the next harvest, and counted as
 * lost (by record) only when the thread is about to reuse the buffer or end.
 */
#ifndef COROBPF_BATCH_BPF_H
#define COROBPF_BATCH_BPF_H

/*
 * `batched` (set by user space with the batch probe) and `batch_reads` (the copies: on the
 * batched path, and on the trap path beside another session's batched one) are in
 * corobpf.bpf.c, before admitted().
 */

/*
 * This session's read positions in a thread's buffers, for one image of it
 * (an exec starts again). Task storage: they die with the thread, and a
 * thread whose last copy was made (at its exec or its end) is not met again
 * while it winds down.
 */
struct coro_batch_slots {
	struct coro_batch_thread slot[CORO_BATCH_SLOTS];
	__u64 exec_id; /* the image they are for */
	__u32 valid;   /* exec_id is set */
	__u32 done;    /* its last copy was made */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct coro_batch_slots);
} batch_threads SEC(".maps");

/*
 * Where threads' buffers are, shared by the sessions: user space reuses the
 * pinned map when there is one (batch.c), else this session's is private.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct coro_batch_reg);
} batch_bufs SEC(".maps");

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

/* The thread pointer: a forked child's only thread keeps the one of the thread that forked it. */
static __always_inline __u64 task_tp(struct task_struct *t)
{
#if defined(__TARGET_ARCH_x86)
	return t->thread.fsbase;
#elif defined(__TARGET_ARCH_arm64)
	return t->thread.uw.tp_value;
#else
	return 0;
#endif
}

/* A buffer met in use holds records of before the session, or (forked) of before the thread. */
static __always_inline __u64 batch_floor(struct task_struct *t)
{
	__u64 start = t->start_boottime;

	return start > session_start_ts ? start : session_start_ts;
}

/* How a copy is made: what cannot be read now is lost only when the thread moves on. */
enum batch_copy {
	BATCH_COPY = 0, /* the thread goes on with its buffer: retried at the next copy */
	BATCH_TRAP = 1, /* its batch trap: a full buffer starts again on return */
	BATCH_LAST = 2, /* it execs or ends */
};

/*
 * Kernel 6.10 and later. Programs on uprobe_multi links run preemptible: a
 * harvest preempted between its copy and its record would let the thread's
 * sched_switch write the off-CPU record first, with the coroutine the
 * thread ran before the records being copied.
 */
extern void bpf_preempt_disable(void) __weak __ksym;
extern void bpf_preempt_enable(void) __weak __ksym;

/*
 * One program at a time works on the current thread's entry in batch_bufs
 * and its positions in batch_threads: it holds the CPU's scratch buffer
 * (busy), with preemption off, from its lookups to the last write that
 * makes them whole (batch_begin), and again for each copy (batch_harvest).
 * Only the thread's own programs touch them, on its CPU: what interrupts
 * one (the CPU-clock tick, a hard interrupt) finds the scratch buffer held
 * and leaves the thread to it. The lock once covered the copy alone: a tick
 * that came while the batch trap made the positions (an entry made but not
 * yet valid, a slot given its buffer but not yet reset) made them again and
 * copied the records out, then the trap reset them and copied the same
 * records again (a thread's first record, its create, twice in the ring:
 * fault_ten_thousand_threads). A preemptible program, preempted there, did
 * the same with the thread's sched_switch.
 */
static __always_inline struct batch_scratch *batch_lock(void)
{
	struct batch_scratch *s;
	__u32 zero = 0;

	s = bpf_map_lookup_elem(&batch_scratch, &zero);
	if (!s || __sync_lock_test_and_set(&s->busy, 1ULL))
		return NULL;
	return s;
}

static __always_inline void batch_unlock(struct batch_scratch *s)
{
	s->busy = 0;
}

/* A buffer's records, as one object: what batch_last_switch reads. */
struct batch_recs {
	struct corobpf_batch_rec rec[CORO_BATCH_RECS_MAX];
};

/*
 * The index of the last switch among a copy's n records stamped at floor or
 * later, or -1. A global function: the verifier checks its loop once, not
 * once for each copy that calls it (its records in the ring or in the
 * scratch buffer).
 */
__noinline int batch_last_switch(const struct batch_recs *r, __u32 n, __u64 floor)
{
	if (!r)
		return -1;
	for (int i = 0; i < CORO_BATCH_RECS_MAX; i += 8) {
#pragma unroll
		for (int k = 0; k < 8; k++) {
			int j = (int)n - 1 - i - k;
			const struct corobpf_batch_rec *rec;

			if (j < 0)
				return -1;
			rec = &r->rec[j & (CORO_BATCH_RECS_MAX - 1)];
			if (rec->kind == CORO_EV_SWITCH && rec->ts >= floor)
				return j;
		}
	}
	return -1;
}

/* Where a copy's last switch is (batch_switch_hint), when not an index into the copy. */
#define BATCH_NO_SWITCH (-1) /* none among its records */
#define BATCH_SCAN (-2)	     /* not said: read its records back (batch_last_switch) */

_Static_assert(__builtin_offsetof(struct corobpf_batch, rec) == 16 &&
		       __builtin_offsetof(struct corobpf_batch, flags) < 16,
	       "one read of 16 bytes has a buffer's word and flags");

/*
 * Where the last switch among the records [first, head) of generation gen
 * is, as the thread says (last_switch, usdt/corobpf.h): so the copy need not
 * read its records back. A switch being appended when a tick interrupted
 * the thread has overwritten last_switch before its word published it:
 * the copy's own last switch is then not said.
 */
static __always_inline int batch_switch_hint(__u64 buf, __u8 flags, __u32 gen, __u32 first,
					     __u32 head)
{
	__u64 ls = 0;
	__u32 at;

	if (!(flags & __CORO_BF_LAST_SWITCH) ||
	    bpf_probe_read_user(&ls, sizeof(ls),
				(const void *)(buf + offsetof(struct corobpf_batch, last_switch))))
		return BATCH_SCAN;
	if ((__u32)(ls >> 32) != gen)
		return (__u32)(ls >> 32) == gen + 1 ? BATCH_SCAN : BATCH_NO_SWITCH;
	at = (__u32)ls; /* its index + 1 */
	if (at > head)
		return BATCH_SCAN;
	if (at <= first)
		return BATCH_NO_SWITCH;
	return (int)(at - 1 - first);
}

/*
 * The thread's coroutine, as the trap path tracks it: for the kernel's
 * records that follow. Not from a switch user space leaves out (before
 * the floor): if the last one is, every one before it is too.
 */
static __always_inline void batch_note_cur(struct coro_task_state *st, const struct batch_recs *r,
					   __u32 n, __u64 floor, int hint)
{
	const struct corobpf_batch_rec *rec;
	int j = hint;

	if (!st || j == BATCH_NO_SWITCH)
		return;
	if (j >= 0) {
		rec = &r->rec[j & (CORO_BATCH_RECS_MAX - 1)];
		/* What the thread said is its own to get wrong: then the records decide. */
		if ((__u32)j >= n || rec->kind != CORO_EV_SWITCH)
			j = BATCH_SCAN;
		else if (rec->ts < floor)
			return;
	}
	if (j == BATCH_SCAN)
		j = batch_last_switch(r, n, floor);
	if (j < 0)
		return;
	st->cur = r->rec[j & (CORO_BATCH_RECS_MAX - 1)].a1;
	st->cur_valid = 1;
}

/* The records could not be read: lost if the thread moves past them, else read at the next copy. */
static __always_inline void batch_unreadable(struct coro_batch_thread *bt,
					     struct coro_task_state *st, __u32 head, __u32 n,
					     bool lost_if_unread)
{
	if (lost_if_unread) {
		stat_add(CORO_STAT_BATCH_UNREAD, n);
		bt->consumed = head;
		if (st)
			st->lost += n;
	} else {
		stat_inc(CORO_STAT_BATCH_DEFERRED);
	}
}

/* A whole buffer's copy, as it enters the ring. */
struct batch_whole {
	struct coro_ev_batch ev;
	struct batch_recs recs;
};
_Static_assert(__builtin_offsetof(struct batch_whole, recs) == sizeof(struct coro_ev_batch) &&
		       __builtin_offsetof(struct batch_scratch, rec) ==
			       __builtin_offsetof(struct batch_scratch, ev) + sizeof(struct coro_ev_batch),
	       "a copy's records follow its header, as user space splits them");

/*
 * A whole buffer (records 0 to 255: the copy at its full trap, nearly
 * every copy in a flood), read straight into the ring: one copy of its
 * records, not two (into the scratch buffer, then the ring). 1 when done with it; 0 when the ring has
 * no room: the scratch path then reads the records all the same, for the
 * thread's coroutine as they leave it (the kernel's next records of the
 * thread carry it), and counts them lost (without that read, the coroutine
 * overload_every_lost_event_is_counted found uncertain was the one before).
 */
static __noinline int batch_copy_whole(struct coro_batch_thread *bt, struct coro_task_state *st,
				       __u64 buf, bool lost_if_unread, int hint)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), floor;
	struct batch_whole *w;

	w = bpf_ringbuf_reserve(&events, sizeof(*w), 0);
	if (!w)
		return 0;
	if (bpf_probe_read_user(&w->recs, sizeof(w->recs),
				(const void *)(buf + offsetof(struct corobpf_batch, rec)))) {
		bpf_ringbuf_discard(w, BPF_RB_NO_WAKEUP);
		batch_unreadable(bt, st, CORO_BATCH_RECS_MAX, CORO_BATCH_RECS_MAX, lost_if_unread);
		return 1;
	}
	bt->consumed = CORO_BATCH_RECS_MAX;
	floor = bt->floor;
	bt->floor = 0;
	fill_hdr(&w->ev.hdr, st, sizeof(*w), CORO_EV_BATCH, pid_tgid >> 32, (__u32)pid_tgid);
	w->ev.n = CORO_BATCH_RECS_MAX;
	w->ev.first = 0;
	w->ev.buf = buf;
	w->ev.floor = floor;
	batch_note_cur(st, &w->recs, CORO_BATCH_RECS_MAX, floor, hint);
	bpf_ringbuf_submit(w, submit_flags(w->ev.hdr.ts));
	return 1;
}

/*
 * A whole buffer the ring has no room for: lost, and its records are not read (a copy into
 * the scratch buffer would go nowhere; in a flood the ring is full when the target can least
 * spare the time). Only the thread's coroutine as they leave it is taken: from the switch the
 * thread says is its last (one record read), or none when it says there is none. 1 when done
 * with it; 0 when the records must be read to know (not said, or what was said is wrong): the
 * scratch path then reads them and counts them lost as before.
 */
static __noinline int batch_drop_whole(struct coro_batch_thread *bt, struct coro_task_state *st,
				       __u64 buf, int hint)
{
	struct corobpf_batch_rec rec;

	if (hint == BATCH_SCAN)
		return 0;
	if (st && hint >= 0) {
		if (bpf_probe_read_user(&rec, sizeof(rec),
					(const void *)(buf + offsetof(struct corobpf_batch, rec) +
						       (__u64)(hint & (CORO_BATCH_RECS_MAX - 1)) *
							       BATCH_REC_SIZE)) ||
		    rec.kind != CORO_EV_SWITCH)
			return 0;
		if (rec.ts >= bt->floor) {
			st->cur = rec.a1;
			st->cur_valid = 1;
		}
	}
	bt->consumed = CORO_BATCH_RECS_MAX;
	bt->floor = 0;
	stat_add(CORO_STAT_RING_FULL, CORO_BATCH_RECS_MAX);
	stat_add(CORO_STAT_BATCH_RING_FULL, CORO_BATCH_RECS_MAX);
	if (st)
		st->lost += CORO_BATCH_RECS_MAX;
	return 1;
}

/*
 * Copy out what the current thread wrote in bt's buffer since this session's last copy, into
 * the ring through s (held).
 */
static __noinline int batch_copy(struct batch_scratch *s, struct coro_batch_thread *bt,
				 struct coro_task_state *st, int how)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, pid = pid_tgid >> 32;
	__u32 head, gen, n, first;
	__u64 word, buf, bytes, size, floor, top[2];
	bool lost_if_unread;
	int hint = BATCH_SCAN;
	__u8 flags;

	if (!s || !bt)
		return 0;
	buf = bt->buf;
	/* The word and the flags (batch_switch_hint), in one read. */
	if (bpf_probe_read_user(top, sizeof(top), (const void *)buf)) {
		/* Its last copy: whatever it wrote since the one before is gone, count unknown. */
		if (how == BATCH_LAST)
			stat_inc(CORO_STAT_BATCH_FINAL_UNREAD);
		else
			stat_inc(CORO_STAT_BATCH_DEFERRED);
		return 0;
	}
	word = top[0];
	flags = ((const __u8 *)top)[offsetof(struct corobpf_batch, flags) & 15];
	gen = word >> 32;
	head = (__u32)word;
	if (bt->fresh) {
		bt->fresh = 0;
		bt->gen = gen;
	} else if (gen != bt->gen) {
		/*
		 * A new generation is the thread's own doing. After a full buffer
		 * this session copied at its trap, it is the next one; anything
		 * else skipped records this session never read.
		 */
		if (gen != bt->gen + 1 || bt->consumed < CORO_BATCH_RECS_MAX)
			stat_inc(CORO_STAT_BATCH_GEN_JUMPS);
		bt->gen = gen;
		bt->consumed = 0;
	}
	if (head > CORO_BATCH_RECS_MAX)
		head = CORO_BATCH_RECS_MAX;
	/* At a trap, a full buffer starts again on return; at the last copy, the buffer goes. */
	lost_if_unread = how == BATCH_LAST || (how == BATCH_TRAP && head == CORO_BATCH_RECS_MAX);
	first = bt->consumed;
	if (head <= first)
		return 0;
	n = head - first;
	if (first >= CORO_BATCH_RECS_MAX || n > CORO_BATCH_RECS_MAX)
		return 0;
	if (st)
		hint = batch_switch_hint(buf, flags, gen, first, head);
	if (n == CORO_BATCH_RECS_MAX &&
	    (batch_copy_whole(bt, st, buf, lost_if_unread, hint) ||
	     batch_drop_whole(bt, st, buf, hint)))
		return 0;
	bytes = (__u64)n * BATCH_REC_SIZE;
	/* What the verifier follows: the read stays in the scratch buffer. */
	asm volatile("" : "+r"(bytes));
	bytes &= BATCH_READ_MASK;
	if (bpf_probe_read_user(s->rec, bytes,
				(const void *)(buf + offsetof(struct corobpf_batch, rec) +
					       (__u64)first * BATCH_REC_SIZE))) {
		batch_unreadable(bt, st, head, n, lost_if_unread);
		return 0;
	}
	bt->consumed = head;
	floor = bt->floor;
	bt->floor = 0;
	size = sizeof(struct coro_ev_batch) + bytes;
	fill_hdr(&s->ev.hdr, st, size, CORO_EV_BATCH, pid, tid);
	s->ev.n = n;
	s->ev.first = first;
	s->ev.buf = buf;
	s->ev.floor = floor;
	batch_note_cur(st, (struct batch_recs *)s->rec, n, floor, hint);
	if (bpf_ringbuf_output(&events, &s->ev, size, submit_flags(s->ev.hdr.ts))) {
		stat_add(CORO_STAT_RING_FULL, n);
		stat_add(CORO_STAT_BATCH_RING_FULL, n);
		if (st)
			st->lost += s->ev.hdr.lost_before + n;
	}
	return 0;
}

/* bt, a slot of this session's positions, set to the buffer buf: met now. */
static __always_inline void batch_slot_set(struct coro_batch_thread *bt, __u64 buf, __u64 floor)
{
	bt->buf = buf;
	bt->pid = bpf_get_current_pid_tgid() >> 32;
	bt->gen = 0;
	bt->consumed = 0;
	bt->fresh = 1;
	bt->floor = floor;
}

/* With a batch_copy: buf is the buffer the slot held, copied only if it still holds it. */
#define BATCH_HELD 4

/*
 * Copy out what the current thread wrote in buf, the buffer it registered in
 * bt's slot, since this session's last copy: a slot new to the session, or
 * that held another buffer, is set to buf first.
 */
static __noinline int batch_harvest_locked(struct coro_batch_thread *bt,
					   struct coro_task_state *st, __u64 buf, __u64 floor,
					   int how)
{
	struct batch_scratch *s;

	if (!bt || !buf || stopped)
		return 0;
	/* A program this one interrupted on this CPU holds it: the next harvest takes these. */
	s = batch_lock();
	if (!s)
		return 0;
	if (bt->buf != buf) {
		if (how & BATCH_HELD)
			goto out;
		batch_slot_set(bt, buf, floor);
	}
	/* One call, whatever the way here: the verifier checks the copy once. */
	batch_copy(s, bt, st, how & ~BATCH_HELD);
out:
	batch_unlock(s);
	return 0;
}

/* A global function: the verifier checks it once, not at every call. */
__noinline int batch_harvest(struct coro_batch_thread *bt, struct coro_task_state *st, __u64 buf,
			     __u64 floor, int how)
{
	if (bpf_ksym_exists(bpf_preempt_disable)) {
		bpf_preempt_disable();
		batch_harvest_locked(bt, st, buf, floor, how);
		bpf_preempt_enable();
		return 0;
	}
	return batch_harvest_locked(bt, st, buf, floor, how);
}

/*
 * The thread's records in buf, whose positions are in slot bt. A slot that
 * held another buffer (a third replaced the second) has what this session
 * had not read of that one copied out first.
 */
static __always_inline void batch_harvest_slot(struct coro_batch_thread *bt,
					       struct coro_task_state *st, __u64 buf, __u64 floor,
					       int how)
{
	__u64 held = bt->buf;

	if (held && held != buf)
		batch_harvest(bt, st, held, floor, BATCH_COPY | BATCH_HELD);
	batch_harvest(bt, st, buf, floor, how);
}

/*
 * The first thread of a process forked (not exec'd since) from a thread
 * whose buffers are registered has them too, at the same addresses (its
 * memory is a copy; the registration flag in it is set): it inherits the
 * entry, its parent's records in it left out by the floor. Checked step by
 * step up a chain of such forks: same image (exec ids), another process
 * (not a vfork sharing memory), and the same thread pointer, which a
 * parent that is not the thread that forked (it was reparented) lacks.
 */
static __always_inline struct coro_batch_reg *batch_reg_inherit(struct task_struct *task)
{
	struct coro_batch_reg *from = NULL, *reg, init = {};
	struct task_struct *t = task, *p;
	__u64 tp = task_tp(task);

	if (!tp)
		return NULL;
	for (int i = 0; i < 4; i++) {
		if (t->pid != t->tgid || t->self_exec_id != t->parent_exec_id)
			return NULL;
		p = t->real_parent;
		if (!p || p->tgid == t->tgid || p->mm == t->mm)
			return NULL;
		from = bpf_task_storage_get(&batch_bufs, p, 0, 0);
		if (from)
			break;
		if (task_tp(p) != tp)
			return NULL;
		t = p;
	}
	if (!from || from->exec_id != t->parent_exec_id || from->tp != tp ||
	    (!from->buf[0] && !from->buf[1]))
		return NULL;
	init.exec_id = task->self_exec_id;
	init.tp = tp;
	init.buf[0] = from->buf[0];
	init.buf[1] = from->buf[1];
	/* Made whole (batch_register says why). */
	reg = bpf_task_storage_get(&batch_bufs, task, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!reg)
		stat_inc(CORO_STAT_BATCH_UNREGISTERED);
	return reg;
}

/* -a: a buffer with a record of this session (a process is admitted only then). */
static __always_inline bool batch_has_new(struct coro_batch_reg *reg, __u64 floor)
{
	for (int i = 0; i < CORO_BATCH_SLOTS; i++) {
		__u64 buf = reg->buf[i], word = 0, ts = 0;
		__u32 head;

		if (!buf || bpf_probe_read_user(&word, sizeof(word), (const void *)buf))
			continue;
		head = (__u32)word;
		if (!head || head > CORO_BATCH_RECS_MAX)
			continue;
		if (!bpf_probe_read_user(&ts, sizeof(ts),
					 (const void *)(buf + offsetof(struct corobpf_batch, rec) +
							(__u64)(head - 1) * BATCH_REC_SIZE)) &&
		    ts >= floor)
			return true;
	}
	return false;
}

/*
 * A thread this session meets by its registration, not by a probe of its
 * own: traced only if its process is (-p, a launched command, --follow: in
 * `traced`; -a: admitted as by a first probe, once it wrote something).
 */
static __always_inline bool batch_admitted(struct coro_batch_reg *reg, __u32 pid, __u64 floor)
{
	__u8 *v = bpf_map_lookup_elem(&traced, &pid);

	if (v || !system_wide)
		return v && (*v == VERDICT_TRACED || *v == VERDICT_FOLLOWED);
	return batch_has_new(reg, floor) && admitted_at(floor);
}

/*
 * This session's positions for the current image of the thread, made (and
 * the thread thus traced from now) if it has none yet and admitted says so.
 */
static __always_inline struct coro_batch_slots *batch_positions(struct task_struct *task,
								bool admitted)
{
	struct coro_batch_slots *v = bpf_task_storage_get(&batch_threads, task, 0, 0);

	if (v && v->valid && v->exec_id == task->self_exec_id)
		return v;
	if (!admitted)
		return NULL;
	if (!v)
		v = bpf_task_storage_get(&batch_threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		stat_inc(CORO_STAT_NO_TASK_STATE);
		return NULL;
	}
	__builtin_memset(v->slot, 0, sizeof(v->slot));
	v->exec_id = task->self_exec_id;
	v->valid = 1;
	v->done = 0;
	return v;
}

enum batch_op {
	BATCH_OP_THREAD,	   /* a harvest: a forked child's entry may be inherited */
	BATCH_OP_THREAD_SLEEPABLE, /* the same in a program that may sleep: nothing inherited */
	BATCH_OP_TRAP,		   /* the batch probe: its buffer registered first */
	BATCH_OP_REGISTER,	   /* the batch probe of a thread this session does not trace */
};

/*
 * The batch probe's registration of buf, for this image (another image's
 * entry is forgotten): in a free slot, else the last one. Any address the
 * thread gives is only ever read in its own memory.
 *
 * batch_bufs is every session's: the lock of this one (batch_lock) does not
 * keep another session's tick out of this program. So an entry is never
 * seen half made: it is made with its contents (an entry made empty, its
 * exec id 0 for an instant, was another image's to such a tick, which
 * deleted it; the thread's registration went with it, and its records
 * after this trap were never read, uncounted), and another image's entry
 * is deleted and made again rather than rewritten in place.
 */
static __always_inline void batch_register(struct task_struct *task, __u64 buf)
{
	struct coro_batch_reg *reg, init = {};
	int k = CORO_BATCH_SLOTS - 1;

	reg = bpf_task_storage_get(&batch_bufs, task, 0, 0);
	if (reg && reg->exec_id != task->self_exec_id) {
		bpf_task_storage_delete(&batch_bufs, task);
		reg = NULL;
	}
	if (!reg) {
		init.exec_id = task->self_exec_id;
		init.tp = task_tp(task);
		init.buf[0] = buf;
		reg = bpf_task_storage_get(&batch_bufs, task, &init,
					   BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	if (!reg) {
		stat_inc(CORO_STAT_BATCH_UNREGISTERED);
		return;
	}
	reg->tp = task_tp(task);
	if (reg->buf[0] == buf || !reg->buf[0])
		k = 0;
	else if (reg->buf[1] == buf || !reg->buf[1])
		k = 1;
	reg->buf[k & (CORO_BATCH_SLOTS - 1)] = buf;
}

/*
 * The current thread's entry in batch_bufs and this session's positions for
 * it, made whole under the lock (batch_lock): registered first at its batch
 * trap (buf), inherited by a forked child, forgotten after an exec, the
 * positions made for a thread met now. 1 if the thread has positions to copy
 * with; the copies themselves take the lock each (batch_harvest).
 */
static __noinline int batch_begin_locked(int op, __u64 buf)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct coro_batch_slots *v;
	struct coro_batch_reg *reg;
	struct batch_scratch *s;
	int ret = 0;

	s = batch_lock();
	if (!s)
		return 0;
	if (op == BATCH_OP_TRAP || op == BATCH_OP_REGISTER) {
		batch_register(task, buf);
		/* Registered whenever (for the sessions to come); copied once this one has started. */
		if (op == BATCH_OP_REGISTER || !session_start_ts)
			goto out;
		v = batch_positions(task, true);
		if (v && !v->done)
			ret = 1;
		goto out;
	}
	if (!session_start_ts)
		goto out;
	reg = bpf_task_storage_get(&batch_bufs, task, 0, 0);
	if (!reg && op == BATCH_OP_THREAD)
		reg = batch_reg_inherit(task);
	if (!reg)
		goto out;
	if (reg->exec_id != task->self_exec_id) {
		/* Registered by the image before an exec: its addresses mean nothing now. */
		bpf_task_storage_delete(&batch_bufs, task);
		goto out;
	}
	v = batch_positions(task, false);
	if (!v)
		v = batch_positions(task, batch_admitted(reg, pid, batch_floor(task)));
	if (v && !v->done)
		ret = 1;
out:
	batch_unlock(s);
	return ret;
}

static __always_inline int batch_begin(int op, __u64 buf)
{
	if (bpf_ksym_exists(bpf_preempt_disable)) {
		int ret;

		bpf_preempt_disable();
		ret = batch_begin_locked(op, buf);
		bpf_preempt_enable();
		return ret;
	}
	return batch_begin_locked(op, buf);
}

/*
 * The current thread's records, for its registered buffers (at its batch trap, buf only):
 * before anything else of it is sent.
 */
static __always_inline int batch_harvest_task(int op, int how, __u64 buf,
					      struct coro_task_state *st)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct coro_batch_slots *v;
	struct coro_batch_reg *reg;
	__u64 floor;

	if (!batch_begin(op, buf))
		return 0;
	/* Whole now, whatever ran in the thread since: only looked up. */
	v = bpf_task_storage_get(&batch_threads, task, 0, 0);
	if (!v || !v->valid || v->exec_id != task->self_exec_id || v->done)
		return 0;
	reg = bpf_task_storage_get(&batch_bufs, task, 0, 0);
	if (reg && reg->exec_id != task->self_exec_id)
		reg = NULL;
	floor = batch_floor(task);
	if (op == BATCH_OP_TRAP) {
		/* Its slot (the last one if it could not be registered: read at this trap only). */
		int k = CORO_BATCH_SLOTS - 1;

		if (reg && reg->buf[0] == buf)
			k = 0;
		batch_harvest_slot(&v->slot[k & (CORO_BATCH_SLOTS - 1)], st, buf, floor, how);
		return 0;
	}
	if (!reg)
		return 0;
	/* Traced from now, as by a probe of its own: the waker, the off-CPU view. */
	st = bpf_task_storage_get(&task_state, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	/*
	 * Every copy runs in the thread, which is thus running: a stretch still open missed
	 * its return (offcpu_close_late), and ends in the ring before what the thread wrote
	 * since, as it does before a probe's own record.
	 */
	if (st && st->off_ts)
		offcpu_close_late(st, task->tgid, task->pid);
	for (int i = 0; i < CORO_BATCH_SLOTS; i++) {
		__u64 b = reg->buf[i];

		if (b)
			batch_harvest_slot(&v->slot[i], st, b, floor, how);
	}
	if (how == BATCH_LAST)
		v->done = 1;
	return 0;
}
_Static_assert(CORO_BATCH_SLOTS == 2, "batch_harvest_task masks the slot index");

/*
 * The current thread's records, if it has buffers: before anything else of it enters the
 * ring. Global functions, each checked once by the verifier, called only where this session
 * reads buffers (batch_reads; else the call itself is left out). The second is for programs
 * that may be
 * sleepable (the string probes'), where the parent a forked child inherits from cannot be
 * followed: its next switch or tick looks.
 */
__noinline int batch_harvest_thread(int how)
{
	if (!batch_reads || stopped)
		return 0;
	return batch_harvest_task(BATCH_OP_THREAD, how, 0, NULL);
}

__noinline int batch_harvest_thread_sleepable(int how)
{
	if (!batch_reads || stopped)
		return 0;
	return batch_harvest_task(BATCH_OP_THREAD_SLEEPABLE, how, 0, NULL);
}

static __always_inline void batch_harvest_current(int how)
{
	if (batch_reads && !stopped)
		batch_harvest_thread(how);
}

static __always_inline void batch_harvest_current_sleepable(int how)
{
	if (batch_reads && !stopped)
		batch_harvest_thread_sleepable(how);
}

/*
 * Before a probe's own record (it traps): what the thread appended goes first. Batched, a probe
 * traps only nested in an append, or is one that never appends. On the trap path the thread
 * appended only if another session's batch semaphore is up, and then its buffer is registered,
 * or it is a child forked from a registered thread (batch_reg_inherit: its process's only
 * thread, no exec since): any other thread costs a lookup and two loads, not a harvest.
 */
static __always_inline bool batch_may_have_appended(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return batched || bpf_task_storage_get(&batch_bufs, task, 0, 0) ||
	       (task->pid == task->tgid && task->self_exec_id == task->parent_exec_id);
}

static __always_inline void batch_harvest_probe(void)
{
	if (batch_reads && !stopped && batch_may_have_appended())
		batch_harvest_thread(BATCH_COPY);
}

static __always_inline void batch_harvest_probe_sleepable(void)
{
	if (batch_reads && !stopped && batch_may_have_appended())
		batch_harvest_thread_sleepable(BATCH_COPY);
}

/*
 * The batch probe: the thread's first record (its buffer made known) or a
 * full buffer (copied out now; the thread starts it again on return).
 */
SEC("usdt")
int BPF_USDT(coro_batch, __u64 buf)
{
	struct corobpf_batch_rec first = {};
	struct coro_task_state *st;

	if (!batched)
		return 0;
	/* Its first record, for the process record of a process admitted now (-a). */
	bpf_probe_read_user(&first, sizeof(first),
			    (const void *)(buf + offsetof(struct corobpf_batch, rec)));
	if (!admitted_at(first.ts)) {
		/*
		 * Not traced here (-a filtered it out, --follow did not follow it), but
		 * the thread says where its buffer is only now: registered for the other
		 * sessions, which may trace it (a trap-path session beside this one reads
		 * it), and for the sessions to come.
		 */
		batch_begin(BATCH_OP_REGISTER, buf);
		return 0;
	}
	st = task_state_running();
	return batch_harvest_task(BATCH_OP_TRAP, BATCH_TRAP, buf, st);
}

/*
 * The trap path beside another session's batched one, whose semaphore makes the program
 * append: a full buffer traps only into that session's batch probe, and the thread starts the
 * buffer again on return, before this session's next copy. So this session probes the
 * instruction after each batch site (usdt.c: a probe of its own, no semaphore, the site's
 * argument read from the register that held it), which runs after the other session's probe
 * and before the thread starts the buffer again: what it wrote since this session's last copy
 * is copied out there. The buffer is registered here too: while a batched session attaches
 * or detaches, the kernel sets its semaphore and its breakpoint one after the other, so its
 * probe may not be there yet, or any more, while the semaphore is up, and the thread tells its
 * buffer only once.
 */
SEC("usdt")
int BPF_USDT(coro_batch_full, __u64 buf)
{
	if (batched || stopped)
		return 0;
	batch_begin(BATCH_OP_REGISTER, buf);
	batch_harvest_current(BATCH_COPY);
	return 0;
}

/* Threads that run without leaving the CPU: a CPU-clock tick copies out the one it interrupted. */
SEC("perf_event")
int coro_batch_tick(struct bpf_perf_event_data *ctx)
{
	batch_harvest_current(BATCH_COPY);
	return 0;
}

/*
 * The thread's memory is about to go: copy out what it wrote since its last
 * copy; none is made after it (batch_harvest_task). Its entry in batch_bufs
 * stays for the other sessions' last copies (it dies with the task; an exec
 * makes it stale).
 */
static __always_inline int batch_last_copy(void)
{
	if (batch_reads)
		batch_harvest_current(BATCH_LAST);
	return 0;
}

/*
 * A thread ends (it returned, exited, was killed): coro_proc_exit copies it
 * out first (batch_last_copy), in the same program that may write its
 * process's end, so the records come first in the ring. Since 6.16 the
 * kernel fires sched_process_exit before exit_mm, so its memory is still
 * there (do_exit itself is notrace here: neither a kprobe nor a
 * trampoline); on older kernels the read fails and the copy is counted
 * lost (CORO_STAT_BATCH_FINAL_UNREAD).
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
 * own buffer; the exec id its entry in batch_bufs carries says so too).
 * Only reached before 6.10 (no sched_prepare_exec): then what the thread
 * wrote since its last copy is gone uncounted (corobpf said so when it
 * attached).
 */
static __always_inline void batch_forget_thread(struct task_struct *task)
{
	if (batch_reads)
		bpf_task_storage_delete(&batch_threads, task);
}

/*
 * The end of a run, with the other programs silent: user space runs this
 * iterator once over every task (batch_tails_collect). For each thread this
 * session traces, what it wrote since the session's last copy, read from
 * its own memory (pages faulted in: the program may sleep), goes to the
 * iterator's output as a struct coro_batch_tail and its records.
 */
struct batch_tail_scratch {
	struct coro_batch_tail hdr;
	struct corobpf_batch_rec rec[CORO_BATCH_RECS_MAX];
	__u8 __pad[BATCH_READ_MASK + 1 - BATCH_BYTES_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct batch_tail_scratch);
} batch_tail_scratch SEC(".maps");

static __noinline int batch_tail(struct seq_file *seq, struct task_struct *task,
				 struct coro_batch_thread *pos, __u64 buf)
{
	__u64 word, bytes, floor = batch_floor(task);
	__u32 zero = 0, head, gen, first = 0, n;
	struct batch_tail_scratch *s;

	s = bpf_map_lookup_elem(&batch_tail_scratch, &zero);
	if (!s)
		return 0;
	if (bpf_copy_from_user_task(&word, sizeof(word), (const void *)buf, task, 0)) {
		stat_inc(CORO_STAT_BATCH_FINAL_UNREAD);
		return 0;
	}
	gen = word >> 32;
	head = (__u32)word;
	if (head > CORO_BATCH_RECS_MAX)
		head = CORO_BATCH_RECS_MAX;
	if (pos && pos->buf == buf && !pos->fresh) {
		first = pos->consumed;
		floor = pos->floor;
		if (gen != pos->gen) {
			/*
			 * Started again since the last copy: the generation this
			 * session read last is gone. The next one's records are read
			 * only if the one before was copied whole (at its trap).
			 */
			if (gen != pos->gen + 1 || pos->consumed < CORO_BATCH_RECS_MAX) {
				stat_inc(CORO_STAT_BATCH_GEN_JUMPS);
				return 0;
			}
			first = 0;
		}
	}
	if (head <= first || first >= CORO_BATCH_RECS_MAX)
		return 0;
	n = head - first;
	bytes = (__u64)n * BATCH_REC_SIZE;
	asm volatile("" : "+r"(bytes));
	bytes &= BATCH_READ_MASK;
	if (bytes > BATCH_BYTES_MAX)
		return 0;
	if (bpf_copy_from_user_task(s->rec, bytes,
				    (const void *)(buf + offsetof(struct corobpf_batch, rec) +
						   (__u64)first * BATCH_REC_SIZE),
				    task, 0)) {
		stat_add(CORO_STAT_BATCH_UNREAD, n);
		return 0;
	}
	s->hdr.pid = task->tgid;
	s->hdr.tid = task->pid;
	s->hdr.n = n;
	s->hdr.first = first;
	s->hdr.buf = buf;
	s->hdr.floor = floor;
	s->hdr.ts = bpf_ktime_get_boot_ns();
	bpf_seq_write(seq, &s->hdr, sizeof(s->hdr));
	bpf_seq_write(seq, s->rec, bytes);
	return 0;
}

SEC("iter.s/task")
int coro_batch_tails(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct coro_batch_slots *v;
	struct coro_batch_reg *reg;
	__u8 *verdict;
	__u32 pid;

	if (!task)
		return 0;
	reg = bpf_task_storage_get(&batch_bufs, task, 0, 0);
	if (!reg || reg->exec_id != task->self_exec_id)
		return 0;
	pid = task->tgid;
	/* Only the processes this session traces (an unmet thread's too: it ran too briefly). */
	verdict = bpf_map_lookup_elem(&traced, &pid);
	v = bpf_task_storage_get(&batch_threads, task, 0, 0);
	if (v && (!v->valid || v->exec_id != task->self_exec_id))
		v = NULL;
	if (v && v->done)
		return 0;
	if (!v && (!verdict || (*verdict != VERDICT_TRACED && *verdict != VERDICT_FOLLOWED)))
		return 0;
	for (int i = 0; i < CORO_BATCH_SLOTS; i++) {
		__u64 buf = reg->buf[i];

		if (buf)
			batch_tail(ctx->meta->seq, task, v ? &v->slot[i] : NULL, buf);
	}
	return 0;
}

#endif /* COROBPF_BATCH_BPF_H */
