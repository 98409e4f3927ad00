// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The flight recorder: the last seconds of a capture, dumped on demand. See flight.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "flight.h"
#include "kinds.h"
#include "log.h"
#include "output.h"
#include "perfetto.h"
#include "raw.h"

#define FLIGHT_CHUNK_BYTES (1u << 20)
/*
 * Kept beyond the window: a dump starts up to one poll (100 ms) after it
 * was asked for, and is held back FLIGHT_SETTLE_NS for the records stamped
 * before the request that are still in the BPF ring.
 */
#define FLIGHT_SLACK_NS (500 * 1000 * 1000ULL)
#define FLIGHT_SETTLE_NS (50 * 1000 * 1000ULL)
#define FLIGHT_SEEN 64 /* findings remembered for de-duplication */
#define FLIGHT_WHY 256
_Static_assert(OPTS_MAX_OUTPUTS <= 32, "a dump's outputs are bits of a u32");

struct flight_chunk {
	u32 used, head; /* bytes written; bytes already fallen off the tail */
	u8 data[];
};

struct flight_seen {
	u32 kind, pid;
	u64 uid, ts;
};

struct flight_dump {
	unsigned n;
	u64 start, end;
	bool cut;    /* the byte bound had dropped part of the window */
	int status;  /* the child's exit status, -1 while it runs */
	u32 written; /* bit i: -o output i is in place under its dump name */
	char why[FLIGHT_WHY];
};

struct flight {
	const struct common_opts *c;
	u64 window_ns, max_bytes;
	u32 dump_kinds;
	struct pipeline *live;
	struct pipeline tail; /* the model at the start of the queue's window */
	struct record_sink inner;

	/* The queue: chunks[0] is the oldest; records in arrival order. */
	struct flight_chunk **chunks;
	size_t nchunks, cap_chunks;
	struct flight_chunk *spare;
	u64 bytes;     /* of the records held */
	u64 newest_ts; /* of the records held */
	u64 cut_ts;    /* newest timestamp the byte bound dropped */
	/* Each process's parent (pid -> ppid + 1), from its record: the model keeps none. */
	struct hmap ppids;

	/* A dump asked for and not started: its window ends at pending_end. */
	bool pending;
	u64 pending_end;
	char pending_why[FLIGHT_WHY];
	unsigned sigusr1_seen;
	struct flight_seen seen[FLIGHT_SEEN];
	u32 nseen;

	pid_t child; /* the dump being written, or 0 */
	/*
	 * Shared with the child (one anonymous shared page): bit i is set once
	 * output i of the dump is in place. A dump may put one file in place and
	 * fail another (its name taken meanwhile, a full disk): the parent says
	 * which, rather than calling the whole dump failed.
	 */
	u32 *child_written;
	u64 fork_ns_max;
	struct flight_dump *dumps;
	size_t ndumps;
	u64 bytes_written;
	bool failed;
};

static volatile sig_atomic_t sigusr1_count;
static volatile u64 sigusr1_ts;

