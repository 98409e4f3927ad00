"""The flight recorder (--flight, --dump-on, SIGUSR1) and the status line while recording.

The oracle of a dump is the whole capture of the same run: --raw keeps writing it under
--flight, and `corobpf report` replays it into a full JSONL trace; the dump must hold
exactly that trace's events over its window, and the coroutines alive at its start."""
import collections
import pty
import select

from harness import *  # noqa: F401,F403

STEADY_RATE, STEADY_SECS, STEADY_LIVE = 1000, 20, 200


def boottime_ns():
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def event_key(e):
    return json.dumps(e, sort_keys=True)


def full_trace(raw, name):
    out = work(name + ".full.jsonl")
    p = corobpf(["report", "-q", raw, "-o", out, "--force"])
    eq(p.returncode, 0, "corobpf report of the full capture (%s)" % p.stderr.strip())
    return Trace(out)


def check_dump_files(base, n, exts):
    for ext in exts:
        path = work("%s.%d%s" % (base, n, ext))
        check(os.path.exists(path), "%s was not written" % path)
    pf, js = work("%s.%d.pftrace" % (base, n)), work("%s.%d.jsonl" % (base, n))
    if os.path.exists(pf) and os.path.exists(js):
        try:
            perfetto_check.check(pf, js)
        except perfetto_check.Bad as err:
            raise Failure("%s: %s" % (pf, err))


def window_differences(dump, full):
    """(missing, extra): the full trace's events over the dump's window that the dump lacks,
    and the dump's that the full trace lacks. A stretch off the CPU that crosses an edge of
    the window is whole in one and cut in the other, as docs/jsonl.md says: begun before the
    dump's start (or before the first record a byte-bound dump kept), the dump holds its
    offcpu line but not its offcpu_begin; ended after the dump, the dump holds its
    offcpu_begin alone. Those are not differences; any other is."""
    ts = [e["ts"] for e in dump.events]
    lo, hi = min(ts), max(ts)
    window = collections.Counter(event_key(e) for e in full.events if lo <= e["ts"] <= hi)
    got = collections.Counter(event_key(e) for e in dump.events)
    missing, extra = window - got, got - window
    stretch = lambda e: (e["tid"], e["ts"])
    # Where the dump begins: its start_ts, or under --flight-mb the first record it kept (an
    # offcpu line carries its stretch's start, not when it came: it does not tell).
    kept = min([e["ts"] for e in dump.events if e["ev"] != "offcpu"] or [hi])
    held = {ev: {stretch(e) for e in dump.events if e["ev"] == ev}
            for ev in ("offcpu", "offcpu_begin")}
    for k in list(missing):
        e = json.loads(k)
        if (e["ev"] == "offcpu" and stretch(e) in held["offcpu_begin"]
                and stretch(e) not in held["offcpu"] and e["ts"] + e["dur"] > hi):
            del missing[k]
        elif (e["ev"] == "offcpu_begin" and stretch(e) in held["offcpu"]
                and stretch(e) not in held["offcpu_begin"]
                and (e["ts"] <= dump.header["start_ts"] or e["ts"] < kept)):
            del missing[k]
    return missing, extra


