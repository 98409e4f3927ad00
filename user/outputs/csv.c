// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* CSV output: one row per coroutine incarnation (docs/sqlite.md lists the columns). */
#include <stdlib.h>
#include <string.h>
#include "csv.h"

struct csv_sink {
	struct obuf *ob;
};

static void csv_field_str(struct obuf *o, const char *s)
{
	char buf[3 * CORO_NAME_MAX + 1];

	/* RFC 4180: quoted, quotes doubled. */
	utf8_sanitize(buf, sizeof(buf), s, CORO_NAME_MAX);
	obuf_putc(o, '"');
	for (const char *p = buf; *p; p++) {
		if (*p == '"')
			obuf_putc(o, '"');
		obuf_putc(o, *p);
	}
	obuf_putc(o, '"');
}

static void csv_begin(void *ctx, const struct capture_info *ci)
{
	struct csv_sink *s = ctx;

	obuf_puts(s->ob, "uid,id,pid,parent_id,parent_uid,name,status,created_ts,first_seen_ts,"
			 "exited_ts,ended_ts,end,state_at_end,reason_at_end,running_ns,"
			 "runnable_ns,suspended_ns,new_ns,unknown_ns,longest_suspended_ns,"
			 "switch_ins,readies,threads,uncertain\r\n");
}

static void csv_coroutine_end(void *ctx, const struct coro *c)
{
	struct obuf *o = ((struct csv_sink *)ctx)->ob;

	obuf_printf(o, "%llu,0x%llx,%u,0x%llx,", (unsigned long long)c->uid,
		    (unsigned long long)c->id, c->pid, (unsigned long long)c->parent);
	if (c->parent_uid)
		obuf_u64(o, c->parent_uid);
	obuf_putc(o, ',');
	csv_field_str(o, coro_name(c));
	obuf_putc(o, ',');
	if (c->end == CE_EXIT)
		obuf_s64(o, c->status);
	obuf_putc(o, ',');
	if (c->created_seen)
		obuf_u64(o, c->created_ts);
	obuf_printf(o, ",%llu,", (unsigned long long)c->first_ts);
	if (c->end == CE_EXIT)
		obuf_u64(o, c->end_ts);
	obuf_printf(o, ",%llu,%s,%s,%s,", (unsigned long long)c->end_ts, coro_end_name(c->end),
		    c->end == CE_EXIT ? "" : coro_state_name(c->end_state),
		    c->end != CE_EXIT && c->end_state == CS_SUSPENDED
			    ? coro_reason_name(c->end_reason)
			    : "");
	obuf_printf(o, "%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,\"",
		    (unsigned long long)c->t_state[CS_RUNNING],
		    (unsigned long long)c->t_state[CS_RUNNABLE],
		    (unsigned long long)c->t_state[CS_SUSPENDED],
		    (unsigned long long)c->t_state[CS_NEW], (unsigned long long)c->t_state[CS_UNKNOWN],
		    (unsigned long long)c->longest_susp, (unsigned long long)c->switch_ins,
		    (unsigned long long)c->readies);
	for (u32 i = 0; i < c->ntids; i++)
		obuf_printf(o, "%s%u", i ? " " : "", c->tids[i]);
	obuf_printf(o, "\",%d\r\n", c->uncertain ? 1 : 0);
}

struct csv_sink *csv_sink_new(struct obuf *ob, struct model_observer *obs)
{
	struct csv_sink *s = xcalloc(1, sizeof(*s));

	s->ob = ob;
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->begin = csv_begin;
	obs->coroutine_end = csv_coroutine_end;
	return s;
}

void csv_sink_free(struct csv_sink *s)
{
	free(s);
}
