// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Perfetto writer: the track layout. The packets, interning and encoding
 * are pf_wire.c's; this decides which tracks there are and what goes on
 * them, from the model's callbacks.
 *
 * Everything is written on one packet sequence, in time order: the model
 * calls enter() when a coroutine enters a state and interval() when it
 * leaves one, so slices open and close as the coroutine lives. Track
 * layout (docs/perfetto.md):
 *
 *   process track (pid, name)
 *     thread tracks: a slice per stretch a thread ran a coroutine
 *     "Coroutines": one track per coroutine, ordered by creation, never
 *        merged with same-named siblings; state slices (running, runnable,
 *        suspended: <reason>, ...) nested inside the coroutine's spans
 *     "Coroutines (packed lanes)": past --coroutine-tracks per process,
 *        coroutines share lanes, reused when one ends
 *     counters: live coroutines, runnable coroutines, events lost
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "counters.h"
#include "finding.h"
#include "perfetto.h"
#include "pf_wire.h"

/* Track uuids: the kind in the low 4 bits, so small ids make short varints in every event. */
#define UUID(kind, id) (((u64)(id) << 4) | (kind))
#define UUID_PROCESS(pid) UUID(1, pid)
#define UUID_GROUP(pid) UUID(2, pid)
#define UUID_LANES(pid) UUID(3, pid)
#define UUID_COUNTER(pid, k) UUID(4, ((u64)(pid) << 2) | (k))
#define UUID_THREAD(tid) UUID(5, tid)
#define UUID_CORO(uid) UUID(6, uid)
#define UUID_LANE(pid, n) UUID(7, ((u64)(pid) << 24) | (n))
#define UUID_ROOT UUID(8, 0)
#define UUID_FINDINGS(pid) UUID(9, pid)
enum { CNT_LIVE, CNT_RUNNABLE, CNT_LOST };

/* Names go into protobuf strings: valid UTF-8 only (invalid bytes become U+FFFD). */
#define LABEL_MAX (3 * CORO_STR_LEN + 4)
#define STATE_SLOTS (CS_NSTATES + CORO_NREASONS)

struct pf_proc {
	u32 pid;
	bool described, group_described, lanes_described, findings_described;
	bool counters_described[3];
	s64 last[3];
	u64 lost;
	u32 ntracks; /* coroutines given their own track */
	u32 *free_lanes, nfree, cap_free;
	u32 nlanes;
};

struct pf_thread {
	u32 pid, tid;
	bool described;
	bool running_open; /* a "coroutine X" slice is open */
	u64 running_uid;
	u32 nspans;	   /* thread-owned spans open */
	bool off_open;	   /* an "off-CPU" slice is open (inside the running one, if any) */
};

struct pf_coro {
	u64 uid;
	u64 track;
	bool lane;
	u32 lane_no;
	bool state_open;
	bool off_open;	 /* an "off-CPU" slice inside its running slice */
	u32 nspans;
	u64 create_flow, ready_flow;
	char label[LABEL_MAX];	      /* its name as written (or its id) */
	u64 label_iid;		      /* interned label, 0 until first used */
	u64 lane_iids[STATE_SLOTS];   /* lanes: interned "label: state" names */
};

struct perfetto_sink {
	struct pf_wire w; /* the packet sequence */
	u32 max_tracks;
	struct model *m;
	int slot; /* our priv[] slot in the model's objects, -1: none (use the maps) */
	struct hmap procs, threads, coros;
	char awaiter[LABEL_MAX]; /* the awaiter argument of the slice being begun, valid UTF-8 */
	u64 next_flow;
	u64 loss_noted;	   /* serial of the last event whose hole was marked */
	/*
	 * slow_span findings made for the span_end being applied (the analyzer
	 * sees it first): the slices to mark as they close, by depth, and the
	 * flow from each finding's instant.
	 */
	struct {
		u32 depth, cause;
		u64 flow, threshold;
	} slow[8];
	u32 nslow;
};

/* The layout's names fit the wire's lazy names ("label: state"). */
_Static_assert(LABEL_MAX <= PF_NAME_PART_MAX, "a label is one part of a lazy name");

static inline void track_event(struct perfetto_sink *s, u64 ts, const struct pf_ev *ev)
{
	pfw_track_event(&s->w, ts, ev);
}

static inline void track_event_bare(struct perfetto_sink *s, u64 ts, int type, u64 track,
				    bool counter, s64 value)
{
	pfw_track_event_bare(&s->w, ts, type, track, counter, value);
}

static void describe(struct perfetto_sink *s, u64 ts, const struct pf_desc *d)
{
	pfw_describe(&s->w, ts, d);
}

static const struct sym_stack *stack_of(const void *ctx, u32 id)
{
	return model_stack(ctx, id);
}

static void slice_begin(struct perfetto_sink *s, u64 ts, u64 track, const char *name,
			const struct pf_arg *args, int nargs)
{
	struct pf_ev ev = {.type = TYPE_SLICE_BEGIN, .track = track, .name = name,
			   .args = args, .nargs = nargs};

	track_event(s, ts, &ev);
}

static void slice_end(struct perfetto_sink *s, u64 ts, u64 track)
{
	track_event_bare(s, ts, TYPE_SLICE_END, track, false, 0);
}

