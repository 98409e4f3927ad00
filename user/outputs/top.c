// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * corobpf top (top.h): an observer that keeps each live coroutine's latest
 * states and the findings as they come, and a view thread that copies the
 * model under the session's lock and draws the copy, on a full screen
 * (ncurses) or as text snapshots.
 */
#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "counters.h"
#include "termsafe.h"
#include "top.h"

#define TOP_HIST 32	       /* state intervals kept per live coroutine */
#define TOP_FINDINGS 256       /* findings kept, newest last */
#define TOP_FINDINGS_TEXT 10   /* of which a text snapshot prints */
#define TOP_FINDING_LEN 320
#define TOP_FRAMES 8	       /* per stack in the detail view */
#define TOP_DETAIL_FINDINGS 8  /* findings in the detail view */
#define TOP_NAME_SAFE TERM_SAFE_MAX(CORO_STR_LEN)

/* The table's columns, in the screen's order; the keys 1-9 sort by them. */
enum top_col {
	COL_PID,
	COL_ID,
	COL_NAME,
	COL_STATE,
	COL_FOR,
	COL_TID,
	COL_WAIT, /* reason, then wait object */
	COL_SWITCHES,
	COL_RUNNING,
	COL_N
};

static const char *const col_names[COL_N] = {
	"PID", "ID", "NAME", "STATE", "FOR", "TID", "REASON", "SWITCHES", "RUNNING",
};

struct top_interval {
	u64 start, end;
	u8 state;
	u8 reason;
	u32 tid;
};

/* A coroutine's latest state intervals (the observer's priv pointer on it). */
struct top_hist {
	struct top_interval iv[TOP_HIST];
	u32 n, next; /* kept, and where the next one goes */
};

struct top_row {
	u32 pid, tid;
	u64 id, uid;
	char name[CORO_STR_LEN];
	u8 state;
	u32 reason;
	u64 obj;
	u64 dur; /* in its state for */
	u64 switch_ins;
	u64 run_ns;
};

/* What one refresh shows, copied from the model under the lock. */
struct top_snap {
	u64 now, elapsed;
	struct top_row *rows;
	size_t n, cap;
	u64 procs, by_state[CS_NSTATES];
	u64 events, evps, lost;
	double ring;
	bool ring_known;
	u64 nfindings; /* made so far */
	char (*findings)[TOP_FINDING_LEN];
	u32 nshown; /* findings[0, nshown): the newest, oldest first */
	/* The detail view's coroutine, if it still lives. */
	bool detail_found;
	struct top_row d;
	u64 d_parent, d_first, d_created;
	bool d_created_seen;
	struct top_hist d_hist;
	char (*d_lines)[TOP_FINDING_LEN]; /* its stacks and findings, as lines */
	u32 nd_lines;
};

enum top_mode { MODE_TABLE, MODE_DETAIL, MODE_HELP };

struct top {
	const struct model *m;
	struct top_config cfg;
	int slot;
	pthread_mutex_t lock;
	atomic_int view_waiting; /* the view waits for lock: the record sink lets it in first */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool started, stopping, screen;
	bool printed; /* text: a snapshot was printed */
	SCREEN *scr;
	u64 t0;

	/* Findings as they are made: a ring, newest at (fnext - 1). */
	struct finding *findings;
	u64 nfindings;

	/* The view's own state (its thread only). */
	struct top_snap snap;
	u64 prev_events, prev_ts;
	enum top_mode mode;
	int sort_col;
	bool sort_rev;
	size_t *order; /* rows of the snapshot shown, in order */
	size_t norder, cap_order;
	size_t sel, first; /* the selected line and the first shown */
	u64 sel_uid, detail_uid;
	u32 detail_pid;
	char filter[CORO_STR_LEN];
	bool editing;
	char filter_before[CORO_STR_LEN];
	bool paused;

	/* stderr, held while the screen is up. */
	int saved_err;
	FILE *held_err;
};

/* ---- the observer (the capture thread, the lock held) ---- */

static void top_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			 u64 end, u32 tid, u32 reason, u64 obj)
{
	struct top *t = ctx;
	struct top_hist *h = t->slot >= 0 ? c->priv[t->slot] : NULL;
	struct top_interval *iv;

	if (!h) {
		h = xcalloc(1, sizeof(*h));
		model_set_priv(c->priv, t->slot, h);
	}
	iv = &h->iv[h->next];
	*iv = (struct top_interval){.start = start, .end = end, .state = (u8)state,
				    .reason = (u8)reason, .tid = tid};
	h->next = (h->next + 1) % TOP_HIST;
	if (h->n < TOP_HIST)
		h->n++;
}

static void top_coroutine_end(void *ctx, const struct coro *c)
{
	struct top *t = ctx;

	if (t->slot >= 0) {
		free(c->priv[t->slot]);
		model_set_priv(c->priv, t->slot, NULL);
	}
}

static void top_finding(void *ctx, const struct finding *f)
{
	struct top *t = ctx;

	t->findings[t->nfindings % TOP_FINDINGS] = *f;
	t->nfindings++;
}

struct top *top_new(const struct model *m, const struct top_config *cfg,
		    struct model_observer *obs, struct finding_sink *fs)
{
	struct top *t = xcalloc(1, sizeof(*t));

