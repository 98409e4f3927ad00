// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CSV output: the coroutines table (tables.h), one row per coroutine
 * incarnation, every column in the table's order (docs/sqlite.md says how
 * its values are written).
 */
#include <stdlib.h>
#include <string.h>
#include "csv.h"
#include "tables.h"

struct csv_sink {
	struct obuf *ob;
	const struct model *m;
};

/* RFC 4180: quoted, quotes doubled. */
static void csv_quoted(struct obuf *o, const char *s, size_t len)
{
	obuf_putc(o, '"');
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '"')
			obuf_putc(o, '"');
		obuf_putc(o, s[i]);
	}
	obuf_putc(o, '"');
}

/* A text as it is: quoted only where it has to be (a comma, a quote, a line end). */
static void csv_text(struct obuf *o, const char *s, size_t len)
{
	if (len && !memchr(s, ',', len) && !memchr(s, '"', len) && !memchr(s, '\r', len) &&
	    !memchr(s, '\n', len))
		obuf_write(o, s, len);
	else if (len)
		csv_quoted(o, s, len);
}

/* A name the traced program gave: made valid, always quoted. */
static void csv_name(struct obuf *o, const char *s, size_t len)
{
	char buf[3 * CORO_NAME_MAX + 1], *clean = buf;

	if (3 * len + 1 > sizeof(buf))
		clean = xmalloc(3 * len + 1);
	utf8_sanitize(clean, 3 * len + 1, s, len);
	csv_quoted(o, clean, strlen(clean));
	if (clean != buf)
		free(clean);
}

/* A stack: its frames, innermost first, "func+0x1a (obj) file:line" each, "; " between. */
static void csv_stack(struct csv_sink *s, u32 id)
{
	const struct sym_stack *st = model_stack(s->m, id);
	struct obuf *o = s->ob;
	char frame[512];
	size_t n = 0, cap = 0;
	char *text = NULL;

	for (u32 i = 0; st && i < st->n; i++) {
		size_t k;

		sym_frame_format(st->frames[i], frame, sizeof(frame));
		k = strlen(frame);
		if (n + k + 3 > cap) {
			cap = 2 * (n + k + 3);
			text = xrealloc(text, cap);
		}
		if (i) {
			memcpy(text + n, "; ", 2);
			n += 2;
		}
		memcpy(text + n, frame, k);
		n += k;
	}
	if (n) {
		text[n] = 0;
		csv_name(o, text, n);
	}
	free(text);
}

static void csv_begin(void *ctx, const struct capture_info *ci)
{
	struct csv_sink *s = ctx;
	const struct table *t = &tables[T_COROUTINES];

	for (u32 i = 0; i < t->ncols; i++) {
		if (i)
			obuf_putc(s->ob, ',');
		obuf_puts(s->ob, t->cols[i].name);
	}
	obuf_puts(s->ob, "\r\n");
}

static void csv_coroutine_end(void *ctx, const struct coro *c)
{
	struct csv_sink *s = ctx;
	struct obuf *o = s->ob;
	struct row r;

	tables_coroutine_row(&r, c);
	for (u32 i = 0; i < r.t->ncols; i++) {
		u8 type = r.t->cols[i].type;

		if (i)
			obuf_putc(o, ',');
		switch (r.v[i].kind) {
		case ROW_INT:
			if (type == COL_ID)
				obuf_printf(o, "0x%llx", (unsigned long long)r.v[i].i);
			else if (type == COL_STACK)
				csv_stack(s, (u32)r.v[i].i);
			else
				obuf_s64(o, r.v[i].i);
			break;
		case ROW_TEXT:
			if (type == COL_NAME)
				csv_name(o, r.v[i].s, r.v[i].len);
			else
				csv_text(o, r.v[i].s, r.v[i].len);
			break;
		case ROW_TIDS:
			/* Space separated, always quoted. */
			obuf_putc(o, '"');
			for (size_t k = 0; k < r.v[i].len; k++)
				obuf_printf(o, "%s%u", k ? " " : "", r.v[i].tids[k]);
			obuf_putc(o, '"');
			break;
		default:
			break;
		}
	}
	obuf_puts(o, "\r\n");
}

struct csv_sink *csv_sink_new(struct obuf *ob, const struct model *m, struct model_observer *obs)
{
	struct csv_sink *s = xcalloc(1, sizeof(*s));

	s->ob = ob;
	s->m = m;
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
