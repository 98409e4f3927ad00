// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Perfetto protobuf writer. Field numbers are those of Perfetto's protos
 * (protos/perfetto/trace/...); tests/perfetto/corobpf_trace.proto lists the
 * subset written here, and the tests decode every trace against it.
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
#include "pb.h"

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

#define PKT_MAX (16 * 1024)
/* Room a track event may reserve (the output buffer holds 256 KiB; events need a few KiB at most). */
#define PF_EVENT_ROOM_MAX (64 * 1024)
#define MAX_NEW_INTERNS 8
#define LIT_CACHE 256 /* interned string literals, by address */
/* perfetto.h: the interning limit. Cached iids carry their generation in their top bits. */
u32 perfetto_intern_max = PERFETTO_INTERN_MAX;
#define IID_GEN_SHIFT 40
#define IID_MASK ((1ULL << IID_GEN_SHIFT) - 1)

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

/* Interned strings live in chunks reused from one generation to the next: no malloc per string. */
#define ARENA_CHUNK (64 * 1024)

struct arena {
	char **chunks;
	size_t n, cur, used;
};

struct pf_intern {
	u64 iid;
	char str[];
};

/* NULL if `size` is beyond what a chunk sensibly holds (the caller writes the string inline). */
static void *arena_alloc(struct arena *a, size_t size)
{
	void *p;

	size = (size + 7) & ~(size_t)7;
	if (size > ARENA_CHUNK / 4)
		return NULL;
	if (!a->n || a->used + size > ARENA_CHUNK) {
		if (a->n && a->cur + 1 < a->n) {
			a->cur++;
		} else {
			a->chunks = xrealloc(a->chunks, (a->n + 1) * sizeof(*a->chunks));
			a->chunks[a->n] = xmalloc(ARENA_CHUNK);
			a->cur = a->n++;
		}
		a->used = 0;
	}
	p = a->chunks[a->cur] + a->used;
	a->used += size;
	return p;
}

static void arena_reset(struct arena *a)
{
	a->cur = 0;
	a->used = 0;
}

static void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->chunks[i]);
	free(a->chunks);
}

struct pf_arg {
	const char *name; /* always a string literal (interned by address) */
	enum { A_INT, A_UINT, A_PTR, A_STR } kind;
	u64 v;
	const char *s;
};



