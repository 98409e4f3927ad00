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

static inline __attribute__((always_inline)) void put_evstr(struct obuf *o, const char *key,
							   struct ev_str str)
{
	put_str(o, key, str.s, str.len);
}

static inline __attribute__((always_inline)) void begin_record(struct obuf *o, const char *type)
{
	obuf_puts(o, "{\"type\":\"");
	obuf_puts(o, type);
	obuf_puts(o, "\"");
}

static inline __attribute__((always_inline)) void put_common(struct obuf *o, const struct event *ev,
							     bool tid)
{
	put_u64(o, "ts", ev->ts);
	put_u64(o, "pid", ev->pid);
	if (tid)
		put_u64(o, "tid", ev->tid);
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
 * line holds at most one string of CORO_NAME_MAX bytes (6 bytes each when
 * escaped) besides its keys and numbers, so EVENT_LINE_ROOM always fits.
 */
#define EVENT_LINE_ROOM 2048
_Static_assert(6 * CORO_NAME_MAX + 512 <= EVENT_LINE_ROOM, "a line's string and the rest fit");
#define J_LIT(lit) (p = mempcpy(p, lit, sizeof(lit) - 1))
#define J_U64(key, v) (J_LIT(",\"" key "\":"), p = fmt_u64(p, (v)))
#define J_ID(key, v) (J_LIT(",\"" key "\":\""), p = fmt_hex(p, (v)), *p++ = '"')
#define J_STR(key, str) (J_LIT(",\"" key "\":"), p = json_str_at(p, (str).s, (str).len))
#define J_NAME(str) (p = mempcpy(p, (str), strlen(str)))

/*
 * The hole before ev on its thread: what the model counts as `attributed`,
 * and what it needs to replay the hole (docs/jsonl.md, `lost`). `id` is the
 * coroutine the BPF side says runs on the thread now; alone: ev has no line
 * of its own that follows (a stack sample), so the hole stands at ts.
 */
static void put_lost(struct obuf *o, const struct event *ev, bool alone)
{
	char *start, *p;

	start = p = obuf_reserve(o, EVENT_LINE_ROOM);
	J_LIT("{\"type\":\"lost\"");
	J_U64("ts", ev->ts);
	J_U64("pid", ev->pid);
	J_U64("tid", ev->tid);
	J_U64("count", ev->lost_before);
	if (ev->cur_known)
		J_ID("id", ev->cur);
	else
		J_LIT(",\"id\":null");
	if (alone)
		J_LIT(",\"alone\":true");
	J_LIT("}\n");
	obuf_commit(o, p - start);
}

static void jsonl_event(struct jsonl_sink *s, const struct event *ev)
{
	struct obuf *o = s->ob;
	u32 stack = ev->stack;
	char *start, *p;

	if (ev->lost_before)
		put_lost(o, ev, false);
	need_stack(s, stack); /* its definition line before the line naming it */
	start = p = obuf_reserve(o, EVENT_LINE_ROOM);
	J_LIT("{\"type\":\"event\",\"ev\":\"");
	J_NAME(event_kind_name(ev->kind));
	*p++ = '"';
	if (ev->kind == EV_OFFCPU_END) {
		/* A stretch: ts is when the thread left the CPU. */
		J_U64("ts", ev->offcpu.start);
		J_U64("pid", ev->pid);
		J_U64("tid", ev->tid);
		if (ev->c)
			J_ID("id", ev->c->id);
		else
			J_LIT(",\"id\":null");
		J_U64("dur", ev->ts - MIN(ev->offcpu.start, ev->ts));
		J_LIT(",\"state\":\"");
		J_NAME(coro_offcpu_state_name(ev->offcpu.state));
		*p++ = '"';
		J_U64("runq", ev->offcpu.runq_ns);
		J_U64("cpu", ev->offcpu.cpu);
		if (ev->offcpu.late)
			J_LIT(",\"late\":true");
		if (ev->c)
			J_U64("uid", ev->c->uid);
		J_LIT("}\n");
		obuf_commit(o, p - start);
		return;
	}
	J_U64("ts", ev->ts);
	J_U64("pid", ev->pid);
	J_U64("tid", ev->tid);
	switch (ev->kind) {
	case EV_CREATE:
		J_ID("id", ev->create.id);
		J_ID("parent", ev->create.parent);
		if (stack)
			J_U64("stack", stack);
		break;
	case EV_NAME:
		J_ID("id", ev->name.id);
		J_STR("name", ev->name.name);
		if (ev->str_truncated)
			J_LIT(",\"truncated\":true");
		if (ev->str_unreadable)
			J_LIT(",\"unreadable\":true");
		break;
	case EV_READY:
		J_ID("id", ev->ready.id);
		if (ev->cur_known)
			J_ID("waker", ev->cur);
		else
			J_LIT(",\"waker\":null");
		break;
	case EV_ANNOUNCE:
		J_ID("id", ev->announce.id);
		J_ID("parent", ev->announce.parent);
		J_STR("name", ev->announce.name);
		if (ev->str_truncated)
			J_LIT(",\"truncated\":true");
		if (ev->str_unreadable)
			J_LIT(",\"unreadable\":true");
		J_LIT(",\"reason\":\"");
		J_NAME(ev->announce.reason ? coro_reason_name(ev->announce.reason) : "running");
		*p++ = '"';
		J_ID("obj", ev->announce.obj);
		break;
	case EV_ANNOUNCE_DONE:
		J_U64("asked", ev->announce_done.asked);
		break;
	case EV_SWITCH:
		J_ID("from", ev->sw.from);
		J_ID("to", ev->sw.to);
		J_LIT(",\"reason\":\"");
		J_NAME(coro_reason_name(ev->sw.reason));
		*p++ = '"';
		J_ID("obj", ev->sw.obj);
		if (ev->sw.awaiter.len)
			J_STR("awaiter", ev->sw.awaiter);
		if (ev->c)
			J_U64("from_uid", ev->c->uid);
		if (ev->to)
			J_U64("to_uid", ev->to->uid);
		if (stack)
			J_U64("stack", stack);
		if (ev->over_cap)
			J_LIT(",\"over_cap\":true");
		J_LIT("}\n");
		obuf_commit(o, p - start);
		return;
	case EV_EXIT:
		J_ID("id", ev->exit.id);
		J_LIT(",\"status\":");
		if (ev->exit.status < 0) {
			*p++ = '-';
			p = fmt_u64(p, (u64)0 - (u64)ev->exit.status);
		} else {
			p = fmt_u64(p, (u64)ev->exit.status);
		}
		break;
	case EV_OFFCPU_BEGIN:
		/* Its stretch follows as an `offcpu` line; a begin alone: off the CPU at the end. */
		if (ev->c)
			J_ID("id", ev->c->id);
		else
			J_LIT(",\"id\":null");
		J_LIT(",\"state\":\"");
		J_NAME(coro_offcpu_state_name(ev->offcpu.state));
		*p++ = '"';
		J_U64("cpu", ev->offcpu.cpu);
		if (stack)
			J_U64("stack", stack);
		break;
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
		if (ev->span.owner_known)
			J_ID("id", ev->span.owner);
		else
			J_LIT(",\"id\":null");
		J_STR("name", ev->span.name);
		if (ev->str_truncated)
			J_LIT(",\"truncated\":true");
		if (ev->str_unreadable)
			J_LIT(",\"unreadable\":true");
		J_U64("depth", ev->span.depth);
		if (ev->kind == EV_SPAN_END && !ev->span.matched && !ev->over_cap)
			J_LIT(",\"matched\":false");
		if (stack)
			J_U64("stack", stack);
		break;
	default:
		break;
	}
	if (ev->c)
		J_U64("uid", ev->c->uid);
	/* Its coroutine is not followed (the model's caps): no uid, and the counters say so. */
	if (ev->over_cap)
		J_LIT(",\"over_cap\":true");
	J_LIT("}\n");
	obuf_commit(o, p - start);
}

static void jsonl_event_cb(void *ctx, const struct event *ev)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = s->ob;

	switch (ev->kind) {
	case EV_CREATE:
	case EV_NAME:
	case EV_READY:
	case EV_SWITCH:
	case EV_EXIT:
	case EV_SPAN_BEGIN:
	case EV_SPAN_END:
	case EV_OFFCPU_BEGIN:
	case EV_OFFCPU_END:
	case EV_ANNOUNCE:
	case EV_ANNOUNCE_DONE:
		jsonl_event(s, ev);
		return;
	default:
		break;
	}
	/* A hole before a record that has no event line (a sample): a line of its own. */
	if (ev->lost_before)
		put_lost(o, ev, true);
	switch (ev->kind) {
	case EV_PROCESS:
		begin_record(o, "process");
		put_common(o, ev, false);
		put_evstr(o, "comm", ev->process.comm);
		put_evstr(o, "exe", ev->process.exe);
		obuf_printf(o, ",\"mode\":\"%s\"", coro_proc_mode_name(ev->process.mode));
		put_u64(o, "ppid", ev->process.ppid);
		if (ev->process.traced_from)
			put_u64(o, "traced_from", ev->process.traced_from);
		obuf_puts(o, "}\n");
		break;
	case EV_THREAD:
		begin_record(o, "thread");
		put_common(o, ev, true);
		put_evstr(o, "comm", ev->comm.comm);
		obuf_puts(o, "}\n");
		break;
	case EV_OBJECT:
		begin_record(o, "object");
		put_common(o, ev, false);
		put_evstr(o, "path", ev->object.path);
		put_u64(o, "probes", ev->object.probes);
		if (ev->object.late)
			obuf_puts(o, ",\"late\":true");
		obuf_puts(o, "}\n");
		break;
	case EV_SWITCH_PATH:
		begin_record(o, "switch_path");
		put_common(o, ev, false);
		put_str(o, "family", coro_family_name(ev->switch_path.family), 32);
		put_evstr(o, "object", ev->switch_path.path);
		put_u64(o, "uprobes", ev->switch_path.uprobes);
		put_u64(o, "single_stepped", ev->switch_path.stepped);
		put_evstr(o, "sites", ev->switch_path.sites);
		put_evstr(o, "limits", ev->switch_path.limits);
		obuf_puts(o, "}\n");
		break;
	case EV_EXEC:
		begin_record(o, "exec");
		put_common(o, ev, false);
		put_evstr(o, "comm", ev->comm.comm);
		obuf_puts(o, "}\n");
		break;
	case EV_PROC_GONE:
	case EV_PROC_EXIT: {
		s32 status = ev->proc_exit.status;

		begin_record(o, "process_exit");
		put_common(o, ev, false);
		if (status < 0)
			obuf_puts(o, ",\"exit_code\":null");
		else if (WIFEXITED(status))
			obuf_printf(o, ",\"exit_code\":%d", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			obuf_printf(o, ",\"signal\":%d", WTERMSIG(status));
		obuf_puts(o, "}\n");
		break;
	}
	default:
		break;
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
	put_str(o, "name", coro_name(c), CORO_NAME_MAX);
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

/* slow_span: where the span's time went (docs/jsonl.md, `finding`). */
static void put_slow_span(struct obuf *o, const struct finding *f)
{
	const struct span_time *in = &f->span_in;
	bool first = true;

	put_u64(o, "span_serial", f->span_serial);
	put_u64(o, "depth", f->span_depth);
	put_u64(o, "threshold_ns", f->threshold);
	obuf_printf(o, ",\"cause\":\"%s\"", finding_span_cause_name(f->cause));
	if (finding_fields(f) & FF_CAUSE_WAIT) {
		obuf_printf(o, ",\"reason\":\"%s\"", coro_reason_name(f->reason));
		put_id(o, "obj", f->obj);
	}
	put_u64(o, "running_ns", in->running);
	put_u64(o, "runnable_ns", in->runnable);
	put_u64(o, "suspended_ns", in->suspended);
	obuf_puts(o, ",\"suspended_by_reason\":{");
	for (u32 r = 0; r < SPAN_NREASONS; r++) {
		if (!in->susp[r])
			continue;
		obuf_printf(o, "%s\"%s\":", first ? "" : ",", coro_reason_name(r));
		obuf_u64(o, in->susp[r]);
		first = false;
	}
	obuf_putc(o, '}');
	put_u64(o, "offcpu_ns", in->offcpu);
	put_u64(o, "blocked_ns", in->blocked);
	put_u64(o, "runq_ns", in->runq);
	put_u64(o, "unknown_ns", in->unknown);
	if (f->longest_ns) {
		put_u64(o, "longest_suspension_ns", f->longest_ns);
		put_u64(o, "longest_suspension_ts", f->longest_ts);
		obuf_printf(o, ",\"longest_suspension_reason\":\"%s\"",
			    coro_reason_name(f->longest_reason));
		put_id(o, "longest_suspension_obj", f->longest_obj);
	}
}

/*
 * Its kind's fields (finding.h) in this order; a waker its kind has but
 * that is not known is null.
 */
void jsonl_write_finding(struct obuf *o, const struct finding *f, bool record)
{
	u32 have = finding_fields(f);

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
		put_str(o, "name", f->name, CORO_NAME_MAX);
		put_id(o, "parent", f->parent);
	} else if (have & FF_PARENT) {
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
			obuf_json_str(o, f->chain[i].name, CORO_NAME_MAX);
			obuf_putc(o, '}');
		}
		obuf_putc(o, ']');
	}
	obuf_puts(o, f->open ? ",\"open\":true" : ",\"open\":false");
	if (have & FF_STATE)
		obuf_printf(o, ",\"state\":\"%s\"", coro_state_name(f->state));
	if (have & FF_WAIT) {
		obuf_printf(o, ",\"reason\":\"%s\"", coro_reason_name(f->reason));
		put_id(o, "obj", f->obj);
		if (have & FF_AWAITER)
			put_str(o, "awaiter", f->awaiter, CORO_STR_LEN);
	}
	if (have & FF_WAKER)
		put_id(o, "waker", f->waker);
	else if (finding_kinds[f->kind].fields & FF_WAKER)
		obuf_puts(o, ",\"waker\":null");
	if (have & FF_SPAN)
		put_str(o, "span", f->span, CORO_STR_LEN);
	if (have & FF_STORM) {
		put_u64(o, "count", f->count);
		put_u64(o, "peak_per_s", f->peak);
	}
	if (have & FF_SLOW)
		put_slow_span(o, f);
	if (f->stack)
		put_u64(o, "stack", f->stack);
	if (have & FF_SAMPLES) {
		put_u64(o, "samples", f->samples);
		if (f->samples_kept < f->samples)
			put_u64(o, "samples_kept", f->samples_kept);
		if (have & FF_KEY) {
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

/* One record per span name, after the coroutines (spans.h: exact up to SPAN_STATS_EXACT). */
static void put_span_stats(struct obuf *o, const struct model *m)
{
	size_t n;
	struct span_name_stats *const *v = span_stats_names(&m->spans, &n);

	for (size_t i = 0; i < n; i++) {
		const struct span_name_stats *ns = v[i];

		begin_record(o, "span_stats");
		put_str(o, "name", ns->name, CORO_STR_LEN);
		put_u64(o, "count", ns->count);
		put_u64(o, "total_ns", ns->total);
		put_u64(o, "p50_ns", span_stats_percentile(ns, 50));
		put_u64(o, "p95_ns", span_stats_percentile(ns, 95));
		put_u64(o, "p99_ns", span_stats_percentile(ns, 99));
		put_u64(o, "max_ns", ns->max);
		put_u64(o, "suspended_ns", ns->suspended);
		put_u64(o, "offcpu_ns", ns->offcpu);
		obuf_printf(o, ",\"suspended_share\":%.4f,\"offcpu_share\":%.4f",
			    ns->total ? (double)ns->suspended / ns->total : 0.0,
			    ns->total ? (double)ns->offcpu / ns->total : 0.0);
		put_u64(o, "unclosed", ns->unclosed);
		if (ns->other)
			obuf_puts(o, ",\"other\":true");
		obuf_puts(o, ns->approx ? ",\"approx\":true}\n" : ",\"approx\":false}\n");
	}
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

void jsonl_put_events_by_kind(struct obuf *o, const struct model *m)
{
	bool first = true;

	obuf_puts(o, ",\"events_by_kind\":{");
	for (enum event_kind k = EV_CREATE; k <= EV_OFFCPU_END; k++) {
		if (k == EV_LIBLOAD)
			continue;
		obuf_printf(o, "%s\"%s\":", first ? "" : ",", event_kind_name(k));
		obuf_u64(o, m->events_by_kind[k]);
		first = false;
	}
	obuf_putc(o, '}');
}

static void jsonl_finish(void *ctx, const struct model *m)
{
	struct jsonl_sink *s = ctx;
	struct obuf *o = s->ob;
	u64 nproc = model_nprocesses(m);

	copy_spill(s);
	put_span_stats(o, m);
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
	jsonl_put_events_by_kind(o, m);
	put_counters(o, m, CG_LOST);
	obuf_puts(o, ",\"findings\":{");
	for (int k = 0; k < FK_NKINDS; k++)
		if (!finding_kinds[k].only_with_spans || span_stats_any(&m->spans))
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
	obs->event = jsonl_event_cb;
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
