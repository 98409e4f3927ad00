// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The table of counters every output reports (counters.h). docs/jsonl.md,
 * docs/sqlite.md, docs/perfetto.md and docs/reliability.md list them too.
 */
#include <stddef.h>
#include "counters.h"

static u64 lost_unattributed(const struct model *m)
{
	u64 lost = m->stats.bpf[CORO_STAT_RING_FULL];

	/* Lost after their thread's last delivered event: no later event carried them. */
	return lost > m->anom.lost_events ? lost - m->anom.lost_events : 0;
}

bool counters_stacks_missing(const struct model *m)
{
	return m->stats.bpf[CORO_STAT_STACK_LOST] || m->stats.user[CORO_USTAT_STACK_UNRESOLVED];
}

/*
 * Both ways a record goes without its stack, said so that a first run's few are not read as an
 * error: timer samples apart from the events (a sample interrupting one of our own probes finds
 * the CPU's stack buffer in use: the demo's usual case), and what to do.
 */
static void say_stacks_missing(FILE *out, const struct model *m)
{
	u64 lost = m->stats.bpf[CORO_STAT_STACK_LOST];
	u64 unresolved = m->stats.user[CORO_USTAT_STACK_UNRESOLVED];
	u64 total = lost + unresolved;
	u64 samples = m->samples_nostack < total ? m->samples_nostack : total;

	if (!counters_stacks_missing(m))
		return;
	if (samples == total) {
		fprintf(out, "  %llu of %llu stack samples (--sample-hz) have no stack: %llu not "
			"taken in the kernel, %llu not resolved\n"
			"    expected: a sample that lands while one of corobpf's own probes is using "
			"the CPU's stack buffer goes without; every event has its stack "
			"(docs/stacks.md, \"Loss\")\n",
			(unsigned long long)samples, (unsigned long long)m->samples,
			(unsigned long long)lost, (unsigned long long)unresolved);
		return;
	}
	fprintf(out, "  %llu events", (unsigned long long)(total - samples));
	if (samples)
		fprintf(out, " and %llu of %llu stack samples", (unsigned long long)samples,
			(unsigned long long)m->samples);
	fprintf(out, " have no stack: %llu not taken in the kernel, %llu not resolved\n"
		"    each is kept without it; the causes, and what to do about many: "
		"docs/stacks.md, \"Loss\"\n", (unsigned long long)lost,
		(unsigned long long)unresolved);
}

/* One line for the ways the probe stream contradicted itself; the others are in the files only. */
static void say_inconsistencies(FILE *out, const struct model *m)
{
	const struct model_anomalies *a = &m->anom;

	if (!(a->switch_from_mismatch || a->running_elsewhere || a->recreate_live ||
	      a->span_unmatched_end || a->cur_desync))
		return;
	fprintf(out, "  inconsistencies in the probe stream: %llu switch-from "
		"mismatches, %llu coroutines switched in while running elsewhere, %llu "
		"re-created without exit, %llu unmatched span ends\n",
		(unsigned long long)(a->switch_from_mismatch + a->cur_desync),
		(unsigned long long)a->running_elsewhere, (unsigned long long)a->recreate_live,
		(unsigned long long)a->span_unmatched_end);
}

/* The caps on live coroutines (model_limit()): which were reached, and what to do. */
static void say_over_cap(FILE *out, const struct model *m)
{
	const struct model_anomalies *a = &m->anom;

	if (!a->over_cap && !a->over_process_cap && !a->events_over_cap)
		return;
	fprintf(out, "  %llu coroutines were created while the live ones followed were at a cap "
		"(%llu at --max-coroutines %llu, %llu at a process's "
		"--max-coroutines-per-process %llu): each is not followed until there is room, "
		"then as one seen mid-life; %llu events found their coroutine not followed (in the "
		"event lists, without it)\n"
		"    raise the caps to follow them all (a --raw capture replays with others: "
		"corobpf report --max-coroutines N)\n",
		(unsigned long long)(a->over_cap + a->over_process_cap),
		(unsigned long long)a->over_cap, (unsigned long long)m->max_live,
		(unsigned long long)a->over_process_cap, (unsigned long long)m->max_live_process,
		(unsigned long long)a->events_over_cap);
}

