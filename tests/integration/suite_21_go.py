"""Go, unmodified (issue 15): every goroutine of a Go binary built by Debian's golang-go, with
no trace.Start and no flags, launched (`corobpf -- goprog`) and attached (`corobpf -p`).

The program (progs/go/goprog.go, built by tools/tools.mk) arranges every park it counts and
writes its own truth: each goroutine's goid, the goroutine that ran its `go` statement, the
function it runs, its channel waits (exactly: a sender sends only once runtime.Stack shows
the receiver parked) and the channel, its parks on a sync.Mutex, in a select and in the
network poller, its sleeps, its Gosched calls, whether it ends; one goroutine leaked on a
channel, one blocked in read(2) on a blocking pipe, 2,000 that start and end. In attach
mode some of them are parked before the attach, the leaked one among them. The trace must
hold each as the program says, flag exactly the leaked one (a `leak`: parked when the program
exits) and the blocked one (`blocking`), nothing else, and leave the program's output and exit code as they are
untraced. A second scenario (goprog spin, one P, no asynchronous
preemption) makes a long_run and a sched_latency due, each bounded by the program's own
clock readings.

A second oracle: the same program under Go's own execution tracer (runtime/trace, GO_TRACE),
in the same run as corobpf; `go tool trace -d` lists its events, and its goroutine creations
(with their parents) and ends must match corobpf's, and its blocks (receive, sync, select,
network) and sleeps the truth's.

Outside CI a missing go skips these tests, saying why; in CI (where tools/deps.sh installs
golang-go) it fails."""
import shutil

from harness import *  # noqa: F401,F403

GOPROG = os.path.join(TESTS_BIN, "go", "goprog")
GOPROG_STRIPPED = os.path.join(TESTS_BIN, "go", "goprog-stripped")
# Thresholds that depend on the machine's load are out of the way: a busy machine may hold
# a goroutine runnable for 10 ms, run one 50 ms without a switch, or spawn 2,000 goroutines
# within a second. Stall (1 s) and blocking (10 ms) keep their defaults: the program's
# scenario is what makes those findings due, or not.
THRESHOLDS = ["--sched-latency=100000", "--long-run=100000", "--spawn-storm=1000000"]
# What the program's scenario defines (goprog.go): the read(2) lasts at least this long.
BLOCK_MIN_NS = 300 * 1000000
# Goroutines of the runtime (and of runtime/trace), which runtime.Stack does not list.
RUNTIME_PREFIXES = ("runtime.", "runtime/trace.")
# A process's exit after its last traced event: its threads' teardown (exit_group).
EXIT_SLACK_NS = 5000000


def need_go(binary):
    """True if go is installed and binary is built; else skips (outside CI) or fails."""
    if not shutil.which("go"):
        why = "go is not installed (golang-go: install with tools/deps.sh)"
        if CI:
            raise Failure(why)
        print("     skipped: %s" % why, flush=True)
        return False
    check(os.path.exists(binary), "%s is not built (make tools, with go installed)" % binary)
    return True


def gid(n):
    return "0x%x" % n


def untraced_stdout(binary, args=(), env=None):
    p = run([binary] + list(args), env=env)
    eq(p.returncode, 0, "%s untraced: exit code (%s)" % (binary, p.stderr.strip()))
    return p.stdout