struct perfetto_sink {
	struct obuf *ob;
	u32 max_tracks;
	struct model *m;
	int slot; /* our priv[] slot in the model's objects, -1: none (use the maps) */
	struct hmap procs, threads, coros;
	struct hmap names, da_names; /* interning: (hash, len) -> struct pf_intern */
	u64 next_name_iid, next_da_iid;
	u64 interned; /* entries in the interning tables: past perfetto_intern_max, interning restarts */
	struct {
		const char *lit;
		u64 iid;
	} lit_names[LIT_CACHE], lit_das[LIT_CACHE];
	u64 next_flow;
	u64 last_ts;
	/* The packet head (timestamp and sequence id) last encoded, reused while the time stays. */
	u64 head_ts;
	u8 head[16];
	size_t head_len;
	bool dropped_next; /* set previous_packet_dropped on the next packet */
	u64 loss_noted;	   /* serial of the last record whose hole was marked */
	struct pb pb;	  /* the packet being built, in place in the output buffer */
	size_t pkt_mark; /* its Trace.packet length */
	/* interned strings first used in the packet being built */
	struct {
		u32 field;
		u64 iid;
		const char *str;
		size_t len;
	} fresh[MAX_NEW_INTERNS];
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


/* A cached iid (iid | generation << IID_GEN_SHIFT): its iid if still current, else 0. */
static u64 cached_iid(const struct perfetto_sink *s, u64 slot)
{
	return slot >> IID_GEN_SHIFT == s->intern_gen ? slot & IID_MASK : 0;
}

/* ---- packets ---- */

/* Interning starts again: the next packet tells the reader to forget the old ids. */
static void intern_restart(struct perfetto_sink *s)
{
	hmap_clear(&s->names);
	hmap_clear(&s->da_names);
	hmap_clear(&s->cs_iids);
	hmap_clear(&s->frame_iids);
	hmap_clear(&s->fn_iids);
	hmap_clear(&s->src_iids);
	s->interned = 0;
	s->next_cs_iid = s->next_frame_iid = s->next_fn_iid = s->next_src_iid = 1;
	arena_reset(&s->strings);
	memset(s->lit_names, 0, sizeof(s->lit_names));
	memset(s->lit_das, 0, sizeof(s->lit_das));
	s->next_name_iid = s->next_da_iid = 1;
	s->intern_gen++;
	s->intern_resets++;
	s->clear_state = true;
}

/*
 * Before a packet: start interning again when the tables are full, and
 * reset what the packet will define. Returns its timestamp: time never goes
 * back on the sequence, even for late model records.
 */
static inline u64 pkt_prepare(struct perfetto_sink *s, u64 ts)
{
	s->nfresh = 0;
	s->nfresh_str = s->nfresh_frame = 0;
	s->fresh_stack_bytes = 0;
	s->fresh_cs_iid = 0;
	s->uses_iids = false;
	s->clear_state = false;
	if (__builtin_expect(s->interned > perfetto_intern_max, 0))
		intern_restart(s);
	if (ts < s->last_ts)
		ts = s->last_ts;
	s->last_ts = ts;
	return ts;
}

/* A track event packet's fields before its event: timestamp, sequence, loss mark. */
static inline __attribute__((always_inline)) u8 *put_head(struct perfetto_sink *s, u8 *p, u64 ts)
{
	if (ts != s->head_ts || !s->head_len) {
		/* An event's packets mostly share its time: encode the head once for them. */
		u8 *h = pbw_uint(s->head, TP_TIMESTAMP, ts);

		h = pbw_uint(h, TP_SEQ_ID, SEQ_ID);
		s->head_len = h - s->head;
		s->head_ts = ts;
	}
	memcpy(p, s->head, sizeof(s->head));
	p += s->head_len;
	if (s->dropped_next) {
		p = pbw_uint(p, TP_DROPPED, 1);
		s->dropped_next = false;
	}
	return p;
}

/* A packet is built where it will be written: the output buffer, no copy. */
static size_t pkt_head(struct perfetto_sink *s, struct pb *pb, u64 ts)
{
	size_t mark;

	pb_init(pb, obuf_reserve(s->ob, PKT_MAX), PKT_MAX);
	mark = pb_begin(pb, 1); /* Trace.packet */
	pb->len = put_head(s, pb->buf + pb->len, ts) - pb->buf; /* a few bytes of PKT_MAX */
	return mark;
}

static bool pkt_has_interned(const struct perfetto_sink *s)
{
	return s->nfresh || s->nfresh_str || s->nfresh_frame || s->fresh_cs_iid;
}

/* Room pkt_interned() needs at most. */
static size_t pkt_interned_room(const struct perfetto_sink *s)
{
	size_t n = PBW_NESTED + 4;

	for (int i = 0; i < s->nfresh; i++)
		n += PBW_NESTED + 4 + 2 * PBW_VARINT_MAX + s->fresh[i].len;
	for (int i = 0; i < s->nfresh_str; i++)
		n += PBW_NESTED + 4 + 2 * PBW_VARINT_MAX + s->fresh_str[i].len;
	n += (size_t)s->nfresh_frame * (PBW_NESTED + 4 + 8 * PBW_VARINT_MAX);
	if (s->fresh_cs_iid)
		n += PBW_NESTED + 4 + (2 + 2 * (size_t)s->fresh_cs_n) * PBW_VARINT_MAX;
	return n;
}

/* What the packet first used: interned strings, then stack frames and the callstack naming them. */
static u8 *pkt_interned(const struct perfetto_sink *s, u8 *p)
{
	u8 *id, *e;

	p = pbw_begin(p, TP_INTERNED, &id);
	for (int i = 0; i < s->nfresh; i++) {
		p = pbw_begin(p, s->fresh[i].field, &e);
		p = pbw_uint(p, IN_IID, s->fresh[i].iid);
		p = pbw_bytes(p, IN_NAME, s->fresh[i].str, s->fresh[i].len);
		p = pbw_end(p, e);
	}
	for (int i = 0; i < s->nfresh_str; i++) {
		p = pbw_begin(p, s->fresh_str[i].field, &e);
		p = pbw_uint(p, IN_IID, s->fresh_str[i].iid);
		/* InternedString.str (bytes) */
		p = pbw_bytes(p, IN_NAME, s->fresh_str[i].str, s->fresh_str[i].len);
		p = pbw_end(p, e);
	}
	for (int i = 0; i < s->nfresh_frame; i++) {
		p = pbw_begin(p, ID_FRAMES, &e);
		p = pbw_uint(p, FR_IID, s->fresh_frame[i].iid);
		p = pbw_uint(p, FR_FUNCTION, s->fresh_frame[i].fn);
		if (s->fresh_frame[i].src) {
			p = pbw_uint(p, FR_SOURCE, s->fresh_frame[i].src);
			p = pbw_uint(p, FR_LINE, s->fresh_frame[i].line);
		}
		p = pbw_end(p, e);
	}
	if (s->fresh_cs_iid) {
		p = pbw_begin(p, ID_CALLSTACKS, &e);
		p = pbw_uint(p, CS_IID, s->fresh_cs_iid);
		for (u32 i = 0; i < s->fresh_cs_n; i++)
			p = pbw_uint(p, CS_FRAMES, s->fresh_cs_frames[i]);
		p = pbw_end(p, e);
	}
	return pbw_end(p, id);
}

static u64 seq_flags(const struct perfetto_sink *s)
{
	return (s->uses_iids ? SEQ_NEEDS_INCREMENTAL_STATE : 0) |
	       (s->clear_state ? SEQ_INCREMENTAL_STATE_CLEARED : 0);
}

static void pkt_tail(struct perfetto_sink *s, struct pb *pb, size_t mark)
{
	if (pkt_has_interned(s) && pb_room(pb, pkt_interned_room(s)))
		pb->len = pkt_interned(s, pb->buf + pb->len) - pb->buf;
	if (s->uses_iids || s->clear_state)
		pb_uint(pb, TP_SEQ_FLAGS, seq_flags(s));
	pb_end(pb, mark);
	if (pb->overflow) {
		/* Not committed: the output buffer holds nothing of it. */
		s->oversized++;
		return;
	}
	obuf_commit(s->ob, pb->len);
	s->packets++;
}

/* Packets other than track events: built on s->pb between these two. */
static void pkt_begin(struct perfetto_sink *s, u64 ts)
{
	s->pkt_mark = pkt_head(s, &s->pb, pkt_prepare(s, ts));
}

static void pkt_end(struct perfetto_sink *s)
{
	pkt_tail(s, &s->pb, s->pkt_mark);
}

static u64 fnv1a(const char *p, size_t n)
{
	u64 h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (u8)p[i]) * 0x100000001b3ULL;
	return h;
}