@test
def flight_sigusr1_dump_holds_the_last_seconds_exactly():
    base, raw = "fl", work("fl.raw")
    outs = [work("fl.jsonl"), work("fl.pftrace")]
    args = ["--flight", "2", "--raw", raw]
    for o in outs:
        args += ["-o", o]
    tr, ef, err = start_tracer(args + ["--", FAULTS, "steady", str(STEADY_RATE), str(STEADY_SECS),
                                       str(STEADY_LIVE)], "fl")
    wait_for(err, "tracing")
    time.sleep(10)
    before = boottime_ns()
    tr.send_signal(signal.SIGUSR1)
    after = boottime_ns()
    eq(tr.wait(timeout=STEADY_SECS + 60), 0, "exit code")
    ef.close()
    with open(err) as f:
        log = f.read()
    check_dump_files(base, 1, (".jsonl", ".pftrace"))
    check(not os.path.exists(work("fl.2.jsonl")), "a second dump without a second request")
    check(not os.path.exists(work("fl.jsonl")), "FILE itself written under --flight")
    check("flight recorder: 1 dump" in log and "fl.1.jsonl" in log and "fl.1.pftrace" in log,
          "the summary does not name the dump:\n" + log)

    dump, full = Trace(work("fl.1.jsonl")), full_trace(raw, "fl")
    ts = [e["ts"] for e in dump.events]
    lo, hi = min(ts), max(ts)
    check(abs((hi - lo) / 1e9 - 2.0) <= 0.5, "the dump spans %.3f s, not 2 s" % ((hi - lo) / 1e9))
    # The window ends at the signal (its handler's clock: after `before`, at most a delivery
    # later than `after`); the program fires every 10 ms, so its last event is just before.
    check(hi <= after + int(500e6), "the dump goes past the signal by %.3f s"
          % ((hi - after) / 1e9))
    check(before - hi < 500e6, "the dump ends %.3f s before the signal" % ((before - hi) / 1e9))
    # The model's position when the dump began; a record straggling in the 10 ms reorder
    # window may come after it, a little older.
    check(dump.header["start_ts"] - int(10e6) <= lo, "events before the dump's start_ts")

    # Event by event: what the full trace holds over the window, the dump holds, and no more.
    missing, extra = window_differences(dump, full)
    check(not missing, "%d events of the window missing from the dump, e.g. %s"
          % (sum(missing.values()), next(iter(missing), None)))
    check(not extra, "%d events in the dump that the full trace does not hold, e.g. %s"
          % (sum(extra.values()), next(iter(extra), None)))
    creates = len(dump.by_ev("create"))
    check(abs(creates - 2 * STEADY_RATE) <= 0.25 * 2 * STEADY_RATE,
          "%d creates in 2 s of a program creating %d/s" % (creates, STEADY_RATE))

    # The coroutines alive at the window's start (same incarnation serials: the recorder's
    # model saw the whole capture) are in the dump, from its start.
    start = dump.header["start_ts"]
    alive = {(c["id"], c["uid"]) for c in full.coroutines
             if c["created"] is not None and c["created"] < start
             and (c["exited"] is None or c["exited"] > start)}
    carried = {(c["id"], c["uid"]) for c in dump.coroutines
               if c["created"] is not None and c["created"] < start}
    check(len(alive) >= STEADY_LIVE * 0.9, "only %d coroutines alive at the start" % len(alive))
    eq(carried, alive, "coroutines alive at the window's start")
    for c in dump.coroutines:
        check(c["first_seen"] >= start, "coroutine %s seen %d ns before the window"
              % (c["id"], start - c["first_seen"]))
    # The process, announced before the window, is announced again in the dump.
    proc = lambda t: [{k: r[k] for k in ("pid", "comm", "exe", "mode", "ppid")}
                      for r in t.processes]
    eq(proc(dump), proc(full), "the dump's process records")
    eq(dump.trailer["lost"]["events"], 0, "events lost in the window")
    eq(trace_anomalies(dump.trailer), {}, "anomalies in the dump")


def logged_whys(log):
    """The findings each dump names, from its 'wrote' lines."""
    whys = {}
    for line in log.splitlines():
        m = re.match(r"corobpf: wrote \S+ \(flight dump (\d+): (.*)\)$", line)
        if m:
            whys[int(m.group(1))] = m.group(2)
    return whys


@test
def flight_dump_on_a_finding_fires_once_and_is_valid():
    base = "fo"
    # The ticker beside the long run (the work it holds up) may wait for its worker on a busy
    # machine: not this test's finding.
    args = ["--flight", "1", "--dump-on", "long_run", "--sched-latency", "600000",
            "-o", work("fo.jsonl"), "-o", work("fo.pftrace"), "--raw", work("fo.raw"), "--",
            os.path.join(TESTS_BIN, "bugs"), "long_run"]
    p = corobpf(args)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr)
    bug = [line.split() for line in p.stdout.splitlines() if line.startswith("BUG")]
    eq(len(bug), 1, "the program's BUG line")
    check_dump_files(base, 1, (".jsonl", ".pftrace"))
    check(not os.path.exists(work("fo.2.jsonl")), "one finding, two dumps")
    dump = Trace(work("fo.1.jsonl"))
    found = [r for r in dump.records if r["type"] == "finding"]
    eq([(f["kind"], f["id"]) for f in found], [("long_run", bug[0][2])], "the dump's findings")
    # The window ends where the finding was made: at the end of the long run.
    f = found[0]
    last = max(e["ts"] for e in dump.events)
    check(last >= f["ts"] + f["dur"] - int(20e6), "the dump ends before the finding")
    whys = logged_whys(p.stderr)
    eq(list(whys), [1], "dumps named")
    check(bug[0][2] in whys[1] and "long_run" in whys[1], "the dump names its finding: %r" % whys)