def read_go_truth(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Mismatches:
    """eq and check that go on after a mismatch: the failure lists every kind of disagreement
    (the same one on 2,000 goroutines once, with its count and first example), so that one
    run says all a capture gets wrong."""

    def __init__(self):
        self.seen = {}

    def check(self, cond, msg):
        if not cond:
            key = re.sub(r"0x[0-9a-f]+|\d+", "N", msg.split(":")[0])
            n, first = self.seen.get(key, (0, msg))
            self.seen[key] = (n + 1, first)
        return cond

    def eq(self, got, want, what):
        return self.check(got == want, "%s: got %r, want %r" % (what, got, want))

    def done(self, title):
        if self.seen:
            raise Failure("%s: %d kinds of mismatch\n" % (title, len(self.seen)) + "\n".join(
                "%s%s" % (first, " (and %d more like it)" % (n - 1) if n > 1 else "")
                for n, first in list(self.seen.values())[:40]))


def truth_main(truth):
    return [t for t in truth["goroutines"] if t["role"] == "main"][0]["goid"]


def check_go(trace, truth, pid, launched, system_wide=False):
    """The trace against the program's truth: every goroutine, its parent, name, waits on its
    channel, sleeps, yields, end; the runtime's own goroutines as the only others. -a
    (system_wide): records of the machine's other processes are no fault of the trace."""
    m = Mismatches()
    check, eq = m.check, m.eq
    try:
        if system_wide:
            t = trace.trailer
            eq((t["lost"]["events"], t["lost"]["string_faults"], t["lost"]["bad_records"]),
               (0, 0, 0), "events lost, string faults, bad ring records")
            # -a traces every program with probes on the machine, and the trailer's anomalies
            # are the whole trace's: other programs' late records (the reorder window is
            # global) or spans they end unopened are no fault of this one. The Go program's
            # own events are checked against its truth one by one below: an anomaly of its
            # own would show there. Execs of programs without probes are not recorded.
            eq(t["anomalies"]["unknown_pid"], 0, "records of processes never announced")
        else:
            check_clean(trace)
    except Failure as e:
        check(False, "trailer: %s" % e)
    eq(truth["pid"], pid, "the truth's pid")
    eq(truth["mode"], "launch" if launched else "attach", "the program's mode")
    mine = [c for c in trace.coroutines if c["pid"] == pid]
    by_id = {}
    for c in mine:
        check(c["id"] not in by_id, "goroutine %s appears twice" % c["id"])
        by_id[c["id"]] = c
    want = {gid(g["goid"]): g for g in truth["goroutines"]}
    missing = sorted(set(want) - set(by_id), key=lambda s: int(s, 16))
    check(not missing, "%d of the program's %d goroutines missing from the trace: %s" % (
        len(missing), len(want), missing[:10]))
    others = [c for c in mine if c["id"] not in want]
    bad = [(c["id"], c["name"]) for c in others if not c["name"].startswith(RUNTIME_PREFIXES)]
    check(not bad, "goroutines the program did not start and the runtime did not either: %s"
          % bad[:10])

    evs = [e for e in trace.events if e["pid"] == pid]
    creates, exits, outs, ins, seq = {}, {}, {}, {}, {}
    for e in evs:
        if e["ev"] == "ready":
            seq.setdefault(e["id"], []).append(e)
        elif e["ev"] == "switch" and e["from"] != "0x0":
            seq.setdefault(e["from"], []).append(e)
        if e["ev"] == "create":
            creates.setdefault(e["id"], []).append(e)
        elif e["ev"] == "exit":
            exits.setdefault(e["id"], []).append(e)
        elif e["ev"] == "switch":
            if e["from"] != "0x0":
                outs.setdefault(e["from"], []).append(e)
            if e["to"] != "0x0":
                ins.setdefault(e["to"], []).append(e)

    for i, t in want.items():
        c = by_id.get(i)
        if c is None:
            continue
        where = "goroutine %s (%s, %s)" % (i, t["name"], t["role"])
        eq(c["name"], t["name"], where + " name")
        before = not launched and (t.get("pre_attach", False) or t["role"] == "main")
        if before and c["parent"] == "0x0":
            pass  # made before the attach: Go 1.19's runtime.g keeps no parent goid to read
        else:
            eq(c["parent"], gid(t["parent"]), where + " parent")
        eq(c["running_ns"] + c["runnable_ns"] + c["suspended_ns"] + c["new_ns"] + c["unknown_ns"],
           c["ended"] - c["first_seen"], where + " state times add up")
        eq(c["unknown_ns"], 0, where + " unknown time")
        if before:
            eq(c["created"], None, where + ": alive before the attach, yet a create was seen")
        else:
            check(c["created"] is not None, where + ": its creation was not seen")
            cr = creates.get(i, [])
            if eq(len(cr), 1, where + " create events"):
                eq(cr[0]["parent"], gid(t["parent"]), where + " create event's parent")
        # A switch out at the instant it was first seen is the state it was found in at the
        # attach, not a park that happened in the trace.
        parks = [e for e in outs.get(i, []) if not (before and e["ts"] == c["first_seen"])]
        by_reason = {}
        for e in parks:
            by_reason.setdefault(e["reason"], []).append(e)
        waits = by_reason.get("wait", [])
        exact = all(t[k] >= 0 for k in ("chan_waits", "sync_waits", "select_waits", "io_waits"))
        if exact:
            # Channel, sync.Mutex and select parks are all waits; the runtime's object for a
            # channel wait is the channel.
            want_waits = t["chan_waits"] + t["sync_waits"] + t["select_waits"] - \
                (1 if before else 0)
            eq(len(waits), want_waits, where + " waits (reason wait: channel, mutex, select)")
            if t.get("chan"):
                on_chan = t["chan_waits"] - (1 if before else 0)
                eq(len([e for e in waits if e["obj"] == t["chan"]]), on_chan,
                   where + " waits on its channel (obj %s)" % t["chan"])
            eq(len(by_reason.get("io", [])), t["io_waits"], where + " network poller waits "
               "(reason io)")
        if t["sleeps"] >= 0:
            eq(len(by_reason.get("sleep", [])), t["sleeps"], where + " sleeps")
        # Wakers: a new goroutine is made ready by the one that ran its `go` statement; the
        # parks that main ends (its sends, its Unlock) are ended by main.
        readies = [e for e in seq.get(i, []) if e["ev"] == "ready"]
        if not before and eq(bool(readies), True, where + ": never made ready"):
            eq(readies[0]["waker"], gid(t["parent"]), where + " first ready's waker")
        if t["role"].startswith(("parked", "pinger", "locker", "selecter")):
            after_wait = [b for a, b in zip(seq.get(i, []), seq.get(i, [])[1:])
                          if a["ev"] == "switch" and a["reason"] == "wait" and b["ev"] == "ready"]
            # Attached, the park it was found in shows as a switch out at its first sight
            # only if the capture writes one.
            found = any(e["ts"] == c["first_seen"] for e in outs.get(i, []))
            eq(len(after_wait), t["chan_waits"] + t["sync_waits"] + t["select_waits"] -
               (1 if before and not found else 0), where + " readies right after its waits")
            eq(sorted({e["waker"] for e in after_wait}), [gid(truth_main(truth))],
               where + " wakers of its waits (main sent, main unlocked)")
        if t["gosched"] > 0:
            # Preemption (a stop-the-world of main's runtime.Stack, sysmon) may add yields.
            check(len(by_reason.get("yield", [])) >= t["gosched"], "%s yields: got %d, want at "
                  "least its %d Gosched calls" % (where, len(by_reason.get("yield", [])),
                                                  t["gosched"]))
        if t["exits"]:
            eq(c["end"], "exit", where + " end")
            eq(len(exits.get(i, [])), 1, where + " exit events")
        else:
            eq(c["end"], "process_exit", where + " end (alive when the process exited)")
            eq(len(exits.get(i, [])), 0, where + " exit events")
        if before and t.get("pre_attach"):
            # Found parked on its channel at the attach: suspended (wait) from its first
            # sight until main released it (or to the end, for the leaked one).
            check(c["suspended_by_reason"].get("wait", 0) > 0,
                  where + ": parked on a channel at the attach, no time suspended in wait: %s"
                  % c["suspended_by_reason"])
            at = [e for e in outs.get(i, []) if e["ts"] == c["first_seen"]]
            for e in at:
                if t.get("chan"):
                    eq((e["reason"], e["obj"]), ("wait", t["chan"]), where + " state at the attach")
            first_in = ins.get(i, [])
            if t["exits"]:
                check(first_in, where + ": released after the attach, never switched in")
    leaked = [t for t in truth["goroutines"] if t["role"] == "leaked"][0]
    c = by_id.get(gid(leaked["goid"]), {})
    eq((c.get("state_at_end"), c.get("reason_at_end"), c.get("obj_at_end")),
       ("suspended", "wait", leaked["chan"]), "the leaked goroutine's state at the end")
    m.done("the trace against the program's truth")


def check_findings(trace, truth, pid, launched):
    """Exactly: the leaked goroutine a `leak` on its channel (parked when the program exited:
    leaked, as goleak counts them; Go's runtime loses no wakeup), the blocked one `blocking`
    for at least the time the program held it in read(2) (main sleeps meanwhile, and its
    timer makes it ready: work that waited). Under Go's own tracer, its writer goroutine may
    block in write(2). A goroutine parked before the attach is no stall, whatever it waited
    (how long before is not known). The runtime's own goroutines idle-parked for good
    (forcegchelper, the sweeper, the scavenger, the finalizer goroutine) wait for work: no
    finding."""
    g = {t["role"]: t for t in truth["goroutines"]}
    leaked, blocked = gid(g["leaked"]["goid"]), gid(g["syscall"]["goid"])
    fs = [r for r in trace.records if r["type"] == "finding" and r["pid"] == pid]
    m = Mismatches()
    check, eq = m.check, m.eq
    rest = []
    for f in fs:
        what = "finding %s on %s (%s)" % (f["kind"], f["id"], f.get("name"))
        if f["kind"] == "leak" and f["id"] == leaked:
            eq((f["state"], f["reason"], f["obj"], f["open"]),
               ("suspended", "wait", g["leaked"]["chan"], True), what)
        elif f["kind"] == "blocking" and f["id"] == blocked:
            check(f["dur"] >= BLOCK_MIN_NS, "%s: %d ns, the program held it %d ns at least"
                  % (what, f["dur"], BLOCK_MIN_NS))
        elif f["kind"] == "blocking" and (f.get("name") or "").startswith("runtime/trace."):
            pass  # Go's tracer writing its trace: a write(2) that may well block on a disk
        else:
            rest.append(f)
    check(not rest, "findings the program did not make due: %s" % [
        (f["kind"], f["id"], f.get("name"), f.get("reason"), f.get("dur")) for f in rest])
    kinds = sorted((f["kind"], f["id"]) for f in fs if f not in rest and
                   not (f.get("name") or "").startswith("runtime/trace."))
    eq(kinds, sorted([("blocking", blocked), ("leak", leaked)]), "findings")
    m.done("findings")


def all_of(*checks):
    """Every check run, every failure told."""
    errs = []
    for fn in checks:
        try:
            fn()
        except Failure as e:
            errs.append(str(e))
    if errs:
        raise Failure("\n".join(errs))


def go_launch(binary, name, env=None, args=(), extra=THRESHOLDS):
    plain = untraced_stdout(binary, args, env)
    tr, _, p, out, raw = trace_launch(name, [binary] + list(args), extra=extra, env=env)
    eq(p.stdout, plain, "the program's output under corobpf")
    truth = read_go_truth(work(name + ".truth"))
    pid = tr.header["pids"][0]
    ends = [(r.get("exit_code"), r.get("signal")) for r in tr.records
            if r["type"] == "process_exit" and r["pid"] == pid]
    eq(ends, [(0, None)], "the program's end in the trace (exit code, signal)")
    # The exit is stamped when the process's last thread exited, not when corobpf read its
    # pidfd (after draining the ring): main, running until the exit, ends there.
    last = max(e["ts"] for e in tr.events if e["pid"] == pid)
    end = [r["ts"] for r in tr.records if r["type"] == "process_exit" and r["pid"] == pid][0]
    check(end - last <= EXIT_SLACK_NS, "process_exit %d ns after the process's last event "
          "(want at most %d)" % (end - last, EXIT_SLACK_NS))
    return tr, truth, pid, out, raw


@test
def go_launch_goroutines():
    """corobpf -- goprog: every goroutine as the program says, findings exactly."""
    if not need_go(GOPROG):
        return
    db = work("go-launch.db")
    tr, truth, pid, out, raw = go_launch(GOPROG, "go-launch", extra=THRESHOLDS + ["-o", db])
    all_of(lambda: check_go(tr, truth, pid, launched=True),
           lambda: check_findings(tr, truth, pid, launched=True),
           lambda: check_replay(out, raw, THRESHOLDS),
           lambda: check_sqlite(db, tr, pid))


@test
def go_launch_park_stacks():
    """corobpf --stacks -- goprog: each channel wait of the program's goroutines carries where
    the goroutine parked (walked from its g.sched in BPF, not the system stack the probe runs
    on): runtime.gopark, in runtime.chanrecv, under the goroutine's own function."""
    launch_park_stacks(GOPROG, "go-stacks")


@test
def go_launch_stripped_park_stacks():
    """The same with the program built -ldflags='-s -w' (no symbol table, no DWARF): its frames
    named from Go's own function table (.gopclntab), as the unstripped build's are."""
    launch_park_stacks(GOPROG_STRIPPED, "go-stripped-stacks")


def launch_park_stacks(binary, name):
    if not need_go(binary):
        return
    tr, truth, pid, out, raw = go_launch(binary, name, extra=THRESHOLDS + ["--stacks"])
    stacks = {r["id"]: [f.get("func", "?") for f in r["frames"]]
              for r in tr.records if r["type"] == "stack" and r["pid"] == pid}
    m = Mismatches()
    for t in truth["goroutines"]:
        if not t.get("chan") or t["chan_waits"] <= 0:
            continue
        where = "goroutine %s (%s, %s)" % (gid(t["goid"]), t["name"], t["role"])
        waits = [e for e in tr.events if e["pid"] == pid and e["ev"] == "switch" and
                 e["from"] == gid(t["goid"]) and e["reason"] == "wait" and
                 e["obj"] == t["chan"]]
        m.eq(len(waits), t["chan_waits"], where + ": waits on its channel")
        for e in waits:
            fns = stacks.get(e.get("stack"), [])
            m.check(fns[:1] == ["runtime.gopark"] and "runtime.chanrecv" in fns and
                    t["name"] in fns, where + ": a channel wait's stack is %s, want "
                    "runtime.gopark ... runtime.chanrecv ... %s" % (fns, t["name"]))
    m.done("park stacks of the program's channel waits")
    check_replay(out, raw, THRESHOLDS)


def check_sqlite(db, trace, pid):
    """The SQLite output holds the same goroutines as the JSONL, each as it says."""
    con = sqlite3.connect(db)
    try:
        rows = sorted(con.execute("SELECT id, parent_id, name, end FROM coroutines WHERE pid = ?",
                                  (pid,)))
    finally:
        con.close()
    want = sorted((int(c["id"], 16), int(c["parent"], 16), c["name"], c["end"])
                  for c in trace.coroutines if c["pid"] == pid)
    eq(len(rows), len(want), "goroutines in the SQLite output")
    eq([r for r in rows if r not in set(want)][:5], [], "SQLite goroutines unlike the JSONL's")


def launch_variant(binary, name):
    if not need_go(binary):
        return
    tr, truth, pid, _, _ = go_launch(binary, name)
    all_of(lambda: check_go(tr, truth, pid, launched=True),
           lambda: check_findings(tr, truth, pid, launched=True))


@test
def go_launch_stripped():
    """The same program built with -ldflags='-s -w' (no symbols, no DWARF): the same truth."""
    launch_variant(GOPROG_STRIPPED, "go-stripped")


@test
def go_launch_no_dwarf():
    """Built with -ldflags=-w (symbols, no DWARF): the same truth."""
    launch_variant(os.path.join(TESTS_BIN, "go", "goprog-nodwarf"), "go-nodwarf")


@test
def go_launch_pie():
    """Built with -buildmode=pie (loaded at a random base): the same truth."""
    launch_variant(os.path.join(TESTS_BIN, "go", "goprog-pie"), "go-pie")


# The spin scenario's slack between the program's clock readings and the trace's (the same
# clock rate; a reading is a few instructions away from the transition it brackets).
SLACK_NS = 1000000


@test
def go_spin_long_run_and_sched_latency():
    """One P, no asynchronous preemption: a goroutine spinning with no call in its loop (some
    200 ms of CPU time: a long run counts time on a CPU only) while another is runnable is a
    long_run for at least its spin, and the goroutine queued behind it a sched_latency for at
    most its own measured wait; nothing else is flagged (the runtime's own goroutines readied
    meanwhile truly wait for the P too). Main's last run ends with the process, stamped when
    its last thread exited: some 9 ms of its own work (writing the truth) and the teardown,
    no long_run (it was one when the exit was stamped at corobpf's reading of the pidfd)."""
    if not need_go(GOPROG):
        return
    env = {"GOMAXPROCS": "1", "GODEBUG": "asyncpreemptoff=1"}
    tr, truth, pid, _, _ = go_launch(GOPROG, "go-spin", env=env, args=["spin"], extra=[])
    m = Mismatches()
    check, eq = m.check, m.eq
    try:
        check_clean(tr)
    except Failure as e:
        check(False, "trailer: %s" % e)
    eq(truth["mode"], "spin", "the program's mode")
    by_id = {c["id"]: c for c in tr.coroutines if c["pid"] == pid}
    role = {t["role"]: gid(t["goid"]) for t in truth["goroutines"]}
    for t in truth["goroutines"]:
        c = by_id.get(gid(t["goid"]))
        where = "goroutine %s (%s, %s)" % (gid(t["goid"]), t["name"], t["role"])
        if not check(c is not None, where + ": not in the trace"):
            continue
        eq((c["name"], c["parent"], c["end"]),
           (t["name"], gid(t["parent"]), "exit" if t["exits"] else "process_exit"),
           where + " (name, parent, end)")
    # The spinner's run, as the program saw it: from its start to the starved goroutine's first
    # instruction (spin_ns would add that one's run and the switch back).
    spin, wait = truth["spin_run_ns"], truth["starved_wait_ns"]
    fs = [r for r in tr.records if r["type"] == "finding" and r["pid"] == pid]
    got = {}
    for f in fs:
        if f["kind"] == "sched_latency" and (f.get("name") or "").startswith(RUNTIME_PREFIXES):
            continue
        got.setdefault((f["kind"], f["id"]), []).append(f)
    want = set()
    if spin >= 50 * 1000000:
        want.add(("long_run", role["spinner"]))
    if spin >= 10 * 1000000 + SLACK_NS:
        want.add(("sched_latency", role["starved"]))
    eq(sorted(got), sorted(want), "findings (spun %d ns, the starved one waited %d ns)"
       % (spin, wait))
    for f in got.get(("long_run", role["spinner"]), []):
        check(spin - SLACK_NS <= f["dur"] <= spin + SLACK_NS, "long_run: %d ns, the spin "
              "took %d ns up to the starved goroutine's start" % (f["dur"], spin))
    for f in got.get(("sched_latency", role["starved"]), []):
        check(spin - SLACK_NS <= f["dur"] <= wait + SLACK_NS, "sched_latency: %d ns, want "
              "between the spin (%d ns) and the wait the program measured (%d ns)"
              % (f["dur"], spin, wait))
    m.done("the spin scenario")


@test
def go_attach_goroutines():
    """corobpf -p on a Go program whose goroutines are already parked (the leaked one among
    them): each found in its state, the rest as launched."""
    if not need_go(GOPROG):
        return
    plain = untraced_stdout(GOPROG)
    name = "go-attach"
    truth_path, go_file, out = work(name + ".truth"), work(name + ".go"), work(name + ".jsonl")
    raw = work(name + ".raw")
    e = dict(os.environ, COROBPF_TRUTH=truth_path)
    prog = subprocess.Popen([GOPROG, "--wait", go_file], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=e, text=True)
    tr = None
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "goprog did not announce itself: %r" % line)
        pid = int(line[1])
        eq(pid, prog.pid, "goprog's pid")
        tr, ef, err = start_tracer(["-p", str(pid), "-o", out, "--raw", raw] + THRESHOLDS, name)
        end = time.time() + 60
        while True:
            with open(err) as f:
                text = f.read()
            if "Ctrl-C to stop" in text:
                break
            if tr.poll() is not None:
                raise Failure("corobpf -p %d exited %d before tracing:\n%s"
                              % (pid, tr.returncode, text))
            check(time.time() < end, "corobpf -p never started tracing:\n%s" % text)
            time.sleep(0.05)
        open(go_file, "w").close()
        stdout, stderr = prog.communicate(timeout=120)
        tr.wait(timeout=120)
        ef.close()
    finally:
        for p in (prog, tr):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    with open(err) as f:
        errtext = f.read()
    eq(prog.returncode, 0, "goprog's exit code (%s)" % stderr.strip())
    eq(tr.returncode, 0, "corobpf -p exit code (%s)" % errtext.strip())
    eq(stdout, plain, "the program's output under corobpf (after its READY line)")
    trace = Trace(out)
    truth = read_go_truth(truth_path)
    check(any(p["pid"] == pid and p["mode"] == "attached" for p in trace.processes),
          "no attached process record for %d" % pid)
    all_of(lambda: check_go(trace, truth, pid, launched=False),
           lambda: check_findings(trace, truth, pid, launched=False),
           lambda: check_replay(out, raw, THRESHOLDS))


