// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "counters.h"
#include "finding.h"
#include "jsonl.h"
#include "log.h"

struct jsonl_sink {
	struct obuf *ob;
	const struct model *m;
	struct hmap stacks_written; /* (stack id, 0) */
	/* Coroutine summaries go to the end of the file; until then they wait on disk, not in memory. */
	int spill_fd;
	struct obuf spill;
	int err;
	u64 findings[FK_NKINDS];
};

static int open_spill(const char *path)
{
	char *copy = xstrdup(path), *dir = dirname(copy);
	char tmpl[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0) {
		/* Filesystems without O_TMPFILE: a named file, unlinked at once. */
		snprintf(tmpl, sizeof(tmpl), "%s/.corobpf-spill-XXXXXX", dir);
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0)
			unlink(tmpl);
	}
	free(copy);
	return fd;
}

/* Inlined, so a key's length and copy fold to a few moves. */
static inline __attribute__((always_inline)) void put_id(struct obuf *o, const char *key, u64 id)
{
	obuf_puts(o, ",\"");
	obuf_puts(o, key);
	obuf_puts(o, "\":\"");
	obuf_hex(o, id);
	obuf_putc(o, '"');
}

static inline __attribute__((always_inline)) void put_u64(struct obuf *o, const char *key, u64 v)
{
	obuf_puts(o, ",\"");
	obuf_puts(o, key);
	obuf_puts(o, "\":");
	obuf_u64(o, v);
}

static inline __attribute__((always_inline)) void put_str(struct obuf *o, const char *key, const char *s, size_t max)
{
	obuf_puts(o, ",\"");
	obuf_puts(o, key);
	obuf_puts(o, "\":");
	obuf_json_str(o, s, max);
}

static inline __attribute__((always_inline)) void begin_record(struct obuf *o, const char *type, const struct coro_event_hdr *h)
{
	obuf_puts(o, "{\"type\":\"");
	obuf_puts(o, type);
	obuf_puts(o, "\"");
}

static inline __attribute__((always_inline)) void put_common(struct obuf *o, const struct coro_event_hdr *h, bool tid)
{
	put_u64(o, "ts", h->ts);
	put_u64(o, "pid", h->pid);
	if (tid)
		put_u64(o, "tid", h->tid);
}

/*
 * A stack's definition line, once, in the main stream before the first line
 * that names it (coroutine summaries are written later, at the end).
 */
static void need_stack(struct jsonl_sink *s, u32 id)
{
	const struct sym_stack *st;
	struct obuf *o = s->ob;

	if (!id || hmap_get(&s->stacks_written, id, 0))
		return;
	hmap_put(&s->stacks_written, id, 0, (void *)1);
	st = model_stack(s->m, id);
	obuf_puts(o, "{\"type\":\"stack\"");
	put_u64(o, "id", id);
	put_u64(o, "pid", st ? st->pid : 0);
	if (!st)
		obuf_puts(o, ",\"undefined\":true"); /* named by a damaged capture, never defined */
	obuf_puts(o, ",\"frames\":[");
	for (u32 i = 0; st && i < st->n; i++) {
		const struct sym_frame *f = st->frames[i];

		obuf_puts(o, i ? ",{\"ip\":\"" : "{\"ip\":\"");
		obuf_hex(o, f->ip);
		obuf_putc(o, '"');
		if (f->func) {
			put_str(o, "func", f->func, 4096);
			put_u64(o, "off", f->func_off);
		}
		if (f->obj) {
			put_str(o, "obj", f->obj, 4096);
			put_id(o, "rel", f->rel);
		}
		if (f->file) {
			put_str(o, "file", f->file, 4096);
			put_u64(o, "line", f->line);
		}
		obuf_putc(o, '}');
	}
	obuf_puts(o, "]}\n");
}

static void put_stack(struct jsonl_sink *s, struct obuf *o, const char *key, u32 id)
{
	if (!id)
		return;
	need_stack(s, id);
	put_u64(o, key, id);
}

