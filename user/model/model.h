/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The model: turns the time-ordered record stream into the life of every
 * coroutine (a state machine per coroutine incarnation) and a view of every
 * thread (which coroutine it runs). Detectors and outputs read this model
 * through the observer callbacks, each record as a decoded event
 * (user/model/event.h), and through the accessors below; none of them sees a
 * record's layout or re-derives state from raw events.
 *
 * Rules it keeps:
 * - Attaching mid-life: a coroutine first seen in a switch or ready is
 *   created implicitly; its creation time is unknown and nothing before its
 *   first event is counted.
 * - Ids reused after exit are new incarnations, each with its own serial
 *   `uid`; they are never merged.
 * - Lost events (hdr.lost_before on a thread): the coroutine that thread
 *   was running goes to state UNKNOWN from the thread's last certain event
 *   until its next certain event. No transition is invented.
 * - Memory is bounded by live coroutines, threads and open spans: a
 *   finished coroutine is handed to the observers and freed. The live
 *   coroutines followed are capped (model_limit(): per process and in
 *   all). A coroutine first seen while a cap is reached is not followed:
 *   its events reach the observers with no coroutine (`over_cap`) and are
 *   counted; once there is room, its next event makes it followed as one
 *   seen mid-life (its creation unknown), as after an attach. Nothing is
 *   guessed: what is followed is exact, what is not is counted.
 * - Work per record is bounded or amortized, whatever the program does: a
 *   span_end in a deep stack finds its span through an index by name, not
 *   a search of the open spans (a program may open thousands and end names
 *   it never opened).
 */
#ifndef COROBPF_MODEL_H
#define COROBPF_MODEL_H

#include "capture_info.h"
#include "coro_abi.h"
#include "event.h"
#include "spans.h"
#include "stacks.h"
#include "util.h"

struct coro_event_hdr;

enum coro_state {
	CS_NEW = 0,	  /* created, not yet runnable */
	CS_RUNNABLE = 1,  /* ready, waiting for a worker */
	CS_RUNNING = 2,	  /* on a thread */
	CS_SUSPENDED = 3, /* switched out for `reason`, waiting on `obj` */
	CS_UNKNOWN = 4,	  /* events about it were lost, or first seen without a state */
	CS_EXITED = 5,
	CS_NSTATES
};

#define CORO_NREASONS 6 /* CORO_R_UNKNOWN..CORO_R_DONE */
/* Samples kept per run for its key frame (99 Hz: ten seconds; longer runs: a uniform sample). */
#define CORO_RUN_SAMPLES_MAX 1024

/*
 * Observers may keep their own state beside the model's: coroutines, threads
 * and processes each carry one pointer per observer (the observer's slot,
 * given when it is added; set through model_set_priv()). The model never
 * touches them; an observer that keeps memory there must also own it
 * elsewhere, since the model frees the object.
 */
#define MODEL_MAX_OBSERVERS 8

struct coro_process;
struct coro_thread;

enum coro_end {
	CE_EXIT = 1,	     /* its exit probe fired */
	CE_PROCESS_EXIT = 2, /* its process ended first */
	CE_TRACE_END = 3,    /* the trace ended while it lived */
	CE_SUPERSEDED = 4,   /* created again under the same id without an exit (exit lost) */
	CE_EXEC = 5,	     /* its process called exec: a new program, its coroutines gone */
};


/*
 * Per live coroutine, the model's largest cost (docs/design.md, "Memory"):
 * fields are grouped by size so that the struct has no padding holes.
 */
struct coro {
	u64 uid;     /* serial over the whole trace, 1..: tells incarnations of an id apart */
	u64 id;	     /* the scheduler's id */
	struct coro_process *proc;
	struct coro_thread *thread; /* the thread it runs on (CS_RUNNING) or last ran on */
	void *priv[MODEL_MAX_OBSERVERS];
	u64 parent;  /* parent id, 0 = none */
	u64 parent_uid; /* parent incarnation if it was known when this one was created */
	/*
	 * The switch-function path: the context it last switched to, and how
	 * many times it switched to another than the last (model.c,
	 * note_scheduler()); `scheduler`: it was some thread's scheduler context.
	 */
	u64 last_to;
	u64 first_ts;	   /* first event about it */
	u64 created_ts;	   /* valid if created_seen */
	u64 end_ts;
	s64 status;	   /* valid if end == CE_EXIT */
	u64 state_since;
	u64 obj;	/* CS_SUSPENDED */
	/*
	 * Since its last switch out: that wait's awaiter type (a C++20 wait;
	 * owned; NULL: none, cxxmap.h). Set before its new state begins.
	 */
	char *awaiter;
	u64 end_obj;
	u64 waker;	    /* coroutine that last made it ready (id), valid if has_waker */
	u64 ready_ts;