@test
def go_system_wide():
    """corobpf -a, no other flag: a Go program running before it (its goroutines found parked,
    as attached) and one started after it (traced from its exec), each exactly as it says;
    only the test's own processes are checked (the machine may run other programs)."""
    if not need_go(GOPROG):
        return
    name = "go-all"
    out, err = work(name + ".jsonl"), work(name + ".err")
    t_before, t_after, go_file = work(name + "-1.truth"), work(name + "-2.truth"), \
        work(name + ".go")
    before = subprocess.Popen([GOPROG, "--wait", go_file], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, COROBPF_TRUTH=t_before))
    ef = open(err, "w")
    tr = None
    try:
        line = before.stdout.readline().split()
        check(line and line[0] == "READY", "goprog did not announce itself: %r" % line)
        pid_before = int(line[1])
        tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out] + THRESHOLDS, stderr=ef,
                              stdout=ef)
        wait_for(err, "tracing every", timeout=60)
        after = run([GOPROG], env={"COROBPF_TRUTH": t_after})
        eq(after.returncode, 0, "goprog started after corobpf -a (%s)" % after.stderr.strip())
        open(go_file, "w").close()
        _, stderr = before.communicate(timeout=120)
        eq(before.returncode, 0, "goprog running before corobpf -a (%s)" % stderr.strip())
        time.sleep(0.3)
    finally:
        if tr is not None:
            tr.send_signal(signal.SIGINT)
            tr.wait(timeout=60)
        ef.close()
        if before.poll() is None:
            before.kill()
            before.wait()
    eq(tr.returncode, 0, "corobpf -a exit code")
    trace = Trace(out)
    truth_after = read_go_truth(t_after)
    pid_after = truth_after["pid"]
    pids = {p["pid"] for p in trace.processes}
    check({pid_before, pid_after} <= pids, "processes %s, want %s among them"
          % (sorted(pids)[:20], [pid_before, pid_after]))
    all_of(lambda: check_go(trace, truth_after, pid_after, launched=True, system_wide=True),
           lambda: check_go(trace, read_go_truth(t_before), pid_before, launched=False,
                            system_wide=True))


