"""The integration tests' common ground: paths, the test registry, running corobpf,
reading its JSONL and checking it against a program's own ground truth."""
import csv
import gzip
import json
import re
import sqlite3
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "perfetto"))
import check as perfetto_check  # noqa: E402
# COROBPF=PATH (or COROBPF_BIN): run the suites against another build of corobpf (the test
# programs stay this tree's).
COROBPF = os.environ.get("COROBPF") or os.environ.get("COROBPF_BIN") or os.path.join(ROOT, "corobpf")
BUILD = os.path.join(ROOT, "build")
TESTS_BIN = os.path.join(BUILD, "tests")
# The probe path corobpf takes without --probe-path: batched, unless COROBPF_PROBE_PATH=trap
# (the suite's second pass, `make integration`).
BATCHED = os.environ.get("COROBPF_PROBE_PATH") != "trap"
CI = os.environ.get("CI") == "true"
WORK = tempfile.mkdtemp(prefix="corobpf-it-")

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what):
    if got != want:
        raise Failure("%s: got %r, want %r" % (what, got, want))


def work(name):
    return os.path.join(WORK, name)


def run(cmd, env=None, timeout=120, **kw):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(cmd, env=e, timeout=timeout, capture_output=True, text=True, **kw)


# ---- reading outputs ----

def stack_text(db, stack_id):
    """A stack of the SQLite file as the CSV writes it: its frames innermost first,
    "func+0x1a (object) file.c:52" each (object and file by their last component), "; "
    between."""
    if stack_id is None:
        return ""
    out = []
    for ip, func, off, obj, path, line in db.execute(
            "SELECT ip, func, func_off, object, file, line FROM frames WHERE stack_id = ? "
            "ORDER BY depth", (stack_id,)):
        s = "%s+0x%x" % (func, off) if func is not None else "0x%x" % (ip & (2 ** 64 - 1))
        if obj is not None:
            s += " (%s)" % obj.rsplit("/", 1)[-1]
        if path is not None:
            s += " %s:%d" % (path.rsplit("/", 1)[-1], line)
        out.append(s)
    return "; ".join(out)


def check_csv_is_coroutines(csv_path, db_path, hex_cols=("id", "parent_id", "obj_at_end")):
    """The CSV is the SQLite file's coroutines table: every column, in its order, row for row,
    the same values (docs/sqlite.md): ids as hex text, threads space separated, stacks as
    their frames, a NULL an empty field. Returns the rows compared and the stacks among
    them."""
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    db = sqlite3.connect(db_path)
    table = [r[1] for r in db.execute("PRAGMA table_info(coroutines)")]
    types = {r[1]: r[2] for r in db.execute("PRAGMA table_info(coroutines)")}
    eq(rows[0], table, "the CSV's columns (%s)" % csv_path)
    sql = {r[0]: r for r in db.execute("SELECT * FROM coroutines")}
    eq(len(rows) - 1, len(sql), "CSV rows vs coroutines rows (%s)" % csv_path)
    stacks = 0
    for row in rows[1:]:
        want = sql[int(row[0])]
        for col, got, w in zip(table, row, want):
            what = "%s of uid %s (%s)" % (col, row[0], csv_path)
            if col in ("create_stack", "park_stack"):
                eq(got, stack_text(db, w), what)
                stacks += w is not None
            elif w is None:
                eq(got, "", what + ", NULL in SQLite")
            elif col in hex_cols:
                eq(got, "0x%x" % (w & (2 ** 64 - 1)), what)
            elif col == "threads":
                eq(got.split(" "), w.split(","), what)
            elif types[col] == "INTEGER":
                eq(int(got), w, what)
            else:
                eq(got, w, what)
    db.close()
    return len(rows) - 1, stacks


class Trace:
    def __init__(self, path):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            self.records = [json.loads(line) for line in f]
        self.header = self.records[0]
        self.trailer = self.records[-1]
        eq(self.header["type"], "header", "first record")
        eq(self.trailer["type"], "trailer", "last record")
        self.events = [r for r in self.records if r["type"] == "event"]
        self.coroutines = [r for r in self.records if r["type"] == "coroutine"]
        self.processes = [r for r in self.records if r["type"] == "process"]

    def by_ev(self, ev):
        return [e for e in self.events if e["ev"] == ev]


