// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The batched probe path, user side: batches split into the trap path's records. See batch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attachctx.h"
#include "batch.h"
#include "log.h"
#include "raw.h"
#include "ringev.h"
#include "corobpf.skel.h"

enum probe_path batch_path_choose(enum probe_path asked, bool stacks, const char **why)
{
	const char *env = getenv("COROBPF_PROBE_PATH");

	*why = NULL;
	/*
	 * Without --probe-path: batched, unless COROBPF_PROBE_PATH=trap (how the suite runs its
	 * second pass on the trap path) or --stacks.
	 */
	if (asked == PROBE_PATH_AUTO)
		asked = env && !strcmp(env, "trap") ? PROBE_PATH_TRAP : PROBE_PATH_BATCHED;
	if (asked == PROBE_PATH_TRAP)
		return PROBE_PATH_TRAP;
	if (stacks) {
		*why = "--stacks takes each event's stack at its trap";
		return PROBE_PATH_TRAP;
	}
	return PROBE_PATH_BATCHED;
}

const char *batch_path_name(enum probe_path p)
{
	return p == PROBE_PATH_BATCHED ? "batched" : "trap";
}

/* A thread of the batched path: its coroutine as the BPF side tracks it, its newest record. */
struct batch_cur {
	u64 cur;
	bool valid;
	u64 last_ts; /* of its newest record born in the kernel (off-CPU, string probes) */
};

static struct batch_cur *cur_of(struct ringev *ev, u32 pid, u32 tid)
{
	struct batch_cur *c = hmap_get(&ev->batch_cur, pid, tid);

	if (!c) {
		c = xcalloc(1, sizeof(*c));
		hmap_put(&ev->batch_cur, pid, tid, c);
	}
	return c;
}

union batch_out {
	struct coro_event_hdr hdr;
	struct coro_ev_create create;
	struct coro_ev_ready ready;
	struct coro_ev_switch sw;
	struct coro_ev_exit exit;
};

static void split_recs(struct ringev *ev, const struct coro_event_hdr *bh,
		       const struct corobpf_batch_rec *rec, u32 n)
{
	bool no_thread = bh->flags & CORO_EVF_NO_THREAD;
	struct batch_cur *c = cur_of(ev, bh->pid, bh->tid);
	u32 lost = bh->lost_before;

	/* The BPF side's view before the first record: what this thread's trap would have seen. */
	c->cur = bh->cur;
	c->valid = !(bh->flags & CORO_EVF_CUR_UNKNOWN);
	for (u32 i = 0; i < n; i++) {
		const struct corobpf_batch_rec *r = &rec[i];
		union batch_out o;
		size_t size;

		if (r->ts < ev->batch_since)
			continue;
		memset(&o, 0, sizeof(o));
		switch (r->kind) {
		case CORO_EV_CREATE:
			size = sizeof(o.create);
			o.create.id = r->a0;
			o.create.parent = r->a1;
			break;
		case CORO_EV_READY:
			size = sizeof(o.ready);
			o.ready.id = r->a0;
			break;
		case CORO_EV_SWITCH:
			size = sizeof(o.sw);
			o.sw.from = r->a0;
			o.sw.to = r->a1;
			o.sw.obj = r->a2;
			o.sw.reason = r->aux;
			break;
		case CORO_EV_EXIT:
			size = sizeof(o.exit);
			o.exit.id = r->a0;
			o.exit.status = (s64)r->a1;
			break;
		default:
			/* Not a record the header writes: the buffer was overwritten (a signal handler). */
			ev->ustats[CORO_USTAT_BAD_RECORDS]++;
			continue;
		}
		o.hdr.size = (u16)size;
		o.hdr.kind = (u8)r->kind;
		o.hdr.flags = no_thread ? CORO_EVF_CUR_UNKNOWN | CORO_EVF_NO_THREAD
			      : c->valid ? 0
					 : CORO_EVF_CUR_UNKNOWN;
		o.hdr.lost_before = lost;
		lost = 0;
		o.hdr.pid = bh->pid;
		o.hdr.tid = bh->tid;
		/*
		 * A thread preempted between its record's clock read and the store
		 * that publishes it: its sched_switch could not see the record, whose
		 * off-CPU records are in the ring before it. It counts from when it
		 * was published, so that the thread's story stays in ring order.
		 */
		o.hdr.ts = r->ts < c->last_ts ? c->last_ts : r->ts;
		o.hdr.cur = no_thread ? 0 : c->cur;
		/* The trap path tracks the coroutine even when the event is lost; so does this. */
		if (r->kind == CORO_EV_SWITCH && !no_thread) {
			c->cur = r->a1;
			c->valid = true;
		}
		ringev_record(ev, &o, size);
	}
}

void batch_note(struct ringev *ev, const struct coro_event_hdr *h)
{
	struct batch_cur *c;

	/* Records of the probes themselves (this thread's other buffer, its traps) are not the kernel's. */
	if (h->kind == CORO_EV_CREATE || h->kind == CORO_EV_READY || h->kind == CORO_EV_SWITCH ||
	    h->kind == CORO_EV_EXIT)
		return;
	c = hmap_get(&ev->batch_cur, h->pid, h->tid);
	if (c && h->ts > c->last_ts)
		c->last_ts = h->ts;
}