# ---- attaches that come and go under load ----

GOLOAD = os.path.join(TESTS_BIN, "go", "goload")
LOAD_ATTACHES = 20
# How long each attach traces once it says it is tracing.
LOAD_WINDOW_S = 0.5
# A sentinel parked this long before an attach is parked at it (its receive is a few
# instructions after the time it wrote down).
LOAD_PARK_MARGIN_NS = 20 * 1000000
# A goroutine found runnable at the attach runs within this long (the program has two Ps and
# keeps each busy with goroutines that end at once); one runnable for longer from its first
# sight to the end, never run, is a goroutine that was not there.
LOAD_RUNNABLE_MAX_NS = 300 * 1000000


def boottime():
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def read_load_truth(path):
    """goload's truth: its pid, the snapshots (t0, t1, {goid: (name, status)}), the
    sentinels."""
    pid, snaps, sentinels = None, [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "pid" in r:
                pid = r["pid"]
            elif "snap" in r:
                snaps.append((r["snap"][0], r["snap"][1],
                              {g: (n, st) for g, n, st in r["gs"]}))
            else:
                sentinels.append(r)
    return pid, snaps, sentinels


def go_name(goid, traceback_name):
    """The name corobpf gives a goroutine Go's traceback names traceback_name: that name; the
    main goroutine (goroutine 1, whose outermost printed frame is main.main) is `main`, as
    every family's main context is (docs/go.md)."""
    return "main" if goid == 1 else traceback_name


def load_session(i, pid, results):
    """One attach: corobpf -p until LOAD_WINDOW_S after it says it is tracing; its window
    [a, b] by CLOCK_BOOTTIME read here (the trace holds at least that)."""
    name = "goload-%02d" % i
    out, err = work(name + ".jsonl"), work(name + ".err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-p", str(pid), "-o", out] + THRESHOLDS, stderr=ef,
                              stdout=ef)
        a = b = None
        try:
            end = time.time() + 120
            while time.time() < end and tr.poll() is None:
                with open(err) as f:
                    if "tracing " in f.read():
                        a = boottime()
                        break
                time.sleep(0.02)
            if a is not None:
                time.sleep(LOAD_WINDOW_S)
                b = boottime()
            if tr.poll() is None:
                tr.send_signal(signal.SIGINT)
            tr.wait(timeout=120)
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
    with open(err) as f:
        results.append((i, out, a, b, tr.returncode, f.read()))