/*
 * The iid of an interned string, defining it in the current packet the
 * first time. Returns 0 if it cannot be interned here (the caller then
 * writes the string inline).
 */
static u64 intern(struct perfetto_sink *s, struct hmap *table, u64 *next, u32 field,
		  const char *str)
{
	size_t n = strlen(str);
	u64 h = fnv1a(str, n);
	struct pf_intern *e = hmap_get(table, h, n);

	if (e) {
		if (strcmp(e->str, str) != 0)
			return 0; /* a hash collision: written inline instead */
		s->uses_iids = true;
		return e->iid;
	}
	if (s->nfresh == MAX_NEW_INTERNS)
		return 0;
	e = arena_alloc(&s->strings, sizeof(*e) + n + 1);
	if (!e)
		return 0;
	s->uses_iids = true;
	e->iid = (*next)++;
	memcpy(e->str, str, n + 1);
	hmap_put(table, h, n, e);
	s->interned++;
	s->fresh[s->nfresh].field = field;
	s->fresh[s->nfresh].iid = e->iid;
	s->fresh[s->nfresh].str = e->str;
	s->fresh[s->nfresh].len = n;
	s->nfresh++;
	return e->iid;
}

/*
 * Interning of a name its user caches (a coroutine's label, a lane's
 * "label: state"): no table, so no lookup among the many such names; two
 * coroutines of one name each define it once. `str` lives until the packet
 * is written.
 */
static u64 intern_cached(struct perfetto_sink *s, const char *str)
{
	u64 iid;

	if (s->nfresh == MAX_NEW_INTERNS)
		return 0; /* written inline (it is a packet's first intern: never) */
	iid = s->next_name_iid++;

	s->uses_iids = true;
	s->interned++;
	s->fresh[s->nfresh].field = ID_EVENT_NAMES;
	s->fresh[s->nfresh].iid = iid;
	s->fresh[s->nfresh].str = str;
	s->fresh[s->nfresh].len = strlen(str);
	s->nfresh++;
	return iid;
}