	t->m = m;
	t->cfg = *cfg;
	if (t->cfg.interval_s <= 0)
		t->cfg.interval_s = 1.0;
	t->slot = -1;
	t->saved_err = -1;
	t->findings = xcalloc(TOP_FINDINGS, sizeof(*t->findings));
	t->sort_col = COL_FOR; /* longest in its state first: the likeliest to be stuck */
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->wake_lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	t->t0 = now_boottime_ns();
	t->prev_ts = t->t0; /* the first refresh's rate: since the view began */
	memset(obs, 0, sizeof(*obs));
	obs->ctx = t;
	obs->slot = &t->slot;
	obs->interval = top_interval;
	obs->coroutine_end = top_coroutine_end;
	fs->ctx = t;
	fs->finding = top_finding;
	return t;
}

/*
 * The record sink's side, once per record. glibc's mutex does not hand
 * over: a sink that takes it back at once, record after record, can keep
 * a view that waits for it out for as long as records come. So the sink
 * waits while the view does, and the view gets the lock at its next
 * release.
 */
void top_lock(struct top *t)
{
	while (atomic_load_explicit(&t->view_waiting, memory_order_acquire))
		sched_yield();
	pthread_mutex_lock(&t->lock);
}

/* The view's side: the copy of what it shows. */
static void top_view_lock(struct top *t)
{
	atomic_fetch_add_explicit(&t->view_waiting, 1, memory_order_acq_rel);
	pthread_mutex_lock(&t->lock);
	atomic_fetch_sub_explicit(&t->view_waiting, 1, memory_order_acq_rel);
}

void top_unlock(struct top *t)
{
	pthread_mutex_unlock(&t->lock);
}

/* ---- formatting ---- */

/* A duration without blanks (the text snapshot splits on them): "850us", "12.3ms", "2m03s". */
static void fmt_dur(char *buf, size_t len, u64 ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%lluus", (unsigned long long)(ns / 1000));
	else if (ns < 1000000000ULL)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else if (ns < 60ULL * 1000000000)
		snprintf(buf, len, "%.2fs", ns / 1e9);
	else if (ns < 3600ULL * 1000000000)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(ns / 60000000000ULL),
			 (unsigned long long)(ns / 1000000000ULL % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(ns / 3600000000000ULL),
			 (unsigned long long)(ns / 60000000000ULL % 60));
}

static void fmt_obj(char *buf, size_t len, const struct top_row *r)
{
	if (r->state == CS_SUSPENDED && r->obj)
		snprintf(buf, len, "0x%llx", (unsigned long long)r->obj);
	else
		snprintf(buf, len, "-");
}

static const char *row_reason(const struct top_row *r)
{
	return r->state == CS_SUSPENDED ? coro_reason_name(r->reason) : "-";
}

/* One line about a finding, its target-chosen text made safe. */
static void fmt_finding(const struct top *t, const struct finding *f, char *buf, size_t len)
{
	char name[TOP_NAME_SAFE], dur[32], extra[TOP_FINDING_LEN / 2] = "";
	u32 kind = finding_kinds[f->kind].fields;

	term_safe(name, sizeof(name), f->name[0] ? f->name : "(unnamed)", sizeof(f->name));
	fmt_dur(dur, sizeof(dur), f->dur);
	/* One field of what its kind fills (finding.h), the one that says most. */
	if (kind & FF_WAIT) {
		snprintf(extra, sizeof(extra), " %s", coro_reason_name(f->reason));
		if (f->obj)
			snprintf(extra, sizeof(extra), " %s on 0x%llx", coro_reason_name(f->reason),
				 (unsigned long long)f->obj);
	} else if ((kind & FF_SPAN) && !(kind & FF_SLOW)) {
		char span[TOP_NAME_SAFE];

		snprintf(extra, sizeof(extra), " span %s",
			 term_safe(span, sizeof(span), f->span, sizeof(f->span)));
	} else if (kind & FF_STORM) {
		snprintf(extra, sizeof(extra), " %llu children, %llu/s at peak",
			 (unsigned long long)f->count, (unsigned long long)f->peak);
	} else if (kind & FF_OFFCPU) {
		snprintf(extra, sizeof(extra), " %s", coro_offcpu_state_name(f->offcpu_state));
	} else if (finding_fields(f) & FF_KEY) {
		char key[TERM_SAFE_MAX(80)];

		snprintf(extra, sizeof(extra), " in %s",
			 term_safe(key, sizeof(key), f->key_frame, 80));
	}
	snprintf(buf, len, "+%.1fs %s pid %u 0x%llx %s for %s%s%s",
		 f->ts > t->t0 ? (f->ts - t->t0) / 1e9 : 0.0, finding_kind_name(f->kind), f->pid,
		 (unsigned long long)f->id, name, f->open ? "at least " : "", dur, extra);
}

/* ---- the snapshot (the view's thread, the lock held) ---- */

static void snap_row(struct top_row *r, const struct coro *c, u64 now)
{
	memset(r, 0, sizeof(*r));
	r->pid = c->pid;
	r->tid = c->tid;
	r->id = c->id;
	r->uid = c->uid;
	memcpy(r->name, c->name, sizeof(r->name));
	r->state = (u8)c->state;
	r->reason = c->reason;
	r->obj = c->obj;
	r->dur = now > c->state_since ? now - c->state_since : 0;
	r->switch_ins = c->switch_ins;
	r->run_ns = c->t_state[CS_RUNNING] + (c->state == CS_RUNNING ? r->dur : 0);
}

