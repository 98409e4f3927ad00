"""PostgreSQL as the shared store (docs/store.md): live runs and uploads into one database.

A real server: COROBPF_PG_URI (as .ci/run starts it), else one this suite starts itself with
tools/pg_server.sh (initdb in a temporary directory, a Unix socket there, no TCP). Without
PostgreSQL installed the tests pass with a note outside CI and fail in CI."""
import urllib.parse
from harness import *  # noqa: F401,F403

PG_SERVER = os.path.join(ROOT, "tools", "pg_server.sh")
_servers = []


def _pg_installed():
    return bool(glob_bins())


def glob_bins():
    import glob
    return glob.glob("/usr/lib/postgresql/*/bin/initdb")


def start_server(name):
    """A server of this suite's own: (directory, URI)."""
    # Not under the work directory: the server's user (postgres, when run as root) must reach it.
    d = tempfile.mkdtemp(prefix="corobpf-pg-%s-" % name)
    p = run([PG_SERVER, "start", d], timeout=120)
    check(p.returncode == 0, "cannot start PostgreSQL: %s" % p.stderr.strip())
    _servers.append(d)
    return d, p.stdout.strip()


def stop_server(d):
    run([PG_SERVER, "stop", d], timeout=120)


def with_db(uri, db):
    u = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + db, u.query, u.fragment))


def psql(uri, sql):
    p = run(["psql", "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", uri, "-c", sql])
    check(p.returncode == 0, "psql %r: %s" % (sql, p.stderr.strip()))
    return [line.split("\t") for line in p.stdout.splitlines() if line]


def fresh_db(uri, db):
    psql(uri, "DROP DATABASE IF EXISTS %s" % db)
    psql(uri, "CREATE DATABASE %s" % db)
    return with_db(uri, db)


def server_uri():
    """A URI of a fresh database, or None (the test is skipped) when there is no server."""
    uri = os.environ.get("COROBPF_PG_URI")
    if not uri:
        if not _pg_installed():
            check(not CI, "PostgreSQL is not installed (tools/deps.sh installs it)")
            print("     (skipped: PostgreSQL is not installed)")
            return None
        _, uri = start_server("shared")
    return uri


def one_capture(uri, start_ts):
    rows = psql(uri, "SELECT capture_id, complete FROM captures WHERE start_ts = %d" % start_ts)
    eq(len(rows), 1, "captures rows starting at %d" % start_ts)
    return rows[0][0], rows[0][1] == "t"


def check_capture(uri, trace):
    """The capture's rows in the store are its JSONL's, and only its."""
    cid, complete = one_capture(uri, trace.header["start_ts"])
    check(complete, "capture %s is not marked complete" % cid)
    n = lambda table: int(psql(uri, "SELECT count(*) FROM %s WHERE capture_id = %s"
                               % (table, cid))[0][0])
    eq(n("coroutines"), len(trace.coroutines), "coroutines rows of capture %s" % cid)
    eq(n("events"), len([e for e in trace.events if e["ev"] not in ("offcpu", "offcpu_begin")]),
       "events rows of capture %s" % cid)
    eq(n("offcpu"), len(trace.by_ev("offcpu")), "offcpu rows of capture %s" % cid)
    eq(n("findings"), sum(1 for r in trace.records if r["type"] == "finding"),
       "findings rows of capture %s" % cid)
    eq(n("processes"), len(trace.processes), "processes rows of capture %s" % cid)
    got = psql(uri, "SELECT hostname, kernel, events FROM captures WHERE capture_id = %s" % cid)[0]
    eq(got, [trace.header["hostname"], trace.header["kernel"], str(trace.trailer["events"])],
       "captures row of %s" % cid)
    # The coroutines are this run's: same uids, names and switch-ins.
    # Names compared as hex: the scenarios' names hold tabs and newlines.
    rows = psql(uri, "SELECT uid, encode(convert_to(name, 'UTF8'), 'hex'), switch_ins "
                "FROM coroutines WHERE capture_id = %s" % cid)
    eq(sorted((int(u), nm, int(s)) for u, nm, s in rows),
       sorted((c["uid"], c["name"].encode().hex(), c["switch_ins"]) for c in trace.coroutines),
       "coroutines of capture %s" % cid)
    return cid


