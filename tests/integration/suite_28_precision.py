"""The precision corpus (issue 33): for each family, a healthy program nobody wrote for corobpf,
idle and under load from a real client, gives no finding at all; the same programs with a
planted bug give exactly the planted findings.

- gevent: a pywsgi server with the standard library patched and a thread pool
  (progs/gevent_server.py), launched idle, launched under a client, attached under a client
  at 20 requests/s; planted: a greenlet calling the unpatched time.sleep(0.3) while five others
  have work queued (one `blocking`).
- Go: an HTTP server with four workers on a channel (progs/go/goserver.go), attached idle and
  under a client, launched under a client; planted: a goroutine keeping the only P 300 ms while
  others are runnable (one `long_run`), and four workers parked on their channel when main
  returns (four `leak`s, goleak's definition).
- QEMU: qemu-nbd, attached idle, attached and launched under qemu-io clients (nbd://).
- Ruby: a fiber event loop on IO.select (progs/fiber_loop.rb), idle and under a feeder;
  planted: a fiber in a blocking read while lines wait for the others (one `blocking`).
- Boost.Fiber: fibers sleeping (idle) and yielding (load) (progs/fibers.cpp); planted: a fiber
  in usleep(200 ms) beside fibers whose sleeps end meanwhile (one `blocking`).
- The SDK (corosched): the demo idle and at 200 requests/s; planted: bugs.c's lost wakeup,
  stall, blocking call and long run, one finding each.

Thresholds are corobpf's defaults but --sched-latency: how long a runnable coroutine waits
for a worker is the machine's load as much as the program's (a busy machine holds a worker
thread 10 ms off its CPU), so that detector sits out (suite_05 tests it on its own).

FINDINGS_RESULTS=FILE writes each run's findings against its planted ones, and per family the
precision and recall, as JSON with the machine and the date (results/findings-*.json, which
docs/jsonl.md quotes)."""
import atexit
import http.client
import threading

from harness import *  # noqa: F401,F403

PROGS = os.path.join(ROOT, "tests", "integration", "progs")
PYTHON = "/usr/bin/python3"
RUBY = "/usr/bin/ruby3.1"
QEMU_NBD = "/usr/bin/qemu-nbd"
QEMU_IO = "/usr/bin/qemu-io"
QEMU_IMG = "/usr/bin/qemu-img"
GOSERVER = os.path.join(TESTS_BIN, "go", "goserver")
QUIET = ["--sched-latency", "600000"]
# net/http starts a goroutine per request of a keep-alive connection (its background read):
# a connection served more than 1,000 times a second is a spawn_storm (--spawn-storm) of its
# conn.serve, as it would be of any parent. The corpus's client stays under that.
GO_RATE = 400

RESULTS = []
# The run's date: when it began, as in the name of the file it is written to.
STARTED = time.strftime("%Y-%m-%d %H:%M:%S")


@atexit.register
def _write_results():
    path = os.environ.get("FINDINGS_RESULTS")
    if not path or not RESULTS:
        return
    fams = {}
    for r in RESULTS:
        f = fams.setdefault(r["family"], {"runs": 0, "planted": 0, "found": 0,
                                          "true_positives": 0, "false_positives": 0,
                                          "false_negatives": 0})
        f["runs"] += 1
        f["planted"] += len(r["planted"])
        f["found"] += len(r["findings"])
        f["true_positives"] += r["true_positives"]
        f["false_positives"] += r["false_positives"]
        f["false_negatives"] += r["false_negatives"]
    for f in fams.values():
        tp, fp, fn = f["true_positives"], f["false_positives"], f["false_negatives"]
        f["precision"] = round(tp / (tp + fp), 3) if tp + fp else None
        f["recall"] = round(tp / (tp + fn), 3) if tp + fn else None
    uname = os.uname()
    doc = {"machine": {"kernel": uname.release, "cpus": os.cpu_count(),
                       "date": STARTED,
                       "load_1min": round(os.getloadavg()[0], 2)},
           "families": fams, "runs": RESULTS}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def need(*paths):
    missing = [p for p in paths if not os.path.exists(p)]
    if not missing:
        return True
    why = "%s missing (install with tools/deps.sh, build with make tools)" % ", ".join(missing)
    if CI:
        raise Failure(why)
    print("     skipped: %s" % why, flush=True)
    return False


