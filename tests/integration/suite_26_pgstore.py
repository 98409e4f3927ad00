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
    tracer = subprocess.Popen([COROBPF, "-o", out, "-o", secret_uri, "--raw", raw, "--",
                               os.path.join(BUILD, "demo"), "-d", "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    stop_server(d)
    _, err = tracer.communicate(timeout=120)
    eq(tracer.returncode, 7, "exit code with the server gone (stderr: %s)" % err.strip())
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


def _stop_all():
    for d in _servers:
        stop_server(d)
        if not os.environ.get("KEEP"):
            shutil.rmtree(d, ignore_errors=True)


import atexit  # noqa: E402
atexit.register(_stop_all)