/* Interning of string literals, found by address: no hashing of their text per event. */
static u64 intern_lit_slow(struct perfetto_sink *s, const char *lit, bool da)
{
	typeof(s->lit_names[0]) *cache = da ? s->lit_das : s->lit_names;
	size_t i = ((uintptr_t)lit >> 3) % LIT_CACHE;
	u64 iid;

	for (size_t n = 0; n < LIT_CACHE; n++, i = (i + 1) % LIT_CACHE) {
		if (cache[i].lit == lit) {
			s->uses_iids = true;
			return cache[i].iid;
		}
		if (!cache[i].lit)
			break;
	}
	iid = da ? intern(s, &s->da_names, &s->next_da_iid, ID_DA_NAMES, lit)
		 : intern(s, &s->names, &s->next_name_iid, ID_EVENT_NAMES, lit);
	if (iid && !cache[i].lit) {
		cache[i].lit = lit;
		cache[i].iid = iid;
	}
	return iid;
}

/* Nearly always found at once, in its home slot. */
static inline u64 intern_lit(struct perfetto_sink *s, const char *lit, bool da)
{
	typeof(s->lit_names[0]) *e = (da ? s->lit_das : s->lit_names) + ((uintptr_t)lit >> 3) % LIT_CACHE;

	if (__builtin_expect(e->lit == lit, 1)) {
		s->uses_iids = true;
		return e->iid;
	}
	return intern_lit_slow(s, lit, da);
}

/* Arguments of one event at most (the capture summary has the most: test_perfetto.c checks). */
#define PF_MAX_ARGS 16

static inline __attribute__((always_inline)) u8 *put_args(u8 *p, const struct pf_arg *args,
							  const u64 *name_iids, int nargs)
{
	for (int i = 0; i < nargs; i++) {
		u8 *mark;

		p = pbw_begin(p, TE_DEBUG, &mark);
		if (name_iids[i])
			p = pbw_uint(p, DA_NAME_IID, name_iids[i]);
		else
			p = pbw_bytes(p, 10, args[i].name, strlen(args[i].name)); /* DebugAnnotation.name */
		switch (args[i].kind) {
		case A_INT:
			p = pbw_uint(p, DA_INT, args[i].v); /* int64: two's complement */
			break;
		case A_UINT:
			p = pbw_uint(p, DA_UINT, args[i].v);
			break;
		case A_PTR:
			p = pbw_uint(p, DA_POINTER, args[i].v);
			break;
		case A_STR:
			p = pbw_bytes(p, DA_STRING, args[i].s, strlen(args[i].s));
			break;
		}
		p = pbw_end(p, mark);
	}
	return p;
}

struct pf_ev {
	int type;
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

/* A copy that lives until interning starts again (so past this packet's end). */
static const char *xstrdup_arena(struct perfetto_sink *s, const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = arena_alloc(&s->strings, n);

	if (!p)
		return "?";
	memcpy(p, str, n);
	return p;
}

/* A string of the stack tables: its iid, defined in this packet the first time. */
static u64 stack_str_iid(struct perfetto_sink *s, struct hmap *t, u64 *next, u32 field,
			 const char *str)
{
	u64 h = fnv1a(str, strlen(str)), iid = (u64)(uintptr_t)hmap_get(t, h, field);

	if (iid)
		return iid;
	iid = (*next)++;
	hmap_put(t, h, field, (void *)(uintptr_t)iid);
	s->interned++;
	s->fresh_str[s->nfresh_str].field = field;
	s->fresh_str[s->nfresh_str].iid = iid;
	s->fresh_str[s->nfresh_str].str = str;
	s->fresh_str[s->nfresh_str].len = strlen(str);
	s->fresh_stack_bytes += s->fresh_str[s->nfresh_str].len + 8;
	s->nfresh_str++;
	return iid;
}

/* str, or a copy cut to PF_STACK_STR_MAX bytes ending in "..." (lives until interning restarts). */
static const char *clip(struct perfetto_sink *s, const char *str)
{
	char *p;

	if (strlen(str) < PF_STACK_STR_MAX)
		return str;
	p = arena_alloc(&s->strings, PF_STACK_STR_MAX);
	if (!p)
		return "?";
	memcpy(p, str, PF_STACK_STR_MAX - 4);
	memcpy(p + PF_STACK_STR_MAX - 4, "...", 4);
	return p;
}

/* A frame as the UI shows it: function (or address), source file and line. */
static u64 frame_iid(struct perfetto_sink *s, const struct sym_frame *f)
{
	char addr[64];
	const char *fn = f->func, *file;
	u64 h, iid, fn_iid, src_iid = 0;

	if (!fn) {
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->ip);
		fn = addr;
	}
	h = fnv1a(fn, strlen(fn)) ^ (f->file ? fnv1a(f->file, strlen(f->file)) * 31 : 0);
	iid = (u64)(uintptr_t)hmap_get(&s->frame_iids, h, f->line);
	if (iid)
		return iid;
	fn_iid = stack_str_iid(s, &s->fn_iids, &s->next_fn_iid, ID_FUNCTION_NAMES,
			       f->func ? clip(s, f->func) : xstrdup_arena(s, fn));
	if (f->file) {
		file = clip(s, f->file);
		src_iid = stack_str_iid(s, &s->src_iids, &s->next_src_iid, ID_SOURCE_PATHS, file);
	}
	iid = s->next_frame_iid++;
	hmap_put(&s->frame_iids, h, f->line, (void *)(uintptr_t)iid);
	s->interned++;
	s->fresh_frame[s->nfresh_frame].iid = iid;
	s->fresh_frame[s->nfresh_frame].fn = fn_iid;
	s->fresh_frame[s->nfresh_frame].src = src_iid;
	s->fresh_frame[s->nfresh_frame].line = f->line;
	s->nfresh_frame++;
	return iid;
}