static void on_sigusr1(int sig)
{
	struct timespec ts;

	(void)sig;
	/* Async-signal-safe: the window ends at the signal, not at the next poll. */
	clock_gettime(CLOCK_BOOTTIME, &ts);
	sigusr1_ts = (u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	sigusr1_count++;
}

void flight_install_signal(void)
{
	struct sigaction sa = {0};

	sa.sa_handler = on_sigusr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: the poll wakes and the dump starts */
}

char *flight_dump_name(const char *path, unsigned n)
{
	const char *base = strrchr(path, '/'), *ext;
	char *out;

	base = base ? base + 1 : path;
	ext = strrchr(base, '.');
	/* A compressed file keeps its two extensions together: t.1.jsonl.gz. */
	if (ext && ext > base && !strcmp(ext, ".gz")) {
		for (const char *p = ext - 1; p > base; p--) {
			if (*p == '.') {
				ext = p;
				break;
			}
		}
	}
	if (!ext || ext == base) /* no extension, or a dot file */
		ext = path + strlen(path);
	if (asprintf(&out, "%.*s.%u%s", (int)(ext - path), path, n, ext) < 0)
		abort();
	return out;
}

int flight_check_outputs(const struct common_opts *c)
{
	char err[512];

	for (int i = 0; i < c->noutputs; i++) {
		struct output o;
		char *name = flight_dump_name(c->outputs[i], 1);
		int ret = output_open(&o, name, c->format, c->force, NULL, err, sizeof(err));

		free(name);
		if (ret) {
			log_err("%s", err);
			return EXIT_OUTPUT;
		}
		output_abort(&o); /* created to be sure it can be; each dump creates its own */
	}
	return 0;
}

/* ---- the queue ---- */

static bool timeless(const struct coro_event_hdr *h)
{
	return record_kind(h->kind)->flags & RK_DEFINITION;
}

static void queue_push(struct flight *f, const struct coro_event_hdr *rec)
{
	struct flight_chunk *ck = f->nchunks ? f->chunks[f->nchunks - 1] : NULL;

	if (!ck || ck->used + rec->size > FLIGHT_CHUNK_BYTES) {
		ck = f->spare ? f->spare : xmalloc(sizeof(*ck) + FLIGHT_CHUNK_BYTES);
		f->spare = NULL;
		ck->used = ck->head = 0;
		if (f->nchunks == f->cap_chunks) {
			f->cap_chunks = f->cap_chunks ? 2 * f->cap_chunks : 16;
			f->chunks = xrealloc(f->chunks, f->cap_chunks * sizeof(*f->chunks));
		}
		f->chunks[f->nchunks++] = ck;
	}
	memcpy(ck->data + ck->used, rec, rec->size);
	ck->used += rec->size;
	f->bytes += rec->size;
	if (!timeless(rec) && rec->ts > f->newest_ts)
		f->newest_ts = rec->ts;
}

static const struct coro_event_hdr *queue_head(const struct flight *f)
{
	const struct flight_chunk *ck = f->nchunks ? f->chunks[0] : NULL;

	return ck && ck->head < ck->used ? (const void *)(ck->data + ck->head) : NULL;
}

/* A record into the tail pipeline, its process's parent noted. */
static void flight_feed_tail(struct flight *f, const struct coro_event_hdr *h)
{
	if (h->kind == CORO_REC_PROCESS)
		hmap_put(&f->ppids, h->pid, 0,
			 (void *)(uintptr_t)(((const struct coro_rec_process *)h)->ppid + 1ULL));
	else if (h->kind == CORO_REC_PROC_EXIT)
		hmap_del(&f->ppids, h->pid, 0);
	pipeline_feed(&f->tail, h);
}

/* The head falls off: into the tail pipeline. */
static void queue_pop(struct flight *f)
{
	struct flight_chunk *ck = f->chunks[0];
	const struct coro_event_hdr *h = (const void *)(ck->data + ck->head);

	flight_feed_tail(f, h);
	ck->head += h->size;
	f->bytes -= h->size;
	if (ck->head < ck->used)
		return;
	if (f->nchunks == 1) {
		ck->used = ck->head = 0;
		return;
	}
	free(f->spare);
	f->spare = ck;
	memmove(f->chunks, f->chunks + 1, (f->nchunks - 1) * sizeof(*f->chunks));
	f->nchunks--;
}

static void queue_evict(struct flight *f)
{
	const struct coro_event_hdr *h;
	u64 keep = f->window_ns + FLIGHT_SLACK_NS;

	while ((h = queue_head(f))) {
		if (f->bytes <= f->max_bytes) {
			if (h->ts + keep > f->newest_ts)
				break;
			/* A dump asked for: its window stays until it is forked. */
			if (f->pending && h->ts + f->window_ns >= f->pending_end)
				break;
		} else if (!timeless(h) && h->ts > f->cut_ts) {
			f->cut_ts = h->ts;
		}
		queue_pop(f);
	}
}

static void flight_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct flight *f = ctx;

	f->inner.emit(f->inner.ctx, rec);
	queue_push(f, rec);
	queue_evict(f);
}

static int flight_flush(void *ctx)
{
	struct flight *f = ctx;

	return f->inner.flush ? f->inner.flush(f->inner.ctx) : 0;
}

struct record_sink flight_sink(struct flight *f, struct record_sink inner)
{
	f->inner = inner;
	return (struct record_sink){.emit = flight_emit, .flush = flight_flush, .ctx = f};
}

/* ---- requests ---- */