	u64 t_state[CS_NSTATES];
	u64 t_suspended[CORO_NREASONS];
	/* While running: its thread off the CPU, of which blocked in the kernel / on a run queue. */
	u64 t_offcpu, t_blocked, t_runq;
	/* ...and of t_runq, the waits for a CPU after a blocked stretch (woken, not yet run). */
	u64 t_woken_runq;
	u64 switch_ins;
	u64 readies;
	u64 longest_susp, longest_susp_start;
	u64 longest_susp_obj;

	/* --sample-hz: the stacks sampled during its current (or last) run, and how many. */
	u32 *run_samples;
	u64 run_samples_total; /* of the run, those not kept included */
	u32 nrun_samples, cap_run_samples;

	u32 *tids; /* distinct threads it ran on, in first-run order (tids_few until more) */
	u32 ntids, cap_tids;
	u32 tids_few[4];

	struct coro_span *spans; /* open spans, innermost last */
	u64 spans_unmatched_end;
	u32 nspans, cap_spans;

	u32 pid;
	u32 tid;	/* thread it runs on (CS_RUNNING), or last ran on */
	u32 reason;	/* CS_SUSPENDED */
	enum coro_end end;
	enum coro_state state;
	enum coro_state end_state; /* state when it ended (for CE_TRACE_END: where it was stuck) */
	u32 end_reason;
	u32 longest_susp_reason;
	/* --stacks: capture stack ids (model_stack()), 0 if none. */
	u32 create_stack; /* where it was created (the spawn site) */
	u32 park_stack;	  /* where it last switched out (its suspension point) */
	u32 to_changes;	  /* switches to another context than last_to */

	char *name_long; /* owned: a name longer than name holds (CORO_NAME_MAX), or NULL */
	char name[CORO_STR_LEN]; /* its name, or the first CORO_STR_LEN - 1 bytes of a longer one */
	bool name_truncated;
	bool created_seen; /* false: attached mid-life */
	bool announced;	   /* listed by its scheduler for a tracer that attached (apply.c) */
	bool fiber_dispatcher; /* Boost.Fiber's dispatcher context (model.c, fiber_dispatcher()) */
	bool uncertain;	   /* some of its time is CS_UNKNOWN */
	bool scheduler;	   /* it was some thread's scheduler context (last_to, to_changes) */
	bool ready_pending; /* made ready while still running (a yield, or a wake before sleep) */
	bool has_waker;
	bool longest_open; /* the longest suspension was still open at the end */
	bool spans_indexed; /* deep: its spans are in the span table's index */
};

/* Its whole name (up to CORO_NAME_MAX - 1 bytes), "" if it has none. */
static inline const char *coro_name(const struct coro *c)
{
	return c->name_long ? c->name_long : c->name;
}

struct coro_thread {
	u32 pid, tid;
	char comm[16];
	u64 cur;       /* coroutine id current on it; 0 = the scheduler/thread itself */
	bool cur_known;
	bool cur_exited; /* cur has exited but not yet switched out */
	bool fiber_dispatcher_seen; /* its Boost.Fiber dispatcher is known */
	u64 last_ts;   /* its last event */
	bool off;      /* off the CPU since off_ts (the kernel's view) */
	u64 off_ts;
	u32 off_state;
	u32 off_stack;	 /* --stacks: where its coroutine blocked (off since off_ts), or 0 */
	/* Its process's made_ready and runnable when it left (the evidence of work waiting). */
	u64 off_made_ready, off_runnable;
	/*
	 * The coroutine running on it when it left (uid, 0: none), and the time of its first
	 * record of its own since (0: none yet): where a stretch ended late really ended.
	 */
	u64 off_coro_id, off_coro_uid, off_back_ts;
	/*
	 * The switch-function path: its scheduler context (a hub, a main loop),
	 * the one of its contexts that most often switched to another context
	 * than the one it switched to last (sched_changes times); 0: none yet.
	 */
	u64 sched_id, sched_uid;
	u32 sched_changes;
	struct coro_span *spans; /* spans opened outside any coroutine */
	u32 nspans, cap_spans;
	bool spans_indexed;
	void *priv[MODEL_MAX_OBSERVERS];
};

