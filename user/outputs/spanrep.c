// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "spanrep.h"
#include "termsafe.h"
#include "util.h"

static unsigned share_pct(u64 part, u64 total)
{
	return total ? (unsigned)((part * 100 + total / 2) / total) : 0;
}

void spanrep_print(FILE *out, const struct model *m, const char *indent, size_t max)
{
	size_t n, shown;
	struct span_name_stats *const *v = span_stats_names(&m->spans, &n);

	if (!n)
		return;
	shown = max && n > max ? max : n;
	fprintf(out, "%sspans by name (%zu name%s, by total time; p50/p95/p99 nearest rank):\n",
		indent, n, n == 1 ? "" : "s");
	fprintf(out, "%s  %-24s %8s %10s %10s %10s %10s %10s %5s %5s %8s\n", indent, "name",
		"count", "total", "p50", "p95", "p99", "max", "susp", "offcpu", "unclosed");
	for (size_t i = 0; i < shown; i++) {
		const struct span_name_stats *ns = v[i];
		char name[TERM_SAFE_MAX(CORO_STR_LEN)], d[5][32];

		term_safe(name, sizeof(name),
			  ns->other ? "(other names)" : ns->name[0] ? ns->name : "(unnamed)",
			  CORO_STR_LEN);
		fmt_duration(d[0], sizeof(d[0]), ns->total);
		fmt_duration(d[1], sizeof(d[1]), span_stats_percentile(ns, 50));
		fmt_duration(d[2], sizeof(d[2]), span_stats_percentile(ns, 95));
		fmt_duration(d[3], sizeof(d[3]), span_stats_percentile(ns, 99));
		fmt_duration(d[4], sizeof(d[4]), ns->max);
		fprintf(out, "%s  %-24s %8llu %10s %10s %10s %10s %10s %4u%% %5u%% %8llu%s\n",
			indent, name, (unsigned long long)ns->count, d[0], d[1], d[2], d[3], d[4],
			share_pct(ns->suspended, ns->total), share_pct(ns->offcpu, ns->total),
			(unsigned long long)ns->unclosed,
			ns->approx ? "  (percentiles from a sample)" : "");
	}
	if (shown < n)
		fprintf(out, "%s  ... %zu more names (all: -o trace.jsonl or -o trace.db)\n",
			indent, n - shown);
}

size_t spanrep_names(const struct model *m)
{
	size_t n;

	span_stats_names(&m->spans, &n);
	return n;
}

void spanrep_json(struct obuf *o, const struct model *m)
{
	size_t n;
	struct span_name_stats *const *v = span_stats_names(&m->spans, &n);

	if (!n)
		return;
	obuf_puts(o, ",\"spans\":[");
	for (size_t i = 0; i < n; i++) {
		const struct span_name_stats *ns = v[i];

		obuf_puts(o, i ? ",{\"name\":" : "{\"name\":");
		obuf_json_str(o, ns->name, CORO_STR_LEN);
		obuf_printf(o, ",\"count\":%llu,\"total_ns\":%llu,\"p50_ns\":%llu,\"p95_ns\":%llu,"
			    "\"p99_ns\":%llu,\"max_ns\":%llu,\"suspended_ns\":%llu,"
			    "\"offcpu_ns\":%llu,"
			    "\"suspended_share\":%.4f,\"offcpu_share\":%.4f,\"unclosed\":%llu,"
			    "\"approx\":%s",
			    (unsigned long long)ns->count, (unsigned long long)ns->total,
			    (unsigned long long)span_stats_percentile(ns, 50),
			    (unsigned long long)span_stats_percentile(ns, 95),
			    (unsigned long long)span_stats_percentile(ns, 99),
			    (unsigned long long)ns->max, (unsigned long long)ns->suspended,
			    (unsigned long long)ns->offcpu,
			    ns->total ? (double)ns->suspended / ns->total : 0.0,
			    ns->total ? (double)ns->offcpu / ns->total : 0.0,
			    (unsigned long long)ns->unclosed, ns->approx ? "true" : "false");
		obuf_puts(o, ns->other ? ",\"other\":true}" : "}");
	}
	obuf_putc(o, ']');
}