static void flight_request(struct flight *f, u64 end, const char *why)
{
	size_t n;

	if (!f->pending) {
		f->pending = true;
		f->pending_end = end;
		snprintf(f->pending_why, sizeof(f->pending_why), "%s", why);
		return;
	}
	/* Coalesced: one dump, its window ending at the latest request, naming them all. */
	if (end > f->pending_end)
		f->pending_end = end;
	n = strlen(f->pending_why);
	if (n + 3 < sizeof(f->pending_why))
		snprintf(f->pending_why + n, sizeof(f->pending_why) - n, ", %s", why);
}

static void flight_on_finding(void *ctx, const struct finding *fd)
{
	struct flight *f = ctx;
	struct flight_seen key = {.kind = fd->kind, .pid = fd->pid, .uid = fd->uid, .ts = fd->ts};
	char why[128], label[CORO_STR_LEN + 32];

	if (!(f->dump_kinds & (1u << fd->kind)))
		return;
	for (u32 i = 0; i < f->nseen && i < FLIGHT_SEEN; i++)
		if (!memcmp(&f->seen[i], &key, sizeof(key)))
			return;
	f->seen[f->nseen++ % FLIGHT_SEEN] = key;
	if (finding_names_id(fd))
		/* A message: a long name's first bytes say enough. */
		snprintf(label, sizeof(label), "%.*s%s0x%llx", CORO_STR_LEN - 1, fd->name,
			 fd->name[0] ? " " : "", (unsigned long long)fd->id);
	else
		snprintf(label, sizeof(label), "thread %u", fd->tid);
	snprintf(why, sizeof(why), "%s of %s (pid %u)", finding_kind_name(fd->kind), label,
		 fd->pid);
	/* Made while applying a record: the window ends at that record. */
	flight_request(f, f->live->model.last_ts, why);
}

struct flight *flight_new(const struct common_opts *c, const struct trace_opts *t,
			  struct capture_info *ci, struct pipeline *live)
{
	struct flight *f = xcalloc(1, sizeof(*f));
	struct model_observer none = {0};
	struct finding_sink fs = {.ctx = f, .finding = flight_on_finding};

	f->c = c;
	f->window_ns = (u64)(t->flight * 1e9);
	f->max_bytes = (t->flight_mb ? t->flight_mb : FLIGHT_DEFAULT_MB) << 20;
	f->dump_kinds = t->dump_on;
	f->live = live;
	f->sigusr1_seen = sigusr1_count;
	hmap_init(&f->ppids);
	f->child_written = mmap(NULL, sizeof(*f->child_written), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->child_written == MAP_FAILED) {
		log_err("out of memory (mapping the flight recorder's shared page): %s",
			strerror(errno));
		abort(); /* as xmalloc does */
	}
	pipeline_init(&f->tail, ci, &c->an);
	/* The caps of the live model: the tail follows what it follows, the dumps say the same. */
	model_limit(&f->tail.model, c->max_live, c->max_live_process);
	model_limit_spans(&f->tail.model, c->max_spans, c->max_spans_process);
	pipeline_begin(&f->tail);
	if (f->dump_kinds)
		pipeline_add_observer(live, &none, &fs);
	return f;
}

/* ---- a dump, in the child ---- */

/* The window's counters from zero; live coroutines in their state as of `start`. */
static void dump_reset_at(struct model *m, u64 start)
{
	size_t it = 0;
	void *v;

	m->events = 0;
	m->samples = 0;
	memset(m->events_by_kind, 0, sizeof(m->events_by_kind));
	m->coroutines = m->live;
	m->peak_live = m->live;
	memset(&m->anom, 0, sizeof(m->anom));
	m->first_ts = start;
	m->ci->start_ts = start;
	while (hmap_next(&m->coros, &it, NULL, NULL, &v)) {
		struct coro *co = v;

		if (co->state_since < start)
			co->state_since = start;
		if (co->first_ts < start)
			co->first_ts = start;
		memset(co->t_state, 0, sizeof(co->t_state));
		memset(co->t_suspended, 0, sizeof(co->t_suspended));
		co->t_offcpu = co->t_blocked = co->t_runq = 0;
		/* A run in progress is one switch-in of the window: its thread slice is there. */
		co->switch_ins = co->state == CS_RUNNING;
		co->readies = 0;
		co->longest_susp = 0;
		co->longest_open = false;
	}
}