/* The caps on open spans (model_limit_spans()). */
static void say_spans_over_cap(FILE *out, const struct model *m)
{
	const struct model_anomalies *a = &m->anom;

	if (!a->spans_over_cap && !a->spans_over_process_cap)
		return;
	fprintf(out, "  %llu spans were begun while as many were open as the caps allow (%llu at "
		"--max-open-spans %llu, %llu at a process's --max-open-spans-per-process %llu): "
		"not kept, their ends closing nothing else (marked over_cap in the event lists)\n"
		"    a span begun and never ended keeps its memory: look for a missing span_end, or "
		"raise the caps\n",
		(unsigned long long)(a->spans_over_cap + a->spans_over_process_cap),
		(unsigned long long)a->spans_over_cap, (unsigned long long)m->max_spans,
		(unsigned long long)a->spans_over_process_cap,
		(unsigned long long)m->max_spans_process);
}

/*
 * The kernel's doing, not a loss: said with what it changes and that nothing is to be done, so
 * that a first run's one or two are not read as a fault.
 */
static void say_offcpu_late(FILE *out, const struct model *m)
{
	u64 n = m->anom.offcpu_late;

	if (!n)
		return;
	fprintf(out, "  %llu off-CPU %s ended at %s thread's next record: the kernel did not show "
		"the thread's return to the CPU\n"
		"    expected now and then (a few in a thousand stretches on some kernels): %s "
		"a little long, with no run-queue time; nothing to do (docs/design.md, \"The "
		"kernel's view\")\n",
		(unsigned long long)n, n == 1 ? "stretch" : "stretches", n == 1 ? "its" : "their",
		n == 1 ? "it reads" : "they read");
}

/*
 * The detectors' blocking calls and long runs let go for want of room while their evidence was
 * still to come (user/model/analyze.c): said as candidates, since most would never have been
 * confirmed, with what makes fewer of them.
 */
static void say_findings_unheld(FILE *out, const struct model *m)
{
	const struct model_anomalies *a = &m->anom;

	if (!a->findings_unheld && !a->findings_unheld_thread)
		return;
	fprintf(out, "  %llu blocking calls or long runs were let go before their evidence came "
		"(%llu: a process already held 64 waiting for a ready that comes late; %llu: a "
		"thread already held 256 waiting to show whether work waited): any that evidence "
		"would have confirmed is a finding not made\n"
		"    most were never to be confirmed; to hold fewer, raise --blocking and --long-run "
		"(a process's late readies come from the batched path: --probe-path trap has none)\n",
		(unsigned long long)(a->findings_unheld + a->findings_unheld_thread),
		(unsigned long long)a->findings_unheld, (unsigned long long)a->findings_unheld_thread);
}

/* Attached processes asked what exists, and silent (user/capture/announce.h). */
static void say_unanswered(FILE *out, const struct model *m)
{
	u64 n = m->stats.user[CORO_USTAT_ANNOUNCE_UNANSWERED];

	if (!n)
		return;
	fprintf(out, "  %llu attached process%s with the announce probes did not list %s coroutines "
		"in time: is CORO_ANNOUNCE_WANTED() called from %s scheduler's loop? (docs/probes.md, "
		"\"What exists when a tracer attaches\")\n", (unsigned long long)n,
		n == 1 ? "" : "es", n == 1 ? "its" : "their", n == 1 ? "its" : "each");
}

#define BPF(i) .src = CSRC_BPF, .index = CORO_STAT_##i
#define USER(i) .src = CSRC_USER, .index = CORO_USTAT_##i
#define ANOM(f) .src = CSRC_ANOM, .index = offsetof(struct model_anomalies, f)

