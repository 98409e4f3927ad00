// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Perfetto wire (pf_wire.h): packets, interning, track events and descriptors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pf_wire.h"
#include "stacks.h"

#define PKT_MAX (16 * 1024)
/* Room a track event may reserve (the output buffer holds 256 KiB; events need a few KiB at most). */
#define PF_EVENT_ROOM_MAX (64 * 1024)
/* pf_wire.h: the interning limit. Cached iids carry their generation in their top bits. */
u32 perfetto_intern_max = PERFETTO_INTERN_MAX;
#define IID_GEN_SHIFT 40
#define IID_MASK ((1ULL << IID_GEN_SHIFT) - 1)

/* Interned strings live in chunks reused from one generation to the next: no malloc per string. */
#define ARENA_CHUNK (64 * 1024)

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

/* A cached iid (iid | generation << IID_GEN_SHIFT): its iid if still current, else 0. */
static u64 cached_iid(const struct pf_wire *w, u64 slot)
{
	return slot >> IID_GEN_SHIFT == w->intern_gen ? slot & IID_MASK : 0;
}

/* ---- packets ---- */

/* Interning starts again: the next packet tells the reader to forget the old ids. */
void pfw_intern_restart(struct pf_wire *w)
{
	hmap_clear(&w->names);
	hmap_clear(&w->da_names);
	hmap_clear(&w->cs_iids);
	hmap_clear(&w->frame_iids);
	hmap_clear(&w->fn_iids);
	hmap_clear(&w->src_iids);
	w->interned = 0;
	w->next_cs_iid = w->next_frame_iid = w->next_fn_iid = w->next_src_iid = 1;
	arena_reset(&w->strings);
	memset(w->lit_names, 0, sizeof(w->lit_names));
	memset(w->lit_das, 0, sizeof(w->lit_das));
	w->next_name_iid = w->next_da_iid = 1;
	w->intern_gen++;
	w->intern_resets++;
	w->clear_state = true;
}


/* A packet is built where it will be written: the output buffer, no copy. */
static size_t pkt_head(struct pf_wire *w, struct pb *pb, u64 ts)
{
	size_t mark;

	pb_init(pb, obuf_reserve(w->ob, PKT_MAX), PKT_MAX);
	mark = pb_begin(pb, 1); /* Trace.packet */
	pb->len = pfw_put_head(w, pb->buf + pb->len, ts) - pb->buf; /* a few bytes of PKT_MAX */
	return mark;
}

static bool pkt_has_interned(const struct pf_wire *w)
{
	return w->nfresh || w->nfresh_str || w->nfresh_frame || w->fresh_cs_iid;
}

/* Room pkt_interned() needs at most. */
static size_t pkt_interned_room(const struct pf_wire *w)
{
	size_t n = PBW_NESTED + 4;

	for (int i = 0; i < w->nfresh; i++)
		n += PBW_NESTED + 4 + 2 * PBW_VARINT_MAX + w->fresh[i].len;
	for (int i = 0; i < w->nfresh_str; i++)
		n += PBW_NESTED + 4 + 2 * PBW_VARINT_MAX + w->fresh_str[i].len;
	n += (size_t)w->nfresh_frame * (PBW_NESTED + 4 + 8 * PBW_VARINT_MAX);
	if (w->fresh_cs_iid)
		n += PBW_NESTED + 4 + (2 + 2 * (size_t)w->fresh_cs_n) * PBW_VARINT_MAX;
	return n;
}