static void jsonl_begin(void *ctx, const struct capture_info *ci)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = s->ob;
	char when[64];
	bool have_when = fmt_wall_time(when, sizeof(when), ci->start_ts, ci->realtime_offset, true);

	obuf_printf(o, "{\"type\":\"header\",\"schema\":%d,\"tool\":\"corobpf\"",
		    JSONL_SCHEMA_VERSION);
	put_str(o, "version", ci->tool_version, sizeof(ci->tool_version));
	obuf_puts(o, ",\"clock\":\"boottime\"");
	put_u64(o, "start_ts", ci->start_ts);
	if (have_when)
		obuf_printf(o, ",\"start_time\":\"%s\"", when);
	else
		obuf_puts(o, ",\"start_time\":null");
	obuf_printf(o, ",\"realtime_offset_ns\":%lld", (long long)ci->realtime_offset);
	put_str(o, "kernel", ci->kernel, sizeof(ci->kernel));
	put_str(o, "hostname", ci->hostname, sizeof(ci->hostname));
	obuf_puts(o, ",\"pids\":[");
	for (u32 i = 0; i < ci->npids; i++) {
		if (i)
			obuf_putc(o, ',');
		obuf_u64(o, ci->pids[i]);
	}
	obuf_puts(o, "]}\n");
}

/*
 * Event lines are built at a cursor in room reserved for the whole line: a
 * line holds at most one string of CORO_STR_LEN bytes (6 bytes each when
 * escaped) besides its keys and numbers, so EVENT_LINE_ROOM always fits.
 */
#define EVENT_LINE_ROOM 1024
#define J_LIT(lit) (p = mempcpy(p, lit, sizeof(lit) - 1))
#define J_U64(key, v) (J_LIT(",\"" key "\":"), p = fmt_u64(p, (v)))
#define J_ID(key, v) (J_LIT(",\"" key "\":\""), p = fmt_hex(p, (v)), *p++ = '"')
#define J_STR(key, str, max) (J_LIT(",\"" key "\":"), p = json_str_at(p, (str), strnlen((str), (max))))
#define J_NAME(str) (p = mempcpy(p, (str), strlen(str)))

static void jsonl_event(struct jsonl_sink *s, const struct coro_event_hdr *h,
			const struct model_event_info *mi)
{
	struct obuf *o = s->ob;
	u32 stack = coro_record_stack(h);
	char *start, *p;

	if (h->lost_before) {
		start = p = obuf_reserve(o, EVENT_LINE_ROOM);
		J_LIT("{\"type\":\"lost\"");
		J_U64("ts", h->ts);
		J_U64("pid", h->pid);
		J_U64("tid", h->tid);
		J_U64("count", h->lost_before);
		J_LIT("}\n");
		obuf_commit(o, p - start);
	}
	need_stack(s, stack); /* its definition line before the line naming it */
	start = p = obuf_reserve(o, EVENT_LINE_ROOM);
	J_LIT("{\"type\":\"event\",\"ev\":\"");
	J_NAME(coro_kind_name(h->kind));
	*p++ = '"';
	if (h->kind == CORO_EV_OFFCPU_END) {
		const struct coro_ev_offcpu_end *e = (const void *)h;

		/* A stretch: ts is when the thread left the CPU. */
		J_U64("ts", e->start);
		J_U64("pid", h->pid);
		J_U64("tid", h->tid);
		if (mi->c)
			J_ID("id", mi->c->id);
		else
			J_LIT(",\"id\":null");
		J_U64("dur", h->ts - MIN(e->start, h->ts));
		J_LIT(",\"state\":\"");
		J_NAME(coro_offcpu_state_name(e->state));
		*p++ = '"';
		J_U64("runq", e->runq_ns);
		J_U64("cpu", e->cpu);
		if (mi->c)
			J_U64("uid", mi->c->uid);
		J_LIT("}\n");
		obuf_commit(o, p - start);
		return;
	}
	J_U64("ts", h->ts);
	J_U64("pid", h->pid);
	J_U64("tid", h->tid);
	switch (h->kind) {
	case CORO_EV_CREATE: {
		const struct coro_ev_create *e = (const void *)h;

		J_ID("id", e->id);
		J_ID("parent", e->parent);
		if (stack)
			J_U64("stack", stack);
		break;
	}
	case CORO_EV_NAME: {
		const struct coro_ev_name *e = (const void *)h;

		J_ID("id", e->id);
		J_STR("name", e->name, CORO_STR_LEN);
		if (h->flags & CORO_EVF_STR_TRUNCATED)
			J_LIT(",\"truncated\":true");
		if (h->flags & CORO_EVF_STR_FAULT)
			J_LIT(",\"unreadable\":true");
		break;
	}
	case CORO_EV_READY: {
		const struct coro_ev_ready *e = (const void *)h;

		J_ID("id", e->id);
		if (mi->cur_known)
			J_ID("waker", h->cur);
		else
			J_LIT(",\"waker\":null");
		break;
	}
	case CORO_EV_SWITCH: {
		const struct coro_ev_switch *e = (const void *)h;

		J_ID("from", e->from);
		J_ID("to", e->to);
		J_LIT(",\"reason\":\"");
		J_NAME(coro_reason_name(e->reason));
		*p++ = '"';
		J_ID("obj", e->obj);
		if (mi->c)
			J_U64("from_uid", mi->c->uid);
		if (mi->to)
			J_U64("to_uid", mi->to->uid);
		if (stack)
			J_U64("stack", stack);
		J_LIT("}\n");
		obuf_commit(o, p - start);
		return;
	}
	case CORO_EV_EXIT: {
		const struct coro_ev_exit *e = (const void *)h;

		J_ID("id", e->id);
		J_LIT(",\"status\":");
		if (e->status < 0) {
			*p++ = '-';
			p = fmt_u64(p, (u64)0 - (u64)e->status);
		} else {
			p = fmt_u64(p, (u64)e->status);
		}
		break;
	}
	case CORO_EV_SPAN_BEGIN:
	case CORO_EV_SPAN_END: {
		const struct coro_ev_span *e = (const void *)h;

		if (mi->owner_known)
			J_ID("id", mi->owner);
		else
			J_LIT(",\"id\":null");
		J_STR("name", e->name, CORO_STR_LEN);
		if (h->flags & CORO_EVF_STR_TRUNCATED)
			J_LIT(",\"truncated\":true");
		if (h->flags & CORO_EVF_STR_FAULT)
			J_LIT(",\"unreadable\":true");
		J_U64("depth", mi->span_depth);
		if (h->kind == CORO_EV_SPAN_END && !mi->span_matched)
			J_LIT(",\"matched\":false");
		break;
	}
	}
	if (mi->c)
		J_U64("uid", mi->c->uid);
	J_LIT("}\n");
	obuf_commit(o, p - start);
}