def read_truth(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def name_as_traced(name):
    """What corobpf writes for a name: 63 bytes kept; each invalid UTF-8 byte one U+FFFD."""
    if name is None:
        return ""
    raw = name.encode("utf-8")[:63]
    out, i = [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                out.append(raw[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


# Anomalies of the kernel's making, not the trace's: a thread's return to the CPU that
# sched_switch never showed (anomalies.offcpu_late, docs/design.md) happens about once in a
# thousand returns, more under load. Its own test (offcpu_every_stretch_ends_under_load) checks
# the count; elsewhere it is no fault of what a test traces.
KERNEL_ANOMALIES = ("offcpu_late",)


def trace_anomalies(trailer, also_allowed=()):
    """The trailer's anomalies that are not zero, less the kernel's and also_allowed."""
    return {k: v for k, v in trailer["anomalies"].items()
            if v and k not in KERNEL_ANOMALIES and k not in also_allowed}


def check_clean(trace, allow_lost=False):
    t = trace.trailer
    if not allow_lost:
        eq(t["lost"]["events"], 0, "events lost")
    eq(t["lost"]["string_faults"], 0, "string faults")
    eq(t["lost"]["bad_records"], 0, "bad ring records")
    eq(trace_anomalies(t), {}, "anomalies")


def check_truth(trace, truth, pid, launched=True):
    """The trace holds exactly the program's coroutines, each as it says."""
    mine = [c for c in trace.coroutines if c["pid"] == pid]
    by_id = {}
    for c in mine:
        check(c["id"] not in by_id, "coroutine %s appears twice" % c["id"])
        by_id[c["id"]] = c
    want_ids = {t["id"] for t in truth}
    extra = sorted(set(by_id) - want_ids)
    missing = sorted(want_ids - set(by_id))
    check(not extra and not missing,
          "coroutine sets differ: %d traced, %d in truth; extra %s, missing %s"
          % (len(by_id), len(truth), extra[:5], missing[:5]))
    for t in truth:
        c = by_id[t["id"]]
        where = "coroutine %s (%s)" % (t["id"], t.get("name"))
        eq(c["parent"], t["parent"], where + " parent")
        eq(c["name"], name_as_traced(t.get("name")), where + " name")
        eq(bool(c.get("name_truncated")), len((t.get("name") or "").encode()) > 63,
           where + " name_truncated")
        eq(c["end"], "exit", where + " end")
        eq(c["status"], t["status"], where + " status")
        eq(c["switch_ins"], t["switch_ins"], where + " switch_ins")
        if launched:
            check(c["created"] is not None, where + ": create not seen")
        eq(c["running_ns"] + c["runnable_ns"] + c["suspended_ns"] + c["new_ns"] + c["unknown_ns"],
           c["ended"] - c["first_seen"], where + " state times add up")
    ev = lambda kind: [e for e in trace.by_ev(kind) if e["pid"] == pid]
    eq(len(ev("create")), len(truth), "create events")
    eq(len(ev("exit")), len(truth), "exit events")
    eq(sum(1 for e in ev("switch") if e["to"] != "0x0"),
       sum(t["switch_ins"] for t in truth), "switch-ins")


def corobpf(args, env=None, timeout=120):
    return run([COROBPF] + args, env=env, timeout=timeout)


def trace_launch(name, cmd, extra=(), env=None):
    """corobpf -- cmd, with ground truth, JSONL, Perfetto and raw capture; the Perfetto
    trace is checked against the format's rules and the JSONL."""
    out, raw, truth = work(name + ".jsonl"), work(name + ".raw"), work(name + ".truth")
    pf = work(name + ".pftrace")
    e = {"COROBPF_TRUTH": truth}
    if env:
        e.update(env)
    p = corobpf(["-o", out, "-o", pf, "--raw", raw] + list(extra) + ["--"] + cmd, env=e)
    if p.returncode == 0:
        try:
            perfetto_check.check(pf, out)
        except perfetto_check.Bad as err:
            raise Failure("%s: %s" % (pf, err))
    if p.returncode != 0:
        raise Failure("corobpf -- %s exited %d:\n%s%s" % (cmd, p.returncode, p.stdout, p.stderr))
    return Trace(out), (read_truth(truth) if os.path.exists(truth) else None), p, out, raw


def check_replay(live_jsonl, raw, extra=()):
    """The raw capture replays into byte-identical outputs (JSONL, and Perfetto if written)."""
    outs = [live_jsonl]
    pf = live_jsonl[:-len(".jsonl")] + ".pftrace"
    if os.path.exists(pf):
        outs.append(pf)
    args = ["report", "-q", raw] + list(extra)
    for o in outs:
        args += ["-o", o + ".replay" + os.path.splitext(o)[1]]
    p = corobpf(args)
    eq(p.returncode, 0, "corobpf report exit code (%s)" % p.stderr.strip())
    for o in outs:
        with open(o, "rb") as a, open(o + ".replay" + os.path.splitext(o)[1], "rb") as b:
            check(a.read() == b.read(), "replay of %s differs from the live %s" % (raw, o))


# ---- programs and tracers running alongside a test ----

FAULTS = os.path.join(TESTS_BIN, "faults")
FAULTS_NOP5 = os.path.join(TESTS_BIN, "faults-nop5")


def start_waiting(binary, scen, extra=(), env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.Popen([os.path.join(TESTS_BIN, binary), "--wait"] + list(extra) + [scen],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, text=True)
    line = p.stdout.readline().split()
    check(line and line[0] == "READY", "the scenario did not announce itself: %r" % line)
    return p, int(line[1])


def wait_for_attached(path, suffix, timeout=20):
    """-a -v: wait until the object whose path ends with suffix is attached, late (after a
    program mapped it) or at the start (another instrumented program mapped it already)."""
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.rstrip("\n")
                    if "probe sites in " in line and (line.endswith(suffix) or
                                                      line.endswith(suffix + " (loaded after start)")):
                        return
        time.sleep(0.05)
    raise Failure("%r was never attached (%s)" % (suffix, path))


def wait_for(path, text, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                if text in f.read():
                    return
        time.sleep(0.05)
    raise Failure("%r never appeared in %s" % (text, path))


def other_sessions():
    """corobpf sessions loaded on the machine besides this test's (a test that runs none of its
    own): each loads one coro_create program. Under -a or --follow one attaches to every
    program, this test's too, which is then traced whatever the test meant."""
    p = run(["bpftool", "prog", "show"])
    return p.stdout.count(" name coro_create ")


# What a session says because of another one on the machine, never of its own doing
# (docs/probes.md, the batched path's limits): a -q run may print it.
OTHER_SESSION_WARNINGS = (re.compile(r"^corobpf: warning: (at attach|at the end), \d+ other "
                                     r"corobpf sessions? traces? on the batched path: .*$"),)


def quiet_stderr(stderr):
    """A -q run's stderr, less the warnings another session on the machine causes."""
    return "".join(l for l in stderr.splitlines(True)
                   if not any(w.match(l.rstrip("\n")) for w in OTHER_SESSION_WARNINGS))


def start_tracer(args, name):
    err = work(name + ".err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF] + args, stderr=ef, stdout=ef)
    return tr, ef, err


def tracer_wait(tr, ef, timeout=240):
    """A tracer start_tracer() started: its exit code, or None if it was still running timeout
    seconds on (then killed). Its output file is closed either way."""
    try:
        return tr.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        tr.kill()
        tr.wait()
        return None
    finally:
        ef.close()


def faults_ids(trace, pid):
    return sorted(c["id"] for c in trace.coroutines if c["pid"] == pid)


# ---- an unprivileged user, for the tests that play the attacker ----

ATTACKER = "corobpf-it"


def attacker():
    """(uid, gid) of an unprivileged account the tests create once (no home, no shell)."""
    import pwd
    try:
        pw = pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        ATTACKER], check=True, capture_output=True)
        pw = pwd.getpwnam(ATTACKER)
    return pw.pw_uid, pw.pw_gid


def as_attacker(cmd):
    """cmd run as the unprivileged account, without root's groups or capabilities."""
    uid, gid = attacker()
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
            "--inh-caps=-all", "--"] + list(cmd)


def attacker_dir(name):
    """A fresh directory under /tmp that the unprivileged account owns (mode 0755)."""
    uid, gid = attacker()
    d = tempfile.mkdtemp(prefix="corobpf-it-%s-" % name, dir="/tmp")
    os.chmod(d, 0o755)
    os.chown(d, uid, gid)
    if not os.environ.get("KEEP"):
        import atexit
        atexit.register(shutil.rmtree, d, True)
    return d


# ---- LOAD=1: the suite on a busy machine ----

class Load:
    """CPU hogs (one per CPU) and an unrelated instrumented program, running for the whole
    suite: every test must assert what it means whatever else runs (its own processes, the
    scenario's thresholds, the losses the trailer counts)."""

    def __init__(self):
        self.procs = []

    def start(self):
        hog = "while True: pass"
        for _ in range(os.cpu_count() or 1):
            self.procs.append(subprocess.Popen([sys.executable, "-c", hog]))
        # build/demo: coroutines on two workers at 200 requests/s, for as long as the suite runs.
        self.procs.append(subprocess.Popen([os.path.join(BUILD, "demo"), "-d", "1000000"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    def stop(self):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