/* What the packet first used: interned strings, then stack frames and the callstack naming them. */
static u8 *pkt_interned(const struct pf_wire *w, u8 *p)
{
	u8 *id, *e;

	p = pbw_begin(p, TP_INTERNED, &id);
	for (int i = 0; i < w->nfresh; i++) {
		p = pbw_begin(p, w->fresh[i].field, &e);
		p = pbw_uint(p, IN_IID, w->fresh[i].iid);
		p = pbw_bytes(p, IN_NAME, w->fresh[i].str, w->fresh[i].len);
		p = pbw_end(p, e);
	}
	for (int i = 0; i < w->nfresh_str; i++) {
		p = pbw_begin(p, w->fresh_str[i].field, &e);
		p = pbw_uint(p, IN_IID, w->fresh_str[i].iid);
		/* InternedString.str (bytes) */
		p = pbw_bytes(p, IN_NAME, w->fresh_str[i].str, w->fresh_str[i].len);
		p = pbw_end(p, e);
	}
	for (int i = 0; i < w->nfresh_frame; i++) {
		p = pbw_begin(p, ID_FRAMES, &e);
		p = pbw_uint(p, FR_IID, w->fresh_frame[i].iid);
		p = pbw_uint(p, FR_FUNCTION, w->fresh_frame[i].fn);
		if (w->fresh_frame[i].src) {
			p = pbw_uint(p, FR_SOURCE, w->fresh_frame[i].src);
			p = pbw_uint(p, FR_LINE, w->fresh_frame[i].line);
		}
		p = pbw_end(p, e);
	}
	if (w->fresh_cs_iid) {
		p = pbw_begin(p, ID_CALLSTACKS, &e);
		p = pbw_uint(p, CS_IID, w->fresh_cs_iid);
		for (u32 i = 0; i < w->fresh_cs_n; i++)
			p = pbw_uint(p, CS_FRAMES, w->fresh_cs_frames[i]);
		p = pbw_end(p, e);
	}
	return pbw_end(p, id);
}


static void pkt_tail(struct pf_wire *w, struct pb *pb, size_t mark)
{
	if (pkt_has_interned(w) && pb_room(pb, pkt_interned_room(w)))
		pb->len = pkt_interned(w, pb->buf + pb->len) - pb->buf;
	if (w->uses_iids || w->clear_state)
		pb_uint(pb, TP_SEQ_FLAGS, pfw_seq_flags(w));
	pb_end(pb, mark);
	if (pb->overflow) {
		/* Not committed: the output buffer holds nothing of it. */
		w->oversized++;
		return;
	}
	obuf_commit(w->ob, pb->len);
	w->packets++;
}

/* Packets other than track events: built on w->pb between these two. */
static void pkt_begin(struct pf_wire *w, u64 ts)
{
	w->pkt_mark = pkt_head(w, &w->pb, pfw_pkt_prepare(w, ts));
}