static void snap_add_line(struct top_snap *s, const char *line)
{
	s->d_lines = xrealloc(s->d_lines, (s->nd_lines + 1) * sizeof(*s->d_lines));
	snprintf(s->d_lines[s->nd_lines++], TOP_FINDING_LEN, "%s", line);
}

static void snap_stack(struct top_snap *s, const struct model *m, const char *what, u32 id)
{
	const struct sym_stack *st = id ? model_stack(m, id) : NULL;
	char buf[256], safe[TERM_SAFE_MAX(sizeof(buf))], line[TOP_FINDING_LEN];

	if (!st || !st->n) {
		snprintf(line, sizeof(line), "%s: %s", what, id ? "(not resolved)" : "(none seen)");
		snap_add_line(s, line);
		return;
	}
	snprintf(line, sizeof(line), "%s:", what);
	snap_add_line(s, line);
	for (u32 i = 0; i < st->n && i < TOP_FRAMES; i++) {
		sym_frame_format(st->frames[i], buf, sizeof(buf));
		snprintf(line, sizeof(line), "  %s", term_safe(safe, sizeof(safe), buf, sizeof(buf)));
		snap_add_line(s, line);
	}
	if (st->n > TOP_FRAMES) {
		snprintf(line, sizeof(line), "  ... %u more frames", st->n - TOP_FRAMES);
		snap_add_line(s, line);
	}
}

static void snap_detail(struct top *t, const struct coro *c, u64 now)
{
	struct top_snap *s = &t->snap;
	const struct top_hist *h = t->slot >= 0 ? c->priv[t->slot] : NULL;
	char line[TOP_FINDING_LEN];
	u64 nf = t->nfindings < TOP_FINDINGS ? t->nfindings : TOP_FINDINGS;

	s->detail_found = true;
	snap_row(&s->d, c, now);
	s->d_parent = c->parent;
	s->d_first = c->first_ts;
	s->d_created = c->created_ts;
	s->d_created_seen = c->created_seen;
	if (h)
		s->d_hist = *h;
	else
		memset(&s->d_hist, 0, sizeof(s->d_hist));
	if (t->cfg.stacks) {
		snap_stack(s, t->m, "spawned at", c->create_stack);
		snap_stack(s, t->m, "parked at", c->park_stack);
	}
	/* Its findings among those kept, newest first. */
	for (u64 i = t->nfindings, n = 0; i > t->nfindings - nf && n < TOP_DETAIL_FINDINGS; i--) {
		const struct finding *f = &t->findings[(i - 1) % TOP_FINDINGS];

		if (f->uid != c->uid || f->pid != c->pid)
			continue;
		if (!n++)
			snap_add_line(s, "its findings (newest first):");
		fmt_finding(t, f, line, sizeof(line));
		snap_add_line(s, line);
	}
}

static void take_snapshot(struct top *t)
{
	struct top_snap *s = &t->snap;
	const struct model *m = t->m;
	const struct coro_process *p;
	const struct coro *c;
	u64 now, nf, shown;
	size_t it;

	s->ring_known = t->cfg.ring_fill != NULL;
	if (s->ring_known)
		s->ring = t->cfg.ring_fill(t->cfg.ring_ctx);
	top_view_lock(t);
	/*
	 * Durations in the model's time, its latest record: the records of the
	 * last ~0.1 s are still on their way (the ring is read every 100 ms and
	 * reordered), and wall-clock time would stretch every state by as much.
	 */
	now = now_boottime_ns();
	s->elapsed = now > t->t0 ? now - t->t0 : 0;
	if (m->last_ts)
		now = m->last_ts;
	s->now = now;
	s->n = 0;
	memset(s->by_state, 0, sizeof(s->by_state));
	for (it = 0; (c = model_next_coro(m, &it));) {
		if (c->state == CS_EXITED)
			continue;
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 256;
			s->rows = xrealloc(s->rows, s->cap * sizeof(*s->rows));
		}
		snap_row(&s->rows[s->n++], c, now);
		s->by_state[c->state]++;
	}
	s->procs = 0;
	for (it = 0; (p = model_next_process(m, &it));)
		s->procs += !p->exited;
	s->events = m->events;
	s->evps = 0;
	if (t->prev_ts && now > t->prev_ts && s->events >= t->prev_events)
		s->evps = (u64)((s->events - t->prev_events) * 1e9 / (now - t->prev_ts));
	t->prev_events = s->events;
	t->prev_ts = now;
	s->lost = 0;
	for_each_counter(k)
		if (k->group == CG_LOST && !(k->flags & CF_NOT_A_LOSS))
			s->lost += counter_value(k, m);
	s->nfindings = t->nfindings;
	nf = t->nfindings < TOP_FINDINGS ? t->nfindings : TOP_FINDINGS;
	if (!s->findings)
		s->findings = xcalloc(TOP_FINDINGS, sizeof(*s->findings));
	shown = 0;
	for (u64 i = t->nfindings - nf; i < t->nfindings; i++)
		fmt_finding(t, &t->findings[i % TOP_FINDINGS], s->findings[shown++],
			    TOP_FINDING_LEN);
	s->nshown = (u32)shown;
	s->detail_found = false;
	s->nd_lines = 0;
	if (t->mode == MODE_DETAIL) {
		for (it = 0; (c = model_next_coro(m, &it));)
			if (c->uid == t->detail_uid && c->pid == t->detail_pid &&
			    c->state != CS_EXITED)
				break;
		if (c)
			snap_detail(t, c, now);
	}
	top_unlock(t);
}

/* ---- order and filter ---- */

