// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <linux/perf_event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "atattach.h"
#include "batch.h"
#include "capture.h"
#include "cxxattach.h"
#include "gatestats.h"
#include "interpattach.h"
#include "gowalk.h"
#include "liverec.h"
#include "preflight.h"
#include "procfs.h"
#include "reorder.h" /* its window */
#include "signals.h"
#include "stopper.h"
#include "strread.h"
#include "termsafe.h"
#include "usdt.h"
#include "corobpf.skel.h"
#include "log.h"

#define POLL_MS 100
/* --stacks=fp: entries of the kernel's stack map. */
#define CAPTURE_STACK_MAP 16384
/*
 * Events one read of the ring may take before the loop looks at signals, -d and targets (a
 * batched ring record holds up to 256).
 */
#define RING_READ_BUDGET 65536
#define STATS_EVERY_NS 1000000000ULL

/* The epoll tag of the exec gate's wake descriptor (target indexes and the ring have theirs). */
#define GATE_EPOLL_TAG (UINT64_MAX - 1)

/* ---- records into the sink ---- */

static struct target *find_target(struct capture *c, u32 pid)
{
	for (size_t i = 0; i < c->ntargets; i++)
		if (c->targets[i].pid == pid)
			return &c->targets[i];
	return NULL;
}

/* What attaching found since last time, as records (attachctx.h). */
static void emit_found(struct capture *c)
{
	for (size_t i = 0; i < c->attach.nfound; i++) {
		struct attach_found *f = &c->attach.found[i];
		struct target *t = f->kind == ATTACH_FOUND_SWITCH ? find_target(c, f->pid) : NULL;

		if (t && f->kind == ATTACH_FOUND_SWITCH)
			unseen_note(&c->unseen, f);
		if (t && t->hold_switch_recs) {
			/* Taken over: the target frees it. */
			t->held = xrealloc(t->held, (t->nheld + 1) * sizeof(*t->held));
			t->held[t->nheld++] = *f;
			f->path = f->site_text = f->limits = NULL;
			continue;
		}

		if (f->kind == ATTACH_FOUND_OBJECT && f->late)
			c->ustats[CORO_USTAT_LATE_ATTACH]++;
		if (f->kind == ATTACH_FOUND_GO_WALK) {
			/* After the ring's records of before it (ringev.h), taken over. */
			ringev_hold_walk(&c->ev, f->go_gs, f->ngo_gs);
			f->go_gs = NULL;
		} else {
			liverec_found(c->sink, f);
		}
	}
	attach_found_clear(&c->attach);
}

/*
 * --follow: a followed process's exit comes from the BPF side, with its status. Should that record
 * have been lost (a full ring), a process found gone here ends anyway, status unknown, so the run
 * is not held open.
 */
static void reap_followed(struct capture *c)
{
	int fd = bpf_map__fd(c->skel->maps.traced);
	u32 gone[64];
	size_t n = 0, it = 0;
	u64 pid;
	void *v;

	/*
	 * The BPF side forgets a pid at its exit even when the ring is full: a
	 * zombie, or a pid already given to another process, is gone too.
	 */
	while (n < ARRAY_SIZE(gone) && hmap_next(&c->ev.announced, &it, &pid, NULL, &v)) {
		u32 key = (u32)pid;
		__u8 verdict;

		if (bpf_map_lookup_elem(fd, &key, &verdict) < 0 && errno == ENOENT)
			gone[n++] = key;
	}
	/* Their exit records, if delivered, are in the ring by now: those come first. */
	ring_buffer__consume(c->rb);
	for (size_t i = 0; i < n; i++) {
		if (!hmap_get(&c->ev.announced, gone[i], 0))
			continue;
		log_debug("process %u is gone without its exit record", gone[i]);
		free(hmap_del(&c->ev.announced, gone[i], 0));
		if (c->stk)
			stack_resolver_ended(c->stk, gone[i]);
		liverec_proc_exit(c->sink, gone[i], -1);
	}
}

static void emit_stats(struct capture *c)
{
	struct coro_rec_stats r = {};
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(c->skel->maps.stats);
	u64 *vals = xcalloc(ncpu, sizeof(u64));

	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_REC_STATS;
	r.hdr.ts = now_boottime_ns();
	for (u32 k = 0; k < CORO_STAT_MAX; k++) {
		if (bpf_map_lookup_elem(fd, &k, vals) != 0)
			continue;
		for (int i = 0; i < ncpu; i++)
			r.bpf[k] += vals[i];
	}
	if (c->stk) {
		const struct stack_resolver_stats *st = stack_resolver_stats(c->stk);

		c->ustats[CORO_USTAT_STACK_UNRESOLVED] = st->unresolved;
		c->ustats[CORO_USTAT_STACK_UNMAPPED] = st->unmapped;
	}
	if (batch_reads(c->skel))
		batch_carry_counters(fd, c->ustats);
	memcpy(r.user, c->ustats, sizeof(r.user));
	free(vals);
	record_sink_emit(c->sink, &r.hdr);
}

static void emit_end(struct capture *c)
{
	struct coro_rec_end r = {};

	r.hdr.size = sizeof(r);
	r.hdr.kind = CORO_REC_END;
	r.hdr.ts = now_boottime_ns();
	r.reason = c->end_reason;
	record_sink_emit(c->sink, &r.hdr);
}

/* ---- setup ---- */

