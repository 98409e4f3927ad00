// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <string.h>
#include "decode.h"

/* Decoded kinds are the record kinds: one name per kind in every output. */
_Static_assert((int)EV_CREATE == (int)CORO_EV_CREATE && (int)EV_NAME == (int)CORO_EV_NAME &&
		       (int)EV_READY == (int)CORO_EV_READY && (int)EV_SWITCH == (int)CORO_EV_SWITCH &&
		       (int)EV_EXIT == (int)CORO_EV_EXIT && (int)EV_SPAN_BEGIN == (int)CORO_EV_SPAN_BEGIN &&
		       (int)EV_SPAN_END == (int)CORO_EV_SPAN_END && (int)EV_LIBLOAD == (int)CORO_EV_LIBLOAD &&
		       (int)EV_OFFCPU_BEGIN == (int)CORO_EV_OFFCPU_BEGIN &&
		       (int)EV_OFFCPU_END == (int)CORO_EV_OFFCPU_END && (int)EV_PROC_NEW == (int)CORO_EV_PROC_NEW &&
		       (int)EV_EXEC == (int)CORO_EV_EXEC && (int)EV_PROC_GONE == (int)CORO_EV_PROC_GONE &&
		       (int)EV_SAMPLE == (int)CORO_EV_SAMPLE,
	       "decoded BPF kinds keep their record numbers");
_Static_assert((int)EV_PROCESS == (int)CORO_REC_PROCESS && (int)EV_THREAD == (int)CORO_REC_THREAD &&
		       (int)EV_OBJECT == (int)CORO_REC_OBJECT && (int)EV_PROC_EXIT == (int)CORO_REC_PROC_EXIT &&
		       (int)EV_STATS == (int)CORO_REC_STATS && (int)EV_END == (int)CORO_REC_END &&
		       (int)EV_SWITCH_PATH == (int)CORO_REC_SWITCH,
	       "decoded user kinds keep their record numbers");

const char *event_kind_name(enum event_kind kind)
{
	return coro_kind_name(kind);
}

/* A fixed-size field: up to its first NUL. */
static inline struct ev_str str_field(const char *s, size_t max)
{
	return (struct ev_str){s, (u32)strnlen(s, max)};
}

/* A string at the end of a record (validated: NUL-terminated within it). */
static inline struct ev_str str_tail(const struct coro_event_hdr *h, const char *s)
{
	return str_field(s, (const char *)h + h->size - s);
}

bool event_decode(struct event *ev, const struct coro_event_hdr *h)
{
	memset(ev, 0, sizeof(*ev));
	ev->kind = h->kind;
	ev->pid = h->pid;
	ev->tid = h->tid;
	ev->ts = h->ts;
	ev->lost_before = h->lost_before;
	ev->cur = h->cur;
	ev->str_truncated = h->flags & CORO_EVF_STR_TRUNCATED;
	ev->str_unreadable = h->flags & CORO_EVF_STR_FAULT;
	if (h->kind <= CORO_EV_BPF_MAX) {
		ev->per_thread = !(h->flags & CORO_EVF_NO_THREAD);
		ev->stack = coro_record_stack(h);
	}
	switch (h->kind) {
	case CORO_EV_CREATE: {
		const struct coro_ev_create *e = (const void *)h;

		ev->create.id = e->id;
		ev->create.parent = e->parent;
		return true;
	}
	case CORO_EV_NAME: {
		const struct coro_ev_name *e = (const void *)h;

		ev->name.id = e->id;
		ev->name.name = str_field(e->name, CORO_STR_LEN);
		return true;
	}
	case CORO_EV_READY:
		ev->ready.id = ((const struct coro_ev_ready *)h)->id;
		return true;
	case CORO_EV_SWITCH: {
		const struct coro_ev_switch *e = (const void *)h;

		ev->sw.from = e->from;
		ev->sw.to = e->to;
		ev->sw.obj = e->obj;
		ev->sw.reason = e->reason;
		return true;
	}
	case CORO_EV_EXIT: {
		const struct coro_ev_exit *e = (const void *)h;

		ev->exit.id = e->id;
		ev->exit.status = e->status;
		return true;
	}
	case CORO_EV_SPAN_BEGIN:
	case CORO_EV_SPAN_END:
		ev->span.name = str_field(((const struct coro_ev_span *)h)->name, CORO_STR_LEN);
		return true;
	case CORO_EV_OFFCPU_BEGIN: {
		const struct coro_ev_offcpu_begin *e = (const void *)h;

		ev->offcpu.state = e->state;
		ev->offcpu.cpu = e->cpu;
		return true;
	}
	case CORO_EV_OFFCPU_END: {
		const struct coro_ev_offcpu_end *e = (const void *)h;

		ev->offcpu.start = e->start;
		ev->offcpu.runq_ns = e->runq_ns;
		ev->offcpu.state = e->state;
		ev->offcpu.cpu = e->cpu;
		return true;
	}
	case CORO_EV_LIBLOAD:
	case CORO_EV_SAMPLE:
	case CORO_EV_PROC_NEW:
		return true;
	case CORO_EV_EXEC:
		ev->comm.comm = str_field(((const struct coro_ev_proc *)h)->comm, 16);
		return true;
	case CORO_EV_PROC_GONE:
		ev->proc_exit.status = ((const struct coro_ev_proc *)h)->exit_code;
		return true;
	case CORO_REC_PROCESS: {
		const struct coro_rec_process *r = (const void *)h;

		ev->process.comm = str_field(r->comm, sizeof(r->comm));
		ev->process.exe = str_tail(h, r->exe);
		ev->process.mode = r->mode;
		ev->process.ppid = r->ppid;
		return true;
	}
	case CORO_REC_THREAD:
		ev->comm.comm = str_field(((const struct coro_rec_thread *)h)->comm, 16);
		return true;
	case CORO_REC_OBJECT: {
		const struct coro_rec_object *r = (const void *)h;

		ev->object.path = str_tail(h, r->path);
		ev->object.probes = r->probes;
		ev->object.late = r->late;
		return true;
	}
	case CORO_REC_SWITCH: {
		const struct coro_rec_switch *r = (const void *)h;

		ev->switch_path.path = str_tail(h, r->text);
		ev->switch_path.sites = str_tail(h, ev->switch_path.path.s +
							    ev->switch_path.path.len + 1);
		ev->switch_path.limits = str_tail(h, ev->switch_path.sites.s +
							     ev->switch_path.sites.len + 1);
		ev->switch_path.family = r->family;
		ev->switch_path.uprobes = r->sites;
		ev->switch_path.stepped = r->stepped;
		return true;
	}
	case CORO_REC_PROC_EXIT:
		ev->proc_exit.status = ((const struct coro_rec_proc_exit *)h)->status;
		return true;
	case CORO_REC_STATS:
		return true;
	case CORO_REC_END:
		ev->end.reason = ((const struct coro_rec_end *)h)->reason;
		return true;
	}
	return false;
}
