// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* C++20 coroutines: raw facts to coroutines (see cxxmap.h). */
#include <stdlib.h>
#include <string.h>
#include "cxxmap.h"
#include "kinds.h"
#include "raw.h"

_Static_assert(sizeof(((struct cxxmap *)0)->buf) >= CORO_NAME_REC_MAX, "a long name record fits");

/* GCC's resume index of the initial suspend point (0: not started; odd: destroying). */
#define GCC_INITIAL_SUSPEND 2

struct cxx_entry {
	u64 frame, sp, word;
	/* The ramp's own first run, or GCC's destroy running the body: not running for the model. */
	bool initial;
	bool start;   /* initial: the ramp's run (not GCC's destroy running the body) */
	bool xfer;    /* it calls another's body to hand over (GCC -O0's symmetric transfer) */
	bool out;     /* ...which was entered: switched out, though still on the stack */
};

/* A Clang ramp running an eager coroutine's first run inline (CORO_CXX_RAMP), until it returns. */
struct cxx_ramp {
	u64 sp;	   /* at its entry: its return's `frame` */
	u32 fn;	   /* its coroutine's name index: the create it makes has the same */
	u64 frame; /* made by it (0: not yet) */
};

struct cxx_thread {
	struct cxx_entry *stack;
	u32 depth, cap;
	struct cxx_ramp *ramps;
	u32 nramps, capramps;
	u64 creating;	/* its ramp calls the body (CORO_CXX_START), not entered since */
	u64 last_created; /* made last on this thread, no body entered here since */
	/*
	 * What runs on the thread when no C++ body does: a coroutine of
	 * another path (a ucontext one resuming C++ coroutines), 0 for none.
	 */
	u64 outer;
	u64 destroying; /* its destroy clone entered: GCC runs the body once more */
};

void cxxmap_init(struct cxxmap *x)
{
	memset(x, 0, sizeof(*x));
	hmap_init(&x->threads);
	hmap_init(&x->live);
	hmap_init(&x->waits);
	hmap_init(&x->on);
	hmap_init(&x->procs);
	hmap_init(&x->fresh);
	hmap_init(&x->awaiters);
	hmap_init(&x->finals);
}

static struct cxx_thread *thread_get(struct cxxmap *x, u32 pid, u32 tid)
{
	struct cxx_thread *t = hmap_get(&x->threads, pid, tid);

	if (!t) {
		t = xcalloc(1, sizeof(*t));
		hmap_put(&x->threads, pid, tid, t);
	}
	return t;
}

/* The coroutine the model sees running on the thread: the top entry that runs for it. */
static u64 running(const struct cxx_thread *t)
{
	for (u32 i = t->depth; i > 0; i--)
		if (!t->stack[i - 1].initial && !t->stack[i - 1].out)
			return t->stack[i - 1].frame;
	return t->outer;
}

/* The entry of running(t) if it is a C++ body, else NULL. */
static struct cxx_entry *running_entry(struct cxx_thread *t)
{
	for (u32 i = t->depth; i > 0; i--)
		if (!t->stack[i - 1].initial && !t->stack[i - 1].out)
			return &t->stack[i - 1];
	return NULL;
}

/* Any C++ body running on the thread (else records keep the hdr.cur they have). */
static bool cxx_running(const struct cxx_thread *t)
{
	return running(t) && running(t) != t->outer;
}

static void push(struct cxx_thread *t, u64 frame, u64 sp, u64 word, bool initial)
{
	if (t->depth == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 8;
		t->stack = xrealloc(t->stack, t->cap * sizeof(*t->stack));
	}
	t->stack[t->depth++] = (struct cxx_entry){frame, sp, word, initial, false, false, false};
}

static void emit_hdr(struct cxxmap *x, const struct coro_event_hdr *like, u8 kind, u16 size,
		     u64 cur)
{
	struct coro_event_hdr *h = &x->buf.hdr;

	memset(x->buf.bytes, 0, size);
	*h = *like;
	h->size = size;
	h->kind = kind;
	h->flags = 0;
	h->cur = cur;
}