/* What attaching is lent of the skeleton (attachctx.h). */
static void lend_skeleton(struct capture *c)
{
	struct corobpf_bpf *s = c->skel;
	struct attach_ctx *a = &c->attach;

	a->progs[ATTACH_PROG_CREATE] = s->progs.coro_create;
	a->progs[ATTACH_PROG_NAME] = s->progs.coro_name;
	a->progs[ATTACH_PROG_READY] = s->progs.coro_ready;
	a->progs[ATTACH_PROG_SWITCH] = s->progs.coro_switch;
	a->progs[ATTACH_PROG_EXIT] = s->progs.coro_exit;
	a->progs[ATTACH_PROG_SPAN_BEGIN] = s->progs.coro_span_begin;
	a->progs[ATTACH_PROG_SPAN_END] = s->progs.coro_span_end;
	a->progs[ATTACH_PROG_LIBLOAD] = s->progs.coro_libload;
	a->progs[ATTACH_PROG_CTX] = s->progs.coro_ctx;
	a->progs[ATTACH_PROG_CTX_MULTI] = s->progs.coro_ctx_multi;
	a->progs[ATTACH_PROG_CXX] = s->progs.coro_cxx;
	a->progs[ATTACH_PROG_RT] = s->progs.coro_rt;
	a->progs[ATTACH_PROG_ANNOUNCE] = s->progs.coro_announce;
	a->progs[ATTACH_PROG_ANNOUNCE_DONE] = s->progs.coro_announce_done;
	a->progs[ATTACH_PROG_BATCH] =
		c->opts->probe_path == PROBE_PATH_BATCHED ? s->progs.coro_batch : NULL;
	a->usdt_specs = s->maps.__bpf_usdt_specs;
	a->go_offsets = s->maps.go_offsets;
	a->py_layouts = s->maps.py_layouts;
	a->lua_layouts = s->maps.lua_layouts;
	a->py_waits = s->maps.py_waits;
}

/* A CPU-clock perf event per CPU, running coro_sample (which keeps only traced coroutines). */
static int attach_samplers(struct capture *c, u32 hz)
{
	int ncpu = libbpf_num_possible_cpus();

	for (int cpu = 0; cpu < ncpu; cpu++) {
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.size = sizeof(attr),
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_freq = hz,
			.freq = 1,
		};
		struct bpf_link *l;
		int fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			if (errno == ENODEV || errno == ENOENT)
				continue; /* a possible CPU that is not online */
			log_err("cannot open a CPU-clock perf event on CPU %d for --sample-hz: %s "
				"(--sample-hz 0 traces without sampling)", cpu, strerror(errno));
			return EXIT_FAILURE_RUNTIME;
		}
		l = bpf_program__attach_perf_event(c->skel->progs.coro_sample, fd);
		if (!l) {
			log_err("cannot attach the sampler to CPU %d: %s (--sample-hz 0 traces "
				"without sampling)", cpu, strerror(errno));
			close(fd);
			return EXIT_FAILURE_RUNTIME;
		}
		attach_add_link(&c->attach, l);
	}
	return 0;
}