static int cmp_u64(u64 a, u64 b)
{
	return a < b ? -1 : a > b;
}

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct top *t = arg;
	const struct top_row *x = &t->snap.rows[*(const size_t *)a];
	const struct top_row *y = &t->snap.rows[*(const size_t *)b];
	int r = 0;

	switch (t->sort_col) {
	case COL_PID: r = cmp_u64(x->pid, y->pid); break;
	case COL_ID: r = cmp_u64(x->id, y->id); break;
	case COL_NAME: r = strncmp(x->name, y->name, sizeof(x->name)); break;
	case COL_STATE: r = strcmp(coro_state_name(x->state), coro_state_name(y->state)); break;
	/* Numbers: largest first, as people look for the most. */
	case COL_FOR: r = cmp_u64(y->dur, x->dur); break;
	case COL_TID: r = cmp_u64(x->tid, y->tid); break;
	case COL_WAIT:
		r = strcmp(row_reason(x), row_reason(y));
		if (!r)
			r = cmp_u64(x->obj, y->obj);
		break;
	case COL_SWITCHES: r = cmp_u64(y->switch_ins, x->switch_ins); break;
	case COL_RUNNING: r = cmp_u64(y->run_ns, x->run_ns); break;
	}
	if (t->sort_rev)
		r = -r;
	if (!r)
		r = cmp_u64(x->pid, y->pid);
	if (!r)
		r = cmp_u64(x->id, y->id);
	if (!r)
		r = cmp_u64(x->uid, y->uid);
	return r;
}

static void build_order(struct top *t)
{
	const struct top_snap *s = &t->snap;

	if (t->cap_order < s->n) {
		t->cap_order = s->n;
		t->order = xrealloc(t->order, t->cap_order * sizeof(*t->order));
	}
	t->norder = 0;
	for (size_t i = 0; i < s->n; i++)
		if (!t->filter[0] || strstr(s->rows[i].name, t->filter))
			t->order[t->norder++] = i;
	qsort_r(t->order, t->norder, sizeof(*t->order), row_cmp, t);
	/* The selection follows its coroutine. */
	for (size_t i = 0; t->sel_uid && i < t->norder; i++) {
		if (s->rows[t->order[i]].uid == t->sel_uid) {
			t->sel = i;
			break;
		}
	}
	if (t->sel >= t->norder)
		t->sel = t->norder ? t->norder - 1 : 0;
	t->sel_uid = t->norder ? s->rows[t->order[t->sel]].uid : 0;
}

/* ---- text snapshots ---- */

#define TEXT_COLS "PID ID STATE FOR TID REASON OBJECT SWITCHES RUNNING NAME"

static void print_text(struct top *t, FILE *out)
{
	const struct top_snap *s = &t->snap;
	char ring[32] = "-";

	build_order(t);
	if (s->ring_known)
		snprintf(ring, sizeof(ring), "%.1f%%", s->ring * 100);
	fprintf(out, "# corobpf top elapsed=%.1fs processes=%llu coroutines=%zu running=%llu "
		"runnable=%llu suspended=%llu new=%llu unknown=%llu events=%llu events/s=%llu "
		"lost=%llu ring=%s\n",
		s->elapsed / 1e9, (unsigned long long)s->procs, s->n,
		(unsigned long long)s->by_state[CS_RUNNING],
		(unsigned long long)s->by_state[CS_RUNNABLE],
		(unsigned long long)s->by_state[CS_SUSPENDED],
		(unsigned long long)s->by_state[CS_NEW],
		(unsigned long long)s->by_state[CS_UNKNOWN], (unsigned long long)s->events,
		(unsigned long long)s->evps, (unsigned long long)s->lost, ring);
	fprintf(out, TEXT_COLS "\n");
	for (size_t i = 0; i < t->norder; i++) {
		const struct top_row *r = &s->rows[t->order[i]];
		char name[TOP_NAME_SAFE], dur[32], run[32], obj[32];

		/* Blanks in a name stay: NAME is the last field, the rest of the line. */
		term_safe(name, sizeof(name), r->name[0] ? r->name : "(unnamed)", sizeof(r->name));
		fmt_dur(dur, sizeof(dur), r->dur);
		fmt_dur(run, sizeof(run), r->run_ns);
		fmt_obj(obj, sizeof(obj), r);
		fprintf(out, "%u 0x%llx %s %s %u %s %s %llu %s %s\n", r->pid,
			(unsigned long long)r->id, coro_state_name(r->state), dur, r->tid,
			row_reason(r), obj, (unsigned long long)r->switch_ins, run, name);
	}
	fprintf(out, "# findings %llu\n", (unsigned long long)s->nfindings);
	for (u32 i = s->nshown > TOP_FINDINGS_TEXT ? s->nshown - TOP_FINDINGS_TEXT : 0;
	     i < s->nshown; i++)
		fprintf(out, "%s\n", s->findings[i]);
	fputc('\n', out);
	fflush(out);
}

/* ---- the screen ---- */

/* At most n characters of s (UTF-8 sequences whole), padded to n when pad. */
static void put_cols(int y, int x, const char *s, int n, bool pad)
{
	int w = 0, i = 0, len = (int)strlen(s);

	if (n <= 0)
		return;
	while (i < len && w < n) {
		size_t l = utf8_seq_len((const unsigned char *)s + i, (size_t)(len - i));

		i += l ? (int)l : 1;
		w++;
	}
	mvaddnstr(y, x, s, i);
	for (; pad && w < n; w++)
		addch(' ');
}