/*
 * A stack on the event, as an interned callstack (the UI lists its frames
 * when the slice is selected). Root first; at most the innermost
 * PF_STACK_FRAMES frames. Defined, with its frames and strings, in the
 * packet that first uses it in this interning generation.
 */
static u64 callstack_iid(struct perfetto_sink *s, u32 id)
{
	const struct sym_stack *st = model_stack(s->m, id);
	u64 iid;
	u32 n;

	if (!st || !st->n)
		return 0;
	iid = (u64)(uintptr_t)hmap_get(&s->cs_iids, id, 0);
	if (!iid && !s->fresh_cs_iid) {
		u64 inner[PF_STACK_FRAMES];

		/* Innermost first, while the packet has room for new strings. */
		n = 0;
		while (n < MIN(st->n, PF_STACK_FRAMES) && s->fresh_stack_bytes < PF_STACK_NEW_BYTES) {
			inner[n] = frame_iid(s, st->frames[n]);
			n++;
		}
		iid = s->next_cs_iid++;
		s->fresh_cs_iid = iid;
		s->fresh_cs_n = 0;
		for (u32 i = n; i-- > 0;)
			s->fresh_cs_frames[s->fresh_cs_n++] = inner[i]; /* root first */
		hmap_put(&s->cs_iids, id, 0, (void *)(uintptr_t)iid);
		s->interned++;
	}
	if (iid) /* (0: a second new stack in one packet: never happens, one per event) */
		s->uses_iids = true;
	return iid;
}

/*
 * A track event with neither name, arguments, stack nor flows (a slice's
 * end, a counter's value: half the packets): the short path.
 */
static void track_event_bare(struct perfetto_sink *s, u64 ts, int type, u64 track, bool counter,
			     s64 value)
{
	u8 *start, *p, *pkt, *te;

	ts = pkt_prepare(s, ts);
	start = p = obuf_reserve(s->ob, 96);
	p = pbw_begin(p, 1, &pkt); /* Trace.packet */
	p = put_head(s, p, ts);
	p = pbw_begin(p, TP_TRACK_EVENT, &te);
	p = pbw_uint(p, TE_TYPE, type);
	p = pbw_uint(p, TE_TRACK, track);
	if (counter)
		p = pbw_uint(p, TE_COUNTER, (u64)value); /* int64: two's complement */
	p = pbw_end(p, te);
	if (s->clear_state) /* interning restarted just now: say so even here */
		p = pbw_uint(p, TP_SEQ_FLAGS, seq_flags(s));
	p = pbw_end(p, pkt);
	obuf_commit(s->ob, p - start);
	s->packets++;
}

/*
 * One track event packet. Its interned ids are found first (defining new
 * ones in this packet, in the order they are written); then the room it can
 * take is reserved in the output buffer, and it is encoded there without
 * further checks.
 */