/* An event made from the model's state, to the observers from `first` on only. */
static void dump_announce(struct model *m, size_t first, const struct event *ev)
{
	for (size_t k = first; k < m->nobs; k++)
		if (m->obs[k].event)
			m->obs[k].event(m->obs[k].ctx, ev);
}

/*
 * The processes and threads the model knows, announced as their records
 * announced them before the window (the JSONL and SQLite outputs write them
 * from those events): a process as of now (after any exec), a thread with
 * its name, at the window's start.
 */
static void dump_announce_known(struct flight *f, size_t first, u64 start)
{
	struct model *m = &f->tail.model;
	const struct coro_process *p;
	const struct coro_thread *t;
	size_t it = 0;

	while ((p = model_next_process(m, &it))) {
		struct event ev = {
		    .kind = EV_PROCESS, .pid = p->pid, .tid = p->pid, .ts = p->start_ts, .proc = p};
		uintptr_t ppid = (uintptr_t)hmap_get(&f->ppids, p->pid, 0);

		ev.process.comm = str_field(p->comm, sizeof(p->comm));
		ev.process.exe = str_field(p->exe ? p->exe : "", p->exe ? strlen(p->exe) + 1 : 1);
		ev.process.mode = p->mode;
		ev.process.ppid = ppid ? (u32)(ppid - 1) : 0;
		dump_announce(m, first, &ev);
	}
	it = 0;
	while ((t = model_next_thread(m, &it))) {
		struct event ev = {.kind = EV_THREAD,
				   .pid = t->pid,
				   .tid = t->tid,
				   .ts = start,
				   .thread = t,
				   .proc = model_process_peek(m, t->pid)};

		if (!t->comm[0])
			continue; /* no record named it */
		ev.comm.comm = str_field(t->comm, sizeof(t->comm));
		dump_announce(m, first, &ev);
	}
}

/*
 * The outputs, attached to the tail pipeline now: they start where the model
 * is. One that cannot be opened (its name taken since the start's check, its
 * directory gone) is said and left out; the others are written all the same.
 * Bit i of the result: output i is open and attached.
 */
static u32 dump_attach(struct flight *f, struct output *outs, unsigned n, u64 start)
{
	const struct common_opts *c = f->c;
	struct model *m = &f->tail.model;
	size_t first = m->nobs, it = 0;
	u32 open = 0;
	char err[512];
	void *v;

	for (int i = 0; i < c->noutputs; i++) {
		char *name = flight_dump_name(c->outputs[i], n);
		int ret = output_open(&outs[i], name, c->format, c->force, NULL, err,
				      sizeof(err));

		free(name);
		if (ret) {
			log_err("%s", err);
			continue;
		}
		outs[i].max_tracks =
		    c->coroutine_tracks_set ? c->coroutine_tracks : PERFETTO_DEFAULT_MAX_TRACKS;
		if (pipeline_add_output(&f->tail, &outs[i], err, sizeof(err))) {
			log_err("%s", err);
			output_abort(&outs[i]);
			continue;
		}
		open |= 1u << i;
	}
	/*
	 * The model is where the reorder has released records up to: its last
	 * record, just before `start` (records stamped up to the 50 ms window earlier may
	 * still wait there and come next). The dump starts there, so nothing
	 * in it is older than its start.
	 */
	if (m->last_ts && m->last_ts < start)
		start = m->last_ts;
	f->tail.reorder.late = 0;
	dump_reset_at(m, start);
	for (size_t k = first; k < m->nobs; k++)
		if (m->obs[k].begin)
			m->obs[k].begin(m->obs[k].ctx, m->ci);
	dump_announce_known(f, first, start);
	while (hmap_next(&m->coros, &it, NULL, NULL, &v)) {
		const struct coro *co = v;

		if (co->state == CS_EXITED)
			continue;
		for (size_t k = first; k < m->nobs; k++)
			if (m->obs[k].enter)
				m->obs[k].enter(m->obs[k].ctx, co, co->state_since);
	}
	return open;
}