/* The fixed columns take 90 characters with OBJECT, 75 without (the detail view shows it). */
static bool show_object(void)
{
	return COLS >= 90 + 16;
}

static int name_width(void)
{
	int w = COLS - (show_object() ? 90 : 75);

	return w < 8 ? 8 : w > 40 ? 40 : w;
}

static void draw_header(struct top *t)
{
	const struct top_snap *s = &t->snap;
	char line[1024], ring[32] = "-", sort[64], what[TERM_SAFE_MAX(128)];

	if (s->ring_known)
		snprintf(ring, sizeof(ring), "%.1f%%", s->ring * 100);
	snprintf(sort, sizeof(sort), "%s%s", col_names[t->sort_col], t->sort_rev ? " (reversed)" : "");
	term_safe(what, sizeof(what), t->cfg.what ? t->cfg.what : "", 128);
	snprintf(line, sizeof(line), "corobpf top - %s - %.0fs%s  sort: %s%s%s", what,
		 s->elapsed / 1e9, t->paused ? "  [PAUSED]" : "", sort,
		 t->filter[0] ? "  filter: " : "", "");
	attron(A_BOLD);
	put_cols(0, 0, line, COLS, true);
	attroff(A_BOLD);
	if (t->filter[0]) {
		char f[TOP_NAME_SAFE];

		term_safe(f, sizeof(f), t->filter, sizeof(t->filter));
		put_cols(0, (int)strlen(line), f, COLS - (int)strlen(line), false);
	}
	snprintf(line, sizeof(line), "processes %llu  coroutines %zu: running %llu  runnable %llu  "
		 "suspended %llu  new %llu  unknown %llu",
		 (unsigned long long)s->procs, s->n, (unsigned long long)s->by_state[CS_RUNNING],
		 (unsigned long long)s->by_state[CS_RUNNABLE],
		 (unsigned long long)s->by_state[CS_SUSPENDED],
		 (unsigned long long)s->by_state[CS_NEW],
		 (unsigned long long)s->by_state[CS_UNKNOWN]);
	put_cols(1, 0, line, COLS, true);
	snprintf(line, sizeof(line), "events/s %llu  events %llu  lost %llu  ring %s  findings %llu",
		 (unsigned long long)s->evps, (unsigned long long)s->events,
		 (unsigned long long)s->lost, ring, (unsigned long long)s->nfindings);
	put_cols(2, 0, line, COLS, true);
}

static void draw_table(struct top *t, int y0, int rows)
{
	const struct top_snap *s = &t->snap;
	int nw = name_width();
	char line[1024];

	bool wobj = show_object();

	snprintf(line, sizeof(line), "%-7s %-14s %-*s %-9s %8s %7s %-6s %-*s%s%8s %8s",
		 "1:PID", "2:ID", nw, "3:NAME", "4:STATE", "5:FOR", "6:TID", "7:WAIT", wobj ? 14 : 0,
		 wobj ? "OBJECT" : "", wobj ? " " : "", "8:SWITCH", "9:RUN");
	attron(A_REVERSE);
	put_cols(y0, 0, line, COLS, true);
	attroff(A_REVERSE);
	if (t->sel < t->first)
		t->first = t->sel;
	if (rows > 0 && t->sel >= t->first + (size_t)rows)
		t->first = t->sel - (size_t)rows + 1;
	for (int i = 0; i < rows; i++) {
		size_t k = t->first + (size_t)i;
		const struct top_row *r;
		char name[TOP_NAME_SAFE], dur[32], run[32], obj[32], id[32];

		move(y0 + 1 + i, 0);
		clrtoeol();
		if (k >= t->norder)
			continue;
		r = &s->rows[t->order[k]];
		term_safe(name, sizeof(name), r->name[0] ? r->name : "(unnamed)", sizeof(r->name));
		fmt_dur(dur, sizeof(dur), r->dur);
		fmt_dur(run, sizeof(run), r->run_ns);
		fmt_obj(obj, sizeof(obj), r);
		snprintf(id, sizeof(id), "0x%llx", (unsigned long long)r->id);
		if (k == t->sel)
			attron(A_REVERSE);
		snprintf(line, sizeof(line), "%-7u %-14s ", r->pid, id);
		put_cols(y0 + 1 + i, 0, line, COLS, false);
		put_cols(y0 + 1 + i, 23, name, nw, true);
		snprintf(line, sizeof(line), " %-9s %8s %7u %-6s %-*s%s%8llu %8s",
			 coro_state_name(r->state), dur, r->tid, row_reason(r), wobj ? 14 : 0,
			 wobj ? obj : "", wobj ? " " : "", (unsigned long long)r->switch_ins, run);
		put_cols(y0 + 1 + i, 23 + nw, line, COLS - 23 - nw, true);
		if (k == t->sel)
			attroff(A_REVERSE);
	}
}

static void draw_findings(struct top *t, int y0, int rows)
{
	const struct top_snap *s = &t->snap;
	char line[64];

	snprintf(line, sizeof(line), "findings (%llu, newest last)", (unsigned long long)s->nfindings);
	attron(A_REVERSE);
	put_cols(y0, 0, line, COLS, true);
	attroff(A_REVERSE);
	for (int i = 0; i < rows; i++) {
		int k = (int)s->nshown - rows + i;

		move(y0 + 1 + i, 0);
		clrtoeol();
		if (k >= 0)
			put_cols(y0 + 1 + i, 0, s->findings[k], COLS, false);
	}
}

