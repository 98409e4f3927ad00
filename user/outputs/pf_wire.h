/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Perfetto wire: one packet sequence of a protobuf trace, written in
 * place into an output buffer. Field numbers are those of Perfetto's protos
 * (protos/perfetto/trace/...); tests/perfetto/corobpf_trace.proto lists the
 * subset written here, and the tests decode every trace against it.
 *
 * It knows packets, interning and track events, nothing of coroutines: the
 * track layout (perfetto.c) decides which tracks exist and what goes on
 * them, and calls this with tracks, names and arguments.
 *
 * Interning: event names, argument names and stacks are interned on the
 * sequence; a name its user caches (struct pf_ev.iid_slot) is interned once
 * per generation without a table. Past perfetto_intern_max entries the next
 * packet clears the sequence's incremental state and interning starts again
 * (a new generation: cached iids of the old one read as 0).
 */
#ifndef COROBPF_PF_WIRE_H
#define COROBPF_PF_WIRE_H

#include "pb.h"
#include "util.h"

struct sym_stack;

/* TracePacket */
enum {
	TP_TIMESTAMP = 8,
	TP_SEQ_ID = 10,
	TP_TRACK_EVENT = 11,
	TP_INTERNED = 12,
	TP_SEQ_FLAGS = 13,
	TP_DROPPED = 42,
	TP_DEFAULTS = 59,
	TP_TRACK_DESC = 60,
	TP_FIRST_ON_SEQ = 87,
};
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { DEFAULTS_CLOCK_ID = 58, BUILTIN_CLOCK_BOOTTIME = 6 };
/* TrackEvent */
enum {
	TE_DEBUG = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK = 11,
	TE_COUNTER = 30,
	TE_FLOW = 47,
	TE_TERM_FLOW = 48,
	TE_CALLSTACK_IID = 56, /* an interned Callstack */
};
/* InternedData's stack tables, and their messages (profile_common.proto) */
enum { ID_FUNCTION_NAMES = 5, ID_FRAMES = 6, ID_CALLSTACKS = 7, ID_SOURCE_PATHS = 18 };
enum { FR_IID = 1, FR_FUNCTION = 2, FR_SOURCE = 5, FR_LINE = 6 };
enum { CS_IID = 1, CS_FRAMES = 2 };
/* Frames of a stack written for an event: the innermost ones (a packet has a size limit). */
#define PF_STACK_FRAMES 32
/* Bytes kept of a function name or source path (template-heavy C++ names run to kilobytes). */
#define PF_STACK_STR_MAX 256
/* New stack strings per packet: frames beyond it are left out, so a packet stays well under PKT_MAX. */
#define PF_STACK_NEW_BYTES 8192
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
/* TrackDescriptor and friends */
enum {
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	TD_CHILD_ORDERING = 11,
	TD_RANK = 12,
	TD_DESCRIPTION = 14,
	TD_MERGE = 15,
};
enum { ORDER_EXPLICIT = 3, MERGE_NONE = 2 };
enum { PD_PID = 1, PD_CMDLINE = 2, PD_NAME = 6 };
enum { THD_PID = 1, THD_TID = 2, THD_NAME = 5 };
enum { CD_UNIT = 3, UNIT_COUNT = 2 };
/* DebugAnnotation */
enum { DA_NAME_IID = 1, DA_UINT = 3, DA_INT = 4, DA_STRING = 6, DA_POINTER = 7 };
/* InternedData */
enum { ID_EVENT_NAMES = 2, ID_DA_NAMES = 3, IN_IID = 1, IN_NAME = 2 };

#define SEQ_ID 1

#define PF_MAX_NEW_INTERNS 8
#define PF_LIT_CACHE 256 /* interned string literals, by address */
/* Bytes of either part of a lazy name "a: b" (struct pf_ev) at most. */
#define PF_NAME_PART_MAX 200

/* Interned strings live in chunks reused from one generation to the next: no malloc per string. */
struct arena {
	char **chunks;
	size_t n, cur, used;
};