static int dump_write(struct flight *f, unsigned n, u64 start, u64 end)
{
	struct output outs[OPTS_MAX_OUTPUTS];
	struct capture_stats base;
	struct model *m = &f->tail.model;
	bool attached = false;
	u32 open = 0;
	int ret = 0;
	char err[512];

	for (size_t i = 0; i < f->nchunks; i++) {
		const struct flight_chunk *ck = f->chunks[i];

		for (u32 off = ck->head; off < ck->used;) {
			const struct coro_event_hdr *h = (const void *)(ck->data + off);

			off += h->size;
			if (!attached && !timeless(h) && h->ts >= start) {
				base = m->stats;
				open = dump_attach(f, outs, n, start);
				attached = true;
			}
			if (attached && !timeless(h) && h->ts > end)
				continue;
			flight_feed_tail(f, h);
		}
	}
	if (!attached) {
		base = m->stats;
		open = dump_attach(f, outs, n, start);
	}
	/* The stats records count from the capture's start: the window's losses are the difference.
	 */
	reorder_drain(&f->tail.reorder);
	for (u32 k = 0; k < CORO_STAT_MAX; k++)
		m->stats.bpf[k] -= m->stats.bpf[k] >= base.bpf[k] ? base.bpf[k] : m->stats.bpf[k];
	for (u32 k = 0; k < CORO_USTAT_MAX; k++)
		m->stats.user[k] -=
		    m->stats.user[k] >= base.user[k] ? base.user[k] : m->stats.user[k];
	pipeline_finish(&f->tail);
	for (int i = 0; i < f->c->noutputs; i++) {
		if (!(open & (1u << i))) {
			ret = 1;
		} else if (output_close(&outs[i], err, sizeof(err))) {
			log_err("%s", err);
			ret = 1;
		} else {
			__atomic_or_fetch(f->child_written, 1u << i, __ATOMIC_RELEASE);
		}
	}
	return ret;
}

/* ---- dumps, in the parent ---- */

static void dump_start(struct flight *f)
{
	struct flight_dump *d;
	sigset_t all, old;
	u64 t0 = now_boottime_ns(), dt;
	pid_t pid;

	f->dumps = xrealloc(f->dumps, (f->ndumps + 1) * sizeof(*f->dumps));
	d = &f->dumps[f->ndumps];
	memset(d, 0, sizeof(*d));
	d->n = f->ndumps + 1;
	d->end = f->pending_end;
	d->start = d->end > f->window_ns ? d->end - f->window_ns : 0;
	d->cut = f->cut_ts >= d->start;
	d->status = -1;
	snprintf(d->why, sizeof(d->why), "%s", f->pending_why);
	*f->child_written = 0;
	/* No handler of ours may run in the child before it ignores the signals. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0) {
		static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};

		/* corobpf waits for it: a Ctrl-C or a request is the parent's to act on. */
		for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
			signal(sigs[i], SIG_IGN);
		sigprocmask(SIG_SETMASK, &old, NULL);
		_exit(dump_write(f, d->n, d->start, d->end));
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	f->pending = false;
	if (pid < 0) {
		log_err("cannot write flight dump %u: fork: %s", d->n, strerror(errno));
		f->failed = true;
		return;
	}
	dt = now_boottime_ns() - t0;
	if (dt > f->fork_ns_max)
		f->fork_ns_max = dt;
	log_verbose("flight dump %u (%s) forked in %.2f ms", d->n, d->why, dt / 1e6);
	f->child = pid;
	f->ndumps++;
}

/* The dump's files not in place, comma-separated, into buf. */
static void dump_unwritten(const struct flight *f, const struct flight_dump *d, char *buf,
			   size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < f->c->noutputs && n < len; i++) {
		char *name;

		if (d->written & (1u << i))
			continue;
		name = flight_dump_name(f->c->outputs[i], d->n);
		n += snprintf(buf + n, len - n, "%s%s", n ? ", " : "", name);
		free(name);
	}
}