int capture_open(struct capture *c, const struct capture_opts *opts)
{
	int err;

	capture_raise_nofile();
	memset(c, 0, sizeof(*c));
	c->stopper.efd = -1;
	c->opts = opts;
	capture_set_child_stdout(opts->stdout_to_stderr);
	c->launch = (struct attach_launch){
		.argv = opts->argv,
		.before_exec = capture_child_before_exec,
		.forked = capture_set_signal_child,
		.child = -1,
		.release_fd = -1,
		.launch_err_fd = -1,
	};
	c->epfd = -1;
	attach_ctx_init(&c->attach);
	c->attach.opts = opts;
	c->attach.ustats = c->ustats;
	c->attach.announce = &c->announce;
	ringev_init(&c->ev);
	c->ev.opts = opts;
	c->ev.global_plans = &c->attach.global_plans;
	c->ev.ustats = c->ustats;
	c->ev.batch.ustats = c->ustats;
	c->skel = corobpf_bpf__open();
	if (!c->skel) {
		log_err("cannot open the BPF object: %s", strerror(errno));
		return EXIT_FAILURE_RUNTIME;
	}
	lend_skeleton(c);
	/* Wake the reader when a quarter of the ring waits: it never fills between polls. */
	c->skel->rodata->wakeup_bytes = opts->ring_bytes / 4;
	c->skel->rodata->sched_view = !opts->no_sched;
	if (opts->system_wide) {
		c->skel->rodata->system_wide = true;
		for (u32 i = 0; i < opts->ncomms && i < ARRAY_SIZE(c->skel->rodata->comm_filter); i++) {
			size_t n = MIN(strlen(opts->comms[i]), sizeof(c->skel->rodata->comm_filter[i]));

			memcpy((char *)c->skel->rodata->comm_filter[i], opts->comms[i], n);
			c->skel->rodata->comm_filter_len[i] = n;
			c->skel->rodata->ncomm_filter = i + 1;
		}
		for (u32 i = 0; i < opts->npids && i < ARRAY_SIZE(c->skel->rodata->pid_filter); i++)
			c->skel->rodata->pid_filter[i] = opts->pids[i];
		c->skel->rodata->npid_filter = MIN(opts->npids, ARRAY_SIZE(c->skel->rodata->pid_filter));
	}
	c->skel->rodata->follow = opts->follow;
	c->skel->rodata->stack_mode = opts->stacks;
	c->skel->rodata->sample_runs = opts->stacks && opts->sample_hz;
	if (!c->skel->rodata->sample_runs)
		bpf_program__set_autoload(c->skel->progs.coro_sample, false);
	c->skel->rodata->stack_bytes = opts->stack_bytes;
	/* The kernel stack map is preallocated (~1 KiB an entry): none unless asked for. */
	err = bpf_map__set_max_entries(c->skel->maps.stackmap,
				       opts->stacks == STACK_MODE_FP ? CAPTURE_STACK_MAP : 1);
	if (!err && opts->stacks != STACK_MODE_DWARF)
		err = bpf_map__set_max_entries(c->skel->maps.stack_scratch, 1);
	if (err) {
		log_err("cannot size the stack maps: %s", strerror(-err));
		return EXIT_FAILURE_RUNTIME;
	}
	/*
	 * libbpf's USDT spec map: one slot per distinct argument string of a probe, per attach,
	 * held until the end. Larger than libbpf's 256, and shared out by usdt.c
	 * (usdt_budget_take) so that no object or user can take the slots others need (libbpf
	 * 1.1.2 also double-frees when it runs out).
	 */
	if (!err)
		err = bpf_map__set_max_entries(c->skel->maps.__bpf_usdt_specs, USDT_SPEC_SLOTS);
	if (!err)
		err = bpf_map__set_max_entries(c->skel->maps.events, opts->ring_bytes);
	if (err) {
		log_err("cannot size the ring buffer to %llu bytes: %s",
			(unsigned long long)opts->ring_bytes, strerror(-err));
		return EXIT_FAILURE_RUNTIME;
	}
	/* uprobe_multi links: one per object and process, detached in one go. */
	c->attach.uprobe_multi = kernel_has_uprobe_multi();
	if (c->attach.uprobe_multi)
		bpf_program__set_expected_attach_type(c->skel->progs.coro_ctx_multi,
						      CORO_BPF_TRACE_UPROBE_MULTI);
	else
		bpf_program__set_autoload(c->skel->progs.coro_ctx_multi, false);
	/* C++20 coroutines: uprobe sessions (6.13); without them the program stays unloaded. */
	if (cxxattach_supported())
		bpf_program__set_expected_attach_type(c->skel->progs.coro_cxx,
						      CORO_BPF_TRACE_UPROBE_SESSION);
	else
		bpf_program__set_autoload(c->skel->progs.coro_cxx, false);
	/* asyncio and Lua: uprobe sessions too (interpattach.c says when they are missing). */
	if (cxxattach_supported())
		bpf_program__set_expected_attach_type(c->skel->progs.coro_rt,
						      CORO_BPF_TRACE_UPROBE_SESSION);
	else
		bpf_program__set_autoload(c->skel->progs.coro_rt, false);
	batch_setup(c->skel, opts->probe_path, opts->system_wide || opts->follow || !opts->argv,
		    c->attach.uprobe_multi);
	/* After each batch site, where batch_setup loads it (the trap path, reading buffers). */
	c->attach.progs[ATTACH_PROG_BATCH_FULL] =
		bpf_program__autoload(c->skel->progs.coro_batch_full) ? c->skel->progs.coro_batch_full
								       : NULL;
	usdt_multi_setup(&c->attach);
	strread_setup(c->skel);
	err = corobpf_bpf__load(c->skel);
	if (err) {
		log_err("cannot load the BPF programs: %s%s", strerror(-err),
			log_level < LOG_VERBOSE ? " (run with -v for the verifier's log)" : "");
		return err == -EPERM ? EXIT_PRIVILEGE : EXIT_FAILURE_RUNTIME;
	}
	{
		/*
		 * Tracepoints: exec (a target replacing its image; -a: any new
		 * program) and process exit (a target's pid forgotten when it dies,
		 * before it can be reused) always, and the scheduler ones unless
		 * --no-sched (every context switch on the machine runs them).
		 */
		struct bpf_program *tp[] = {c->skel->progs.coro_exec, c->skel->progs.coro_proc_exit,
					    opts->follow ? c->skel->progs.coro_fork : NULL,
					    opts->no_sched ? NULL : c->skel->progs.coro_sched_switch,
					    opts->no_sched ? NULL : c->skel->progs.coro_sched_wakeup};

		for (size_t i = 0; i < ARRAY_SIZE(tp); i++) {
			struct bpf_link *l;

			if (!tp[i])
				continue;
			l = bpf_program__attach(tp[i]);
			if (!l) {
				log_err("cannot attach %s: %s%s", bpf_program__name(tp[i]),
					strerror(errno),
					i >= 3 ? " (run with --no-sched to trace without the "
						 "kernel's scheduling view)" : "");
				return EXIT_FAILURE_RUNTIME;
			}
			attach_add_link(&c->attach, l);
		}
	}
	err = batch_attach(c->skel, &c->attach, opts->probe_path);
	if (err)
		return err;
	batch_check_elsewhere(c->skel, opts->probe_path, "at attach");
	if (opts->stacks)
		c->stk = stack_resolver_new(opts->stacks, bpf_map__fd(c->skel->maps.stackmap));
	if (opts->stacks && opts->sample_hz) {
		err = attach_samplers(c, opts->sample_hz);
		if (err)
			return err;
	}
	c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.events), ringev_ring_record, &c->ev, NULL);
	if (!c->rb) {
		log_err("cannot open the ring buffer: %s", strerror(errno));
		return EXIT_FAILURE_RUNTIME;
	}
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0) {
		log_err("epoll_create1: %s", strerror(errno));
		return EXIT_FAILURE_RUNTIME;
	}
	{
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};

		if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(c->rb), &ev) < 0) {
			log_err("epoll_ctl on the ring buffer: %s", strerror(errno));
			return EXIT_FAILURE_RUNTIME;
		}
	}
	return 0;
}

static int pidfd_open_compat(pid_t pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

static int watch_target(struct capture *c, struct target *t, size_t idx)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = idx};

	t->pidfd = pidfd_open_compat(t->pid);
	if (t->pidfd < 0)
		return -errno;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, t->pidfd, &ev) < 0)
		return -errno;
	return 0;
}

/* The BPF side reports exec of the processes in `traced` (and, with -a, admits by it). */
static void mark_traced(struct capture *c, u32 pid)
{
	__u8 verdict = 1; /* VERDICT_TRACED */

	bpf_map_update_elem(bpf_map__fd(c->skel->maps.traced), &pid, &verdict, BPF_ANY);
}