struct pf_arg {
	const char *name; /* always a string literal (interned by address) */
	enum { A_INT, A_UINT, A_PTR, A_STR } kind;
	u64 v;
	const char *s;
};

/* A track event. */
struct pf_ev {
	int type; /* TYPE_... */
	u64 track;
	const char *name; /* NULL for slice ends and counters */
	bool name_lit;	  /* name is a string literal */
	u64 *iid_slot;	  /* the name's iid is cached here (0: intern `name` and cache it) */
	/* With iid_slot and no name: the name is "a: b", formatted only when not cached. */
	const char *lazy_a, *lazy_b;
	const struct pf_arg *args;
	int nargs;
	u64 flow, term_flow[2];
};

/* A track: its descriptor. */
struct pf_desc {
	u64 uuid, parent;
	const char *name, *description;
	int child_ordering, rank, merge;
	bool counter;
};

struct pf_wire {
	struct obuf *ob;
	/* Symbolized stacks by capture id (--stacks), for events that carry one. */
	const struct sym_stack *(*stack_of)(const void *ctx, u32 id);
	const void *stack_ctx;
	struct hmap names, da_names; /* interning: (hash, len) -> struct pf_intern */
	u64 next_name_iid, next_da_iid;
	u64 interned; /* entries in the interning tables: past perfetto_intern_max, interning restarts */
	struct {
		const char *lit;
		u64 iid;
	} lit_names[PF_LIT_CACHE], lit_das[PF_LIT_CACHE];
	u64 last_ts;
	/* The packet head (timestamp and sequence id) last encoded, reused while the time stays. */
	u64 head_ts;
	u8 head[16];
	size_t head_len;
	bool dropped_next; /* set previous_packet_dropped on the next packet */
	struct pb pb;	  /* the packet being built, in place in the output buffer */
	size_t pkt_mark; /* its Trace.packet length */
	/* interned strings first used in the packet being built */
	struct {
		u32 field;
		u64 iid;
		const char *str;
		size_t len;
	} fresh[PF_MAX_NEW_INTERNS];
	int nfresh;
	bool uses_iids; /* the packet refers to interned strings */
	bool clear_state; /* this packet clears incremental state (interning restarted) */
	u64 intern_gen;	  /* generation of interning; cached iids of another one are stale */
	u64 packets, oversized, intern_resets;
	struct arena strings; /* of the interned strings of this generation */
	u32 stack_next; /* --stacks: the stack for the next track event (then cleared) */
	/*
	 * Interned stacks, per interning generation: capture stack id, frame
	 * (function, file, line) and string (function names, source paths)
	 * -> iid. New ones are defined in the packet that first uses them.
	 */
	struct hmap cs_iids, frame_iids, fn_iids, src_iids;
	u64 next_cs_iid, next_frame_iid, next_fn_iid, next_src_iid;
	struct {
		u32 field;
		u64 iid;
		const char *str;
		size_t len;
	} fresh_str[2 * PF_STACK_FRAMES];
	int nfresh_str;
	struct {
		u64 iid, fn, src;
		u32 line;
	} fresh_frame[PF_STACK_FRAMES];
	int nfresh_frame;
	size_t fresh_stack_bytes; /* of the strings in fresh_str */
	u64 fresh_cs_iid; /* a callstack defined in this packet (0: none) */
	u64 fresh_cs_frames[PF_STACK_FRAMES];
	u32 fresh_cs_n;
};

void pfw_init(struct pf_wire *w, struct obuf *ob);
void pfw_free(struct pf_wire *w);
/* 0, or -errno: the output failed, or a packet could not be written (-EMSGSIZE). */
int pfw_error(const struct pf_wire *w);

/* The sequence's first packet: clears incremental state, states the clock. */
void pfw_sequence_start(struct pf_wire *w, u64 ts);
void pfw_describe(struct pf_wire *w, u64 ts, const struct pf_desc *d);
/* A process's or a thread's track (name, cmdline: valid UTF-8; NULL: none). */
void pfw_describe_process(struct pf_wire *w, u64 ts, u64 uuid, u32 pid, const char *cmdline,
			  const char *name);
