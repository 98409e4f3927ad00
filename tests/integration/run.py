#!/usr/bin/env python3
"""Integration tests: real BPF on the real kernel, real scheduler programs.

Every test program records its own ground truth (COROBPF_TRUTH): the trace
must match it exactly. Needs root. Outside CI, tests skip with the reason
when BPF cannot be used; with CI=true that is a failure.

    python3 tests/integration/run.py            # all
    python3 tests/integration/run.py attach     # tests whose name contains "attach"
    KEEP=1 python3 tests/integration/run.py     # keep the work directory
"""
import os
import sys
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403


# ---- scenarios, launched ----

SCENARIOS = ["one_sleep", "concurrent20", "many_suspends", "chan_pc", "n_producers", "barrier",
             "yield", "mixed", "stress1000", "spawn_tree", "cancel", "error_exits", "names",
             "spans"]


def make_scenario_test(scen, binary="scenarios"):
    def t():
        trace, truth, p, out, raw = trace_launch(binary + "-" + scen,
                                                 [os.path.join(TESTS_BIN, binary), scen])
        check(truth, "the scenario wrote no ground truth")
        eq(len(trace.processes), 1, "processes")
        pid = trace.processes[0]["pid"]
        eq(trace.processes[0]["mode"], "launched", "mode")
        check_truth(trace, truth, pid)
        check_clean(trace)
        eq(trace.trailer["end_reason"], "targets_exited", "end_reason")
        check_replay(out, raw)
    t.__name__ = "%s_%s" % (binary.replace("-", "_"), scen)
    return t


for s in SCENARIOS:
    test(make_scenario_test(s))
# Probes in a shared library: the same runtime as libcorosched.so.
for s in ["yield", "chan_pc", "stress1000", "cancel", "spawn_tree", "spans"]:
    test(make_scenario_test(s, "scenarios-so"))


@test
def scenario_details_cancel_and_errors():
    """Statuses are the scheduler's: -ECANCELED for cancelled ones, the errors as returned."""
    trace, truth, *_ = trace_launch("details-cancel", [os.path.join(TESTS_BIN, "scenarios"), "cancel"])
    statuses = sorted({c["status"] for c in trace.coroutines})
    check(-125 in statuses, "no -ECANCELED (-125) status in %s" % statuses)
    trace, truth, *_ = trace_launch("details-errors", [os.path.join(TESTS_BIN, "scenarios"), "error_exits"])
    got = sorted(c["status"] for c in trace.coroutines)
    eq(got, sorted(t["status"] for t in truth), "statuses")
    for s in (-5, -22, -12):
        check(s in got, "status %d missing from %s" % (s, got))


@test
def scenario_details_spans():
    """Spans nest, survive migration between threads, and all close."""
    trace, truth, *_ = trace_launch("details-spans", [os.path.join(TESTS_BIN, "scenarios"), "spans"])
    begins, ends = trace.by_ev("span_begin"), trace.by_ev("span_end")
    check(len(begins) > 0, "no spans")
    eq(len(begins), len(ends), "span begin/end counts")
    check(all(e.get("matched", True) for e in ends), "an unmatched span_end")
    check(all(e["id"] not in (None, "0x0") for e in begins), "a span without its coroutine")
    check(max(e["depth"] for e in begins) >= 2, "no nested span")
    check(all("open_spans" not in c for c in trace.coroutines), "spans left open")


@test
def scenario_details_wakers_and_threads():
    """Channel wakeups name the waking coroutine; an M:N run uses several threads."""
    trace, truth, *_ = trace_launch("details-chan", [os.path.join(TESTS_BIN, "scenarios"), "chan_pc"])
    ids = {c["id"] for c in trace.coroutines}
    wakers = [e["waker"] for e in trace.by_ev("ready") if e["waker"] not in ("0x0", None)]
    check(wakers, "no ready event was woken by a coroutine")
    check(all(w in ids for w in wakers), "a waker that is not a coroutine of the trace")
    waits = [e for e in trace.by_ev("switch") if e["reason"] == "wait"]
    check(waits and all(e["obj"] != "0x0" for e in waits), "waits without their channel")
    # Twenty coroutines that sleep and yield spread over both workers, and migrate.
    trace, truth, *_ = trace_launch("details-m2n", [os.path.join(TESTS_BIN, "scenarios"), "concurrent20"])
    threads = {e["tid"] for e in trace.by_ev("switch")}
    check(len(threads) >= 2, "only %d worker thread(s) switched" % len(threads))
    check(any(len(c["threads"]) >= 2 for c in trace.coroutines), "no coroutine ran on two threads")


# ---- attach to a running process ----

@test
def attach_to_running_process():
    truth = work("attach.truth")
    target, pid = start_waiting("scenarios", "chan_pc", env={"COROBPF_TRUTH": truth})
    out, err = work("attach.jsonl"), work("attach.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-o", out, "-p", str(pid)], stderr=ef, stdout=ef)
        wait_for(err, "tracing")
        target.send_signal(signal.SIGUSR1)
        target.wait(timeout=60)
        rc = tr.wait(timeout=60)
    eq(rc, 0, "corobpf exit code")
    trace = Trace(out)
    eq(trace.processes[0]["mode"], "attached", "mode")
    eq(trace.header["pids"], [pid], "header pids")
    # Attached before the scheduler's work started: every coroutine is seen from its creation.
    check_truth(trace, read_truth(truth), pid)
    check_clean(trace)
    eq(trace.trailer["end_reason"], "targets_exited", "end_reason")


@test
def attach_mid_life_and_stop_by_duration():
    """Attach while coroutines live: they appear with created null; -d ends the trace."""
    target, pid = start_waiting("scenarios", "stress1000", extra=["--linger", "3000"])
    target.send_signal(signal.SIGUSR1)
    time.sleep(0.3)
    out = work("midlife.jsonl")
    p = corobpf(["-o", out, "-d", "1", "-p", str(pid)])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "duration", "end_reason")
    check(target.poll() is None, "the target did not survive tracing")
    target.kill()
    target.wait()
    check_clean(trace)


@test
def attach_two_processes_and_shared_library():
    procs, pids, truths = [], [], []
    for i, binary in enumerate(["scenarios", "scenarios-so"]):
        truths.append(work("two-%d.truth" % i))
        p, pid = start_waiting(binary, "yield", env={"COROBPF_TRUTH": truths[-1]})
        procs.append(p)
        pids.append(pid)
    out, err = work("two.jsonl"), work("two.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-o", out, "-p", str(pids[0]), "-p", str(pids[1])],
                              stderr=ef, stdout=ef)
        wait_for(err, "tracing")
        for p in procs:
            p.send_signal(signal.SIGUSR1)
        for p in procs:
            p.wait(timeout=60)
        rc = tr.wait(timeout=60)
    eq(rc, 0, "corobpf exit code")
    trace = Trace(out)
    eq(sorted(p["pid"] for p in trace.processes), sorted(pids), "processes")
    objects = [r for r in trace.records if r["type"] == "object"]
    check(any(o["path"].endswith("libcorosched.so") for o in objects),
          "no probes attached in libcorosched.so: %s" % [o["path"] for o in objects])
    for pid, truth in zip(pids, truths):
        check_truth(trace, read_truth(truth), pid)
    check_clean(trace)


# ---- the probe header, compiled every way ----

MATRIX = ["usdt_matrix_c_O0", "usdt_matrix_c_O2", "usdt_matrix_cxx_O0", "usdt_matrix_cxx_O2",
          "usdt_matrix_clang_O2", "usdt_matrix_so", "usdt_matrix_c_O2_nop5"]


def make_matrix_test(binary):
    def t():
        out = work(binary + ".jsonl")
        p = corobpf(["-o", out, "--", os.path.join(TESTS_BIN, binary), "3", "5"])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        expected = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        check(expected, "the program printed no expectations")
        trace = Trace(out)
        # The probes' events (the kernel's off-CPU stretches are not probes).
        events = [e for e in trace.events if e["ev"] != "offcpu"]
        eq(len(events), len(expected), "events (traced %s)" % [e["ev"] for e in events])
        reasons = ["unknown", "yield", "wait", "sleep", "io", "done"]
        for want, got in zip(expected, events):
            where = "%s %s (seq %d)" % (want["variant"], want["probe"], want["seq"])
            eq(got["ev"], want["probe"], where + " probe")
            for k, v in want.items():
                if k in ("seq", "variant", "probe"):
                    continue
                if k == "str":
                    k = "name"
                if k == "reason":
                    v = reasons[v]
                eq(got.get(k), v, where + " field " + k)
    t.__name__ = "usdt_" + binary
    return t


for b in MATRIX:
    test(make_matrix_test(b))