static char state_glyph(u8 state)
{
	switch (state) {
	case CS_RUNNING: return '#';
	case CS_RUNNABLE: return '+';
	case CS_SUSPENDED: return '.';
	case CS_NEW: return 'n';
	case CS_UNKNOWN: return '?';
	default: return ' ';
	}
}

static void draw_detail(struct top *t)
{
	const struct top_snap *s = &t->snap;
	const struct top_row *r = &s->d;
	char line[1024], name[TOP_NAME_SAFE], dur[32], run[32], obj[32];
	int y = 4, w = COLS - 15;

	if (!s->detail_found) {
		put_cols(y, 0, "the coroutine has ended (Esc: back to the table)", COLS, true);
		return;
	}
	term_safe(name, sizeof(name), r->name[0] ? r->name : "(unnamed)", sizeof(r->name));
	fmt_dur(dur, sizeof(dur), r->dur);
	fmt_dur(run, sizeof(run), r->run_ns);
	fmt_obj(obj, sizeof(obj), r);
	attron(A_BOLD);
	snprintf(line, sizeof(line), "coroutine 0x%llx %s (pid %u)", (unsigned long long)r->id,
		 name, r->pid);
	put_cols(y++, 0, line, COLS, true);
	attroff(A_BOLD);
	snprintf(line, sizeof(line), "state %s%s%s%s for %s, thread %u; switched in %llu times, "
		 "running %s in all", coro_state_name(r->state), r->state == CS_SUSPENDED ? " (" : "",
		 r->state == CS_SUSPENDED ? row_reason(r) : "", r->state == CS_SUSPENDED ? ")" : "",
		 dur, r->tid, (unsigned long long)r->switch_ins, run);
	put_cols(y++, 0, line, COLS, true);
	if (r->state == CS_SUSPENDED && r->obj) {
		snprintf(line, sizeof(line), "waiting on %s", obj);
		put_cols(y++, 0, line, COLS, true);
	}
	snprintf(line, sizeof(line), "parent 0x%llx; %s", (unsigned long long)s->d_parent,
		 s->d_created_seen ? "created during the trace" : "alive when first seen");
	put_cols(y++, 0, line, COLS, true);
	y++;
	/*
	 * The timeline: what it was in, cell by cell, over the intervals kept.
	 * A cell shows running if it ran at all in it, else where it spent most.
	 */
	if (w > 10) {
		char cells[1024], label[48], span_s[32];
		u64 since = s->now > r->dur ? s->now - r->dur : 0, from = since, span;

		for (u32 j = 0; j < s->d_hist.n; j++)
			from = MIN(from, s->d_hist.iv[j].start);
		if (s->now - from < 1000000)
			from = s->now > 1000000 ? s->now - 1000000 : 0;
		span = s->now - from;
		if (w > (int)sizeof(cells) - 1)
			w = sizeof(cells) - 1;
		for (int i = 0; i < w; i++) {
			u64 a = from + span * (u64)i / (u64)w, b = from + span * (u64)(i + 1) / (u64)w;
			u64 in[CS_NSTATES] = {0};
			int best = -1;

			if (b > since)
				in[r->state] += b - MAX(a, since);
			for (u32 j = 0; j < s->d_hist.n; j++) {
				const struct top_interval *iv = &s->d_hist.iv[j];

				if (iv->end > a && iv->start < b && iv->state < CS_NSTATES)
					in[iv->state] += MIN(iv->end, b) - MAX(iv->start, a);
			}
			for (int k = 0; k < CS_NSTATES; k++)
				if (in[k] && (best < 0 || in[k] > in[best]))
					best = k;
			if (in[CS_RUNNING])
				best = CS_RUNNING;
			cells[i] = best < 0 ? ' ' : state_glyph((u8)best);
		}
		cells[w] = 0;
		fmt_dur(span_s, sizeof(span_s), span);
		snprintf(label, sizeof(label), "last %s", span_s);
		put_cols(y, 0, label, 13, true);
		put_cols(y++, 14, cells, w, true);
		put_cols(y++, 0, "              # running  + runnable  . suspended  n new  ? unknown  "
			 "(blank: not seen)", COLS, true);
	}
	y++;
	put_cols(y++, 0, "recent states (newest first):", COLS, true);
	snprintf(line, sizeof(line), "  now      %-9s %-6s for %s", coro_state_name(r->state),
		 row_reason(r), dur);
	put_cols(y++, 0, line, COLS, true);
	/* The states first, at least four of them; the stacks and findings in what is left. */
	int last = MAX(y + 4, LINES - 3 - (int)s->nd_lines - (t->cfg.stacks ? 0 : 1));

	for (u32 j = 0; j < s->d_hist.n && y < last && y < LINES - 1; j++) {
		const struct top_interval *iv =
			&s->d_hist.iv[(s->d_hist.next + TOP_HIST - 1 - j) % TOP_HIST];
		char ago[32], len[32];

		fmt_dur(ago, sizeof(ago), s->now > iv->start ? s->now - iv->start : 0);
		fmt_dur(len, sizeof(len), iv->end - iv->start);
		snprintf(line, sizeof(line), "  -%-7s %-9s %-6s for %s on thread %u", ago,
			 coro_state_name(iv->state),
			 iv->state == CS_SUSPENDED ? coro_reason_name(iv->reason) : "-", len, iv->tid);
		put_cols(y++, 0, line, COLS, true);
	}
	y++;
	if (!t->cfg.stacks && y < LINES - 2)
		put_cols(y++, 0, "(stacks: run with --stacks)", COLS, true);
	for (u32 j = 0; j < s->nd_lines && y < LINES - 1; j++)
		put_cols(y++, 0, s->d_lines[j], COLS, true);
}