@test
def flight_dump_on_names_each_finding_once():
    # Six coroutines computing 150 ms on fewer CPUs: six long_run findings close together.
    args = ["--flight", "1", "--dump-on", "long_run,stall", "-o", work("fm.jsonl"),
            "--raw", work("fm.raw"), "--", os.path.join(TESTS_BIN, "bugs"), "oversubscribed"]
    p = corobpf(args)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr)
    full = full_trace(work("fm.raw"), "fm")
    want = sorted(r["id"] for r in full.records if r["type"] == "finding"
                  and r["kind"] == "long_run")
    check(want, "no long_run finding in the full trace")
    whys = logged_whys(p.stderr)
    named = sorted(re.findall(r"long_run of \S+ (0x[0-9a-f]+)", " ".join(whys.values())))
    eq(named, want, "findings named by the dumps (each once)")
    check(1 <= len(whys) <= len(want), "%d dumps for %d findings" % (len(whys), len(want)))
    for n in whys:
        Trace(work("fm.%d.jsonl" % n))
        check(n <= len(whys), "dumps numbered from 1 without gaps")


@test
def flight_dump_says_which_files_it_wrote():
    """One dump file's name taken mid-run (after the start's check): the other file is
    written and said to be, the taken one is left alone and named as not written, exit 7."""
    jl, pf = work("fw.1.jsonl"), work("fw.1.pftrace")
    tr, ef, err = start_tracer(["--flight", "2", "-o", work("fw.jsonl"), "-o", work("fw.pftrace"),
                                "--", FAULTS, "steady", "200", "5", "20"], "fw")
    wait_for(err, "tracing")
    with open(pf, "w") as f:
        f.write("planted\n")
    time.sleep(1)
    tr.send_signal(signal.SIGUSR1)
    rc = tr.wait(timeout=60)
    ef.close()
    with open(err) as f:
        log = f.read()
    eq(rc, 7, "exit code (an output could not be written):\n" + log)
    check("corobpf: wrote %s (flight dump 1: SIGUSR1)" % jl in log,
          "the file written is not said to be:\n" + log)
    check("flight dump 1 (SIGUSR1) is incomplete: %s not written" % pf in log,
          "the file not written is not named:\n" + log)
    check("failed" not in log.replace("failed to", ""),
          "the dump is called failed though a file of it was written:\n" + log)
    check("flight recorder: 1 dump of the last 2.0 s: %s (SIGUSR1, not written: %s)" % (jl, pf)
          in log, "the end of the run does not tell the written from the unwritten:\n" + log)
    dump = Trace(jl)
    check(dump.by_ev("create"), "no create in the dump written")
    with open(pf) as f:
        eq(f.read(), "planted\n", "the file at the taken name")


def run_in_pty(args, seconds):
    """corobpf with stderr on a terminal (stdout on a pipe); returns what the terminal got."""
    master, slave = pty.openpty()
    p = subprocess.Popen([COROBPF] + args, stdout=subprocess.PIPE, stderr=slave, stdin=slave)
    os.close(slave)
    got = b""
    end = time.time() + seconds + 60
    while time.time() < end:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(master)
    return p.returncode, got.decode("utf-8", "replace")