int batch_split(struct ringev *ev, const struct coro_ev_batch *b, size_t size)
{
	if (size < sizeof(*b) || b->hdr.size != size || b->n > CORO_BATCH_RECS_MAX ||
	    sizeof(*b) + (size_t)b->n * sizeof(struct corobpf_batch_rec) != size) {
		ev->ustats[CORO_USTAT_BAD_RECORDS]++;
		log_debug("dropping a malformed batch record (%zu bytes)", size);
		return 0;
	}
	split_recs(ev, &b->hdr, (const struct corobpf_batch_rec *)(b + 1), b->n);
	return 0;
}

u32 batch_events_in(const void *data, size_t size)
{
	const struct coro_ev_batch *b = data;

	if (size < sizeof(*b) || b->hdr.kind != CORO_EV_BATCH || !b->n)
		return 1;
	return b->n > CORO_BATCH_RECS_MAX ? CORO_BATCH_RECS_MAX : b->n;
}

/* n records of buf from index first, out of process pid's memory. */
static bool read_target(u32 pid, u64 addr, void *dst, size_t len)
{
	struct iovec local = {.iov_base = dst, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};

	return process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}


struct batch_tail {
	u32 pid, tid, n;
	struct corobpf_batch_rec rec[CORO_BATCH_RECS_MAX];
};

struct batch_tails {
	struct batch_tail *t;
	size_t n;
};

struct batch_tails *batch_tails_collect(int map_fd, u64 stop_ts)
{
	struct batch_tails *ts = xcalloc(1, sizeof(*ts));
	u32 key, next, *prev = NULL;
	size_t cap = 0;
	u64 lost = 0;

	while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
		struct coro_batch_slots v;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(map_fd, &key, &v))
			continue;
		for (int k = 0; k < CORO_BATCH_SLOTS; k++) {
			struct coro_batch_thread bt = v.slot[k];
			struct batch_tail *t;
			u64 word;
			u32 head, n;

			if (!bt.buf || !read_target(bt.pid, bt.buf, &word, sizeof(word)))
				continue; /* gone: its exit copied it out */
			head = (u32)word;
			if (head > CORO_BATCH_RECS_MAX)
				head = CORO_BATCH_RECS_MAX;
			if ((u32)(word >> 32) != bt.gen) {
				/* It filled and started its buffer again after the BPF side fell silent. */
				lost += CORO_BATCH_RECS_MAX - bt.consumed;
				continue;
			}
			if (head <= bt.consumed)
				continue;
			if (ts->n == cap) {
				cap = cap ? cap * 2 : 16;
				ts->t = xrealloc(ts->t, cap * sizeof(*ts->t));
			}
			t = &ts->t[ts->n];
			n = head - bt.consumed;
			if (!read_target(bt.pid, bt.buf + offsetof(struct corobpf_batch, rec) +
					 (u64)bt.consumed * sizeof(t->rec[0]), t->rec,
					 n * sizeof(t->rec[0])))
				continue;
			/* Written after tracing stopped: not part of the trace (the trap path's isn't). */
			while (n && t->rec[n - 1].ts > stop_ts)
				n--;
			if (!n)
				continue;
			t->pid = bt.pid;
			t->tid = key;
			t->n = n;
			ts->n++;
		}
	}
	if (lost)
		log_warn("batched path: up to %llu records of threads that filled their buffer as "
			 "tracing stopped were not read", (unsigned long long)lost);
	return ts;
}

u64 batch_tails_emit(struct ringev *ev, struct batch_tails *ts, u64 stop_ts)
{
	u64 total = 0;

	for (size_t i = 0; ts && i < ts->n; i++) {
		struct batch_tail *t = &ts->t[i];
		struct batch_cur *c = cur_of(ev, t->pid, t->tid);
		struct coro_event_hdr h = {0};

		h.size = sizeof(struct coro_ev_batch);
		h.kind = CORO_EV_BATCH;
		h.flags = c->valid ? 0 : CORO_EVF_CUR_UNKNOWN;
		h.pid = t->pid;
		h.tid = t->tid;
		h.ts = stop_ts;
		h.cur = c->cur;
		split_recs(ev, &h, t->rec, t->n);
		total += t->n;
	}
	if (ts)
		free(ts->t);
	free(ts);
	return total;
}

void batch_forget_buffers(int map_fd)
{
	u32 key, next, *prev = NULL;
	unsigned short zero = 0; /* registered alone: busy, next to it, is the thread's */

	while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
		struct coro_batch_slots v;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(map_fd, &key, &v))
			continue;
		for (int k = 0; k < CORO_BATCH_SLOTS; k++) {
			struct iovec local = {.iov_base = &zero, .iov_len = sizeof(zero)}, remote;

			if (!v.slot[k].buf)
				continue;
			remote.iov_base = (void *)(uintptr_t)(v.slot[k].buf +
							      offsetof(struct corobpf_batch, registered));
			remote.iov_len = sizeof(zero);
			process_vm_writev((pid_t)v.slot[k].pid, &local, 1, &remote, 1, 0);
		}
	}
}