def findings_of(trace, pid=None):
    return [r for r in trace.records if r["type"] == "finding" and (pid is None or r["pid"] == pid)]


def judge(family, name, trace, pid, planted, bad):
    """The run's findings against its planted ones: planted is a list of (kind, match), match a
    function of the finding saying whether it is that planted bug. Each planted bug must be
    found exactly once, and nothing else: what is not so goes to `bad`. Recorded for the
    results file."""
    fs = findings_of(trace, pid)
    left = list(planted)
    tp, extra = 0, []
    for f in fs:
        hit = [p for p in left if p[0] == f["kind"] and p[1](f)]
        if hit:
            left.remove(hit[0])
            tp += 1
        else:
            extra.append(f)
    RESULTS.append({"family": family, "run": name, "planted": [p[0] for p in planted],
                    "findings": [f["kind"] for f in fs], "true_positives": tp,
                    "false_positives": len(extra), "false_negatives": len(left)})
    what = lambda f: (f["kind"], f["id"], f.get("name"), f.get("dur"), f.get("state"),
                      f.get("reason"))
    if extra or left:
        bad.append("%s: findings not planted: %s; planted not found: %s"
                   % (name, [what(f) for f in extra], [p[0] for p in left]))


def verdict(bad):
    check(not bad, "\n".join(bad))


def within(start, end, min_dur):
    """A planted stretch the program timed itself: the finding starts in it, lasts most of it."""
    return lambda f: start - 5000000 <= f["ts"] <= end and f["dur"] >= min_dur


def first_line(p, word, timeout=60):
    """The program's first line starting with word (its READY), read as it comes."""
    end = time.time() + timeout
    while time.time() < end:
        line = p.stdout.readline()
        if not line:
            break
        if line.split()[:1] == [word]:
            return line.split()
    raise Failure("no %s line from %s" % (word, p.args))


def lines_of(text, word):
    return [l.split() for l in text.splitlines() if l.split()[:1] == [word]]


class Client:
    """A real HTTP client beside the traced server: `conns` connections, each making requests
    one after another (keep-alive), paced to `rate` requests/s in all (0: as fast as it can),
    until stopped."""

    def __init__(self, port, paths=("/",), conns=4, rate=0):
        self.port, self.paths, self.rate = port, paths, rate
        self.stop_ = threading.Event()
        self.done = 0
        self.errors = []
        self.threads = [threading.Thread(target=self.run, args=(i, conns), daemon=True)
                        for i in range(conns)]
        for t in self.threads:
            t.start()

    def run(self, i, conns):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        n = 0
        while not self.stop_.is_set():
            try:
                c.request("GET", self.paths[n % len(self.paths)])
                r = c.getresponse()
                r.read()
                self.done += 1
            except (OSError, http.client.HTTPException) as e:
                if self.stop_.is_set():
                    break
                self.errors.append(repr(e))
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            n += 1
            if self.rate:
                self.stop_.wait(conns / self.rate)
        c.close()

    def stop(self):
        self.stop_.set()
        for t in self.threads:
            t.join(timeout=15)
        check(self.done > 0, "the client made no request (%s)" % self.errors[:3])
        return self.done