/* A slice named by a string literal (interned by its address). */
static void slice_begin_lit(struct perfetto_sink *s, u64 ts, u64 track, const char *name,
			    const struct pf_arg *args, int nargs)
{
	struct pf_ev ev = {.type = TYPE_SLICE_BEGIN, .track = track, .name = name, .name_lit = true,
			   .args = args, .nargs = nargs};

	track_event(s, ts, &ev);
}

/* An instant named by a string literal (interned by its address). */
static void instant(struct perfetto_sink *s, u64 ts, u64 track, const char *name,
		    const struct pf_arg *args, int nargs, u64 flow, u64 term0, u64 term1)
{
	struct pf_ev ev = {.type = TYPE_INSTANT, .track = track, .name = name, .name_lit = true,
			   .args = args, .nargs = nargs, .flow = flow, .term_flow = {term0, term1}};

	track_event(s, ts, &ev);
}


/*
 * Our state for a model object lives in our own maps (which own it) and is
 * cached in the object's priv[] slot, so events find it without hashing.
 */
static struct pf_proc *proc_get(struct perfetto_sink *s, u32 pid)
{
	struct coro_process *mp = model_process(s->m, pid);
	struct pf_proc *p = s->slot >= 0 ? mp->priv[s->slot] : hmap_get(&s->procs, pid, 0);

	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = pid;
		hmap_put(&s->procs, pid, 0, p);
		if (s->slot >= 0)
			model_set_priv(mp->priv, s->slot, p);
	}
	return p;
}

static void describe_process(struct perfetto_sink *s, u64 ts, struct pf_proc *pp,
			     const struct coro_process *mp)
{
	char name[64], exe[1024];
	bool has_exe = mp && mp->exe && mp->exe[0];

	if (has_exe)
		utf8_sanitize(exe, sizeof(exe), mp->exe, 256);
	if (mp && mp->comm[0])
		utf8_sanitize(name, sizeof(name), mp->comm, sizeof(mp->comm));
	else
		snprintf(name, sizeof(name), "pid %u", pp->pid);
	pfw_describe_process(&s->w, ts, UUID_PROCESS(pp->pid), pp->pid, has_exe ? exe : NULL, name);
	pp->described = true;
}

static struct pf_proc *proc_ready(struct perfetto_sink *s, u64 ts, u32 pid)
{
	struct pf_proc *pp = proc_get(s, pid);

	if (!pp->described)
		describe_process(s, ts, pp, model_proc_peek(s->m, pid));
	return pp;
}

static struct pf_thread *thread_of(struct perfetto_sink *s, const struct coro_thread *mt, u32 pid,
				   u32 tid)
{
	struct pf_thread *t = mt && s->slot >= 0 ? mt->priv[s->slot] : NULL;

	if (!t)
		t = hmap_get(&s->threads, pid, tid);
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		t->pid = pid;
		t->tid = tid;
		hmap_put(&s->threads, pid, tid, t);
	}
	if (mt && s->slot >= 0)
		model_set_priv(mt->priv, s->slot, t);
	return t;
}

/* `mt` is the model's thread if the caller has it (NULL: looked up). */
static struct pf_thread *thread_ready_mt(struct perfetto_sink *s, u64 ts, u32 pid, u32 tid,
					 const struct coro_thread *mt)
{
	struct pf_thread *t;

	if (!mt)
		mt = model_thread_peek(s->m, pid, tid);
	t = thread_of(s, mt, pid, tid);
	if (!t->described) {
		char comm[64];
		bool named = mt && mt->comm[0];

		proc_ready(s, ts, pid);
		if (named)
			utf8_sanitize(comm, sizeof(comm), mt->comm, sizeof(mt->comm));
		pfw_describe_thread(&s->w, ts, UUID_THREAD(tid), pid, tid, named ? comm : NULL);
		t->described = true;
	}
	return t;
}

static struct pf_thread *thread_ready(struct perfetto_sink *s, u64 ts, u32 pid, u32 tid)
{
	return thread_ready_mt(s, ts, pid, tid, NULL);
}

static void counter_write(struct perfetto_sink *s, u64 ts, struct pf_proc *pp, int k, s64 v)
{
	static const char *names[3] = {"live coroutines", "runnable coroutines", "events lost"};

	if (!pp->counters_described[k]) {
		struct pf_desc d = {.uuid = UUID_COUNTER(pp->pid, k),
				    .parent = UUID_PROCESS(pp->pid),
				    .name = names[k],
				    .counter = true};

		describe(s, ts, &d);
		pp->counters_described[k] = true;
	}
	pp->last[k] = v;
	track_event_bare(s, ts, TYPE_COUNTER, UUID_COUNTER(pp->pid, k), true, v);
}

/* A counter's value, written when it changed: most events change neither of a process's two. */
static inline void counter(struct perfetto_sink *s, u64 ts, struct pf_proc *pp, int k, s64 v)
{
	if (!pp->counters_described[k] || pp->last[k] != v)
		counter_write(s, ts, pp, k, v);
}

/* ---- coroutines ---- */

static void label_of(const struct coro *c, char *buf, size_t len)
{
	if (c->name[0])
		utf8_sanitize(buf, len, c->name, CORO_STR_LEN);
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)c->id);
}