def table_counts(uri):
    tables = ["captures", "processes", "threads", "coroutines", "events", "offcpu", "slices",
              "findings", "spans", "stacks", "frames", "capture_meta", "switch_paths"]
    return {t: psql(uri, "SELECT count(*) FROM %s" % t)[0][0] for t in tables}


@test
def pgstore_live_runs_and_uploads_share_one_database():
    base = server_uri()
    if not base:
        return
    uri = fresh_db(base, "corobpf_it_runs")
    traces = []
    # Live runs straight into the store (two with a finding each), and one recorded then
    # uploaded.
    for i, cmd in enumerate([[os.path.join(BUILD, "demo"), "-d", "1"],
                             [os.path.join(TESTS_BIN, "scenarios"), "names"],
                             [os.path.join(TESTS_BIN, "bugs"), "lost_wakeup"],
                             [os.path.join(TESTS_BIN, "bugs"), "stall"]]):
        out, raw = work("pg%d.jsonl" % i), work("pg%d.raw" % i)
        p = corobpf(["--stacks", "-o", out, "-o", uri, "--raw", raw, "--"] + cmd)
        eq(p.returncode, 0, "live run %d exit code (%s)" % (i, p.stderr.strip()))
        traces.append((Trace(out), raw))
    out, raw = work("pgup.jsonl"), work("pgup.raw")
    p = corobpf(["-o", out, "--raw", raw, "--", os.path.join(BUILD, "demo"), "-d", "1"])
    eq(p.returncode, 0, "recording exit code (%s)" % p.stderr.strip())
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 0, "upload exit code (%s)" % p.stderr.strip())
    traces.append((Trace(out), raw))
    ids = [check_capture(uri, t) for t, _ in traces]
    eq(len(set(ids)), len(traces), "distinct capture ids")
    eq(psql(uri, "SELECT count(*) FROM captures")[0][0], str(len(traces)), "captures")
    check(int(psql(uri, "SELECT count(*) FROM findings")[0][0]) >= 2, "findings stored")
    # Uploading any of them again changes nothing, and says so.
    before = table_counts(uri)
    for _, raw in traces:
        p = corobpf(["report", raw, "-o", uri])
        eq(p.returncode, 0, "re-upload exit code (%s)" % p.stderr.strip())
        check("already stored" in p.stderr, "re-upload does not say it skipped: %r" % p.stderr)
    eq(table_counts(uri), before, "row counts after uploading again")
    # The documented cross-machine queries run.
    with open(os.path.join(ROOT, "docs", "store.md")) as f:
        queries = re.findall(r"```sql\n(.*?)```", f.read(), re.S)
    check(len(queries) >= 3, "docs/store.md has %d queries" % len(queries))
    for q in queries:
        psql(uri, q)


@test
def pgstore_newer_schema_is_refused_before_anything_is_written():
    base = server_uri()
    if not base:
        return
    uri = fresh_db(base, "corobpf_it_schema")
    raw = work("pgs.raw")
    p = corobpf(["-q", "--raw", raw, "--", os.path.join(BUILD, "demo"), "-d", "1"])
    eq(p.returncode, 0, "recording exit code (%s)" % p.stderr.strip())
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 0, "first upload (%s)" % p.stderr.strip())
    eq(psql(uri, "SELECT version FROM corobpf_schema"), [["2"]], "schema version")
    psql(uri, "UPDATE corobpf_schema SET version = 3; DELETE FROM captures")
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 7, "upload into a newer schema: exit code (%s)" % p.stderr.strip())
    check("schema is version 3" in p.stderr and "newer corobpf" in p.stderr,
          "no clear error: %r" % p.stderr)
    eq(psql(uri, "SELECT count(*) FROM captures"), [["0"]], "captures written anyway")
    # An older one is refused too: never written in a shape it lacks.
    psql(uri, "UPDATE corobpf_schema SET version = 0")
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 7, "upload into an older schema: exit code (%s)" % p.stderr.strip())
    check("schema is version 0, this corobpf writes version 2" in p.stderr and
          "another database" in p.stderr, "no clear error: %r" % p.stderr)
    eq(psql(uri, "SELECT count(*) FROM captures"), [["0"]], "captures written anyway")