static void emit_exit(struct cxxmap *x, const struct coro_event_hdr *like, u64 cur, u64 frame,
		      cxxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_exit *e = (void *)x->buf.bytes;

	hmap_del(&x->finals, like->pid, frame);
	if (!hmap_del(&x->live, like->pid, frame))
		return; /* ended already (at its final suspend point, or destroyed) */
	hmap_del(&x->waits, like->pid, frame);
	hmap_del(&x->on, like->pid, frame);
	hmap_del(&x->fresh, like->pid, frame);
	free(hmap_del(&x->awaiters, like->pid, frame));
	emit_hdr(x, like, CORO_EV_EXIT, sizeof(*e), cur);
	e->id = frame;
	e->status = 0;
	emit(ctx, &e->hdr);
}

static void emit_switch(struct cxxmap *x, const struct coro_event_hdr *like, u64 from, u64 to,
			u32 reason, cxxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_switch *s = (void *)x->buf.bytes;
	void *obj = from ? hmap_del(&x->waits, like->pid, from) : NULL;
	char *awaiter = from ? hmap_del(&x->awaiters, like->pid, from) : NULL;

	emit_hdr(x, like, CORO_EV_SWITCH, sizeof(*s), from);
	s->from = from;
	s->to = to;
	s->reason = reason;
	if (obj && reason != CORO_R_DONE) {
		s->reason = CORO_R_WAIT;
		s->obj = (u64)(uintptr_t)obj;
		x->awaiter = awaiter;
	}
	if (to)
		hmap_put(&x->live, like->pid, to, (void *)1);
	if (from)
		hmap_del(&x->on, like->pid, from);
	if (to)
		hmap_put(&x->on, like->pid, to, (void *)(uintptr_t)((u64)like->tid + 1));
	emit(ctx, &s->hdr);
	x->awaiter = NULL;
	free(awaiter);
}

static void apply_create(struct cxxmap *x, struct cxx_thread *t, const struct coro_ev_cxx *e,
			 cxxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_create *c = (void *)x->buf.bytes;
	u64 cur = running(t);

	if (hmap_get(&x->live, e->hdr.pid, e->frame)) {
		/* Its frame was freed without a destroy seen, and is reused. */
		x->frames_reused++;
		emit_exit(x, &e->hdr, cur, e->frame, emit, ctx);
	}
	hmap_put(&x->live, e->hdr.pid, e->frame, (void *)1);
	hmap_put(&x->fresh, e->hdr.pid, e->frame, (void *)1);
	hmap_del(&x->finals, e->hdr.pid, e->frame);
	if (t->nramps && !t->ramps[t->nramps - 1].frame && t->ramps[t->nramps - 1].fn == e->fn)
		t->ramps[t->nramps - 1].frame = e->frame;
	emit_hdr(x, &e->hdr, CORO_EV_CREATE, sizeof(*c), cur);
	c->id = e->frame;
	c->parent = cur;
	emit(ctx, &c->hdr);
	t->last_created = e->frame;
}

/*
 * Entered here while its body still runs on another thread: that thread
 * suspended it (await_suspend handed it over, a migration) and has not
 * returned from the body yet. It left that thread now; its return there
 * says nothing more.
 */
static void left_elsewhere(struct cxxmap *x, const struct coro_ev_cxx *e, cxxmap_emit_fn emit,
			   void *ctx)
{
	u64 on = (u64)(uintptr_t)hmap_get(&x->on, e->hdr.pid, e->frame);
	struct coro_event_hdr like = e->hdr;
	struct cxx_thread *o;

	if (!on || on - 1 == e->hdr.tid || !(o = hmap_get(&x->threads, e->hdr.pid, on - 1)))
		return;
	for (u32 i = o->depth; i > 0; i--) {
		struct cxx_entry *ent = &o->stack[i - 1];

		if (ent->frame != e->frame || ent->initial || ent->out)
			continue;
		ent->out = true;
		like.tid = (u32)(on - 1);
		like.lost_before = 0;
		emit_switch(x, &like, e->frame, running(o), CORO_R_UNKNOWN, emit, ctx);
		return;
	}
}

