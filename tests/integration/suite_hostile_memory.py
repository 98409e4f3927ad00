"""A target that keeps more coroutines alive than the model should follow: the caps hold.

The model follows at most --max-coroutines live coroutines in all and
--max-coroutines-per-process of one process. A coroutine first seen beyond a cap is
not followed until there is room; its events are written without it and counted. What is
followed stays exact, what is not is counted, and corobpf's memory stays what the cap allows
whatever the program keeps alive.
"""
from harness import *  # noqa: F401,F403

MANY_BASE = 0x1000000


def run_capped(name, n, extra):
    """faults many N N (N coroutines alive at once, then all finished in creation order) under
    corobpf with `extra`; the trace, the raw capture's path and the completed process."""
    out, raw, pf = work(name + ".jsonl"), work(name + ".raw"), work(name + ".pftrace")
    p = corobpf(["-o", out, "-o", pf, "--raw", raw] + extra + ["--", FAULTS, "many", str(n),
                                                                str(n)])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip()[-2000:])
    check("DONE many %d" % n in p.stdout, "the program did not finish: %r" % p.stdout)
    try:
        perfetto_check.check(pf, out)
    except perfetto_check.Bad as err:
        raise Failure("%s: %s" % (pf, err))
    return Trace(out), raw, p


def check_capped(trace, n, cap, key):
    """The first `cap` coroutines followed whole; the others counted at their start and followed
    from their finish, when the first ones had made room, as coroutines seen mid-life."""
    t = trace.trailer
    check_clean(trace)
    other = "coroutines_over_process_cap" if key == "coroutines_over_cap" else \
        "coroutines_over_cap"
    eq(t["lost"][key], n - cap, "trailer lost.%s" % key)
    eq(t["lost"][other], 0, "trailer lost.%s" % other)
    # Each not followed at its start: its create, name, switch in and switch out.
    eq(t["lost"]["events_over_cap"], 4 * (n - cap), "trailer lost.events_over_cap")
    eq(t["peak_live"], cap, "peak live coroutines followed")
    over = [e for e in trace.events if e.get("over_cap")]
    eq(len(over), 4 * (n - cap), "event lines marked over_cap")
    check(all("uid" not in e and "from_uid" not in e and "to_uid" not in e for e in over),
          "an over_cap event names a coroutine incarnation")
    # A switch names its coroutine on the side that is not the scheduler.
    ids = {int(e["id"] if e["ev"] != "switch" else e["to"] if e["to"] != "0x0" else e["from"],
               16) - MANY_BASE for e in over}
    eq((min(ids), max(ids), len(ids)), (cap, n - 1, n - cap),
       "the coroutines whose events are marked over_cap (lowest, highest, how many)")
    by_id = {int(c["id"], 16) - MANY_BASE: c for c in trace.coroutines}
    eq((len(by_id), min(by_id), max(by_id)), (n, 0, n - 1), "coroutines in the trace")
    for i, c in sorted(by_id.items()):
        where = "coroutine 0x%x" % (MANY_BASE + i)
        eq((c["end"], c["status"]), ("exit", 0), where + " end")
        if i < cap:
            # Followed from its create: every probe of it (create, name, 2 switches in, 1 ready).
            check(c["created"] is not None, where + ": its create was followed")
            eq((c["name"], c["switch_ins"], c["readies"]), ("many", 2, 1), where)
            check(not c.get("uncertain"), where + " is uncertain")
        else:
            # Not followed until the first ones had exited: from its ready on, mid-life.
            eq(c["created"], None, where + " created")
            eq((c["switch_ins"], c["readies"]), (1, 1), where)


@test
def hostile_memory_live_coroutines_over_the_cap():
    """1,000 coroutines alive at once under --max-coroutines 100: 100 followed whole, 900
    counted at their start and followed from their finish; the summary says which cap and
    what to do; a replay of the raw capture with the same cap writes the same trace."""
    trace, raw, p = run_capped("cap-all", 1000, ["--max-coroutines", "100"])
    check_capped(trace, 1000, 100, "coroutines_over_cap")
    check("900 coroutines were created while the live ones followed were at a cap (900 at "
          "--max-coroutines 100" in p.stderr, "the summary does not say it:\n" + p.stderr)
    check("raise the caps to follow them all" in p.stderr, "no remedy said:\n" + p.stderr)
    check_replay(work("cap-all.jsonl"), raw, ["--max-coroutines", "100"])
    # The whole capture is kept: replayed without the cap, every coroutine is followed whole.
    out = work("cap-all-uncapped.jsonl")
    r = corobpf(["report", "-q", raw, "-o", out])
    eq(r.returncode, 0, "report without the cap (%s)" % r.stderr.strip())
    full = Trace(out)
    eq(full.trailer["lost"]["events_over_cap"], 0, "events over the cap, replayed uncapped")
    eq(len([c for c in full.coroutines if c["created"] is not None]), 1000,
       "coroutines followed from their create, replayed uncapped")