static void describe_coro(struct perfetto_sink *s, u64 ts, const struct coro *c,
			  const struct pf_coro *pc)
{
	struct pf_desc d = {.uuid = pc->track, .parent = UUID_GROUP(c->pid), .merge = MERGE_NONE,
			    .rank = c->uid > 0x7fffffff ? 0x7fffffff : (int)c->uid};

	d.name = pc->label;
	describe(s, ts, &d);
}

static struct pf_coro *coro_of(struct perfetto_sink *s, const struct coro *c)
{
	return s->slot >= 0 ? c->priv[s->slot] : hmap_get(&s->coros, c->uid, 0);
}

static struct pf_coro *coro_ready(struct perfetto_sink *s, u64 ts, const struct coro *c)
{
	struct pf_coro *pc = coro_of(s, c);
	struct pf_proc *pp;

	if (pc)
		return pc;
	pp = proc_ready(s, ts, c->pid);
	pc = xcalloc(1, sizeof(*pc));
	pc->uid = c->uid;
	label_of(c, pc->label, sizeof(pc->label));
	hmap_put(&s->coros, c->uid, 0, pc);
	if (s->slot >= 0)
		model_set_priv(c->priv, s->slot, pc);
	if (pp->ntracks < s->max_tracks) {
		if (!pp->group_described) {
			struct pf_desc d = {.uuid = UUID_GROUP(c->pid), .parent = UUID_PROCESS(c->pid),
					    .name = "Coroutines",
					    .child_ordering = ORDER_EXPLICIT};

			describe(s, ts, &d);
			pp->group_described = true;
		}
		pp->ntracks++;
		pc->track = UUID_CORO(c->uid);
		describe_coro(s, ts, c, pc);
		return pc;
	}
	/* Packed lanes: a free one, or a new one. */
	if (!pp->lanes_described) {
		struct pf_desc d = {.uuid = UUID_LANES(c->pid), .parent = UUID_PROCESS(c->pid),
				    .name = "Coroutines (packed lanes)",
				    .description = "coroutines past --coroutine-tracks share lanes; "
						   "each slice names its coroutine",
				    .child_ordering = ORDER_EXPLICIT};

		describe(s, ts, &d);
		pp->lanes_described = true;
	}
	pc->lane = true;
	if (pp->nfree) {
		pc->lane_no = pp->free_lanes[--pp->nfree];
	} else {
		char name[32];
		struct pf_desc d = {.parent = UUID_LANES(c->pid), .merge = MERGE_NONE};

		pc->lane_no = ++pp->nlanes;
		snprintf(name, sizeof(name), "lane %u", pc->lane_no);
		d.uuid = UUID_LANE(c->pid, pc->lane_no);
		d.name = name;
		d.rank = (int)pc->lane_no;
		describe(s, ts, &d);
	}
	pc->track = UUID_LANE(c->pid, pc->lane_no);
	return pc;
}

static const char *const state_names[STATE_SLOTS] = {
	[CS_NEW] = "new",
	[CS_RUNNABLE] = "runnable",
	[CS_RUNNING] = "running",
	[CS_SUSPENDED] = "suspended",
	[CS_UNKNOWN] = "unknown",
	[CS_EXITED] = "exited",
	[CS_NSTATES + 0] = "suspended: unknown",
	[CS_NSTATES + 1] = "suspended: yield",
	[CS_NSTATES + 2] = "suspended: wait",
	[CS_NSTATES + 3] = "suspended: sleep",
	[CS_NSTATES + 4] = "suspended: io",
	[CS_NSTATES + 5] = "suspended: done",
};

static int state_slot(const struct coro *c)
{
	if (c->state == CS_SUSPENDED)
		return CS_NSTATES + (c->reason < CORO_NREASONS ? c->reason : 0);
	return c->state;
}

/* The slice name of c's state: a literal on its own track; "label: state" on a lane. */
static void state_name(const struct coro *c, struct pf_coro *pc, struct pf_ev *ev)
{
	int slot = state_slot(c);

	if (!pc->lane) {
		ev->name = state_names[slot];
		ev->name_lit = true;
		return;
	}
	/* Interned once per coroutine and state, in the packet that first uses it. */
	ev->iid_slot = &pc->lane_iids[slot];
	ev->lazy_a = pc->label;
	ev->lazy_b = state_names[slot];
}

/* A C++20 wait's awaiter type, as an argument (rare: kept out of begin_state's way). */
static __attribute__((noinline, cold)) struct pf_arg awaiter_arg(struct perfetto_sink *s,
								  const struct coro *c)
{
	utf8_sanitize(s->awaiter, sizeof(s->awaiter), c->awaiter, CORO_STR_LEN);
	return (struct pf_arg){"awaiter", A_STR, 0, s->awaiter};
}