static void apply_body(struct cxxmap *x, struct cxx_thread *t, const struct coro_ev_cxx *e,
		       u64 creating, u64 destroying, cxxmap_emit_fn emit, void *ctx)
{
	struct cxx_entry *top = t->depth ? &t->stack[t->depth - 1] : NULL;

	/* A ramp calls its body before anything else runs a body here. */
	t->last_created = 0;
	hmap_del(&x->fresh, e->hdr.pid, e->frame);
	left_elsewhere(x, e, emit, ctx);
	if (destroying == e->frame) {
		/* GCC's destroy clone runs the body to free the frame: no resume. */
		push(t, e->frame, e->sp, e->word, true);
		return;
	}
	if (creating == e->frame) {
		push(t, e->frame, e->sp, e->word, true);
		t->stack[t->depth - 1].start = true;
		return;
	}
	if (top && !top->initial && ((top->xfer && !top->out) || top->sp == e->sp)) {
		/*
		 * A symmetric transfer: a tail call from one body into another
		 * (the same stack pointer), or GCC -O0's call after an xfer.
		 */
		u64 from = top->frame;
		bool done = (!(e->flags & CORO_CXXF_PREV_UNREAD) && e->prev == top->frame &&
			     !e->prev_word) ||
			    hmap_get(&x->finals, e->hdr.pid, from);

		if (done)
			emit_exit(x, &e->hdr, from, from, emit, ctx);
		if (top->sp == e->sp && !top->xfer)
			t->depth--; /* replaced: its return comes with the new one's */
		else
			top->out = true;
		push(t, e->frame, e->sp, e->word, false);
		emit_switch(x, &e->hdr, from, e->frame, done ? CORO_R_DONE : CORO_R_UNKNOWN, emit,
			    ctx);
		return;
	}
	{
		struct cxx_entry *run = running_entry(t);
		u64 from = run ? run->frame : t->outer;
		/*
		 * A body entered from one at its final suspend point (its resume
		 * pointer nulled, the frame entered last here): its final awaiter
		 * hands over by a real call (GCC's transfer when not a tail call)
		 * or resumes another itself. Either way it ended: it can never be
		 * resumed again, and its body's return says nothing more.
		 */
		bool done = run && !(e->flags & CORO_CXXF_PREV_UNREAD) && e->prev == from &&
			    !e->prev_word;

		if (done) {
			emit_exit(x, &e->hdr, from, from, emit, ctx);
			run->out = true;
		}
		push(t, e->frame, e->sp, e->word, false);
		emit_switch(x, &e->hdr, from, e->frame, done ? CORO_R_DONE : CORO_R_UNKNOWN, emit,
			    ctx);
	}
}

static void apply_return(struct cxxmap *x, struct cxx_thread *t, const struct coro_ev_cxx *e,
			 cxxmap_emit_fn emit, void *ctx)
{
	struct cxx_entry ent;
	u32 i = t->depth;
	bool ended;
	u64 to;

	while (i > 0 && (t->stack[i - 1].frame != e->frame || t->stack[i - 1].sp != e->sp))
		i--;
	if (!i) {
		/* Replaced by a transfer (its return comes with the last one's), or never seen. */
		return;
	}
	/* Entries above it never returned (unwound by an exception): gone with it. */
	ent = t->stack[i - 1];
	t->depth = i - 1;
	to = running(t);
	if (ent.start && (e->flags & CORO_CXXF_INDEX) && e->prev_word != GCC_INITIAL_SUSPEND) {
		/*
		 * GCC's ramp ran the body past the initial suspend point (an eager
		 * coroutine): that was its first run, known only now. Counted, its
		 * time left with the creator.
		 */
		struct coro_event_hdr like = e->hdr;

		like.ts = e->hdr.ts - 1;
		emit_switch(x, &like, to, ent.frame, CORO_R_UNKNOWN, emit, ctx);
		ent.initial = false;
	}
	if (ent.initial || ent.out)
		return;
	ended = (!(e->flags & CORO_CXXF_WORD_UNREAD) && e->word != ent.word) ||
		hmap_get(&x->finals, e->hdr.pid, ent.frame);
	if (ended)
		emit_exit(x, &e->hdr, ent.frame, ent.frame, emit, ctx);
	emit_switch(x, &e->hdr, ent.frame, to, ended ? CORO_R_DONE : CORO_R_UNKNOWN, emit, ctx);
}