@test
def pgstore_cxx20_awaiters_and_a_version_1_store_brought_up():
    """An unmodified C++20 program's awaiter types go to the awaiters table, row for row the
    JSONL's switches that say one; a store of version 1 (before that table) gets it and is
    version 2 after the next upload."""
    base = server_uri()
    if not base:
        return
    b = os.path.join(TESTS_BIN, "cxx20_tasks-clang-O0")
    if not os.path.exists(b):
        check(not CI, "%s not built" % b)
        print("     (skipped: %s not built)" % b)
        return
    uri = fresh_db(base, "corobpf_it_awaiters")
    trace, _, _, _, raw = trace_launch("pg_awaiters", [b, "--no-eager", "2"])
    want = sorted([str(e["pid"]), str(e["from_uid"]), str(int(e["from"], 16)), str(e["ts"]),
                   str(int(e["obj"], 16)), e["awaiter"]]
                  for e in trace.events if e["ev"] == "switch" and "awaiter" in e)
    check(want, "no switch says an awaiter: the test lost its case")
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 0, "upload (%s)" % p.stderr.strip())
    eq(sorted(psql(uri, "SELECT pid, uid, id, ts, obj, awaiter FROM awaiters")), want,
       "the awaiters table against the JSONL's switches")
    psql(uri, "DROP TABLE awaiters; UPDATE corobpf_schema SET version = 1; DELETE FROM captures")
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 0, "upload into a version 1 store (%s)" % p.stderr.strip())
    eq(psql(uri, "SELECT version FROM corobpf_schema"), [["2"]], "schema version after it")
    eq(sorted(psql(uri, "SELECT pid, uid, id, ts, obj, awaiter FROM awaiters")), want,
       "the awaiters table of a version 1 store, after the upload")


@test
def pgstore_server_killed_mid_run_leaves_an_uploadable_raw_capture():
    if not os.environ.get("COROBPF_PG_URI") and not _pg_installed():
        check(not CI, "PostgreSQL is not installed (tools/deps.sh installs it)")
        print("     (skipped: PostgreSQL is not installed)")
        return
    # A server of its own: this test kills it.
    d, base = start_server("killed")
    uri = fresh_db(base, "corobpf_it_kill")
    # A password in the URI is never shown (the test server trusts: it is not checked).
    u = urllib.parse.urlsplit(uri)
    secret_uri = urllib.parse.urlunsplit((u.scheme, "postgres:hunter2@", u.path, u.query, ""))
    out, raw = work("pgk.jsonl"), work("pgk.raw")
    # The command ends with tracing: corobpf waits for it after -d.
    tracer = Tracer(["-o", out, "-o", secret_uri, "--raw", raw, "-d", "5", "--",
                     os.path.join(BUILD, "demo"), "-d", "5"])
    began = tracer.wait_line("tracing")
    time.sleep(1.5)
    stop_server(d)
    rc = tracer.finish()
    err = tracer.err
    eq(rc, 7, "exit code with the server gone (stderr: %s)" % err.strip())
    check(tracer.end - began < 5 + 5, "-d 5 ended the run %.1f s after tracing began"
          % (tracer.end - began))
    check("hunter2" not in err, "the password is shown: %r" % err)
    check("left incomplete" in err, "no word of the incomplete capture: %r" % err)
    want = "corobpf report %s -o '" % raw
    check(want in err, "the command to upload %s is not given: %r" % (raw, err))
    trace = Trace(out)
    p = run([PG_SERVER, "start", d])
    eq(p.returncode, 0, "restart (%s)" % p.stderr.strip())
    cid, complete = one_capture(uri, trace.header["start_ts"])
    check(not complete, "capture %s marked complete after the server was killed" % cid)
    # The command the error gave stores it whole.
    cmd = err[err.index(want):].split("\n")[0]
    shown = cmd[len(want):].rstrip("'")
    check("hunter2" not in shown, "the command shows the password")
    p = corobpf(["report", "-q", raw, "-o", shown])
    eq(p.returncode, 0, "upload after the kill (%s)" % p.stderr.strip())
    eq(check_capture(uri, trace), cid, "capture id of the upload")
    stop_server(d)


