"""Scenarios, launched: each program's coroutines exactly as its ground truth says."""
from harness import *  # noqa: F401,F403


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
    # Twenty coroutines that sleep and yield on two workers: each ran on the threads the
    # scheduler says it ran them on, in that order. How many workers took part, and whether
    # a coroutine migrated, is up to the machine's load: the scheduler's record decides.
    trace, truth, *_ = trace_launch("details-m2n", [os.path.join(TESTS_BIN, "scenarios"), "concurrent20"])
    by_id = {c["id"]: c for c in trace.coroutines}
    for t in truth:
        eq(by_id[t["id"]]["threads"], t["threads"], "threads of %s (%s)" % (t["id"], t["name"]))
    workers = {tid for t in truth for tid in t["threads"]}
    eq({e["tid"] for e in trace.by_ev("switch")}, workers, "worker threads that switched")
