// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The queue between a live capture's reader and the model thread. See modelq.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include "log.h"
#include "modelq.h"

#define TICK_NS (20 * 1000000ull)
/* The model thread's priority under the reader's while the capture runs. */
#define MODEL_NICE 19
/* A backlog worth saying at the end: the model then takes about a second or more to catch up. */
#define SAY_BEHIND (256ull << 20)
#define SAY_CATCH_UP_NS 1000000000ull
/* Faulted in at the start: the default, and no more (a larger --queue-memory faults as used). */
#define PREFAULT_BUFS (MODELQ_DEFAULT_MEM / MODELQ_CHUNK)

struct chunk {
	struct chunk *next;
	u8 *data;     /* MODELQ_CHUNK bytes, or NULL: the records wait in the file */
	u64 off;      /* in the file, when data is NULL */
	u32 len;      /* bytes of records */
};

struct modelq {
	struct record_sink inner;
	void (*tick)(void *);
	void *tick_ctx;

	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t avail; /* the model thread: a chunk, a flush or the end */
	pthread_cond_t space; /* the reader: a buffer given back */

	/* Under lock. */
	struct chunk *head, *tail; /* queued, oldest first */
	struct chunk *free_bufs;   /* buffers given back */
	u32 nbufs, max_bufs;	   /* buffers allocated, at most */
	bool closed;		   /* modelq_finish(): no more chunks */
	bool begun;		   /* modelq_begin(): inner and tick are set */
	bool model_waits;	   /* the model thread sleeps on avail */
	bool reader_waits;	   /* the reader sleeps on space */

	/* Atomics (both threads). */
	int flush_wanted;
	int flush_err;
	int model_tid;
	u64 behind; /* bytes queued, not yet processed */

	u8 *mem; /* the buffers' memory (mem_map()) */
	size_t map_len;

	/* The reader's. */
	struct chunk *cur;
	int spill_fd;
	u64 spill_end, spill_cap, spill_live;
	int base_nice;
	u64 finish_ts;

	/* The model thread's until it is joined. */
	u8 *rbuf; /* a chunk read back from the file */
	u64 records, last_ts;

	struct modelq_stats st;
};

/*
 * A new buffer: the next slice of the queue's memory, claimed under the
 * lock (the reader and the model thread both make them).
 */
static struct chunk *chunk_new_buf_locked(struct modelq *q)
{
	struct chunk *c = xcalloc(1, sizeof(*c));

	c->data = q->mem + (size_t)q->nbufs * MODELQ_CHUNK;
	q->nbufs++;
	return c;
}

/* The buffers' memory: one mapping, faulted in by the model thread before records come (prefault()). */
static int mem_map(struct modelq *q)
{
	size_t len = (size_t)q->max_bufs * MODELQ_CHUNK;
	/* Reserved (no MAP_NORESERVE): a size the machine cannot hold is refused here, said. */
	u8 *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	/*
	 * Not shared with a child (the command launched, forked after): a fork would leave every
	 * page write-protected, and the reader's first write to each would fault (copy on write).
	 */
	madvise(p, len, MADV_DONTFORK);
	q->mem = p;
	q->map_len = len;
	return 0;
}

/*
 * On the model thread, at its start: the buffers, up to the default's
 * 128 MiB, faulted in and given to the free list while the capture attaches. A page fault per 4 KiB of a
 * buffer the reader takes for the first time in a flood costs it events
 * (the kernel clears each page); huge pages were slower still here.
 */
