// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The batched probe path, user side: batches split into the trap path's records. See batch.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/perf_event.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "attachctx.h"
#include "batch.h"
#include "log.h"
#include "raw.h"
#include "corobpf.skel.h"

/* The end of a run reads threads' last records with a sleepable task iterator (6.0). */
static bool kernel_reads_tails(void)
{
	return libbpf_find_vmlinux_btf_id("bpf_copy_from_user_task", BPF_TRACE_FENTRY) > 0 &&
	       libbpf_find_vmlinux_btf_id("bpf_iter_task", BPF_TRACE_FENTRY) > 0;
}

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
	if (!kernel_reads_tails()) {
		*why = "this kernel cannot read a thread's last records at the end of a run (a "
		       "sleepable task iterator and bpf_copy_from_user_task: Linux 6.0)";
		return PROBE_PATH_TRAP;
	}
	return PROBE_PATH_BATCHED;
}

const char *batch_path_name(enum probe_path p)
{
	return p == PROBE_PATH_BATCHED ? "batched" : "trap";
}

/*
 * A thread of the batched path: its coroutine as the BPF side tracks it, its newest record, and
 * each buffer's newest record (a record out of that order is the program's doing).
 */
struct batch_cur {
	u64 cur;
	bool valid;
	u64 last_ts; /* of its newest record born in the kernel (off-CPU, string probes) */
	u64 buf[CORO_BATCH_SLOTS];
	u64 buf_ts[CORO_BATCH_SLOTS]; /* the time its last record was given */
	u32 buf_next;		      /* the slot a third buffer takes */
};

static struct batch_cur *cur_of(struct batch_state *bs, u32 pid, u32 tid)
{
	struct batch_cur *c = hmap_get(&bs->cur, pid, tid);

	if (!c) {
		c = xcalloc(1, sizeof(*c));
		hmap_put(&bs->cur, pid, tid, c);
	}
	return c;
}

/* Where the time of buf's previous record is kept (0 until it has one). */
static u64 *buf_last_ts(struct batch_cur *c, u64 buf)
{
	u32 k;

	for (k = 0; k < CORO_BATCH_SLOTS; k++)
		if (c->buf[k] == buf)
			return &c->buf_ts[k];
	k = c->buf_next++ % CORO_BATCH_SLOTS;
	c->buf[k] = buf;
	c->buf_ts[k] = 0;
	return &c->buf_ts[k];
}

/* How far a record's time may pass its copy's before it counts as forged (clamped all the same). */
#define BATCH_CLOCK_SLACK_NS 100000ull

union batch_out {
	struct coro_event_hdr hdr;
	struct coro_ev_create create;
	struct coro_ev_ready ready;
	struct coro_ev_switch sw;
	struct coro_ev_exit exit;
};

/*
 * n records of buffer buf, copied at copy_ts, into the trap path's records, back to back in
 * bs->split, then handed to bs->out together. floor: those stamped earlier are not this
 * session's (coro_ev_batch.floor).
 */