/*
 * An await_suspend called for a frame whose body was never entered: its
 * ramp (Clang's, or a caller it was inlined into) ran it past the initial
 * suspend point, an eager coroutine, and it suspends here. That was its
 * first run, known only now: counted, its time left with the creator, as
 * GCC's (apply_return).
 */
static void first_run_ends(struct cxxmap *x, struct cxx_thread *t, const struct coro_ev_cxx *e,
			   cxxmap_emit_fn emit, void *ctx)
{
	struct coro_event_hdr like = e->hdr;
	u64 creator = running(t);
	bool final = e->flags & CORO_CXXF_FINAL;

	if (!hmap_get(&x->live, e->hdr.pid, e->frame))
		return;
	like.ts = e->hdr.ts - 1;
	emit_switch(x, &like, creator, e->frame, CORO_R_UNKNOWN, emit, ctx);
	if (final)
		emit_exit(x, &e->hdr, e->frame, e->frame, emit, ctx); /* it ran to its end */
	emit_switch(x, &e->hdr, e->frame, creator, final ? CORO_R_DONE : CORO_R_UNKNOWN, emit,
		    ctx);
}

/*
 * A Clang ramp that ran its eager coroutine's body inline returned: if the
 * frame it made was neither entered nor said to suspend (an await_suspend
 * called) since, that run ended in the ramp at a suspension compiled
 * inline, now (first_run_ends).
 */
static void apply_ramp_return(struct cxxmap *x, struct cxx_thread *t, const struct coro_ev_cxx *e,
			      cxxmap_emit_fn emit, void *ctx)
{
	struct coro_ev_cxx first = *e;
	u32 i = t->nramps;

	while (i > 0 && t->ramps[i - 1].sp != e->frame)
		i--;
	if (!i)
		return; /* its entry not seen (attached while it ran) */
	first.frame = t->ramps[i - 1].frame;
	first.flags = 0;
	t->nramps = i - 1; /* the ones above returned unseen (unwound) */
	if (first.frame && hmap_del(&x->fresh, e->hdr.pid, first.frame))
		first_run_ends(x, t, &first, emit, ctx);
}

static void free_thread(void *v)
{
	struct cxx_thread *t = v;

	free(t->ramps);
	free(t->stack);
	free(t);
}

static void forget_process(struct cxxmap *x, u32 pid)
{
	struct hmap *maps[7] = {&x->threads, &x->live,	   &x->waits, &x->on,
				&x->fresh,   &x->awaiters, &x->finals};

	hmap_del(&x->procs, pid, 0);
	for (int i = 0; i < 7; i++)
		hmap_del_k1(maps[i], pid, i == 0 ? free_thread : i == 5 ? free : NULL);
}