struct coro_process {
	u32 pid;
	u32 mode; /* enum coro_proc_mode */
	char comm[16];
	char *exe;
	bool exited;
	s32 exit_status;
	u64 start_ts, exit_ts;
	/*
	 * Taken on running (mode CORO_PROC_ATTACHED): from when its trace is
	 * whole, every probe attached (0: not known, a capture older than this).
	 * A span_end whose begin may be older is no bug (apply.c, begun_before()).
	 */
	u64 traced_from;
	u64 live;     /* coroutines alive now */
	u64 open_spans; /* spans open now, in its coroutines and threads (model_limit_spans()) */
	u64 runnable; /* of which runnable */
	u64 made_ready; /* readies that made a coroutine runnable (not of one running) */
	u64 created;  /* incarnations seen */
	/*
	 * What exists when a tracer attaches (usdt/corobpf.h): coroutines its
	 * scheduler listed, and lists it completed (CORO_ANNOUNCE_DONE()).
	 */
	u64 announced;
	u32 announce_lists;
	/*
	 * Traced through the switch-function path (uprobes on context functions
	 * of unmodified libraries) rather than corobpf probes: the families used
	 * (1 << enum coro_ctx_family) and, per object, "family: path: sites".
	 * Such coroutines have no ready events: nothing is known of what they
	 * wait for.
	 */
	u32 switch_families;
	u32 switch_stepped; /* switch sites single-stepped by the kernel (the slow kind) */
	char *switch_desc;
	void *priv[MODEL_MAX_OBSERVERS];
};

/* Counters of what the model had to tolerate. Reported in every output. */
struct model_anomalies {
	u64 lost_events;	/* sum of hdr.lost_before */
	u64 switch_from_mismatch; /* switch `from` was not the thread's current coroutine */
	u64 cur_desync;		/* the model's view of a thread disagreed with the BPF side's */
	u64 running_elsewhere;	/* switched in while running on another thread */
	u64 recreate_live;	/* create for an id that had not exited */
	u64 span_unmatched_end;
	u64 late_records;	/* records older than ones already applied */
	u64 unknown_records;	/* kinds this version does not know */
	u64 unknown_pid;	/* events from processes not announced */
	/*
	 * offcpu_end records flagged CORO_EVF_OFFCPU_LATE: the kernel's return
	 * of the thread went unseen, the stretch ended at its next record. Said
	 * by the text summary when not zero; in no file's counters yet (a new
	 * key would change every trailer).
	 */
	u64 offcpu_late;
	/*
	 * The caps on live coroutines (model_limit()): creates of coroutines
	 * not followed because the process's cap, or the cap of all, was
	 * reached; and every event that found its coroutine not followed (such
	 * a create, or a name, ready, exit, span or a switch's side).
	 */
	u64 over_process_cap;
	u64 over_cap;
	u64 events_over_cap;
	/*
	 * The caps on open spans (model_limit_spans()): span begins not kept
	 * because the process's cap, or the cap of all, was reached. Their
	 * ends close nothing else and are no anomaly.
	 */
	u64 spans_over_process_cap;
	u64 spans_over_cap;
	/*
	 * Span ends that closed nothing, in a process taken on running, whose
	 * begin may be older than the trace (apply.c, begun_before()): no
	 * anomaly, no finding.
	 */
	u64 span_begun_before_trace;
	/*
	 * The detectors' blocking calls and long runs let go unconfirmed for
	 * want of room while they awaited their evidence (user/model/analyze.c):
	 * a process's that awaited a ready that comes late (the last 64 held),
	 * and a thread's on the switch-function path that awaited whether work
	 * waited (the first 256 held). Each may be a finding not made.
	 */
	u64 findings_unheld;
	u64 findings_unheld_thread;
};

struct model;

/* Observers: the detectors and the outputs (the pipeline adds them). Any callback may be NULL. */
struct model_observer {
	void *ctx;
	/* If set, where model_add_observer() writes the observer's priv[] slot (-1: none). */
	int *slot;
	void (*begin)(void *ctx, const struct capture_info *ci);
	/* After the model applied a record (events and user records alike), decoded. */
	void (*event)(void *ctx, const struct event *ev);
	/* c entered its current state (c->state, c->tid, c->reason, c->obj) at ts; also at creation. */
	void (*enter)(void *ctx, const struct coro *c, u64 ts);
	/* A state interval of c ended: [start, end) in `state` (before c's fields moved on). */
	void (*interval)(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			 u64 end, u32 tid, u32 reason, u64 obj);
	/* c ended (exit, process exit, trace end, superseded); freed after the call. */
	void (*coroutine_end)(void *ctx, const struct coro *c);
	void (*process)(void *ctx, const struct coro_process *p);
	void (*finish)(void *ctx, const struct model *m);
	/*
	 * A span instance ended (spans.h struct span_done), once each: closed,
	 * before the span_end event is handed out; unclosed, before the
	 * coroutine_end() of its coroutine, before the process_exit event of a
	 * thread's span, or before finish(). The per-name statistics
	 * (m->spans.stats) are read in finish().
	 */
	void (*span_done)(void *ctx, const struct span_done *d);
};

