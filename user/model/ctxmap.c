// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The switch-function path's translation from raw context values to
 * coroutines (see ctxmap.h).
 */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctxmap.h"
#include "kinds.h"
#include "raw.h"

_Static_assert(sizeof(((struct ctxmap *)0)->buf) >= CORO_NAME_REC_MAX, "a long name record fits");

struct range {
	u64 lo, hi, id;
};

struct ctx_proc {
	bool switch_path; /* switch-function uprobes attached (a CORO_REC_SWITCH record) */
	u32 said;	  /* 1 << family: a CORO_REC_SWITCH record of its own came */
	bool raw;	  /* raw context records seen: its records need translating */
	bool launched;
	u32 families; /* 1 << enum coro_ctx_family */
	void *ranges; /* tsearch tree of struct range, disjoint */
};

struct ctx_thread {
	bool started; /* a record of it was seen */
	bool main_named; /* greenlet: the raw value of its main context is known */
	bool main_said;	 /* its main context was named `main` */
	bool custom_main; /* --switch uprobe: the value its main context is left by is known */
	bool known;   /* cur_id is a fact */
	bool exited;  /* cur_id exited and has not switched out yet */
	u64 cur_raw, cur_id;
};

void ctxmap_init(struct ctxmap *x)
{
	memset(x, 0, sizeof(*x));
	hmap_init(&x->procs);
	hmap_init(&x->threads);
	hmap_init(&x->alias);
	hmap_init(&x->handles);
	hmap_init(&x->created);
}

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->hi <= y->lo)
		return -1;
	if (y->hi <= x->lo)
		return 1;
	return 0; /* overlapping: "equal" */
}

static bool range_find(struct ctx_proc *p, u64 addr, u64 *id)
{
	struct range key = { addr, addr + 1, 0 };
	struct range **r = tfind(&key, &p->ranges, range_cmp);

	if (!r)
		return false;
	*id = (*r)->id;
	return true;
}

static struct ctx_proc *proc_get(struct ctxmap *x, u32 pid)
{
	struct ctx_proc *p = hmap_get(&x->procs, pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		hmap_put(&x->procs, pid, 0, p);
	}
	return p;
}

static struct ctx_thread *thread_get(struct ctxmap *x, u32 pid, u32 tid)
{
	struct ctx_thread *t = hmap_get(&x->threads, pid, tid);

	if (!t) {
		t = xcalloc(1, sizeof(*t));
		hmap_put(&x->threads, pid, tid, t);
	}
	return t;
}

/* Everything known of a process's contexts goes (it ended, or exec replaced its program). */
static void forget_process(struct ctxmap *x, u32 pid, bool keep_proc)
{
	struct hmap *maps[4] = { &x->threads, &x->alias, &x->handles, &x->created };
	struct ctx_proc *p = hmap_get(&x->procs, pid, 0);

	for (int i = 0; i < 4; i++)
		hmap_del_k1(maps[i], pid, i == 0 ? free : NULL);
	if (!p)
		return;
	tdestroy(p->ranges, free);
	p->ranges = NULL;
	if (!keep_proc) {
		hmap_del(&x->procs, pid, 0);
		free(p);
	}
}

/* What a raw value names in this process, without consuming anything. */
static u64 resolve(struct ctxmap *x, struct ctx_proc *p, u32 pid, u64 raw)
{
	u64 id;
	void *v;

	if (!raw)
		return 0;
	if ((p->families & (1u << CORO_FAM_FCONTEXT)) && range_find(p, raw, &id))
		return id;
	if ((v = hmap_get(&x->alias, pid, raw)))
		return (u64)(uintptr_t)v;
	if ((v = hmap_get(&x->handles, pid, raw)))
		return (u64)(uintptr_t)v;
	return raw;
}

static void put_id(struct hmap *m, u32 pid, u64 raw, u64 id)
{
	/* hmap values must be non-NULL: ids are nonzero. */
	if (raw && id)
		hmap_put(m, pid, raw, (void *)(uintptr_t)id);
}

static u32 rec_family(const struct coro_event_hdr *rec)
{
	switch (rec->kind) {
	case CORO_EV_CTX_CREATE: return ((const struct coro_ev_ctx_create *)rec)->family;
	case CORO_EV_CTX_SWITCH: return ((const struct coro_ev_ctx_switch *)rec)->family;
	default: return ((const struct coro_ev_ctx_exit *)rec)->family;
	}
}