static void prefault(struct modelq *q)
{
	for (;;) {
		struct chunk *c;

		pthread_mutex_lock(&q->lock);
		if (q->nbufs == q->max_bufs || q->nbufs >= PREFAULT_BUFS || q->closed || q->head) {
			pthread_mutex_unlock(&q->lock);
			return;
		}
		c = chunk_new_buf_locked(q);
		pthread_mutex_unlock(&q->lock);
#ifdef MADV_POPULATE_WRITE
		if (madvise(c->data, MODELQ_CHUNK, MADV_POPULATE_WRITE))
#endif
			for (size_t i = 0; i < MODELQ_CHUNK; i += 4096)
				__atomic_store_n(&c->data[i], 0, __ATOMIC_RELAXED);
		pthread_mutex_lock(&q->lock);
		c->next = q->free_bufs;
		q->free_bufs = c;
		/* The reader may have found every buffer claimed, this one not yet given. */
		if (q->reader_waits)
			pthread_cond_signal(&q->space);
		pthread_mutex_unlock(&q->lock);
	}
}

/* A temporary file nobody can name: O_TMPFILE, so no path anyone could swap or read. */
static void spill_open(struct modelq *q)
{
	const char *dir = getenv("TMPDIR");
	struct statvfs sv;

	if (!dir || dir[0] != '/')
		dir = "/var/tmp";
	snprintf(q->st.spill_dir, sizeof(q->st.spill_dir), "%s", dir);
	q->spill_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (q->spill_fd < 0) {
		q->st.spill_errno = errno;
		return;
	}
	q->spill_cap = MODELQ_SPILL_MAX;
	if (fstatvfs(q->spill_fd, &sv) == 0 && (u64)sv.f_bavail * sv.f_frsize / 2 < q->spill_cap)
		q->spill_cap = (u64)sv.f_bavail * sv.f_frsize / 2;
}

static void model_tick(struct modelq *q, u64 *next)
{
	u64 now = now_boottime_ns();

	if (now < *next)
		return;
	*next = now + TICK_NS;
	if (q->tick)
		q->tick(q->tick_ctx);
}

static void model_flush(struct modelq *q)
{
	int err;

	if (!__atomic_exchange_n(&q->flush_wanted, 0, __ATOMIC_ACQ_REL))
		return;
	err = q->inner.flush ? q->inner.flush(q->inner.ctx) : 0;
	if (err < 0)
		__atomic_store_n(&q->flush_err, err, __ATOMIC_RELEASE);
}

static void model_records(struct modelq *q, const u8 *p, u32 len)
{
	for (u32 off = 0; off < len;) {
		const struct coro_event_hdr *h = (const void *)(p + off);

		/* The capture hands on only records it checked: never one shorter than its header. */
		if (h->size < sizeof(*h))
			break;
		record_sink_emit(&q->inner, h);
		q->records++;
		off += (h->size + 7u) & ~7u;
	}
}

/* A chunk written to the file: read back, its space given back to the filesystem. */
static const u8 *model_read_back(struct modelq *q, const struct chunk *c)
{
	size_t got = 0;

	while (got < c->len) {
		ssize_t n = pread(q->spill_fd, q->rbuf + got, c->len - got, (off_t)(c->off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* Cannot happen short of a disk error; the records are lost, and said. */
			log_err("the model's temporary file in %s: reading %u bytes back at %llu: %s; "
				"the records in them are missing from the outputs", q->st.spill_dir,
				c->len, (unsigned long long)c->off, n < 0 ? strerror(errno) : "end of file");
			return NULL;
		}
		got += (size_t)n;
	}
	fallocate(q->spill_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)c->off, c->len);
	__atomic_sub_fetch(&q->spill_live, c->len, __ATOMIC_RELAXED);
	return q->rbuf;
}