/* The caps on live coroutines the model follows by default (--max-coroutines...). */
#define MODEL_MAX_LIVE_DEFAULT 1000000
#define MODEL_MAX_LIVE_PROCESS_DEFAULT 500000
/* ...and on the spans open at once (--max-open-spans...): 240 bytes each. */
#define MODEL_MAX_SPANS_DEFAULT 1000000
#define MODEL_MAX_SPANS_PROCESS_DEFAULT 500000

struct model {
	struct capture_info *ci;
	u64 max_live, max_live_process; /* model_limit(): 0, no cap */
	u64 max_spans, max_spans_process; /* model_limit_spans(): 0, no cap */
	u64 open_spans;			  /* spans open now, every owner's */
	/*
	 * Span begins refused by those caps, per owner (a coroutine or thread
	 * with some): (owner, 0) -> struct span_refused. Their hashes, innermost
	 * last, let their ends be told from the ends of spans kept; as many are
	 * remembered as the cap of all, past that they are only counted.
	 */
	struct hmap span_refused;
	u64 refused_hashes;
	bool span_over_cap; /* the record being applied is a span event the caps refused */
	/* The record being applied found its coroutine not followed: wholly, or a switch's side. */
	bool over_cap, over_cap_part;
	struct hmap coros;   /* (pid, id) -> struct coro * */
	struct hmap threads; /* (pid, tid) -> struct coro_thread * */
	struct hmap procs;   /* (pid, 0) -> struct coro_process * */
	struct span_table spans; /* the open spans of every owner (spans.h) */
	struct coro_thread *last_thread; /* model_thread()'s last answer (NULL when threads are freed) */
	struct coro_process *last_proc;	 /* model_proc_peek()'s last answer */
	struct model_observer *obs;
	size_t nobs;
	u64 next_uid;
	u64 first_ts, last_ts;
	u64 events_by_kind[256];
	u64 events;	   /* BPF-born records applied (probes and off-CPU stretches) */
	u64 samples;	   /* perf-event samples of running coroutines (--sample-hz) */
	u64 samples_nostack; /* of them, those that carry no stack (the summary says why) */
	u64 coroutines;	   /* incarnations seen */
	u64 live, peak_live;
	struct capture_stats stats; /* the latest stats record's counters */
	bool have_stats;
	u32 end_reason;	   /* enum coro_end_reason, 0 = no end record */
	bool finished;
	const char *input_error; /* the input ended in damage: where and what (replay) */
	/* The coroutine being ended (its last interval closing, then coroutine_end()). */
	const struct coro *ending;
	/* The event being applied (model_applying()) and the serial of the last one. */
	const struct event *applying;
	u64 applied;
	struct coro *named; /* a coroutine the record being applied gave a derived name */
	/*
	 * Where the pipeline's cxxmap says the awaiter's type of the SWITCH it
	 * passes on (cxxmap.h: NULL for none); NULL without a cxxmap.
	 */
	const char *const *cxx_awaiter;
	struct model_anomalies anom;
	struct symbolizer *sym; /* --stacks: the stacks defined so far, symbolized (NULL: none) */
	u64 rng;		/* for the samples kept of long runs (fixed seed: replays agree) */
};

void model_init(struct model *m, struct capture_info *ci);
/*
 * The most live coroutines the model follows: in all, and of one process
 * (0: no cap). Before the first record; model_init() sets the defaults.
 */
void model_limit(struct model *m, u64 live, u64 live_per_process);
/*
 * The most spans open at once the model keeps: in all, and in one process
 * (0: no cap). A span begun beyond is not kept: its begin and its end reach
 * the observers marked over_cap, its end closes nothing else, and it is
 * counted (spans_over_cap, spans_over_process_cap). Before the first record;
 * model_init() sets the defaults.
 */