int capture_targets(struct capture *c)
{
	const struct capture_opts *o = c->opts;

	if (o->system_wide)
		return 0; /* processes are admitted as their probes fire */
	if (o->argv) {
		int ret;

		c->targets = xcalloc(1, sizeof(*c->targets));
		c->ntargets = 1;
		hmap_init(&c->targets[0].objects);
		ret = attach_launch_prepare(&c->attach, &c->targets[0], &c->launch);
		if (ret)
			return ret;
		if (watch_target(c, &c->targets[0], 0)) {
			log_err("cannot watch the launched command (pid %u): %s", c->targets[0].pid,
				strerror(errno));
			return EXIT_FAILURE_RUNTIME;
		}
		mark_traced(c, c->targets[0].pid);
		return 0;
	}
	c->targets = xcalloc(o->npids, sizeof(*c->targets));
	for (u32 i = 0; i < o->npids; i++) {
		struct target *t = &c->targets[c->ntargets];
		u32 tgid = 0, ppid = 0;
		char path[64];
		ssize_t n;

		if (find_target(c, o->pids[i]))
			continue;
		if (proc_read_status(o->pids[i], &tgid, &ppid) < 0) {
			log_err("no process with PID %u", o->pids[i]);
			return EXIT_NO_PROCESS;
		}
		if (tgid != o->pids[i]) {
			log_err("%u is a thread of process %u: trace the process, -p %u", o->pids[i],
				tgid, tgid);
			return EXIT_NO_PROCESS;
		}
		t->pid = tgid;
		t->ppid = ppid;
		t->wait_status = -1;
		t->start_ts = now_boottime_ns();
		hmap_init(&t->objects);
		proc_read_comm(t->pid, t->pid, t->comm);
		snprintf(path, sizeof(path), "/proc/%u/exe", t->pid);
		n = readlink(path, t->exe, sizeof(t->exe) - 1);
		t->exe[n > 0 ? n : 0] = 0;
		c->ntargets++;
		if (watch_target(c, t, c->ntargets - 1)) {
			log_err("cannot watch process %u: %s", t->pid, strerror(errno));
			return errno == ESRCH ? EXIT_NO_PROCESS : EXIT_FAILURE_RUNTIME;
		}
		mark_traced(c, t->pid);
	}
	return 0;
}

static void attach_all_processes(struct capture *c)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d) {
		log_warn("cannot list /proc: %s", strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);

		if (*end || !pid || pid == (unsigned long)getpid())
			continue;
		attach_scan_global(&c->attach, (u32)pid, false);
	}
	closedir(d);
}

/* The exec gate's examination: a program held at its exec, attached with its libraries. */
static void gate_examine(void *ctx, const struct execgate_found *f)
{
	struct capture *c = ctx;

	attach_exec_object(&c->attach, f->fd, f->pid, f->changed, f->libs, f->nlibs);
}

/* -a, --follow: new programs held at their exec until attached (execgate.h). */
static void start_exec_gate(struct capture *c)
{
	struct execgate_opts go = {
		.timeout_ms = c->opts->exec_gate_ms,
		.traced_map_fd = c->opts->follow ? bpf_map__fd(c->skel->maps.traced) : -1,
	};
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = GATE_EPOLL_TAG};

	if (!c->opts->exec_gate_ms || c->gate)
		return;
	c->gate = execgate_start(&go);
	/*
	 * A stopped corobpf answers no exec on the machine: Ctrl-Z, or a write to
	 * the terminal from the background under `stty tostop`, do not stop it.
	 * (SIGSTOP cannot be refused: the execs it holds meanwhile can be killed.)
	 * The launched command was forked already, with its own dispositions.
	 */
	if (c->gate) {
		signal(SIGTSTP, SIG_IGN);
		signal(SIGTTOU, SIG_IGN);
		signal(SIGTTIN, SIG_IGN);
	}
	if (c->gate && epoll_ctl(c->epfd, EPOLL_CTL_ADD, execgate_wake_fd(c->gate), &ev) < 0) {
		log_warn("exec gate: epoll_ctl: %s; programs started later are attached after "
			 "their exec", strerror(errno));
		execgate_stop(c->gate, NULL);
		c->gate = NULL;
	}
}

/* The gate's answers end with the capture: what it held and let go, said. */
static void stop_exec_gate(struct capture *c)
{
	struct execgate_stats st;

	if (!c->gate)
		return;
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, execgate_wake_fd(c->gate), NULL);
	execgate_stop(c->gate, &st);
	c->gate = NULL;
	c->ustats[CORO_USTAT_GATE_TIMEOUTS] = st.timeouts;
	gatestats_say(&st, c->opts->exec_gate_ms);
}

