"""The batched probe path under attack: a traced program owns its batch buffer, its address and
every byte in it. Whatever it writes there, or says about it, corobpf must never write into any
process, nor read another process's memory, and what it forges must bend no other program's
trace, nor the run's time span."""
from harness import *  # noqa: F401,F403
from suite_27_batch import check_threads, read_state  # noqa: E402

PROGS = os.path.join(ROOT, "tests", "integration", "progs")


def build(name, extra=(), where=None):
    exe = os.path.join(where or WORK, name)
    if not os.path.exists(exe):
        p = run(["cc", "-O2", "-I", os.path.join(ROOT, "usdt")] + list(extra) +
                [os.path.join(PROGS, name + ".c"), "-o", exe])
        eq(p.returncode, 0, "building %s: %s" % (name, p.stderr))
    return exe


def setuid_victim():
    """setuid_flag, set-uid root in a directory of root's that everyone may enter."""
    d = os.path.join(WORK, "suid")
    os.makedirs(d, exist_ok=True)
    os.chmod(WORK, 0o755)
    os.chmod(d, 0o755)
    exe = build("setuid_flag", ["-no-pie"], d)
    os.chown(exe, 0, 0)
    os.chmod(exe, 0o4755)
    return exe


@test
def hostile_batch_setuid_flag_unchanged():
    """A user's programs each register "their buffer" 8 bytes before a flag of a set-uid root
    program, wait for the session to detach (and a while more, each its own while) and exec that
    program (same pid), while a busy program keeps the session's end long. With -p and with -a,
    every flag must stay as it was: corobpf writes into no process. (It once cleared each
    buffer's registration flag at its end, at the address the thread gave, in whatever process
    then held the pid: most of these flags came back 0.)"""
    victim = setuid_victim()
    flag = int(run([victim, "addr"]).stdout.strip(), 16)
    liar = build("batch_liar", where=attacker_dir("liar"))
    busy = os.path.join(WORK, "batch_truth_busy")
    if not os.path.exists(busy):
        p = run(["cc", "-O2", "-pthread", "-I", os.path.join(ROOT, "usdt"),
                 os.path.join(PROGS, "batch_truth.c"), "-o", busy])
        eq(p.returncode, 0, "building batch_truth: " + p.stderr)
    for mode in ("-p", "-a"):
        go = os.path.join(WORK, "suid", "go" + mode)
        # Another session on the machine may keep the semaphore up: then the liars go on
        # once this session has ended.
        ended = work("liar-ended" + mode)
        flood = subprocess.Popen([busy, work("liar-busy%s.state" % mode), "2", "2000000000",
                                  "slow"])
        liars = [subprocess.Popen(as_attacker([liar, "%x" % (flag - 8), str(ms), ended, victim,
                                               go]),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for ms in (-1, 0, 250, 500, 1000, 1500, 2500, 4000, 6000, 9000, 12000)]
        try:
            args = ["-a"] if mode == "-a" else sum((["-p", str(p.pid)] for p in liars),
                                                  ["-p", str(flood.pid)])
            db = work("liar%s.sqlite" % mode)
            p = corobpf(args + ["--probe-path", "batched", "-d", "1", "-o", db], timeout=300)
            eq(p.returncode, 0, "corobpf %s exit code (%s)" % (mode, p.stderr.strip()[-2000:]))
            open(ended, "w").close()
            # Each lie is read where it points, in the liar's own memory: nothing there, its
            # last copy counted (at its exec, or at the end). (-a admits a process once it
            # showed a record of the session: a liar that registered before, under another
            # session, never does, and is never read.)
            con = sqlite3.connect(db)
            unread = int(con.execute("select value from meta where key = "
                                     "'batch_last_copies_unread'").fetchone()[0])
            con.close()
            check(unread >= 1 or mode == "-a", "%s: no last copy that could not be read" % mode)
            flood.kill()
            time.sleep(13)
            open(go, "w").close()
            outs = [lp.communicate(timeout=60) for lp in liars]
        finally:
            for lp in liars + [flood]:
                if lp.poll() is None:
                    lp.kill()
                    lp.wait()
        for k, (out, err) in enumerate(outs):
            where = "%s, program %d" % (mode, k)
            check("REGISTERED" in out, "%s never registered its address (%s)" % (where,
                                                                               err.strip()))
            got = re.search(r"FLAG (\w+) euid (\d+)", out)
            check(got, "%s: the set-uid program did not report (%r, %r)" % (where, out, err))
            eq(got.group(2), "0", "%s: the victim ran set-uid root" % where)
            eq(got.group(1), "beef", "%s: the set-uid program's flag" % where)


@test
def hostile_batch_forged_times_bend_no_other_trace():
    """A user's program rewrites the times of its batched records (an hour ahead, the largest
    time there is, long before the session), traced in one session with an honest program (two
    -p, then -a): each forged time is clamped into its copy's range (counted, said), the honest
    program's trace is exact with no finding, and the run's time span is the run's (before, the
    forger gave the victim dozens of false lost wakeups and the summary a span of 219606 s)."""
    forger = build("batch_forger", where=attacker_dir("forger"))
    truth = os.path.join(WORK, "batch_truth_forged")
    if not os.path.exists(truth):
        p = run(["cc", "-O2", "-pthread", "-I", os.path.join(ROOT, "usdt"),
                 os.path.join(PROGS, "batch_truth.c"), "-o", truth])
        eq(p.returncode, 0, "building batch_truth: " + p.stderr)
    for mode in ("-p", "-a"):
        fp = subprocess.Popen(as_attacker([forger]), stdout=subprocess.PIPE, text=True)
        st = work("forged%s.state" % mode)
        go = work("forged%s.go" % mode)
        vp = subprocess.Popen([truth, st, "2", "3000", "sleep", go])
        out = work("forged%s.jsonl" % mode)
        try:
            line = fp.stdout.readline().split()
            eq(line[:1], ["READY"], "the forger's start")
            args = ["-p", line[1], "-p", str(vp.pid)] if mode == "-p" else ["-a"]
            start = time.time()
            # The honest program starts 6,000 coroutines in a few ms: a spawn storm of its own.
            tr, ef, err = start_tracer(args + ["--probe-path", "batched", "--spawn-storm",
                                               "1000000", "-o", out], "forged" + mode)
            try:
                wait_for(err, "tracing ")
                open(go, "w").close()
                eq(vp.wait(timeout=120), 0, "the honest program's exit code")
                time.sleep(0.5)
                tr.send_signal(signal.SIGINT)
                eq(tr.wait(timeout=120), 0, "corobpf %s exit code" % mode)
                wall = time.time() - start
            finally:
                if tr.poll() is None:
                    tr.kill()
                    tr.wait()
                ef.close()
        finally:
            fp.kill()
            fp.wait()
            if vp.poll() is None:
                vp.kill()
                vp.wait()
        with open(err) as f:
            stderr = f.read()
        trace = Trace(out)
        t = trace.trailer
        span = (t["last_ts"] - t["first_ts"]) / 1e9
        check(0 < span <= wall + 2, "%s: the trace spans %.1f s of a %.1f s run" % (
            mode, span, wall))
        state = read_state(st)
        eq(list(state[1][:2]), [3000, 3000], "%s: the honest program's iterations" % mode)
        check_threads(trace, vp.pid, state, 2)
        found = [f for f in trace.records if f["type"] == "finding" and f.get("pid") == vp.pid]
        eq(found, [], "%s: findings of the honest program" % mode)
        mine = [e for e in trace.events if e["pid"] == vp.pid]
        check(all(t["first_ts"] <= e["ts"] <= t["last_ts"] for e in mine),
              "%s: the honest program's events out of the trace's span" % mode)
        check(t["anomalies"].get("batch_ts_clamped", 0) > 0,
              "%s: no clamped record counted" % mode)
        check(t["lost"].get("batch_restarts", 0) > 0,
              "%s: no buffer started again unread counted" % mode)
        check("clamped" in stderr, "%s: the summary does not say so:\n%s" % (mode, stderr))