@test
def status_line_on_a_terminal_only():
    prog = ["--", FAULTS, "steady", "500", "4", "100"]
    rc, tty = run_in_pty(["-o", work("st.jsonl"), "--force"] + prog, 4)
    eq(rc, 0, "exit code")
    drawn = list(re.finditer(r"\r\x1b\[Kcorobpf: (\d+) s  ([\d,]+) events  ([\d,]+)/s  "
                             r"([\d,]+) lost  ([\d,]+) live  written ([\d.]+ [KMG]?i?B)", tty))
    check(len(drawn) >= 2, "no status line redrawn on the terminal:\n%r" % tty[-2000:])
    events = [int(m.group(2).replace(",", "")) for m in drawn]
    check(events == sorted(events) and events[-1] > 0, "events do not grow: %r" % events)
    check(any(int(m.group(5).replace(",", "")) > 0 for m in drawn), "no live coroutines shown")
    check(any(m.group(6) != "0 B" for m in drawn), "no bytes written shown")
    # Drawn without a newline: whatever comes next (a redraw, a message, the end) erases it
    # first, so no message ever shares its line and it is gone at the end.
    for m in drawn:
        check(tty[m.end():].startswith("\r\x1b[K"), "the status line was not erased before "
              "%r" % tty[m.end():m.end() + 80])
    check("corobpf summary" in tty, "no summary on the terminal")

    rc, tty = run_in_pty(["-q", "-o", work("stq.jsonl"), "--force"] + prog, 4)
    eq(rc, 0, "exit code with -q")
    check("\x1b[K" not in tty and "events  " not in tty, "status line with -q: %r" % tty[-500:])

    errf = work("st.err")
    with open(errf, "w") as ef:
        p = subprocess.run([COROBPF, "-o", work("stf.jsonl"), "--force"] + prog, stderr=ef,
                           stdout=subprocess.PIPE, timeout=60)
    eq(p.returncode, 0, "exit code with stderr a file")
    with open(errf) as f:
        text = f.read()
    check("\x1b[K" not in text and "\r" not in text, "status line in a file: %r" % text[:500])
    check("corobpf summary" in text, "no summary in the file")


@test
def flight_byte_bound_cuts_the_window_and_says_so():
    # 40,000 events/s for 6 s: --flight-mb 1 holds well under the 5 s asked for.
    raw = work("fb.raw")
    tr, ef, err = start_tracer(["--flight", "5", "--flight-mb", "1", "-o", work("fb.jsonl.gz"),
                                "--raw", raw, "--", FAULTS, "steady", "5000", "6", "1000"], "fb")
    wait_for(err, "tracing")
    time.sleep(4)
    tr.send_signal(signal.SIGUSR1)
    eq(tr.wait(timeout=60), 0, "exit code")
    ef.close()
    with open(err) as f:
        log = f.read()
    check(os.path.exists(work("fb.1.jsonl.gz")), "no fb.1.jsonl.gz (the .N goes before .jsonl.gz)")
    check("holds less than 5.0 s: --flight-mb 1 was reached first" in log,
          "the cut window is not said:\n" + log)
    dump, full = Trace(work("fb.1.jsonl.gz")), full_trace(raw, "fb")
    ts = [e["ts"] for e in dump.events]
    lo, hi = min(ts), max(ts)
    check((hi - lo) / 1e9 < 2.5, "the dump spans %.2f s under a 1 MiB bound" % ((hi - lo) / 1e9))
    missing, extra = window_differences(dump, full)
    eq(sum(missing.values()) + sum(extra.values()), 0,
       "events differing from the full trace over the cut window (e.g. %s)"
       % next(iter(missing + extra), None))


@test
def flight_usage_errors():
    for args, says in (
            (["--dump-on", "stall", "-o", work("u.jsonl")], "add --flight SECS"),
            (["--flight-mb", "8", "-o", work("u.jsonl")], "add --flight SECS"),
            (["--flight", "2"], "give -o FILE"),
            (["--flight", "0", "-o", work("u.jsonl")], "invalid --flight"),
            (["--flight", "2", "--dump-on", "stall,nope", "-o", work("u.jsonl")],
             "unknown --dump-on kind 'nope'")):
        p = corobpf(args + ["--", "/bin/true"])
        eq(p.returncode, 2, "exit code of %s" % " ".join(args))
        check(says in p.stderr, "%s: %r not said:\n%s" % (" ".join(args), says, p.stderr))
    p = corobpf(["ps", "--flight", "2", "-p", str(os.getpid())])
    eq(p.returncode, 2, "exit code of ps --flight")
    # FILE.1 already there: refused before the target is touched, unless --force.
    open(work("ex.1.jsonl"), "w").close()
    p = corobpf(["--flight", "2", "-o", work("ex.jsonl"), "--", "/bin/true"])
    eq(p.returncode, 7, "exit code with FILE.1 present (%s)" % p.stderr.strip())
