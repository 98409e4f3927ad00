// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The record kinds: each one's row and its decoding (kinds.h), and the names
 * outputs give the values decoded events carry (event.h).
 */
#include <string.h>
#include "kinds.h"
#include "records.h"

/* A string at the end of a record (validated: NUL-terminated within it). */
static struct ev_str str_tail(const struct coro_event_hdr *h, const char *s)
{
	return str_field(s, (const char *)h + h->size - s);
}

/* ---- decoding: the payload of each kind a decoded event carries (event.h) ---- */

static void decode_create(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_create *e = (const void *)h;

	ev->create.id = e->id;
	ev->create.parent = e->parent;
}

static void decode_name(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_name *e = (const void *)h;

	ev->name.id = e->id;
	/* One made in user space may run on past the field (records.h, coro_name_record()). */
	ev->name.name = str_tail(h, e->name);
	if (ev->name.name.len > CORO_NAME_MAX - 1)
		ev->name.name.len = CORO_NAME_MAX - 1;
}

static void decode_announce(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_announce *e = (const void *)h;

	ev->announce.id = e->id;
	ev->announce.parent = e->parent;
	ev->announce.obj = e->obj;
	ev->announce.reason = e->reason;
	ev->announce.name = str_field(e->name, sizeof(e->name));
}

static void decode_announce_done(struct event *ev, const struct coro_event_hdr *h)
{
	ev->announce_done.asked = ((const struct coro_ev_announce_done *)h)->asked;
}

static void decode_ready(struct event *ev, const struct coro_event_hdr *h)
{
	ev->ready.id = ((const struct coro_ev_ready *)h)->id;
}

static void decode_switch(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_switch *e = (const void *)h;

	ev->sw.from = e->from;
	ev->sw.to = e->to;
	ev->sw.obj = e->obj;
	ev->sw.reason = e->reason;
	ev->sw.awaiter = (struct ev_str){NULL, 0};
}

static void decode_exit(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_exit *e = (const void *)h;

	ev->exit.id = e->id;
	ev->exit.status = e->status;
}

static void decode_span(struct event *ev, const struct coro_event_hdr *h)
{
	ev->span.name = str_field(((const struct coro_ev_span *)h)->name, CORO_STR_LEN);
	ev->span.owner = 0;
	ev->span.owner_known = false;
	ev->span.depth = 0;
	ev->span.matched = false;
	ev->span.before_trace = false;
}

static void decode_offcpu_begin(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_offcpu_begin *e = (const void *)h;

	ev->offcpu.start = ev->offcpu.runq_ns = ev->offcpu.end = 0;
	ev->offcpu.state = e->state;
	ev->offcpu.cpu = e->cpu;
	ev->offcpu.late = false;
	ev->offcpu.owner = NULL;
}

static void decode_offcpu_end(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_ev_offcpu_end *e = (const void *)h;

	ev->offcpu.start = e->start;
	ev->offcpu.runq_ns = e->runq_ns;
	ev->offcpu.state = e->state;
	ev->offcpu.cpu = e->cpu;
	ev->offcpu.late = h->flags & CORO_EVF_OFFCPU_LATE;
	ev->offcpu.end = h->ts;
	ev->offcpu.owner = NULL;
}

/* The kind and the header say it all (a sample's stack, a loader's or a process's notice). */
static void decode_header(struct event *ev, const struct coro_event_hdr *h)
{
}

static void decode_exec(struct event *ev, const struct coro_event_hdr *h)
{
	ev->comm.comm = str_field(((const struct coro_ev_proc *)h)->comm, 16);
}

static void decode_proc_gone(struct event *ev, const struct coro_event_hdr *h)
{
	ev->proc_exit.status = ((const struct coro_ev_proc *)h)->exit_code;
}

static void decode_process(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_rec_process *r = (const void *)h;

	ev->process.comm = str_field(r->comm, sizeof(r->comm));
	ev->process.exe = str_tail(h, r->exe);
	ev->process.mode = r->mode;
	ev->process.ppid = r->ppid;
	ev->process.traced_from = r->mode == CORO_PROC_ATTACHED ? h->cur : 0;
}