static int attach_targets(struct capture *c)
{
	u32 sites = 0, via_script = 0;

	if (c->opts->system_wide) {
		attach_all_processes(c);
		start_exec_gate(c);
		if (c->attach.global_sites)
			log_verbose("attached %u probe sites in %zu objects, for every process",
				    c->attach.global_sites, (size_t)c->attach.global_objects.len);
		else
			log_info("no instrumented program runs yet; waiting for one (exec and "
				 "dlopen are watched)");
		return 0;
	}

	if (c->opts->follow)
		start_exec_gate(c);
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target *t = &c->targets[i];
		int ret;

		c->skel->bss->tracer_tgid = (u32)getpid(); /* the holds' parent (corobpf.bpf.c) */
		if (t->via_script) {
			/* Its images are attached at their execs, each held there. */
			c->skel->bss->exec_hold_tgid = t->pid;
			via_script++;
			continue;
		}
		if (!t->launched) {
			ret = attach_scan_process(&c->attach, t, false);
			if (ret)
				return ret;
		}
		/* Held at its exec until it is known to run the file attached to. */
		if (t->exec_check)
			c->skel->bss->exec_check_tgid = t->pid;
		ret = attach_switch_path(&c->attach, t);
		if (ret)
			return ret;
		/*
		 * Held at each dlopen until its objects are attached: a runtime's
		 * module switches microseconds after it is loaded, and a library's
		 * constructors fire its probes before dlopen returns.
		 */
		if (t->launched && !c->opts->follow)
			c->skel->bss->hold_tgid = t->pid;
		/* --follow: a second target of the same program finds its objects attached already. */
		if (!t->probe_sites && !t->switch_sites && c->ntargets > 1 && !c->opts->follow)
			log_warn("process %u (%s) carries no corobpf probes and no known switch "
				 "functions", t->pid, t->comm);
		sites += t->probe_sites + t->switch_sites;
	}
	if (!sites && via_script)
		return 0;
	if (!sites) {
		for (size_t i = 0; i < c->ntargets; i++) {
			if (!c->targets[i].launched && kill(c->targets[i].pid, 0) < 0 && errno == ESRCH) {
				log_err("process %u exited while corobpf attached to it",
					c->targets[i].pid);
				return EXIT_NO_PROCESS;
			}
		}
		if (c->attach.open_denied) {
			log_err("nothing attached: %u object%s the target%s map%s could not be "
				"opened (%s); tracing another user's process needs CAP_SYS_ADMIN, "
				"or CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: run corobpf as root",
				c->attach.open_denied, c->attach.open_denied == 1 ? "" : "s",
				c->ntargets == 1 ? "" : "s", c->ntargets == 1 ? "s" : "",
				strerror(c->attach.open_denied_errno));
			return EXIT_PRIVILEGE;
		}
		if (c->ustats[CORO_USTAT_ATTACH_FAIL] || c->ustats[CORO_USTAT_ATTACH_REFUSED]) {
			u64 n = c->ustats[CORO_USTAT_ATTACH_FAIL] +
				c->ustats[CORO_USTAT_ATTACH_REFUSED];

			log_err("nothing attached: %llu attach%s failed or refused (the warnings above "
				"say why)", (unsigned long long)n, n == 1 ? "" : "es");
			return EXIT_FAILURE_RUNTIME;
		}
		if (c->opts->follow) {
			log_info("no corobpf probes in the target%s yet: following %s children and "
				 "what they exec", c->ntargets == 1 ? "" : "s",
				 c->ntargets == 1 ? "its" : "their");
			return 0;
		}
		log_err("no corobpf probes%s in the target: searched %zu object%s%s",
			c->opts->switch_none ? "" : " and no known switch functions",
			c->attach.nsearched, c->attach.nsearched == 1 ? "" : "s",
			c->attach.nsearched ? ":" : "");
		for (size_t i = 0; i < c->attach.nsearched; i++) {
			char safe[TERM_SAFE_MAX(4096)];

			const char *p = c->attach.searched[i];

			fprintf(stderr, "    %s\n", term_safe(safe, sizeof(safe), p, strlen(p)));
		}
		fprintf(stderr, "  (instrument the scheduler with usdt/corobpf.h, see docs/probes.md; "
				"or name its switch function with --switch, see --switch help)\n");
		return EXIT_NO_PROBES;
	}
	log_verbose("attached %u probe sites in %zu process%s", sites, c->ntargets,
		    c->ntargets == 1 ? "" : "es");
	return 0;
}

int capture_attach(struct capture *c)
{
	int ret = attach_targets(c);

	/*
	 * The session starts now, every probe attached: a process taken on running is traced whole
	 * from now (records.h). The batched path reads no thread's buffer before, and leaves out
	 * what a buffer met in use holds from before (another session raised the semaphore); copying
	 * earlier, before its own batch probe was attached, a full buffer's trap could pass it by.
	 */
	if (!ret)
		c->ev.session_start = c->skel->bss->session_start_ts = now_boottime_ns();
	for (size_t i = 0; !ret && i < c->ntargets; i++)
		c->targets[i].traced_from = c->targets[i].launched ? 0 : c->ev.session_start;
	return ret;
}

/* ---- the run ---- */

static void release_child(struct capture *c)
{
	if (c->launch.release_fd >= 0) {
		if (write(c->launch.release_fd, "go", 1) != 1)
			log_warn("cannot release the launched command: %s", strerror(errno));
		close(c->launch.release_fd);
		c->launch.release_fd = -1;
	}
}

/*
 * When target pid ended: as the BPF side saw its last thread exit, not when its pidfd told us
 * (after the ring was drained: a coroutine running at the exit, as Go's runtime.main always is,
 * would run until then). Not older than REORDER_LIVE_FLOOR_NS before the newest
 * record given so far, so the exit record never arrives late (behind records the reorder buffer
 * has let go).
 */
static u64 target_exit_ts(struct capture *c, u32 pid)
{
	int fd = bpf_map__fd(c->skel->maps.target_exit_ts);
	u64 now = now_boottime_ns(), ts = 0, floor = 0;

	if (bpf_map_lookup_and_delete_elem(fd, &pid, &ts) || !ts || ts > now)
		return now;
	if (c->watch.newest_ts > REORDER_LIVE_FLOOR_NS)
		floor = c->watch.newest_ts - REORDER_LIVE_FLOOR_NS;
	return ts < floor ? floor : ts;
}

static void target_exited(struct capture *c, struct target *t)
{
	if (t->exited)
		return;
	t->exited = true;
	/*
	 * Everything it produced is in the ring by now: take it before saying
	 * it ended, and let go of its stacks' state while its pid cannot be
	 * reused yet (ours is not reaped until just below).
	 */
	ring_buffer__consume(c->rb);
	if (c->stk)
		stack_resolver_ended(c->stk, t->pid);
	if (t->launched) {
		int status;

		/* Reaped, its pid may be reused: no more forwarding to it. */
		capture_set_signal_child(-1);
		if (waitpid(t->pid, &status, WNOHANG) == (pid_t)t->pid) {
			t->wait_status = status;
			c->launch.child = -1;
		}
	}
	/* It ended in this image: the program, not a shell between (via_script). */
	ringev_emit_held(&c->ev, t, now_boottime_ns());
	liverec_proc_exit_at(c->sink, t->pid, t->wait_status, target_exit_ts(c, t->pid));
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
	close(t->pidfd);
	t->pidfd = -1;
}