/*
 * -a: a process traced through a family attached for every process (a
 * switch_path record of pid 0) whose own record did not come (it had
 * exited before corobpf could read its mappings: ringev.c): that record,
 * for it, before its first event of the family, so that it says how it is
 * traced. The same in a replay: the capture holds the records it comes from.
 */
static void say_every(struct ctxmap *x, struct ctx_proc *p, u32 fam,
		      const struct coro_event_hdr *rec, ctxmap_emit_fn emit, void *ctx)
{
	if (!rec->pid || (p->said & (1u << fam)))
		return;
	p->said |= 1u << fam;
	for (const struct every *e = x->every; e; e = e->next) {
		struct coro_event_hdr *h;

		if (e->family != fam)
			continue;
		h = xmalloc(e->rec[0].size);
		memcpy(h, e->rec, e->rec[0].size);
		h->pid = h->tid = rec->pid;
		h->ts = rec->ts;
		p->switch_path = true;
		emit(ctx, h);
		free(h);
	}
}

/* A copy of rec in x->buf with hdr.cur in coroutine terms. */
static struct coro_event_hdr *translate_cur(struct ctxmap *x, struct ctx_proc *p,
					    struct ctx_thread *t, const struct coro_event_hdr *rec)
{
	struct coro_event_hdr *h = &x->buf.hdr;
	/* Longer records (a newer writer, or damage) keep what this version reads. */
	size_t n = MIN((size_t)rec->size, sizeof(x->buf.bytes) & ~(size_t)7);

	memcpy(x->buf.bytes, rec, n);
	h->size = (u16)n;
	if (t->known && h->cur == t->cur_raw) {
		h->cur = t->cur_id;
		h->flags &= (u8)~CORO_EVF_CUR_UNKNOWN;
	} else if (!(h->flags & CORO_EVF_CUR_UNKNOWN)) {
		/* The BPF side kept count through a hole: what it says runs here now. */
		h->cur = resolve(x, p, h->pid, h->cur);
		t->known = true;
		t->exited = false;
		t->cur_raw = rec->cur;
		t->cur_id = h->cur;
	}
	return h;
}

static void emit_exit(struct ctxmap *x, const struct coro_event_hdr *like, u64 cur, u64 id,
		      s64 status, ctxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_exit *e = (void *)x->extra.bytes;

	memset(e, 0, sizeof(*e));
	e->hdr = *like;
	e->hdr.size = sizeof(*e);
	e->hdr.kind = CORO_EV_EXIT;
	e->hdr.lost_before = 0;
	e->hdr.cur = cur;
	e->id = id;
	e->status = status;
	emit(ctx, &e->hdr);
}

/*
 * A thread's main context, `id`, named `main` (as every family's is), once,
 * in a record like `like`.
 */
static void name_main(struct ctxmap *x, struct ctx_thread *t, const struct coro_event_hdr *like,
		      u64 id, ctxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_name *n = (void *)x->extra.bytes;

	if (!id || t->main_said)
		return;
	t->main_said = true;
	memset(n, 0, sizeof(*n));
	n->hdr = *like;
	n->hdr.size = sizeof(*n);
	n->hdr.kind = CORO_EV_NAME;
	n->hdr.flags &= (u8)CORO_EVF_CUR_UNKNOWN;
	n->hdr.lost_before = 0;
	n->id = id;
	snprintf(n->name, sizeof(n->name), "main");
	emit(ctx, &n->hdr);
}

/* A launched thread starts in its main context: say so before its first event. */
static void start_thread(struct ctxmap *x, struct ctx_proc *p, struct ctx_thread *t,
			 const struct coro_event_hdr *rec, ctxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_switch *s = (void *)x->extra.bytes;
	struct coro_ev_name *n = (void *)x->extra.bytes;
	u64 main_id = CTXMAP_MAIN_ID(rec->tid);

	memset(s, 0, sizeof(*s));
	s->hdr = *rec;
	s->hdr.size = sizeof(*s);
	s->hdr.kind = CORO_EV_SWITCH;
	s->hdr.flags = 0;
	s->hdr.lost_before = 0;
	s->hdr.cur = 0;
	s->to = main_id;
	emit(ctx, &s->hdr);

	memset(n, 0, sizeof(*n));
	n->hdr = *rec;
	n->hdr.size = sizeof(*n);
	n->hdr.kind = CORO_EV_NAME;
	n->hdr.flags = 0;
	n->hdr.lost_before = 0;
	n->hdr.cur = main_id;
	n->id = main_id;
	snprintf(n->name, sizeof(n->name), "main");
	emit(ctx, &n->hdr);
	t->main_said = true;

	t->known = true;
	t->exited = false;
	t->cur_raw = 0;
	t->cur_id = main_id;
}