static void decode_thread(struct event *ev, const struct coro_event_hdr *h)
{
	ev->comm.comm = str_field(((const struct coro_rec_thread *)h)->comm, 16);
}

static void decode_object(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_rec_object *r = (const void *)h;

	ev->object.path = str_tail(h, r->path);
	ev->object.probes = r->probes;
	ev->object.late = r->late;
}

static void decode_switch_path(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_rec_switch *r = (const void *)h;

	ev->switch_path.path = str_tail(h, r->text);
	ev->switch_path.sites = str_tail(h, ev->switch_path.path.s + ev->switch_path.path.len + 1);
	ev->switch_path.limits = str_tail(h, ev->switch_path.sites.s +
						     ev->switch_path.sites.len + 1);
	ev->switch_path.family = r->family;
	ev->switch_path.uprobes = r->sites;
	ev->switch_path.stepped = r->stepped;
}

static void decode_proc_exit(struct event *ev, const struct coro_event_hdr *h)
{
	ev->proc_exit.status = ((const struct coro_rec_proc_exit *)h)->status;
}

static void decode_stats(struct event *ev, const struct coro_event_hdr *h)
{
	const struct coro_rec_stats *r = (const void *)h;

	ev->stats.bpf = r->bpf;
	ev->stats.user = r->user;
	ev->stats.nuser = (u32)MIN((h->size - offsetof(struct coro_rec_stats, user)) / 8,
				   (size_t)CORO_USTAT_MAX);
}

static void decode_end(struct event *ev, const struct coro_event_hdr *h)
{
	ev->end.reason = ((const struct coro_rec_end *)h)->reason;
}

/* ---- what else a valid record holds ---- */

static const char *check_map(const struct coro_event_hdr *h)
{
	const struct coro_rec_map *m = (const void *)h;

	return m->build_id_len > sizeof(m->build_id) ? "map record with a bad build-id length"
						     : NULL;
}

static const char *check_stack(const struct coro_event_hdr *h)
{
	const struct coro_rec_stack *st = (const void *)h;

	if (st->nframes > CORO_STACK_DEPTH || st->id == 0 ||
	    sizeof(*st) + (size_t)st->nframes * 8 > h->size)
		return "stack record with a bad frame count or id";
	return NULL;
}

/* ---- the table ---- */

/*
 * A decoded kind keeps its record's number (event.h): checked here, beside
 * the kind's row.
 */
#define SAME_KIND(ev, rec) _Static_assert((int)(ev) == (int)(rec), #ev " is " #rec)
SAME_KIND(EV_CREATE, CORO_EV_CREATE);
SAME_KIND(EV_NAME, CORO_EV_NAME);
SAME_KIND(EV_READY, CORO_EV_READY);
SAME_KIND(EV_ANNOUNCE, CORO_EV_ANNOUNCE);
SAME_KIND(EV_ANNOUNCE_DONE, CORO_EV_ANNOUNCE_DONE);
SAME_KIND(EV_SWITCH, CORO_EV_SWITCH);
SAME_KIND(EV_EXIT, CORO_EV_EXIT);
SAME_KIND(EV_SPAN_BEGIN, CORO_EV_SPAN_BEGIN);
SAME_KIND(EV_SPAN_END, CORO_EV_SPAN_END);
SAME_KIND(EV_LIBLOAD, CORO_EV_LIBLOAD);
SAME_KIND(EV_OFFCPU_BEGIN, CORO_EV_OFFCPU_BEGIN);
SAME_KIND(EV_OFFCPU_END, CORO_EV_OFFCPU_END);
SAME_KIND(EV_PROC_NEW, CORO_EV_PROC_NEW);
SAME_KIND(EV_EXEC, CORO_EV_EXEC);
SAME_KIND(EV_PROC_GONE, CORO_EV_PROC_GONE);
SAME_KIND(EV_SAMPLE, CORO_EV_SAMPLE);
SAME_KIND(EV_PROCESS, CORO_REC_PROCESS);
SAME_KIND(EV_THREAD, CORO_REC_THREAD);
SAME_KIND(EV_OBJECT, CORO_REC_OBJECT);
SAME_KIND(EV_PROC_EXIT, CORO_REC_PROC_EXIT);
SAME_KIND(EV_STATS, CORO_REC_STATS);
SAME_KIND(EV_END, CORO_REC_END);
SAME_KIND(EV_SWITCH_PATH, CORO_REC_SWITCH);
SAME_KIND(EV_LOST, CORO_REC_LOST);
SAME_KIND(EV_BPF_MAX, CORO_EV_BPF_MAX);