static void jsonl_record(void *ctx, const struct coro_event_hdr *h,
			 const struct model_event_info *mi)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = s->ob;

	switch (h->kind) {
	case CORO_EV_CREATE:
	case CORO_EV_NAME:
	case CORO_EV_READY:
	case CORO_EV_SWITCH:
	case CORO_EV_EXIT:
	case CORO_EV_SPAN_BEGIN:
	case CORO_EV_SPAN_END:
	case CORO_EV_OFFCPU_END:
		jsonl_event(s, h, mi);
		break;
	case CORO_REC_PROCESS: {
		const struct coro_rec_process *r = (const void *)h;

		begin_record(o, "process", h);
		put_common(o, h, false);
		put_str(o, "comm", r->comm, sizeof(r->comm));
		put_str(o, "exe", r->exe, h->size - sizeof(*r));
		obuf_printf(o, ",\"mode\":\"%s\"", coro_proc_mode_name(r->mode));
		put_u64(o, "ppid", r->ppid);
		obuf_puts(o, "}\n");
		break;
	}
	case CORO_REC_THREAD: {
		const struct coro_rec_thread *r = (const void *)h;

		begin_record(o, "thread", h);
		put_common(o, h, true);
		put_str(o, "comm", r->comm, sizeof(r->comm));
		obuf_puts(o, "}\n");
		break;
	}
	case CORO_REC_OBJECT: {
		const struct coro_rec_object *r = (const void *)h;

		begin_record(o, "object", h);
		put_common(o, h, false);
		put_str(o, "path", r->path, h->size - sizeof(*r));
		put_u64(o, "probes", r->probes);
		if (r->late)
			obuf_puts(o, ",\"late\":true");
		obuf_puts(o, "}\n");
		break;
	}
	case CORO_REC_SWITCH: {
		const struct coro_rec_switch *r = (const void *)h;
		const char *path = r->text, *sites = path + strlen(path) + 1;
		const char *limits = sites + strlen(sites) + 1;

		begin_record(o, "switch_path", h);
		put_common(o, h, false);
		put_str(o, "family", coro_family_name(r->family), 32);
		put_str(o, "object", path, strlen(path) + 1);
		put_u64(o, "uprobes", r->sites);
		put_u64(o, "single_stepped", r->stepped);
		put_str(o, "sites", sites, strlen(sites) + 1);
		put_str(o, "limits", limits, strlen(limits) + 1);
		obuf_puts(o, "}\n");
		break;
	}
	case CORO_EV_EXEC: {
		const struct coro_ev_proc *e = (const void *)h;

		begin_record(o, "exec", h);
		put_common(o, h, false);
		put_str(o, "comm", e->comm, sizeof(e->comm));
		obuf_puts(o, "}\n");
		break;
	}
	case CORO_EV_PROC_GONE:
	case CORO_REC_PROC_EXIT: {
		s32 status = h->kind == CORO_EV_PROC_GONE ? ((const struct coro_ev_proc *)h)->exit_code
							    : ((const struct coro_rec_proc_exit *)h)->status;
		const struct { s32 status; } *r = (const void *)&status;

		begin_record(o, "process_exit", h);
		put_common(o, h, false);
		if (r->status < 0)
			obuf_puts(o, ",\"exit_code\":null");
		else if (WIFEXITED(r->status))
			obuf_printf(o, ",\"exit_code\":%d", WEXITSTATUS(r->status));
		else if (WIFSIGNALED(r->status))
			obuf_printf(o, ",\"signal\":%d", WTERMSIG(r->status));
		obuf_puts(o, "}\n");
		break;
	}
	}
}

