// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The ring buffer's records, one handler per concern. See ringev.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include "attachctx.h"
#include "cxxattach.h"
#include "kinds.h"
#include "liverec.h"
#include "procfs.h"
#include "log.h"
#include "ringev.h"
#include "goelf.h"
#include "gowalk.h"
#include "addrnames.h"
#include "switchfam.h"

/* The largest payload a record with a stack has (before its ref): a span_begin's. */
#define STACK_REC_COPY_MAX 96
_Static_assert(sizeof(struct coro_ev_span) <= STACK_REC_COPY_MAX, "a span_begin fits");

static void ringev_split_batch(void *ctx, const u8 *recs, size_t len, const struct batch_split *sp);

void ringev_init(struct ringev *ev)
{
	memset(ev, 0, sizeof(*ev));
	hmap_init(&ev->seen_threads);
	hmap_init(&ev->announced);
	hmap_init(&ev->rescan_pids);
	hmap_init(&ev->cxx_named);
	hmap_init(&ev->batch.cur);
	ev->batch.out = ringev_split_batch;
	ev->batch.out_ctx = ev;
	hmap_init(&ev->plans_said);
}

void ringev_global_plans_for(struct ringev *ev, u32 pid, u64 ts)
{
	const struct attach_plans *found[64];
	char path[64], line[4096 + 128];
	u32 n = 0, fams = 0, drop;
	FILE *f;

	if (!ev->global_plans || !ev->global_plans->len)
		return;
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f) && n < 64) {
		unsigned long start, end, ino;
		unsigned maj, min;
		char perms[8];
		const struct attach_plans *p;
		u64 dev, key;

		if (sscanf(line, "%lx-%lx %7s %*x %x:%x %lu", &start, &end, perms, &maj, &min,
			   &ino) < 6 || perms[2] != 'x' || !ino)
			continue;
		dev = makedev(maj, min);
		p = hmap_get((struct hmap *)ev->global_plans, dev, ino);
		/* (pid, object): the object's dev and inode folded into one key. */
		key = ino ^ (dev << 40) ^ (dev >> 24);
		if (!p || hmap_get(&ev->plans_said, pid, key))
			continue;
		hmap_put(&ev->plans_said, pid, key, (void *)1);
		found[n++] = p;
		for (size_t i = 0; i < p->n; i++)
			fams |= 1u << (p->v[i].family & 31);
	}
	if (f)
		fclose(f);
	/* A runtime that leaves families out (QEMU: ucontext), as the BPF side does (ctx_wanted). */
	drop = switchfam_excluded(fams);
	for (u32 i = 0; i < n; i++) {
		for (size_t j = 0; j < found[i]->n; j++) {
			struct attach_found r = found[i]->v[j];

			if (drop & (1u << (r.family & 31)))
				continue;
			r.pid = pid;
			r.ts = ts;
			liverec_found(ev->sink, &r);
		}
	}
}