static void pkt_end(struct pf_wire *w)
{
	pkt_tail(w, &w->pb, w->pkt_mark);
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
static u64 intern(struct pf_wire *w, struct hmap *table, u64 *next, u32 field,
		  const char *str)
{
	size_t n = strlen(str);
	u64 h = fnv1a(str, n);
	struct pf_intern *e = hmap_get(table, h, n);

	if (e) {
		if (strcmp(e->str, str) != 0)
			return 0; /* a hash collision: written inline instead */
		w->uses_iids = true;
		return e->iid;
	}
	if (w->nfresh == PF_MAX_NEW_INTERNS)
		return 0;
	e = arena_alloc(&w->strings, sizeof(*e) + n + 1);
	if (!e)
		return 0;
	w->uses_iids = true;
	e->iid = (*next)++;
	memcpy(e->str, str, n + 1);
	hmap_put(table, h, n, e);
	w->interned++;
	w->fresh[w->nfresh].field = field;
	w->fresh[w->nfresh].iid = e->iid;
	w->fresh[w->nfresh].str = e->str;
	w->fresh[w->nfresh].len = n;
	w->nfresh++;
	return e->iid;
}

/*
 * Interning of a name its user caches (a coroutine's label, a lane's
 * "label: state"): no table, so no lookup among the many such names; two
 * coroutines of one name each define it once. `str` lives until the packet
 * is written.
 */
static u64 intern_cached(struct pf_wire *w, const char *str)
{
	u64 iid;

	if (w->nfresh == PF_MAX_NEW_INTERNS)
		return 0; /* written inline (it is a packet's first intern: never) */
	iid = w->next_name_iid++;

	w->uses_iids = true;
	w->interned++;
	w->fresh[w->nfresh].field = ID_EVENT_NAMES;
	w->fresh[w->nfresh].iid = iid;
	w->fresh[w->nfresh].str = str;
	w->fresh[w->nfresh].len = strlen(str);
	w->nfresh++;
	return iid;
}

/* Interning of string literals, found by address: no hashing of their text per event. */
static u64 intern_lit_slow(struct pf_wire *w, const char *lit, bool da)
{
	typeof(w->lit_names[0]) *cache = da ? w->lit_das : w->lit_names;
	size_t i = ((uintptr_t)lit >> 3) % PF_LIT_CACHE;
	u64 iid;

	for (size_t n = 0; n < PF_LIT_CACHE; n++, i = (i + 1) % PF_LIT_CACHE) {
		if (cache[i].lit == lit) {
			w->uses_iids = true;
			return cache[i].iid;
		}
		if (!cache[i].lit)
			break;
	}
	iid = da ? intern(w, &w->da_names, &w->next_da_iid, ID_DA_NAMES, lit)
		 : intern(w, &w->names, &w->next_name_iid, ID_EVENT_NAMES, lit);
	if (iid && !cache[i].lit) {
		cache[i].lit = lit;
		cache[i].iid = iid;
	}
	return iid;
}

/* Nearly always found at once, in its home slot. */
static inline u64 intern_lit(struct pf_wire *w, const char *lit, bool da)
{
	typeof(w->lit_names[0]) *e = (da ? w->lit_das : w->lit_names) + ((uintptr_t)lit >> 3) % PF_LIT_CACHE;

	if (__builtin_expect(e->lit == lit, 1)) {
		w->uses_iids = true;
		return e->iid;
	}
	return intern_lit_slow(w, lit, da);
}

/*
 * Arguments of one event at most. The capture summary has the most: five of
 * its own and every counter (COUNTERS_MAX, counters.h); test_perfetto.c
 * checks that none is cut.
 */
#define PF_MAX_ARGS 40

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

/* A copy that lives until interning starts again (so past this packet's end). */
static const char *xstrdup_arena(struct pf_wire *w, const char *str)
{
	size_t n = strlen(str) + 1;
	char *p = arena_alloc(&w->strings, n);

	if (!p)
		return "?";
	memcpy(p, str, n);
	return p;
}

/* A string of the stack tables: its iid, defined in this packet the first time. */
static u64 stack_str_iid(struct pf_wire *w, struct hmap *t, u64 *next, u32 field,
			 const char *str)
{
	u64 h = fnv1a(str, strlen(str)), iid = (u64)(uintptr_t)hmap_get(t, h, field);

	if (iid)
		return iid;
	iid = (*next)++;
	hmap_put(t, h, field, (void *)(uintptr_t)iid);
	w->interned++;
	w->fresh_str[w->nfresh_str].field = field;
	w->fresh_str[w->nfresh_str].iid = iid;
	w->fresh_str[w->nfresh_str].str = str;
	w->fresh_str[w->nfresh_str].len = strlen(str);
	w->fresh_stack_bytes += w->fresh_str[w->nfresh_str].len + 8;
	w->nfresh_str++;
	return iid;
}

/* str, or a copy cut to PF_STACK_STR_MAX bytes ending in "..." (lives until interning restarts). */
static const char *clip(struct pf_wire *w, const char *str)
{
	char *p;

	if (strlen(str) < PF_STACK_STR_MAX)
		return str;
	p = arena_alloc(&w->strings, PF_STACK_STR_MAX);
	if (!p)
		return "?";
	memcpy(p, str, PF_STACK_STR_MAX - 4);
	memcpy(p + PF_STACK_STR_MAX - 4, "...", 4);
	return p;
}

/* A frame as the UI shows it: function (or address), source file and line. */
static u64 frame_iid(struct pf_wire *w, const struct sym_frame *f)
{
	char addr[64];
	const char *fn = f->func, *file;
	u64 h, iid, fn_iid, src_iid = 0;

	if (!fn) {
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->ip);
		fn = addr;
	}
	h = fnv1a(fn, strlen(fn)) ^ (f->file ? fnv1a(f->file, strlen(f->file)) * 31 : 0);
	iid = (u64)(uintptr_t)hmap_get(&w->frame_iids, h, f->line);
	if (iid)
		return iid;
	fn_iid = stack_str_iid(w, &w->fn_iids, &w->next_fn_iid, ID_FUNCTION_NAMES,
			       f->func ? clip(w, f->func) : xstrdup_arena(w, fn));
	if (f->file) {
		file = clip(w, f->file);
		src_iid = stack_str_iid(w, &w->src_iids, &w->next_src_iid, ID_SOURCE_PATHS, file);
	}
	iid = w->next_frame_iid++;
	hmap_put(&w->frame_iids, h, f->line, (void *)(uintptr_t)iid);
	w->interned++;
	w->fresh_frame[w->nfresh_frame].iid = iid;
	w->fresh_frame[w->nfresh_frame].fn = fn_iid;
	w->fresh_frame[w->nfresh_frame].src = src_iid;
	w->fresh_frame[w->nfresh_frame].line = f->line;
	w->nfresh_frame++;
	return iid;
}

