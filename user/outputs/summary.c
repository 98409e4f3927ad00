// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "counters.h"
#include "spanrep.h"
#include "summary.h"
#include "termsafe.h"

/* Tally a switch-path process's incarnations for misfit(). */
static void misfit_tally(struct summary *s, const struct coro *c)
{
	struct summary_misfit *t = NULL;

	if (!c->proc || !c->proc->switch_families)
		return;
	for (int i = 0; i < s->nmisfit && !t; i++)
		if (s->misfit[i].pid == c->pid)
			t = &s->misfit[i];
	if (!t) {
		if (s->nmisfit == SUMMARY_MISFIT_PROCS)
			return;
		t = &s->misfit[s->nmisfit++];
		t->pid = c->pid;
	}
	t->incarnations++;
	t->switched_once += c->switch_ins <= 1;
	t->superseded += c->end == CE_SUPERSEDED;
	/* Ended by its own id made again before it ever ran (ctxmap: an abandoned context). */
	t->never_ran += c->end == CE_EXIT && !c->switch_ins;
	t->switch_ins += c->switch_ins;
}

static void summary_coroutine_end(void *ctx, const struct coro *c)
{
	struct summary *s = ctx;
	struct summary_entry *e;
	int i;

	misfit_tally(s, c);
	if (c->scheduler) {
		if (s->nsched < SUMMARY_SCHEDULERS) {
			struct summary_scheduler *e = &s->sched[s->nsched++];

			e->id = c->id;
			e->pid = c->pid;
			e->tid = c->tid;
			e->blocked = c->t_blocked;
			e->role = model_scheduler_role(c);
			memcpy(e->name, c->name, CORO_STR_LEN);
		} else {
			s->sched_more++;
		}
	}
	if (!c->longest_susp)
		return;
	if (s->ntop == SUMMARY_TOP && c->longest_susp <= s->top[SUMMARY_TOP - 1].dur)
		return;
	/* Insertion into a sorted array of five. */
	i = s->ntop < SUMMARY_TOP ? s->ntop++ : SUMMARY_TOP - 1;
	while (i > 0 && s->top[i - 1].dur < c->longest_susp) {
		s->top[i] = s->top[i - 1];
		i--;
	}
	e = &s->top[i];
	e->id = c->id;
	e->uid = c->uid;
	e->pid = c->pid;
	e->dur = c->longest_susp;
	e->start = c->longest_susp_start;
	e->reason = c->longest_susp_reason;
	e->obj = c->longest_susp_obj;
	e->open = c->longest_open;
	memcpy(e->name, c->name, CORO_STR_LEN);
	/* Still so: its last switch out's awaiter is this suspension's. */
	snprintf(e->awaiter, sizeof(e->awaiter), "%s", e->open && c->awaiter ? c->awaiter : "");
}

static u64 finding_weight(const struct finding *f)
{
	return finding_fields(f) & FF_STORM ? f->count : f->dur;
}

static void summary_finding(void *ctx, const struct finding *f)
{
	struct summary *s = ctx;
	struct finding *w = s->worst[f->kind];
	int *n = &s->nworst[f->kind], i;

	s->nfindings[f->kind]++;
	if (*n == SUMMARY_WORST && finding_weight(f) <= finding_weight(&w[SUMMARY_WORST - 1]))
		return;
	i = *n < SUMMARY_WORST ? (*n)++ : SUMMARY_WORST - 1;
	while (i > 0 && finding_weight(&w[i - 1]) < finding_weight(f)) {
		w[i] = w[i - 1];
		i--;
	}
	w[i] = *f;
}

/* The innermost frames of a finding's stack, one a line. */
#define SUMMARY_FRAMES 6

static void print_stack(struct summary *s, const struct model *m, u32 id)
{
	const struct sym_stack *st = model_stack(m, id);
	char buf[512], safe[TERM_SAFE_MAX(sizeof(buf))];

	if (!st)
		return;
	for (u32 i = 0; i < st->n && i < SUMMARY_FRAMES; i++) {
		/* Symbols and paths come from the target's files: as untrusted as its names. */
		sym_frame_format(st->frames[i], buf, sizeof(buf));
		fprintf(s->out, "                  %s %s\n", i ? "  " : "at",
			term_safe(safe, sizeof(safe), buf, sizeof(buf)));
	}
	if (st->n > SUMMARY_FRAMES)
		fprintf(s->out, "                    ... %u more frames\n", st->n - SUMMARY_FRAMES);
}

