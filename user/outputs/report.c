// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include "counters.h"
#include "finding.h"
#include "jsonl.h"
#include "report.h"
#include "spanrep.h"
#include "termsafe.h"

#define MAX_KINDS 4096 /* distinct kinds kept; the rest count as "(other)" */
#define NBUCKETS 26    /* log2 buckets of microseconds: <1 us .. >= 2^24 us (16.8 s) */
#define MAX_FINDINGS 10000

struct kind_row {
	char kind[3 * CORO_STR_LEN + 1];
	u64 n, running, runnable, suspended, switch_ins;
};

struct proc_hist {
	u32 pid;
	u64 latency[NBUCKETS], run[NBUCKETS];
	u64 nlatency, nrun;
};

struct report_view {
	FILE *out;
	bool json;
	struct hmap kinds; /* (hash, len) -> struct kind_row */
	struct kind_row other;
	size_t nkinds;
	struct hmap procs; /* (pid, 0) -> struct proc_hist */
	FILE *findings_fp;    /* --json: the findings, as JSON objects, until the end */
	struct obuf findings;
	u64 nfindings, findings_dropped;
};

void name_kind(char *dst, size_t len, const char *name)
{
	size_t n;

	utf8_sanitize(dst, len, name, CORO_STR_LEN);
	n = strlen(dst);
	while (n && ((dst[n - 1] >= '0' && dst[n - 1] <= '9') || dst[n - 1] == '-'))
		n--;
	dst[n] = 0;
}

static u64 hash_str(const char *s)
{
	u64 h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (u8)*s) * 0x100000001b3ULL;
	return h;
}

static void rv_coroutine_end(void *ctx, const struct coro *c)
{
	struct report_view *r = ctx;
	char kind[3 * CORO_STR_LEN + 1];
	struct kind_row *row;
	u64 h;

	name_kind(kind, sizeof(kind), c->name);
	if (!kind[0])
		snprintf(kind, sizeof(kind), "%s", c->name[0] ? "(numbers)" : "(unnamed)");
	h = hash_str(kind);
	row = hmap_get(&r->kinds, h, strlen(kind));
	if (row && strcmp(row->kind, kind))
		row = &r->other; /* a hash collision: counted apart rather than merged wrongly */
	if (!row) {
		if (r->nkinds < MAX_KINDS) {
			row = xcalloc(1, sizeof(*row));
			memcpy(row->kind, kind, sizeof(row->kind));
			hmap_put(&r->kinds, h, strlen(kind), row);
			r->nkinds++;
		} else {
			row = &r->other;
		}
	}
	row->n++;
	row->running += c->t_state[CS_RUNNING];
	row->runnable += c->t_state[CS_RUNNABLE];
	row->suspended += c->t_state[CS_SUSPENDED];
	row->switch_ins += c->switch_ins;
}

