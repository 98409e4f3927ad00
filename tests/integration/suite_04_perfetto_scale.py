"""Perfetto at scale (and string arguments)."""
from harness import *  # noqa: F401,F403


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