# ---- a store that hangs, is locked, goes away or freezes: every run ends, and says why ----

class Tracer:
    """corobpf running, its stderr read as it comes (each line with the time it arrived)."""

    def __init__(self, args, env=None):
        import threading
        e = dict(os.environ)
        if env:
            e.update(env)
        self.start = time.time()
        self.p = subprocess.Popen([COROBPF] + args, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, env=e)
        self.lines = []
        self.end = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.append((time.time(), line))

    def _wait(self):
        # When it ended, whatever the test was doing then.
        self.p.wait()
        self.end = time.time()

    @property
    def raw(self):
        return b"".join(line for _, line in self.lines)

    @property
    def err(self):
        return self.raw.decode("utf-8", "replace")

    def wait_line(self, text, timeout=60):
        """When a line holding text arrived."""
        end = time.time() + timeout
        while time.time() < end:
            for t, line in list(self.lines):
                if text.encode() in line:
                    return t
            if self.p.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.02)
        raise Failure("%r never came on stderr: %r" % (text, self.err))

    def finish(self, timeout=120):
        rc = self.p.wait(timeout=timeout)
        while self.end is None:
            time.sleep(0.01)
        self.reader.join(10)
        return rc


class SilentServer:
    """A TCP server that accepts every connection and never says a word."""

    def __init__(self):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def _need_server():
    if not os.environ.get("COROBPF_PG_URI") and not _pg_installed():
        check(not CI, "PostgreSQL is not installed (tools/deps.sh installs it)")
        print("     (skipped: PostgreSQL is not installed)")
        return False
    return True


DEMO = os.path.join(BUILD, "demo")


@test
def pgstore_silent_server_ends_the_run_at_the_connect_timeout_or_a_signal():
    """A server that accepts and never answers: the run ends at the connect timeout (exit 7,
    naming the server, the timeout and the option that sets it), or at once on SIGINT or
    SIGTERM (exit 128+N), and the command is never started."""
    silent = SilentServer()
    try:
        uri = "postgresql://corobpf@127.0.0.1:%d/corobpf_it" % silent.port
        marker = work("pg-silent-ran")
        cmd = ["/bin/sh", "-c", "touch %s; exec %s -d 2" % (marker, DEMO)]
        tr = Tracer(["-d", "2", "--store-timeout", "connect=2", "-o", uri, "--raw",
                     work("pg-silent.raw"), "--"] + cmd)
        rc = tr.finish()
        eq(rc, 7, "exit code at the connect timeout (stderr: %s)" % tr.err.strip())
        check(tr.end - tr.start < 2 + 15, "the run took %.1f s with a 2 s connect timeout"
              % (tr.end - tr.start))
        for want in ("cannot connect to %s" % uri, "did not answer within 2 s",
                     "--store-timeout connect="):
            check(want in tr.err, "%r is not said: %r" % (want, tr.err))
        check(not os.path.exists(marker), "the command ran though the store never answered")
        # The default timeout, stopped by a signal before it: at once, 128+N.
        for sig in (signal.SIGINT, signal.SIGTERM):
            tr = Tracer(["-o", uri, "--"] + cmd)
            time.sleep(1.5)
            sent = time.time()
            tr.p.send_signal(sig)
            rc = tr.finish()
            eq(rc, 128 + sig, "exit code after signal %d while connecting (stderr: %s)"
               % (sig, tr.err.strip()))
            check(tr.end - sent < 5, "signal %d ended the run %.1f s after it was sent"
                  % (sig, tr.end - sent))
            check("while connecting to %s" % uri in tr.err,
                  "what was stopped is not said: %r" % tr.err)
            check(not os.path.exists(marker), "the command ran though the store never answered")
    finally:
        silent.close()