/* The rest of a slow_span line: the span, its cause, then where its time went. */
static void print_slow_span(struct summary *s, const struct finding *f)
{
	const struct span_time *in = &f->span_in;
	char name[TERM_SAFE_MAX(CORO_STR_LEN)], t[7][32];

	term_safe(name, sizeof(name), f->span, CORO_STR_LEN);
	fmt_duration(t[0], sizeof(t[0]), f->threshold);
	fprintf(s->out, ", span \"%s\" (over %s): mostly %s", name, t[0],
		finding_span_cause_name(f->cause));
	if (finding_fields(f) & FF_CAUSE_WAIT) {
		fprintf(s->out, " (%s", coro_reason_name(f->reason));
		if (f->obj)
			fprintf(s->out, " on 0x%llx", (unsigned long long)f->obj);
		fputc(')', s->out);
	}
	fmt_duration(t[1], sizeof(t[1]), in->running);
	fmt_duration(t[2], sizeof(t[2]), in->runnable);
	fmt_duration(t[3], sizeof(t[3]), in->suspended);
	fmt_duration(t[4], sizeof(t[4]), in->offcpu);
	fmt_duration(t[5], sizeof(t[5]), in->blocked);
	fmt_duration(t[6], sizeof(t[6]), in->runq);
	fprintf(s->out, "\n                  running %s, runnable %s, suspended %s, off-CPU %s "
		"(blocked %s, run queue %s)\n", t[1], t[2], t[3], t[4], t[5], t[6]);
}

static void print_findings(struct summary *s, const struct model *m)
{
	u64 total = 0;

	for (int k = 0; k < FK_NKINDS; k++)
		total += s->nfindings[k];
	if (!total) {
		fprintf(s->out, "  no findings\n");
		return;
	}
	fprintf(s->out, "  findings (%llu):\n", (unsigned long long)total);
	for (int k = 0; k < FK_NKINDS; k++) {
		if (!s->nfindings[k])
			continue;
		fprintf(s->out, "    %-15s %llu%s\n", finding_kind_name(k),
			(unsigned long long)s->nfindings[k],
			s->nfindings[k] > SUMMARY_WORST ? ", the worst:" : "");
		for (int i = 0; i < s->nworst[k]; i++) {
			const struct finding *f = &s->worst[k][i];
			char d[32], name[TERM_SAFE_MAX(CORO_STR_LEN)];
			u32 have = finding_fields(f);

			fmt_duration(d, sizeof(d), f->dur);
			term_safe(name, sizeof(name), f->name[0] ? f->name : "(unnamed)", CORO_STR_LEN);
			if (have & FF_STORM) {
				fprintf(s->out, "      %llu created by 0x%llx %s (pid %u) in %s, "
					"%llu within one second\n",
					(unsigned long long)f->count, (unsigned long long)f->id,
					f->uid ? name : "", f->pid, d, (unsigned long long)f->peak);
				continue;
			}
			fprintf(s->out, "      %10s  0x%llx %s (pid %u)", d, (unsigned long long)f->id,
				f->uid ? name : "(thread)", f->pid);
			if (have & FF_SLOW) {
				print_slow_span(s, f);
				print_stack(s, m, f->stack);
				continue;
			}
			if (have & FF_SPAN) {
				term_safe(name, sizeof(name), f->span, CORO_STR_LEN);
				fprintf(s->out, ", span \"%s\"%s", name,
					f->dur || f->open ? " never closed" : " ended without a begin");
			} else if (have & FF_WAIT) {
				fprintf(s->out, ", %s", coro_reason_name(f->reason));
				if (f->obj)
					fprintf(s->out, " on 0x%llx", (unsigned long long)f->obj);
				if (have & FF_AWAITER) {
					/* A C++20 wait: the awaiter's type (docs/cxx20.md). */
					term_safe(name, sizeof(name), f->awaiter, CORO_STR_LEN);
					fprintf(s->out, ", waiting on %s", name);
				}
			} else if (have & FF_STATE) {
				fprintf(s->out, ", %s", coro_state_name(f->state));
			}
			if (have & FF_WAKER)
				fprintf(s->out, ", woken by 0x%llx", (unsigned long long)f->waker);
			fprintf(s->out, "%s\n", f->open ? ", still so at the end" : "");
			if (have & FF_KEY) {
				char kf[TERM_SAFE_MAX(sizeof(f->key_frame))];

				term_safe(kf, sizeof(kf), f->key_frame, sizeof(f->key_frame));
				if (f->samples_kept < f->samples)
					fprintf(s->out, "                  key frame: %s (in %u of %u "
						"samples kept of %u)\n", kf, f->key_samples,
						f->samples_kept, f->samples);
				else
					fprintf(s->out, "                  key frame: %s (in %u of %u "
						"samples)\n", kf, f->key_samples, f->samples);
			}
			print_stack(s, m, f->stack);
		}
	}
}