#define SIZE(type) .size = sizeof(struct type)

/*
 * Kinds without a size (the raw facts C++20's and the batched path's user
 * side reads, those that never reach a capture) are checked where they
 * are read.
 */
/* clang-format off */
const struct record_kind record_kinds[256] = {
	[CORO_EV_CREATE] = {"create", SIZE(coro_ev_create), .flags = RK_STACK,
			    .decode = decode_create},
	[CORO_EV_NAME] = {"name", SIZE(coro_ev_name), .decode = decode_name},
	[CORO_EV_READY] = {"ready", SIZE(coro_ev_ready), .decode = decode_ready},
	[CORO_EV_SWITCH] = {"switch", SIZE(coro_ev_switch), .flags = RK_STACK,
			    .decode = decode_switch},
	[CORO_EV_EXIT] = {"exit", SIZE(coro_ev_exit), .decode = decode_exit},
	[CORO_EV_SPAN_BEGIN] = {"span_begin", SIZE(coro_ev_span), .flags = RK_STACK,
				.decode = decode_span},
	[CORO_EV_SPAN_END] = {"span_end", SIZE(coro_ev_span), .decode = decode_span},
	[CORO_EV_LIBLOAD] = {"libload", SIZE(coro_ev_libload), .flags = RK_NOTICE,
			     .decode = decode_header},
	[CORO_EV_OFFCPU_BEGIN] = {"offcpu_begin", SIZE(coro_ev_offcpu_begin), .flags = RK_STACK,
				  .decode = decode_offcpu_begin},
	[CORO_EV_OFFCPU_END] = {"offcpu", SIZE(coro_ev_offcpu_end), .decode = decode_offcpu_end},
	[CORO_EV_PROC_NEW] = {"process_new", SIZE(coro_ev_proc), .flags = RK_NOTICE,
			      .decode = decode_header},
	[CORO_EV_EXEC] = {"exec", SIZE(coro_ev_proc), .flags = RK_NOTICE, .decode = decode_exec},
	[CORO_EV_PROC_GONE] = {"process_gone", SIZE(coro_ev_proc), .flags = RK_NOTICE,
			       .decode = decode_proc_gone},
	[CORO_EV_CTX_CREATE] = {"ctx_create", SIZE(coro_ev_ctx_create), .flags = RK_STACK},
	[CORO_EV_CTX_SWITCH] = {"ctx_switch", SIZE(coro_ev_ctx_switch), .flags = RK_STACK},
	[CORO_EV_CTX_EXIT] = {"ctx_exit", SIZE(coro_ev_ctx_exit)},
	[CORO_EV_SAMPLE] = {"sample", SIZE(coro_ev_sample), .flags = RK_STACK,
			    .decode = decode_header},
	[CORO_EV_CTX_ENTRY] = {"ctx_entry"},
	[CORO_EV_GO_STATUS] = {"go_status", SIZE(coro_ev_go_status), .flags = RK_STACK},
	[CORO_EV_GO_ENTRY] = {"go_entry"},
	[CORO_EV_CXX] = {"cxx"},
	[CORO_EV_CXX_AWAIT] = {"cxx_await"},
	[CORO_EV_CXX_AWAITER] = {"cxx_awaiter", SIZE(coro_ev_cxx_awaiter)},
	[CORO_EV_BATCH] = {"batch"},
	[CORO_EV_ANNOUNCE] = {"announce", SIZE(coro_ev_announce), .decode = decode_announce},
	[CORO_EV_ANNOUNCE_DONE] = {"announce_done", SIZE(coro_ev_announce_done),
				   .decode = decode_announce_done},

	[CORO_REC_PROCESS] = {"process", SIZE(coro_rec_process), .strings = 1,
			      .decode = decode_process},
	[CORO_REC_THREAD] = {"thread", SIZE(coro_rec_thread), .decode = decode_thread},
	[CORO_REC_OBJECT] = {"object", SIZE(coro_rec_object), .strings = 1,
			     .decode = decode_object},
	[CORO_REC_PROC_EXIT] = {"process_exit", SIZE(coro_rec_proc_exit),
				.decode = decode_proc_exit},
	/* An older capture's stats record is shorter (CORO_USTAT_V1_MAX user counters). */
	[CORO_REC_STATS] = {"stats", .size = CORO_REC_STATS_V1_SIZE, .decode = decode_stats},
	[CORO_REC_END] = {"end", SIZE(coro_rec_end), .decode = decode_end},
	[CORO_REC_SWITCH] = {"switch_path", SIZE(coro_rec_switch), .strings = 3,
			     .decode = decode_switch_path},
	[CORO_REC_MAP] = {"map", SIZE(coro_rec_map), .strings = 1, .flags = RK_DEFINITION,
			  .check = check_map},
	[CORO_REC_STACK] = {"stack", SIZE(coro_rec_stack), .flags = RK_DEFINITION,
			    .check = check_stack},
	[CORO_REC_GO_G] = {"go_goroutine", SIZE(coro_rec_go_g), .flags = RK_STACK},
	/* A hole read back from JSONL (records.h): the header alone. */
	[CORO_REC_LOST] = {"lost", .decode = decode_header},
};
/* clang-format on */

