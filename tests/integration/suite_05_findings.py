"""Findings: one bug per program, found once, on the right coroutine."""
from harness import *  # noqa: F401,F403


BUGS = {"lost_wakeup": "lost_wakeup", "stall": "stall", "long_run": "long_run",
        "sched_latency": "sched_latency", "unclosed_span": "unmatched_span",
        "spawn_storm": "spawn_storm", "blocking": "blocking"}


def make_bug_test(prog_arg, kind):
    def t():
        out, pf, raw = work("bug-%s.jsonl" % prog_arg), work("bug-%s.pftrace" % prog_arg), \
            work("bug-%s.raw" % prog_arg)
        # A busy machine keeps runnable coroutines waiting, preempts running ones and holds
        # worker threads on locks whose owner it preempted: only
        # the test of each such finding keeps its threshold, the others cannot see it
        # whatever the load.
        quiet = []
        for k, opt in (("sched_latency", "--sched-latency"), ("long_run", "--long-run"),
                       ("blocking", "--blocking")):
            if kind != k:
                quiet += [opt, "600000"]
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
    # Events by kind: the trailer's of the same capture, and they add up to the events.
    j = work("rep.jsonl")
    eq(corobpf(["report", raw, "-o", j]).returncode, 0, "report -o")
    trailer = Trace(j).trailer
    eq(doc["events_by_kind"], trailer["events_by_kind"], "report --json's events_by_kind")
    eq(sum(doc["events_by_kind"].values()), doc["events"], "events_by_kind over events")
    check(doc["events_by_kind"]["create"] >= 200, "creates: %s" % doc["events_by_kind"])


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