static void apply_switch(struct ctxmap *x, struct ctx_proc *p, struct ctx_thread *t,
			 const struct coro_ev_ctx_switch *e, ctxmap_emit_fn emit, void *ctx)
{
	struct coro_event_hdr *h = translate_cur(x, p, t, &e->hdr);
	const struct coro_stack_ref *ref = coro_stack_ref_of(&e->hdr);
	/* Its stack, if it has one, travels with it: where `from` was left. */
	struct {
		struct coro_ev_switch s;
		struct coro_stack_ref ref;
	} sr = {0};
	struct coro_ev_switch *s = &sr.s;
	bool fcontext = e->family == CORO_FAM_FCONTEXT;
	u64 from, to, id;
	void *v;

	if (e->flags & CORO_CTXF_SAVE) {
		/*
		 * getcontext: no switch. A later switch to this address goes back
		 * to what runs now, a jump within it or a return to it (error
		 * recovery); until then makecontext may make it a coroutine.
		 */
		if (t->known && t->cur_id) {
			if (e->from == t->cur_id)
				hmap_del(&x->alias, e->hdr.pid, e->from);
			else
				put_id(&x->alias, e->hdr.pid, e->from, t->cur_id);
		}
		return;
	}
	if (e->flags & CORO_CTXF_MAIN) {
		/*
		 * No switch: the thread's main context (greenlet's main greenlet,
		 * which a switch to is about to resume). Launched, the thread
		 * started in it: its main context's id from now on.
		 */
		if (p->launched && !t->main_named) {
			put_id(&x->alias, e->hdr.pid, e->from, CTXMAP_MAIN_ID(e->hdr.tid));
			t->main_named = true;
		} else if (!p->launched) {
			name_main(x, t, h, resolve(x, p, e->hdr.pid, e->from), emit, ctx);
		}
		return;
	}
	if (e->flags & CORO_CTXF_FROM_CURRENT) {
		from = t->known ? t->cur_id : 0;
	} else if (fcontext) {
		/* Its stack says who it is; else the thread's current context, else new. */
		if (range_find(p, e->from, &id))
			from = id;
		else if (t->known)
			from = t->cur_id;
		else
			from = resolve(x, p, e->hdr.pid, e->from);
		if (!range_find(p, e->from, &id))
			put_id(&x->handles, e->hdr.pid, e->from, from);
	} else if (e->family == CORO_FAM_CUSTOM) {
		/*
		 * --switch uprobe:...:from=ARG: the value named is honoured. One
		 * that is not what runs here is the model's switch-from mismatch,
		 * counted and said (docs/switch.md), never replaced by what runs.
		 * Only the first value a launched thread's main context is left by
		 * is taken to name that context from then on.
		 */
		from = resolve(x, p, e->hdr.pid, e->from);
		if (t->known && !t->custom_main && t->cur_id == CTXMAP_MAIN_ID(e->hdr.tid) &&
		    from == e->from && from != t->cur_id) {
			put_id(&x->alias, e->hdr.pid, e->from, t->cur_id);
			from = t->cur_id;
		}
		t->custom_main = true;
	} else if (t->known && t->cur_id) {
		/* swapcontext saves the running context into `from`, whatever its address. */
		from = t->cur_id;
		if (e->from != from)
			put_id(&x->alias, e->hdr.pid, e->from, from);
	} else {
		from = resolve(x, p, e->hdr.pid, e->from);
	}

	if (fcontext) {
		if (range_find(p, e->to, &id)) {
			to = id;
		} else if ((v = hmap_del(&x->handles, e->hdr.pid, e->to))) {
			to = (u64)(uintptr_t)v;
		} else {
			to = e->to; /* made before the trace: known from now on by this value */
		}
	} else {
		to = resolve(x, p, e->hdr.pid, e->to);
		if (e->family == CORO_FAM_GREENLET && to == e->to && p->launched && !t->main_named &&
		    !hmap_get(&x->created, e->hdr.pid, e->to)) {
			/*
			 * A greenlet never made by g_initialstub is the thread's main
			 * greenlet, which the thread started in: its main context.
			 */
			to = CTXMAP_MAIN_ID(e->hdr.tid);
			put_id(&x->alias, e->hdr.pid, e->to, to);
			t->main_named = true;
		}
	}
	if (from && from == to && !(e->flags & CORO_CTXF_FROM_DONE)) {
		/*
		 * A context set into itself (setcontext to what getcontext saved
		 * while it ran): a jump, not a switch.
		 */
		t->cur_raw = e->to;
		return;
	}
	if ((e->flags & CORO_CTXF_FROM_DONE) && from && !(t->exited && t->cur_id == from)) {
		/* QEMU's terminate: `from` returned, and this is its last switch out. */
		emit_exit(x, h, from, from, 0, emit, ctx);
		t->known = true;
		t->cur_id = from;
		t->exited = true;
	}

	/* Left from the thread's own stack: its main context, named before it is first seen. */
	if (e->flags & CORO_CTXF_FROM_MAIN)
		name_main(x, t, h, from, emit, ctx);
	s->hdr = *h;
	s->hdr.size = ref ? sizeof(sr) : sizeof(*s);
	s->hdr.kind = CORO_EV_SWITCH;
	if (from) {
		s->hdr.cur = from;
		s->hdr.flags &= (u8)~CORO_EVF_CUR_UNKNOWN;
	}
	s->from = from;
	s->to = to;
	s->reason = t->exited && t->cur_id == from ? CORO_R_DONE : CORO_R_UNKNOWN;
	if (ref)
		sr.ref = *ref;
	emit(ctx, &s->hdr);
	t->known = true;
	t->exited = false;
	t->cur_raw = e->to;
	t->cur_id = to;
}

