"""String probes given bad pointers, and strings in pages nobody touched yet.

The probe header never dereferences a string; corobpf reads it. A bad
pointer must cost the traced program nothing: the event is kept with an
empty string, flagged unreadable and counted as a string fault. A good
string must be read exactly wherever it lies, in a .rodata page the
program never read, across into a page out of the page tables, at the end
of a mapping.
"""
from harness import *  # noqa: F401,F403

BADSTR = os.path.join(TESTS_BIN, "badstr")


def _truth_cases(truth):
    check(truth and truth[-1] == {"done": True}, "badstr did not finish: %r" % truth[-1:])
    cases = truth[:-1]
    broken = [c["case"] for c in cases if not c["premise"]]
    check(not broken, "premise broken (a page that had to be untouched was present): %s" % broken)
    return cases


@test
def hostile_strings_untraced():
    """The program runs clean on its own (its bad pointers are never evaluated untraced)."""
    truth = work("badstr-untraced.truth")
    p = run([BADSTR], env={"COROBPF_TRUTH": truth})
    eq(p.returncode, 0, "badstr exit code untraced (%s)" % p.stderr.strip())
    _truth_cases(read_truth(truth))


@test
def hostile_strings_traced():
    """Bad pointers: counted string faults, events kept, no crash; good strings read exactly."""
    trace, truth, p, out, raw = trace_launch("badstr", [BADSTR])
    cases = _truth_cases(truth)
    eq(len(trace.processes), 1, "processes")
    pid = trace.processes[0]["pid"]
    ends = [r for r in trace.records if r["type"] == "process_exit" and r["pid"] == pid]
    eq([(e.get("exit_code"), e.get("signal")) for e in ends], [(0, None)], "badstr's exit")
    names = {e["id"]: e for e in trace.by_ev("name") if e["pid"] == pid}
    spans = {k: [e for e in trace.by_ev(k) if e["pid"] == pid] for k in ("span_begin", "span_end")}
    seen = {"span_begin": 0, "span_end": 0}
    for c in cases:
        where = "%s %s (%s)" % (c["probe"], c["id"], c["case"])
        if c["probe"] == "name":
            check(c["id"] in names, where + ": no name event")
            e = names[c["id"]]
        else:
            i = seen[c["probe"]]
            seen[c["probe"]] += 1
            check(i < len(spans[c["probe"]]), where + ": no such event")
            e = spans[c["probe"]][i]
        if c["want"] is None:
            eq((e["name"], e.get("unreadable")), ("", True), where + " (a string fault)")
        else:
            eq(e["name"], c["want"], where + " name")
            check(not e.get("unreadable"), where + ": flagged unreadable")
        eq(bool(e.get("truncated")), c["truncated"], where + " truncated")
    eq(len(names), sum(1 for c in cases if c["probe"] == "name"), "name events")
    eq({k: len(v) for k, v in spans.items()}, seen, "span events")
    eq(trace.trailer["lost"]["string_faults"], sum(1 for c in cases if c["want"] is None),
       "string faults in the trailer")
    eq(trace.trailer["lost"]["events"], 0, "events lost")
    check("could not be read" in p.stderr, "the summary does not count them:\n" + p.stderr)
    check_replay(out, raw)


@test
def hostile_strings_empty_span_in_perfetto():
    """Empty and unreadable span names are visible slice names in Perfetto; the JSONL keeps them
    empty."""
    trace, truth, p, out, raw = trace_launch("badstr-pf", [BADSTR])
    t = perfetto_check.check(work("badstr-pf.pftrace"), out)
    begins = [n for ts, i, track, ev, n in t.events 
              if perfetto_check.one(ev, "type") == "TYPE_SLICE_BEGIN"]
    for want in ("(unnamed span)", "(unreadable span)", "rodata-span"):
        check(want in begins, "no %r slice in %r" % (want, begins))
    eq([e["name"] for e in trace.by_ev("span_begin")], ["", "", "rodata-span"], "JSONL span names")