void pfw_describe_thread(struct pf_wire *w, u64 ts, u64 uuid, u32 pid, u32 tid,
			 const char *name);
void pfw_track_event(struct pf_wire *w, u64 ts, const struct pf_ev *ev);

/* The next track event carries this stack (a capture stack id; 0: none). */
static inline void pfw_stack_next(struct pf_wire *w, u32 id)
{
	w->stack_next = id;
}

/* The next packet says events were lost before it. */
static inline void pfw_mark_dropped(struct pf_wire *w)
{
	w->dropped_next = true;
}

/* ---- the short path of slice ends and counters, inline: half the packets ---- */

void pfw_intern_restart(struct pf_wire *w);
/*
 * Interned strings kept at most (tests lower it): beyond, the next packet
 * clears the sequence's incremental state and interning starts again.
 */
#define PERFETTO_INTERN_MAX 32768
extern u32 perfetto_intern_max;

/*
 * Before a packet: start interning again when the tables are full, and
 * reset what the packet will define. Returns its timestamp: time never goes
 * back on the sequence, even for late model records.
 */
static inline u64 pfw_pkt_prepare(struct pf_wire *w, u64 ts)
{
	w->nfresh = 0;
	w->nfresh_str = w->nfresh_frame = 0;
	w->fresh_stack_bytes = 0;
	w->fresh_cs_iid = 0;
	w->uses_iids = false;
	w->clear_state = false;
	if (__builtin_expect(w->interned > perfetto_intern_max, 0))
		pfw_intern_restart(w);
	if (ts < w->last_ts)
		ts = w->last_ts;
	w->last_ts = ts;
	return ts;
}

/* A track event packet's fields before its event: timestamp, sequence, loss mark. */
static inline __attribute__((always_inline)) u8 *pfw_put_head(struct pf_wire *w, u8 *p, u64 ts)
{
	if (ts != w->head_ts || !w->head_len) {
		/* An event's packets mostly share its time: encode the head once for them. */
		u8 *h = pbw_uint(w->head, TP_TIMESTAMP, ts);

		h = pbw_uint(h, TP_SEQ_ID, SEQ_ID);
		w->head_len = h - w->head;
		w->head_ts = ts;
	}
	memcpy(p, w->head, sizeof(w->head));
	p += w->head_len;
	if (w->dropped_next) {
		p = pbw_uint(p, TP_DROPPED, 1);
		w->dropped_next = false;
	}
	return p;
}

static inline u64 pfw_seq_flags(const struct pf_wire *w)
{
	return (w->uses_iids ? SEQ_NEEDS_INCREMENTAL_STATE : 0) |
	       (w->clear_state ? SEQ_INCREMENTAL_STATE_CLEARED : 0);
}

/*
 * A track event with neither name, arguments, stack nor flows (a slice's
 * end, a counter's value): the short path.
 */
static inline void pfw_track_event_bare(struct pf_wire *w, u64 ts, int type, u64 track,
					bool counter, s64 value)
{
	u8 *start, *p, *pkt, *te;

	ts = pfw_pkt_prepare(w, ts);
	start = p = obuf_reserve(w->ob, 96);
	p = pbw_begin(p, 1, &pkt); /* Trace.packet */
	p = pfw_put_head(w, p, ts);
	p = pbw_begin(p, TP_TRACK_EVENT, &te);
	p = pbw_uint(p, TE_TYPE, type);
	p = pbw_uint(p, TE_TRACK, track);
	if (counter)
		p = pbw_uint(p, TE_COUNTER, (u64)value); /* int64: two's complement */
	p = pbw_end(p, te);
	if (w->clear_state) /* interning restarted just now: say so even here */
		p = pbw_uint(p, TP_SEQ_FLAGS, pfw_seq_flags(w));
	p = pbw_end(p, pkt);
	obuf_commit(w->ob, p - start);
	w->packets++;
}

#endif