static void *model_thread(void *arg)
{
	struct modelq *q = arg;
	u64 next_tick = 0;

	__atomic_store_n(&q->model_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	/* At the process's priority while the capture attaches: then under the reader's. */
	prefault(q);
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), q->base_nice + MODEL_NICE);
	pthread_mutex_lock(&q->lock);
	while (!q->begun && !q->closed)
		pthread_cond_wait(&q->avail, &q->lock);
	pthread_mutex_unlock(&q->lock);
	for (;;) {
		struct chunk *c;
		const u8 *p;
		bool closed;

		pthread_mutex_lock(&q->lock);
		while (!q->head && !q->closed && !__atomic_load_n(&q->flush_wanted, __ATOMIC_ACQUIRE)) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += TICK_NS;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			q->model_waits = true;
			pthread_cond_timedwait(&q->avail, &q->lock, &until);
			q->model_waits = false;
			pthread_mutex_unlock(&q->lock);
			model_tick(q, &next_tick);
			pthread_mutex_lock(&q->lock);
		}
		c = q->head;
		closed = q->closed;
		if (c) {
			q->head = c->next;
			if (!q->head)
				q->tail = NULL;
		}
		pthread_mutex_unlock(&q->lock);
		model_flush(q);
		if (!c) {
			if (closed)
				break;
			model_tick(q, &next_tick);
			continue;
		}
		p = c->data ? c->data : model_read_back(q, c);
		if (p)
			model_records(q, p, c->len);
		__atomic_sub_fetch(&q->behind, c->len, __ATOMIC_RELAXED);
		pthread_mutex_lock(&q->lock);
		if (c->data) {
			c->next = q->free_bufs;
			q->free_bufs = c;
			if (q->reader_waits)
				pthread_cond_signal(&q->space);
		}
		pthread_mutex_unlock(&q->lock);
		if (!c->data)
			free(c);
		model_tick(q, &next_tick);
	}
	return NULL;
}

/* ---- the reader's side ---- */

/* The file holds it, or NULL: no file, or the file is full. */
static bool spill(struct modelq *q, struct chunk *c, struct chunk **node)
{
	size_t put = 0;

	if (q->spill_fd < 0 ||
	    __atomic_load_n(&q->spill_live, __ATOMIC_RELAXED) + c->len > q->spill_cap)
		return false;
	while (put < c->len) {
		ssize_t n = pwrite(q->spill_fd, c->data + put, c->len - put,
				   (off_t)(q->spill_end + put));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* The disk full, most likely: no more file; the reader waits from now on. */
			q->st.spill_errno = n < 0 ? errno : ENOSPC;
			q->spill_cap = 0;
			return false;
		}
		put += (size_t)n;
	}
	*node = xcalloc(1, sizeof(**node));
	(*node)->off = q->spill_end;
	(*node)->len = c->len;
	q->spill_end += c->len;
	__atomic_add_fetch(&q->spill_live, c->len, __ATOMIC_RELAXED);
	q->st.spilled += c->len;
	return true;
}

static void enqueue(struct modelq *q, struct chunk *c)
{
	c->next = NULL;
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	if (q->model_waits)
		pthread_cond_signal(&q->avail);
}

/* The reader's chunk to the model thread; a fresh one for the reader. */
static void publish(struct modelq *q)
{
	struct chunk *c = q->cur, *node = NULL;
	u64 behind, t0;

	if (!c->len)
		return;
	behind = __atomic_add_fetch(&q->behind, c->len, __ATOMIC_RELAXED);
	if (behind > q->st.peak_behind)
		q->st.peak_behind = behind;
	q->st.bytes += c->len;
	pthread_mutex_lock(&q->lock);
	if (q->free_bufs) {
		q->cur = q->free_bufs;
		q->free_bufs = q->cur->next;
	} else if (q->nbufs < q->max_bufs) {
		q->cur = chunk_new_buf_locked(q);
	} else {
		/* Memory is full: the records wait in the file, the reader keeps its buffer. */
		pthread_mutex_unlock(&q->lock);
		if (spill(q, c, &node)) {
			pthread_mutex_lock(&q->lock);
			enqueue(q, node);
			pthread_mutex_unlock(&q->lock);
			c->len = 0;
			return;
		}
		/* Nowhere to put them: wait for a buffer; behind us the ring fills, and BPF counts. */
		t0 = now_boottime_ns();
		pthread_mutex_lock(&q->lock);
		q->st.waits++;
		while (!q->free_bufs) {
			q->reader_waits = true;
			pthread_cond_wait(&q->space, &q->lock);
			q->reader_waits = false;
		}
		q->cur = q->free_bufs;
		q->free_bufs = q->cur->next;
		q->st.wait_ns += now_boottime_ns() - t0;
	}
	enqueue(q, c);
	pthread_mutex_unlock(&q->lock);
	q->cur->len = 0;
}