def check_load_trace(m, i, out, a, b, pid, snaps, sentinels):
    """One attach's trace against goload's truth: no goroutine twice, none missed, each named
    as Go's traceback names it, none that was not there. Each kind of mismatch is told once,
    with how many more there are (Mismatches)."""
    trace = Trace(out)
    t = trace.trailer
    m.eq(t["lost"]["events"], 0, "events lost (attach %d)" % i)
    # Known, rare disagreements under load, open (the session's note): about 1 attach in 10,
    # also on an idle machine, counts one thread_desync (two sessions attached at the same
    # moment both did), one switch_from_mismatch or one recreated_live, or late records (a
    # probe preempted between its stamp and its submit for longer than the reorder window).
    # Each is counted and said in the summary; allowed twice per attach. Every other anomaly
    # is not, and what the issue asks is checked below whatever they say: no goroutine twice,
    # none missed, each named as Go names it, parked ones parked on their channel.
    RACES = ("thread_desync", "switch_from_mismatch", "recreated_live", "late_records")
    m.eq(trace_anomalies(t, RACES), {}, "anomalies (attach %d)" % i)
    for k in RACES:
        m.check(t["anomalies"].get(k, 0) <= 2 or (k == "late_records" and
                                                   t["anomalies"].get(k, 0) <= 100),
                "%s %d (attach %d)" % (k, t["anomalies"].get(k, 0), i))
    mine = [c for c in trace.coroutines if c["pid"] == pid]
    by_id = {}
    for c in mine:
        what = "attach %d, goroutine %s (%s)" % (i, c["id"], c["name"])
        m.check(c["id"] not in by_id, "a goroutine twice: " + what)
        by_id[c["id"]] = c
        m.check(c["end"] != "superseded", "a goroutine ended superseded: " + what)
        m.check(not c["name"].startswith("0x"), "a goroutine named by an address: " + what)
        if c["created"] is None and c["switch_ins"] == 0 and \
                c.get("state_at_end") == "runnable" and c["runnable_ns"] > LOAD_RUNNABLE_MAX_NS:
            m.check(False, "a goroutine found runnable at the attach that never runs: %s, "
                    "runnable %d ms" % (what, c["runnable_ns"] // 1000000))
    # Named as Go names them: the goroutines the runtime listed while the attach traced (one
    # that ended while the attach read the list is not named: docs/go.md).
    names = {}
    for t0, t1, gs in snaps:
        if t0 > a and t1 < b:
            for g, (n, _) in gs.items():
                if n:
                    names[g] = n
            missing = sorted(g for g in gs if gid(g) not in by_id)
            m.check(not missing, "goroutines the runtime listed within the window missing "
                    "from the trace: attach %d, at %d (window %d..%d) %d of %d, first %s" % (
                        i, t0, a, b, len(missing), len(gs), [(g, gs[g]) for g in missing[:5]]))
    for i_, c in by_id.items():
        g = int(i_, 16)
        if g in names:
            m.eq(c["name"], go_name(g, names[g]), "a goroutine's name, against Go's "
                 "traceback: attach %d, goroutine %s" % (i, i_))
    switches = {}
    for e in trace.events:
        if e["pid"] == pid and e["ev"] == "switch":
            for k in {e["from"], e["to"]}:
                switches.setdefault(k, []).append(e)
    for s in sentinels:
        if s["parked"] + LOAD_PARK_MARGIN_NS > a or s["released"] < b:
            continue
        c = by_id.get(gid(s["sentinel"]))
        what = "attach %d, goroutine %s parked on %s across the window" % (
            i, gid(s["sentinel"]), s["chan"])
        if not m.check(c is not None, "a sentinel missing: " + what):
            continue
        m.eq(c["name"], "main.sentinel", "a sentinel's name: " + what)
        # Parked on its channel by the window's start (found so by the walk, or seen to park
        # after the probes were in place), and not switched in again until the program
        # released it (after the window).
        sw = [e for e in switches.get(c["id"], []) if e["ts"] < s["released"]]
        before = [e for e in sw if e["ts"] <= a]
        m.eq([(e["from"] == c["id"], e["reason"], e["obj"]) for e in before[-1:]],
             [(True, "wait", s["chan"])],
             "a sentinel's last switch before the window (out, reason, object): " + what)
        m.eq([e["ts"] for e in sw if e["ts"] > a], [],
             "a sentinel's switches in the window before its release: " + what)


@test
def go_attach_under_load():
    """20 attaches (`corobpf -p`, two at a time) come and go on a Go program that creates
    goroutines as fast as it can and runs a net/http server and its clients in the same
    process (progs/go/goload.go). Each trace against what Go's own runtime said meanwhile
    (runtime.Stack(all) every 50 ms, the world stopped, stamped by CLOCK_BOOTTIME): no
    goroutine twice, none ended `superseded`, no anomaly; every goroutine the runtime listed
    while the attach traced is in its trace; each named as Go's traceback names it (a closure
    `pkg.fn.funcN`, not a function it calls; `go f(x)`: f); a goroutine parked on its channel
    across the window suspended on that channel throughout; none found runnable that never
    runs (a dead goroutine's g, read as it was being reused)."""
    if not need_go(GOLOAD):
        return
    stop, truth = work("goload.stop"), work("goload.truth")
    prog = subprocess.Popen([GOLOAD, stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, COROBPF_TRUTH=truth))
    results = []
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "goload did not announce itself: %r" % line)
        pid = int(line[1])

        def worker(first):
            if first:
                time.sleep(1.0)
            for i in range(first, LOAD_ATTACHES, 2):
                load_session(i, pid, results)

        import threading
        ws = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        open(stop, "w").close()
        _, stderr = prog.communicate(timeout=120)
    finally:
        if prog.poll() is None:
            prog.kill()
            prog.wait()
    eq(prog.returncode, 0, "goload's exit code (%s)" % stderr.strip()[-500:])
    tpid, snaps, sentinels = read_load_truth(truth)
    eq(tpid, pid, "the truth's pid")
    m = Mismatches()
    eq(len(results), LOAD_ATTACHES, "attaches made")
    for i, out, a, b, rc, errtext in sorted(results):
        if not m.eq(rc, 0, "corobpf's exit code (attach %d, %s)" % (i, errtext.strip()[-300:])):
            continue
        if not m.check(a is not None, "an attach never said it was tracing (attach %d)" % i):
            continue
        check_load_trace(m, i, out, a, b, pid, snaps, sentinels)
    m.done("attaches under load against the runtime's own lists")


# ---- the second oracle: Go's own execution tracer ----

GO_EVENT = re.compile(r"^(\d+) (\w+) p=(-?\d+) g=(\d+) off=\d+(.*)$")


def go_trace_events(path):
    """`go tool trace -d`: the parsed events of a runtime/trace file, as (name, g, args)."""
    p = run(["go", "tool", "trace", "-d", path], env={"GOCACHE": work("gocache")})
    eq(p.returncode, 0, "go tool trace -d %s (%s)" % (path, p.stderr.strip()[-500:]))
    evs = []
    for line in p.stdout.splitlines():
        m = GO_EVENT.match(line)
        check(m, "go tool trace -d: unexpected line %r" % line)
        evs.append((m.group(2), int(m.group(4)), m.group(5).split()))
    return evs


def go_trace_facts(evs):
    """From Go's own trace: goroutines alive when it started, those created after (child ->
    parent), those that ended, and per (goroutine, event) its blocks and sleeps."""
    alive, created, ended, blocks = set(), {}, set(), {}
    started = False
    for name, g, args in evs:
        if name == "ProcStart":
            started = True
        elif name == "GoCreate":
            child = int(args[0].split("=")[1])  # " g=CHILD stack=N"
            if started:
                check(child not in created, "Go's trace creates goroutine %d twice" % child)
                created[child] = g
            else:
                alive.add(child)  # listed by trace.Start, as it found them
        elif name == "GoEnd":
            ended.add(g)
        elif name.startswith("GoBlock") or name == "GoSleep":
            blocks[(g, name)] = blocks.get((g, name), 0) + 1
    check(started and alive, "Go's trace has no start (%d events)" % len(evs))
    return alive, created, ended, blocks


@test
def go_vs_go_tracer():
    """Run under corobpf and runtime/trace at once: corobpf's goroutine creations, parents
    and ends are Go's own, and both agree with the program's truth."""
    if not need_go(GOPROG):
        return
    gotrace = work("go-tracer.gotrace")
    tr, truth, pid, _, _ = go_launch(GOPROG, "go-tracer", env={"GO_TRACE": gotrace})
    all_of(lambda: check_go(tr, truth, pid, launched=True),
           lambda: check_findings(tr, truth, pid, launched=True),
           lambda: against_go_tracer(tr, truth, pid, gotrace))


def against_go_tracer(tr, truth, pid, gotrace):
    m = Mismatches()
    check, eq = m.check, m.eq
    alive, created, ended, blocks = go_trace_facts(go_trace_events(gotrace))

    ev = [e for e in tr.events if e["pid"] == pid]
    co_created = {int(e["id"], 16): int(e["parent"], 16) for e in ev if e["ev"] == "create"}
    co_ended = {int(e["id"], 16) for e in ev if e["ev"] == "exit"}
    names = {int(c["id"], 16): c["name"] for c in tr.coroutines if c["pid"] == pid}
    after = {g: p for g, p in co_created.items() if g not in alive}
    eq(sorted(set(created) - set(after))[:10], [], "goroutines created after trace.Start "
       "in Go's trace, not in corobpf's (first 10)")
    eq(sorted(set(after) - set(created))[:10], [], "goroutines created after trace.Start "
       "in corobpf's trace, not in Go's (first 10)")
    eq(sorted((g, after[g], created[g]) for g in set(after) & set(created)
              if after[g] != created[g])[:10], [],
       "parents that differ, (goroutine, corobpf's, Go's) (first 10)")
    eq(sorted(alive - set(co_created)), [], "goroutines alive at trace.Start whose creation "
       "corobpf did not see")
    # Go's trace ends at trace.Stop: its own reader goroutine ends after it.
    gone = sorted(ended - co_ended)
    check(not gone, "goroutine ends in Go's trace, not in corobpf's: %d, first %s"
          % (len(gone), gone[:10]))
    extra = sorted((g, names.get(g)) for g in co_ended - ended
                   if not (names.get(g) or "").startswith("runtime/trace."))
    check(not extra, "goroutine ends in corobpf's trace, not in Go's: %d, first %s"
          % (len(extra), extra[:10]))

    for t in truth["goroutines"]:
        where = "goroutine %d (%s, %s) in Go's trace" % (t["goid"], t["name"], t["role"])
        if t["role"] == "main":
            check(t["goid"] in alive, where + ": not alive at trace.Start")
            continue
        eq(created.get(t["goid"]), t["parent"], where + ": parent")
        eq(t["goid"] in ended, t["exits"], where + ": ended")
        for ev, k in (("GoBlockRecv", "chan_waits"), ("GoBlockSync", "sync_waits"),
                      ("GoBlockSelect", "select_waits"), ("GoBlockNet", "io_waits"),
                      ("GoSleep", "sleeps")):
            eq(blocks.get((t["goid"], ev), 0), t[k], "%s: %s" % (where, ev))
    m.done("corobpf and the program against Go's execution tracer")


@test
def go_ps_lists_parked_goroutines():
    """corobpf ps on a Go program whose goroutines are parked and stay so during the window:
    each listed by its goid, suspended (wait) on its channel, with the function it runs and
    where it is parked (runtime.gopark in runtime.chanrecv, under the frames of the program's
    own traceback of it); the program goes on unharmed."""
    if not need_go(GOPROG):
        return
    out, pid, truth = ps_run(GOPROG, "go-ps")
    blocks = ps_blocks(out)
    m = Mismatches()
    for t in truth["goroutines"]:
        if not t.get("pre_attach"):
            continue
        b = blocks.get(gid(t["goid"]))
        where = "goroutine %s (%s, %s)" % (gid(t["goid"]), t["name"], t["role"])
        if not m.check(b is not None, where + ": not listed"):
            continue
        m.check("suspended: wait on %s " % t["chan"] in b.splitlines()[0],
                where + ": state %r, want suspended: wait on its channel %s"
                % (b.splitlines()[0], t["chan"]))
        m.check(t["name"] in b, where + ": its function is not named:\n" + b)
        # --stacks (ps's default): where it is parked, read from its g.sched at the attach.
        fns = ps_frames(b)
        m.check(fns[:1] == ["runtime.gopark"] and "runtime.chanrecv" in fns,
                where + ": parked in chan receive, want runtime.gopark then runtime.chanrecv "
                "innermost, got %s" % fns)
        m.check(is_subsequence(t["parked_in"], fns),
                where + ": the program's own traceback %s is not in the stack %s"
                % (t["parked_in"], fns))
    m.done("corobpf ps against the program's parked goroutines (output:\n%s)" % out)


@test
def go_ps_stripped_names_frames():
    """corobpf ps on the program built -ldflags='-s -w' (no symbol table, no DWARF) and on the
    unstripped build: main's stack (polling in main.waitFor, --wait) reads the same, frame for
    frame, function and offset, named from Go's own function table (.gopclntab); no frame of
    the program is a bare address. (Goroutines parked since before the attach are not listed
    for a stripped binary: it has no runtime.allgs symbol to walk them from, docs/go.md.)"""
    if not need_go(GOPROG) or not need_go(GOPROG_STRIPPED):
        return
    stacks = []
    for binary, name in ((GOPROG, "go-ps-frames"), (GOPROG_STRIPPED, "go-ps-frames-stripped")):
        # A snapshot can catch main between parks (running, no park stack to show; seen once
        # in a full run): the names are what is checked, so up to three snapshots are taken.
        for attempt in range(3):
            out, pid, truth = ps_run(binary, "%s-%d" % (name, attempt))
            main = ps_blocks(out).get(gid(truth_main(truth)))
            check(main is not None, "%s: main is not listed:\n%s" % (name, out))
            frames = ps_frame_texts(main)
            if frames:
                break
        check(frames and not [f for f in frames if f.startswith("0x")],
              "%s: main's stack has unnamed frames: %s\n%s" % (name, frames, out))
        stacks.append(frames)
    # The symbol table marks an assembly function of the ABI0 convention ("runtime.goexit.abi0");
    # Go's own table, and its tracebacks, do not.
    eq(stacks[1], [f.replace(".abi0+", "+") for f in stacks[0]],
       "main's stack, stripped build against unstripped")
    check(stacks[0][:1] and stacks[0][0].startswith("runtime.gopark+0x") and
          any(f.startswith("main.waitFor+0x") for f in stacks[0]),
          "main's stack is %s, want runtime.gopark ... main.waitFor" % stacks[0])


def ps_run(binary, name):
    """corobpf ps on `binary --wait` (some goroutines parked before it): its output, the
    program's pid and its truth; the program's and corobpf's exit codes checked."""
    go_file = work(name + ".go")
    prog = subprocess.Popen([binary, "--wait", go_file], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, COROBPF_TRUTH=work(
                                name + ".truth")), text=True)
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "goprog did not announce itself: %r" % line)
        pid = int(line[1])
        p = corobpf(["ps", "-p", str(pid), "-d", "0.5"])
        out = p.stdout
        open(go_file, "w").close()
        stdout, stderr = prog.communicate(timeout=120)
    finally:
        if prog.poll() is None:
            prog.kill()
            prog.wait()
    eq(prog.returncode, 0, "goprog's exit code after corobpf ps (%s)" % stderr.strip())
    eq(p.returncode, 0, "corobpf ps exit code (%s)" % p.stderr.strip())
    check("process %d (" % pid in out, "no process header:\n" + out)
    return out, pid, read_go_truth(work(name + ".truth"))