def lock_holders(uri):
    return psql(uri, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 "
                "AND objid = 2020202020 AND granted")


def lock_waiters(uri):
    return psql(uri, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 "
                "AND objid = 2020202020 AND NOT granted")


@test
def pgstore_schema_lock_held_by_another_session_is_bounded_and_named():
    """Another database session holds pg_advisory_lock(2020202020), the lock corobpf creates
    its schema under: a run into an empty database gives up at the lock timeout (exit 7,
    naming the session that holds it and how to end it) or at once on SIGINT, leaving no wait
    behind on the server; a run into a database whose schema is there does not take the
    lock at all."""
    if not _need_server():
        return
    base = server_uri()
    uri = fresh_db(base, "corobpf_it_lock")
    holder = subprocess.Popen(["psql", "-X", "-q", uri], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        holder.stdin.write("SELECT pg_advisory_lock(2020202020);\n")
        holder.stdin.flush()
        end = time.time() + 30
        while not lock_holders(uri) and time.time() < end:
            time.sleep(0.1)
        held_by = lock_holders(uri)
        check(held_by, "the test's session never got the lock")
        held_by = int(held_by[0][0])
        raw = work("pglock.raw")
        tr = Tracer(["-d", "2", "--store-timeout", "lock=2", "-o", uri, "--raw", raw, "--",
                     DEMO, "-d", "2"])
        rc = tr.finish()
        eq(rc, 7, "exit code at the lock timeout (stderr: %s)" % tr.err.strip())
        check(tr.end - tr.start < 2 + 15, "the run took %.1f s with a 2 s lock timeout"
              % (tr.end - tr.start))
        for want in ("schema lock", "pid %d" % held_by, "pg_terminate_backend(%d)" % held_by,
                     "--store-timeout lock="):
            check(want in tr.err, "%r is not said: %r" % (want, tr.err))
        eq(lock_waiters(uri), [], "sessions still waiting for the lock after the run")
        # SIGINT while waiting for it (the default timeout): at once, and no wait left behind.
        tr = Tracer(["-o", uri, "--", DEMO, "-d", "2"])
        end = time.time() + 30
        while not lock_waiters(uri) and time.time() < end:
            time.sleep(0.1)
        check(lock_waiters(uri), "the run never waited for the lock: %r" % tr.err)
        sent = time.time()
        tr.p.send_signal(signal.SIGINT)
        rc = tr.finish()
        eq(rc, 128 + signal.SIGINT, "exit code after SIGINT at the lock (stderr: %s)"
           % tr.err.strip())
        check(tr.end - sent < 5, "SIGINT ended the run %.1f s after it was sent"
              % (tr.end - sent))
        check("schema lock" in tr.err, "what was stopped is not said: %r" % tr.err)
        end = time.time() + 10
        while lock_waiters(uri) and time.time() < end:
            time.sleep(0.1)
        eq(lock_waiters(uri), [], "sessions still waiting for the lock after SIGINT")
        # The schema made (the lock released a moment), a store run no longer needs the lock.
        holder.stdin.write("SELECT pg_advisory_unlock(2020202020);\n")
        holder.stdin.flush()
        end = time.time() + 30
        while lock_holders(uri) and time.time() < end:
            time.sleep(0.1)
        p = corobpf(["-q", "--raw", raw, "--", DEMO, "-d", "1"])
        eq(p.returncode, 0, "recording (%s)" % p.stderr.strip())
        p = corobpf(["report", "-q", raw, "-o", uri])
        eq(p.returncode, 0, "upload, the lock free (%s)" % p.stderr.strip())
        psql(uri, "DELETE FROM captures")
        holder.stdin.write("SELECT pg_advisory_lock(2020202020);\n")
        holder.stdin.flush()
        p = corobpf(["report", "-q", raw, "-o", uri, "--store-timeout", "lock=2"])
        eq(p.returncode, 0, "upload with the schema there and the lock held (%s)"
           % p.stderr.strip())
        eq(psql(uri, "SELECT count(*) FROM captures WHERE complete"), [["1"]],
           "complete captures")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def _server_pids(d):
    """The server's processes: the postmaster (its pid file) and its children."""
    with open(os.path.join(d, "data", "postmaster.pid")) as f:
        pm = int(f.readline())
    pids = [pm]
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/stat" % e) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pm:
                        pids.append(int(e))
            except (OSError, IndexError, ValueError):
                pass
    return pids


@test
def pgstore_server_frozen_mid_run_ends_the_run_soon_after_the_stop():
    """Every server process stopped (SIGSTOP) while the run stores. When -d or SIGINT stops
    tracing, the store waits about a second for an answer, no more; when the traced program
    ends by itself, the run says it waits for the server and a SIGINT ends that wait. Each:
    exit 7, the capture left incomplete, and the raw capture stores it later."""
    if not _need_server():
        return
    d, base = start_server("frozen")
    uri = fresh_db(base, "corobpf_it_frozen")
    try:
        for i, how in enumerate(("-d", "SIGINT", "end, then SIGINT")):
            raw = work("pgf%d.raw" % i)
            target = None
            if how == "end, then SIGINT":
                tr = Tracer(["-o", uri, "--raw", raw, "--", DEMO, "-d", "4"])
            else:
                target = subprocess.Popen([DEMO, "-d", "60"], stdout=subprocess.DEVNULL)
                time.sleep(0.3)
                tr = Tracer((["-d", "5"] if how == "-d" else []) +
                            ["-o", uri, "--raw", raw, "-p", str(target.pid)])
            try:
                began = tr.wait_line("tracing")
                time.sleep(2)
                pids = _server_pids(d)
                for pid in pids:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    if how == "-d":
                        stop = began + 5
                    else:
                        if how == "SIGINT":
                            time.sleep(1)
                        else:
                            tr.wait_line("waiting for the server", timeout=60)
                        stop = time.time()
                        tr.p.send_signal(signal.SIGINT)
                    rc = tr.finish()
                finally:
                    for pid in pids:
                        os.kill(pid, signal.SIGCONT)
            finally:
                if target:
                    target.kill()
                    target.wait()
            eq(rc, 7, "exit code, the server frozen, %s (stderr: %s)" % (how, tr.err.strip()))
            check(tr.end - stop < 6, "the run ended %.1f s after %s stopped it"
                  % (tr.end - stop, how))
            for want in ("did not answer", "left incomplete",
                         "corobpf report %s -o '" % raw):
                check(want in tr.err, "%r is not said (%s): %r" % (want, how, tr.err))
            p = corobpf(["report", "-q", raw, "-o", uri])
            eq(p.returncode, 0, "upload after the freeze (%s)" % p.stderr.strip())
        eq(psql(uri, "SELECT count(*) FROM captures WHERE complete"), [["3"]],
           "complete captures after the uploads")
    finally:
        stop_server(d)


# ---- the password: never on the command line for long, never in a message ----

PW = "Hunter2-c0robpf-pw"


def _password_server():
    """A server of its own where the role corobpf_pw logs in with PW (SCRAM), over the
    socket: (directory, URI of its database without the password)."""
    d, base = start_server("pw")
    psql(base, "CREATE ROLE corobpf_pw LOGIN PASSWORD '%s'" % PW)
    psql(base, "CREATE DATABASE corobpf_it_pw OWNER corobpf_pw")
    hba = os.path.join(d, "data", "pg_hba.conf")
    with open(hba) as f:
        rules = f.read()
    with open(hba, "w") as f:
        f.write("local all corobpf_pw scram-sha-256\n" + rules)
    psql(base, "SELECT pg_reload_conf()")
    uri = "postgresql://corobpf_pw@/corobpf_it_pw?host=%s" % d
    end = time.time() + 30
    while time.time() < end:
        p = run(["psql", "-X", "-w", uri, "-c", "SELECT 1"], env={"PGPASSWORD": ""})
        if p.returncode and "password" in p.stderr:
            break
        time.sleep(0.1)
    else:
        raise Failure("the server never asked corobpf_pw for a password")
    return d, uri


def _cmdlines_holding(secret):
    found = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open("/proc/%s/cmdline" % e, "rb") as f:
                    if secret.encode() in f.read():
                        found.append(int(e))
            except OSError:
                pass
    return found


@test
def pgstore_password_is_never_on_the_command_line_or_in_a_message():
    """A password given in -o (as user:PW@, password=PW, or %70assword=PW) is gone from
    every process's /proc/PID/cmdline while the run goes on, is never printed, and a warning
    says where to keep it instead; a wrong one fails without being shown; PGPASSFILE and
    PGPASSWORD give it as libpq does."""
    if not _need_server():
        return
    d, uri = _password_server()
    try:
        u = urllib.parse.urlsplit(uri)
        forms = [urllib.parse.urlunsplit((u.scheme, "corobpf_pw:%s@" % PW, u.path, u.query, "")),
                 uri + "&password=" + PW, uri + "&%70assword=" + PW]
        for i, secret_uri in enumerate(forms):
            raw = work("pgpw%d.raw" % i)
            tr = Tracer(["-o", secret_uri, "--raw", raw, "--", DEMO, "-d", "3"])
            tr.wait_line("tracing")
            holding = _cmdlines_holding(PW)
            rc = tr.finish()
            eq(holding, [], "processes whose command line holds the password (form %d; "
               "corobpf is %d)" % (i, tr.p.pid))
            eq(rc, 0, "exit code, form %d (stderr: %s)" % (i, tr.err.strip()))
            check(PW not in tr.err, "the password is shown (form %d): %r" % (i, tr.err))
            check("PGPASSFILE" in tr.err and "command line" in tr.err,
                  "no warning of the password on the command line (form %d): %r"
                  % (i, tr.err))
        eq(psql(_superuser(d, "corobpf_it_pw"), "SELECT count(*) FROM captures WHERE complete"),
           [["3"]], "captures stored with the password")
        raw = work("pgpw0.raw")
        # A wrong password, percent-encoded: refused by the server, never shown.
        wrong = "Wr0ng-" + PW[::-1]
        p = corobpf(["report", "-q", raw, "-o", uri + "&%70assword=" + wrong])
        eq(p.returncode, 7, "exit code with a wrong password (%s)" % p.stderr.strip())
        check(wrong not in p.stderr and "password authentication failed" in p.stderr,
              "the wrong password is shown, or the failure is not said: %r" % p.stderr)
        # Not a URI libpq reads (a bad percent-encoding in the password): a usage error that
        # does not quote it.
        bad = urllib.parse.urlunsplit((u.scheme, "corobpf_pw:%%zz%s@" % PW, u.path, u.query, ""))
        p = corobpf(["report", "-q", raw, "-o", bad])
        eq(p.returncode, 2, "exit code with a URI libpq cannot read (%s)" % p.stderr.strip())
        check(PW not in p.stderr, "the password of a bad URI is shown: %r" % p.stderr)
        # From libpq's own places: a password file, the environment.
        psql(_superuser(d, "corobpf_it_pw"), "DELETE FROM captures")
        passfile = work("pgpass")
        with open(passfile, "w") as f:
            f.write("*:*:*:corobpf_pw:%s\n" % PW)
        os.chmod(passfile, 0o600)
        p = corobpf(["report", raw, "-o", uri], env={"PGPASSFILE": passfile})
        eq(p.returncode, 0, "upload with PGPASSFILE (%s)" % p.stderr.strip())
        check("command line" not in p.stderr, "a warning without a password given: %r"
              % p.stderr)
        p = corobpf(["report", "-q", work("pgpw1.raw"), "-o", uri], env={"PGPASSWORD": PW})
        eq(p.returncode, 0, "upload with PGPASSWORD (%s)" % p.stderr.strip())
    finally:
        stop_server(d)


def _superuser(d, db):
    return "postgresql://postgres@/%s?host=%s" % (db, d)


# ---- what the server says reaches the terminal escaped ----

@test
def pgstore_server_warnings_and_errors_reach_the_terminal_escaped():
    """A server WARNING (here from a trigger on the captures table the store writes) holding
    an OSC 52 clipboard write and a screen clear reaches stderr escaped, as does an error
    holding them; a flood of them (a warning per row) shows 20 and counts the rest."""
    base = server_uri()
    if not base:
        return
    uri = fresh_db(base, "corobpf_it_notice")
    raw = work("pgn.raw")
    p = corobpf(["-q", "--raw", raw, "--", DEMO, "-d", "1"])
    eq(p.returncode, 0, "recording exit code (%s)" % p.stderr.strip())
    p = corobpf(["report", "-q", raw, "-o", uri])
    eq(p.returncode, 0, "first upload (%s)" % p.stderr.strip())
    psql(uri, "DELETE FROM captures")
    hostile = r"E'clip \x1b]52;c;Y29yb2JwZg==\x07 clear \x1b[2J end'"
    psql(uri, "CREATE FUNCTION corobpf_it_warn() RETURNS trigger LANGUAGE plpgsql AS $$ "
         "BEGIN RAISE WARNING '%%', %s; RETURN NEW; END $$" % hostile)
    psql(uri, "CREATE TRIGGER corobpf_it_warn BEFORE INSERT ON captures FOR EACH ROW "
         "EXECUTE FUNCTION corobpf_it_warn()")
    p = subprocess.run([COROBPF, "report", "-q", raw, "-o", uri], capture_output=True,
                       timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    eq(p.returncode, 0, "upload with the warning trigger (%s)" % err.strip())
    check(b"\x1b" not in p.stderr and b"\x07" not in p.stderr,
          "control characters reach the terminal raw: %r" % p.stderr)
    check("\\x1b]52;c;Y29yb2JwZg==\\x07" in err and "\\x1b[2J" in err,
          "the server's warning is not shown escaped: %r" % err)
    # A warning per row of events: 20 shown, the others counted.
    psql(uri, "DROP TRIGGER corobpf_it_warn ON captures; DELETE FROM captures; TRUNCATE events")
    psql(uri, "CREATE TRIGGER corobpf_it_warn BEFORE INSERT ON events FOR EACH ROW "
         "EXECUTE FUNCTION corobpf_it_warn()")
    p = subprocess.run([COROBPF, "report", "-q", raw, "-o", uri], capture_output=True,
                       timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    eq(p.returncode, 0, "upload with a warning per row (%s)" % err[-2000:])
    rows = int(psql(uri, "SELECT count(*) FROM events")[0][0])
    check(rows > 100, "only %d events rows: the test lost its case" % rows)
    eq(err.count("the server says: WARNING"), 20, "warnings shown")
    check("%d more messages from the server were not shown" % (rows - 20) in err,
          "the warnings not shown are not counted: %r" % err[-2000:])
    psql(uri, "DROP TRIGGER corobpf_it_warn ON events; DELETE FROM captures")
    psql(uri, "CREATE TRIGGER corobpf_it_warn BEFORE INSERT ON captures FOR EACH ROW "
         "EXECUTE FUNCTION corobpf_it_warn()")
    psql(uri, "CREATE OR REPLACE FUNCTION corobpf_it_warn() RETURNS trigger LANGUAGE plpgsql "
         "AS $$ BEGIN RAISE EXCEPTION '%%', %s; END $$" % hostile)
    p = subprocess.run([COROBPF, "report", "-q", raw, "-o", uri], capture_output=True,
                       timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    eq(p.returncode, 7, "upload with the failing trigger (%s)" % err.strip())
    check(b"\x1b" not in p.stderr and b"\x07" not in p.stderr,
          "control characters reach the terminal raw: %r" % p.stderr)
    check("\\x1b[2J" in err, "the server's error is not shown escaped: %r" % err)


def _stop_all():
    for d in _servers:
        stop_server(d)
        if not os.environ.get("KEEP"):
            shutil.rmtree(d, ignore_errors=True)


import atexit  # noqa: E402
atexit.register(_stop_all)