static void split_recs(struct batch_state *bs, const struct coro_event_hdr *bh, u64 buf, u64 floor,
		       const struct corobpf_batch_rec *rec, u32 n)
{
	bool no_thread = bh->flags & CORO_EVF_NO_THREAD;
	struct batch_cur *c = cur_of(bs, bh->pid, bh->tid);
	u64 *prev = buf_last_ts(c, buf), copy_ts = bh->ts;
	u32 lost = bh->lost_before;
	struct batch_split sp = {0};
	u8 *dst = bs->split;

	/* The BPF side's view before the first record: what this thread's trap would have seen. */
	c->cur = bh->cur;
	c->valid = !(bh->flags & CORO_EVF_CUR_UNKNOWN);
	for (u32 i = 0; i < n && i < CORO_BATCH_RECS_MAX; i++) {
		const struct corobpf_batch_rec *r = &rec[i];
		union batch_out *o = (union batch_out *)dst;
		size_t size;
		u64 ts = r->ts;

		if (ts < floor) {
			bs->ustats[CORO_USTAT_BATCH_BEFORE]++;
			continue;
		}
		switch (r->kind) {
		case CORO_EV_CREATE:
			size = sizeof(o->create);
			o->create.id = r->a0;
			o->create.parent = r->a1;
			break;
		case CORO_EV_READY:
			size = sizeof(o->ready);
			o->ready.id = r->a0;
			break;
		case CORO_EV_SWITCH:
			size = sizeof(o->sw);
			o->sw.from = r->a0;
			o->sw.to = r->a1;
			o->sw.obj = r->a2;
			o->sw.reason = r->aux;
			o->sw.__pad = 0;
			sp.switches++;
			break;
		case CORO_EV_EXIT:
			size = sizeof(o->exit);
			o->exit.id = r->a0;
			o->exit.status = (s64)r->a1;
			break;
		default:
			/* Not a record the header writes: the buffer was overwritten (a signal handler). */
			bs->ustats[CORO_USTAT_BAD_RECORDS]++;
			continue;
		}
		/*
		 * The time is the thread's to write, so it is held between its buffer's
		 * previous record and the copy: a time in the future (or far back) would
		 * reorder every other thread's records, of every program traced, around it.
		 * The vDSO's clock and the BPF side's may part by a hair: no count for that.
		 */
		if (ts > copy_ts || ts < *prev) {
			if (ts > copy_ts + BATCH_CLOCK_SLACK_NS || ts < *prev)
				bs->ustats[CORO_USTAT_BATCH_CLAMPED]++;
			ts = ts > copy_ts ? copy_ts : *prev;
			ts = ts < *prev ? *prev : ts;
		}
		*prev = ts;
		o->hdr.size = (u16)size;
		o->hdr.kind = (u8)r->kind;
		o->hdr.flags = no_thread ? CORO_EVF_CUR_UNKNOWN | CORO_EVF_NO_THREAD
			       : c->valid ? 0
					  : CORO_EVF_CUR_UNKNOWN;
		o->hdr.lost_before = lost;
		lost = 0;
		o->hdr.pid = bh->pid;
		o->hdr.tid = bh->tid;
		/*
		 * A thread preempted between its record's clock read and the store
		 * that publishes it: its sched_switch could not see the record, whose
		 * off-CPU records are in the ring before it. It counts from when it
		 * was published, so that the thread's story stays in ring order.
		 */
		o->hdr.ts = ts < c->last_ts ? c->last_ts : ts;
		o->hdr.cur = no_thread ? 0 : c->cur;
		if (o->hdr.ts > sp.newest_ts)
			sp.newest_ts = o->hdr.ts;
		/* The trap path tracks the coroutine even when the event is lost; so does this. */
		if (r->kind == CORO_EV_SWITCH && !no_thread) {
			c->cur = r->a1;
			c->valid = true;
		}
		sp.n++;
		dst += size;
	}
	bs->split_total += sp.n;
	if (sp.n)
		bs->out(bs->out_ctx, bs->split, (size_t)(dst - bs->split), &sp);
}

void batch_note(struct batch_state *bs, const struct coro_event_hdr *h)
{
	struct batch_cur *c;

	/* Records of the probes themselves (this thread's other buffer, its traps) are not the kernel's. */
	if (h->kind == CORO_EV_CREATE || h->kind == CORO_EV_READY || h->kind == CORO_EV_SWITCH ||
	    h->kind == CORO_EV_EXIT)
		return;
	c = hmap_get(&bs->cur, h->pid, h->tid);
	if (c && h->ts > c->last_ts)
		c->last_ts = h->ts;
}

int batch_split(struct batch_state *bs, const struct coro_ev_batch *b, size_t size)
{
	if (size < sizeof(*b) || b->hdr.size != size || b->n > CORO_BATCH_RECS_MAX ||
	    sizeof(*b) + (size_t)b->n * sizeof(struct corobpf_batch_rec) != size) {
		bs->ustats[CORO_USTAT_BAD_RECORDS]++;
		log_debug("dropping a malformed batch record (%zu bytes)", size);
		return 0;
	}
	split_recs(bs, &b->hdr, b->buf, b->floor, (const struct corobpf_batch_rec *)(b + 1), b->n);
	return 0;
}

u32 batch_events_in(const void *data, size_t size)
{
	const struct coro_ev_batch *b = data;

	if (size < sizeof(*b) || b->hdr.kind != CORO_EV_BATCH || !b->n)
		return 1;
	return b->n > CORO_BATCH_RECS_MAX ? CORO_BATCH_RECS_MAX : b->n;
}