static int bucket(u64 ns)
{
	u64 us = ns / 1000;
	int b = 0;

	while (us && b < NBUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

static void rv_interval(void *ctx, const struct coro *c, enum coro_state state, u64 start,
			u64 end, u32 tid, u32 reason, u64 obj)
{
	struct report_view *r = ctx;
	struct proc_hist *p;

	if (state != CS_RUNNING && state != CS_RUNNABLE)
		return;
	p = hmap_get(&r->procs, c->pid, 0);
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pid = c->pid;
		hmap_put(&r->procs, c->pid, 0, p);
	}
	if (state == CS_RUNNING) {
		p->run[bucket(end - start)]++;
		p->nrun++;
	} else {
		p->latency[bucket(end - start)]++;
		p->nlatency++;
	}
}

static void rv_finding(void *ctx, const struct finding *f)
{
	struct report_view *r = ctx;

	if (!r->json)
		return;
	if (r->nfindings >= MAX_FINDINGS) {
		r->findings_dropped++;
		return;
	}
	if (r->nfindings++)
		obuf_putc(&r->findings, ',');
	jsonl_write_finding(&r->findings, f, false);
}

static int cmp_rows(const void *a, const void *b)
{
	const struct kind_row *x = *(struct kind_row *const *)a, *y = *(struct kind_row *const *)b;

	return x->running < y->running ? 1 : x->running > y->running ? -1 : strcmp(x->kind, y->kind);
}

static int cmp_procs(const void *a, const void *b)
{
	const struct proc_hist *x = *(struct proc_hist *const *)a, *y = *(struct proc_hist *const *)b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static void bucket_label(char *buf, size_t len, int b)
{
	u64 lo = b ? 1ULL << (b - 1) : 0, hi = 1ULL << b; /* microseconds */

	if (!b)
		snprintf(buf, len, "< 1 us");
	else if (b == NBUCKETS - 1)
		snprintf(buf, len, ">= %.1f s", lo / 1e6);
	else if (lo >= 1000000)
		snprintf(buf, len, "%.1f-%.1f s", lo / 1e6, hi / 1e6);
	else if (lo >= 1000)
		snprintf(buf, len, "%.1f-%.1f ms", lo / 1e3, hi / 1e3);
	else
		snprintf(buf, len, "%llu-%llu us", (unsigned long long)lo, (unsigned long long)hi);
}

static void print_hist(FILE *out, const char *title, u32 pid, const u64 *h, u64 total)
{
	u64 max = 0;
	int first = -1, last = -1;

	for (int b = 0; b < NBUCKETS; b++) {
		if (h[b] > max)
			max = h[b];
		if (h[b] && first < 0)
			first = b;
		if (h[b])
			last = b;
	}
	fprintf(out, "\n%s, pid %u (%llu):\n", title, pid, (unsigned long long)total);
	if (first < 0)
		return;
	for (int b = first; b <= last; b++) {
		char label[40], bar[41];
		int w = max ? (int)((h[b] * 40 + max - 1) / max) : 0;

		bucket_label(label, sizeof(label), b);
		memset(bar, '#', w);
		memset(bar + w, ' ', 40 - w);
		bar[40] = 0;
		fprintf(out, "  %16s |%s| %llu\n", label, bar, (unsigned long long)h[b]);
	}
}

static void json_hist(struct obuf *o, const char *key, const u64 *h)
{
	bool first = true;

	obuf_printf(o, ",\"%s\":[", key);
	for (int b = 0; b < NBUCKETS; b++) {
		if (!h[b])
			continue;
		/* Each bucket: [lower bound in ns, count]. */
		obuf_printf(o, "%s[%llu,%llu]", first ? "" : ",",
			    b ? (unsigned long long)(1ULL << (b - 1)) * 1000 : 0ULL,
			    (unsigned long long)h[b]);
		first = false;
	}
	obuf_putc(o, ']');
}

static void rv_finish(void *ctx, const struct model *m)
{
	struct report_view *r = ctx;
	struct kind_row **rows = xmalloc((r->nkinds + 1) * sizeof(*rows));
	struct proc_hist **procs = xmalloc((r->procs.len + 1) * sizeof(*procs));
	size_t n = 0, np = 0, it = 0;
	void *v;

	while (hmap_next(&r->kinds, &it, NULL, NULL, &v))
		rows[n++] = v;
	if (r->other.n) {
		snprintf(r->other.kind, sizeof(r->other.kind), "(other)");
		rows[n++] = &r->other;
	}
	qsort(rows, n, sizeof(*rows), cmp_rows);
	it = 0;
	while (hmap_next(&r->procs, &it, NULL, NULL, &v))
		procs[np++] = v;
	qsort(procs, np, sizeof(*procs), cmp_procs);
	if (r->json) {
		struct obuf o;

		obuf_open_fd(&o, fileno(r->out), false);
		obuf_printf(&o, "{\"coroutines\":%llu,\"events\":%llu",
			    (unsigned long long)m->coroutines, (unsigned long long)m->events);
		jsonl_put_events_by_kind(&o, m);
		for_each_counter(c)
			if (c->flags & CF_HEADLINE)
				obuf_printf(&o, ",\"%s\":%llu", c->sql,
					    (unsigned long long)counter_value(c, m));
		obuf_printf(&o, ",\"end_reason\":\"%s\"", coro_end_reason_name(m->end_reason));
		if (m->input_error) {
			obuf_puts(&o, ",\"input_error\":");
			obuf_json_str(&o, m->input_error, 1024);
		}
		obuf_puts(&o, ",\"findings\":[");
		if (r->findings_fp && obuf_flush(&r->findings) == 0) {
			char buf[65536];
			size_t k;

			rewind(r->findings_fp);
			while ((k = fread(buf, 1, sizeof(buf), r->findings_fp)) > 0)
				obuf_write(&o, buf, k);
		}
		obuf_printf(&o, "],\"findings_omitted\":%llu,\"by_kind\":[",
			    (unsigned long long)r->findings_dropped);
		for (size_t i = 0; i < n; i++) {
			obuf_puts(&o, i ? ",{\"kind\":" : "{\"kind\":");
			obuf_json_str(&o, rows[i]->kind, sizeof(rows[i]->kind));
			obuf_printf(&o, ",\"coroutines\":%llu,\"running_ns\":%llu,\"runnable_ns\":%llu,"
				    "\"suspended_ns\":%llu,\"switch_ins\":%llu}",
				    (unsigned long long)rows[i]->n,
				    (unsigned long long)rows[i]->running,
				    (unsigned long long)rows[i]->runnable,
				    (unsigned long long)rows[i]->suspended,
				    (unsigned long long)rows[i]->switch_ins);
		}
		obuf_putc(&o, ']');
		spanrep_json(&o, m);
		obuf_puts(&o, ",\"processes\":[");
		for (size_t i = 0; i < np; i++) {
			obuf_printf(&o, "%s{\"pid\":%u", i ? "," : "", procs[i]->pid);
			json_hist(&o, "sched_latency", procs[i]->latency);
			json_hist(&o, "run_slices", procs[i]->run);
			obuf_putc(&o, '}');
		}
		obuf_puts(&o, "]}\n");
		obuf_close(&o);
	} else {
		fprintf(r->out, "\nby kind of coroutine (name without its trailing number):\n");
		fprintf(r->out, "  %-24s %8s %12s %12s %12s %10s\n", "kind", "count", "running",
			"runnable", "suspended", "switch-ins");
		for (size_t i = 0; i < n; i++) {
			char a[32], b[32], c[32], kind[TERM_SAFE_MAX(sizeof(rows[i]->kind))];

			fmt_duration(a, sizeof(a), rows[i]->running);
			fmt_duration(b, sizeof(b), rows[i]->runnable);
			fmt_duration(c, sizeof(c), rows[i]->suspended);
			/* Kinds are valid UTF-8 already (name_kind()), not yet free of controls. */
			term_safe(kind, sizeof(kind), rows[i]->kind, sizeof(rows[i]->kind));
			fprintf(r->out, "  %-24s %8llu %12s %12s %12s %10llu\n", kind,
				(unsigned long long)rows[i]->n, a, b, c,
				(unsigned long long)rows[i]->switch_ins);
		}
		/* The summary above showed the first names; all of them only if there are more. */
		if (spanrep_names(m) > SPANREP_SUMMARY_NAMES) {
			fputc('\n', r->out);
			spanrep_print(r->out, m, "", 0);
		}
		for (size_t i = 0; i < np; i++) {
			print_hist(r->out, "scheduling latency (ready to running)", procs[i]->pid,
				   procs[i]->latency, procs[i]->nlatency);
			print_hist(r->out, "run slices (running to switched out)", procs[i]->pid,
				   procs[i]->run, procs[i]->nrun);
		}
	}
	free(rows);
	free(procs);
}

struct report_view *report_view_new(FILE *out, bool json, struct model_observer *obs,
				    struct finding_sink *fs)
{
	struct report_view *r = xcalloc(1, sizeof(*r));

	r->out = out;
	r->json = json;
	hmap_init(&r->kinds);
	hmap_init(&r->procs);
	if (json) {
		r->findings_fp = tmpfile();
		obuf_open_fd(&r->findings, r->findings_fp ? fileno(r->findings_fp) : -1, false);
	}
	memset(obs, 0, sizeof(*obs));
	obs->ctx = r;
	obs->coroutine_end = rv_coroutine_end;
	obs->interval = rv_interval;
	obs->finish = rv_finish;
	fs->ctx = r;
	fs->finding = rv_finding;
	return r;
}

void report_view_free(struct report_view *r)
{
	size_t it = 0;
	void *v;

	while (hmap_next(&r->kinds, &it, NULL, NULL, &v))
		free(v);
	it = 0;
	while (hmap_next(&r->procs, &it, NULL, NULL, &v))
		free(v);
	hmap_free(&r->kinds);
	hmap_free(&r->procs);
	if (r->json)
		obuf_close(&r->findings);
	if (r->findings_fp)
		fclose(r->findings_fp);
	free(r);
}