def ps_blocks(out):
    """corobpf ps's entries by goroutine id ("0x6")."""
    return {b.split()[0]: b for b in ("0x" + b for b in out.split("\n  0x")[1:])}


def ps_frame_texts(block):
    """The frames of a ps entry's stack as printed, less the object ("f+0x1a")."""
    texts = []
    for line in block.splitlines()[1:]:
        words = line.split()
        if words[:1] == ["at"] and len(words) > 1:
            texts.append(words[1])
        elif line.startswith(" " * 9) and words and words[0] != "...":
            texts.append(words[0])
    return texts


def ps_frames(block):
    """The functions of a ps entry's stack ("at f+0x1a (obj)", then "f+0x2b (obj)")."""
    return [t.split("+0x")[0] for t in ps_frame_texts(block)]


def is_subsequence(want, got):
    it = iter(got)
    return all(any(f == g for g in it) for f in want)


@test
def go_bench_row():
    """make bench's Go row (BENCH_ONLY=go_costs, quick): corobpf's slowdown of a channel
    ping-pong and Go's execution tracer's, from the same run (numbers not asserted)."""
    if not need_go(os.path.join(BUILD, "bench", "go_pingpong")):
        return
    p = run([sys.executable, os.path.join(ROOT, "tools", "bench", "bench.py")],
            env={"BENCH_QUICK": "1", "BENCH_ONLY": "go_costs", "COROBPF": COROBPF},
            timeout=600)
    eq(p.returncode, 0, "bench.py (%s)" % p.stderr.strip()[-500:])
    path = p.stdout.strip().splitlines()[-1].split("written: ")[-1]
    with open(path) as f:
        row = json.load(f)["go"]
    os.unlink(path)
    for key in ("native_ns_per_round_trip", "go_trace_slowdown", "corobpf_slowdown",
                "corobpf_over_go_trace"):
        check(isinstance(row.get(key), (int, float)), "go.%s missing: %s" % (key, row))
    check("Go channel ping-pong" in p.stdout, p.stdout)