static void dump_done(struct flight *f, int status)
{
	struct flight_dump *d = &f->dumps[f->ndumps - 1];
	const struct common_opts *c = f->c;
	char failed[1024], how[64];

	f->child = 0;
	d->status = status;
	d->written = __atomic_load_n(f->child_written, __ATOMIC_ACQUIRE);
	for (int i = 0; i < c->noutputs; i++) {
		char *name;
		struct stat st;

		if (!(d->written & (1u << i)))
			continue;
		name = flight_dump_name(c->outputs[i], d->n);
		if (!stat(name, &st))
			f->bytes_written += st.st_size;
		log_info("wrote %s (flight dump %u: %s)", name, d->n, d->why);
		free(name);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		/* The child said why (its log); a child killed says nothing: say it here. */
		if (WIFSIGNALED(status))
			snprintf(how, sizeof(how), ": its process was killed by signal %d",
				 WTERMSIG(status));
		else
			how[0] = 0;
		dump_unwritten(f, d, failed, sizeof(failed));
		if (d->written)
			log_err("flight dump %u (%s) is incomplete: %s not written%s", d->n, d->why,
				failed, how);
		else
			log_err("flight dump %u (%s) failed: %s not written%s", d->n, d->why, failed,
				how);
		f->failed = true;
		return;
	}
	if (d->cut)
		log_warn(
		    "flight dump %u holds less than %.1f s: --flight-mb %llu was reached first",
		    d->n, f->window_ns / 1e9, (unsigned long long)(f->max_bytes >> 20));
}

static void flight_reap(struct flight *f, bool wait)
{
	int status;
	pid_t r;

	if (!f->child)
		return;
	while ((r = waitpid(f->child, &status, wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == f->child)
		dump_done(f, status);
}

static void flight_poll_signal(struct flight *f)
{
	unsigned n = sigusr1_count;

	if (n != f->sigusr1_seen) {
		f->sigusr1_seen = n;
		flight_request(f, sigusr1_ts, "SIGUSR1");
	}
}

void flight_tick(struct flight *f)
{
	flight_reap(f, false);
	flight_poll_signal(f);
	if (f->pending && !f->child && now_boottime_ns() >= f->pending_end + FLIGHT_SETTLE_NS)
		dump_start(f);
}

u64 flight_bytes_written(const struct flight *f)
{
	return f ? f->bytes_written : 0;
}

int flight_finish(struct flight *f)
{
	flight_reap(f, true);
	flight_poll_signal(f);
	if (f->pending) {
		dump_start(f);
		flight_reap(f, true);
	}
	if (f->ndumps) {
		char list[1024];
		size_t n = 0;

		list[0] = 0;
		for (size_t i = 0; i < f->ndumps && n < sizeof(list); i++) {
			const struct flight_dump *d = &f->dumps[i];
			bool first = true;
			char failed[512];

			/* The files in place; those that are not, after the dump's reason. */
			for (int k = 0; k < f->c->noutputs && n < sizeof(list); k++) {
				char *name;

				if (!(d->written & (1u << k)))
					continue;
				name = flight_dump_name(f->c->outputs[k], d->n);
				n += snprintf(list + n, sizeof(list) - n, "%s%s",
					      first ? (i ? "; " : "") : ", ", name);
				first = false;
				free(name);
			}
			dump_unwritten(f, d, failed, sizeof(failed));
			if (n < sizeof(list))
				n += snprintf(list + n, sizeof(list) - n, "%s(%s%s%s)",
					      first ? (i ? "; dump " : "dump ") : " ", d->why,
					      failed[0] ? ", not written: " : "", failed);
		}
		log_info("flight recorder: %zu dump%s of the last %.1f s: %s", f->ndumps,
			 f->ndumps == 1 ? "" : "s", f->window_ns / 1e9, list);
		log_verbose("flight recorder: longest fork %.2f ms", f->fork_ns_max / 1e6);
	} else {
		log_info("flight recorder: no dump was asked for (SIGUSR1%s)",
			 f->dump_kinds ? " or a --dump-on finding" : "");
	}
	return f->failed ? EXIT_OUTPUT : 0;
}

void flight_free(struct flight *f)
{
	if (!f)
		return;
	/* A dump being written is finished: killed, it would leave its temporary files. */
	flight_reap(f, true);
	pipeline_free(&f->tail);
	hmap_free(&f->ppids);
	for (size_t i = 0; i < f->nchunks; i++)
		free(f->chunks[i]);
	free(f->chunks);
	free(f->spare);
	free(f->dumps);
	munmap(f->child_written, sizeof(*f->child_written));
	free(f);
}