struct batch_tail {
	struct coro_batch_tail h;
	struct corobpf_batch_rec rec[CORO_BATCH_RECS_MAX];
};

struct batch_tails {
	struct batch_tail *t;
	size_t n;
};

/*
 * The iterator's output: each buffer's tail (struct coro_batch_tail, its records) as the BPF
 * side read it, each record in one piece (a read of the iterator ends between objects).
 */
static void tails_parse(struct batch_tails *ts, const u8 *p, size_t len, u64 stop_ts)
{
	size_t cap = 0, off = 0;

	while (off + sizeof(struct coro_batch_tail) <= len) {
		struct coro_batch_tail h;
		struct batch_tail *t;
		size_t bytes;
		u32 n;

		memcpy(&h, p + off, sizeof(h));
		bytes = (size_t)h.n * sizeof(struct corobpf_batch_rec);
		if (h.n > CORO_BATCH_RECS_MAX || off + sizeof(h) + bytes > len) {
			log_debug("the batched path's tails end in a malformed record (%zu bytes in)", off);
			break;
		}
		if (ts->n == cap) {
			cap = cap ? cap * 2 : 16;
			ts->t = xrealloc(ts->t, cap * sizeof(*ts->t));
		}
		t = &ts->t[ts->n];
		t->h = h;
		memcpy(t->rec, p + off + sizeof(h), bytes);
		off += sizeof(h) + bytes;
		/* Written after tracing stopped: not part of the trace (the trap path's isn't). */
		for (n = h.n; n && t->rec[n - 1].ts > stop_ts; n--)
			;
		t->h.n = n;
		if (n)
			ts->n++;
	}
}

struct batch_tails *batch_tails_collect(struct corobpf_bpf *skel, u64 stop_ts)
{
	struct batch_tails *ts = xcalloc(1, sizeof(*ts));
	struct bpf_link *link = bpf_program__attach_iter(skel->progs.coro_batch_tails, NULL);
	size_t len = 0, cap = 1 << 16;
	u8 *buf;
	int fd;