static void q_emit(void *ctx, const struct coro_event_hdr *rec)
{
	struct modelq *q = ctx;
	u32 n = (rec->size + 7u) & ~7u;
	u8 *dst;

	if (q->cur->len + n > MODELQ_CHUNK)
		publish(q);
	dst = q->cur->data + q->cur->len;
	/* The batched path's records (40 to 64 bytes) by constant-size copies, inlined. */
	switch (rec->size) {
	case 40: memcpy(dst, rec, 40); break;
	case 48: memcpy(dst, rec, 48); break;
	case 56: memcpy(dst, rec, 56); break;
	case 64: memcpy(dst, rec, 64); break;
	default: memcpy(dst, rec, rec->size); break;
	}
	q->cur->len += n;
}

static void q_emit_many(void *ctx, const void *recs, size_t len, u64 newest_ts)
{
	struct modelq *q = ctx;

	(void)newest_ts;
	/* A batch's records (at most 16 KiB) fit in a chunk: never split. */
	if (len > MODELQ_CHUNK) {
		const u8 *p = recs, *end = p + len;

		for (; p < end; p += ((const struct coro_event_hdr *)p)->size)
			q_emit(q, (const void *)p);
		return;
	}
	if (q->cur->len + len > MODELQ_CHUNK)
		publish(q);
	memcpy(q->cur->data + q->cur->len, recs, len);
	q->cur->len += len;
}

static void q_idle(void *ctx)
{
	publish(ctx);
}

static int q_flush(void *ctx)
{
	struct modelq *q = ctx;

	publish(q);
	__atomic_store_n(&q->flush_wanted, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&q->lock);
	if (q->model_waits)
		pthread_cond_signal(&q->avail);
	pthread_mutex_unlock(&q->lock);
	return __atomic_load_n(&q->flush_err, __ATOMIC_ACQUIRE);
}

struct record_sink modelq_sink(struct modelq *q)
{
	return (struct record_sink){.emit = q_emit, .idle = q_idle, .flush = q_flush,
				    .emit_many = q_emit_many, .ctx = q};
}

struct modelq *modelq_new(u64 mem_limit, char *err, size_t errlen)
{
	struct modelq *q = xcalloc(1, sizeof(*q));
	sigset_t all, old;
	int e;

	q->max_bufs = mem_limit / MODELQ_CHUNK < 2 ? 2 : (u32)(mem_limit / MODELQ_CHUNK);
	e = mem_map(q);
	if (e) {
		snprintf(err, errlen, "cannot map %llu MiB for the model's queue (--queue-memory): %s",
			 (unsigned long long)(q->max_bufs * (u64)MODELQ_CHUNK >> 20), strerror(-e));
		free(q);
		return NULL;
	}
	q->cur = chunk_new_buf_locked(q);
	q->rbuf = xmalloc(MODELQ_CHUNK);
	q->spill_fd = -1;
	spill_open(q);
	errno = 0;
	q->base_nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		q->base_nice = 0;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->avail, NULL);
	pthread_cond_init(&q->space, NULL);
	/* Signals stay the reader's: they interrupt its wait, and its loop stops the capture. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&q->thread, NULL, model_thread, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		snprintf(err, errlen, "cannot start the model thread: %s", strerror(e));
		q->thread = 0;
		modelq_free(q);
		return NULL;
	}
	return q;
}

void modelq_begin(struct modelq *q, struct record_sink inner, void (*tick)(void *), void *tick_ctx)
{
	pthread_mutex_lock(&q->lock);
	q->inner = inner;
	q->tick = tick;
	q->tick_ctx = tick_ctx;
	/* Not waiting for the faults: a buffer not yet faulted in is the reader's to fault. */
	q->begun = true;
	pthread_cond_signal(&q->avail);
	pthread_mutex_unlock(&q->lock);
}