static void jsonl_coroutine_end(void *ctx, const struct coro *c)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = &s->spill;
	bool first = true;

	obuf_puts(o, "{\"type\":\"coroutine\"");
	put_id(o, "id", c->id);
	put_u64(o, "uid", c->uid);
	put_u64(o, "pid", c->pid);
	put_id(o, "parent", c->parent);
	if (c->parent_uid)
		put_u64(o, "parent_uid", c->parent_uid);
	else
		obuf_puts(o, ",\"parent_uid\":null");
	put_str(o, "name", c->name, CORO_STR_LEN);
	if (c->name_truncated)
		obuf_puts(o, ",\"name_truncated\":true");
	if (c->created_seen)
		put_u64(o, "created", c->created_ts);
	else
		obuf_puts(o, ",\"created\":null");
	put_u64(o, "first_seen", c->first_ts);
	if (c->end == CE_EXIT) {
		put_u64(o, "exited", c->end_ts);
		obuf_puts(o, ",\"status\":");
		obuf_s64(o, c->status);
	} else {
		obuf_puts(o, ",\"exited\":null,\"status\":null");
	}
	put_u64(o, "ended", c->end_ts);
	obuf_printf(o, ",\"end\":\"%s\"", coro_end_name(c->end));
	if (c->end != CE_EXIT) {
		obuf_printf(o, ",\"state_at_end\":\"%s\"", coro_state_name(c->end_state));
		if (c->end_state == CS_SUSPENDED) {
			obuf_printf(o, ",\"reason_at_end\":\"%s\"", coro_reason_name(c->end_reason));
			put_id(o, "obj_at_end", c->end_obj);
		}
	}
	put_u64(o, "running_ns", c->t_state[CS_RUNNING]);
	put_u64(o, "runnable_ns", c->t_state[CS_RUNNABLE]);
	put_u64(o, "suspended_ns", c->t_state[CS_SUSPENDED]);
	obuf_puts(o, ",\"suspended_by_reason\":{");
	for (u32 r = 0; r < CORO_NREASONS; r++) {
		if (!c->t_suspended[r])
			continue;
		obuf_printf(o, "%s\"%s\":", first ? "" : ",", coro_reason_name(r));
		obuf_u64(o, c->t_suspended[r]);
		first = false;
	}
	obuf_putc(o, '}');
	put_u64(o, "new_ns", c->t_state[CS_NEW]);
	put_u64(o, "unknown_ns", c->t_state[CS_UNKNOWN]);
	put_u64(o, "offcpu_ns", c->t_offcpu);
	put_u64(o, "blocked_ns", c->t_blocked);
	put_u64(o, "runq_ns", c->t_runq);
	put_u64(o, "longest_suspended_ns", c->longest_susp);
	put_u64(o, "switch_ins", c->switch_ins);
	put_u64(o, "readies", c->readies);
	obuf_puts(o, ",\"threads\":[");
	for (u32 i = 0; i < c->ntids; i++) {
		if (i)
			obuf_putc(o, ',');
		obuf_u64(o, c->tids[i]);
	}
	obuf_putc(o, ']');
	if (c->nspans) {
		obuf_puts(o, ",\"open_spans\":[");
		for (u32 i = 0; i < c->nspans; i++) {
			if (i)
				obuf_putc(o, ',');
			obuf_json_str(o, c->spans[i].name, CORO_STR_LEN);
		}
		obuf_putc(o, ']');
	}
	if (c->uncertain)
		obuf_puts(o, ",\"uncertain\":true");
	put_stack(s, o, "create_stack", c->create_stack);
	put_stack(s, o, "park_stack", c->park_stack);
	obuf_puts(o, "}\n");
}