/*
 * The scheduler contexts: each thread's waits for work in the kernel, never
 * a blocking finding (analyze.h), said as what they are.
 */
static void print_schedulers(struct summary *s)
{
	if (!s->nsched)
		return;
	fprintf(s->out, "  scheduler contexts (their waits in the kernel are their schedulers idle, "
			"no finding):\n");
	for (int i = 0; i < s->nsched; i++) {
		const struct summary_scheduler *e = &s->sched[i];
		char d[32], name[TERM_SAFE_MAX(CORO_STR_LEN)];

		fmt_duration(d, sizeof(d), e->blocked);
		term_safe(name, sizeof(name), e->name, CORO_STR_LEN);
		fprintf(s->out, "    0x%llx %s%s(pid %u, thread %u): %s, %s waiting in the kernel\n",
			(unsigned long long)e->id, name, name[0] ? " " : "", e->pid, e->tid, e->role,
			d);
	}
	if (s->sched_more)
		fprintf(s->out, "    ...and %llu more\n", (unsigned long long)s->sched_more);
}

/* How each process was traced, when any went through the switch-function path. */
static void print_paths(struct summary *s, const struct model *m)
{
	const struct coro_process *p;
	size_t it = 0;
	bool any = false;

	while ((p = model_next_process(m, &it)))
		any = any || p->switch_families;
	if (!any)
		return;
	it = 0;
	while ((p = model_next_process(m, &it))) {
		const char *line, *nl;
		char *safe;
		size_t len;

		if (!p->switch_families) {
			fprintf(s->out, "  pid %u traced through its corobpf probes\n", p->pid);
			continue;
		}
		if (p->switch_families == 1u << CORO_FAM_GO)
			fprintf(s->out, "  pid %u traced through the Go runtime's goroutine status "
				"changes:\n", p->pid);
		else
			fprintf(s->out, "  pid %u traced through the switch functions of "
				"unmodified libraries (no ready events: waits are not "
				"attributed):\n", p->pid);
		for (line = p->switch_desc; line && *line; line = nl ? nl + 1 : NULL) {
			/* Each line names an object by its path in the target's mappings. */
			nl = strchr(line, '\n');
			len = nl ? (size_t)(nl - line) : strlen(line);
			safe = xmalloc(TERM_SAFE_MAX(len));
			fprintf(s->out, "    %s\n", term_safe(safe, TERM_SAFE_MAX(len), line, len));
			free(safe);
			if (!nl)
				break;
		}
		if (p->switch_stepped)
			fprintf(s->out, "    %u switch function%s probed at an instruction the kernel "
				"single-steps: several times the cost per switch of an emulated one "
				"(docs/performance.md)\n", p->switch_stepped,
				p->switch_stepped == 1 ? " is" : "s are");
	}
}

/* pid was named with -p: running when the capture began (not a process -a admitted later). */
static bool named_pid(const struct model *m, u32 pid)
{
	for (u32 i = 0; m->ci && i < m->ci->npids; i++)
		if (m->ci->pids[i] == pid)
			return true;
	return false;
}

/*
 * Processes attached while they ran (-p) through their corobpf probes, whose
 * scheduler gave no list of what existed (docs/probes.md, "What exists when a
 * tracer attaches"): what the trace cannot know of them, said once.
 */
