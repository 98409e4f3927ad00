// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Records user space adds to a live capture. See liverec.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gowalk.h"
#include "liverec.h"
#include "procfs.h"

void liverec_process(const struct record_sink *s, const struct target *t)
{
	size_t len = strlen(t->exe) + 1, size = ROUND_UP(sizeof(struct coro_rec_process) + len, 8);
	struct coro_rec_process *r = xcalloc(1, size);

	r->hdr.size = size;
	r->hdr.kind = CORO_REC_PROCESS;
	r->hdr.pid = t->pid;
	r->hdr.tid = t->pid;
	r->hdr.ts = t->start_ts; /* before its probes were attached: first in time */
	r->mode = t->launched ? CORO_PROC_LAUNCHED : t->forked ? CORO_PROC_FORKED : CORO_PROC_ATTACHED;
	r->ppid = t->ppid;
	if (r->mode == CORO_PROC_ATTACHED)
		r->hdr.cur = t->traced_from; /* records.h */
	memcpy(r->comm, t->comm, sizeof(r->comm));
	memcpy(r->exe, t->exe, len);
	record_sink_emit(s, &r->hdr);
	free(r);
}

void liverec_thread(const struct record_sink *s, u32 pid, u32 tid, u64 ts, const char *known)
{
	struct coro_rec_thread r = {};

	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_REC_THREAD;
	r.hdr.pid = pid;
	r.hdr.tid = tid;
	r.hdr.ts = ts;
	proc_read_comm(pid, tid, r.comm);
	if (!r.comm[0] && known) {
		memcpy(r.comm, known, sizeof(r.comm));
		r.comm[sizeof(r.comm) - 1] = 0;
	}
	record_sink_emit(s, &r.hdr);
}

void liverec_proc_exit(const struct record_sink *s, u32 pid, int wait_status)
{
	liverec_proc_exit_at(s, pid, wait_status, now_boottime_ns());
}

void liverec_proc_exit_at(const struct record_sink *s, u32 pid, int wait_status, u64 ts)
{
	struct coro_rec_proc_exit r = {};

	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_REC_PROC_EXIT;
	r.hdr.pid = pid;
	r.hdr.tid = pid;
	r.hdr.ts = ts;
	r.status = wait_status;
	record_sink_emit(s, &r.hdr);
}

static void emit_switch(const struct record_sink *s, const struct attach_found *f)
{
	size_t lp = strlen(f->path) + 1, ls = strlen(f->site_text) + 1, ll = strlen(f->limits) + 1;
	size_t size = ROUND_UP(sizeof(struct coro_rec_switch) + lp + ls + ll, 8);
	struct coro_rec_switch *r;

	if (size > 60000)
		return; /* cannot happen with the planner's bounded strings */
	r = xcalloc(1, size);
	r->hdr.size = (u16)size;
	r->hdr.kind = CORO_REC_SWITCH;
	r->hdr.pid = f->pid;
	r->hdr.tid = f->pid;
	r->hdr.ts = f->ts;
	r->family = f->family;
	r->sites = f->sites;
	r->stepped = f->stepped;
	memcpy(r->text, f->path, lp);
	memcpy(r->text + lp, f->site_text, ls);
	memcpy(r->text + lp + ls, f->limits, ll);
	record_sink_emit(s, &r->hdr);
	free(r);
}

static void emit_object(const struct record_sink *s, const struct attach_found *f)
{
	size_t len = strlen(f->path) + 1, size = ROUND_UP(sizeof(struct coro_rec_object) + len, 8);
	struct coro_rec_object *r = xcalloc(1, size);

	r->hdr.size = size;
	r->hdr.kind = CORO_REC_OBJECT;
	r->hdr.pid = f->pid;
	r->hdr.ts = f->ts;
	r->probes = f->sites;
	r->late = f->late;
	memcpy(r->path, f->path, len);
	record_sink_emit(s, &r->hdr);
	free(r);
}

void liverec_found(const struct record_sink *s, const struct attach_found *f)
{
	if (f->kind == ATTACH_FOUND_SWITCH)
		emit_switch(s, f);
	else if (f->kind == ATTACH_FOUND_GO_WALK)
		gowalk_emit(f->go_gs, f->ngo_gs, NULL, s->emit, s->ctx);
	else
		emit_object(s, f);
}