/* Open the slice of c's current state on its track (and on its thread's, if running). */
static void begin_state(struct perfetto_sink *s, const struct coro *c, struct pf_coro *pc, u64 ts,
			bool with_flows)
{
	struct pf_arg args[3];
	struct pf_ev ev = {.type = TYPE_SLICE_BEGIN, .track = pc->track, .args = args};

	state_name(c, pc, &ev);
	if (pc->lane)
		args[ev.nargs++] = (struct pf_arg){"coroutine", A_PTR, c->id};
	switch (c->state) {
	case CS_RUNNING:
		args[ev.nargs++] = (struct pf_arg){"thread", A_INT, c->tid};
		if (with_flows) {
			ev.term_flow[0] = pc->create_flow;
			ev.term_flow[1] = pc->ready_flow;
			pc->create_flow = pc->ready_flow = 0;
		}
		break;
	case CS_SUSPENDED:
		if (c->obj)
			args[ev.nargs++] = (struct pf_arg){"obj", A_PTR, c->obj};
		/* A C++20 coroutine's wait: the awaiter's type. */
		if (__builtin_expect(c->awaiter != NULL, 0) && c->reason == CORO_R_WAIT)
			args[ev.nargs++] = awaiter_arg(s, c);
		pfw_stack_next(&s->w, c->park_stack); /* where it parked */
		break;
	case CS_RUNNABLE:
		if (c->has_waker)
			args[ev.nargs++] = (struct pf_arg){"waker", A_PTR, c->waker};
		break;
	default:
		break;
	}
	track_event(s, ts, &ev);
	pc->state_open = true;
}

/*
 * A record that follows a hole on its thread: mark the hole before anything
 * the record changes, on the first packet written after it.
 */
static void mark_loss(struct perfetto_sink *s, const struct event *ev)
{
	struct pf_proc *pp;
	struct pf_arg a;

	s->loss_noted = ev->seq;
	pp = proc_ready(s, ev->ts, ev->pid);
	thread_ready(s, ev->ts, ev->pid, ev->tid);
	a = (struct pf_arg){"count", A_UINT, ev->lost_before};
	pfw_mark_dropped(&s->w);
	instant(s, ev->ts, UUID_THREAD(ev->tid), "events lost", &a, 1, 0, 0, 0);
	pp->lost += ev->lost_before;
	counter(s, ev->ts, pp, CNT_LOST, pp->lost);
}

static inline void note_loss(struct perfetto_sink *s)
{
	const struct event *ev = model_applying(s->m);

	if (__builtin_expect(ev && ev->lost_before && s->loss_noted != ev->seq, 0))
		mark_loss(s, ev);
}

static void perfetto_enter(void *ctx, const struct coro *c, u64 ts)
{
	struct perfetto_sink *s = ctx;
	struct pf_coro *pc;

	note_loss(s);
	pc = coro_ready(s, ts, c);

	if (pc->state_open) {
		/* The model pairs enter() with interval(); should never happen. */
		slice_end(s, ts, pc->track);
		pc->state_open = false;
	}
	begin_state(s, c, pc, ts, true);
	if (c->state == CS_RUNNING && c->tid) {
		struct pf_thread *t = thread_ready_mt(s, ts, c->pid, c->tid, c->thread);
		struct pf_arg args[2] = {{"coroutine", A_PTR, c->id}, {"uid", A_UINT, c->uid}};
		struct pf_ev ev = {.type = TYPE_SLICE_BEGIN, .track = UUID_THREAD(t->tid),
				   .name = pc->label, .iid_slot = &pc->label_iid, .args = args,
				   .nargs = 2};

		if (t->running_open)
			slice_end(s, ts, UUID_THREAD(t->tid));
		track_event(s, ts, &ev);
		t->running_open = true;
		t->running_uid = c->uid;
	}
}

static void perfetto_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			      u64 end, u32 tid, u32 reason, u64 obj)
{
	struct perfetto_sink *s = ctx;
	struct pf_coro *pc = coro_of(s, c);

	note_loss(s);
	/* Inner slices first: an off-CPU stretch cut short by the end of the run. */
	if (pc && pc->off_open) {
		slice_end(s, end, pc->track);
		pc->off_open = false;
	}
	if (pc && pc->state_open) {
		slice_end(s, end, pc->track);
		pc->state_open = false;
	}
	if (state == CS_RUNNING) {
		struct pf_thread *t = c->thread && c->thread->tid == tid && s->slot >= 0
					      ? c->thread->priv[s->slot]
					      : hmap_get(&s->threads, c->pid, tid);

		if (t && t->running_open && t->running_uid == c->uid) {
			if (t->off_open) {
				slice_end(s, end, UUID_THREAD(tid));
				t->off_open = false;
			}
			slice_end(s, end, UUID_THREAD(tid));
			t->running_open = false;
		}
	}
}

static const char *const offcpu_names[] = {
	[CORO_OFF_PREEMPTED] = "off-CPU: preempted",
	[CORO_OFF_SLEEPING] = "off-CPU: sleeping",
	[CORO_OFF_DISK] = "off-CPU: disk",
	[CORO_OFF_OTHER] = "off-CPU: other",
};