static const char *const help_lines[] = {
	"corobpf top: keys",
	"",
	"  q              quit: stop tracing, detach (the targets run on), finish -o outputs",
	"  ?              this help (any key: back)",
	"  Up/Down        select a coroutine;  PgUp/PgDn, Home/End: by page, to either end",
	"  Enter          the selected coroutine's detail: states, timeline, stacks, findings",
	"  Esc, Left      back from the detail view",
	"  s / S          sort by the next / previous column",
	"  1-9            sort by that column (again: reverse);  r: reverse",
	"  /              filter by name (a substring; Enter keeps it, Esc cancels, empty: none)",
	"  space, p       pause (keys still work on the frozen view)",
	"",
	"columns: PID, ID (the scheduler's), NAME, STATE, FOR (in that state), TID (thread it",
	"runs or last ran on), WAIT (why suspended) and OBJECT (what on), SWITCH (times switched",
	"in), RUN (time running in all, since first seen)",
};

static void draw(struct top *t)
{
	int frows, trows;

	erase();
	draw_header(t);
	if (t->mode == MODE_HELP) {
		for (size_t i = 0; i < ARRAY_SIZE(help_lines) && 4 + (int)i < LINES; i++)
			put_cols(4 + (int)i, 0, help_lines[i], COLS, false);
	} else if (t->mode == MODE_DETAIL) {
		draw_detail(t);
	} else {
		/* Findings take a quarter of the screen, at most 8 lines, at least 2. */
		frows = LINES / 4;
		frows = frows > 8 ? 8 : frows < 2 ? 2 : frows;
		trows = LINES - 4 - 1 - (frows + 1) - 1;
		if (trows < 1) {
			trows = LINES - 6;
			frows = 0;
		}
		draw_table(t, 3, trows > 0 ? trows : 0);
		if (frows)
			draw_findings(t, 3 + 1 + trows, frows);
	}
	attron(A_REVERSE);
	if (t->editing) {
		char f[TOP_NAME_SAFE], line[TOP_NAME_SAFE + 64];

		term_safe(f, sizeof(f), t->filter, sizeof(t->filter));
		snprintf(line, sizeof(line), "filter by name: %s_  (Enter: keep, Esc: cancel)", f);
		put_cols(LINES - 1, 0, line, COLS, true);
	} else {
		put_cols(LINES - 1, 0, t->mode == MODE_DETAIL
			 ? "Esc back  q quit  ? help  space pause"
			 : "q quit  ? help  Enter detail  / filter  s/S/1-9 sort  r reverse  "
			   "space pause", COLS, true);
	}
	attroff(A_REVERSE);
	refresh();
}

static void set_sort(struct top *t, int col)
{
	if (t->sort_col == col) {
		t->sort_rev = !t->sort_rev;
	} else {
		t->sort_col = col;
		t->sort_rev = false;
	}
}

/* One key. Returns false when the user quits. */
static bool on_key(struct top *t, int ch)
{
	size_t page = LINES > 10 ? (size_t)LINES - 10 : 1;

	if (t->editing) {
		size_t n = strlen(t->filter);

		if (ch == 27) {
			memcpy(t->filter, t->filter_before, sizeof(t->filter));
			t->editing = false;
		} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			t->editing = false;
		} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
			if (n)
				t->filter[n - 1] = 0;
		} else if (ch >= 32 && ch < 127 && n + 1 < sizeof(t->filter)) {
			t->filter[n] = (char)ch;
			t->filter[n + 1] = 0;
		}
		t->sel = 0;
		t->first = 0;
		t->sel_uid = 0;
		return true;
	}
	if (t->mode == MODE_HELP) {
		t->mode = MODE_TABLE;
		return ch != 'q';
	}
	switch (ch) {
	case 'q':
	case 'Q':
		return false;
	case '?':
	case 'h':
		t->mode = MODE_HELP;
		break;
	case ' ':
	case 'p':
		t->paused = !t->paused;
		break;
	case 27:
	case KEY_LEFT:
	case KEY_BACKSPACE:
	case 127:
		t->mode = MODE_TABLE;
		break;
	case '\n':
	case '\r':
	case KEY_ENTER:
		if (t->mode == MODE_DETAIL) {
			t->mode = MODE_TABLE;
		} else if (t->norder) {
			const struct top_row *r = &t->snap.rows[t->order[t->sel]];

			t->mode = MODE_DETAIL;
			t->detail_uid = r->uid;
			t->detail_pid = r->pid;
			/* The detail is copied now, paused or not. */
			take_snapshot(t);
		}
		break;
	case '/':
		if (t->mode == MODE_TABLE) {
			memcpy(t->filter_before, t->filter, sizeof(t->filter));
			t->editing = true;
		}
		break;
	case 's':
	case '>':
		t->sort_col = (t->sort_col + 1) % COL_N;
		t->sort_rev = false;
		break;
	case 'S':
	case '<':
		t->sort_col = (t->sort_col + COL_N - 1) % COL_N;
		t->sort_rev = false;
		break;
	case 'r':
		t->sort_rev = !t->sort_rev;
		break;
	case KEY_UP:
	case 'k':
		if (t->sel)
			t->sel--;
		break;
	case KEY_DOWN:
	case 'j':
		if (t->sel + 1 < t->norder)
			t->sel++;
		break;
	case KEY_PPAGE:
		t->sel = t->sel > page ? t->sel - page : 0;
		break;
	case KEY_NPAGE:
		t->sel = t->sel + page < t->norder ? t->sel + page : (t->norder ? t->norder - 1 : 0);
		break;
	case KEY_HOME:
	case 'g':
		t->sel = 0;
		break;
	case KEY_END:
	case 'G':
		t->sel = t->norder ? t->norder - 1 : 0;
		break;
	case KEY_RESIZE:
		break;
	default:
		if (ch >= '1' && ch <= '9')
			set_sort(t, ch - '1');
		break;
	}
	/* The selection moved by hand: it now follows that coroutine. */
	t->sel_uid = t->sel < t->norder ? t->snap.rows[t->order[t->sel]].uid : 0;
	return true;
}