static void track_event(struct perfetto_sink *s, u64 ts, const struct pf_ev *ev)
{
	u64 name_iid = 0, arg_iids[PF_MAX_ARGS], cs_iid = 0;
	const char *name = ev->name;
	char buf[LABEL_MAX + 40];
	size_t room, name_len = 0;
	bool has_interned;
	int nargs;
	u8 *start, *p, *pkt, *te;

	ts = pkt_prepare(s, ts);
	if (ev->iid_slot) {
		name_iid = cached_iid(s, *ev->iid_slot);
		if (!name_iid) {
			/* First use in this generation (interning may have restarted in this very packet). */
			if (!name) {
				size_t a = strlen(ev->lazy_a), b = strlen(ev->lazy_b);

				memcpy(buf, ev->lazy_a, a);
				memcpy(buf + a, ": ", 2);
				memcpy(buf + a + 2, ev->lazy_b, b + 1);
				name = buf;
			}
			name_iid = intern_cached(s, name);
			*ev->iid_slot = name_iid ? name_iid | s->intern_gen << IID_GEN_SHIFT : 0;
		} else {
			s->uses_iids = true;
		}
	} else if (name) {
		name_iid = ev->name_lit ? intern_lit(s, name, false)
					: intern(s, &s->names, &s->next_name_iid, ID_EVENT_NAMES, name);
	}
	nargs = MIN(ev->nargs, PF_MAX_ARGS); /* (never more: the callers' arrays are smaller) */
	for (int i = 0; i < nargs; i++)
		arg_iids[i] = intern_lit(s, ev->args[i].name, true);
	if (s->stack_next) {
		cs_iid = callstack_iid(s, s->stack_next);
		s->stack_next = 0;
	}

	/* Fixed fields: packet and event headers, 8 varints, 3 fixed64 flows. */
	room = 2 * PBW_NESTED + 8 + 16 * PBW_VARINT_MAX + 3 * 8;
	if (!name_iid && name) {
		name_len = strlen(name);
		room += 2 * PBW_VARINT_MAX + name_len;
	}
	for (int i = 0; i < nargs; i++)
		room += PBW_NESTED + 4 + 4 * PBW_VARINT_MAX +
			(arg_iids[i] ? 0 : strlen(ev->args[i].name)) +
			(ev->args[i].kind == A_STR ? strlen(ev->args[i].s) : 0);
	has_interned = pkt_has_interned(s);
	if (has_interned)
		room += pkt_interned_room(s);
	if (room > PF_EVENT_ROOM_MAX) {
		/*
		 * Bounded inputs make this impossible; counted if it ever is not.
		 * Ids found for this packet were never defined: interning starts
		 * again with the next one, so no later packet uses them.
		 */
		s->oversized++;
		s->interned = (u64)perfetto_intern_max + 1;
		return;
	}

	start = p = obuf_reserve(s->ob, room);
	p = pbw_begin(p, 1, &pkt); /* Trace.packet */
	p = put_head(s, p, ts);
	p = pbw_begin(p, TP_TRACK_EVENT, &te);
	p = pbw_uint(p, TE_TYPE, ev->type);
	p = pbw_uint(p, TE_TRACK, ev->track);
	if (name_iid)
		p = pbw_uint(p, TE_NAME_IID, name_iid);
	else if (name)
		p = pbw_bytes(p, 23, name, name_len); /* TrackEvent.name */
	p = put_args(p, ev->args, arg_iids, nargs);
	if (cs_iid)
		p = pbw_uint(p, TE_CALLSTACK_IID, cs_iid);
	if (ev->flow)
		p = pbw_fixed64(p, TE_FLOW, ev->flow);
	for (int i = 0; i < 2; i++)
		if (ev->term_flow[i])
			p = pbw_fixed64(p, TE_TERM_FLOW, ev->term_flow[i]);
	p = pbw_end(p, te);
	if (has_interned)
		p = pkt_interned(s, p);
	if (s->uses_iids || s->clear_state)
		p = pbw_uint(p, TP_SEQ_FLAGS, seq_flags(s));
	p = pbw_end(p, pkt);
	obuf_commit(s->ob, p - start);
	s->packets++;
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

/* ---- track descriptors ---- */

struct pf_desc {
	u64 uuid, parent;
	const char *name, *description;
	int child_ordering, rank, merge;
	bool counter;
};

static void describe(struct perfetto_sink *s, u64 ts, const struct pf_desc *d)
{
	size_t mark;

	pkt_begin(s, ts);
	mark = pb_begin(&s->pb, TP_TRACK_DESC);
	pb_uint(&s->pb, TD_UUID, d->uuid);
	if (d->parent)
		pb_uint(&s->pb, TD_PARENT, d->parent);
	if (d->name)
		pb_str(&s->pb, TD_NAME, d->name);
	if (d->description)
		pb_str(&s->pb, TD_DESCRIPTION, d->description);
	if (d->counter) {
		size_t c = pb_begin(&s->pb, TD_COUNTER);

		pb_uint(&s->pb, CD_UNIT, UNIT_COUNT);
		pb_end(&s->pb, c);
	}
	if (d->child_ordering)
		pb_uint(&s->pb, TD_CHILD_ORDERING, d->child_ordering);
	if (d->rank)
		pb_int(&s->pb, TD_RANK, d->rank);
	if (d->merge)
		pb_uint(&s->pb, TD_MERGE, d->merge);
	pb_end(&s->pb, mark);
	pkt_end(s);
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
	size_t mark, pd;
	char name[64];

	pkt_begin(s, ts);
	mark = pb_begin(&s->pb, TP_TRACK_DESC);
	pb_uint(&s->pb, TD_UUID, UUID_PROCESS(pp->pid));
	pd = pb_begin(&s->pb, TD_PROCESS);
	pb_int(&s->pb, PD_PID, pp->pid);
	if (mp && mp->exe && mp->exe[0]) {
		char exe[1024];

		utf8_sanitize(exe, sizeof(exe), mp->exe, 256);
		pb_str(&s->pb, PD_CMDLINE, exe);
	}
	if (mp && mp->comm[0]) {
		utf8_sanitize(name, sizeof(name), mp->comm, sizeof(mp->comm));
		pb_str(&s->pb, PD_NAME, name);
	} else {
		snprintf(name, sizeof(name), "pid %u", pp->pid);
		pb_str(&s->pb, PD_NAME, name);
	}
	pb_end(&s->pb, pd);
	pb_end(&s->pb, mark);
	pkt_end(s);
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
		size_t mark, td;

		proc_ready(s, ts, pid);
		pkt_begin(s, ts);
		mark = pb_begin(&s->pb, TP_TRACK_DESC);
		pb_uint(&s->pb, TD_UUID, UUID_THREAD(tid));
		td = pb_begin(&s->pb, TD_THREAD);
		pb_int(&s->pb, THD_PID, pid);
		pb_int(&s->pb, THD_TID, tid);
		if (mt && mt->comm[0]) {
			char comm[64];

			utf8_sanitize(comm, sizeof(comm), mt->comm, sizeof(mt->comm));
			pb_str(&s->pb, THD_NAME, comm);
		}
		pb_end(&s->pb, td);
		pb_end(&s->pb, mark);
		pkt_end(s);
		t->described = true;
	}
	return t;
}