void ringev_free(struct ringev *ev)
{
	size_t it = 0;
	void *v;

	hmap_free(&ev->seen_threads);
	hmap_free(&ev->rescan_pids);
	hmap_free(&ev->cxx_named);
	hmap_free(&ev->plans_said);
	while (hmap_next(&ev->announced, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&ev->announced);
	batch_forget_all(&ev->batch);
	for (size_t i = 0; i < ev->nwalks; i++)
		free(ev->walks[i]);
	free(ev->walks);
	free(ev->nwalk);
}

void ringev_hold_walk(struct ringev *ev, struct coro_rec_go_g *gs, u32 n)
{
	if (!n) {
		free(gs);
		return;
	}
	ev->walks = xrealloc(ev->walks, (ev->nwalks + 1) * sizeof(*ev->walks));
	ev->nwalk = xrealloc(ev->nwalk, (ev->nwalks + 1) * sizeof(*ev->nwalk));
	if (!ev->nwalks || gs->hdr.ts < ev->walks_ts)
		ev->walks_ts = gs->hdr.ts;
	ev->walks[ev->nwalks] = gs;
	ev->nwalk[ev->nwalks++] = n;
}

void ringev_release_walks(struct ringev *ev)
{
	/* In the order they were made (a process walked again comes after). */
	for (size_t i = 0; i < ev->nwalks; i++) {
		gowalk_emit(ev->walks[i], ev->nwalk[i], ev->stk, ev->sink->emit, ev->sink->ctx);
		free(ev->walks[i]);
	}
	ev->nwalks = 0;
}

struct target *ringev_find_target(const struct ringev *ev, u32 pid)
{
	for (size_t i = 0; i < ev->ntargets; i++)
		if (ev->targets[i].pid == pid)
			return &ev->targets[i];
	return NULL;
}

void ringev_emit_held(struct ringev *ev, struct target *t, u64 ts)
{
	t->hold_switch_recs = false;
	for (size_t i = 0; i < t->nheld; i++) {
		/* Said now, in the order of the records around it. */
		t->held[i].ts = ts;
		liverec_found(ev->sink, &t->held[i]);
		attach_found_release(&t->held[i]);
	}
	free(t->held);
	t->held = NULL;
	t->nheld = 0;
}

/* A launched script's image makes its first context switch: the program, not a shell between. */
static void on_context_record(struct ringev *ev, const struct coro_event_hdr *h)
{
	struct target *t = ringev_find_target(ev, h->pid);

	if (t && t->hold_switch_recs)
		ringev_emit_held(ev, t, h->ts);
}

/* Exec or dlopen: new objects may carry probes; the capture looks after this batch of records. */
static void on_objects_changed(struct ringev *ev, const struct coro_event_hdr *h)
{
	struct target *t = ringev_find_target(ev, h->pid);

	if (t) {
		if (!t->exited)
			t->rescan = true;
		if (!t->exited && h->kind == CORO_EV_EXEC)
			t->execed = true;
	} else if (ev->opts->system_wide || (ev->opts->follow && hmap_get(&ev->announced, h->pid, 0))) {
		hmap_put(&ev->rescan_pids, h->pid, 0, (void *)1);
	}
}

/*
 * -a sees every exec and dlopen on the machine. Once the rescan is asked
 * for, those of a process that never fired a probe say nothing about any
 * coroutine: they stay out of the trace (a process is in it from its first
 * probe, announced by its process record).
 */
static bool untraced_elsewhere(struct ringev *ev, const struct coro_event_hdr *h)
{
	return ev->opts->system_wide && !ringev_find_target(ev, h->pid) &&
	       !hmap_get(&ev->announced, h->pid, 0);
}

/* Admitted by the BPF side: say what it is, before its first event. */
static void on_process_new(struct ringev *ev, const struct coro_ev_proc *e)
{
	const struct coro_event_hdr *h = &e->hdr;
	struct target t = {.pid = h->pid, .start_ts = h->ts, .forked = ev->opts->follow,
			   .traced_from = ev->session_start};
	char path[64];
	u32 tgid;
	ssize_t n;

	proc_read_status(h->pid, &tgid, &t.ppid);
	memcpy(t.comm, e->comm, sizeof(t.comm));
	t.comm[sizeof(t.comm) - 1] = 0;
	snprintf(path, sizeof(path), "/proc/%u/exe", h->pid);
	n = readlink(path, t.exe, sizeof(t.exe) - 1);
	t.exe[n > 0 ? n : 0] = 0;
	if (t.forked) {
		/* At the fork: the parent is in the record; the image is the parent's. */
		const struct target *pt = ringev_find_target(ev, (u32)e->exit_code);
		const char *pexe = pt ? pt->exe : hmap_get(&ev->announced, (u32)e->exit_code, 0);

		t.ppid = (u32)e->exit_code;
		if (n <= 0 && pexe)
			snprintf(t.exe, sizeof(t.exe), "%s", pexe);
	}
	hmap_put(&ev->announced, h->pid, 0, xstrdup(t.exe));
	liverec_process(ev->sink, &t);
	if (ev->opts->system_wide)
		ringev_global_plans_for(ev, h->pid, h->ts);
}

static void on_process(struct ringev *ev, const struct coro_event_hdr *h)
{
	if (h->kind == CORO_EV_PROC_NEW && !hmap_get(&ev->announced, h->pid, 0))
		on_process_new(ev, (const struct coro_ev_proc *)h);
	if (h->kind == CORO_EV_PROC_GONE) {
		free(hmap_del(&ev->announced, h->pid, 0));
		hmap_del_k1(&ev->plans_said, h->pid, NULL);
	}
}

/*
 * --stacks: exec and exit end what the resolver knows of a process's
 * addresses; a new image, a new library, a new process: its mappings, read
 * while it is alive, only of processes traced (-a sees every exec on the
 * machine). The snapshot's records go straight into the sink.
 */
static void on_stacks(struct ringev *ev, const struct coro_event_hdr *h)
{
	if (h->kind == CORO_EV_EXEC)
		stack_resolver_forget(ev->stk, h->pid);
	if (h->kind == CORO_EV_PROC_GONE)
		stack_resolver_ended(ev->stk, h->pid);
	if (h->kind == CORO_EV_PROC_NEW ||
	    ((h->kind == CORO_EV_EXEC || h->kind == CORO_EV_LIBLOAD) &&
	     (ringev_find_target(ev, h->pid) || hmap_get(&ev->announced, h->pid, 0))))
		stack_resolver_snapshot(ev->stk, h->pid, h->ts, ev->sink->emit, ev->sink->ctx);
}

/* `known`: the name the BPF side read (process records), for a thread already gone from /proc. */
static void on_first_thread(struct ringev *ev, const struct coro_event_hdr *h)
{
	/* A batch is one thread's records: the previous lookup answers most without a hash. */
	if (ev->seen_any && h->pid == ev->seen_pid && h->tid == ev->seen_tid)
		return;
	ev->seen_pid = h->pid;
	ev->seen_tid = h->tid;
	ev->seen_any = true;
	if (hmap_get(&ev->seen_threads, h->pid, h->tid))
		return;
	hmap_put(&ev->seen_threads, h->pid, h->tid, (void *)1);
	liverec_thread(ev->sink, h->pid, h->tid, h->ts,
		       h->kind == CORO_EV_PROC_NEW || h->kind == CORO_EV_EXEC ||
			       h->kind == CORO_EV_PROC_GONE
			       ? ((const struct coro_ev_proc *)h)->comm
			       : NULL);
}

/*
 * The stack leaves as a capture id (its definition written into the sink
 * by the resolver, before this first use); the registers and stack bytes
 * of a dwarf sample stay behind.
 */
static void forward_with_stack(struct ringev *ev, const struct coro_event_hdr *h)
{
	size_t base = coro_stack_base_size(h->kind);
	u64 buf[(STACK_REC_COPY_MAX + sizeof(struct coro_stack_ref)) / 8];
	struct coro_event_hdr *out = (void *)buf;
	struct coro_stack_ref *ref = (void *)((char *)buf + base);
	u32 id = stack_resolve(ev->stk, h, ev->sink->emit, ev->sink->ctx);

	memcpy(buf, h, base);
	out->size = (u16)(base + sizeof(*ref));
	ref->id = id;
	ref->how = id ? CORO_STACK_CAPTURE_ID : CORO_STACK_NONE;
	record_sink_emit(ev->sink, out);
}

/*
 * QEMU: a coroutine's entry function, an address only the live process's
 * mappings name; it goes on as the coroutine's name record, which the
 * capture keeps.
 */
static int on_ctx_entry(struct ringev *ev, const struct coro_ev_ctx_entry *e)
{
	struct coro_ev_name n = {.hdr = e->hdr, .id = e->id};
	const struct target *t = ringev_find_target(ev, e->hdr.pid);

	n.hdr.size = sizeof(n);
	n.hdr.kind = CORO_EV_NAME;
	addrname_at(e->hdr.pid, e->addr, n.name, sizeof(n.name));
	/*
	 * The process is gone (a short run: qemu-img, qemu-io): named in the
	 * executable that holds its context functions, where the process had
	 * it (its code's start, which the BPF side read with the address).
	 */
	for (size_t i = 0; t && !strncmp(n.name, "0x", 2) && i < t->nswobjs; i++)
		if (addrname_in_exe(t->swobjs[i].path, t->swobjs[i].shown, e->start_code,
					  e->addr, n.name, sizeof(n.name)))
			break;
	if (strlen(n.name) == sizeof(n.name) - 1)
		n.hdr.flags |= CORO_EVF_STR_TRUNCATED;
	return ringev_record(ev, &n, sizeof(n));
}

/*
 * Go: the function at addr once the process is gone (a goroutine made as
 * it exited), from the binary kept: the target's Go objects, else (-a,
 * --follow) the program it ran when it was admitted; a PIE's address first
 * less where its goroutines' functions were while it lived (*bias).
 */
static bool go_name_gone(struct ringev *ev, u32 pid, u64 addr, char *name, size_t len,
			 struct goelf_wrapper *w, u64 *bias)
{
	const struct target *t = ringev_find_target(ev, pid);
	const char *exe = t ? NULL : hmap_get(&ev->announced, pid, 0);
	u64 b = 0, biases[2] = {0, 0};
	int nb = 0;

	if (addrname_bias_of(pid, &b))
		biases[nb++] = b;
	biases[nb++] = 0;
	for (int k = 0; k < nb; k++) {
		*bias = biases[k];
		for (size_t i = 0; t && i < t->nswobjs; i++)
			if ((t->swobjs[i].families & (1u << CORO_FAM_GO)) &&
			    goelf_func_at_path(t->swobjs[i].path, addr - biases[k], name, len, w))
				return true;
		if (exe && *exe && goelf_func_at_path(exe, addr - biases[k], name, len, w))
			return true;
	}
	return false;
}

/* Go: the function at addr in process pid, live or gone; w: as goelf_goroutine_start's. */
static void go_name(struct ringev *ev, u32 pid, u64 addr, char *name, size_t len,
		    struct goelf_wrapper *w)
{
	u64 bias;

	addrname_goroutine(pid, addr, name, len, w);
	if (strncmp(name, "0x", 2) || !go_name_gone(ev, pid, addr, name, len, w, &bias))
		return;
	/* The wrapper's code where the process had it. */
	w->entry += bias;
	w->end += bias;
}

/* A word of a new goroutine's closure, from the BPF side's copy of it (a goelf_read_fn). */
static bool entry_word(void *ctx, uint64_t addr, uint64_t *word)
{
	const struct coro_ev_go_entry *e = ctx;

	for (int i = 0; i < CORO_GO_CTXT_WORDS; i++) {
		if (addr == e->ctxt + 8 * (u64)(i + 1)) {
			*word = e->ctxt_word[i];
			return true;
		}
		if (e->ctxt_word[i] && addr == e->ctxt_word[i] && e->ctxt_deref[i]) {
			*word = e->ctxt_deref[i];
			return true;
		}
	}
	return false;
}

/*
 * Go: a new goroutine's function, named from the process's mappings as
 * QEMU's entries are. A `go f(x)` statement's wrapper that calls f through
 * its closure (f a function value, or a closure called with arguments) is
 * named after f, found through the closure as it was when the goroutine was
 * made: as Go's traceback names the goroutine.
 */
static int on_go_entry(struct ringev *ev, const struct coro_ev_go_entry *e)
{
	struct coro_ev_name n = {.hdr = e->hdr, .id = e->goid};
	struct goelf_wrapper w, none;
	char f_name[sizeof(n.name)];
	u64 f;

	n.hdr.size = sizeof(n);
	n.hdr.kind = CORO_EV_NAME;
	/* The thread's story is the status record's: one record of it is enough. */
	n.hdr.lost_before = 0;
	go_name(ev, e->hdr.pid, e->startpc, n.name, sizeof(n.name), &w);
	if (w.n && (f = goelf_wrapper_target(&w, e->ctxt, entry_word, (void *)e))) {
		go_name(ev, e->hdr.pid, f, f_name, sizeof(f_name), &none);
		/* f's entry, or the closure was not what the wrapper's code says. */
		if (strncmp(f_name, "0x", 2) && !strstr(f_name, "+0x"))
			memcpy(n.name, f_name, sizeof(n.name));
	}
	if (strlen(n.name) == sizeof(n.name) - 1)
		n.hdr.flags |= CORO_EVF_STR_TRUNCATED;
	return ringev_record(ev, &n, sizeof(n));
}

/* The frame's coroutine was destroyed: GCC's destroy clone runs the body once more. */
#define CXXNAME_DESTROYED (1ull << 40)

/*
 * A record made here from one the BPF side sent (h: a copy of its header),
 * carrying a string this run's tables know: its own size and kind, no
 * losses before it (its source carries those), the string kept or cut.
 */
static void emit_with_string(struct ringev *ev, struct coro_event_hdr *h, size_t size, u8 kind,
			     char *dst, size_t dstlen, const char *str)
{
	h->size = (u16)size;
	h->kind = kind;
	h->flags &= (u8)~(CORO_EVF_STR_TRUNCATED | CORO_EVF_STR_FAULT);
	h->lost_before = 0;
	snprintf(dst, dstlen, "%s", str);
	if (strlen(str) >= dstlen)
		h->flags |= CORO_EVF_STR_TRUNCATED;
	record_sink_emit(ev->sink, h);
}

/*
 * C++20: a frame gets its coroutine's name, which only this run's table
 * knows (cxxattach.h), when it is made and when a body is first seen
 * entered for it; the record goes on first, the name after it.
 */
static int on_cxx(struct ringev *ev, const struct coro_ev_cxx *e)
{
	u64 had = (u64)(uintptr_t)hmap_get(&ev->cxx_named, e->hdr.pid, e->frame);
	u64 want = (u64)e->fn + 1;
	/* Its function's name whole, up to CORO_NAME_MAX - 1 bytes (coro_name_record()). */
	union {
		struct coro_ev_name n;
		u64 room[CORO_NAME_REC_MAX / 8];
	} r = {.n = {.hdr = e->hdr, .id = e->frame}};
	const char *name = cxxattach_name(e->fn);

	record_sink_emit(ev->sink, &e->hdr);
	if (e->op == CORO_CXX_DESTROY) {
		if (had)
			hmap_put(&ev->cxx_named, e->hdr.pid, e->frame,
				 (void *)(uintptr_t)(had | CXXNAME_DESTROYED));
		return 0;
	}
	if (!name || !e->frame || (e->op != CORO_CXX_CREATE && e->op != CORO_CXX_BODY) ||
	    (e->op == CORO_CXX_BODY && (had & ~CXXNAME_DESTROYED) == want))
		return 0;
	hmap_put(&ev->cxx_named, e->hdr.pid, e->frame, (void *)(uintptr_t)want);
	r.n.hdr.flags &= (u8)~(CORO_EVF_STR_TRUNCATED | CORO_EVF_STR_FAULT);
	r.n.hdr.lost_before = 0;
	coro_name_record(&r.n, name);
	record_sink_emit(ev->sink, &r.n.hdr);
	return 0;
}

/*
 * C++20: an await_suspend called gets the awaiter's type the attach found
 * for its call site, in a record just before it (the same ts: the reorder
 * keeps them in order), which cxxmap.c holds for the frame's next switch
 * out.
 */
static void on_cxx_await(struct ringev *ev, const struct coro_ev_cxx *e)
{
	struct coro_ev_cxx_awaiter a = {.hdr = e->hdr, .frame = e->frame};
	const char *name = cxxattach_name(e->fn);

	if (name && e->frame && e->word)
		emit_with_string(ev, &a.hdr, sizeof(a), CORO_EV_CXX_AWAITER, a.name, sizeof(a.name),
				 name);
	record_sink_emit(ev->sink, &e->hdr);
}

int ringev_record(void *ctx, void *data, size_t size)
{
	struct ringev *ev = ctx;
	const struct coro_event_hdr *h = data;
	const char *why = "kind not born in BPF";
	union {
		struct coro_event_hdr hdr;
		struct coro_ev_announce a;
		struct coro_ev_announce_done d;
	} list;

	if (ev->nwalks && size >= sizeof(*h) && h->ts >= ev->walks_ts)
		ringev_release_walks(ev);
	if (h->kind == CORO_EV_CTX_ENTRY && size == sizeof(struct coro_ev_ctx_entry) &&
	    h->size == size)
		return on_ctx_entry(ev, data);
	if (h->kind == CORO_EV_GO_ENTRY && size == sizeof(struct coro_ev_go_entry) &&
	    h->size == size)
		return on_go_entry(ev, data);
	if (h->kind == CORO_EV_BATCH && size >= sizeof(*h))
		return batch_split(&ev->batch, data, size);
	if (!coro_record_valid(h, size, &why) || h->size != size || h->kind > CORO_EV_BPF_MAX) {
		ev->ustats[CORO_USTAT_BAD_RECORDS]++;
		log_debug("dropping a malformed ring buffer record (%zu bytes): %s", size, why);
		return 0;
	}
	ev->ustats[CORO_USTAT_RECORDS]++;
	if ((h->kind == CORO_EV_ANNOUNCE || h->kind == CORO_EV_ANNOUNCE_DONE) &&
	    size <= sizeof(list)) {
		/*
		 * A list is about the scheduler's coroutines, not its thread: the thread's view
		 * learns nothing from it (its cur may be older than the thread's records not yet
		 * copied out), as when read back from JSONL. A copy: the ring is read-only.
		 */
		memcpy(&list, data, size);
		list.hdr.flags |= CORO_EVF_CUR_UNSAID;
		data = &list;
		h = &list.hdr;
		if (h->kind == CORO_EV_ANNOUNCE_DONE && ev->announce)
			announce_answered(ev->announce, h->pid);
	}
	if (ev->batch.cur.len)
		batch_note(&ev->batch, h);
	/* A probe's or an interpreter's switch (interp.bpf.h sends the probe ABI's) counts too. */
	if (h->kind == CORO_EV_CTX_SWITCH || h->kind == CORO_EV_GO_STATUS || h->kind == CORO_EV_SWITCH)
		ev->ctx_switches++;
	if (h->kind == CORO_EV_CTX_CREATE || h->kind == CORO_EV_CTX_SWITCH ||
	    h->kind == CORO_EV_CTX_EXIT || h->kind == CORO_EV_CXX || h->kind == CORO_EV_SWITCH ||
	    h->kind == CORO_EV_CREATE)
		on_context_record(ev, h);
	if (h->kind == CORO_EV_CXX && ((const struct coro_ev_cxx *)h)->op == CORO_CXX_BODY)
		ev->ctx_switches++;
	if (h->kind == CORO_EV_LIBLOAD || h->kind == CORO_EV_EXEC) {
		on_objects_changed(ev, h);
		if (untraced_elsewhere(ev, h))
			return 0;
	}
	on_process(ev, h);
	if (ev->stk)
		on_stacks(ev, h);
	on_first_thread(ev, h);
	if (ev->stk && coro_stack_ref_of(h))
		forward_with_stack(ev, h);
	else if (h->kind == CORO_EV_CXX && h->size >= sizeof(struct coro_ev_cxx))
		on_cxx(ev, data);
	else if (h->kind == CORO_EV_CXX_AWAIT && h->size >= sizeof(struct coro_ev_cxx))
		on_cxx_await(ev, data);
	else
		record_sink_emit(ev->sink, h);
	return 0;
}

/*
 * A batch's records (batch.c): creates, readies, switches and exits of one thread, made whole
 * there, so none of the checks ringev_record() makes of what the ring holds can fail. What the
 * ring's records of the same kinds would get: counted, the held records of a launched script let
 * go at its first switch or create, the thread announced, then the sink. Without walks or held
 * records to let go, in one piece.
 */
static void ringev_split_batch(void *ctx, const u8 *recs, size_t len, const struct batch_split *sp)
{
	struct ringev *ev = ctx;
	const struct coro_event_hdr *h = (const void *)recs;
	const struct target *t = ringev_find_target(ev, h->pid);

	ev->ustats[CORO_USTAT_RECORDS] += sp->n;
	ev->ctx_switches += sp->switches;
	if (!ev->nwalks && !(t && t->hold_switch_recs)) {
		on_first_thread(ev, h);
		record_sink_emit_many(ev->sink, recs, len, sp->newest_ts);
		return;
	}
	for (const u8 *p = recs, *end = recs + len; p < end; p += h->size) {
		h = (const void *)p;
		if (ev->nwalks && h->ts >= ev->walks_ts)
			ringev_release_walks(ev);
		if (h->kind == CORO_EV_SWITCH || h->kind == CORO_EV_CREATE)
			on_context_record(ev, h);
		on_first_thread(ev, h);
		record_sink_emit(ev->sink, h);
	}
}

int ringev_ring_record(void *ctx, void *data, size_t size)
{
	struct ringev *ev = ctx;
	int err = ringev_record(ctx, data, size);
	u32 events;

	if (err < 0 || !ev->budget)
		return err;
	events = batch_events_in(data, size);
	if (events >= ev->budget) {
		ev->budget = 0;
		return RINGEV_BUDGET_SPENT;
	}
	ev->budget -= events;
	return err;
}