@test
def hostile_memory_live_coroutines_over_the_process_cap():
    """The same under --max-coroutines-per-process 50: counted under the process's cap."""
    trace, raw, p = run_capped("cap-proc", 1000, ["--max-coroutines-per-process", "50"])
    check_capped(trace, 1000, 50, "coroutines_over_process_cap")
    check("950 at a process's --max-coroutines-per-process 50" in p.stderr,
          "the summary does not name the process's cap:\n" + p.stderr)
    check_replay(work("cap-proc.jsonl"), raw, ["--max-coroutines-per-process", "50"])


def watch_hwm(p, timeout=300):
    """Wait for the Popen p, reading its own peak RSS (VmHWM, /proc/PID/status) every 10 ms
    while it runs: the highest one read, in bytes, and its exit code. (wait4's ru_maxrss is no
    measure of it: it keeps the high-water mark of the image before exec, the forked copy of
    this test's Python.)"""
    hwm, end = 0, time.time() + timeout
    path = "/proc/%d/status" % p.pid
    while p.poll() is None:
        check(time.time() < end, "%s did not end in %d s" % (p.args[0], timeout))
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.01)
    return p.returncode, hwm


def peak_rss(args):
    """corobpf with args: its exit code, its own peak RSS in bytes, its stderr."""
    err = work("peak-rss.err")
    with open(err, "w") as ef:
        p = subprocess.Popen([COROBPF] + args, stdout=subprocess.DEVNULL, stderr=ef)
        rc, hwm = watch_hwm(p)
    with open(err, errors="replace") as f:
        return rc, hwm, f.read()


@test
def hostile_memory_peak_rss_follows_the_cap_not_the_program():
    """50,000 coroutines alive at once under --max-coroutines 1000: corobpf's peak RSS is that
    of a program with 1,000 alive (within 32 MiB), not fifty times more."""
    rc, small, err = peak_rss(["-q", "-o", work("rss-small.jsonl"), "--", FAULTS, "many",
                               "1000", "1000"])
    eq(rc, 0, "corobpf exit code, 1,000 alive (%s)" % err.strip())
    rc, capped, err = peak_rss(["-q", "--max-coroutines", "1000", "-o", work("rss-big.jsonl"),
                                "--", FAULTS, "many", "50000", "50000"])
    eq(rc, 0, "corobpf exit code, 50,000 alive (%s)" % err.strip())
    print("     peak RSS: %.1f MiB with 1,000 alive, %.1f MiB with 50,000 alive under "
          "--max-coroutines 1000" % (small / 2**20, capped / 2**20))
    check(capped < small + (32 << 20), "peak RSS %.1f MiB under the cap, %.1f MiB with 1,000 "
          "alive" % (capped / 2**20, small / 2**20))
    t = Trace(work("rss-big.jsonl")).trailer
    eq(t["peak_live"], 1000, "peak live coroutines followed")
    check(t["lost"]["coroutines_over_cap"] > 0, "no coroutine counted over the cap")


@test
def hostile_memory_open_spans_over_the_cap():
    """A coroutine opens 1,000 nested spans and ends them, then opens 1,000 more and exits
    inside them (a leak), under --max-open-spans 100, then --max-open-spans-per-process 50:
    the spans kept are those a program without caps would show (closed and unclosed alike),
    the others are counted, their ends close nothing else and are no anomaly."""
    for opt, cap, key in (("--max-open-spans", 100, "spans_over_cap"),
                          ("--max-open-spans-per-process", 50, "spans_over_process_cap")):
        out, raw = work("spans-%d.jsonl" % cap), work("spans-%d.raw" % cap)
        p = corobpf(["-o", out, "--raw", raw, opt, str(cap), "--", FAULTS, "spans", "1000"])
        eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip()[-2000:])
        trace = Trace(out)
        t = trace.trailer
        other = "spans_over_cap" if key == "spans_over_process_cap" else "spans_over_process_cap"
        eq((t["lost"][key], t["lost"][other]), (2 * (1000 - cap), 0), "spans counted over " + opt)
        eq(t["anomalies"]["span_unmatched_end"], 0, "unmatched span ends under " + opt)
        stats = [(r["name"], r["count"], r["unclosed"]) for r in trace.records
                 if r["type"] == "span_stats"]
        eq(stats, [("leak", cap, cap)], "span statistics under " + opt)
        over = [e for e in trace.events if e.get("over_cap")]
        eq((len([e for e in over if e["ev"] == "span_begin"]),
            len([e for e in over if e["ev"] == "span_end"])), (2 * (1000 - cap), 1000 - cap),
           "span lines marked over_cap under " + opt)
        check("spans were begun while as many were open as the caps allow" in p.stderr,
              "the summary does not say it:\n" + p.stderr)
        check_replay(out, raw, [opt, str(cap)])