void cxxmap_apply(struct cxxmap *x, const struct coro_event_hdr *rec, cxxmap_emit_fn emit,
		  void *ctx)
{
	const struct coro_ev_cxx *e = (const void *)rec;
	struct cxx_thread *t;
	u64 creating, destroying;

	if (rec->kind == CORO_EV_CXX_AWAITER) {
		const struct coro_ev_cxx_awaiter *a = (const void *)rec;

		/* Held for the await record that follows: the model never sees it. */
		if (rec->size >= sizeof(*a) && a->frame) {
			char name[sizeof(a->name)];

			memcpy(name, a->name, sizeof(name));
			name[sizeof(name) - 1] = 0;
			free(hmap_del(&x->awaiters, rec->pid, a->frame));
			hmap_put(&x->awaiters, rec->pid, a->frame, xstrdup(name));
		}
		return;
	}
	if (rec->kind != CORO_EV_CXX && rec->kind != CORO_EV_CXX_AWAIT) {
		if (x->active && hmap_get(&x->procs, rec->pid, 0)) {
			if (rec->kind == CORO_EV_EXEC || rec->kind == CORO_EV_PROC_GONE ||
			    rec->kind == CORO_REC_PROC_EXIT) {
				emit(ctx, rec);
				forget_process(x, rec->pid);
				return;
			}
			if (rec->kind == CORO_EV_SWITCH &&
			    (t = hmap_get(&x->threads, rec->pid, rec->tid)))
				t->outer = ((const struct coro_ev_switch *)rec)->to;
			if (rec->kind <= CORO_EV_BPF_MAX && !(rec->flags & CORO_EVF_NO_THREAD) &&
			    (t = hmap_get(&x->threads, rec->pid, rec->tid)) && cxx_running(t)) {
				/* What runs on the thread is the C++ coroutine on top. */
				size_t n = MIN((size_t)rec->size, sizeof(x->buf.bytes) & ~(size_t)7);

				memcpy(x->buf.bytes, rec, n);
				x->buf.hdr.size = (u16)n;
				x->buf.hdr.cur = running(t);
				x->buf.hdr.flags &= (u8)~CORO_EVF_CUR_UNKNOWN;
				emit(ctx, &x->buf.hdr);
				return;
			}
		}
		emit(ctx, rec);
		return;
	}
	if (rec->size < sizeof(*e) || (rec->flags & CORO_EVF_NO_THREAD) || !e->frame)
		return;
	x->active = true;
	hmap_put(&x->procs, rec->pid, 0, (void *)1);
	t = thread_get(x, rec->pid, rec->tid);
	/* The BPF side's current coroutine is another path's (ctxmap translated it): outside C++. */
	if (!cxx_running(t) && !(rec->flags & CORO_EVF_CUR_UNKNOWN))
		t->outer = rec->cur;
	/* A start or a destroy concerns the body entered next, at once: one record at most. */
	creating = t->creating;
	destroying = t->destroying;
	t->creating = t->destroying = 0;
	if (rec->kind == CORO_EV_CXX_AWAIT) {
		if (e->flags & CORO_CXXF_FINAL) {
			/* Its end, not a wait: the final awaiter says nothing it waits on. */
			hmap_del(&x->waits, rec->pid, e->frame);
			free(hmap_del(&x->awaiters, rec->pid, e->frame));
			hmap_put(&x->finals, rec->pid, e->frame, (void *)1);
		} else if (e->word)
			hmap_put(&x->waits, rec->pid, e->frame, (void *)(uintptr_t)e->word);
		else
			free(hmap_del(&x->awaiters, rec->pid, e->frame));
		if (hmap_del(&x->fresh, rec->pid, e->frame))
			first_run_ends(x, t, e, emit, ctx);
		return;
	}
	switch (e->op) {
	case CORO_CXX_CREATE:
		apply_create(x, t, e, emit, ctx);
		break;
	case CORO_CXX_BODY:
		apply_body(x, t, e, creating, destroying, emit, ctx);
		break;
	case CORO_CXX_RETURN:
		apply_return(x, t, e, emit, ctx);
		break;
	case CORO_CXX_START:
		/* Only the call that follows its creation: a later one is a resume. */
		if (t->last_created == e->frame)
			t->creating = e->frame;
		break;
	case CORO_CXX_XFER:
		if (t->depth && !t->stack[t->depth - 1].initial)
			t->stack[t->depth - 1].xfer = true;
		break;
	case CORO_CXX_DESTROY:
		t->destroying = e->frame;
		emit_exit(x, rec, running(t), e->frame, emit, ctx);
		break;
	case CORO_CXX_RAMP:
		if (t->nramps == t->capramps) {
			t->capramps = t->capramps ? t->capramps * 2 : 4;
			t->ramps = xrealloc(t->ramps, t->capramps * sizeof(*t->ramps));
		}
		t->ramps[t->nramps++] = (struct cxx_ramp){e->frame, e->fn, 0};
		break;
	case CORO_CXX_RAMP_RETURN:
		apply_ramp_return(x, t, e, emit, ctx);
		break;
	}
}

void cxxmap_free(struct cxxmap *x)
{
	size_t it = 0;
	u64 k1, k2;
	void *v;

	while (hmap_next(&x->threads, &it, &k1, &k2, &v))
		free_thread(v);
	hmap_free(&x->threads);
	hmap_free(&x->live);
	hmap_free(&x->waits);
	hmap_free(&x->on);
	hmap_free(&x->procs);
	hmap_free(&x->fresh);
	it = 0;
	while (hmap_next(&x->awaiters, &it, &k1, &k2, &v))
		free(v);
	hmap_free(&x->awaiters);
	hmap_free(&x->finals);
}