/*
 * A stack on the event, as an interned callstack (the UI lists its frames
 * when the slice is selected). Root first; at most the innermost
 * PF_STACK_FRAMES frames. Defined, with its frames and strings, in the
 * packet that first uses it in this interning generation.
 */
static u64 callstack_iid(struct pf_wire *w, u32 id)
{
	const struct sym_stack *st = w->stack_of ? w->stack_of(w->stack_ctx, id) : NULL;
	u64 iid;
	u32 n;

	if (!st || !st->n)
		return 0;
	iid = (u64)(uintptr_t)hmap_get(&w->cs_iids, id, 0);
	if (!iid && !w->fresh_cs_iid) {
		u64 inner[PF_STACK_FRAMES];

		/* Innermost first, while the packet has room for new strings. */
		n = 0;
		while (n < MIN(st->n, PF_STACK_FRAMES) && w->fresh_stack_bytes < PF_STACK_NEW_BYTES) {
			inner[n] = frame_iid(w, st->frames[n]);
			n++;
		}
		iid = w->next_cs_iid++;
		w->fresh_cs_iid = iid;
		w->fresh_cs_n = 0;
		for (u32 i = n; i-- > 0;)
			w->fresh_cs_frames[w->fresh_cs_n++] = inner[i]; /* root first */
		hmap_put(&w->cs_iids, id, 0, (void *)(uintptr_t)iid);
		w->interned++;
	}
	if (iid) /* (0: a second new stack in one packet: never happens, one per event) */
		w->uses_iids = true;
	return iid;
}

/*
 * One track event packet. Its interned ids are found first (defining new
 * ones in this packet, in the order they are written); then the room it can
 * take is reserved in the output buffer, and it is encoded there without
 * further checks.
 */
