// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ps.h"
#include "termsafe.h"

struct ps_row {
	u32 pid, tid;
	u64 id, uid;
	char name[CORO_STR_LEN];
	enum coro_state state;
	u32 reason;
	u64 obj;
	u64 since;	/* the state began (or was first seen) at */
	bool since_known; /* false: in it already when first seen */
	u32 park_stack, create_stack;
	u32 run_stack; /* running: its latest sampled stack (--sample-hz), or 0 */
	bool announced; /* listed by its scheduler at the attach (docs/probes.md) */
};

struct ps {
	FILE *out;
	const struct model *m;
	struct ps_row *rows;
	size_t n, cap;
	u64 last_start; /* of the interval being closed at the end */
	u64 last_uid;
	u64 first_ts, last_ts;
};

static void ps_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start, u64 end,
			u32 tid, u32 reason, u64 obj)
{
	struct ps *ps = ctx;

	if (model_ending(ps->m) == c) {
		ps->last_start = start;
		ps->last_uid = c->uid;
	}
}

static void ps_coroutine_end(void *ctx, const struct coro *c)
{
	struct ps *ps = ctx;
	struct ps_row *r;

	/* Only the ones alive when the snapshot ended. */
	if (c->end != CE_TRACE_END)
		return;
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? ps->cap * 2 : 64;
		ps->rows = xrealloc(ps->rows, ps->cap * sizeof(*ps->rows));
	}
	r = &ps->rows[ps->n++];
	memset(r, 0, sizeof(*r));
	r->pid = c->pid;
	r->tid = c->tid;
	r->id = c->id;
	r->uid = c->uid;
	memcpy(r->name, c->name, sizeof(r->name));
	r->state = c->end_state;
	r->reason = c->end_reason;
	r->obj = c->end_obj;
	r->since = ps->last_uid == c->uid ? ps->last_start : c->first_ts;
	/* A state that began with the coroutine's first sight, mid-life: it may be older. */
	r->since_known = c->created_seen || r->since > c->first_ts;
	r->park_stack = c->park_stack;
	r->create_stack = c->create_stack;
	r->announced = c->announced;
	r->run_stack = c->nrun_samples ? c->run_samples[c->nrun_samples - 1] : 0;
}

static void ps_finish(void *ctx, const struct model *m)
{
	struct ps *ps = ctx;

	ps->first_ts = m->first_ts;
	ps->last_ts = m->last_ts;
}

struct ps *ps_new(FILE *out, const struct model *m, struct model_observer *obs)
{
	struct ps *ps = xcalloc(1, sizeof(*ps));

	ps->out = out;
	ps->m = m;
	memset(obs, 0, sizeof(*obs));
	obs->ctx = ps;
	obs->interval = ps_interval;
	obs->coroutine_end = ps_coroutine_end;
	obs->finish = ps_finish;
	return ps;
}

static int row_cmp(const void *a, const void *b)
{
	const struct ps_row *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	/* Longest in its state first: the likeliest to be stuck. */
	if (x->since != y->since)
		return x->since < y->since ? -1 : 1;
	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

static void print_frames(struct ps *ps, u32 id, u32 max)
{
	const struct sym_stack *st = model_stack(ps->m, id);
	char buf[512], safe[TERM_SAFE_MAX(sizeof(buf))];

	for (u32 i = 0; st && i < st->n && i < max; i++) {
		/* Symbols and object paths are the target's to choose, like its names. */
		sym_frame_format(st->frames[i], buf, sizeof(buf));
		fprintf(ps->out, "      %s %s\n", i ? "  " : "at",
			term_safe(safe, sizeof(safe), buf, sizeof(buf)));
	}
	if (st && st->n > max)
		fprintf(ps->out, "         ... %u more frames\n", st->n - max);
}

void ps_print(struct ps *ps, double window_s, u32 frames)
{
	bool listed = ps->n != 0; /* every process's scheduler listed what existed */
	u32 pid = 0;

	qsort(ps->rows, ps->n, sizeof(*ps->rows), row_cmp);
	for (size_t i = 0; i < ps->n; i++) {
		struct ps_row *r = &ps->rows[i];
		const struct coro_process *p = model_process_peek(ps->m, r->pid);
		char name[TERM_SAFE_MAX(CORO_STR_LEN)], state[96], dur[32];

		if (r->pid != pid || !i) {
			char comm[TERM_SAFE_MAX(sizeof(p->comm))];
			size_t n = 0;

			pid = r->pid;
			listed = listed && p && p->announce_lists;
			for (size_t j = i; j < ps->n && ps->rows[j].pid == pid; j++)
				n++;
			term_safe(comm, sizeof(comm), p && p->comm[0] ? p->comm : "?", sizeof(p->comm));
			fprintf(ps->out, "%sprocess %u (%s): %zu coroutine%s alive, seen in a %.1f s "
				"window\n", i ? "\n" : "", pid, comm, n, n == 1 ? "" : "s", window_s);
		}
		term_safe(name, sizeof(name), r->name[0] ? r->name : "(unnamed)", CORO_STR_LEN);
		if (r->state == CS_SUSPENDED && r->obj)
			snprintf(state, sizeof(state), "suspended: %s on 0x%llx",
				 coro_reason_name(r->reason), (unsigned long long)r->obj);
		else if (r->state == CS_SUSPENDED)
			snprintf(state, sizeof(state), "suspended: %s", coro_reason_name(r->reason));
		else
			snprintf(state, sizeof(state), "%s", coro_state_name(r->state));
		fmt_duration(dur, sizeof(dur), ps->last_ts > r->since ? ps->last_ts - r->since : 0);
		fprintf(ps->out, "  0x%llx %s  %s for %s%s", (unsigned long long)r->id, name, state,
			r->since_known ? "" : "at least ", dur);
		if (r->tid)
			fprintf(ps->out, " (thread %u)", r->tid);
		fputc('\n', ps->out);
		if (r->state == CS_RUNNING && r->run_stack) {
			fprintf(ps->out, "      running; sampled last\n");
			print_frames(ps, r->run_stack, frames);
		} else if (r->state == CS_RUNNING) {
			fprintf(ps->out, "      running (no stack sample in the window)\n");
		} else if (r->park_stack && r->state != CS_NEW) {
			print_frames(ps, r->park_stack, frames);
		} else if (r->state == CS_NEW && r->create_stack) {
			fprintf(ps->out, "      never ran; created\n");
			print_frames(ps, r->create_stack, frames);
		} else if (r->announced && !r->since_known && r->state == CS_SUSPENDED) {
			fprintf(ps->out, "      parked since before the window (its scheduler listed "
				"it): where it parks is unknown\n");
		} else {
			fprintf(ps->out, "      not seen switching out during the window: where it "
				"parks is unknown\n");
		}
	}
	if (!ps->n)
		fprintf(ps->out, "no live coroutine fired a probe during the %.1f s window\n",
			window_s);
	if (listed)
		fprintf(ps->out, "\n(the scheduler listed what existed when corobpf attached: "
			"coroutines parked since before the window are listed too, without the "
			"stack of their park)\n");
	else
		fprintf(ps->out, "\n(coroutines that fired no probe during the window are not "
			"listed: parked since before it, they are invisible to a snapshot, unless "
			"their scheduler lists what exists (docs/probes.md); -d SECS waits longer)\n");
}

void ps_free(struct ps *ps)
{
	if (!ps)
		return;
	free(ps->rows);
	free(ps);
}