static bool stopping(struct top *t)
{
	bool s;

	pthread_mutex_lock(&t->wake_lock);
	s = t->stopping;
	pthread_mutex_unlock(&t->wake_lock);
	return s;
}

static void screen_loop(struct top *t)
{
	u64 interval = (u64)(t->cfg.interval_s * 1e9), next;

	take_snapshot(t);
	build_order(t);
	draw(t);
	next = now_boottime_ns() + interval;
	while (!stopping(t)) {
		int ch = getch();

		if (ch == ERR) {
			if (now_boottime_ns() < next)
				continue;
			next = now_boottime_ns() + interval;
			if (!t->paused)
				take_snapshot(t);
		} else if (!on_key(t, ch)) {
			/* Quit as a Ctrl-C would: the capture stops, the outputs are finished. */
			if (t->cfg.stop)
				*t->cfg.stop = SIGINT;
			break;
		}
		build_order(t);
		draw(t);
	}
	endwin();
}

static void text_loop(struct top *t)
{
	u64 interval = (u64)(t->cfg.interval_s * 1e9);
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	for (;;) {
		bool stop;

		until.tv_sec += (time_t)(interval / 1000000000ULL);
		until.tv_nsec += (long)(interval % 1000000000ULL);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&t->wake_lock);
		while (!t->stopping &&
		       pthread_cond_timedwait(&t->wake, &t->wake_lock, &until) != ETIMEDOUT)
			;
		stop = t->stopping;
		pthread_mutex_unlock(&t->wake_lock);
		if (stop)
			break;
		take_snapshot(t);
		print_text(t, stdout);
		t->printed = true;
		if (ferror(stdout)) {
			/* Nobody reads any more (`| head`): end as q would. */
			if (t->cfg.stop)
				*t->cfg.stop = SIGINT;
			break;
		}
	}
}

static void *top_main(void *arg)
{
	struct top *t = arg;

	if (t->screen)
		screen_loop(t);
	else
		text_loop(t);
	return NULL;
}

/* The screen, if stdout and stdin are a terminal ncurses knows. */
static bool screen_open(struct top *t)
{
	SCREEN *scr;

	if (t->cfg.text || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
		return false;
	/* Names may be UTF-8: ncursesw draws them as such under a UTF-8 locale. */
	setlocale(LC_CTYPE, "");
	scr = newterm(NULL, stdout, stdin);
	if (!scr)
		return false;
	set_term(scr);
	t->scr = scr;
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	timeout(100);
	return true;
}

int top_start(struct top *t)
{
	sigset_t block, old;
	int err;

	t->screen = screen_open(t);
	if (t->screen) {
		/* Messages wait in a file while the screen is up. */
		t->held_err = tmpfile();
		t->saved_err = t->held_err ? dup(STDERR_FILENO) : -1;
		if (t->saved_err >= 0)
			dup2(fileno(t->held_err), STDERR_FILENO);
	}
	/* Signals are the capture thread's: its handler stops the run. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	err = pthread_create(&t->thread, NULL, top_main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		if (t->screen)
			endwin();
		delscreen(t->scr);
		t->scr = NULL;
		return -err;
	}
	t->started = true;
	return 0;
}

void top_stop(struct top *t)
{
	if (!t || !t->started)
		return;
	pthread_mutex_lock(&t->wake_lock);
	t->stopping = true;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->wake_lock);
	pthread_join(t->thread, NULL);
	t->started = false;
	if (t->scr)
		delscreen(t->scr); /* the view's thread ended the screen (endwin) */
	t->scr = NULL;
	if (t->saved_err >= 0) {
		char buf[4096];
		size_t n;

		fflush(stderr);
		dup2(t->saved_err, STDERR_FILENO);
		close(t->saved_err);
		t->saved_err = -1;
		rewind(t->held_err);
		while ((n = fread(buf, 1, sizeof(buf), t->held_err)) > 0)
			fwrite(buf, 1, n, stderr);
	}
	if (t->held_err)
		fclose(t->held_err);
	t->held_err = NULL;
	if (!t->screen && !t->printed && !ferror(stdout)) {
		/* A run shorter than the interval: its state at the end. */
		take_snapshot(t);
		print_text(t, stdout);
	}
}

void top_free(struct top *t)
{
	if (!t)
		return;
	top_stop(t);
	free(t->snap.rows);
	free(t->snap.findings);
	free(t->snap.d_lines);
	free(t->order);
	free(t->findings);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->wake_lock);
	pthread_cond_destroy(&t->wake);
	free(t);
}