int modelq_finish(struct modelq *q)
{
	int tid;

	publish(q);
	q->st.behind_at_end = __atomic_load_n(&q->behind, __ATOMIC_RELAXED);
	if (q->st.behind_at_end >= SAY_BEHIND)
		log_info("the capture has ended; the model is %.0f MiB of records behind it, "
			 "processing them now", q->st.behind_at_end / 1048576.0);
	tid = __atomic_load_n(&q->model_tid, __ATOMIC_ACQUIRE);
	if (tid)
		setpriority(PRIO_PROCESS, (id_t)tid, q->base_nice);
	q->finish_ts = now_boottime_ns();
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_signal(&q->avail);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	q->thread = 0;
	q->st.catch_up_ns = now_boottime_ns() - q->finish_ts;
	q->st.records = q->records;
	return q->flush_err;
}

void modelq_stats(const struct modelq *q, struct modelq_stats *st)
{
	*st = q->st;
}

static const char *mib(char *buf, size_t len, u64 b)
{
	if (b < (10ull << 20))
		snprintf(buf, len, "%.1f MiB", b / 1048576.0);
	else
		snprintf(buf, len, "%.0f MiB", b / 1048576.0);
	return buf;
}

void modelq_say(const struct modelq *q)
{
	const struct modelq_stats *s = &q->st;
	char a[32], b[32];

	if (s->waits) {
		char why[400];

		if (s->spill_errno && s->spilled)
			snprintf(why, sizeof(why), "writing its temporary file in %s failed (%s)",
				 s->spill_dir, strerror(s->spill_errno));
		else if (s->spill_errno)
			snprintf(why, sizeof(why), "no temporary file in %s (%s)", s->spill_dir,
				 strerror(s->spill_errno));
		else
			snprintf(why, sizeof(why), "its temporary file in %s reached its bound, %s",
				 s->spill_dir, mib(a, sizeof(a), q->spill_cap));
		log_warn("the reader waited %llu time%s (%.0f ms in all) for the model thread: its "
			 "memory was full (%s) and %s; meanwhile the ring buffer filled and events "
			 "were lost (counted as ring buffer full); give it more memory with "
			 "--queue-memory, or free space there (or set TMPDIR)",
			 (unsigned long long)s->waits, s->waits == 1 ? "" : "s", s->wait_ns / 1e6,
			 mib(b, sizeof(b), (u64)q->max_bufs * MODELQ_CHUNK), why);
	}
	if (s->spilled || s->catch_up_ns >= SAY_CATCH_UP_NS)
		log_info("the model fell behind the capture by up to %s of records (%s of them "
			 "in a temporary file in %s); it caught up %.1f s after the capture ended",
			 mib(a, sizeof(a), s->peak_behind), mib(b, sizeof(b), s->spilled), s->spill_dir,
			 s->catch_up_ns / 1e9);
}

void modelq_free(struct modelq *q)
{
	struct chunk *c, *n;

	if (!q)
		return;
	if (q->thread) {
		/* Not finished: stop the thread without its records (an abort). */
		pthread_mutex_lock(&q->lock);
		for (c = q->head; c; c = n) {
			n = c->next;
			if (c->data) {
				c->next = q->free_bufs;
				q->free_bufs = c;
			} else {
				free(c);
			}
		}
		q->head = q->tail = NULL;
		q->closed = true;
		pthread_cond_broadcast(&q->avail);
		pthread_mutex_unlock(&q->lock);
		pthread_join(q->thread, NULL);
	}
	for (c = q->free_bufs; c; c = n) {
		n = c->next;
		free(c);
	}
	for (c = q->head; c; c = n) {
		n = c->next;
		free(c);
	}
	free(q->cur);
	munmap(q->mem, q->map_len);
	if (q->spill_fd >= 0)
		close(q->spill_fd);
	free(q->rbuf);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->avail);
	pthread_cond_destroy(&q->space);
	free(q);
}