/*
 * Continue a target held at a dlopen (bss hold_tgid) or an exec (exec_hold_tgid), through its
 * pidfd: a pid reaped and reused meanwhile is never signalled. An exited target has no pidfd and
 * nothing to continue.
 */
static void hold_release(const struct target *t, const char *where)
{
	if (t->pidfd >= 0 && syscall(SYS_pidfd_send_signal, t->pidfd, SIGCONT, NULL, 0) < 0 &&
	    errno != ESRCH)
		log_warn("cannot continue process %u held at %s: %s; `kill -CONT %u` does",
			 t->pid, where, strerror(errno), t->pid);
}

/*
 * The launched ELF command's first exec, its record read: held there
 * (exec_check_held), it runs if the file exec'd is the file examined and is
 * killed, before its first instruction, if not. False then: the capture ends.
 */
static bool launch_exec_check(struct capture *c, struct target *t)
{
	t->exec_check = false;
	if (c->skel->bss->exec_check_held != t->pid) {
		/* Its exec record was lost (a full ring): it was not held, nor can it be now. */
		log_warn("process %u (%s): its exec was not seen (events lost), so which file it "
			 "runs was not checked", t->pid, t->comm);
		return true;
	}
	c->skel->bss->exec_check_held = 0;
	if (attach_launch_exec_is_examined(t)) {
		hold_release(t, "its exec");
		return true;
	}
	if (syscall(SYS_pidfd_send_signal, t->pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		log_warn("cannot kill process %u: %s", t->pid, strerror(errno));
	return false;
}

/*
 * A command launched through a script, stopped at an exec (exec_hold_tgid):
 * its new image attached as an ELF launch is, before its first instruction,
 * and said in a new process record (the last one names the program that ran).
 */
static void script_image(struct capture *c, struct target *t)
{
	t->execed = false;
	t->rescan = false;
	c->skel->bss->hold_tgid = 0;
	if (attach_launch_image(&c->attach, t))
		log_warn("process %u: %s is traced without the switch functions named by --switch",
			 t->pid, t->exe);
	/* The program's start is this exec: the record comes after what the ring gave already. */
	t->start_ts = now_boottime_ns();
	liverec_process(c->sink, t);
	t->hold_switch_recs = true;
	emit_found(c);
	if (!c->opts->follow)
		c->skel->bss->hold_tgid = t->pid;
	hold_release(t, "its exec");
}

int capture_run(struct capture *c, const struct record_sink *sink)
{
	u64 start = now_boottime_ns(), next_stats = start + STATS_EVERY_NS;
	u64 duration_ns = (u64)(c->opts->duration * 1e9);
	u64 deadline = duration_ns ? start + duration_ns : 0;
	struct batch_tails *tails;
	u64 stop_ts, newest;
	int ret = 0;

	record_watch_init(&c->watch, sink);
	sink = &c->watch.sink;
	c->sink = sink;
	c->ev.sink = sink;
	c->ev.targets = c->targets;
	c->ev.ntargets = c->ntargets;
	c->ev.stk = c->stk;
	c->ev.announce = &c->announce;
	for (size_t i = 0; i < c->ntargets; i++) {
		liverec_process(sink, &c->targets[i]);
		/* Running ones now; a launched one at its exec (its image is not yet its own). */
		if (c->stk && !c->targets[i].launched)
			stack_resolver_snapshot(c->stk, c->targets[i].pid, c->targets[i].start_ts,
						sink->emit, sink->ctx);
	}
	/* What capture_attach attached, held until now: after the processes it belongs to. */
	emit_found(c);
	for (size_t i = 0; i < c->ntargets; i++)
		if (!c->targets[i].launched && !c->targets[i].via_script)
			offcpu_at_attach(c->skel, c->opts->no_sched, c->targets[i].pid);
		else
			announce_not_asked(&c->announce, c->targets[i].pid);
	/* What exists in each running target, from its scheduler (announce.h). */
	announce_request_all(&c->attach, now_boottime_ns());
	release_child(c);
	if (c->launch.launch_err_fd >= 0) {
		int e = 0;
		ssize_t n;

		/* --follow: the exec may wait at the exec gate, which waits for us meanwhile. */
		while (c->gate) {
			struct pollfd p[2] = {{.fd = c->launch.launch_err_fd, .events = POLLIN},
					      {.fd = execgate_wake_fd(c->gate), .events = POLLIN}};

			if (poll(p, 2, -1) < 0 && errno != EINTR)
				break;
			if (p[0].revents)
				break;
			if (p[1].revents) {
				execgate_serve(c->gate, gate_examine, c);
				emit_found(c);
			}
		}
		/* EOF: the exec closed the pipe; an errno: it failed. */
		while ((n = read(c->launch.launch_err_fd, &e, sizeof(e))) < 0 && errno == EINTR)
			;
		close(c->launch.launch_err_fd);
		c->launch.launch_err_fd = -1;
		if (n == sizeof(e)) {
			log_err("cannot execute %s: %s", c->targets[0].exe, strerror(e));
			c->end_reason = CORO_END_ERROR;
			ret = EXIT_LAUNCH;
			goto out;
		}
	}

	bool more = false; /* the last read of the ring left records in it */

	stopper_start(&c->stopper, deadline, &c->skel->bss->stopped);

	for (;;) {
		struct epoll_event evs[16];
		size_t alive = 0;
		u64 now, t0;
		int n;

		if (capture_stop_signal) {
			c->end_reason = CORO_END_SIGNAL;
			break;
		}
		n = epoll_wait(c->epfd, evs, ARRAY_SIZE(evs), more ? 0 : POLL_MS);
		if (n < 0 && errno != EINTR) {
			log_err("epoll_wait: %s", strerror(errno));
			c->end_reason = CORO_END_ERROR;
			ret = EXIT_FAILURE_RUNTIME;
			break;
		}
		/*
		 * Read the ring whatever woke us: submits do not wake us per event.
		 * A bounded read: what it left is read next time round, with no wait.
		 */
		c->ev.budget = RING_READ_BUDGET;
		t0 = now_boottime_ns();
		more = ring_buffer__consume(c->rb) == RINGEV_BUDGET_SPENT;
		c->read_ns += now_boottime_ns() - t0;
		c->ev.budget = 0;
		if (!more) {
			ringev_release_walks(&c->ev);
			record_sink_idle(sink);
		}
		if (stopper_fired(&c->stopper)) { /* -d or a signal: no record of ours after it */
			c->end_reason = capture_stop_signal ? CORO_END_SIGNAL : CORO_END_DURATION;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == GATE_EPOLL_TAG && c->gate) {
				/* Programs held at their exec: attached, then let go. */
				execgate_serve(c->gate, gate_examine, c);
				emit_found(c);
				continue;
			}
			if (evs[i].data.u64 != UINT64_MAX && evs[i].data.u64 < c->ntargets)
				target_exited(c, &c->targets[evs[i].data.u64]);
		}
		for (size_t i = 0; i < c->ntargets; i++) {
			struct target *t = &c->targets[i];

			if (t->execed && t->exec_check && !t->exited && !launch_exec_check(c, t)) {
				c->end_reason = CORO_END_ERROR;
				ret = EXIT_LAUNCH;
				goto out;
			}
			if (t->execed && t->via_script && !t->exited)
				script_image(c, t);
			if (t->rescan && !t->exited) {
				t->rescan = false;
				attach_scan_process(&c->attach, t, true);
				emit_found(c);
				if (c->skel->bss->hold_tgid == t->pid)
					hold_release(t, "its dlopen");
			}
			alive += !t->exited;
		}
		if (c->ev.rescan_pids.len) {
			size_t it = 0;
			u64 pid;
			void *v;

			while (hmap_next(&c->ev.rescan_pids, &it, &pid, NULL, &v)) {
				attach_scan_global(&c->attach, (u32)pid, true);
				attach_exec_ucontext(&c->attach, (u32)pid);
				emit_found(c);
				/* A traced process's new objects: the families it is traced through now. */
				if (c->opts->system_wide && hmap_get(&c->ev.announced, (u32)pid, 0))
					ringev_global_plans_for(&c->ev, (u32)pid, now_boottime_ns());
			}
			hmap_free(&c->ev.rescan_pids);
			hmap_init(&c->ev.rescan_pids);
		}
		/* -a runs until a signal or -d: programs may start at any time. */
		if (c->opts->system_wide)
			alive = 1;
		/* --follow: until the descendants have exited too. */
		if (c->opts->follow)
			alive += c->ev.announced.len;
		now = now_boottime_ns();
		if (now >= next_stats) {
			if (c->opts->follow)
				reap_followed(c);
			emit_stats(c);
			/* The sink says what it could not write. */
			if (sink->flush && sink->flush(sink->ctx) < 0) {
				c->end_reason = CORO_END_ERROR;
				ret = EXIT_OUTPUT;
				break;
			}
			next_stats = now + STATS_EVERY_NS;
		}
		announce_check(&c->attach, now, false);
		if (c->tick)
			c->tick(c->tick_ctx);
		if (!alive) {
			c->end_reason = CORO_END_TARGETS_EXITED;
			break;
		}
		if (deadline && now >= deadline) {
			c->end_reason = CORO_END_DURATION;
			break;
		}
	}
out:
	/*
	 * Silence the programs, let any still running finish (they take well
	 * under a microsecond), and take what the ring holds: that is all there
	 * will be. Detaching is slow and happens behind the outputs' work.
	 */
	stop_ts = stopper_end(&c->stopper);
	c->skel->bss->stopped = 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/*
	 * What live threads wrote since their last copy, read from their memory once the copies
	 * under way have finished (microseconds, preemption off), before the threads start again.
	 */
	if (batch_reads(c->skel))
		usleep(200);
	tails = batch_reads(c->skel) ? batch_tails_collect(c->skel, stop_ts) : NULL;
	stop_exec_gate(c);
	usleep(2000);
	ring_buffer__consume(c->rb);
	ringev_release_walks(&c->ev);
	if (batch_reads(c->skel)) {
		batch_tails_emit(&c->ev.batch, tails);
		batch_say_counters(bpf_map__fd(c->skel->maps.stats));
	}
	batch_check_elsewhere(c->skel, c->opts->probe_path, "at the end");
	batch_say_read_on_trap(&c->ev.batch, c->opts->probe_path, c->opts->stacks != 0);
	if (c->attach.may_hang_refused)
		log_warn("%u mapped object%s not opened, on a filesystem that may hang (FUSE, a "
			 "network filesystem), first %s: %s probes are not attached; to trace it, "
			 "copy it to a local filesystem", c->attach.may_hang_refused,
			 c->attach.may_hang_refused == 1 ? "" : "s", c->attach.may_hang_first,
			 c->attach.may_hang_refused == 1 ? "its" : "their");
	announce_check(&c->attach, now_boottime_ns(), true);
	for (size_t i = 0; i < c->ntargets && c->skel->bss->hold_tgid; i++) {
		/* A hold the loop did not get to release. */
		if (c->targets[i].pid == c->skel->bss->hold_tgid)
			hold_release(&c->targets[i], "its dlopen");
	}
	c->skel->bss->hold_tgid = 0;
	for (size_t i = 0; i < c->ntargets; i++)
		if (c->targets[i].hold_switch_recs)
			ringev_emit_held(&c->ev, &c->targets[i], now_boottime_ns());
	for (size_t i = 0; i < c->ntargets && c->skel->bss->exec_hold_tgid; i++) {
		/* An exec the loop did not get to. */
		if (c->targets[i].pid == c->skel->bss->exec_hold_tgid)
			hold_release(&c->targets[i], "its exec");
	}
	c->skel->bss->exec_hold_tgid = 0;
	for (size_t i = 0; i < c->ntargets; i++) {
		struct target *t = &c->targets[i];

		/* A first exec the loop did not get to: checked all the same. */
		if (t->execed && t->exec_check && !launch_exec_check(c, t) && !ret) {
			c->end_reason = CORO_END_ERROR;
			ret = EXIT_LAUNCH;
		}
	}
	c->skel->bss->exec_check_tgid = 0;
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct target *t = &c->targets[i];

		/* --follow: the program may be one of its children. */
		if (!t->via_script || t->probe_sites || c->ev.ctx_switches ||
		    c->end_reason == CORO_END_ERROR ||
		    (c->opts->follow && c->attach.global_sites))
			continue;
		if (!t->images)
			log_warn("the launched command never ran a program (no exec was seen)");
		else
			log_warn("the launched command's last program, %s, carries no corobpf probes%s%s",
				 t->exe, t->switch_mode ? " and made no context switch through the "
				 "switch functions corobpf knows" : " and no known switch functions",
				 c->opts->follow ? "" : " (a program the script starts without exec "
				 "is its child: add --follow)");
	}
	for (size_t i = 0; i < c->ntargets && !c->ev.ctx_switches && !c->opts->switch_forced; i++) {
		/* Said above, naming the program. */
		if (!c->targets[i].switch_mode || c->targets[i].probe_sites || c->targets[i].via_script)
			continue;
		/* Families attached, nothing seen: say what was looked for, and why it may be missing. */
		unseen_say(&c->unseen, c->targets[i].pid, c->targets[i].comm);
		break;
	}
	newest = c->watch.newest_ts;
	emit_stats(c);
	emit_end(c);
	/* When it stopped, on the trace's clock, and the reader's pace (flood tests, make bench). */
	log_verbose("capture ended (%s) at %llu ns CLOCK_BOOTTIME; its newest record at %llu ns",
		    coro_end_reason_name(c->end_reason), (unsigned long long)stop_ts,
		    (unsigned long long)newest);
	log_verbose("reader: %llu records in %.1f ms of reading the ring (%.1f M records/s)",
		    (unsigned long long)c->ev.ustats[CORO_USTAT_RECORDS], c->read_ns / 1e6,
		    c->read_ns ? c->ev.ustats[CORO_USTAT_RECORDS] * 1e3 / c->read_ns : 0.0);
	capture_detach_async(c);
	return ret;
}