static void print_unlisted(struct summary *s, const struct model *m)
{
	const struct coro_process *p;
	size_t it = 0, n = 0;
	u32 first = 0;

	while ((p = model_next_process(m, &it)))
		if (p->mode == CORO_PROC_ATTACHED && !p->switch_families && !p->announce_lists &&
		    named_pid(m, p->pid) && !n++)
			first = p->pid;
	if (n)
		fprintf(s->out, "  %s %u%s attached while running: coroutines from before the "
			"attach appear when they next run, unnamed unless named again (%s "
			"scheduler listed none: docs/probes.md, \"What exists when a tracer "
			"attaches\")\n", n == 1 ? "pid" : "pids", first, n == 1 ? "" : " and others",
			n == 1 ? "its" : "their");
}

/* Traced processes a signal killed: their coroutines end with them, mid-state. */
static void print_crashes(struct summary *s, const struct model *m)
{
	const struct coro_process *p;
	size_t it = 0, shown = 0, more = 0;

	while ((p = model_next_process(m, &it))) {
		const char *abbrev;
		char comm[TERM_SAFE_MAX(sizeof(p->comm))];

		if (!p->exited || p->exit_status < 0 || !WIFSIGNALED(p->exit_status))
			continue;
		if (shown == 5) {
			more++;
			continue;
		}
		shown++;
		abbrev = sigabbrev_np(WTERMSIG(p->exit_status));
		term_safe(comm, sizeof(comm), p->comm, sizeof(p->comm));
		fprintf(s->out, "  process %u (%s) was killed by %s%s (signal %d)%s\n", p->pid, comm,
			abbrev ? "SIG" : "a signal", abbrev ? abbrev : "", WTERMSIG(p->exit_status),
			WCOREDUMP(p->exit_status) ? ", core dumped" : "");
	}
	if (more)
		fprintf(s->out, "  ...and %zu more processes killed by signals\n", more);
}

/* A line for each counter that is not zero, in the table's order, group by group. */
static void say_counters(struct summary *s, const struct model *m)
{
	for (enum counter_group g = 0; g < CG_NGROUPS; g++) {
		for (int pass = 0; pass < 2; pass++) {
			for_each_counter(c) {
				bool last = c->flags & CF_SAY_LAST;
				u64 v;

				if (c->group != g || last != (pass == 1))
					continue;
				if (c->say) {
					c->say(s->out, m);
					continue;
				}
				v = counter_value(c, m);
				if (c->text && v)
					fprintf(s->out, "  %llu %s\n", (unsigned long long)v, c->text);
			}
		}
	}
}

/*
 * The switch-function path sees a program through its family's functions
 * only: a program that switches by other means (QEMU's sigsetjmp coroutines
 * seen through ucontext) shows a stream no healthy program of that family
 * makes. Criterion (docs/switch.md, "When the family does not fit"): at
 * least MISFIT_MIN incarnations, and either nine in ten switched in at most
 * once with half made again under their id before or without an exit
 * (superseded, or ended by their context made again without ever having
 * run), or (the one
 * switch-path process of the trace) switch-from mismatches at least
 * MISFIT_MIN and half its switch-ins.
 */
#define MISFIT_MIN 16

static bool misfit(const struct summary_misfit *t, const struct model *m, int nswitch_procs)
{
	u64 mismatch = m->anom.switch_from_mismatch + m->anom.cur_desync;

	if (t->incarnations < MISFIT_MIN)
		return false;
	if (t->switched_once * 10 >= t->incarnations * 9 &&
	    (t->superseded + t->never_ran) * 2 >= t->incarnations)
		return true;
	return nswitch_procs == 1 && mismatch >= MISFIT_MIN && mismatch * 2 >= t->switch_ins;
}