/* The kernel's view: the thread left the CPU (inside its coroutine's running slice) or came back. */
static void offcpu(struct perfetto_sink *s, const struct event *ev)
{
	struct pf_thread *t = thread_ready(s, ev->ts, ev->pid, ev->tid);
	struct pf_coro *pc = ev->c ? coro_of(s, ev->c) : NULL;

	if (ev->kind == EV_OFFCPU_BEGIN) {
		u32 state = ev->offcpu.state;
		const char *name = offcpu_names[state <= CORO_OFF_OTHER ? state : CORO_OFF_OTHER];
		struct pf_arg a = {"cpu", A_UINT, ev->offcpu.cpu};

		/* A begin whose end was lost: close the old stretch here. */
		if (t->off_open)
			slice_end(s, ev->ts, UUID_THREAD(ev->tid));
		slice_begin_lit(s, ev->ts, UUID_THREAD(ev->tid), name, &a, 1);
		t->off_open = true;
		if (pc && pc->state_open && ev->c->state == CS_RUNNING) {
			if (pc->off_open)
				slice_end(s, ev->ts, pc->track);
			slice_begin_lit(s, ev->ts, pc->track, name, &a, 1);
			pc->off_open = true;
		}
		return;
	}
	if (pc && pc->off_open) {
		slice_end(s, ev->ts, pc->track);
		pc->off_open = false;
	}
	if (t->off_open) {
		slice_end(s, ev->ts, UUID_THREAD(ev->tid));
		t->off_open = false;
	}
}

/* The track an event fired "by" a coroutine goes to: its own, or its thread's. */
static u64 actor_track(struct perfetto_sink *s, const struct event *ev, bool cur_known)
{
	if (cur_known && ev->cur) {
		const struct coro *c = model_find(s->m, ev->pid, ev->cur);

		if (c) {
			struct pf_coro *pc = coro_ready(s, ev->ts, c);

			if (!pc->lane)
				return pc->track;
		}
	}
	thread_ready(s, ev->ts, ev->pid, ev->tid);
	return UUID_THREAD(ev->tid);
}

/*
 * A span's slice name. An empty one (span_begin(""), or a string that could
 * not be read) would make a slice without a name, blank in the UI and invalid
 * to the checker: it gets a placeholder here; the JSONL keeps it empty.
 */
static void span_label(char *dst, size_t n, const struct event *ev)
{
	utf8_sanitize(dst, n, ev->span.name.s, ev->span.name.len);
	if (!dst[0])
		snprintf(dst, n, "%s",
			 ev->str_unreadable ? "(unreadable span)" : "(unnamed span)");
}

static void span_begin(struct perfetto_sink *s, const struct event *ev)
{
	if (ev->over_cap)
		return; /* a span of a coroutine not followed: no track of it */
	if (ev->c) {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);
		char name[2 * LABEL_MAX + 4], span[LABEL_MAX];

		/* The span encloses the state slices inside it: close, open span, reopen. */
		if (pc->state_open)
			slice_end(s, ev->ts, pc->track);
		span_label(span, sizeof(span), ev);
		if (pc->lane) {
			snprintf(name, sizeof(name), "%s: %s", pc->label, span);
		} else {
			snprintf(name, sizeof(name), "%s", span);
		}
		slice_begin(s, ev->ts, pc->track, name, NULL, 0);
		pc->nspans++;
		begin_state(s, ev->c, pc, ev->ts, false);
	} else {
		struct pf_thread *t = thread_ready(s, ev->ts, ev->pid, ev->tid);
		char span[LABEL_MAX];

		span_label(span, sizeof(span), ev);
		slice_begin(s, ev->ts, UUID_THREAD(ev->tid), span, NULL, 0);
		t->nspans++;
	}
}

/* A span's slice ends; a slow one is marked (searchable args) and ends the finding's flow. */
static void span_slice_end(struct perfetto_sink *s, u64 ts, u64 track, u32 depth)
{
	for (u32 i = 0; i < s->nslow; i++) {
		if (s->slow[i].depth != depth)
			continue;
		struct pf_arg a[3] = {
			{"slow_span", A_UINT, 1},
			{"slow_threshold_ns", A_UINT, s->slow[i].threshold},
			{"slow_cause", A_STR, 0, finding_span_cause_name(s->slow[i].cause)},
		};
		struct pf_ev e = {.type = TYPE_SLICE_END, .track = track, .args = a, .nargs = 3,
				  .term_flow = {s->slow[i].flow, 0}};

		track_event(s, ts, &e);
		s->slow[i].depth = 0;
		return;
	}
	slice_end(s, ts, track);
}

static void span_end(struct perfetto_sink *s, const struct event *ev)
{
	if (ev->over_cap)
		return;
	if (!ev->span.matched) {
		char span[LABEL_MAX];
		struct pf_arg a = {"name", A_STR, 0, span};

		utf8_sanitize(span, sizeof(span), ev->span.name.s, ev->span.name.len);

		instant(s, ev->ts, actor_track(s, ev, ev->span.owner_known), "unmatched span_end",
			&a, 1, 0, 0, 0);
		return;
	}
	if (ev->c) {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);
		u32 keep = ev->c->nspans;

		if (pc->state_open)
			slice_end(s, ev->ts, pc->track);
		pc->state_open = false;
		while (pc->nspans > keep) {
			span_slice_end(s, ev->ts, pc->track, pc->nspans);
			pc->nspans--;
		}
		begin_state(s, ev->c, pc, ev->ts, false);
	} else {
		struct pf_thread *t = thread_ready(s, ev->ts, ev->pid, ev->tid);
		const struct coro_thread *mt = model_thread_peek(s->m, ev->pid, ev->tid);
		u32 keep = mt ? mt->nspans : 0;

		while (t->nspans > keep) {
			span_slice_end(s, ev->ts, UUID_THREAD(ev->tid), t->nspans);
			t->nspans--;
		}
	}
	/* A slow span with no slice of ours to close (none should be): its arrow still ends. */
	for (u32 i = 0; i < s->nslow; i++)
		if (s->slow[i].depth)
			instant(s, ev->ts, actor_track(s, ev, ev->span.owner_known), "slow span",
				NULL, 0, 0, s->slow[i].flow, 0);
	s->nslow = 0;
}