static void apply_create(struct ctxmap *x, struct ctx_proc *p, struct ctx_thread *t,
			 const struct coro_ev_ctx_create *e, ctxmap_emit_fn emit, void *ctx)
{
	struct coro_event_hdr *h = translate_cur(x, p, t, &e->hdr);
	const struct coro_stack_ref *ref = coro_stack_ref_of(&e->hdr);
	/* Its stack, if it has one, travels with it: the spawn site. */
	struct {
		struct coro_ev_create c;
		struct coro_stack_ref ref;
	} cr = {0};
	struct coro_ev_create *c = &cr.c;
	u64 id = e->id;

	if (e->family == CORO_FAM_FCONTEXT && e->stack_hi > e->stack_lo) {
		struct range *r = xmalloc(sizeof(*r)), **old;

		id = e->stack_hi;
		r->lo = e->stack_lo;
		r->hi = e->stack_hi;
		r->id = id;
		/* Its stack was someone's: that one is gone (its memory freed and reused). */
		while ((old = tfind(r, &p->ranges, range_cmp))) {
			struct range *dead = *old;

			tdelete(dead, &p->ranges, range_cmp);
			x->stacks_reused++;
			emit_exit(x, h, h->cur, dead->id, 0, emit, ctx);
			free(dead);
		}
		tsearch(r, &p->ranges, range_cmp);
	} else {
		/* A main context's old save area made into a coroutine of its own. */
		hmap_del(&x->alias, e->hdr.pid, id);
		if (e->family == CORO_FAM_UCONTEXT && hmap_get(&x->created, e->hdr.pid, id)) {
			/*
			 * makecontext again on a context whose coroutine never
			 * returned: the program abandoned it and reuses its
			 * ucontext_t. It ends here, not as a lost exit.
			 */
			x->contexts_remade++;
			emit_exit(x, h, h->cur, id, 0, emit, ctx);
		}
		if (e->family == CORO_FAM_GREENLET || e->family == CORO_FAM_UCONTEXT)
			put_id(&x->created, e->hdr.pid, id, id);
	}
	c->hdr = *h;
	c->hdr.size = ref ? sizeof(cr) : sizeof(*c);
	c->hdr.kind = CORO_EV_CREATE;
	c->id = id;
	c->parent = h->flags & CORO_EVF_CUR_UNKNOWN ? 0 : h->cur;
	if (ref)
		cr.ref = *ref;
	emit(ctx, &c->hdr);
}

/*
 * What a context exited with. pth_exit's value is a pointer, given as its
 * address; PTH_CANCELED ((void *)-1, a cancelled thread's) is the probe
 * ABI's -ECANCELED.
 */
static s64 exit_status(const struct coro_event_hdr *rec)
{
	const struct coro_ev_ctx_exit_status *e = (const void *)rec;

	if (rec->size < sizeof(*e))
		return 0; /* a capture from before exits carried a value */
	if (e->e.family == CORO_FAM_PTH && e->status == -1)
		return -ECANCELED;
	return e->status;
}