void model_limit_spans(struct model *m, u64 spans, u64 spans_per_process);
/*
 * Returns the observer's slot in the priv[] arrays (also written to
 * *obs->slot), or -1 when there are too many.
 */
int model_add_observer(struct model *m, const struct model_observer *obs);
void model_begin(struct model *m);
void model_apply(struct model *m, const struct coro_event_hdr *rec);
/* A mapping or stack definition (CORO_REC_MAP, CORO_REC_STACK): taken at once, not in time order. */
void model_define(struct model *m, const struct coro_event_hdr *rec);
/* A stack named by a record, symbolized; NULL if none. */
const struct sym_stack *model_stack(const struct model *m, u32 id);
/* End of input: close every live coroutine at the last timestamp. */
void model_finish(struct model *m);
void model_free(struct model *m);

struct coro *model_find(struct model *m, u32 pid, u64 id);
struct coro_thread *model_thread_lookup(struct model *m, u32 pid, u32 tid);
struct coro_process *model_proc_lookup(struct model *m, u32 pid);

/*
 * The thread (made if new) and the process (NULL if unknown), one-entry
 * caches in front of their maps: records come in runs from one thread.
 */
static inline struct coro_thread *model_thread(struct model *m, u32 pid, u32 tid)
{
	struct coro_thread *t = m->last_thread;

	return t && t->tid == tid && t->pid == pid ? t : model_thread_lookup(m, pid, tid);
}

static inline struct coro_process *model_proc_peek(struct model *m, u32 pid)
{
	struct coro_process *p = m->last_proc;

	return p && p->pid == pid ? p : model_proc_lookup(m, pid);
}

struct coro_process *model_process(struct model *m, u32 pid);

/* ---- for observers: lookups and iteration without the model's tables ---- */

/* The thread (pid, tid) if the model holds it, else NULL. */
const struct coro_thread *model_thread_peek(const struct model *m, u32 pid, u32 tid);
/* The process if the model knows it, else NULL (no cache: for observers' rare lookups). */
const struct coro_process *model_process_peek(const struct model *m, u32 pid);
/*
 * Iteration over the processes the model knows, the threads it holds (both
 * in an order that depends only on the input): `it` starts at 0; NULL at
 * the end. The model must not change meanwhile.
 */
const struct coro_process *model_next_process(const struct model *m, size_t *it);
const struct coro_thread *model_next_thread(const struct model *m, size_t *it);
static inline u64 model_nprocesses(const struct model *m)
{
	return m->procs.len;
}

/*
 * Iteration over the live coroutines (an ended one is handed to the
 * observers, then no longer listed), in an order that depends only on the
 * input: `it` starts at 0; NULL at the end. The model must not change
 * meanwhile: a live view (top.h) iterates while it holds the capture
 * thread off.
 */
static inline const struct coro *model_next_coro(const struct model *m, size_t *it)
{
	void *v;

	return hmap_next(&m->coros, it, NULL, NULL, &v) ? v : NULL;
}

/* The event being applied (observers called while it is: enter(), interval()), or NULL. */
static inline const struct event *model_applying(const struct model *m)
{
	return m->applying;
}

/* The coroutine being ended (its last interval(), then coroutine_end()), or NULL. */
static inline const struct coro *model_ending(const struct model *m)
{
	return m->ending;
}

/* A BPF loss counter (enum coro_stat) as the latest stats record said; 0 before any. */
static inline u64 model_bpf_stat(const struct model *m, u32 stat)
{
	return stat < CORO_STAT_MAX ? m->stats.bpf[stat] : 0;
}

/*
 * An observer's own pointer on a model object: its slot belongs to the
 * observer, whatever the constness of the object it was handed.
 */
static inline void model_set_priv(void *const *priv_of_obj, int slot, void *v)
{
	if (slot >= 0 && slot < MODEL_MAX_OBSERVERS)
		((void **)priv_of_obj)[slot] = v;
}

/*
 * Whether c is its thread's scheduler context, whose waits in the kernel are
 * its scheduler waiting for work: Boost.Fiber's dispatcher, or on the
 * switch-function path the context through which the thread's others are
 * switched (gevent's hub, QEMU's main loop, a fiber loop's main fiber).
 */
bool model_is_scheduler(const struct coro_thread *t, const struct coro *c);
/* What such a context is called for its family: "hub", "main loop", "dispatcher"... */
const char *model_scheduler_role(const struct coro *c);

/* Names in the outputs (those of the values events carry: event.h). */
const char *coro_state_name(enum coro_state s);
const char *coro_end_name(enum coro_end e);

#endif