/* ---- names (event.h) ---- */

const char *event_kind_name(enum event_kind kind)
{
	return record_kind(kind)->name;
}

const char *coro_family_name(u32 family)
{
	switch (family) {
	case CORO_FAM_UCONTEXT: return "ucontext";
	case CORO_FAM_FCONTEXT: return "boost-context";
	case CORO_FAM_PTH: return "pth";
	case CORO_FAM_CUSTOM: return "custom";
	case CORO_FAM_RUBY: return "ruby";
	case CORO_FAM_QEMU: return "qemu";
	case CORO_FAM_GREENLET: return "greenlet";
	case CORO_FAM_GO: return "go";
	case CORO_FAM_CXX20: return "cxx20";
	case CORO_FAM_ASYNCIO: return "asyncio";
	case CORO_FAM_LUA: return "lua";
	}
	return "?";
}

u32 coro_family_parse(const char *name)
{
	for (u32 f = CORO_FAM_UCONTEXT; f <= CORO_FAM_LUA; f++)
		if (!strcmp(name, coro_family_name(f)))
			return f;
	return 0;
}

const char *coro_reason_name(u32 reason)
{
	static const char *names[CORO_R_DONE + 1] = {"unknown", "yield", "wait", "sleep", "io",
						     "done"};
	return reason <= CORO_R_DONE ? names[reason] : "unknown";
}

const char *coro_offcpu_state_name(u32 state)
{
	switch (state) {
	case CORO_OFF_PREEMPTED: return "preempted";
	case CORO_OFF_SLEEPING: return "sleeping";
	case CORO_OFF_DISK: return "disk";
	}
	return "other";
}

const char *coro_end_reason_name(u32 reason)
{
	switch (reason) {
	case CORO_END_TARGETS_EXITED: return "targets_exited";
	case CORO_END_SIGNAL: return "signal";
	case CORO_END_DURATION: return "duration";
	case CORO_END_ERROR: return "error";
	}
	return "none";
}

const char *coro_proc_mode_name(u32 mode)
{
	switch (mode) {
	case CORO_PROC_LAUNCHED: return "launched";
	case CORO_PROC_FORKED: return "forked";
	}
	return "attached";
}