	if (!link) {
		log_warn("batched path: cannot read what threads wrote since their last copy (the "
			 "task iterator: %s): those records are lost", strerror(errno));
		return ts;
	}
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		log_warn("batched path: cannot read what threads wrote since their last copy (the "
			 "task iterator: %s): those records are lost", strerror(errno));
		bpf_link__destroy(link);
		return ts;
	}
	buf = xmalloc(cap);
	for (;;) {
		ssize_t n;

		if (cap - len < 32768) {
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			log_warn("batched path: reading threads' last records stopped early: %s",
				 strerror(errno));
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	bpf_link__destroy(link);
	tails_parse(ts, buf, len, stop_ts);
	free(buf);
	return ts;
}

u64 batch_tails_emit(struct batch_state *bs, struct batch_tails *ts)
{
	u64 total = 0;

	for (size_t i = 0; ts && i < ts->n; i++) {
		struct batch_tail *t = &ts->t[i];
		struct batch_cur *c = cur_of(bs, t->h.pid, t->h.tid);
		struct coro_event_hdr h = {0};

		h.size = sizeof(struct coro_ev_batch);
		h.kind = CORO_EV_BATCH;
		h.flags = c->valid ? 0 : CORO_EVF_CUR_UNKNOWN;
		h.pid = t->h.pid;
		h.tid = t->h.tid;
		h.ts = t->h.ts;
		h.cur = c->cur;
		split_recs(bs, &h, t->h.buf, t->h.floor, t->rec, t->h.n);
		total += t->h.n;
	}
	if (ts)
		free(ts->t);
	free(ts);
	return total;
}

void batch_say_counters(int stats_fd)
{
	static const char *const what[CORO_STAT_MAP_MAX] = {
		[CORO_STAT_BATCH_RING_FULL] = "records dropped (ring buffer full; also in the "
					      "events lost)",
		[CORO_STAT_BATCH_DEFERRED] = "copies of a thread's buffer deferred (page not "
					     "present; no loss)",
	};
	u64 sums[CORO_STAT_MAP_MAX];

	batch_stat_sums(stats_fd, sums);
	for (u32 k = CORO_STAT_MAX; k < CORO_STAT_MAP_MAX; k++) {
		/* The others are losses every output counts (batch_carry_counters). */
		if (!sums[k] || !what[k])
			continue;
		if (k == CORO_STAT_BATCH_DEFERRED)
			log_verbose("batched path: %llu %s", (unsigned long long)sums[k], what[k]);
		else
			log_warn("batched path: %llu %s", (unsigned long long)sums[k], what[k]);
	}
}

void batch_stat_sums(int stats_fd, u64 sums[CORO_STAT_MAP_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	u64 *vals = xcalloc(ncpu > 0 ? ncpu : 1, sizeof(u64));

	memset(sums, 0, CORO_STAT_MAP_MAX * sizeof(sums[0]));
	for (u32 k = CORO_STAT_MAX; k < CORO_STAT_MAP_MAX; k++) {
		if (bpf_map_lookup_elem(stats_fd, &k, vals) != 0)
			continue;
		for (int i = 0; i < ncpu; i++)
			sums[k] += vals[i];
	}
	free(vals);
}

void batch_carry_counters(int stats_fd, u64 *ustats)
{
	u64 sums[CORO_STAT_MAP_MAX];

	batch_stat_sums(stats_fd, sums);
	ustats[CORO_USTAT_BATCH_UNREAD] = sums[CORO_STAT_BATCH_UNREAD];
	ustats[CORO_USTAT_BATCH_FINAL_UNREAD] = sums[CORO_STAT_BATCH_FINAL_UNREAD];
	ustats[CORO_USTAT_BATCH_GEN_JUMPS] = sums[CORO_STAT_BATCH_GEN_JUMPS];
	ustats[CORO_USTAT_BATCH_UNREGISTERED] = sums[CORO_STAT_BATCH_UNREGISTERED];
}

void batch_forget_all(struct batch_state *bs)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&bs->cur, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&bs->cur);
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

void batch_check_elsewhere(struct corobpf_bpf *skel, enum probe_path path, const char *when)
{
	u32 n;

	if (path != PROBE_PATH_TRAP || batch_reads(skel))
		return;
	n = batched_session_elsewhere();
	if (n)
		log_warn("%s, %u other corobpf session%s trace%s on the batched path: in a process "
			 "%s trace%s, create, ready, switch and exit go to %s, not to this trap-path "
			 "session, which cannot read them from the threads' buffers here and misses "
			 "them uncounted (trace it on the batched path here too, or end the other "
			 "session)", when, n, n > 1 ? "s" : "", n > 1 ? "" : "s",
			 n > 1 ? "they" : "it", n > 1 ? "" : "s", n > 1 ? "them" : "it");
}

void batch_say_read_on_trap(const struct batch_state *bs, enum probe_path path, bool stacks)
{
	unsigned long long n = (unsigned long long)bs->split_total;

	if (path != PROBE_PATH_TRAP || !n)
		return;
	if (stacks)
		log_warn("trap path: %llu event%s appended to threads' buffers while another "
			 "session's batched path was on, read from there without a stack (only a "
			 "trap takes one)", n, n == 1 ? "" : "s");
	else
		log_verbose("trap path: %llu event%s appended to threads' buffers while another "
			    "session's batched path was on, read from there", n, n == 1 ? "" : "s");
}

/*
 * The registry of thread buffers (map batch_bufs, bpf/batch.bpf.h) outlives a session: pinned in
 * a directory of bpffs only root can write, created by the first session, reused by the next.
 * A thread says where its buffer is only once, at its first record; a session that starts later
 * (after one that ended, or was killed) learns it here instead, and corobpf never has to write
 * into the thread to make it say so again. The pin's name carries the layout's version.
 */
#define BATCH_REG_MOUNT "/sys/fs/bpf"
#define BATCH_REG_DIR BATCH_REG_MOUNT "/corobpf"
#define BATCH_REG_STR2(x) #x
#define BATCH_REG_STR(x) BATCH_REG_STR2(x)
#define BATCH_REG_PIN BATCH_REG_DIR "/batch_bufs_v" BATCH_REG_STR(CORO_BATCH_REG_VERSION)

static bool on_bpffs(const char *path)
{
	struct statfs f;

	return !statfs(path, &f) && f.f_type == BPF_FS_MAGIC;
}

/* The registry's directory: on bpffs (mounted if it is not, as bpftool does), root's only. */
static const char *reg_dir(char *why, size_t len)
{
	struct stat st;

	if (!on_bpffs(BATCH_REG_MOUNT) &&
	    mount("bpf", BATCH_REG_MOUNT, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700")) {
		snprintf(why, len, "bpffs is not mounted at " BATCH_REG_MOUNT " and mounting it "
			 "failed: %s", strerror(errno));
		return NULL;
	}
	if (mkdir(BATCH_REG_DIR, 0700) && errno != EEXIST) {
		snprintf(why, len, "cannot create " BATCH_REG_DIR ": %s", strerror(errno));
		return NULL;
	}
	/* Another user's directory (a bpffs mounted writable by all) could swap the pin. */
	if (lstat(BATCH_REG_DIR, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022) || !on_bpffs(BATCH_REG_DIR)) {
		snprintf(why, len, BATCH_REG_DIR " is not a directory of bpffs that only root can "
			 "write");
		return NULL;
	}
	return BATCH_REG_DIR;
}

/* Task storage needs a BTF of its key and value: struct coro_batch_reg's, built here. */
static int reg_create(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);
	struct btf *btf = btf__new_empty();
	int i32, u64t, arr, reg, fd = -1;

	if (!btf)
		return -1;
	i32 = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	u64t = btf__add_int(btf, "unsigned long long", 8, 0);
	arr = btf__add_array(btf, i32, u64t, CORO_BATCH_SLOTS);
	reg = btf__add_struct(btf, "coro_batch_reg", sizeof(struct coro_batch_reg));
	if (i32 < 0 || u64t < 0 || arr < 0 || reg < 0 ||
	    btf__add_field(btf, "exec_id", u64t, offsetof(struct coro_batch_reg, exec_id) * 8, 0) ||
	    btf__add_field(btf, "tp", u64t, offsetof(struct coro_batch_reg, tp) * 8, 0) ||
	    btf__add_field(btf, "buf", arr, offsetof(struct coro_batch_reg, buf) * 8, 0) ||
	    btf__load_into_kernel(btf))
		goto out;
	o.btf_fd = btf__fd(btf);
	o.btf_key_type_id = i32;
	o.btf_value_type_id = reg;
	fd = bpf_map_create(BPF_MAP_TYPE_TASK_STORAGE, "batch_bufs", sizeof(int),
			    sizeof(struct coro_batch_reg), 0, &o);
out:
	btf__free(btf);
	return fd;
}

/* The pinned registry (made and pinned if there is none yet), or -1 having said why in why. */
static int reg_open(char *why, size_t len)
{
	struct bpf_map_info info = {};
	u32 info_len = sizeof(info);
	int fd;

	if (!reg_dir(why, len))
		return -1;
	fd = bpf_obj_get(BATCH_REG_PIN);
	if (fd < 0 && errno == ENOENT) {
		int mine = reg_create();

		if (mine < 0) {
			snprintf(why, len, "cannot create it: %s", strerror(errno));
			return -1;
		}
		/* Two sessions starting at once: the one whose pin lands first is everyone's. */
		if (!bpf_obj_pin(mine, BATCH_REG_PIN))
			return mine;
		close(mine);
		fd = bpf_obj_get(BATCH_REG_PIN);
	}
	if (fd < 0) {
		snprintf(why, len, "cannot open " BATCH_REG_PIN ": %s", strerror(errno));
		return -1;
	}
	if (bpf_obj_get_info_by_fd(fd, &info, &info_len) ||
	    info.type != BPF_MAP_TYPE_TASK_STORAGE || info.key_size != sizeof(int) ||
	    info.value_size != sizeof(struct coro_batch_reg)) {
		snprintf(why, len, BATCH_REG_PIN " is not the registry this version keeps (remove it "
			 "if no older corobpf uses it)");
		close(fd);
		return -1;
	}
	return fd;
}

bool batch_reads(const struct corobpf_bpf *skel)
{
	return skel->rodata->batch_reads;
}

void batch_setup(struct corobpf_bpf *skel, enum probe_path path, bool running_targets,
		 bool multi)
{
	bool batched = path == PROBE_PATH_BATCHED, reads = batched;
	char why[256];
	int fd;

	if (!batched && kernel_reads_tails()) {
		/* The trap path reads only buffers the registry names: other sessions'. */
		fd = reg_open(why, sizeof(why));
		if (fd >= 0 && !bpf_map__reuse_fd(skel->maps.batch_bufs, fd)) {
			reads = true;
			log_verbose("trap path: buffers of threads another session's batched path "
				    "makes append are read through " BATCH_REG_PIN);
		} else if (fd >= 0) {
			log_verbose("trap path: cannot use " BATCH_REG_PIN ": %s", strerror(errno));
		} else {
			log_verbose("trap path: no shared registry of thread buffers (%s)", why);
		}
		if (fd >= 0)
			close(fd);
	}
	skel->rodata->batched = batched;
	skel->rodata->batch_reads = reads;
	bpf_program__set_autoload(skel->progs.coro_batch, batched);
	bpf_program__set_autoload(skel->progs.coro_batch_tick, reads);
	bpf_program__set_autoload(skel->progs.coro_batch_tails, reads);
	bpf_program__set_autoload(skel->progs.coro_batch_full, reads && !batched && multi);
	if (reads && !batched && multi)
		bpf_program__set_expected_attach_type(skel->progs.coro_batch_full,
						      CORO_BPF_TRACE_UPROBE_MULTI);
	/* sched_prepare_exec is 6.10's: before it, the buffers are forgotten at sched_process_exec. */
	bpf_program__set_autoload(skel->progs.coro_batch_exec,
				  reads && libbpf_find_vmlinux_btf_id("sched_prepare_exec",
								      BPF_TRACE_RAW_TP) > 0);
	if (!batched)
		return;
	fd = reg_open(why, sizeof(why));
	if (fd >= 0 && !bpf_map__reuse_fd(skel->maps.batch_bufs, fd)) {
		close(fd);
		log_verbose("batched path: thread buffers registered in " BATCH_REG_PIN);
		return;
	}
	if (fd >= 0) {
		snprintf(why, sizeof(why), "cannot use " BATCH_REG_PIN ": %s", strerror(errno));
		close(fd);
	}
	/*
	 * A launched command's threads all start under this session: nothing registered
	 * earlier to miss.
	 */
	if (running_targets)
		log_warn("batched path: no shared registry of thread buffers (%s): a thread that "
			 "told an earlier session where its buffer is is seen only when that buffer "
			 "fills, and what it writes meanwhile is late, or lost uncounted at its end "
			 "(mount bpffs at " BATCH_REG_MOUNT ", or --probe-path trap)", why);
	else
		log_verbose("batched path: no shared registry of thread buffers (%s)", why);
}

int batch_attach(struct corobpf_bpf *skel, struct attach_ctx *a, enum probe_path path)
{
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_link *l;

	if (!batch_reads(skel))
		return 0;
	/* A thread's exit: coro_proc_exit copies it out (attached with the tracepoints). */
	l = bpf_program__autoload(skel->progs.coro_batch_exec)
		    ? bpf_program__attach(skel->progs.coro_batch_exec)
		    : (errno = ENOENT, NULL);
	if (l)
		attach_add_link(a, l);
	else if (path == PROBE_PATH_BATCHED)
		log_warn("cannot attach the batched path's exec hook (sched_prepare_exec, Linux "
			 "6.10): %s; a thread that execs loses what it wrote since its last copy, "
			 "uncounted (--probe-path trap loses nothing there)", strerror(errno));
	else
		log_verbose("trap path: cannot attach the exec hook that copies out what a thread "
			    "appended beside another session's batched path (sched_prepare_exec, "
			    "Linux 6.10): %s", strerror(errno));
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
			if (path != PROBE_PATH_BATCHED) {
				/* Only what another session makes threads append is read late. */
				log_warn("cannot open a CPU-clock perf event on CPU %d: %s; what a "
					 "thread appends beside another session's batched path is read "
					 "only at its switches, full buffers and end", cpu,
					 strerror(errno));
				return 0;
			}
			log_err("cannot open a CPU-clock perf event on CPU %d for the batched path: "
				"%s (--probe-path trap traces without it)", cpu, strerror(errno));
			return EXIT_FAILURE_RUNTIME;
		}
		l = bpf_program__attach_perf_event(skel->progs.coro_batch_tick, fd);
		if (!l) {
			log_err("cannot attach the %s path's tick to CPU %d: %s",
				batch_path_name(path), cpu, strerror(errno));
			close(fd);
			return EXIT_FAILURE_RUNTIME;
		}
		attach_add_link(a, l);
	}
	return 0;
}