@test
def usdt_nop5_sites_keep_the_red_zone():
    """COROBPF_NOP5: sites the kernel may turn into a call; a leaf's red zone survives them."""
    kind = "five-byte nops"
    out = work("redzone.jsonl")
    untraced = run([os.path.join(TESTS_BIN, "redzone"), "1000"])
    eq(untraced.stdout, "redzone: 0 of 1000 clobbered\n", "untraced")
    p = corobpf(["-v", "-o", out, "--", os.path.join(TESTS_BIN, "redzone"), "20000"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    eq(p.stdout, "redzone: 0 of 20000 clobbered\n", "traced")
    check(kind in p.stderr, "corobpf does not say what the sites are:\n" + p.stderr)
    with open("/proc/kallsyms") as f:
        optimized = any(l.rstrip().endswith(" arch_uprobe_optimize") for l in f)
    check(("optimizes them" if optimized else "single-steps") in p.stderr,
          "the site note does not match the kernel (optimized: %s):\n%s" % (optimized, p.stderr))
    trace = Trace(out)
    check_clean(trace)
    eq(len(trace.coroutines), 20000, "coroutines")
    eq({c["end"] for c in trace.coroutines}, {"exit"}, "ends")


# ---- Perfetto at scale ----

@test
def perfetto_packed_lanes_at_scale():
    """5,000 coroutines with --coroutine-tracks 100: lanes bounded by concurrency, still valid."""
    out, pf = work("lanes.jsonl"), work("lanes.pftrace")
    p = corobpf(["-o", out, "-o", pf, "--coroutine-tracks", "100", "--",
                 os.path.join(TESTS_BIN, "scenarios"), "stress1000"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    t = perfetto_check.check(pf, out)
    coro_tracks = [u for u in t.tracks if u & 15 == 6]
    lanes = [u for u in t.tracks if u & 15 == 7]
    eq(len(coro_tracks), 100, "per-coroutine tracks")
    peak = Trace(out).trailer["peak_live"]
    check(0 < len(lanes) <= peak, "%d lanes for a peak of %d live coroutines" % (len(lanes), peak))


@test
def string_arguments():
    """Stack buffers (stores the compiler could drop), a far literal, NULL."""
    trace, _, p, out, raw = trace_launch("strings", [os.path.join(TESTS_BIN, "strings")])
    names = {e["id"]: e for e in trace.by_ev("name")}
    eq(names["0x51"]["name"], "bytes", "name built byte by byte")
    eq(names["0x52"]["name"], "fmt-42", "name from snprintf")
    eq(names["0x53"]["name"], "far-literal", "a literal in an untouched page")
    eq(names["0x54"]["name"], "", "NULL name")
    check(names["0x54"].get("unreadable"), "NULL name not flagged unreadable")
    eq(trace.trailer["lost"]["string_faults"], 1, "string faults")
    eq([e["name"] for e in trace.by_ev("span_begin")], ["stack-span"], "span from a stack buffer")
    check("could not be read" in p.stderr, "the summary does not count it:\n" + p.stderr)


# ---- findings: one bug per program, found once, on the right coroutine ----

BUGS = {"lost_wakeup": "lost_wakeup", "stall": "stall", "long_run": "long_run",
        "sched_latency": "sched_latency", "unclosed_span": "unmatched_span",
        "spawn_storm": "spawn_storm", "blocking": "blocking"}


def make_bug_test(prog_arg, kind):
    def t():
        out, pf, raw = work("bug-%s.jsonl" % prog_arg), work("bug-%s.pftrace" % prog_arg), \
            work("bug-%s.raw" % prog_arg)
        # A busy machine keeps runnable coroutines waiting: only the test of that finding
        # keeps its threshold, the others cannot see it whatever the load.
        quiet = [] if kind == "sched_latency" else ["--sched-latency", "600000"]
        p = corobpf(["-o", out, "-o", pf, "--raw", raw] + quiet +
                    ["--", os.path.join(TESTS_BIN, "bugs"), prog_arg])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        bugs = [l.split()[1:] for l in p.stdout.splitlines() if l.startswith("BUG ")]
        eq(len(bugs), 1, "bugs announced")
        trace = Trace(out)
        found = [(f["kind"], f["id"]) for f in trace.records if f["type"] == "finding"]
        eq(found, [(bugs[0][0], bugs[0][1])], "findings (kind, coroutine)")
        eq(bugs[0][0], kind, "kind")
        counts = {k: v for k, v in trace.trailer["findings"].items() if v}
        eq(counts, {kind: 1}, "trailer findings")
        check("findings (1)" in p.stderr and kind in p.stderr, "summary:\n" + p.stderr)
        t2 = perfetto_check.check(pf, out)
        marks = [n for ts, i, track, ev, n in t2.events if track & 15 == 9]
        eq(len(marks), 1, "instants on the Findings track")
        check(marks[0].startswith(kind + ": "), "Findings track instant %r" % marks[0])
        check_replay(out, raw, quiet)
        # The same analysis from the recording: the raw capture, and the JSONL read back.
        for src in (raw, out):
            r = corobpf(["report", "--json", src] + quiet)
            eq(r.returncode, 0, "report --json %s (%s)" % (src, r.stderr.strip()))
            doc = json.loads(r.stdout)
            eq([(f["kind"], f["id"], f["dur"]) for f in doc["findings"]],
               [(f["kind"], f["id"], f["dur"]) for f in trace.records if f["type"] == "finding"],
               "findings of report --json %s" % os.path.basename(src))
    t.__name__ = "finding_" + kind
    return t


for arg, kind in BUGS.items():
    test(make_bug_test(arg, kind))


@test
def report_prints_the_analysis():
    raw = work("rep.raw")
    p = corobpf(["--raw", raw, "-q", "--", os.path.join(BUILD, "demo"), "-d", "1"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    r = corobpf(["report", raw])
    eq(r.returncode, 0, "report exit code")
    for text in ("corobpf summary:", "by kind of coroutine", "req ", "db-worker",
                 "scheduling latency (ready to running), pid", "run slices"):
        check(text in r.stdout, "report output lacks %r:\n%s" % (text, r.stdout))
    doc = json.loads(corobpf(["report", "--json", raw]).stdout)
    kinds = {k["kind"]: k for k in doc["by_kind"]}
    eq(kinds["req"]["coroutines"], 200, "req coroutines in one second at 200/s")
    check(doc["processes"] and doc["processes"][0]["sched_latency"], "no latency histogram")


@test
def finding_nothing_in_the_control():
    out = work("bug-control.jsonl")
    p = corobpf(["-o", out, "--", os.path.join(TESTS_BIN, "bugs"), "control"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    eq([f for f in trace.records if f["type"] == "finding"], [], "findings")
    check("no findings" in p.stderr, p.stderr)
    # The thresholds are the user's: with a 100 ms stall the control's 200 ms sleep is one.
    p = corobpf(["-o", work("bug-control2.jsonl"), "--stall", "0.1", "--",
                 os.path.join(TESTS_BIN, "bugs"), "control"])
    eq(p.returncode, 0, "exit code")
    kinds = [f["kind"] for f in Trace(work("bug-control2.jsonl")).records if f["type"] == "finding"]
    check("stall" in kinds, "no stall with --stall 0.1: %s" % kinds)


# ---- the kernel's view under the coroutines ----

BPFTRACE_OFFCPU = r"""
tracepoint:sched:sched_switch /args->prev_comm == "bugs"/ { @off[args->prev_pid] = nsecs; }
tracepoint:sched:sched_switch /args->next_comm == "bugs" && @off[args->next_pid]/ {
  @max[args->next_pid] = max(nsecs - @off[args->next_pid]); delete(@off[args->next_pid]); }
"""


@test
def offcpu_blocking_against_bpftrace_and_the_program():
    """usleep(200 ms) inside a coroutine: one off-CPU stretch of about that, on that
    coroutine only; bpftrace, watching sched_switch on its own, sees the same stretch."""
    if not shutil.which("bpftrace"):
        raise Failure("bpftrace (Debian package) is needed as the independent view")
    # bpftrace reads tracepoint formats from tracefs (corobpf itself does not need it).
    if not os.path.exists("/sys/kernel/tracing/events/sched"):
        run(["mount", "-t", "tracefs", "none", "/sys/kernel/tracing"])
    bt = subprocess.Popen(["bpftrace", "-e", BPFTRACE_OFFCPU], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        line = bt.stdout.readline()
        check("Attaching" in line, "bpftrace did not start: %r %s"
              % (line, bt.stderr.read() if bt.poll() is not None else ""))
        out = work("offcpu.jsonl")
        p = corobpf(["-o", out, "--", os.path.join(TESTS_BIN, "bugs"), "blocking"])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    finally:
        bt.send_signal(signal.SIGINT)
        bt_out, _ = bt.communicate(timeout=60)
    slept = int([l.split()[1] for l in p.stdout.splitlines() if l.startswith("SLEPT")][0])
    blocker = [l.split()[2] for l in p.stdout.splitlines() if l.startswith("BUG")][0]
    trace = Trace(out)
    off = [e for e in trace.by_ev("offcpu") if e["id"] not in (None, "0x0")]
    long_ = [e for e in off if e["dur"] > 50 * 1000000]
    eq([(e["id"], e["state"]) for e in long_], [(blocker, "sleeping")], "long off-CPU stretches of coroutines")
    e = long_[0]
    check(abs(e["dur"] - slept) < 2 * 1000000, "off-CPU %d ns, the program slept %d ns" % (e["dur"], slept))
    # bpftrace's view of the same thread.
    seen = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@max\[(\d+)\]: (\d+)", bt_out)}
    check(e["tid"] in seen, "bpftrace saw no off-CPU stretch for thread %d: %s" % (e["tid"], bt_out[-400:]))
    check(abs(seen[e["tid"]] - e["dur"]) < 1000000,
          "bpftrace: %d ns off-CPU, corobpf: %d ns" % (seen[e["tid"]], e["dur"]))
    c = [c for c in trace.coroutines if c["id"] == blocker][0]
    check(c["blocked_ns"] >= e["dur"] - e["runq"], "blocked_ns %d" % c["blocked_ns"])
    check(c["running_ns"] >= c["offcpu_ns"] >= e["dur"], "running %d, off-CPU %d" % (c["running_ns"], c["offcpu_ns"]))


@test
def offcpu_oversubscribed_is_runqueue_not_blocking():
    out = work("oversub.jsonl")
    p = corobpf(["-o", out, "--", os.path.join(TESTS_BIN, "bugs"), "oversubscribed"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    kinds = {f["kind"] for f in trace.records if f["type"] == "finding"}
    check("blocking" not in kinds, "blocking found on CPU-bound coroutines: %s" % kinds)
    crunchers = [c for c in trace.coroutines if c["name"] == "cpu-bound"]
    eq(len(crunchers), 6, "crunchers")
    # Six CPU-bound workers on %d CPUs: they wait on run queues while "running".
    check(sum(c["runq_ns"] for c in crunchers) > 100 * 1000000,
          "run-queue time %d ns" % sum(c["runq_ns"] for c in crunchers))
    check(all(c["blocked_ns"] < 5 * 1000000 for c in crunchers),
          "blocked: %s" % [c["blocked_ns"] for c in crunchers])
    states = {e["state"] for e in trace.by_ev("offcpu") if e["id"] not in (None, "0x0")}
    check("preempted" in states, "off-CPU states of the crunchers: %s" % states)


# ---- system-wide ----

@test
def all_mode_finds_programs_started_later_and_after_exec():
    """-a before two programs: one launched later, one reached through exec; both traced
    with their pids, their coroutines exactly as they count them, their exits closed."""
    out, pf, err = work("all.jsonl"), work("all.pftrace"), work("all.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out, "-o", pf], stderr=ef, stdout=ef)
    procs = []
    try:
        wait_for(err, "tracing every")
        t1, t2 = work("all1.truth"), work("all2.truth")
        p1, pid1 = start_waiting("scenarios", "yield", env={"COROBPF_TRUTH": t1})
        # The second through exec: a shell that becomes the program (same pid).
        p2 = subprocess.Popen(["/bin/sh", "-c", 'exec "$0" --wait chan_pc',
                               os.path.join(TESTS_BIN, "scenarios-so")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, COROBPF_TRUTH=t2))
        line = p2.stdout.readline().split()
        check(line and line[0] == "READY", "scenarios-so did not start: %r" % line)
        pid2 = int(line[1])
        procs = [p1, p2]
        # Their objects are attached when corobpf sees the exec (or already were).
        wait_for(err, "/scenarios (loaded after start)")
        wait_for(err, "/libcorosched.so (loaded after start)")
        for p in procs:
            p.send_signal(signal.SIGUSR1)
        for p in procs:
            p.wait(timeout=60)
        time.sleep(0.3)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
    trace = Trace(out)
    pids = {p["pid"] for p in trace.processes}
    check({pid1, pid2} <= pids, "processes %s, want %s" % (pids, {pid1, pid2}))
    for pid, truth in ((pid1, t1), (pid2, t2)):
        check_truth(trace, read_truth(truth), pid)
    exits = {r["pid"] for r in trace.records if r["type"] == "process_exit"}
    check({pid1, pid2} <= exits, "process exits %s" % exits)
    execs = [r for r in trace.records if r["type"] == "exec"]
    check(any(r["pid"] == pid2 for r in execs), "the exec of %d is not recorded" % pid2)
    check(all(c["end"] == "exit" for c in trace.coroutines if c["pid"] in (pid1, pid2)),
          "a coroutine left open")
    perfetto_check.check(pf, out)


# ---- SQLite and CSV ----

@test
def sqlite_matches_jsonl_and_documented_queries_run():
    out, db, cs, raw = work("sq.jsonl"), work("sq.db"), work("sq.csv"), work("sq.raw")
    p = corobpf(["--stacks", "-o", out, "-o", db, "-o", cs, "--raw", raw, "--",
                 os.path.join(BUILD, "demo"), "-d", "1"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    con = sqlite3.connect(db)
    one_ = lambda q, *a: con.execute(q, a).fetchone()[0]
    eq(one_("SELECT value FROM meta WHERE key = 'schema_version'"), 1, "schema_version")
    eq(one_("SELECT count(*) FROM coroutines"), len(trace.coroutines), "coroutines rows")
    eq(one_("SELECT count(*) FROM events"), len([e for e in trace.events if e["ev"] != "offcpu"]),
       "events rows")
    eq(one_("SELECT count(*) FROM offcpu"), len(trace.by_ev("offcpu")), "offcpu rows")
    eq(one_("SELECT count(*) FROM findings"),
       sum(1 for r in trace.records if r["type"] == "finding"), "findings rows")
    eq(one_("SELECT count(*) FROM processes"), 1, "processes rows")
    eq(one_("SELECT value FROM meta WHERE key = 'events'"), trace.trailer["events"], "meta events")
    # Per coroutine, the slices add up to its life, as the JSONL's state times do.
    for c in trace.coroutines[:50]:
        total = one_("SELECT coalesce(sum(dur_ns), 0) FROM slices WHERE uid = ?", c["uid"])
        eq(total, c["ended"] - c["first_seen"], "slices of uid %d" % c["uid"])
        eq(one_("SELECT switch_ins FROM coroutines WHERE uid = ?", c["uid"]), c["switch_ins"],
           "switch_ins of uid %d" % c["uid"])
    # Every documented query runs and returns rows.
    with open(os.path.join(ROOT, "docs", "sqlite.md")) as f:
        queries = re.findall(r"```sql\n(.*?)```", f.read(), re.S)
    check(len(queries) >= 6, "docs/sqlite.md has %d queries" % len(queries))
    for q in queries[:-1]:   # the last lists findings: the demo may have none
        check(con.execute(q).fetchall(), "no rows from documented query:\n" + q)
    # The spawn tree: exactly the acceptor's descendants, from the JSONL's parent links.
    by_parent = {}
    for c in trace.coroutines:
        by_parent.setdefault(c["parent_uid"], []).append(c["uid"])
    root = [c["uid"] for c in trace.coroutines if c["name"] == "acceptor"][0]
    want, todo = 0, [root]
    while todo:
        u = todo.pop()
        want += 1
        todo.extend(by_parent.get(u, []))
    tree = queries[0].replace("LIMIT 20", "")
    eq(len(con.execute(tree).fetchall()), want, "spawn tree rows")
    with open(cs, newline="") as f:
        rows = list(csv.DictReader(f))
    eq(len(rows), len(trace.coroutines), "CSV rows")
    eq({r["name"] for r in rows}, {c["name"] for c in trace.coroutines}, "CSV names")
    check_replay(out, raw)


@test
def sqlite_hostile_names_are_bound_not_pasted():
    out, db = work("sqn.jsonl"), work("sqn.db")
    p = corobpf(["-o", out, "-o", db, "--", os.path.join(TESTS_BIN, "scenarios"), "names"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    con = sqlite3.connect(db)
    got = {r[0]: r[1] for r in con.execute("SELECT uid, name FROM coroutines")}
    for c in trace.coroutines:
        eq(got[c["uid"]], c["name"], "name of uid %d" % c["uid"])


# ---- before main, after dlopen ----

@test
def launch_sees_probes_before_main():
    """Constructors in the executable and in a linked library run before main: all traced."""
    trace, _, p, out, raw = trace_launch("early", [os.path.join(TESTS_BIN, "early")])
    eq(sorted(e["id"] for e in trace.by_ev("create")), ["0xe1", "0xe2", "0xe3", "0xe4"], "creates")
    names = {c["id"]: c["name"] for c in trace.coroutines}
    eq(names.get("0xe1"), "lib-ctor", "name from the library constructor")
    paths = [r["path"] for r in trace.records if r["type"] == "object"]
    check(any(p.endswith("/libearly.so") for p in paths), "libearly.so not attached: %s" % paths)
    check(not any(r.get("late") for r in trace.records if r["type"] == "object"), "a late object")
    check_clean(trace)


@test
def dlopen_is_picked_up():
    """A library dlopened later is attached when ld.so announces it, and marked late."""
    trace, _, p, out, raw = trace_launch("dlopen", [os.path.join(TESTS_BIN, "early"), "dlopen", "300"])
    objects = [r for r in trace.records if r["type"] == "object"]
    dl = [o for o in objects if o["path"].endswith("/libdlprobe.so")]
    eq(len(dl), 1, "libdlprobe.so objects")
    check(dl[0].get("late"), "libdlprobe.so not marked late")
    eq(dl[0]["probes"], 4, "probe sites in libdlprobe.so")
    creates = [e["id"] for e in trace.by_ev("create")]
    check("0xd2" in creates, "the probe fired 300 ms after dlopen is missing: %s" % creates)
    eq(trace.trailer["lost"]["late_attach"], 1, "late_attach")
    check("attached after they were loaded" in p.stderr, "the summary does not warn:\n" + p.stderr)
    check_replay(out, raw)


# ---- overload: every lost event is counted ----

@test
def overload_every_lost_event_is_counted():
    """Attach and stop the reader; the target floods the ring (phase 1); resume the reader;
    the target runs again on the same threads (phase 2), whose first events carry the holes.
    Traced + lost equals exactly what the program fired, and every hole is accounted for."""
    out, raw, pf = work("overload.jsonl"), work("overload.raw"), work("overload.pftrace")
    target = subprocess.Popen([os.path.join(BUILD, "demo"), "--pingpong", "10000", "--wait",
                               "--again"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = target.stdout.readline().split()
    check(line and line[0] == "READY", "the demo did not announce itself: %r" % line)
    tr, ef, err = start_tracer(["-o", out, "-o", pf, "--raw", raw, "--ring-size", "1",
                                "--no-sched", "-p", line[1]], "overload")
    wait_for(err, "tracing")
    tr.send_signal(signal.SIGSTOP)
    target.send_signal(signal.SIGUSR1)
    first = target.stdout.readline()             # phase 1 ran while the reader was stopped
    check(first.startswith("pingpong:"), "phase 1: %r" % first)
    tr.send_signal(signal.SIGCONT)
    time.sleep(0.5)                              # the reader drains the ring
    target.send_signal(signal.SIGUSR1)
    stdout, _ = target.communicate(timeout=120)
    eq(tr.wait(timeout=60), 0, "exit code")
    ef.close()
    with open(err) as f:
        stderr = f.read()
    fields = dict(kv.split("=") for kv in stdout.split()[1:])   # cumulative over both phases
    fired = int(fields["created"]) * 2 + int(fields["readies"]) + int(fields["switches"]) \
        + int(fields["exits"])
    trace = Trace(out)
    t = trace.trailer
    lost = t["lost"]["events"]
    check(int(fields["switches"]) > 2 * 16384, "the workload cannot overflow a 1 MiB ring")
    check(lost > 0, "nothing was lost")
    eq(sum(t["events_by_kind"].values()) + lost, fired, "traced + lost vs fired")
    lost_records = [r for r in trace.records if r["type"] == "lost"]
    eq(t["lost"]["attributed"], sum(r["count"] for r in lost_records), "attributed")
    check(t["lost"]["attributed"] > 0, "no hole was pinned to a thread")
    eq(t["lost"]["attributed"] + t["lost"]["unattributed"], lost, "attributed + unattributed")
    check(any(c.get("uncertain") for c in trace.coroutines), "no coroutine marked uncertain")
    check("events were lost" in stderr, "the summary does not say so:\n" + stderr)
    # Perfetto: still well formed, and the holes marked where the UI counts data loss.
    t = perfetto_check.check(pf, out)
    dropped = sum(1 for p in t.packets if perfetto_check.one(p, "previous_packet_dropped"))
    eq(dropped, len(lost_records), "packets marked previous_packet_dropped")
    check_replay(out, raw)


# ---- signals ----

@test
def sigint_finishes_outputs_and_leaves_target_running():
    target, pid = start_waiting("scenarios", "yield", extra=["--linger", "4000"])
    target.send_signal(signal.SIGUSR1)
    out = work("sigint.jsonl")
    tr, ef, err = start_tracer(["-o", out, "-p", str(pid)], "sigint")
    wait_for(err, "tracing")
    time.sleep(0.2)
    tr.send_signal(signal.SIGINT)
    eq(tr.wait(timeout=30), 0, "exit code")
    ef.close()
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "signal", "end_reason")
    check(target.poll() is None, "the target died with the tracer")
    target.kill()
    target.wait()
    check(not [f for f in os.listdir(WORK) if ".tmp-" in f], "temporary files left")


@test
def sigterm_is_passed_to_the_launched_command():
    out = work("sigterm.jsonl")
    tr, ef, err = start_tracer(["-o", out, "--", os.path.join(TESTS_BIN, "scenarios"),
                                "--linger", "20000", "yield"], "sigterm")
    wait_for(err, "tracing")
    time.sleep(0.3)
    tr.send_signal(signal.SIGTERM)
    eq(tr.wait(timeout=30), 128 + signal.SIGTERM, "exit code: the command's, killed by SIGTERM")
    ef.close()
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "signal", "end_reason")


@test
def double_ctrl_c_never_leaves_a_partial_file():
    for i in range(3):
        target, pid = start_waiting("scenarios", "stress1000", extra=["--linger", "4000"])
        target.send_signal(signal.SIGUSR1)
        out = work("double%d.jsonl" % i)
        tr, ef, err = start_tracer(["-o", out, "-p", str(pid)], "double%d" % i)
        wait_for(err, "tracing")
        time.sleep(0.1 * i)
        tr.send_signal(signal.SIGINT)
        tr.send_signal(signal.SIGINT)
        rc = tr.wait(timeout=30)
        ef.close()
        check(rc in (0, 128 + signal.SIGINT), "exit code %d" % rc)
        if os.path.exists(out):
            Trace(out)  # whole: a header and a trailer
        check(not [f for f in os.listdir(WORK) if ".tmp-" in f], "temporary files left")
        check(target.poll() is None, "the target died")
        target.kill()
        target.wait()


# ---- faults: in the target, in corobpf, on the disk ----

@test
def fault_ten_thousand_threads():
    """10,000 threads come and go, each running one coroutine: every one is seen, on its own thread."""
    out = work("threads.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "threads", "10000"], timeout=300)
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    check("DONE threads 10000" in p.stdout, "the target did not finish: %r" % p.stdout)
    trace = Trace(out)
    check_clean(trace)
    pid = trace.processes[0]["pid"]
    eq(len(trace.coroutines), 10000, "coroutines")
    tids = set()
    for c in trace.coroutines:
        i = int(c["id"], 16) - 0x10000000
        check(0 <= i < 10000, "unexpected coroutine %s" % c["id"])
        where = "coroutine %s" % c["id"]
        eq((c["name"], c["end"], c["status"], c["switch_ins"]), ("t%d" % i, "exit", 0, 1), where)
        eq(len(c["threads"]), 1, where + " threads")
        tids.add(c["threads"][0])
    eq(len(tids), 10000, "distinct threads the coroutines ran on")
    check(pid not in tids, "a coroutine ran on the main thread")
    known = {r["tid"] for r in trace.records if r["type"] == "thread"}
    check(tids <= known, "%d threads with events have no thread record" % len(tids - known))


@test
def fault_fork_child_is_not_traced_without_follow():
    out = work("fork.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "fork"])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    m = re.search(r"CHILD (\d+) STATUS (-?\d+)", p.stdout)
    check(m, "the target did not report its child: %r" % p.stdout)
    # The child inherits the parent's probe sites (int3 in copied pages): it must run unharmed.
    eq(int(m.group(2)), 7, "the child's exit status")
    child = int(m.group(1))
    trace = Trace(out)
    check_clean(trace)
    eq([r["pid"] for r in trace.processes], [trace.header["pids"][0]], "processes traced")
    check(not [r for r in trace.records if r.get("pid") == child], "records of the child")
    eq(faults_ids(trace, trace.header["pids"][0]), ["0x100", "0x101", "0x102"], "coroutines")


@test
def fault_target_crashes():
    """The target dies of SIGSEGV mid-wait: its coroutines end there, the summary says so."""
    out = work("crash.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "crash"])
    eq(p.returncode, 128 + signal.SIGSEGV, "corobpf exit code: the command's (%s)" % p.stderr)
    check("DONE crash 2" in p.stdout, "the target's output: %r" % p.stdout)
    trace = Trace(out)
    check_clean(trace)
    pid = trace.header["pids"][0]
    exits = [r for r in trace.records if r["type"] == "process_exit"]
    eq([(r["pid"], r.get("signal")) for r in exits], [(pid, signal.SIGSEGV)], "process_exit")
    by_id = {c["id"]: c for c in trace.coroutines}
    eq((by_id["0x300"]["end"], by_id["0x300"]["status"]), ("exit", 0), "0x300")
    c = by_id["0x301"]
    eq((c["end"], c["state_at_end"], c["reason_at_end"], c["ended"]),
       ("process_exit", "suspended", "wait", exits[0]["ts"]), "0x301 at the crash")
    eq(trace.trailer["end_reason"], "targets_exited", "end_reason")
    check("process %d (faults) was killed by SIGSEGV (signal 11)" % pid in p.stderr,
          "the summary does not name the crash:\n" + p.stderr)


@test
def fault_sigkill_of_corobpf():
    """corobpf killed outright: the target goes on unharmed; the raw capture reads back to where it stopped."""
    target = subprocess.Popen([FAULTS, "--wait", "linger", "1500"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    pid = int(target.stdout.readline().split()[1])
    raw, out = work("killed.raw"), work("killed.jsonl")
    tr, ef, err = start_tracer(["--raw", raw, "-o", out, "-p", str(pid)], "killed")
    wait_for(err, "tracing")
    target.send_signal(signal.SIGUSR1)
    eq(target.stdout.readline().strip(), "RAN 0x500", "the target's first step")
    time.sleep(1.2)  # the raw capture is written out every second
    tr.kill()
    tr.wait()
    ef.close()
    # Its probes went with corobpf: the rest of the target runs as if never traced.
    rest, _ = target.communicate(timeout=30)
    eq((rest, target.returncode), ("DONE linger 2\n", 0), "the target after corobpf's death")
    check(not os.path.exists(raw) and not os.path.exists(out), "a file under a requested name")
    left = sorted(f for f in os.listdir(WORK) if f.startswith("killed.raw.tmp-"))
    eq(len(left), 1, "raw capture left under its temporary name (%s)" % os.listdir(WORK))
    back = work("killed-back.jsonl")
    p = corobpf(["report", work(left[0]), "-o", back])
    eq(p.returncode, 8, "report of a cut capture: exit code (%s)" % p.stderr)
    check("ends without its end record" in p.stderr, "report does not say where it stops: "
          + p.stderr)
    trace = Trace(back)
    eq([c["id"] for c in trace.coroutines], ["0x500"], "coroutines read back")
    eq(trace.coroutines[0]["end"], "exit", "0x500 end")


@test
def fault_disk_full():
    """The raw capture's disk fills: corobpf says so and exits 7; the other outputs and the target are whole."""
    tiny = work("tiny")
    os.mkdir(tiny)
    r = run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny])
    eq(r.returncode, 0, "mount a 1 MiB tmpfs: " + r.stderr)
    try:
        raw, out = os.path.join(tiny, "full.raw"), work("full.jsonl")
        p = corobpf(["--raw", raw, "-o", out, "--", FAULTS, "burst", "20000"])
        eq(p.returncode, 7, "corobpf exit code (%s)" % p.stderr)
        check("DONE burst 20000" in p.stdout, "the target's output: %r" % p.stdout)
        check("writing %s failed (No space left on device)" % raw in p.stderr,
              "no clear error: " + p.stderr)
        trace = Trace(out)
        check_clean(trace)
        eq(len(trace.coroutines), 20000, "coroutines in the JSONL")
        back = work("full-back.jsonl")
        p = corobpf(["report", raw, "-o", back])
        eq(p.returncode, 8, "report of the cut capture: exit code (%s)" % p.stderr)
        check("ends without its end record" in p.stderr, "where it stops: " + p.stderr)
        # Whole blocks up to the full disk: a prefix of the coroutines, each complete.
        got = Trace(back).coroutines
        check(len(got) > 1000, "only %d coroutines read back from a 1 MiB capture" % len(got))
        eq([c["id"] for c in got], ["0x%x" % (0x400 + i) for i in range(len(got))],
           "a prefix of the coroutines")
        check(all(c["end"] == "exit" for c in got[:-1]), "coroutines cut short before the end")
    finally:
        run(["umount", tiny])


@test
def fault_pid_reused_after_the_target_exits():
    """A traced process exits and a new one gets its pid while corobpf runs: the newcomer is not traced."""
    a = subprocess.Popen([FAULTS, "--wait", "burst", "3"], stdout=subprocess.PIPE, text=True)
    apid = int(a.stdout.readline().split()[1])
    b = subprocess.Popen([FAULTS, "--wait", "linger", "2500"], stdout=subprocess.PIPE, text=True)
    bpid = int(b.stdout.readline().split()[1])
    out = work("reuse.jsonl")
    tr, ef, err = start_tracer(["-o", out, "-p", str(apid), "-p", str(bpid)], "reuse")
    wait_for(err, "tracing")
    a.send_signal(signal.SIGUSR1)
    eq(a.communicate(timeout=30)[0].split("\n")[0], "DONE burst 3", "first incarnation")
    b.send_signal(signal.SIGUSR1)
    eq(b.stdout.readline().strip(), "RAN 0x500", "B's first step")
    # A new program with apid (clone3's set_tid: exactly that pid, whatever else starts).
    again = subprocess.Popen([FAULTS, "--as-pid", str(apid), FAULTS, "linger", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, why = again.communicate(timeout=30)
    eq(again.returncode, 0, "the program run as pid %d (%s)" % (apid, why.strip()))
    eq(got, "RAN 0x500\nDONE linger 2\n", "second incarnation")
    b.communicate(timeout=30)
    eq(tr.wait(timeout=30), 0, "corobpf exit code")
    ef.close()
    trace = Trace(out)
    check_clean(trace)
    eq(faults_ids(trace, apid), ["0x400", "0x401", "0x402"], "coroutines of pid %d" % apid)
    eq(faults_ids(trace, bpid), ["0x500", "0x501"], "coroutines of B (traced on)")
    eq(sorted(r["pid"] for r in trace.processes), sorted([apid, bpid]), "process records")
    eq(sorted(r["pid"] for r in trace.records if r["type"] == "process_exit"),
       sorted([apid, bpid]), "process_exit records")
    check(not [r for r in trace.records if r["type"] == "exec"], "an exec was recorded")

@test
def follow_forked_children():
    """--follow: the child a target forks is traced from the fork, its exit status kept."""
    trace, _, p, out, raw = trace_launch("follow", [FAULTS, "fork"], extra=["--follow"])
    m = re.search(r"CHILD (\d+) STATUS 7", p.stdout)
    check(m, "the target's output: %r" % p.stdout)
    parent, child = trace.header["pids"][0], int(m.group(1))
    check_clean(trace)
    procs = {r["pid"]: r for r in trace.processes}
    eq(sorted(procs), sorted([parent, child]), "processes")
    eq((procs[child]["mode"], procs[child]["ppid"], procs[child]["exe"]),
       ("forked", parent, FAULTS), "the child's process record")
    eq(faults_ids(trace, parent), ["0x100", "0x101", "0x102"], "the parent's coroutines")
    eq(faults_ids(trace, child), ["0x200", "0x201", "0x202"], "the child's coroutines")
    # Named even when the child is gone from /proc before corobpf reads it.
    eq([r["comm"] for r in trace.records if r["type"] == "thread" and r["tid"] == child],
       ["faults"], "the child's thread record")
    exits = {r["pid"]: r.get("exit_code") for r in trace.records if r["type"] == "process_exit"}
    eq(exits, {parent: 0, child: 7}, "exit codes")
    eq(trace.trailer["processes"], 2, "trailer processes")
    check_replay(out, raw)


@test
def follow_through_a_shell_and_exec():
    """--follow -- sh -c '...': no probes in the shell; what it forks and execs is traced."""
    out, err = work("follow-sh.jsonl"), work("follow-sh.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "--follow", "-v", "-o", out, "--", "sh", "-c",
                               "%s --wait fork; true" % FAULTS],
                              stdout=subprocess.PIPE, stderr=ef, text=True)
        line = tr.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        fpid = int(line[1])
        # Exec'd after the start: its objects are attached once its exec is seen.
        wait_for(err, "(loaded after start)")
        os.kill(fpid, signal.SIGUSR1)
        rest, _ = tr.communicate(timeout=60)
    eq(tr.returncode, 0, "corobpf exit code")
    m = re.search(r"CHILD (\d+) STATUS 7", rest)
    check(m and "DONE fork 3" in rest, "the program's output: %r" % rest)
    child = int(m.group(1))
    trace = Trace(out)
    check_clean(trace)
    shell = trace.header["pids"][0]
    procs = {r["pid"]: r for r in trace.processes}
    eq(sorted(procs), sorted([shell, fpid, child]), "processes: the shell, its child, its grandchild")
    eq([procs[shell]["mode"], procs[fpid]["mode"], procs[child]["mode"]],
       ["launched", "forked", "forked"], "modes")
    eq([procs[fpid]["ppid"], procs[child]["ppid"]], [shell, fpid], "parents")
    eq([r["pid"] for r in trace.records if r["type"] == "exec" and r["comm"] == "faults"],
       [fpid], "the exec")
    eq(faults_ids(trace, fpid), ["0x100", "0x101", "0x102"], "coroutines of the exec'd program")
    eq(faults_ids(trace, child), ["0x200", "0x201", "0x202"], "coroutines of its child")
    eq(faults_ids(trace, shell), [], "coroutines of the shell")
    eq(trace.trailer["lost"]["late_attach"], 1, "objects attached after their exec")
    exits = {r["pid"]: r.get("exit_code") for r in trace.records if r["type"] == "process_exit"}
    eq(exits, {shell: 0, fpid: 0, child: 7}, "exit codes")


@test
def follow_short_lived_programs_do_not_block_later_ones():
    """A program exec'd under --follow that is gone before its objects are attached: the
    next process running the same binary is attached anyway."""
    out = work("follow-short.jsonl")
    p = corobpf(["--follow", "-o", out, "--", "sh", "-c",
                 "%s burst 3; %s linger 500" % (FAULTS, FAULTS)])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    check("DONE burst 3" in p.stdout and "DONE linger 2" in p.stdout, "output: %r" % p.stdout)
    trace = Trace(out)
    linger = [c for c in trace.coroutines if c["id"] in ("0x500", "0x501")]
    # 0x501 fires half a second after the program starts: long after any attach.
    check("0x501" in [c["id"] for c in linger], "the second program was never traced: %s" %
          sorted((c["pid"], c["id"]) for c in trace.coroutines))
    eq(trace.trailer["lost"]["attach_failures"], 0, "attach failures")
    check(trace.trailer["lost"]["late_attach"] >= 1, "late attach not counted")


@test
def follow_off_the_target_nothing_is_traced():
    """Probes attached for every process under --follow: an unrelated run of the same program stays out."""
    out, err = work("follow-other.jsonl"), work("follow-other.err")
    target = subprocess.Popen([FAULTS, "--wait", "linger", "1500"], stdout=subprocess.PIPE, text=True)
    pid = int(target.stdout.readline().split()[1])
    tr, ef, err = start_tracer(["--follow", "-o", out, "-p", str(pid)], "follow-other")
    wait_for(err, "tracing")
    other = run([FAULTS, "fork"])
    eq(other.returncode, 0, "the unrelated program's exit code")
    target.send_signal(signal.SIGUSR1)
    eq(target.communicate(timeout=30)[0], "RAN 0x500\nDONE linger 2\n", "the target's output")
    eq(tr.wait(timeout=30), 0, "corobpf exit code")
    ef.close()
    trace = Trace(out)
    check_clean(trace)
    eq([r["pid"] for r in trace.processes], [pid], "processes")
    eq(faults_ids(trace, pid), ["0x500", "0x501"], "coroutines")

# ---- unmodified schedulers: the switch-function path ----

def main_id(tid):
    return "0x%x" % ((1 << 63) | tid)


def switch_paths(trace, pid):
    return {r["family"]: r for r in trace.records if r["type"] == "switch_path" and r["pid"] == pid}


@test
def switch_ucontext_round_robin():
    """Plain ucontext: exactly the program's coroutines, each switch-in, each exit."""
    tr, _, p, out, raw = trace_launch("uctx_rr", [os.path.join(TESTS_BIN, "uctx"), "rr", "5", "4"])
    check_clean(tr)
    pid = tr.processes[0]["pid"]
    cos = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            cos[f[2]] = int(f[3])
        elif f[0] == "MAIN":
            tid = int(f[1])
    eq(len(cos), 5, "coroutines the program made")
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), set(cos) | {main_id(tid)}, "coroutines traced (the program's, and main)")
    for cid, resumes in cos.items():
        c = got[cid]
        eq(c["switch_ins"], resumes, "switch-ins of %s" % cid)
        eq(c["end"], "exit", "%s ended by its return (uc_link)" % cid)
        eq(c["parent"], main_id(tid), "%s created by main" % cid)
        check(c["created"] is not None, "%s: makecontext not seen" % cid)
    m = got[main_id(tid)]
    eq(m["name"], "uctx [%d]" % tid, "main context named after its thread")
    eq(m["switch_ins"], 1 + 5 * 5, "main's switch-ins (its start, and every coroutine's return)")
    # Every switch out of a finished coroutine says so.
    done = [e for e in tr.by_ev("switch") if e["reason"] == "done"]
    eq(sorted(e["from"] for e in done), sorted(cos), "one 'done' switch per coroutine")
    sp = switch_paths(tr, pid)
    eq(set(sp), {"ucontext"}, "families used")
    check("swapcontext+0x" in sp["ucontext"]["sites"] and "emulated" in sp["ucontext"]["sites"],
          sp["ucontext"]["sites"])
    eq(sp["ucontext"]["single_stepped"], 0, "single-stepped switch sites")
    check("switch functions of unmodified libraries" in p.stderr, p.stderr)
    check_replay(out, raw)
    # Read back from JSONL: the same coroutines, not translated twice.
    back = work("uctx_rr.back.jsonl")
    q = corobpf(["report", "-q", out, "-o", back])
    eq(q.returncode, 0, "report of the JSONL (%s)" % q.stderr.strip())
    eq([(c["id"], c["switch_ins"], c["end"]) for c in Trace(back).coroutines],
       [(c["id"], c["switch_ins"], c["end"]) for c in tr.coroutines], "coroutines read back")


@test
def switch_ucontext_threads_and_setcontext():
    """Several threads, each with its main context; and coroutines left with setcontext."""
    tr, _, p, _, _ = trace_launch("uctx_thr", [os.path.join(TESTS_BIN, "uctx"), "threads", "3", "4", "2"])
    check_clean(tr)
    want, mains = [], set()
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            want.append((int(f[1]), f[2], int(f[3])))
        elif f[0] == "MAIN":
            mains.add(int(f[1]))
    eq(len(want), 12, "coroutines the program made")
    # Addresses come back from malloc across threads: match (thread, id) per incarnation.
    got = sorted((c["threads"][0], c["id"], c["switch_ins"]) for c in tr.coroutines
                 if not c["id"].startswith("0x8") and len(c["threads"]) == 1)
    eq(got, sorted(want), "(thread, coroutine, switch-ins)")
    eq({c["id"] for c in tr.coroutines if c["id"].startswith("0x8")}, {main_id(t) for t in mains},
       "one main context per worker thread")
    for c in tr.coroutines:
        if not c["id"].startswith("0x8"):
            eq(c["end"], "exit", "%s end" % c["id"])

    tr, _, p, _, _ = trace_launch("uctx_chain", [os.path.join(TESTS_BIN, "uctx"), "chain", "3", "2"])
    check_clean(tr)
    cos = {f[2]: int(f[3]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "CO"}
    got = {c["id"]: c for c in tr.coroutines}
    for cid, resumes in cos.items():
        eq(got[cid]["switch_ins"], resumes, "switch-ins of %s" % cid)
        # setcontext names no "from": the thread's current coroutine is.
        outs = [e for e in tr.by_ev("switch") if e["from"] == cid]
        eq(len(outs), resumes, "switches out of %s (the last by setcontext)" % cid)
        eq(got[cid]["end"], "process_exit", "%s never returned: no exit" % cid)


@test
def switch_boost_fiber():
    """Boost.Fiber through Boost.Context: every fiber the program made, every resume."""
    tr, _, p, out, raw = trace_launch("fibers", [os.path.join(TESTS_BIN, "fibers"), "4", "6", "20"])
    check_clean(tr)
    check("SUM 210" in p.stdout, "the program's own result changed:\n" + p.stdout)
    pid = tr.processes[0]["pid"]
    resumes = sorted(int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "FIBER")
    eq(len(resumes), 6, "fibers the program made")
    mains = [c for c in tr.coroutines if c["id"] == main_id(pid)]
    eq(len(mains), 1, "the main thread's context")
    fibers = [c for c in tr.coroutines if c["id"] != main_id(pid)]
    # Boost.Fiber's dispatcher fiber (made when the first fiber is), and the program's six.
    eq(len(fibers), 1 + 6, "fibers traced (the dispatcher and the program's)")
    for c in fibers:
        check(c["created"] is not None, "%s: make_fcontext not seen" % c["id"])
    # Each fiber is entered once by Boost.Context when it is set up (and leaves at once),
    # once per resume the program counts, and once more when the fiber object is
    # destroyed (its stack is unwound). Which one is the dispatcher the program cannot
    # say: exactly one choice must leave the program's counts.
    fits = [d["id"] for d in fibers
            if sorted(c["switch_ins"] - 2 for c in fibers if c is not d) == resumes]
    check(len(fits) >= 1, "switch-ins %s do not match the program's resumes %s (+2 each)"
          % (sorted(c["switch_ins"] for c in fibers), resumes))
    sp = switch_paths(tr, pid)
    check("boost-context" in sp, "families: %s" % sorted(sp))
    # Their calls are probed instead of the functions (a call is emulated).
    eq(sp["boost-context"]["single_stepped"], 0, "single-stepped switch sites")
    callers = [r for r in tr.records if r["type"] == "switch_path" and "calls of jump_fcontext" in r["sites"]]
    check(len(callers) >= 2, "call sites in the program and in libboost_fiber: %s" % [r["object"] for r in callers])
    check("probed where they are called" in p.stderr, p.stderr)
    check_replay(out, raw)
    # A program that takes jump_fcontext's address may call it in ways no call site shows:
    # then the functions' entries are probed (single-stepped), with the same result.
    tr, _, p, _, _ = trace_launch("fibers_addr", [os.path.join(TESTS_BIN, "fibers-addr"), "2", "3", "5"])
    check_clean(tr)
    resumes = sorted(int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "FIBER")
    fibers = [c for c in tr.coroutines if c["id"] != main_id(tr.processes[0]["pid"])]
    check(any(sorted(c["switch_ins"] - 2 for c in fibers if c is not d) == resumes for d in fibers),
          "entry probes: switch-ins %s, resumes %s" % (sorted(c["switch_ins"] for c in fibers), resumes))
    lib = [r for r in tr.records if r["type"] == "switch_path" and "libboost_context" in r["object"]]
    eq([r["single_stepped"] for r in lib], [2], "jump_fcontext and ontop_fcontext probed at entry")
    check("single-steps" in p.stderr, "the summary does not warn of the cost:\n" + p.stderr)


@test
def switch_boost_fiber_attached_mid_life():
    """Fibers made before corobpf attached: each followed as one coroutine, never split."""
    target = subprocess.Popen([os.path.join(TESTS_BIN, "fibers"), "slow", "3", "4"],
                              stdout=subprocess.PIPE, text=True)
    try:
        eq(target.stdout.readline().strip(), "READY", "the program's first line")
        out = work("fibers_attached.jsonl")
        p = corobpf(["-d", "1", "-p", str(target.pid), "-o", out])
        eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
        tr = Trace(out)
        check_clean(tr)
        busy = [c for c in tr.coroutines if c["switch_ins"] >= 20]
        # Three sleepers and the dispatcher; the main fiber waits in join throughout.
        eq(len(tr.coroutines), 4, "coroutines: %s" % [(c["id"], c["switch_ins"]) for c in tr.coroutines])
        eq(len(busy), 4, "each seen resuming many times (not split into new ids)")
        for c in tr.coroutines:
            eq(c["created"], None, "%s was made before the trace" % c["id"])
    finally:
        target.wait(timeout=30)
    check(target.returncode == 0, "the traced program failed")


@test
def switch_pth_names_and_exits():
    """GNU Pth through ucontext: its threads, named as pth names them, each exit."""
    tr, _, p, out, raw = trace_launch("pth", [os.path.join(TESTS_BIN, "pth"), "4", "3"])
    check_clean(tr)
    want = {f[1]: int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "THREAD"}
    eq(len(want), 4, "pth threads the program made")
    byname = {c["name"]: c for c in tr.coroutines}
    for name, resumes in want.items():
        check(name in byname, "no coroutine named %s: %s" % (name, sorted(byname)))
        eq(byname[name]["switch_ins"], resumes, "switch-ins of %s" % name)
        eq(byname[name]["end"], "exit", "%s ended by pth_exit" % name)
    check("**SCHEDULER**" in byname, "pth's scheduler thread is not named: %s" % sorted(byname))
    sp = switch_paths(tr, tr.processes[0]["pid"])
    eq(set(sp), {"ucontext", "pth"}, "families used")
    check_replay(out, raw)
    db = work("pth.db")
    q = corobpf(["report", "-q", raw, "-o", db])
    eq(q.returncode, 0, "report to SQLite (%s)" % q.stderr.strip())
    con = sqlite3.connect(db)
    eq(sorted(r[0] for r in con.execute("SELECT family FROM switch_paths")), ["pth", "ucontext"],
       "switch_paths rows")
    eq(sorted(r[0] for r in con.execute("SELECT name FROM coroutines WHERE end = 'exit'")),
       sorted(want), "exited coroutines in SQLite")
    con.close()


@test
def switch_custom_function_and_path_choice():
    """--switch uprobe:PATH:SYMBOL; probes win unless --switch is given; --switch none."""
    exe = os.path.join(TESTS_BIN, "uctx")
    spec = "uprobe:%s:task_switch:from=arg0,to=arg1" % exe
    tr, _, p, _, _ = trace_launch("custom", [exe, "custom", "3", "2"], extra=["--switch", spec])
    check_clean(tr)
    tasks = {f[2]: int(f[3]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "TASK"}
    tid = int([l.split()[1] for l in p.stdout.splitlines() if l.startswith("MAINTASK")][0])
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), set(tasks) | {main_id(tid)}, "coroutines (the tasks, and main)")
    for t, resumes in tasks.items():
        eq(got[t]["switch_ins"], resumes, "switch-ins of task %s" % t)
    eq(set(switch_paths(tr, tr.processes[0]["pid"])), {"custom"}, "only the function asked for")
    # A program with probes: the probes are used, no switch path...
    sc = [os.path.join(TESTS_BIN, "scenarios"), "yield"]
    tr, _, p, _, _ = trace_launch("probes_win", sc)
    eq(switch_paths(tr, tr.processes[0]["pid"]), {}, "switch path with probes present")
    # ...unless asked: then the probes are left alone, and said so.
    tr, _, p, _, _ = trace_launch("switch_forced", sc, extra=["--switch", "ucontext"])
    eq(set(switch_paths(tr, tr.processes[0]["pid"])), {"ucontext"}, "forced family")
    check("probe sites left alone" in p.stderr, p.stderr)
    eq(len(tr.by_ev("ready")), 0, "probe events with --switch")
    # Bad specs are usage errors that say what is wrong.
    for bad, what in (("uprobe:%s:task_switch:from=arg9,to=arg1" % exe, "arg9"),
                      ("uprobe:%s:task_switch:to=arg1" % exe, "from= and to="),
                      ("fcontext2", "unknown --switch family")):
        q = corobpf(["--switch", bad, "--", exe, "rr", "1", "1"])
        eq(q.returncode, 2, "exit code for --switch %s" % bad)
        check(what in q.stderr, q.stderr)
    q = corobpf(["--switch", "uprobe:%s:no_such_function:from=arg0,to=arg1" % exe, "--", exe, "rr", "1", "1"])
    eq(q.returncode, 6, "exit code for a function that is not there")
    check("no function named no_such_function" in q.stderr, q.stderr)
    q = corobpf(["--switch", "help"])
    eq(q.returncode, 0, "--switch help")
    check("boost-context" in q.stdout and "uprobe:PATH:SYMBOL" in q.stdout, q.stdout)


# ---- errors: each with its message and exit code ----

@test
def error_no_such_process():
    p = corobpf(["-p", "999999", "-o", work("e1.jsonl")])
    eq(p.returncode, 5, "exit code")
    check("no process with PID 999999" in p.stderr, p.stderr)
    check(not os.path.exists(work("e1.jsonl")), "an output was left behind")


@test
def error_thread_is_not_a_process():
    target, pid = start_waiting("scenarios", "yield")
    try:
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid) if int(t) != pid]
        check(tids, "the scenario has no second thread while waiting")
        p = corobpf(["-p", str(tids[0])])
        eq(p.returncode, 5, "exit code")
        check("is a thread of process %d" % pid in p.stderr, p.stderr)
    finally:
        target.kill()
        target.wait()


@test
def error_no_probes():
    p = corobpf(["-o", work("e2.jsonl"), "--switch", "none", "--", "/bin/true"])
    eq(p.returncode, 6, "exit code")
    check("no corobpf probes" in p.stderr and "/usr/bin/true" in p.stderr.replace("/bin/true", "/usr/bin/true"),
          p.stderr)
    check("libc.so.6" in p.stderr, "the searched libraries are not named:\n" + p.stderr)
    check(not os.path.exists(work("e2.jsonl")), "an output was left behind")
    # A static program with neither probes nor any switch function: nothing to follow.
    p = corobpf(["-o", work("e3.jsonl"), "--", os.path.join(TESTS_BIN, "static_plain")])
    eq(p.returncode, 6, "exit code (static program)")
    check("no corobpf probes and no known switch functions" in p.stderr, p.stderr)
    check("--switch" in p.stderr, "the error does not point at --switch:\n" + p.stderr)


@test
def error_command_not_found():
    p = corobpf(["--", "/nonexistent/cmd"])
    eq(p.returncode, 9, "exit code")
    p = corobpf(["--", "no-such-command-corobpf"])
    eq(p.returncode, 9, "exit code")
    check("command not found" in p.stderr, p.stderr)


@test
def error_unwritable_and_existing_output():
    p = corobpf(["-o", "/nonexistent-dir/x.jsonl", "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 7, "exit code")
    check("/nonexistent-dir/x.jsonl" in p.stderr, p.stderr)
    existing = work("exists.jsonl")
    with open(existing, "w") as f:
        f.write("keep me")
    p = corobpf(["-o", existing, "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 7, "exit code")
    check("--force" in p.stderr, p.stderr)
    with open(existing) as f:
        eq(f.read(), "keep me", "existing file")
    p = corobpf(["-o", work("x.unknownext"), "--", "/bin/true"])
    eq(p.returncode, 7, "unknown format exit code")


@test
def error_usage():
    for args in (["-p", "abc"], [], ["-p", "1", "--", "true"], ["-d", "-1", "-p", "1"],
                 ["--ring-size", "3", "-p", "1"], ["--ring-size", "4096", "-p", "1"],
                 ["-d", "nan", "-p", "1"], ["-d", "1e-12", "-p", "1"], ["--"],
                 ["--follow", "-a"], ["--follow", "--switch", "ucontext", "-p", "1"]):
        p = corobpf(args)
        eq(p.returncode, 2, "exit code for %s (%s)" % (args, p.stderr.strip()))


@test
def error_not_privileged():
    if not shutil.which("setpriv"):
        raise Failure("setpriv (util-linux) is needed for this test")
    p = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             COROBPF, "-p", "1"])
    eq(p.returncode, 3, "exit code (%s)" % p.stderr.strip())
    check("CAP_BPF" in p.stderr and "sudo" in p.stderr, p.stderr)


@test
def error_damaged_raw_capture():
    trace, truth, p, out, raw = trace_launch("dmg", [os.path.join(TESTS_BIN, "scenarios"), "stress1000"])
    size = os.path.getsize(raw)
    cut = work("cut.raw")
    with open(raw, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[: size - 100])
    again = work("cut.jsonl")
    p = corobpf(["report", cut, "-o", again])
    eq(p.returncode, 8, "exit code")
    check("truncated" in p.stderr or "cut short" in p.stderr, p.stderr)
    t = Trace(again)
    check("input_error" in t.trailer, "the output does not say the capture was damaged")
    check(len(t.events) > 0, "nothing kept from before the damage")
    p = corobpf(["report", work("nonexistent.raw")])
    eq(p.returncode, 8, "exit code for a missing capture")


# ---- launch mode details ----

@test
def launch_keeps_stdio_and_exit_status():
    out = work("stdio.jsonl")
    p = run([COROBPF, "-q", "-o", out, "--", os.path.join(TESTS_BIN, "usdt_matrix_c_O2"), "3", "5"],
            input="")
    eq(p.returncode, 0, "exit code")
    check(p.stdout.startswith("{"), "the command's stdout did not reach ours: %r" % p.stdout[:80])
    eq(p.stderr, "", "corobpf -q wrote to stderr")
    p = corobpf(["-o", work("st.jsonl"), "--", os.path.join(TESTS_BIN, "scenarios"), "--exit-code", "7", "yield"])
    eq(p.returncode, 7, "the command's exit status")


@test
def launched_command_keeps_its_signal_dispositions():
    """corobpf ignores SIGPIPE and handles SIGHUP; the command must not inherit either."""
    early = os.path.join(TESTS_BIN, "early")
    p = run([COROBPF, "-q", "-o", work("sig1.jsonl"), "--", early, "sigs"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    ign = int(p.stdout.split()[1], 16)
    check(not ign & (1 << (signal.SIGPIPE - 1)), "the command runs with SIGPIPE ignored")
    # Under nohup SIGHUP is ignored, and stays so for the command.
    p = subprocess.run([COROBPF, "-q", "-o", work("sig2.jsonl"), "--", early, "sigs"],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    ign = int(p.stdout.split()[1], 16)
    check(ign & (1 << (signal.SIGHUP - 1)), "nohup's SIGHUP ignore was lost")


@test
def gzip_output_and_two_outputs():
    out1, out2 = work("g.jsonl.gz"), work("g.jsonl")
    p = corobpf(["-o", out1, "-o", out2, "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    with gzip.open(out1, "rb") as a, open(out2, "rb") as b:
        check(a.read() == b.read(), "the .gz output differs from the plain one")


@test
def demo_runs_and_traces():
    """The README's first command traces this program."""
    out = work("demo.jsonl")
    p = corobpf(["-o", out, "--", os.path.join(BUILD, "demo"), "-d", "1"], timeout=60)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    check_clean(trace)
    check(len(trace.coroutines) > 50, "only %d coroutines" % len(trace.coroutines))
    statuses = {c["status"] for c in trace.coroutines}
    check(-5 in statuses and -125 in statuses, "the demo's failures are not traced: %s" % statuses)
    check(trace.by_ev("span_begin"), "no spans")
    check("longest suspended" in p.stderr, "no summary:\n" + p.stderr)


# ---- --stacks: where coroutines were created and where they park ----

def stack_funcs(trace, sid):
    stacks = {r["id"]: r for r in trace.records if r["type"] == "stack"}
    check(sid in stacks, "stack %r is not defined before the end" % sid)
    return [f.get("func") for f in stacks[sid]["frames"]], stacks[sid]["frames"]


def check_parking_stacks(trace, variant, how):
    """The stacks of progs/stacks.c name the functions its coroutines park in."""
    cor = {c["name"]: c for c in trace.coroutines}
    want_park = {"exe-parker": ["co_sleep_us", "exe_park_here", "exe_parker"],
                 "lib-parker": ["co_sleep_us", "lib_park_here", "lib_parker"],
                 "forgotten": ["chan_recv", "exe_wait_forever", "forgotten"]}
    for name, chain in want_park.items():
        check(name in cor, "%s: coroutine %s missing" % (how, name))
        funcs, frames = stack_funcs(trace, cor[name].get("park_stack"))
        # Innermost first: the scheduler's switch_out_locked, then the chain, in order.
        i = funcs.index(chain[0]) if chain[0] in funcs else -1
        eq(funcs[i:i + len(chain)], chain, "%s: park stack of %s (%s)" % (how, name, funcs))
        cfuncs, _ = stack_funcs(trace, cor[name].get("create_stack"))
        eq(cfuncs[:3], ["co_spawn", "spawn_them", "spawner"],
           "%s: create stack of %s" % (how, name))
        if name == "lib-parker":
            lib = [f for f in frames if f.get("func") == "lib_park_here"][0]
            check(lib["obj"].endswith("/libstackslib-%s.so" % variant),
                  "%s: lib_park_here is in %s" % (how, lib["obj"]))
        if name == "exe-parker":
            exe = [f for f in frames if f.get("func") == "exe_park_here"][0]
            check(exe["obj"].endswith("/stacks-%s" % variant) and
                  exe.get("file", "").endswith("progs/stacks.c") and exe.get("line", 0) > 0,
                  "%s: exe_park_here's object and line: %r" % (how, exe))
    # Every switch and create event names a stack (none lost, none unresolved).
    for e in trace.events:
        if e["ev"] in ("create", "switch") and e["pid"] == trace.processes[0]["pid"]:
            check("stack" in e, "%s: %s event without a stack: %r" % (how, e["ev"], e))
    eq(trace.trailer["lost"]["stacks_lost"], 0, "%s: stacks lost" % how)
    eq(trace.trailer["lost"]["stacks_unresolved"], 0, "%s: stacks unresolved" % how)
    found = [f for f in trace.records if f["type"] == "finding"]
    eq([(f["kind"], f["name"]) for f in found], [("lost_wakeup", "forgotten")], "findings")
    eq(found[0].get("stack"), cor["forgotten"]["park_stack"], "the finding's stack")


def perfetto_callstacks(t):
    """The function names of every event's callstack in a checked trace, root first."""
    return [[fr[0] for fr in ev["_callstack"]] for ts, i, track, ev, name in t.events
            if "_callstack" in ev]


def make_stacks_test(variant, how):
    def t():
        out, raw, db = work("stacks-%s-%s.jsonl" % (variant, how)), \
            work("stacks-%s-%s.raw" % (variant, how)), work("stacks-%s-%s.db" % (variant, how))
        pf = out[:-len(".jsonl")] + ".pftrace"
        # No timer samples: these are the probes' stacks, and none may be lost. A sample's
        # stack is taken in the timer interrupt, on top of whatever runs on that CPU, and
        # may be lost (counted): a CI run once had stacks_lost 1 with every probe's stack
        # present. Samples have their own tests (stacks_long_run_key_frame_*).
        p = corobpf(["--stacks=" + how, "--sample-hz", "0", "--stall", "0.2", "-o", out, "-o", db,
                     "-o", pf, "--raw", raw, "--", os.path.join(TESTS_BIN, "stacks-" + variant)])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        check("DONE" in p.stdout, "the program's output: %r" % p.stdout)
        trace = Trace(out)
        check_parking_stacks(trace, variant, how)
        # The summary shows where the forgotten coroutine is parked.
        check("at switch_out_locked" in p.stderr and "exe_wait_forever" in p.stderr,
              "summary without the finding's stack:\n" + p.stderr)
        # Symbolized again from the raw capture, after the process is gone: the same.
        check_replay(out, raw, ["--stall", "0.2"])
        # Perfetto: valid, and the forgotten coroutine's suspended slice carries its stack.
        t2 = perfetto_check.check(pf, out)
        stacks = perfetto_callstacks(t2)
        check(any(fr[-3:] == ["exe_wait_forever", "chan_recv", "switch_out_locked"]
                  for fr in stacks), "no Perfetto callstack ends in exe_wait_forever: %r" %
              stacks[:5])
        # SQLite: the same stacks, frame by frame.
        con = sqlite3.connect(db)
        for c in trace.coroutines:
            if c["name"] != "lib-parker":
                continue
            got = [r[0] for r in con.execute(
                "SELECT f.func FROM coroutines c JOIN frames f ON f.stack_id = c.park_stack "
                "WHERE c.uid = ? ORDER BY f.depth", (c["uid"],))]
            funcs, _ = stack_funcs(trace, c["park_stack"])
            eq(got, funcs, "SQLite frames of lib-parker's park stack")
        con.close()
    t.__name__ = "stacks_%s_%s" % (how, variant)
    return t


for _variant, _how in (("nofp", "dwarf"), ("fp", "dwarf"), ("fp", "fp"), ("nopie", "dwarf"),
                       ("lld", "dwarf")):
    test(make_stacks_test(_variant, _how))


@test
def stacks_fp_without_frame_pointers_is_short_and_says_so():
    """--stacks=fp on code built without frame pointers: few frames (the reason dwarf is the
    default), never a crash or a lost event."""
    out = work("stacks-nofp-fpwalk.jsonl")
    p = corobpf(["--stacks=fp", "-o", out, "--", os.path.join(TESTS_BIN, "stacks-nofp")])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    cor = {c["name"]: c for c in trace.coroutines}
    funcs, _ = stack_funcs(trace, cor["exe-parker"]["park_stack"])
    check("exe_park_here" not in funcs, "a frame-pointer walk found frames it cannot: %r" % funcs)
    eq(trace.trailer["lost"]["events"], 0, "events lost")


def make_key_frame_test(variant, how):
    def t():
        out, db = work("spin-%s-%s.jsonl" % (variant, how)), work("spin-%s-%s.db" % (variant, how))
        p = corobpf(["--stacks=" + how, "-o", out, "-o", db, "--",
                     os.path.join(TESTS_BIN, "stacks-" + variant), "spin"])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        trace = Trace(out)
        found = [f for f in trace.records if f["type"] == "finding"]
        eq([(f["kind"], f["name"]) for f in found], [("long_run", "spinner")], "findings")
        f = found[0]
        # 300 ms at 99 Hz: about 30 samples, nearly all in spin_here.
        check(f.get("samples", 0) >= 10, "samples of the run: %r" % f.get("samples"))
        check(f.get("key_frame", "").startswith("spin_here+"), "key frame: %r" % f.get("key_frame"))
        check(f["key_samples"] * 10 > f["samples"] * 3, "the key frame's share")
        funcs, _ = stack_funcs(trace, f["stack"])
        eq(funcs[f["key_depth"]], "spin_here", "the key frame in its stack")
        check("spinner" in funcs, "the sampled stack reaches the coroutine's function: %r" % funcs)
        check("key frame: spin_here+" in p.stderr, "summary:\n" + p.stderr)
        con = sqlite3.connect(db)
        eq(con.execute("SELECT key_frame, samples FROM findings").fetchone(),
           (f["key_frame"], f["samples"]), "SQLite key frame")
        con.close()
    t.__name__ = "stacks_long_run_key_frame_%s_%s" % (how, variant)
    return t


for _variant, _how in (("nofp", "dwarf"), ("fp", "fp")):
    test(make_key_frame_test(_variant, _how))


@test
def stacks_report_after_the_binary_changed():
    """A capture symbolized after its binary was replaced by another build: that object's frames
    keep their addresses, and corobpf says why, rather than naming functions of the new build;
    the unchanged library's frames are still named."""
    d = work("rebuilt")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "stacks-nofp")
    shutil.copy(os.path.join(TESTS_BIN, "stacks-nofp"), exe)
    shutil.copy(os.path.join(TESTS_BIN, "libstackslib-nofp.so"), d)
    raw, out, again = work("rebuilt.raw"), work("rebuilt.jsonl"), work("rebuilt-again.jsonl")
    p = corobpf(["--stacks", "--raw", raw, "-o", out, "--", exe])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    cor = {c["name"]: c for c in Trace(out).coroutines}
    funcs, _ = stack_funcs(Trace(out), cor["lib-parker"]["park_stack"])
    check("lib_park_here" in funcs and "lib_parker" in funcs, "live: %r" % funcs)
    shutil.copy(os.path.join(TESTS_BIN, "stacks-fp"), exe)   # another build, another build-id
    r = corobpf(["report", raw, "-o", again])
    eq(r.returncode, 0, "report exit code (%s)" % r.stderr.strip())
    check("changed since the capture" in r.stderr and exe in r.stderr, "no warning:\n" + r.stderr)
    trace = Trace(again)
    cor = {c["name"]: c for c in trace.coroutines}
    _, frames = stack_funcs(trace, cor["lib-parker"]["park_stack"])
    exe_frames = [f for f in frames if f.get("obj") == exe]
    check(exe_frames and all("func" not in f for f in exe_frames),
          "frames of the replaced binary named anyway: %r" % exe_frames)
    check(any(f.get("func") == "lib_park_here" for f in frames), "the library's frame: %r" % frames)


@test
def stacks_follow_through_a_shell_and_exec():
    """--follow --stacks: the shell forks, the child execs the program. Its mappings are read
    afresh after the exec (the shell's image is gone), and its stacks name its functions."""
    out = work("follow-stacks.jsonl")
    # "late": the exec'd binary is attached a few ms after its exec; it starts after that.
    p = corobpf(["--follow", "--stacks", "-o", out, "--", "sh", "-c",
                 os.path.join(TESTS_BIN, "stacks-nofp") + " late; true"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    cor = {c["name"]: c for c in trace.coroutines}
    for name, fn in (("exe-parker", "exe_park_here"), ("lib-parker", "lib_park_here")):
        funcs, _ = stack_funcs(trace, cor[name]["park_stack"])
        check(fn in funcs and name.replace("-", "_") in funcs, "%s: %r" % (name, funcs))
    eq(trace.trailer["lost"]["stacks_unmapped"], 0, "stacks with unmapped addresses")


@test
def stacks_state_goes_with_each_process():
    """--follow --stacks over two runs of a program, one after the other: each run's stacks
    name its functions, and what the resolver held for each (mappings, stacks, unwinds) goes
    when it ends: at the end nothing is held (a day of -a would otherwise keep every ended
    process's)."""
    out = work("ended-stacks.jsonl")
    prog = os.path.join(TESTS_BIN, "stacks-nofp")
    p = corobpf(["--follow", "--stacks", "-v", "-o", out, "--", "sh", "-c",
                 "%s late; %s late; true" % (prog, prog)])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip()[-500:])
    trace = Trace(out)
    runs = {}
    for c in trace.coroutines:
        if c["name"] == "exe-parker":
            runs[c["pid"]] = stack_funcs(trace, c["park_stack"])[0]
    eq(len(runs), 2, "exe-parker coroutines in two processes: %r" % list(runs))
    for pid, funcs in runs.items():
        check("exe_park_here" in funcs, "pid %d: %r" % (pid, funcs))
    m = re.search(r"state held for (\d+) processes \((\d+) stacks and unwinds remembered\)", p.stderr)
    check(m, "no resolver summary in -v output: %s" % p.stderr.strip()[-800:])
    eq((int(m.group(1)), int(m.group(2))), (0, 0), "resolver state left after every process ended")


@test
def stacks_all_mode_program_started_later():
    """-a --stacks: a program started after corobpf is admitted on its first probe; its
    mappings are read then, and its park stacks name its functions, executable and library."""
    out, err = work("all-stacks.jsonl"), work("all-stacks.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "--stacks", "-o", out], stderr=ef, stdout=ef)
    prog = None
    try:
        wait_for(err, "tracing every")
        prog = subprocess.Popen([os.path.join(TESTS_BIN, "stacks-nofp"), "serve"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        pid = int(line[1])
        wait_for(err, "/stacks-nofp (loaded after start)")
        # Programs without probes exec meanwhile: -a sees their execs, never traces them.
        for _ in range(5):
            subprocess.run(["/bin/true"], check=True)
        time.sleep(0.6)   # a dozen parks of each parker
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
        if prog:
            prog.kill()
            prog.wait()
    # The resolver holds state for the one traced process still alive, none for the others.
    m = re.search(r"state held for (\d+) processes", open(err).read())
    check(m and int(m.group(1)) == 1, "resolver state at the end: %r" % (m and m.group(0)))
    trace = Trace(out)
    stacks = {r["id"]: [f.get("func") for f in r["frames"]] for r in trace.records
              if r["type"] == "stack"}
    parks = [stacks.get(e.get("stack"), []) for e in trace.events
             if e["ev"] == "switch" and e["pid"] == pid and e["from"] != "0x0"]
    for fn in ("exe_park_here", "lib_park_here"):
        check(any(fn in f and "co_sleep_us" in f for f in parks),
              "no switch out of %d parks in %s: %r" % (pid, fn, parks[:3]))


@test
def stacks_blocking_finding_names_the_blocking_call():
    """A coroutine that blocks its worker in usleep: the blocking finding's stack is the
    thread's user stack when it left the CPU, through libc (no frame pointers) to the
    coroutine's function."""
    out = work("block-stacks.jsonl")
    p = corobpf(["--stacks", "-o", out, "--", os.path.join(TESTS_BIN, "bugs"), "blocking"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    found = [f for f in trace.records if f["type"] == "finding"]
    eq([f["kind"] for f in found], ["blocking"], "findings")
    funcs, _ = stack_funcs(trace, found[0].get("stack"))
    i = funcs.index("usleep") if "usleep" in funcs else -1
    check(i >= 0 and funcs[i + 1:i + 2] == ["blocker"], "the blocking stack: %r" % funcs)


@test
def ps_lists_live_coroutines_where_they_park():
    """corobpf ps on a running process: each coroutine that parks during the window, with the
    function it parks in (executable and library, no frame pointers); exits 0 and leaves the
    process running."""
    prog = subprocess.Popen([os.path.join(TESTS_BIN, "stacks-nofp"), "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        pid = int(line[1])
        p = corobpf(["ps", "-p", str(pid), "-d", "0.5"])
        eq(p.returncode, 0, "corobpf ps exit code (%s)" % p.stderr.strip())
        out = p.stdout
        check("process %d (stacks-nofp)" % pid in out, "no process header:\n" + out)
        # Attached mid-life, names fired at creation are not seen: found by where they park.
        blocks = out.split("\n  0x")[1:]
        for fn in ("exe_park_here", "lib_park_here"):
            mine = [b for b in blocks if fn in b]
            eq(len(mine), 1, "coroutines parked in %s:\n%s" % (fn, out))
            b = mine[0]
            check("suspended: sleep for " in b.splitlines()[0], "state: %s" % b.splitlines()[0])
            check("at switch_out_locked" in b and "co_sleep_us" in b, "where it parks:\n" + b)
            if fn == "lib_park_here":
                check("libstackslib-nofp.so" in b, "the library is named:\n" + b)
        # Parked since before the window, the forgotten one fired nothing: not listed, and the
        # output says such coroutines are invisible.
        eq(len(blocks), 2, "coroutines listed")
        check("not listed" in out, "no note about unseen coroutines:\n" + out)
        check(prog.poll() is None, "the process did not survive corobpf ps")
    finally:
        prog.kill()
        prog.wait()
    p = corobpf(["ps", "--", "/bin/true"])
    eq(p.returncode, 2, "corobpf ps -- CMD is a usage error")


@test
def stacks_usage_errors():
    for args, text in ((["--stacks=lbr"], "invalid --stacks"),
                       (["--stack-bytes", "100", "--stacks"], "invalid --stack-bytes"),
                       (["--stacks=fp", "--stack-bytes", "4096"], "--stack-bytes sizes"),
                       (["--sample-hz", "99"], "add --stacks"),
                       (["--stacks", "--sample-hz", "x"], "invalid --sample-hz")):
        p = corobpf(args + ["--", "/bin/true"])
        eq(p.returncode, 2, "exit code of %r" % args)
        check(text in p.stderr, "%r: %s" % (args, p.stderr.strip()))


# ---- make bench runs (its numbers are not asserted: this is not a timed test) ----

@test
def bench_quick_mode_writes_a_complete_table():
    p = run(["make", "-s", "-C", ROOT, "bench"], env={"BENCH_QUICK": "1"}, timeout=600)
    eq(p.returncode, 0, "make bench (%s)" % (p.stderr.strip()[-500:]))
    path = p.stdout.strip().splitlines()[-1].split("written: ")[-1]
    with open(path) as f:
        res = json.load(f)
    for key in ("floor_ns_per_hit", "corobpf_ns_per_hit", "corobpf_over_floor", "untraced_site_ns"):
        check(isinstance(res["probe"].get(key), (int, float)), "probe.%s missing" % key)
    for n, row in res["replay"].items():
        for fmt in ("model", "jsonl", "pftrace", "db"):
            check(row[fmt + "_events_per_s"] > 0 and row[fmt + "_peak_rss_kib"] > 0,
                  "replay %s %s" % (n, fmt))
    for key in ("none_ns_per_hit", "fp_ns_per_hit", "dwarf_ns_per_hit", "dwarf_lost_max"):
        check(isinstance(res["stacks"].get(key), (int, float)), "stacks.%s missing" % key)
    check(res["loss"]["events"] > 0, "the loss run traced nothing")
    eq(res["loss"]["lost"], 0, "events lost at the default ring size in the quick run")
    check("per hit: corobpf" in p.stdout and "bytes per event" in p.stdout and
          "--stacks, per create" in p.stdout, p.stdout)
    os.unlink(path)


# ---- tests kept in modules of their own (tests/integration/suite_*.py), registered on import ----

import importlib  # noqa: E402
import glob  # noqa: E402
for _m in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_*.py"))):
    importlib.import_module(os.path.basename(_m)[:-3])


# ---- runner ----

def bpf_usable():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists(COROBPF):
        return "./corobpf is not built"
    p = corobpf(["--switch", "none", "--", "/bin/true"])
    if p.returncode != 6:
        return "corobpf cannot load BPF here (exit %d): %s" % (p.returncode, p.stderr.strip())
    return None


def main():
    wanted = sys.argv[1:]
    why = bpf_usable()
    if why:
        if CI:
            print("FAIL: integration tests cannot run in CI: %s" % why)
            return 1
        print("SKIP integration tests: %s (they need root and a BPF-capable kernel)" % why)
        return 0
    failed, ran = [], 0
    for t in TESTS:
        if wanted and not any(w in t.__name__ for w in wanted):
            continue
        ran += 1
        start = time.time()
        try:
            t()
            print("ok   %-45s %5.1fs" % (t.__name__, time.time() - start), flush=True)
        except Exception as e:  # a test's own failure or an unexpected error: both fail it
            failed.append(t.__name__)
            print("FAIL %-45s %5.1fs\n     %s" % (t.__name__, time.time() - start,
                                                  str(e).replace("\n", "\n     ")), flush=True)
    print("%d tests, %d failed%s" % (ran, len(failed), ": " + " ".join(failed) if failed else ""))
    if not failed and not os.environ.get("KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    else:
        print("work directory kept: %s" % WORK)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