def launch(name, cmd, extra=(), env=None, ready="READY"):
    """corobpf -o NAME.jsonl -- cmd, the command's READY line read as it comes: (tracer, line,
    jsonl)."""
    out = work(name + ".jsonl")
    e = dict(os.environ)
    if env:
        e.update(env)
    tr = subprocess.Popen([COROBPF, "-o", out] + QUIET + list(extra) + ["--"] + cmd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    try:
        line = first_line(tr, ready) if ready else None
    except Failure:
        tr.kill()
        _, err = tr.communicate()
        raise Failure("%s: %s" % (name, err[-2000:]))
    return tr, line, out


def finish(tr, name, timeout=120):
    stdout, stderr = tr.communicate(timeout=timeout)
    eq(tr.returncode, 0, "%s: corobpf's exit code (%s)" % (name, stderr[-2000:]))
    return Trace(work(name + ".jsonl")), stdout, stderr


def attach(name, pid, secs, extra=()):
    """corobpf -p pid -d secs, started and tracing: (tracer, its files)."""
    out = work(name + ".jsonl")
    tr, ef, err = start_tracer(["-p", str(pid), "-d", str(secs), "-o", out] + QUIET +
                               list(extra), name)
    end = time.time() + 60
    while True:
        with open(err) as f:
            text = f.read()
        if "corobpf: tracing " in text:
            break
        if tr.poll() is not None or time.time() > end:
            ef.close()
            raise Failure("corobpf -p %d did not start tracing:\n%s" % (pid, text))
        time.sleep(0.05)
    return tr, ef, err, out


def attached_trace(tr, ef, err, out):
    tr.wait(timeout=120)
    ef.close()
    with open(err) as f:
        text = f.read()
    eq(tr.returncode, 0, "corobpf -p exit code (%s)" % text[-2000:])
    return Trace(out), text


# ---- gevent ----

@test
def finding_precision_gevent():
    """gevent's hub waiting in epoll_wait and idle pool threads are no findings, idle, under
    a client, attached; a greenlet in the unpatched time.sleep(0.3) while five others have
    work queued is one `blocking`, and nothing else is."""
    bad = []
    if not need(PYTHON, "/usr/lib/python3/dist-packages/gevent/__init__.py"):
        return
    prog = [PYTHON, os.path.join(PROGS, "gevent_server.py")]
    tr, line, _ = launch("gevent_idle", prog + ["3"])
    trace, _, _ = finish(tr, "gevent_idle")
    judge("gevent", "idle, launched", trace, int(line[1]), [], bad)

    tr, line, _ = launch("gevent_load", prog + ["4"])
    client = Client(int(line[2]), paths=("/", "/", "/", "/pool"), conns=6)
    time.sleep(3.5)
    client.stop()
    trace, stdout, _ = finish(tr, "gevent_load")
    check(lines_of(stdout, "SERVED")[0][1] != "0", stdout)
    judge("gevent", "a client, launched", trace, int(line[1]), [], bad)

    srv = subprocess.Popen(prog + ["300"], stdout=subprocess.PIPE, text=True)
    try:
        line = first_line(srv, "READY")
        files = attach("gevent_attached", srv.pid, 4)
        client = Client(int(line[2]), paths=("/", "/pool"), conns=2, rate=20)
        trace, _ = attached_trace(*files)
        client.stop()
    finally:
        srv.kill()
        srv.wait()
    judge("gevent", "20 requests/s, attached", trace, srv.pid, [], bad)

    tr, line, _ = launch("gevent_plant", prog + ["--plant", "3"])
    client = Client(int(line[2]), conns=4)
    time.sleep(2.5)
    client.stop()
    trace, stdout, _ = finish(tr, "gevent_plant")
    _, _, t0, t1 = lines_of(stdout, "PLANTED")[0]
    judge("gevent", "planted: time.sleep(0.3) in a greenlet", trace, int(line[1]),
          [("blocking", within(int(t0), int(t1), 250000000))], bad)
    verdict(bad)


# ---- Go ----

@test
def finding_precision_go():
    """An HTTP server's goroutines parked while nobody calls (its workers on their channel,
    the accept loop, idle connections) are no findings, attached idle or under a client,
    launched under one; a goroutine keeping the only P 300 ms while others are runnable is one
    `long_run`; workers parked on their channel when main returns are `leak`s."""
    bad = []
    if not shutil.which("go"):
        check(not CI, "go is not installed (tools/deps.sh)")
        print("     skipped: go is not installed", flush=True)
        return
    if not need(GOSERVER):
        return
    # Up long enough for both attaches on a busy machine; stopped once they are done.
    srv = subprocess.Popen([GOSERVER, "serve", "300"], stdout=subprocess.PIPE, text=True)
    try:
        line = first_line(srv, "READY")
        trace, _ = attached_trace(*attach("go_idle", srv.pid, 3))
        judge("Go", "idle, attached", trace, srv.pid, [], bad)
        files = attach("go_attached", srv.pid, 3)
        client = Client(int(line[2]), conns=4, rate=GO_RATE)
        trace, _ = attached_trace(*files)
        client.stop()
        judge("Go", "a client, attached", trace, srv.pid, [], bad)
    finally:
        srv.kill()
        srv.wait()

    tr, line, _ = launch("go_load", [GOSERVER, "serve", "3"])
    client = Client(int(line[2]), conns=4, rate=GO_RATE)
    time.sleep(2.5)
    client.stop()
    trace, _, _ = finish(tr, "go_load")
    judge("Go", "a client, launched", trace, int(line[1]), [], bad)

    tr, line, _ = launch("go_spin", [GOSERVER, "spin", "3"],
                         env={"GOMAXPROCS": "1", "GODEBUG": "asyncpreemptoff=1"})
    client = Client(int(line[2]), conns=2, rate=50)
    time.sleep(2.5)
    client.stop()
    trace, stdout, _ = finish(tr, "go_spin")
    _, _, goid, t0, t1 = lines_of(stdout, "PLANTED")[0]
    # Its run holds the spin: from before its first clock reading to past the loop (its last
    # reading, a system call, may give up the P first).
    spinner = lambda f: (f["id"] == "0x%x" % int(goid) and f["ts"] <= int(t0) and
                         f["ts"] + f["dur"] >= int(t0) + 100000000)
    judge("Go", "planted: a goroutine spinning 300 ms", trace, int(line[1]),
          [("long_run", spinner)], bad)

    tr, _, _ = launch("go_leak", [GOSERVER, "leak"], ready=None)
    trace, stdout, _ = finish(tr, "go_leak")
    leaked = ["0x%x" % int(l[2]) for l in lines_of(stdout, "PLANTED")]
    eq(len(leaked), 4, "the program's leaked workers")
    judge("Go", "planted: 4 workers parked when main returns", trace, trace.header["pids"][0],
          [("leak", lambda f, i=i: f["id"] == i and f["state"] == "suspended")
           for i in leaked], bad)
    verdict(bad)


# ---- QEMU ----

def nbd_clients(sock, rounds, gap=0.2):
    uri = "nbd+unix:///?socket=" + sock
    for i in range(rounds):
        p = run([QEMU_IO, "-f", "raw", "-c", "read 0 64k", "-c",
                 "write -P 0x%02x %d 4k" % (i % 256, i * 4096), "-c", "aio_flush", uri])
        eq(p.returncode, 0, "qemu-io against %s (%s)" % (uri, p.stderr.strip()))
        time.sleep(gap)


def wait_path(path, timeout=30):
    end = time.time() + timeout
    while not os.path.exists(path):
        check(time.time() < end, "%s never appeared" % path)
        time.sleep(0.05)


@test
def finding_precision_qemu():
    """qemu-nbd's main loop waiting in ppoll is no finding, attached idle, attached and
    launched under qemu-io clients; its coroutines block nothing."""
    bad = []
    if not need(QEMU_NBD, QEMU_IO, QEMU_IMG):
        return
    img = work("nbd.qcow2")
    eq(run([QEMU_IMG, "create", "-q", "-f", "qcow2", img, "16M"]).returncode, 0, "qemu-img create")
    sock = work("nbd.sock")
    nbd = subprocess.Popen([QEMU_NBD, "-f", "qcow2", "--persistent", "-k", sock, img])
    try:
        wait_path(sock)
        nbd_clients(sock, 2)
        trace, _ = attached_trace(*attach("qemu_idle", nbd.pid, 3))
        judge("QEMU", "idle, attached", trace, nbd.pid, [], bad)
        files = attach("qemu_attached", nbd.pid, 4)
        nbd_clients(sock, 12)
        trace, _ = attached_trace(*files)
        judge("QEMU", "a client every 0.2 s, attached", trace, nbd.pid, [], bad)
    finally:
        nbd.terminate()
        nbd.wait()

    sock = work("nbd2.sock")
    tr, _, _ = launch("qemu_launched", [QEMU_NBD, "-f", "qcow2", "--persistent", "-k", sock, img],
                      ready=None)
    wait_path(sock)
    nbd_clients(sock, 10)
    with open("/proc/%d/task/%d/children" % (tr.pid, tr.pid)) as f:
        kids = [int(k) for k in f.read().split()]
    eq(len(kids), 1, "corobpf's children (the launched qemu-nbd)")
    pid = kids[0]
    os.kill(pid, signal.SIGTERM)
    trace, _, _ = finish(tr, "qemu_launched")
    judge("QEMU", "a client every 0.2 s, launched", trace, pid, [], bad)
    verdict(bad)


# ---- Ruby ----

@test
def finding_precision_ruby():
    """A fiber loop waiting in IO.select is no finding, idle or fed; a fiber in a blocking
    read while lines wait for the others is one `blocking`, and nothing else is."""
    bad = []
    if not need(RUBY):
        return
    prog = [RUBY, os.path.join(PROGS, "fiber_loop.rb")]
    for mode in ("idle", "load"):
        tr, line, _ = launch("ruby_" + mode, prog + [mode, "3"])
        trace, _, _ = finish(tr, "ruby_" + mode)
        judge("Ruby", mode + ", launched", trace, int(line[1]), [], bad)
    tr, line, _ = launch("ruby_plant", prog + ["--plant", "load", "3"])
    trace, stdout, _ = finish(tr, "ruby_plant")
    _, _, t0, t1 = lines_of(stdout, "PLANTED")[0]
    judge("Ruby", "planted: a blocking read in a fiber", trace, int(line[1]),
          [("blocking", within(int(t0), int(t1), 250000000))], bad)
    verdict(bad)


# ---- Boost.Fiber ----

@test
def finding_precision_boost_fiber():
    """Fibers sleeping (dispatchers idle in the kernel) and yielding are no findings; a fiber
    in usleep(200 ms) while others' sleeps end is one `blocking`."""
    bad = []
    fibers = os.path.join(TESTS_BIN, "fibers")
    for name, args in (("idle", ["slow", "4", "2"]), ("load", ["4", "3000", "5000"])):
        tr, _, _ = launch("fibers_" + name, [fibers] + args, ready=None)
        trace, _, _ = finish(tr, "fibers_" + name)
        judge("Boost.Fiber", name + ", launched", trace, trace.header["pids"][0], [], bad)
    tr, _, _ = launch("fibers_plant", [fibers, "steal", "2", "200"], ready=None)
    trace, _, _ = finish(tr, "fibers_plant")
    judge("Boost.Fiber", "planted: usleep(200 ms) in a fiber", trace, trace.header["pids"][0],
          [("blocking", lambda f: f["dur"] >= 190000000)], bad)
    verdict(bad)


# ---- the SDK ----

@test
def finding_precision_sdk():
    """The demo idle and at 200 requests/s: no finding; bugs.c's planted lost wakeup, stall,
    blocking call and long run: each exactly its finding, on its coroutine."""
    bad = []
    demo = os.path.join(BUILD, "demo")
    for name, args in (("idle", ["-d", "3", "-r", "2"]), ("load", ["-d", "3"])):
        tr, _, _ = launch("demo_" + name, [demo] + args, ready=None)
        trace, _, _ = finish(tr, "demo_" + name)
        judge("SDK (demo, bugs.c)", "demo " + name, trace, trace.header["pids"][0], [], bad)
    for kind in ("lost_wakeup", "stall", "blocking", "long_run"):
        tr, _, _ = launch("bug_" + kind, [os.path.join(TESTS_BIN, "bugs"), kind], ready=None)
        trace, stdout, _ = finish(tr, "bug_" + kind)
        bug = lines_of(stdout, "BUG")[0]
        judge("SDK (demo, bugs.c)", "planted: " + kind, trace, trace.header["pids"][0],
              [(kind, lambda f, i=bug[2]: f["id"] == i)], bad)
    verdict(bad)