void batch_say_counters(int stats_fd)
{
	static const char *const what[CORO_STAT_MAP_MAX] = {
		[CORO_STAT_BATCH_RING_FULL] = "records dropped (ring buffer full; also in the "
					      "events lost)",
		[CORO_STAT_BATCH_DEFERRED] = "copies of a thread's buffer deferred (page not "
					     "present; no loss)",
		[CORO_STAT_BATCH_UNREAD] = "records lost (their buffer could not be read before "
					   "the thread reused it or ended)",
	};
	int ncpu = libbpf_num_possible_cpus();
	u64 *vals = xcalloc(ncpu > 0 ? ncpu : 1, sizeof(u64));

	for (u32 k = CORO_STAT_MAX; k < CORO_STAT_MAP_MAX; k++) {
		u64 sum = 0;

		if (bpf_map_lookup_elem(stats_fd, &k, vals) != 0)
			continue;
		for (int i = 0; i < ncpu; i++)
			sum += vals[i];
		if (!sum)
			continue;
		if (k == CORO_STAT_BATCH_DEFERRED)
			log_verbose("batched path: %llu %s", (unsigned long long)sum, what[k]);
		else
			log_warn("batched path: %llu %s", (unsigned long long)sum, what[k]);
	}
	free(vals);
}

void batch_forget_all(struct ringev *ev)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&ev->batch_cur, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&ev->batch_cur);
}

/*
 * Another session's batched probe, loaded on this machine. A process it traces has its batch
 * semaphore up, so its create, ready, switch and exit append to the threads' buffers, which only
 * that session copies out: a trap-path session sees none of them there.
 */
static u32 batched_session_elsewhere(void)
{
	u32 id = 0, n = 0;

	while (!bpf_prog_get_next_id(id, &id)) {
		struct bpf_prog_info info = {};
		u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(info.name, "coro_batch"))
			n++;
		close(fd);
	}
	return n;
}

void batch_check_elsewhere(enum probe_path path, const char *when)
{
	u32 n;

	if (path != PROBE_PATH_TRAP)
		return;
	n = batched_session_elsewhere();
	if (n)
		log_warn("%s, %u other corobpf session%s trace%s on the batched path: in a process "
			 "%s traces, create, ready, switch and exit go to %s, not to this trap-path "
			 "session, which misses them uncounted (trace it on the batched path here too, "
			 "or end the other session)", when, n, n > 1 ? "s" : "", n > 1 ? "" : "s",
			 n > 1 ? "they" : "it", n > 1 ? "them" : "it");
}

void batch_setup(struct corobpf_bpf *skel, enum probe_path path)
{
	bool on = path == PROBE_PATH_BATCHED;

	skel->rodata->batched = on;
	skel->rodata->session_start_ts = now_boottime_ns();
	bpf_program__set_autoload(skel->progs.coro_batch, on);
	bpf_program__set_autoload(skel->progs.coro_batch_tick, on);
	/* sched_prepare_exec is 6.10's: before it, the buffers are forgotten at sched_process_exec. */
	bpf_program__set_autoload(skel->progs.coro_batch_exec,
				  on && libbpf_find_vmlinux_btf_id("sched_prepare_exec",
								   BPF_TRACE_RAW_TP) > 0);
	if (!on)
		bpf_map__set_max_entries(skel->maps.batch_threads, 1);
}

int batch_attach(struct corobpf_bpf *skel, struct attach_ctx *a, enum probe_path path)
{
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_link *l;

	if (path != PROBE_PATH_BATCHED)
		return 0;
	/* A thread's exit: coro_proc_exit copies it out (attached with the tracepoints). */
	l = bpf_program__autoload(skel->progs.coro_batch_exec)
		    ? bpf_program__attach(skel->progs.coro_batch_exec)
		    : (errno = ENOENT, NULL);
	if (l)
		attach_add_link(a, l);
	else
		log_warn("cannot attach the batched path's exec hook (sched_prepare_exec, Linux "
			 "6.10): %s; a thread that execs loses what it wrote since its last copy, "
			 "uncounted (--probe-path trap loses nothing there)", strerror(errno));
	for (int cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(attr),
			.config = PERF_COUNT_SW_CPU_CLOCK,
			/* A fixed period (ns of CPU clock): a frequency is reached by adjusting, late. */
			.sample_period = 1000000000ull / BATCH_TICK_HZ,
		};
		int fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			if (errno == ENODEV || errno == ENOENT)
				continue; /* a possible CPU that is not online */
			log_err("cannot open a CPU-clock perf event on CPU %d for the batched path: "
				"%s (--probe-path trap traces without it)", cpu, strerror(errno));
			return EXIT_FAILURE_RUNTIME;
		}
		l = bpf_program__attach_perf_event(skel->progs.coro_batch_tick, fd);
		if (!l) {
			log_err("cannot attach the batched path's tick to CPU %d: %s", cpu,
				strerror(errno));
			close(fd);
			return EXIT_FAILURE_RUNTIME;
		}
		attach_add_link(a, l);
	}
	return 0;
}