void jsonl_write_finding(struct obuf *o, const struct finding *f, bool record)
{
	obuf_printf(o, "{%s\"kind\":\"%s\"", record ? "\"type\":\"finding\"," : "",
		    finding_kind_name(f->kind));
	put_u64(o, "ts", f->ts);
	put_u64(o, "dur", f->dur);
	put_u64(o, "pid", f->pid);
	if (f->tid)
		put_u64(o, "tid", f->tid);
	if (f->uid) {
		put_id(o, "id", f->id);
		put_u64(o, "uid", f->uid);
		put_str(o, "name", f->name, CORO_STR_LEN);
		put_id(o, "parent", f->parent);
	} else if (f->kind == FK_SPAWN_STORM) {
		put_id(o, "id", f->id); /* the parent (0: the scheduler) */
	} else {
		obuf_puts(o, ",\"id\":null");
	}
	if (f->nchain) {
		obuf_puts(o, ",\"chain\":[");
		for (u32 i = 0; i < f->nchain; i++) {
			obuf_puts(o, i ? ",{\"id\":\"" : "{\"id\":\"");
			obuf_hex(o, f->chain[i].id);
			obuf_puts(o, "\",\"name\":");
			obuf_json_str(o, f->chain[i].name, CORO_STR_LEN);
			obuf_putc(o, '}');
		}
		obuf_putc(o, ']');
	}
	obuf_puts(o, f->open ? ",\"open\":true" : ",\"open\":false");
	switch (f->kind) {
	case FK_LOST_WAKEUP:
	case FK_LEAK:
	case FK_STALL:
		if (f->kind != FK_STALL)
			obuf_printf(o, ",\"state\":\"%s\"", coro_state_name(f->state));
		if (f->kind == FK_STALL || f->state == CS_SUSPENDED) {
			obuf_printf(o, ",\"reason\":\"%s\"", coro_reason_name(f->reason));
			put_id(o, "obj", f->obj);
		}
		/* fall through */
	case FK_SCHED_LATENCY:
		if (f->has_waker)
			put_id(o, "waker", f->waker);
		else if (f->kind != FK_LEAK)
			obuf_puts(o, ",\"waker\":null");
		break;
	case FK_UNMATCHED_SPAN:
		put_str(o, "span", f->span, CORO_STR_LEN);
		break;
	case FK_SPAWN_STORM:
		put_u64(o, "count", f->count);
		put_u64(o, "peak_per_s", f->peak);
		break;
	default:
		break;
	}
	if (f->stack)
		put_u64(o, "stack", f->stack);
	if (f->kind == FK_LONG_RUN && f->samples) {
		put_u64(o, "samples", f->samples);
		if (f->samples_kept < f->samples)
			put_u64(o, "samples_kept", f->samples_kept);
		if (f->has_key) {
			put_str(o, "key_frame", f->key_frame, sizeof(f->key_frame));
			put_u64(o, "key_samples", f->key_samples);
			put_u64(o, "key_depth", f->key_depth);
		}
	}
	obuf_puts(o, record ? "}\n" : "}");
}

static void jsonl_finding(void *ctx, const struct finding *f)
{
	struct jsonl_sink *s = ctx;

	s->findings[f->kind]++;
	need_stack(s, f->stack);
	jsonl_write_finding(s->ob, f, true);
}