void ctxmap_apply(struct ctxmap *x, const struct coro_event_hdr *rec, ctxmap_emit_fn emit,
		  void *ctx)
{
	struct ctx_proc *p;
	struct ctx_thread *t;
	struct coro_event_hdr *h;

	switch (rec->kind) {
	case CORO_REC_PROCESS:
		p = proc_get(x, rec->pid);
		p->launched = ((const struct coro_rec_process *)rec)->mode == CORO_PROC_LAUNCHED;
		emit(ctx, rec);
		return;
	case CORO_REC_SWITCH: {
		const struct coro_rec_switch *r = (const void *)rec;

		if (!rec->pid && r->family < 32) {
			/* -a: attached for every process: kept for the processes it will trace. */
			struct every *ev = xmalloc(sizeof(*ev) + rec->size);

			ev->family = r->family;
			ev->next = x->every;
			memcpy(ev->rec, rec, rec->size);
			x->every = ev;
		}
		p = proc_get(x, rec->pid);
		p->said |= 1u << (r->family & 31);
		p->switch_path = true;
		p->families |= 1u << r->family;
		if (r->family == CORO_FAM_PTH)
			p->families |= 1u << CORO_FAM_UCONTEXT;
		emit(ctx, rec);
		return;
	}
	case CORO_EV_EXEC:
		emit(ctx, rec);
		if (x->active)
			forget_process(x, rec->pid, true);
		return;
	case CORO_EV_PROC_GONE:
	case CORO_REC_PROC_EXIT:
		emit(ctx, rec);
		if (x->active)
			forget_process(x, rec->pid, false);
		return;
	}
	if (rec->kind <= CORO_EV_BPF_MAX && (rec->flags & (CORO_EVF_RT_ASYNCIO | CORO_EVF_RT_LUA)) &&
	    x->every && rec->pid) {
		/* An interpreter's record (-a): its process says it is traced through it. */
		p = proc_get(x, rec->pid);
		say_every(x, p, rec->flags & CORO_EVF_RT_ASYNCIO ? CORO_FAM_ASYNCIO : CORO_FAM_LUA,
			  rec, emit, ctx);
	}
	if (rec->kind >= CORO_EV_CTX_CREATE && rec->kind <= CORO_EV_CTX_EXIT) {
		/*
		 * Raw context records: this stream needs translating (a trace read
		 * back from JSONL is translated already and has none).
		 */
		if (rec->flags & CORO_EVF_NO_THREAD)
			return;
		p = proc_get(x, rec->pid);
		p->raw = true;
		p->families |= 1u << (rec_family(rec) & 31);
		x->active = true;
		say_every(x, p, rec_family(rec) & 31, rec, emit, ctx);
	} else if (!x->active || rec->kind > CORO_EV_BPF_MAX || (rec->flags & CORO_EVF_NO_THREAD) ||
		   !(p = hmap_get(&x->procs, rec->pid, 0)) || !p->raw) {
		emit(ctx, rec);
		return;
	}
	t = thread_get(x, rec->pid, rec->tid);
	if (!t->started) {
		t->started = true;
		if (p->launched && (rec->flags & CORO_EVF_CUR_UNKNOWN))
			start_thread(x, p, t, rec, emit, ctx);
	}
	switch (rec->kind) {
	case CORO_EV_CTX_SWITCH:
		apply_switch(x, p, t, (const void *)rec, emit, ctx);
		return;
	case CORO_EV_CTX_CREATE:
		apply_create(x, p, t, (const void *)rec, emit, ctx);
		return;
	case CORO_EV_CTX_EXIT:
		h = translate_cur(x, p, t, rec);
		if (t->known && t->cur_id && !t->exited) {
			emit_exit(x, h, t->cur_id, t->cur_id, exit_status(rec), emit, ctx);
			t->exited = true;
			hmap_del(&x->created, rec->pid, t->cur_id);
		} else {
			x->exits_unknown++;
		}
		return;
	case CORO_EV_NAME: {
		struct coro_ev_name *n;

		h = translate_cur(x, p, t, rec);
		n = (void *)h;
		n->id = resolve(x, p, rec->pid, n->id);
		emit(ctx, h);
		return;
	}
	}
	emit(ctx, translate_cur(x, p, t, rec));
}

void ctxmap_free(struct ctxmap *x)
{
	while (x->every) {
		struct every *e = x->every;

		x->every = e->next;
		free(e);
	}
	size_t it = 0;
	u64 k1, k2;
	void *v;

	while (hmap_next(&x->threads, &it, &k1, &k2, &v))
		free(v);
	it = 0;
	while (hmap_next(&x->procs, &it, &k1, &k2, &v)) {
		struct ctx_proc *p = v;

		tdestroy(p->ranges, free);
		free(p);
	}
	hmap_free(&x->procs);
	hmap_free(&x->threads);
	hmap_free(&x->alias);
	hmap_free(&x->handles);
	hmap_free(&x->created);
}