unsigned record_kind_by_name(const char *name)
{
	for (unsigned k = 1; k < 256; k++)
		if (record_kinds[k].name && !strcmp(record_kinds[k].name, name))
			return k;
	return 0;
}

/* ---- records user space makes ---- */

void coro_name_record(struct coro_ev_name *rec, const char *name)
{
	size_t len = strlen(name), room;

	if (len >= CORO_NAME_MAX) {
		len = CORO_NAME_MAX - 1;
		rec->hdr.flags |= CORO_EVF_STR_TRUNCATED;
	}
	room = MAX(len + 1, sizeof(rec->name));
	rec->hdr.kind = CORO_EV_NAME;
	rec->hdr.size = (u16)ROUND_UP(offsetof(struct coro_ev_name, name) + room, 8);
	memset(rec->name, 0, rec->hdr.size - offsetof(struct coro_ev_name, name));
	memcpy(rec->name, name, len);
}

/* ---- validation and stacks ---- */

bool coro_record_valid(const struct coro_event_hdr *h, size_t avail, const char **why)
{
	const struct record_kind *k;
	const char *p, *end;

	if (avail < sizeof(*h)) {
		*why = "record header cut short";
		return false;
	}
	if (h->size < sizeof(*h) || h->size % 8) {
		*why = "record size is not a multiple of 8 of at least the header";
		return false;
	}
	if (h->size > avail) {
		*why = "record runs past the end of its block";
		return false;
	}
	if (h->kind == 0) {
		*why = "record kind 0";
		return false;
	}
	k = record_kind(h->kind);
	if (h->size < (k->size ? k->size + k->strings : sizeof(*h))) {
		*why = "record shorter than its kind requires";
		return false;
	}
	/* Strings inside must end within the record. */
	p = (const char *)h + k->size;
	end = (const char *)h + h->size;
	for (int i = 0; i < k->strings; i++) {
		const char *z = memchr(p, 0, (size_t)(end - p));

		if (!z) {
			*why = "string in record not terminated";
			return false;
		}
		p = z + 1;
	}
	if (k->check && (*why = k->check(h)))
		return false;
	return true;
}

size_t coro_stack_base_size(unsigned kind)
{
	const struct record_kind *k = record_kind(kind);

	return k->flags & RK_STACK ? k->size : 0;
}

const struct coro_stack_ref *coro_stack_ref_of(const struct coro_event_hdr *h)
{
	size_t base = coro_stack_base_size(h->kind);

	if (!base || h->size < base + sizeof(struct coro_stack_ref))
		return NULL;
	return (const struct coro_stack_ref *)((const char *)h + base);
}

u32 coro_record_stack(const struct coro_event_hdr *h)
{
	const struct coro_stack_ref *r = coro_stack_ref_of(h);

	return r && r->how == CORO_STACK_CAPTURE_ID ? r->id : 0;
}

/* ---- decoding ---- */

bool event_decode(struct event *ev, const struct coro_event_hdr *h)
{
	const struct record_kind *k = record_kind(h->kind);

	ev->kind = h->kind;
	ev->pid = h->pid;
	ev->tid = h->tid;
	ev->ts = h->ts;
	ev->lost_before = h->lost_before;
	ev->str_truncated = h->flags & CORO_EVF_STR_TRUNCATED;
	ev->str_unreadable = h->flags & CORO_EVF_STR_FAULT;
	ev->no_thread = h->flags & CORO_EVF_NO_THREAD;
	ev->cur_unknown = h->flags & CORO_EVF_CUR_UNKNOWN;
	ev->cur_unsaid = h->flags & CORO_EVF_CUR_UNSAID;
	ev->per_thread = h->kind <= CORO_EV_BPF_MAX && !ev->no_thread;
	ev->cur = h->cur;
	ev->c = ev->to = NULL;
	ev->stack = k->flags & RK_STACK ? coro_record_stack(h) : 0;
	if (!k->decode)
		return false;
	k->decode(ev, h);
	return true;
}