static void copy_spill(struct jsonl_sink *s)
{
	char buf[65536];
	ssize_t n;
	int ret = obuf_flush(&s->spill);

	if (ret) {
		s->err = ret;
		return;
	}
	if (lseek(s->spill_fd, 0, SEEK_SET) < 0) {
		s->err = -errno;
		return;
	}
	while ((n = read(s->spill_fd, buf, sizeof(buf))) > 0)
		obuf_write(s->ob, buf, n);
	if (n < 0)
		s->err = -errno;
}

/* A group of the counters table as an object of the trailer, every counter, zero or not. */
static void put_counters(struct obuf *o, const struct model *m, enum counter_group g)
{
	bool first = true;

	obuf_printf(o, ",\"%s\":{", counter_group_json[g]);
	for_each_counter(c) {
		if (c->group != g)
			continue;
		obuf_printf(o, "%s\"%s\":", first ? "" : ",", c->json);
		obuf_u64(o, counter_value(c, m));
		first = false;
	}
	obuf_putc(o, '}');
}

static void jsonl_finish(void *ctx, const struct model *m)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = s->ob;
	bool first = true;
	size_t it = 0;
	void *v;
	u64 nproc = 0;

	copy_spill(s);
	while (hmap_next(&m->procs, &it, NULL, NULL, &v))
		nproc++;
	obuf_puts(o, "{\"type\":\"trailer\"");
	put_u64(o, "first_ts", m->first_ts);
	put_u64(o, "last_ts", m->last_ts);
	obuf_printf(o, ",\"end_reason\":\"%s\"", coro_end_reason_name(m->end_reason));
	put_u64(o, "processes", nproc);
	put_u64(o, "coroutines", m->coroutines);
	put_u64(o, "peak_live", m->peak_live);
	put_u64(o, "events", m->events);
	if (m->samples)
		put_u64(o, "samples", m->samples);
	obuf_puts(o, ",\"events_by_kind\":{");
	for (unsigned k = CORO_EV_CREATE; k <= CORO_EV_OFFCPU_END; k++) {
		if (k == CORO_EV_LIBLOAD)
			continue;
		obuf_printf(o, "%s\"%s\":", first ? "" : ",", coro_kind_name(k));
		obuf_u64(o, m->events_by_kind[k]);
		first = false;
	}
	obuf_putc(o, '}');
	put_counters(o, m, CG_LOST);
	obuf_puts(o, ",\"findings\":{");
	for (int k = 0; k < FK_NKINDS; k++)
		obuf_printf(o, "%s\"%s\":%llu", k ? "," : "", finding_kind_name(k),
			    (unsigned long long)s->findings[k]);
	obuf_putc(o, '}');
	if (!m->have_stats)
		obuf_puts(o, ",\"stats_missing\":true");
	if (m->input_error)
		put_str(o, "input_error", m->input_error, 1024);
	put_counters(o, m, CG_ANOMALIES);
	obuf_puts(o, "}\n");
}

struct jsonl_sink *jsonl_sink_new(struct obuf *ob, const char *path, const struct model *m,
				  struct model_observer *obs, struct finding_sink *fs)
{
	struct jsonl_sink *s = xcalloc(1, sizeof(*s));

	s->m = m;
	hmap_init(&s->stacks_written);
	s->ob = ob;
	s->spill_fd = open_spill(path);
	if (s->spill_fd < 0) {
		s->err = -errno;
		log_err("cannot create a temporary file beside %s: %s", path, strerror(errno));
		s->spill_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	}
	obuf_open_fd(&s->spill, s->spill_fd, false);
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = jsonl_begin;
	obs->record = jsonl_record;
	obs->coroutine_end = jsonl_coroutine_end;
	obs->finish = jsonl_finish;
	fs->ctx = s;
	fs->finding = jsonl_finding;
	return s;
}

int jsonl_sink_error(struct jsonl_sink *s)
{
	return s->err ? s->err : s->ob->err ? -s->ob->err : 0;
}

void jsonl_sink_free(struct jsonl_sink *s)
{
	obuf_close(&s->spill);
	close(s->spill_fd);
	hmap_free(&s->stacks_written);
	free(s);
}