static struct pf_thread *thread_ready(struct perfetto_sink *s, u64 ts, u32 pid, u32 tid)
{
	return thread_ready_mt(s, ts, pid, tid, NULL);
}

static void counter(struct perfetto_sink *s, u64 ts, struct pf_proc *pp, int k, s64 v)
{
	static const char *names[3] = {"live coroutines", "runnable coroutines", "events lost"};

	if (pp->counters_described[k] && pp->last[k] == v)
		return;
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
		s->stack_next = c->park_stack; /* where it parked */
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
	s->dropped_next = true;
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

static void span_end(struct perfetto_sink *s, const struct event *ev)
{
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
			slice_end(s, ev->ts, pc->track);
			pc->nspans--;
		}
		begin_state(s, ev->c, pc, ev->ts, false);
	} else {
		struct pf_thread *t = thread_ready(s, ev->ts, ev->pid, ev->tid);
		const struct coro_thread *mt = model_thread_peek(s->m, ev->pid, ev->tid);
		u32 keep = mt ? mt->nspans : 0;

		while (t->nspans > keep) {
			slice_end(s, ev->ts, UUID_THREAD(ev->tid));
			t->nspans--;
		}
	}
}

static void perfetto_event(void *ctx, const struct event *ev)
{
	struct perfetto_sink *s = ctx;

	note_loss(s);
	switch (ev->kind) {
	case EV_CREATE: {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);
		struct pf_arg a = {"parent", A_PTR, ev->create.parent};
		struct pf_arg b = {"child", A_PTR, ev->create.id};
		u64 flow = ++s->next_flow;

		s->stack_next = ev->c->create_stack; /* the spawn site */
		instant(s, ev->ts, pc->track, pc->lane ? "create (lane)" : "create", &a, 1, 0, 0, 0);
		instant(s, ev->ts, actor_track(s, ev, ev->cur_known), "spawn", &b, 1, flow, 0, 0);
		pc->create_flow = flow;
		break;
	}
	case EV_NAME: {
		struct pf_coro *pc = coro_ready(s, ev->ts, ev->c);

		label_of(ev->c, pc->label, sizeof(pc->label));
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
	u64 at = f->kind == FK_UNMATCHED_SPAN && !f->dur ? f->ts : f->ts + f->dur;
	char name[LABEL_MAX + 64], label[LABEL_MAX], span[LABEL_MAX];
	struct pf_arg a[8];
	int n = 0;

	if (!pp->findings_described) {
		struct pf_desc d = {.uuid = UUID_FINDINGS(f->pid), .parent = UUID_PROCESS(f->pid),
				    .name = "Findings",
				    .description = "what corobpf's detectors found (docs/perfetto.md)"};

		describe(s, at, &d);
		pp->findings_described = true;
	}
	if (f->uid || f->kind == FK_SPAWN_STORM) {
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
	if (f->kind == FK_STALL || f->state == CS_SUSPENDED) {
		a[n++] = (struct pf_arg){"reason", A_STR, 0, coro_reason_name(f->reason)};
		if (f->obj)
			a[n++] = (struct pf_arg){"obj", A_PTR, f->obj};
	}
	if (f->has_waker)
		a[n++] = (struct pf_arg){"waker", A_PTR, f->waker};
	if (f->kind == FK_UNMATCHED_SPAN) {
		utf8_sanitize(span, sizeof(span), f->span, CORO_STR_LEN);
		a[n++] = (struct pf_arg){"span", A_STR, 0, span};
	}
	if (f->kind == FK_SPAWN_STORM) {
		a[n++] = (struct pf_arg){"children", A_UINT, f->count};
		a[n++] = (struct pf_arg){"peak_per_s", A_UINT, f->peak};
	}
	if (f->has_key && n < 7) {
		a[n++] = (struct pf_arg){"key_frame", A_STR, 0, f->key_frame};
		a[n++] = (struct pf_arg){"samples", A_UINT, f->samples};
	}
	{
		struct pf_ev ev = {.type = TYPE_INSTANT, .track = UUID_FINDINGS(f->pid),
				   .name = name, .args = a, .nargs = n};

		s->stack_next = f->stack;
		track_event(s, at, &ev);
		if (pc) {
			s->stack_next = f->stack;
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
	size_t d;

	/* The sequence's first packet: clears incremental state, states the clock. */
	pkt_begin(s, ci->start_ts);
	pb_uint(&s->pb, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_bool(&s->pb, TP_FIRST_ON_SEQ, true);
	d = pb_begin(&s->pb, TP_DEFAULTS);
	pb_uint(&s->pb, DEFAULTS_CLOCK_ID, BUILTIN_CLOCK_BOOTTIME);
	pb_end(&s->pb, d);
	pkt_end(s);
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

	s->ob = ob;
	s->m = m;
	s->slot = -1;
	s->max_tracks = max_tracks;
	s->next_name_iid = 1;
	s->intern_gen = 1;
	s->next_da_iid = 1;
	s->next_cs_iid = s->next_frame_iid = s->next_fn_iid = s->next_src_iid = 1;
	hmap_init(&s->cs_iids);
	hmap_init(&s->frame_iids);
	hmap_init(&s->fn_iids);
	hmap_init(&s->src_iids);
	hmap_init(&s->procs);
	hmap_init(&s->threads);
	hmap_init(&s->coros);
	hmap_init(&s->names);
	hmap_init(&s->da_names);
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = perfetto_begin;
	obs->slot = &s->slot;
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
	if (s->oversized)
		return -EMSGSIZE;
	return s->ob->err ? -s->ob->err : 0;
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
	hmap_free(&s->names);
	hmap_free(&s->da_names);
	hmap_free(&s->cs_iids);
	hmap_free(&s->frame_iids);
	hmap_free(&s->fn_iids);
	hmap_free(&s->src_iids);
	arena_free(&s->strings);
	free(s);
}