/* clang-format off */
const struct counter counters[] = {
	{.group = CG_LOST, BPF(RING_FULL), .flags = CF_HEADLINE,
	 .json = "events", .sql = "lost_events", .perfetto = "events lost",
	 .text = "events were lost (ring buffer full): the coroutines they touched show state "
		 "\"unknown\" there; try a larger --ring-size"},
	{.group = CG_LOST, ANOM(lost_events),
	 .json = "attributed", .sql = "lost_attributed"},
	{.group = CG_LOST, .src = CSRC_FN, .get = lost_unattributed,
	 .json = "unattributed",
	 .text = "of them were lost after their thread's last delivered event: the last states "
		 "shown for those threads' coroutines may be stale"},
	{.group = CG_LOST, BPF(STR_FAULT),
	 .json = "string_faults", .sql = "string_faults", .perfetto = "unreadable strings",
	 .text = "names/span labels could not be read (kept empty)"},
	{.group = CG_LOST, BPF(NO_TASK_STATE),
	 .json = "no_thread_state", .sql = "no_thread_state",
	 .perfetto = "events without thread state",
	 .text = "events came from threads whose state could not be allocated (their waker and "
		 "sched view are missing)"},
	{.group = CG_LOST, BPF(MAP_FULL),
	 .json = "map_full", .sql = "map_full", .perfetto = "traced-process map full",
	 .text = "processes or events went untraced: the map of traced processes (65,536) was "
		 "full"},
	{.group = CG_LOST, BPF(STACK_LOST), .flags = CF_STACKS | CF_NOT_READ_BACK,
	 .json = "stacks_lost", .sql = "stacks_lost", .perfetto = "stacks lost",
	 .say = say_stacks_missing},
	{.group = CG_LOST, USER(STACK_UNRESOLVED), .flags = CF_STACKS | CF_NOT_READ_BACK,
	 .json = "stacks_unresolved", .sql = "stacks_unresolved", .perfetto = "stacks unresolved"},
	{.group = CG_LOST, USER(STACK_UNMAPPED), .flags = CF_STACKS | CF_NOT_READ_BACK,
	 .json = "stacks_unmapped", .sql = "stacks_unmapped", .perfetto = "stacks unmapped",
	 .text = "stacks have addresses outside any mapping read (the process ended first): "
		 "shown as addresses"},
	{.group = CG_LOST, USER(BAD_RECORDS),
	 .json = "bad_records", .sql = "bad_records", .perfetto = "malformed ring records",
	 .text = "malformed ring buffer records were dropped"},
	{.group = CG_LOST, USER(LATE_ATTACH), .flags = CF_SAY_LAST,
	 .json = "late_attach", .sql = "late_attach", .perfetto = "objects attached late",
	 .text = "objects were attached after they were loaded: their first probes may be "
		 "missing"},
	{.group = CG_LOST, USER(ATTACH_FAIL),
	 .json = "attach_failures", .sql = "attach_failures", .perfetto = "attach failures",
	 .text = "probes could not be attached: their events are missing (the warnings at the "
		 "start say why)"},
	{.group = CG_LOST, USER(ATTACH_REFUSED),
	 .json = "attach_refused", .sql = "attach_refused", .perfetto = "objects refused",
	 .text = "objects were refused: their probes would harm the target, they were past "
		 "their share of USDT spec slots, or their filesystem may hang (the warnings name "
		 "them)"},
	{.group = CG_LOST, BPF(GO_FAULT),
	 .json = "go_unreadable", .sql = "go_unreadable", .perfetto = "Go status changes unread",
	 .text = "Go status changes whose goroutine could not be read: kept with zeros "
		 "(docs/go.md)"},
	{.group = CG_LOST, BPF(CXX_UNREAD),
	 .json = "cxx_unread", .sql = "cxx_unread", .perfetto = "C++20 returns unread",
	 .text = "C++20 body returns whose frame could not be read: taken as suspensions "
		 "(docs/cxx20.md)"},
	{.group = CG_LOST, USER(GATE_TIMEOUTS), .flags = CF_SAY_LAST,
	 .json = "exec_gate_timeouts", .sql = "exec_gate_timeouts",
	 .perfetto = "execs let go at the gate's timeout",
	 .text = "programs ran after waiting --exec-gate's time, before they were attached: "
		 "their first probes may be missing"},
	{.group = CG_LOST, ANOM(over_cap),
	 .json = "coroutines_over_cap", .sql = "coroutines_over_cap",
	 .perfetto = "coroutines over --max-coroutines", .say = say_over_cap},
	{.group = CG_LOST, ANOM(over_process_cap),
	 .json = "coroutines_over_process_cap", .sql = "coroutines_over_process_cap",
	 .perfetto = "coroutines over --max-coroutines-per-process"},
	{.group = CG_LOST, ANOM(events_over_cap),
	 .json = "events_over_cap", .sql = "events_over_cap",
	 .perfetto = "events of coroutines not followed"},
	{.group = CG_LOST, ANOM(spans_over_cap),
	 .json = "spans_over_cap", .sql = "spans_over_cap",
	 .perfetto = "spans over --max-open-spans", .say = say_spans_over_cap},
	{.group = CG_LOST, ANOM(spans_over_process_cap),
	 .json = "spans_over_process_cap", .sql = "spans_over_process_cap",
	 .perfetto = "spans over --max-open-spans-per-process"},
	{.group = CG_LOST, USER(BATCH_BEFORE), .flags = CF_NOT_A_LOSS,
	 .json = "batch_before_start", .sql = "batch_before_start",
	 .perfetto = "batched records before the session",
	 .text = "batched records were stamped before this session or their thread started: "
		 "not this session's, left out (a buffer met in use; docs/probes.md)"},
	{.group = CG_LOST, USER(BATCH_UNREAD),
	 .json = "batch_unread", .sql = "batch_unread", .perfetto = "batched records unread",
	 .text = "batched records were lost: their buffer could not be read before the thread "
		 "reused it or ended (a page swapped out)"},
	{.group = CG_LOST, USER(BATCH_FINAL_UNREAD),
	 .json = "batch_last_copies_unread", .sql = "batch_last_copies_unread",
	 .perfetto = "batched last copies unread",
	 .text = "threads ended or exec'd with a buffer corobpf could not read: what each wrote "
		 "since its last copy (up to 256 records) is lost"},
	{.group = CG_LOST, USER(BATCH_GEN_JUMPS),
	 .json = "batch_restarts", .sql = "batch_restarts",
	 .perfetto = "batched buffers restarted unread",
	 .text = "times a thread started its buffer again before corobpf had copied all of it (a "
		 "copy that could not run, the end of the run, or a program rewriting its buffer): "
		 "up to 256 records lost each"},
	{.group = CG_LOST, USER(BATCH_UNREGISTERED),
	 .json = "batch_unregistered", .sql = "batch_unregistered",
	 .perfetto = "batched buffers unregistered",
	 .text = "thread buffers could not be registered (no memory): their records were read only "
		 "when the buffer filled"},
	{.group = CG_LOST, ANOM(findings_unheld),
	 .json = "findings_unheld", .sql = "findings_unheld",
	 .perfetto = "findings let go awaiting a late ready", .say = say_findings_unheld},
	{.group = CG_LOST, ANOM(findings_unheld_thread),
	 .json = "findings_unheld_thread", .sql = "findings_unheld_thread",
	 .perfetto = "findings let go awaiting a thread's switch"},
	{.group = CG_LOST, USER(ANNOUNCE_UNANSWERED), .flags = CF_NOT_A_LOSS,
	 .json = "announce_unanswered", .sql = "announce_unanswered",
	 .perfetto = "processes that did not list their coroutines", .say = say_unanswered},
	{.group = CG_LOST, ANOM(span_begun_before_trace), .flags = CF_NOT_A_LOSS,
	 .json = "span_begun_before_trace", .sql = "span_begun_before_trace",
	 .perfetto = "span ends of spans begun before the trace",
	 .text = "span ends closed a span begun before the trace (a process taken on running): "
		 "no finding"},

	{.group = CG_ANOMALIES, ANOM(switch_from_mismatch),
	 .json = "switch_from_mismatch", .say = say_inconsistencies},
	{.group = CG_ANOMALIES, ANOM(cur_desync), .json = "thread_desync"},
	{.group = CG_ANOMALIES, ANOM(running_elsewhere), .json = "running_elsewhere"},
	{.group = CG_ANOMALIES, ANOM(recreate_live), .json = "recreated_live"},
	{.group = CG_ANOMALIES, ANOM(span_unmatched_end), .json = "span_unmatched_end"},
	{.group = CG_ANOMALIES, ANOM(late_records), .json = "late_records"},
	{.group = CG_ANOMALIES, ANOM(unknown_records), .json = "unknown_records"},
	{.group = CG_ANOMALIES, ANOM(unknown_pid), .json = "unknown_pid"},
	{.group = CG_ANOMALIES, ANOM(offcpu_late), .json = "offcpu_late",
	 .say = say_offcpu_late},
	{.group = CG_ANOMALIES, USER(BATCH_CLAMPED), .json = "batch_ts_clamped",
	 .sql = "batch_ts_clamped", .perfetto = "batched times clamped",
	 .text = "batched records had a time ahead of their copy or behind their buffer's "
		 "previous record: clamped into that range (a program writing its own records)"},
};
/* clang-format on */

_Static_assert(ARRAY_SIZE(counters) <= COUNTERS_MAX, "COUNTERS_MAX is too small for the table");
const size_t ncounters = ARRAY_SIZE(counters);

const char *const counter_group_json[CG_NGROUPS] = {
	[CG_LOST] = "lost",
	[CG_ANOMALIES] = "anomalies",
};

u64 counter_value(const struct counter *c, const struct model *m)
{
	switch (c->src) {
	case CSRC_BPF:
		return m->stats.bpf[c->index];
	case CSRC_USER:
		return m->stats.user[c->index];
	case CSRC_ANOM:
		return *(const u64 *)((const char *)&m->anom + c->index);
	case CSRC_FN:
		return c->get(m);
	}
	return 0;
}

u64 *counter_stat(const struct counter *c, u64 *bpf, u64 *user)
{
	if (c->src == CSRC_BPF)
		return &bpf[c->index];
	if (c->src == CSRC_USER)
		return &user[c->index];
	return NULL;
}