static void perfetto_event(void *ctx, const struct event *ev)
{
	struct perfetto_sink *s = ctx;

	note_loss(s);
	/* A coroutine not followed (the model's caps) has no track; the counters say so. */
	if (ev->over_cap)
		return;
	switch (ev->kind) {
	case EV_CREATE: {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);
		struct pf_arg a = {"parent", A_PTR, ev->create.parent};
		struct pf_arg b = {"child", A_PTR, ev->create.id};
		u64 flow = ++s->next_flow;

		pfw_stack_next(&s->w, ev->c->create_stack); /* the spawn site */
		instant(s, ev->ts, pc->track, pc->lane ? "create (lane)" : "create", &a, 1, 0, 0, 0);
		instant(s, ev->ts, actor_track(s, ev, ev->cur_known), "spawn", &b, 1, flow, 0, 0);
		pc->create_flow = flow;
		break;
	}
	case EV_NAME:
	case EV_ANNOUNCE: {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);
		char label[sizeof(pc->label)];

		/*
		 * An announce names a coroutine its own state change may have
		 * given a track already (the model makes it, then names it).
		 */
		label_of(ev->c, label, sizeof(label));
		if (ev->kind == EV_ANNOUNCE && !strcmp(label, pc->label))
			break;
		memcpy(pc->label, label, sizeof(label));
		pc->label_iid = 0;
		memset(pc->lane_iids, 0, sizeof(pc->lane_iids));
		/* A track that cannot merge takes the newest descriptor's name. */
		if (!pc->lane)
			describe_coro(s, ev->ts, ev->c, pc);
		break;
	}
	case EV_READY: {
		const struct coro *c = ev->c;
		struct pf_coro *pc = coro_ready(s, ev->ts, c);
		struct pf_arg a = {"coroutine", A_PTR, c->id};
		u64 flow = 0;

		/* One arrow per wake that leads to a run; later wakes before it add none. */
		if ((c->state == CS_RUNNABLE || c->ready_pending) && !pc->ready_flow) {
			flow = ++s->next_flow;
			pc->ready_flow = flow;
		}
		instant(s, ev->ts, actor_track(s, ev, ev->cur_known), "wake", &a, 1, flow, 0, 0);
		break;
	}
	case EV_SPAN_BEGIN:
		span_begin(s, ev);
		break;
	case EV_OFFCPU_BEGIN:
	case EV_OFFCPU_END:
		offcpu(s, ev);
		break;
	case EV_SPAN_END:
		span_end(s, ev);
		break;
	case EV_PROCESS: {
		struct pf_proc *pp = proc_get(s, ev->pid);

		describe_process(s, ev->ts, pp, model_proc_peek(s->m, ev->pid));
		break;
	}
	case EV_THREAD: {
		struct pf_thread *t = hmap_get(&s->threads, ev->pid, ev->tid);

		if (t)
			t->described = false; /* describe again, now with its name */
		thread_ready(s, ev->ts, ev->pid, ev->tid);
		break;
	}
	case EV_PROC_GONE:
	case EV_PROC_EXIT: {
		s32 status = ev->proc_exit.status;
		struct pf_arg a;
		struct pf_proc *pp = proc_ready(s, ev->ts, ev->pid);

		if (status >= 0 && WIFSIGNALED(status))
			a = (struct pf_arg){"signal", A_INT, (u64)WTERMSIG(status)};
		else if (status >= 0)
			a = (struct pf_arg){"exit_code", A_INT, (u64)WEXITSTATUS(status)};
		else
			a = (struct pf_arg){"exit_code", A_STR, 0, "unknown"};
		instant(s, ev->ts, UUID_PROCESS(pp->pid), "process exit", &a, 1, 0, 0, 0);
		break;
	}
	case EV_EXEC: {
		struct pf_proc *pp = proc_ready(s, ev->ts, ev->pid);
		char comm[64];
		struct pf_arg a = {"comm", A_STR, 0, comm};

		utf8_sanitize(comm, sizeof(comm), ev->comm.comm.s, ev->comm.comm.len);
		instant(s, ev->ts, UUID_PROCESS(pp->pid), "exec", &a, 1, 0, 0, 0);
		break;
	}
	default:
		break;
	}
	if (ev->per_thread || ev->kind == EV_PROC_EXIT || ev->kind == EV_PROC_GONE ||
	    ev->kind == EV_EXEC) {
		const struct coro_process *mp = ev->proc;
		struct pf_proc *pp = proc_ready(s, ev->ts, ev->pid);

		if (mp) {
			counter(s, ev->ts, pp, CNT_LIVE, mp->live);
			counter(s, ev->ts, pp, CNT_RUNNABLE, mp->runnable);
		}
	}
}