static void *detach_links(void *arg)
{
	attach_ctx_detach(arg);
	return NULL;
}

void capture_detach_async(struct capture *c)
{
	if (c->detaching || (!c->attach.nlinks && !c->attach.nlink_fds))
		return;
	if (pthread_create(&c->detacher, NULL, detach_links, &c->attach) == 0) {
		c->detaching = true;
		return;
	}
	attach_ctx_detach(&c->attach);
}

int capture_wait_child(struct capture *c)
{
	struct target *t = c->ntargets ? &c->targets[0] : NULL;
	int status;

	if (!t || !t->launched)
		return 0;
	if (t->wait_status < 0 && c->launch.child > 0) {
		log_info("waiting for %s (pid %u) to exit; Ctrl-C again leaves it running",
			 t->comm, t->pid);
		/* A signal meanwhile was passed on to it; a second one quits in the handler. */
		while (waitpid(c->launch.child, &status, 0) < 0) {
			if (errno != EINTR)
				return EXIT_FAILURE_RUNTIME;
		}
		capture_set_signal_child(-1);
		t->wait_status = status;
		c->launch.child = -1;
	}
	status = t->wait_status;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_FAILURE_RUNTIME;
}

void capture_kill_child(struct capture *c)
{
	/* Launch aborted before the command ran: it is still our fork, waiting on the pipe. */
	if (c->launch.child > 0) {
		if (c->launch.release_fd >= 0) {
			close(c->launch.release_fd);
			c->launch.release_fd = -1;
		}
		capture_set_signal_child(-1);
		kill(c->launch.child, SIGKILL);
		waitpid(c->launch.child, NULL, 0);
		c->launch.child = -1;
	}
}