void pfw_track_event(struct pf_wire *w, u64 ts, const struct pf_ev *ev)
{
	u64 name_iid = 0, arg_iids[PF_MAX_ARGS], cs_iid = 0;
	const char *name = ev->name;
	char buf[2 * PF_NAME_PART_MAX + 4];
	size_t room, name_len = 0;
	bool has_interned;
	int nargs;
	u8 *start, *p, *pkt, *te;

	ts = pfw_pkt_prepare(w, ts);
	if (ev->iid_slot) {
		name_iid = cached_iid(w, *ev->iid_slot);
		if (!name_iid) {
			/* First use in this generation (interning may have restarted in this very packet). */
			if (!name) {
				size_t a = strlen(ev->lazy_a), b = strlen(ev->lazy_b);

				memcpy(buf, ev->lazy_a, a);
				memcpy(buf + a, ": ", 2);
				memcpy(buf + a + 2, ev->lazy_b, b + 1);
				name = buf;
			}
			name_iid = intern_cached(w, name);
			*ev->iid_slot = name_iid ? name_iid | w->intern_gen << IID_GEN_SHIFT : 0;
		} else {
			w->uses_iids = true;
		}
	} else if (name) {
		name_iid = ev->name_lit ? intern_lit(w, name, false)
					: intern(w, &w->names, &w->next_name_iid, ID_EVENT_NAMES, name);
	}
	nargs = MIN(ev->nargs, PF_MAX_ARGS); /* (never more: the callers' arrays are smaller) */
	for (int i = 0; i < nargs; i++)
		arg_iids[i] = intern_lit(w, ev->args[i].name, true);
	if (w->stack_next) {
		cs_iid = callstack_iid(w, w->stack_next);
		w->stack_next = 0;
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
	has_interned = pkt_has_interned(w);
	if (has_interned)
		room += pkt_interned_room(w);
	if (room > PF_EVENT_ROOM_MAX) {
		/*
		 * Bounded inputs make this impossible; counted if it ever is not.
		 * Ids found for this packet were never defined: interning starts
		 * again with the next one, so no later packet uses them.
		 */
		w->oversized++;
		w->interned = (u64)perfetto_intern_max + 1;
		return;
	}

	start = p = obuf_reserve(w->ob, room);
	p = pbw_begin(p, 1, &pkt); /* Trace.packet */
	p = pfw_put_head(w, p, ts);
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
		p = pkt_interned(w, p);
	if (w->uses_iids || w->clear_state)
		p = pbw_uint(p, TP_SEQ_FLAGS, pfw_seq_flags(w));
	p = pbw_end(p, pkt);
	obuf_commit(w->ob, p - start);
	w->packets++;
}

/* ---- track descriptors ---- */

void pfw_describe(struct pf_wire *w, u64 ts, const struct pf_desc *d)
{
	size_t mark;

	pkt_begin(w, ts);
	mark = pb_begin(&w->pb, TP_TRACK_DESC);
	pb_uint(&w->pb, TD_UUID, d->uuid);
	if (d->parent)
		pb_uint(&w->pb, TD_PARENT, d->parent);
	if (d->name)
		pb_str(&w->pb, TD_NAME, d->name);
	if (d->description)
		pb_str(&w->pb, TD_DESCRIPTION, d->description);
	if (d->counter) {
		size_t c = pb_begin(&w->pb, TD_COUNTER);

		pb_uint(&w->pb, CD_UNIT, UNIT_COUNT);
		pb_end(&w->pb, c);
	}
	if (d->child_ordering)
		pb_uint(&w->pb, TD_CHILD_ORDERING, d->child_ordering);
	if (d->rank)
		pb_int(&w->pb, TD_RANK, d->rank);
	if (d->merge)
		pb_uint(&w->pb, TD_MERGE, d->merge);
	pb_end(&w->pb, mark);
	pkt_end(w);
}

void pfw_describe_process(struct pf_wire *w, u64 ts, u64 uuid, u32 pid, const char *cmdline,
			  const char *name)
{
	size_t mark, pd;

	pkt_begin(w, ts);
	mark = pb_begin(&w->pb, TP_TRACK_DESC);
	pb_uint(&w->pb, TD_UUID, uuid);
	pd = pb_begin(&w->pb, TD_PROCESS);
	pb_int(&w->pb, PD_PID, pid);
	if (cmdline)
		pb_str(&w->pb, PD_CMDLINE, cmdline);
	pb_str(&w->pb, PD_NAME, name);
	pb_end(&w->pb, pd);
	pb_end(&w->pb, mark);
	pkt_end(w);
}

void pfw_describe_thread(struct pf_wire *w, u64 ts, u64 uuid, u32 pid, u32 tid, const char *name)
{
	size_t mark, td;

	pkt_begin(w, ts);
	mark = pb_begin(&w->pb, TP_TRACK_DESC);
	pb_uint(&w->pb, TD_UUID, uuid);
	td = pb_begin(&w->pb, TD_THREAD);
	pb_int(&w->pb, THD_PID, pid);
	pb_int(&w->pb, THD_TID, tid);
	if (name)
		pb_str(&w->pb, THD_NAME, name);
	pb_end(&w->pb, td);
	pb_end(&w->pb, mark);
	pkt_end(w);
}

void pfw_sequence_start(struct pf_wire *w, u64 ts)
{
	size_t d;

	pkt_begin(w, ts);
	pb_uint(&w->pb, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_bool(&w->pb, TP_FIRST_ON_SEQ, true);
	d = pb_begin(&w->pb, TP_DEFAULTS);
	pb_uint(&w->pb, DEFAULTS_CLOCK_ID, BUILTIN_CLOCK_BOOTTIME);
	pb_end(&w->pb, d);
	pkt_end(w);
}

void pfw_init(struct pf_wire *w, struct obuf *ob)
{
	memset(w, 0, sizeof(*w));
	w->ob = ob;
	w->next_name_iid = 1;
	w->intern_gen = 1;
	w->next_da_iid = 1;
	w->next_cs_iid = w->next_frame_iid = w->next_fn_iid = w->next_src_iid = 1;
	hmap_init(&w->cs_iids);
	hmap_init(&w->frame_iids);
	hmap_init(&w->fn_iids);
	hmap_init(&w->src_iids);
	hmap_init(&w->names);
	hmap_init(&w->da_names);
}

int pfw_error(const struct pf_wire *w)
{
	if (w->oversized)
		return -EMSGSIZE;
	return w->ob->err ? -w->ob->err : 0;
}

void pfw_free(struct pf_wire *w)
{
	hmap_free(&w->names);
	hmap_free(&w->da_names);
	hmap_free(&w->cs_iids);
	hmap_free(&w->frame_iids);
	hmap_free(&w->fn_iids);
	hmap_free(&w->src_iids);
	arena_free(&w->strings);
}