static void perfetto_coroutine_end(void *ctx, const struct coro *c)
{
	struct perfetto_sink *s = ctx;
	struct pf_coro *pc = coro_of(s, c);
	struct pf_proc *pp;
	struct pf_arg a[3];
	int n = 0;
	const char *name;
	char buf[64];

	if (!pc)
		return;
	if (pc->state_open)
		slice_end(s, c->end_ts, pc->track);
	while (pc->nspans) {
		slice_end(s, c->end_ts, pc->track);
		pc->nspans--;
	}
	if (pc->lane)
		a[n++] = (struct pf_arg){"coroutine", A_PTR, c->id};
	switch (c->end) {
	case CE_EXIT:
		name = "exit";
		a[n++] = (struct pf_arg){"status", A_INT, (u64)c->status};
		break;
	case CE_PROCESS_EXIT:
		name = "process exited";
		break;
	case CE_SUPERSEDED:
		name = "superseded (exit lost)";
		break;
	default:
		snprintf(buf, sizeof(buf), "trace end: %s", coro_state_name(c->end_state));
		name = buf;
		if (c->end_state == CS_SUSPENDED) {
			a[n++] = (struct pf_arg){"reason", A_STR, 0, coro_reason_name(c->end_reason)};
			if (c->end_obj)
				a[n++] = (struct pf_arg){"obj", A_PTR, c->end_obj};
		}
	}
	/*
	 * Every arrow that starts must end: a wake that never led to a run ends
	 * here. The name is interned by its text: it may be in buf.
	 */
	track_event(s, c->end_ts,
		    &(struct pf_ev){.type = TYPE_INSTANT, .track = pc->track, .name = name,
				    .args = a, .nargs = n, .term_flow = {pc->create_flow, pc->ready_flow}});
	pp = proc_get(s, c->pid);
	if (pc->lane) {
		if (pp->nfree == pp->cap_free) {
			pp->cap_free = pp->cap_free ? pp->cap_free * 2 : 64;
			pp->free_lanes = xrealloc(pp->free_lanes, pp->cap_free * sizeof(u32));
		}
		pp->free_lanes[pp->nfree++] = pc->lane_no;
	}
	hmap_del(&s->coros, c->uid, 0);
	if (s->slot >= 0)
		model_set_priv(c->priv, s->slot, NULL);
	free(pc);
}

/*
 * A finding: an instant when it was found (a stall when the coroutine
 * resumed, a lost wakeup when the trace ended), on the process's "Findings"
 * row and on the coroutine's own row, with when it started and how long it
 * lasted as arguments.
 */
static void perfetto_finding(void *ctx, const struct finding *f)
{
	struct perfetto_sink *s = ctx;
	struct pf_proc *pp = proc_ready(s, f->ts, f->pid);
	const struct coro *c = f->uid ? model_find(s->m, f->pid, f->id) : NULL;
	struct pf_coro *pc = c && c->uid == f->uid ? coro_of(s, c) : NULL;
	u64 at = f->ts + f->dur;
	char name[LABEL_MAX + 64], label[LABEL_MAX], span[LABEL_MAX];
	u32 have = finding_fields(f);
	struct pf_arg a[8];
	int n = 0;
	u64 flow = 0;

	if (!pp->findings_described) {
		struct pf_desc d = {.uuid = UUID_FINDINGS(f->pid), .parent = UUID_PROCESS(f->pid),
				    .name = "Findings",
				    .description = "what corobpf's detectors found (docs/perfetto.md)"};

		describe(s, at, &d);
		pp->findings_described = true;
	}
	if (finding_names_id(f)) {
		if (f->name[0])
			utf8_sanitize(label, sizeof(label), f->name, CORO_STR_LEN);
		else
			snprintf(label, sizeof(label), "0x%llx", (unsigned long long)f->id);
	} else {
		snprintf(label, sizeof(label), "thread %u", f->tid);
	}
	snprintf(name, sizeof(name), "%s: %s", finding_kind_name(f->kind), label);
	a[n++] = (struct pf_arg){"started_ns", A_UINT, f->ts};
	a[n++] = (struct pf_arg){"duration_ns", A_UINT, f->dur};
	a[n++] = (struct pf_arg){"coroutine", A_PTR, f->id};
	if (have & FF_WAIT) {
		a[n++] = (struct pf_arg){"reason", A_STR, 0, coro_reason_name(f->reason)};
		if (f->obj)
			a[n++] = (struct pf_arg){"obj", A_PTR, f->obj};
		if (have & FF_AWAITER) {
			utf8_sanitize(span, sizeof(span), f->awaiter, CORO_STR_LEN);
			a[n++] = (struct pf_arg){"awaiter", A_STR, 0, span};
		}
	}
	if (have & FF_WAKER)
		a[n++] = (struct pf_arg){"waker", A_PTR, f->waker};
	if (have & FF_SPAN) {
		utf8_sanitize(span, sizeof(span), f->span, CORO_STR_LEN);
		a[n++] = (struct pf_arg){"span", A_STR, 0, span};
	}
	if (have & FF_SLOW) {
		a[n++] = (struct pf_arg){"cause", A_STR, 0, finding_span_cause_name(f->cause)};
		if (have & FF_CAUSE_WAIT)
			a[n++] = (struct pf_arg){"reason", A_STR, 0, coro_reason_name(f->reason)};
		/* An arrow from here to the span's slice, which its span_end closes next. */
		if (s->nslow < ARRAY_SIZE(s->slow)) {
			flow = ++s->next_flow;
			s->slow[s->nslow].depth = f->span_depth;
			s->slow[s->nslow].cause = f->cause;
			s->slow[s->nslow].threshold = f->threshold;
			s->slow[s->nslow++].flow = flow;
		}
	}
	if (have & FF_STORM) {
		a[n++] = (struct pf_arg){"children", A_UINT, f->count};
		a[n++] = (struct pf_arg){"peak_per_s", A_UINT, f->peak};
	}
	if ((have & FF_KEY) && n < 7) {
		a[n++] = (struct pf_arg){"key_frame", A_STR, 0, f->key_frame};
		a[n++] = (struct pf_arg){"samples", A_UINT, f->samples};
	}
	{
		struct pf_ev ev = {.type = TYPE_INSTANT, .track = UUID_FINDINGS(f->pid),
				   .name = name, .args = a, .nargs = n, .flow = flow};

		pfw_stack_next(&s->w, f->stack);
		track_event(s, at, &ev);
		ev.flow = 0;
		if (pc) {
			pfw_stack_next(&s->w, f->stack);
			ev.track = pc->track;
			ev.name = finding_kind_name(f->kind);
			ev.name_lit = true;
			track_event(s, at, &ev);
		}
	}
}