void capture_close(struct capture *c)
{
	stop_exec_gate(c);
	if (c->detaching) {
		pthread_join(c->detacher, NULL);
		c->detaching = false;
	}
	attach_ctx_detach(&c->attach);
	ring_buffer__free(c->rb);
	corobpf_bpf__destroy(c->skel);
	for (size_t i = 0; i < c->ntargets; i++) {
		if (c->targets[i].pidfd >= 0)
			close(c->targets[i].pidfd);
		attach_target_free(&c->targets[i]);
	}
	free(c->targets);
	usdt_free(&c->attach);
	attach_ctx_free(&c->attach);
	announce_free(&c->announce);
	cxxattach_free();
	interpattach_free();
	if (c->stk) {
		const struct stack_resolver_stats *st = stack_resolver_stats(c->stk);

		log_verbose("stacks: %llu distinct; %llu samples unwound (%llu frames), %llu answered "
			    "by an earlier unwind of the same context; at the end, state held for %llu "
			    "processes (%llu stacks and unwinds remembered)",
			    (unsigned long long)st->stacks, (unsigned long long)st->unwound,
			    (unsigned long long)st->unwind_frames, (unsigned long long)st->memo_hits,
			    (unsigned long long)st->procs, (unsigned long long)st->remembered);
	}
	stack_resolver_free(c->stk);
	c->stk = NULL;
	ringev_free(&c->ev);
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->launch.release_fd >= 0)
		close(c->launch.release_fd);
	if (c->launch.launch_err_fd >= 0)
		close(c->launch.launch_err_fd);
}