/* At the very end, where it is read: what was traced may not be what the program does. */
static void print_misfits(struct summary *s, const struct model *m)
{
	for (int i = 0; i < s->nmisfit; i++) {
		const struct summary_misfit *t = &s->misfit[i];
		const struct coro_process *p = model_process_peek(m, t->pid);
		const char *line, *nl;
		char *safe;
		size_t len;

		if (!p || !misfit(t, m, s->nmisfit))
			continue;
		fprintf(s->out, "  WARNING: pid %u does not look like a program of the family it was "
			"traced as: %llu of %llu coroutines switched in at most once, %llu made again "
			"without having run or exited, %llu switch-from mismatches in the trace\n",
			t->pid, (unsigned long long)t->switched_once,
			(unsigned long long)t->incarnations,
			(unsigned long long)(t->superseded + t->never_ran),
			(unsigned long long)(m->anom.switch_from_mismatch + m->anom.cur_desync));
		for (line = p->switch_desc; line && *line; line = nl ? nl + 1 : NULL) {
			/* "family: path: sites": the family and the object, not the sites. */
			const char *sep = strstr(line, ": ");

			nl = strchr(line, '\n');
			len = nl ? (size_t)(nl - line) : strlen(line);
			sep = sep && sep < line + len ? strstr(sep + 2, ": ") : NULL;
			if (sep && sep < line + len)
				len = (size_t)(sep - line);
			safe = xmalloc(TERM_SAFE_MAX(len));
			fprintf(s->out, "    seen through %s\n",
				term_safe(safe, TERM_SAFE_MAX(len), line, len));
			free(safe);
			if (!nl)
				break;
		}
		fprintf(s->out, "    it likely switches by other means: trace it with --switch and its "
			"own family, or --switch uprobe:PATH:FUNCTION:from=ARG,to=ARG on its switch "
			"function (docs/switch.md)\n");
	}
}

static void summary_finish(void *ctx, const struct model *m)
{
	struct summary *s = ctx;
	u64 nproc = model_nprocesses(m), lost = model_bpf_stat(m, CORO_STAT_RING_FULL);
	char span[32];

	fmt_duration(span, sizeof(span), m->last_ts > m->first_ts ? m->last_ts - m->first_ts : 0);
	fprintf(s->out, "corobpf summary: %llu process%s, %llu coroutine%s (peak %llu live), "
		"%llu events over %s, %llu lost\n",
		(unsigned long long)nproc, nproc == 1 ? "" : "es",
		(unsigned long long)m->coroutines, m->coroutines == 1 ? "" : "s",
		(unsigned long long)m->peak_live, (unsigned long long)m->events, span,
		(unsigned long long)lost);
	if (m->input_error) {
		size_t len = strlen(m->input_error);
		char *safe = xmalloc(TERM_SAFE_MAX(len));

		fprintf(s->out, "  INCOMPLETE: the capture is damaged %s\n",
			term_safe(safe, TERM_SAFE_MAX(len), m->input_error, len));
		free(safe);
	}
	print_crashes(s, m);
	print_unlisted(s, m);
	say_counters(s, m);
	print_paths(s, m);
	print_findings(s, m);
	print_schedulers(s);
	spanrep_print(s->out, m, "  ", SPANREP_SUMMARY_NAMES);
	if (s->ntop)
		fprintf(s->out, "  longest suspended:\n");
	for (int i = 0; i < s->ntop; i++) {
		const struct summary_entry *e = &s->top[i];
		char d[32], name[TERM_SAFE_MAX(CORO_STR_LEN)];

		fmt_duration(d, sizeof(d), e->dur);
		term_safe(name, sizeof(name), e->name[0] ? e->name : "(unnamed)", CORO_STR_LEN);
		fprintf(s->out, "    %10s  0x%llx %-20s pid %u, %s", d, (unsigned long long)e->id,
			name, e->pid, coro_reason_name(e->reason));
		if (e->obj)
			fprintf(s->out, " on 0x%llx", (unsigned long long)e->obj);
		if (e->awaiter[0]) {
			term_safe(name, sizeof(name), e->awaiter, CORO_STR_LEN);
			fprintf(s->out, ", waiting on %s", name);
		}
		fprintf(s->out, "%s\n", e->open ? ", still suspended at the end" : "");
	}
	print_misfits(s, m);
}

void summary_init(struct summary *s, FILE *out, struct model_observer *obs,
		  struct finding_sink *fs)
{
	memset(s, 0, sizeof(*s));
	s->out = out;
	memset(obs, 0, sizeof(*obs));
	obs->ctx = s;
	obs->coroutine_end = summary_coroutine_end;
	obs->finish = summary_finish;
	fs->ctx = s;
	fs->finding = summary_finding;
}