static void perfetto_begin(void *ctx, const struct capture_info *ci)
{
	struct perfetto_sink *s = ctx;

	pfw_sequence_start(&s->w, ci->start_ts);
}

static void perfetto_finish(void *ctx, const struct model *m)
{
	struct perfetto_sink *s = ctx;
	size_t it = 0;
	void *v;
	u64 ts = m->last_ts;
	struct pf_desc root = {.uuid = UUID_ROOT, .name = "corobpf"};
	/* Five of its own and the counters; track_event() takes PF_MAX_ARGS (test_perfetto.c). */
	struct pf_arg a[5 + COUNTERS_MAX];
	int n = 0;

	/* Thread-owned spans still open, and stray running slices, end with the trace. */
	while (hmap_next(&s->threads, &it, NULL, NULL, &v)) {
		struct pf_thread *t = v;

		if (t->off_open) {
			slice_end(s, ts, UUID_THREAD(t->tid));
			t->off_open = false;
		}
		for (; t->nspans; t->nspans--)
			slice_end(s, ts, UUID_THREAD(t->tid));
		if (t->running_open) {
			slice_end(s, ts, UUID_THREAD(t->tid));
			t->running_open = false;
		}
	}
	describe(s, ts, &root);
	a[n++] = (struct pf_arg){"events", A_UINT, m->events};
	a[n++] = (struct pf_arg){"coroutines", A_UINT, m->coroutines};
	for_each_counter(c)
		if (c->perfetto && !(c->flags & CF_STACKS))
			a[n++] = (struct pf_arg){c->perfetto, A_UINT, counter_value(c, m)};
	if (m->sym || counters_stacks_missing(m)) {
		/* --stacks */
		for_each_counter(c)
			if (c->perfetto && (c->flags & CF_STACKS))
				a[n++] = (struct pf_arg){c->perfetto, A_UINT, counter_value(c, m)};
		a[n++] = (struct pf_arg){"samples", A_UINT, m->samples};
	}
	a[n++] = (struct pf_arg){"end", A_STR, 0, coro_end_reason_name(m->end_reason)};
	if (m->input_error)
		a[n++] = (struct pf_arg){"capture damaged", A_STR, 0, m->input_error};
	instant(s, ts, UUID_ROOT, "capture summary", a, n, 0, 0, 0);
}

struct perfetto_sink *perfetto_sink_new(struct obuf *ob, struct model *m, u32 max_tracks,
				       struct model_observer *obs, struct finding_sink *fs)
{
	struct perfetto_sink *s = xcalloc(1, sizeof(*s));

	pfw_init(&s->w, ob);
	s->w.stack_of = stack_of;
	s->w.stack_ctx = m;
	s->m = m;
	s->slot = -1;
	s->max_tracks = max_tracks;
	hmap_init(&s->procs);
	hmap_init(&s->threads);
	hmap_init(&s->coros);
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->slot = &s->slot;
	obs->begin = perfetto_begin;
	obs->event = perfetto_event;
	obs->enter = perfetto_enter;
	obs->interval = perfetto_interval;
	obs->coroutine_end = perfetto_coroutine_end;
	obs->finish = perfetto_finish;
	fs->ctx = s;
	fs->finding = perfetto_finding;
	return s;
}

int perfetto_sink_error(struct perfetto_sink *s)
{
	return pfw_error(&s->w);
}

static void free_table(struct hmap *h)
{
	size_t it = 0;
	void *v;

	while (hmap_next(h, &it, NULL, NULL, &v))
		free(v);
	hmap_free(h);
}

void perfetto_sink_free(struct perfetto_sink *s)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&s->procs, &it, NULL, NULL, &v))
		free(((struct pf_proc *)v)->free_lanes);
	free_table(&s->procs);
	free_table(&s->threads);
	free_table(&s->coros);
	pfw_free(&s->w);
	free(s);
}
