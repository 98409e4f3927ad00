/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records to decoded events (user/model/event.h): the one place besides the
 * model's own state machine that reads record layouts. The model decodes a
 * record before applying it (so observers called during the apply see the
 * event being applied) and fills in what the apply found (the coroutines,
 * thread and process concerned, span matching) afterwards.
 */
#ifndef COROBPF_DECODE_H
#define COROBPF_DECODE_H

#include <string.h>
#include "event.h"
#include "raw.h"

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

/*
 * The header's facts and the payload of `h` into *ev. Of the model's part,
 * c, to and the span's owner, depth and matching are left zero; seq,
 * cur_known, thread and proc are left for the model to set. False for a
 * kind observers never see.
 * Inline: it is on the path of every record.
 */
static inline __attribute__((always_inline)) bool event_decode(struct event *ev,
							       const struct coro_event_hdr *h)
{
	ev->kind = h->kind;
	ev->pid = h->pid;
	ev->tid = h->tid;
	ev->ts = h->ts;
	ev->lost_before = h->lost_before;
	ev->stack = 0;
	ev->str_truncated = h->flags & CORO_EVF_STR_TRUNCATED;
	ev->str_unreadable = h->flags & CORO_EVF_STR_FAULT;
	ev->per_thread = h->kind <= CORO_EV_BPF_MAX && !(h->flags & CORO_EVF_NO_THREAD);
	ev->cur = h->cur;
	ev->c = ev->to = NULL;
	switch (h->kind) {
	case CORO_EV_CREATE: {
		const struct coro_ev_create *e = (const void *)h;

		ev->stack = coro_record_stack(h);
		ev->create.id = e->id;
		ev->create.parent = e->parent;
		return true;
	}
	case CORO_EV_NAME: {
		const struct coro_ev_name *e = (const void *)h;

		ev->name.id = e->id;
		/* One made in user space may run on past the field (raw.h, CORO_NAME_MAX). */
		ev->name.name = str_tail(h, e->name);
		if (ev->name.name.len > CORO_NAME_MAX - 1)
			ev->name.name.len = CORO_NAME_MAX - 1;
		return true;
	}
	case CORO_EV_READY:
		ev->ready.id = ((const struct coro_ev_ready *)h)->id;
		return true;
	case CORO_EV_SWITCH: {
		const struct coro_ev_switch *e = (const void *)h;

		ev->stack = coro_record_stack(h);
		ev->sw.from = e->from;
		ev->sw.to = e->to;
		ev->sw.obj = e->obj;
		ev->sw.reason = e->reason;
		ev->sw.awaiter = (struct ev_str){NULL, 0};
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
		if (h->kind == CORO_EV_SPAN_BEGIN)
			ev->stack = coro_record_stack(h);
		ev->span.owner = 0;
		ev->span.owner_known = false;
		ev->span.depth = 0;
		ev->span.matched = false;
		return true;
	case CORO_EV_OFFCPU_BEGIN: {
		const struct coro_ev_offcpu_begin *e = (const void *)h;

		ev->stack = coro_record_stack(h);
		ev->offcpu.start = ev->offcpu.runq_ns = 0;
		ev->offcpu.state = e->state;
		ev->offcpu.cpu = e->cpu;
		ev->offcpu.late = false;
		return true;
	}
	case CORO_EV_OFFCPU_END: {
		const struct coro_ev_offcpu_end *e = (const void *)h;

		ev->offcpu.start = e->start;
		ev->offcpu.runq_ns = e->runq_ns;
		ev->offcpu.state = e->state;
		ev->offcpu.cpu = e->cpu;
		ev->offcpu.late = h->flags & CORO_EVF_OFFCPU_LATE;
		return true;
	}
	case CORO_EV_SAMPLE:
		ev->stack = coro_record_stack(h);
		return true;
	case CORO_EV_LIBLOAD:
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
	case CORO_REC_LOST:
		return true;
	case CORO_REC_END:
		ev->end.reason = ((const struct coro_rec_end *)h)->reason;
		return true;
	}
	return false;
}

#endif
