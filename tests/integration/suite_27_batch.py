"""The batched probe path (--probe-path batched, docs/probes.md): each thread keeps its records,
the BPF side copies them out. The trace must be exactly the trap path's: the program
(progs/batch_truth.c) publishes per thread how many iterations of a fixed probe sequence it
completed, in a shared mapping that survives a SIGKILL, and each thread's traced events must be
that sequence, in order, with the trap path's coroutine attribution (the ready's waker, the
span's owner, both from the BPF side's view of the thread)."""
import json
import mmap
import struct

from harness import *  # noqa: F401,F403

SRC = os.path.join(ROOT, "tests", "integration", "progs", "batch_truth.c")
MAXT = 32
REASONS = ["unknown", "yield", "wait", "sleep", "io", "done"]


def batch_truth(old_buffer=False):
    """The program, built with this tree's header (once per run); old_buffer: with the buffer of
    headers before December 2026 (no last_switch)."""
    exe = work("batch_truth" + ("_old_buffer" if old_buffer else ""))
    if not os.path.exists(exe):
        flags = ["-DCOROBPF_BATCH_NO_LAST_SWITCH"] if old_buffer else []
        p = run(["cc", "-O2", "-pthread", "-I", os.path.join(ROOT, "usdt")] + flags +
                [SRC, "-o", exe])
        eq(p.returncode, 0, "building batch_truth: " + p.stderr)
    return exe


def read_state(path):
    with open(path, "rb") as f:
        m = f.read()
    tids = struct.unpack_from("<%dq" % MAXT, m, 0)
    done = struct.unpack_from("<%dq" % MAXT, m, 8 * MAXT)
    finished = struct.unpack_from("<q", m, 16 * MAXT)[0]
    return tids, done, finished


def wait_state(path, cond, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) >= 8 * (2 * MAXT + 1):
            s = read_state(path)
            if cond(s):
                return s
        time.sleep(0.02)
    raise Failure("the program never reached the state awaited (%s)" % path)


def expected(t, i0, i1):
    """Thread t's events for iterations [i0, i1), as the JSONL shows them."""
    out = []
    for i in range(i0, i1):
        cid = "0x%x" % ((t + 1) << 32 | (i + 1))
        out.append(("create", cid, "0x0"))
        out.append(("switch", "0x0", cid, "yield", "0x0"))
        out.append(("ready", cid, cid))
        if i % 10 == 0:
            out.append(("span_begin", cid, "s"))
            out.append(("name", cid, "c" + cid[2:]))
            out.append(("span_end", cid, "s"))
        out.append(("switch", cid, "0x0", "done", "0x%x" % i))
        out.append(("exit", cid, -(i % 3)))
    return out


def as_tuple(e):
    ev = e["ev"]
    if ev == "create":
        return (ev, e["id"], e["parent"])
    if ev == "switch":
        return (ev, e["from"], e["to"], e["reason"], e["obj"])
    if ev == "ready":
        return (ev, e["id"], e["waker"])
    if ev in ("span_begin", "span_end", "name"):
        return (ev, e["id"], e["name"])
    if ev == "exit":
        return (ev, e["id"], e["status"])
    return None


def per_thread(trace, pid):
    seqs = {}
    for e in trace.events:
        if e["pid"] != pid:
            continue
        tup = as_tuple(e)
        if tup:
            seqs.setdefault(e["tid"], []).append(tup)
    return seqs


def check_threads(trace, pid, state, nthreads, exact=True, first=None):
    """Each thread's traced events: its iterations [first or 0, done), exactly; with
    exact=False a prefix of the iteration in flight may follow (a kill)."""
    tids, done, _ = state
    seqs = per_thread(trace, pid)
    eq(sorted(seqs), sorted(tids[:nthreads]), "threads with events")
    for t in range(nthreads):
        got = seqs[tids[t]]
        i0 = first[t] if first else 0
        want = expected(t, i0, done[t])
        where = "thread %d (tid %d)" % (t, tids[t])
        if exact:
            if got != want:
                for k, (a, b) in enumerate(zip(got, want)):
                    if a != b:
                        raise Failure("%s: event %d is %r, the program fired %r" % (where, k, a, b))
                raise Failure("%s: %d events traced, the program fired %d" % (where, len(got), len(want)))
        else:
            eq(got[:len(want)], want, where + ": its completed iterations")
            more = expected(t, done[t], done[t] + 1)
            eq(got[len(want):], more[:len(got) - len(want)], where + ": the iteration in flight")


def traced(name, mode, nthreads, iters, path, extra=(), old_buffer=False):
    exe = batch_truth(old_buffer)
    out, st = work(name + ".jsonl"), work(name + ".state")
    p = corobpf(["--probe-path", path, "-o", out] + list(extra) +
                ["--", exe, st, str(nthreads), str(iters), mode])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    return Trace(out), read_state(st), p


@test
def batch_same_trace_as_the_trap_path():
    """Sleeping and running threads: both paths give each thread exactly its events."""
    for path in ("trap", "batched"):
        trace, state, p = traced("batch_sleep_" + path, "sleep", 4, 3000, path)
        check(("probe path: batched" in p.stderr) == (path == "batched"),
              "corobpf does not say it uses the batched path:\n" + p.stderr)
        eq(state[2], 4, "threads finished")
        # A batched session elsewhere (another test's -a) may make the program append: the
        # trap-path session reads those records from the buffers, and has them all the same.
        check_clean(trace)
        pid = trace.processes[0]["pid"]
        check_threads(trace, pid, state, 4)


@test
def batch_program_with_the_old_buffer():
    """A program built with a header from before last_switch (the buffer's flags say nothing):
    corobpf reads each copy's records back for the thread's coroutine, and the spans' owners
    (the BPF side's view of the thread) are the same as with the new header."""
    for mode, n in (("sleep", 3000), ("spin", 20000)):
        trace, state, p = traced("batch_old_" + mode, mode, 2, n, "batched", old_buffer=True)
        check("probe path: batched" in p.stderr, "not on the batched path:\n" + p.stderr)
        check_clean(trace)
        check_threads(trace, trace.processes[0]["pid"], state, 2)


@test
def batch_threads_that_never_switch():
    """Threads with no system call for their whole run: the tick copies them out, in time for
    the reorder window (no late records)."""
    trace, state, p = traced("batch_spin", "spin", 2, 20000, "batched")
    check_clean(trace)
    check_threads(trace, trace.processes[0]["pid"], state, 2)


@test
def batch_thread_that_execs():
    """A thread (not the main one) fires its last probes and execs at once: what it wrote since
    its last copy is copied out before the exec replaces its memory, the other threads' at their
    exit, and nothing of the old image is read after the exec."""
    trace, state, p = traced("batch_exec", "exec", 3, 3000, "batched")
    check("exec hook" not in p.stderr, "the exec hook did not attach:\n" + p.stderr)
    check_clean(trace)
    eq(state[1][0], 3000, "the exec'ing thread's iterations")
    check_threads(trace, trace.processes[0]["pid"], state, 3)


@test
def batch_probes_in_a_signal_handler():
    """A signal handler fires probes while the thread it interrupted is inside one of its own:
    every coroutine of both is traced exactly once, created and exited, nothing garbled."""
    exe = work("batch_signal")
    if not os.path.exists(exe):
        p = run(["cc", "-O2", "-pthread", "-I", os.path.join(ROOT, "usdt"),
                 os.path.join(os.path.dirname(SRC), "batch_signal.c"), "-o", exe])
        eq(p.returncode, 0, "building batch_signal: " + p.stderr)
    go = work("batch_signal.go")
    out = work("batch_signal.jsonl")
    # 300,000 iterations in well under a second batched, a signal every 20 us: thousands
    # handled, many inside a probe of the loop. The ring holds the whole run.
    prog = subprocess.Popen([exe, "300000", "20", go], stdout=subprocess.PIPE, text=True)
    try:
        tr, ef, err = start_tracer(["--probe-path", "batched", "--ring-size", "256", "-p",
                                    str(prog.pid), "-o", out], "batch_signal")
        try:
            wait_for(err, "Ctrl-C to stop")
            open(go, "w").close()
            line = prog.stdout.readline().split()
            eq(prog.wait(timeout=120), 0, "the program's exit code")
            eq(tr.wait(timeout=60), 0, "corobpf exit code")
        finally:
            ef.close()
    finally:
        if prog.poll() is None:
            prog.kill()
    eq(line[:1], ["main"], "the program's report")
    iters, handled = int(line[1]), int(line[3])
    check(handled > 500, "too few signals handled to mean anything: %d" % handled)
    trace = Trace(out)
    want = {"0x%x" % (0x100000000 + i) for i in range(iters)} | \
           {"0x%x" % (0x200000000 + k) for k in range(handled)}
    creates = [e["id"] for e in trace.by_ev("create")]
    exits = [e["id"] for e in trace.by_ev("exit")]
    eq(len(creates), len(set(creates)), "coroutines created twice")
    missing = want - set(creates)
    extra = set(creates) - want
    check(not missing and not extra, "creates: %d missing (e.g. %s), %d not fired (e.g. %s)" % (
          len(missing), sorted(missing)[:3], len(extra), sorted(extra)[:3]))
    eq(sorted(exits), sorted(creates), "exits")
    eq(trace.trailer["lost"]["events"], 0, "events lost")


@test
def batch_hung_program_stopped_by_duration():
    """A program that blocks for good once done, attached and stopped by -d: nothing is
    missing (the threads' last records are copied out as they block, or read at the stop)."""
    exe = batch_truth()
    st = work("batch_hang.state")
    go = work("batch_hang.go")
    prog = subprocess.Popen([exe, st, "3", "4000", "hang", go])
    out = work("batch_hang.jsonl")
    try:
        tr, ef, err = start_tracer(["--probe-path", "batched", "-d", "4", "-p", str(prog.pid),
                                    "-o", out], "batch_hang")
        try:
            wait_for(err, "tracing ")
            open(go, "w").close()
            eq(tr.wait(timeout=60), 0, "corobpf exit code")
        finally:
            ef.close()
        state = read_state(st)
        check(prog.poll() is None, "the program did not survive the trace")
    finally:
        prog.kill()
        prog.wait()
    eq(state[2], 3, "threads finished before the end")
    trace = Trace(out)
    check_clean(trace)
    check_threads(trace, prog.pid, state, 3)


@test
def batch_killed_mid_run():
    """SIGKILL while threads append: every completed iteration is in the trace (copied out at
    each thread's exit), and nothing the threads did not do."""
    exe = batch_truth()
    st = work("batch_kill.state")
    go = work("batch_kill.go")
    prog = subprocess.Popen([exe, st, "3", "200000", "kill", go])
    out = work("batch_kill.jsonl")
    tr, ef, err = start_tracer(["--probe-path", "batched", "-p", str(prog.pid), "-o", out],
                               "batch_kill")
    try:
        wait_for(err, "Ctrl-C to stop")
        open(go, "w").close()
        wait_state(st, lambda s: min(s[1][:3]) > 3000)
        prog.kill()
        prog.wait()
        state = read_state(st)
        eq(tr.wait(timeout=60), 0, "corobpf exit code")
    finally:
        ef.close()
        if prog.poll() is None:
            prog.kill()
    trace = Trace(out)
    check_clean(trace)
    check_threads(trace, prog.pid, state, 3, exact=False)


@test
def batch_attach_and_detach_running_program():
    """Attached to a running program and stopped while it runs, twice: it goes on unharmed, and
    each thread's trace is one stretch of its sequence, in order, with nothing invented. The
    second session learns the buffers from the registry the first left: its trace is as clean
    as the first's. (With another session's -a raising the semaphore, the records a session met
    in use were stamped before its process record: unknown_pid.)"""
    exe = batch_truth()
    st = work("batch_attach.state")
    prog = subprocess.Popen([exe, st, "2", "100000000", "slow"])
    outs = []
    try:
        wait_state(st, lambda s: min(s[1][:2]) > 1000)
        for session in (1, 2):
            out = work("batch_attach%d.jsonl" % session)
            p = corobpf(["--probe-path", "batched", "-p", str(prog.pid), "-d", "1", "-o", out])
            eq(p.returncode, 0, "corobpf exit code, session %d (%s)" % (session, p.stderr.strip()))
            outs.append(out)
        # Unharmed: still running, its threads still going after the detach.
        state = read_state(st)
        wait_state(st, lambda s: min(a - b for a, b in zip(s[1][:2], state[1][:2])) > 1000)
        check(prog.poll() is None, "the program did not survive the trace")
    finally:
        prog.kill()
        prog.wait()
    for session, out in enumerate(outs, 1):
        trace = Trace(out)
        check_clean(trace)
        seqs = per_thread(trace, prog.pid)
        eq(len(seqs), 2, "threads traced, session %d" % session)
        for t in range(2):
            got = seqs[state[0][t]]
            check(len(got) > 1000, "session %d, thread %d: %d events" % (session, t, len(got)))
            # The probes are attached one after the other: from a third in, every one is. Each
            # thread's trace from there is its sequence, in order (its last moments aside: the
            # string probes' traps stop a little after the stop time that cuts the records).
            k = next(j for j, e in enumerate(got) if j >= len(got) // 3 and e[0] == "create")
            i0 = (int(got[k][1], 16) & 0xffffffff) - 1
            body = got[k:-20]
            want = expected(t, i0, i0 + 1 + len(body) // 5)
            if body != want[:len(body)]:
                j = next(j for j, (a, b) in enumerate(zip(body, want)) if a != b)
                raise Failure("session %d, thread %d: from iteration %d, event %d is %r, the "
                              "program fired %r" % (session, t, i0, j, body[j], want[j]))


@test
def batch_full_ring_counted():
    """A ring far too small (1 MiB), its reader stopped (SIGSTOP) while four threads fire thirty
    thousand iterations and more: what does not fit is counted as lost, by event. (The
    reader alone now keeps up with this flood even in 1 MiB.)"""
    exe, out, st = batch_truth(), work("batch_ring.jsonl"), work("batch_ring.state")
    p = subprocess.Popen([COROBPF, "--probe-path", "batched", "-o", out, "--ring-size", "1",
                          "--", exe, st, "4", "60000", "spin"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        s0 = wait_state(st, lambda s: min(s[1][:4]) > 1000)
        os.kill(p.pid, signal.SIGSTOP)
        try:
            s1 = wait_state(st, lambda s: sum(s[1][:4]) - sum(s0[1][:4]) > 30000 or s[2] == 4)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        check(sum(s1[1][:4]) - sum(s0[1][:4]) > 10000,
              "the program made only %d iterations while corobpf was stopped"
              % (sum(s1[1][:4]) - sum(s0[1][:4])))
        _, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    eq(p.returncode, 0, "corobpf exit code (%s)" % stderr.strip())
    trace, state = Trace(out), read_state(st)
    pid = trace.processes[0]["pid"]
    seqs = per_thread(trace, pid)
    got = sum(len(s) for s in seqs.values())
    want = sum(len(expected(t, 0, state[1][t])) for t in range(4))
    lost = trace.trailer["lost"]["events"]
    check(got < want, "the ring was not too small (%d of %d traced)" % (got, want))
    check(got + lost >= want, "%d traced + %d lost < %d fired" % (got, lost, want))
    check("records dropped (ring buffer full" in stderr,
          "corobpf does not say the batched path lost records:\n" + stderr)


@test
def batch_flood_stops_at_its_duration():
    """A producer faster than corobpf's reader (four threads probing flat out, batched): the
    ring never empties, and -d, SIGINT and SIGTERM must still end the capture within a second (one
    read of the ring takes a bounded number of events, a batched record counting the records it
    holds, then the loop looks at the clock and the signals): the trace stops there, what was
    lost counted. Before, one read took up to 256 times too many events, and -d 2 ran 11-17 s."""
    exe = batch_truth()
    st = work("batch_flood.state")
    prog = subprocess.Popen([exe, st, "4", "2000000000", "flood"])
    try:
        for how in ("-d", "SIGINT", "SIGTERM"):
            # The summary alone: tens of millions of events a second.
            tr, ef, err = start_tracer(["-v", "--probe-path", "batched", "-p", str(prog.pid)]
                                       + (["-d", "1"] if how == "-d" else []), "batch_flood" + how)
            try:
                wait_for(err, "tracing ")
                # The session was attached before it said so: its duration runs from then.
                told = time.clock_gettime(time.CLOCK_BOOTTIME)
                if how != "-d":
                    time.sleep(1)
                    told = time.clock_gettime(time.CLOCK_BOOTTIME)
                    tr.send_signal(signal.SIGINT if how == "SIGINT" else signal.SIGTERM)
            finally:
                # Liveness, not speed: the model's catching up and the outputs come after.
                rc = tracer_wait(tr, ef)
            eq(rc, 0, "%s: corobpf exit code (None: still running 240 s on)" % how)
            with open(err) as f:
                text = f.read()
            m = re.search(r"capture ended \((\w+)\) at (\d+) ns CLOCK_BOOTTIME; its newest "
                          r"record at (\d+) ns", text)
            check(m, "%s: no capture-ended line in %s" % (how, text[-800:]))
            eq(m.group(1), "duration" if how == "-d" else "signal", "%s: end reason" % how)
            stopped, newest = int(m.group(2)) / 1e9, int(m.group(3)) / 1e9
            check(re.search(r"[1-9]\d* events over", text), "%s: no events traced" % how)
            # The capture stops, and no record of it is later, within a second of the stop.
            late = stopped - (told + (1 if how == "-d" else 0))
            print("    %s: the capture stopped %.3f s after it was due" % (how, late))
            check(late <= 1.0, "%s: the capture stopped %.1f s past the moment it had to stop" % (
                how, late))
            check(newest <= stopped + 0.001, "%s: a record %.3f s after the stop" % (
                how, newest - stopped))
        check(prog.poll() is None, "the program did not survive the traces")
    finally:
        prog.kill()
        prog.wait()


@test
def batch_trap_session_beside_a_batched_one_traces_every_record():
    """Sessions on the trap path (--probe-path trap, then --stacks) beside a batched session
    tracing the same program: while the batched one's semaphore is up the program appends
    instead of trapping, and a trap-path session reads those records from the threads' buffers
    as a batched one does (at their switches and ticks, and at each full buffer's trap), so each
    session has every iteration of its time, whole and in order, nothing lost. The program's
    bursts fill a buffer three times over between two switches. Before, a trap-path session saw
    none of these records, uncounted; --stacks says how many events it has without a stack."""
    prog, st = crawling("batch_beside", 2, ("burst",))
    inner = []
    try:
        out1 = work("beside-batched.jsonl")
        # Batched whatever the suite's default (its second pass runs on the trap path).
        tr, ef, err = start_tracer(["--probe-path", "batched", "-p", str(prog.pid), "-o", out1],
                                   "batch_beside_batched")
        try:
            wait_for(err, "tracing ")
            d0 = read_state(st)
            for k, mode in enumerate((["--probe-path", "trap"], ["--stacks"])):
                out = work("beside-trap%d.jsonl" % k)
                name = "batch_beside_trap%d" % k
                rc, i0, i1 = traced_while(mode + ["-p", str(prog.pid), "-o", out], name, st)
                with open(work(name + ".err")) as f:
                    text = f.read()
                eq(rc, 0, "the trap-path session's exit code (%s): %s" % (mode[0], text))
                inner.append((out, i0, i1, mode[0], text))
            time.sleep(0.5)
            d1 = read_state(st)
            tr.send_signal(signal.SIGINT)
            eq(tr.wait(timeout=60), 0, "the batched session's exit code")
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
            ef.close()
        check(prog.poll() is None, "the program did not survive the traces")
    finally:
        prog.kill()
        prog.wait()
    check_traced_window(out1, prog.pid, d0[0], d0, d1, "the batched session")
    for out, i0, i1, mode, text in inner:
        check("misses them" not in text, "%s: the old warning:\n%s" % (mode, text))
        trace = check_traced_window(out, prog.pid, i0[0], i0, i1, "the %s session" % mode)
        m = re.search(r"(\d+) events? appended to threads' buffers while another session's "
                      r"batched path was on, read from there without a stack", text)
        if mode == "--stacks":
            # At least the records of the iterations it traced whole: create, two switches,
            # ready and exit append (the span and name probes of 1 in 10 trap, with a stack).
            least = 5 * sum(i1[1][t] - i0[1][t] - 1 for t in range(2))
            check(m and int(m.group(1)) >= least, "--stacks: the events without a stack, "
                  "at least %d, not said:\n%s" % (least, text))
        else:
            check(not m, "a trap-path session without --stacks speaks of stacks:\n" + text)


@test
def batch_trap_session_registers_a_buffer_no_batch_probe_was_told():
    """A program whose batch semaphore is up with no batch probe there (a batched session being
    attached or detached leaves it so for an instant; this one raises its own) appends, and its
    threads tell
    their buffers at their first record to nobody but the trap-path session's probe after the
    site, which registers them from the site's argument: the trap-path session has every event
    of the program, whose bursts fill each buffer several times (before, none of them)."""
    trace, state, p = traced("batch_selfsem", "selfsem", 2, 400, "trap")
    eq(state[2], 2, "threads finished")
    check_clean(trace)
    check_threads(trace, trace.processes[0]["pid"], state, 2)


@test
def batch_trap_session_reads_buffers_an_untracing_batched_session_registered():
    """A batched -a session whose filter leaves a program out still raises its semaphore (its
    links are for every process), so the program's threads append and tell their buffers only
    to it, at their first record: it registers them all the same, and a trap-path session on
    the program started afterwards reads every record of its time from them (before, those
    buffers stayed unknown and the trap-path session saw nothing of the program, uncounted)."""
    out1 = work("untracing-all.jsonl")
    tr, ef, err = start_tracer(["--probe-path", "batched", "-a", "--comm", "no-such-comm-x",
                                "-o", out1], "batch_untracing_all")
    prog = None
    try:
        wait_for(err, "tracing ")
        prog, st = crawling("batch_untracing", 2)
        out = work("untracing-trap.jsonl")
        rc, d0, d1 = traced_while(["--probe-path", "trap", "-p", str(prog.pid), "-o", out],
                                  "batch_untracing_trap", st)
        with open(work("batch_untracing_trap.err")) as f:
            text = f.read()
        eq(rc, 0, "the trap-path session's exit code: " + text)
        check(prog.poll() is None, "the program did not survive the traces")
        tr.send_signal(signal.SIGINT)
        eq(tracer_wait(tr, ef, 60), 0, "the -a session's exit code")
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait()
        ef.close()
        if prog:
            prog.kill()
            prog.wait()
    check_traced_window(out, prog.pid, d0[0], d0, d1, "the trap-path session")
    check(prog.pid not in {c["pid"] for c in Trace(out1).coroutines},
          "the -a session traced the program its filter leaves out")


def check_window(trace, pid, tid, t, i0, i1, where):
    """Thread t (traced as pid, tid) has iterations [i0, i1) in its trace, whole, in order and
    one after the other."""
    got = per_thread(trace, pid).get(tid, [])
    want = expected(t, i0, i1)
    first = want[0]
    if first not in got:
        raise Failure("%s: iteration %d (%r) is not in the trace, which has %d events of the "
                      "thread" % (where, i0, first, len(got)))
    k = got.index(first)
    body = got[k:k + len(want)]
    if body != want:
        j = next((j for j, (a, b) in enumerate(zip(body, want)) if a != b), len(body))
        raise Failure("%s: from iteration %d, event %d is %r, the program fired %r" % (
            where, i0, j, body[j] if j < len(body) else None, want[j]))


def crawling(name, nthreads=2, extra=()):
    """batch_truth crawling (a few records a second per thread: a buffer never fills), started
    and past its first iterations."""
    exe = batch_truth()
    st = work(name + ".state")
    prog = subprocess.Popen([exe, st, str(nthreads), "100000000", extra[0] if extra else "crawl"]
                            + list(extra[1:]))
    wait_state(st, lambda s: min(s[1][:nthreads]) > 2)
    return prog, st


def traced_while(args, name, st, secs=2.0, kill=None):
    """A session started on its own (start_tracer), stopped by SIGINT after secs; returns (exit
    code, iterations done when it was tracing, when it was told to stop). kill(tr): how it ends
    instead, once tracing."""
    tr, ef, err = start_tracer(args, name)
    try:
        wait_for(err, "tracing ")
        d0 = read_state(st)
        if kill:
            kill(tr)
            d1 = read_state(st)
        else:
            time.sleep(secs)
            d1 = read_state(st)
            tr.send_signal(signal.SIGINT)
        rc = tr.wait(timeout=120)
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait()
        ef.close()
    return rc, d0, d1


def check_traced_window(out, pid, tids, d0, d1, where, nthreads=2, clean=True):
    """Every iteration each thread began after the session was tracing and ended before it
    was told to stop is in its trace, whole and in order. clean: and the trace has no loss nor
    anomaly (not for -a, which traces whatever else runs on the machine)."""
    trace = Trace(out)
    if clean:
        check_clean(trace)
    for t in range(nthreads):
        i0, i1 = d0[1][t] + 1, d1[1][t]
        check(i1 - i0 >= 10, "%s, thread %d: too few iterations to mean anything (%d to %d)" % (
            where, t, i0, i1))
        check_window(trace, pid, tids[t], t, i0, i1, "%s, thread %d" % (where, t))
    return trace


@test
def batch_session_after_a_killed_one():
    """A session SIGKILLed (nothing of its end ran), then another: the second learns each
    thread's buffer from the registry the first left in bpffs, and traces every record of
    slow threads (a buffer never fills, so they never trap again). Before, with the flag the
    thread set left set, it saw none of them and said nothing was lost."""
    prog, st = crawling("batch_after_kill")
    try:
        def killed_after_some(tr):
            s0 = read_state(st)
            wait_state(st, lambda s: min(a - b for a, b in zip(s[1][:2], s0[1][:2])) >= 5)
            tr.kill()
        rc, _, _ = traced_while(["--probe-path", "batched", "-p", str(prog.pid), "-o",
                                 work("after_kill1.jsonl")], "batch_after_kill1", st,
                                kill=killed_after_some)
        eq(rc, -signal.SIGKILL, "the first session's end")
        out = work("after_kill2.jsonl")
        rc, d0, d1 = traced_while(["--probe-path", "batched", "-p", str(prog.pid), "-o", out],
                                  "batch_after_kill2", st, 3)
        eq(rc, 0, "the second session's exit code")
        check(prog.poll() is None, "the program did not survive the traces")
    finally:
        prog.kill()
        prog.wait()
    trace = check_traced_window(out, prog.pid, d0[0], d0, d1, "the session after the killed one")
    # It met buffers in use: what they held from before it started is left out, and counted.
    check(trace.trailer["lost"]["batch_before_start"] > 0, "no record before the session counted")


@test
def batch_two_sessions_at_once():
    """Two sessions on one program, the second (-p, then -a) starting and ending inside the
    first: each traces every record of slow threads while it runs, the first across the
    second's start and end (before, a second session saw nothing of threads the first had met,
    and its end made the first's threads trap again)."""
    prog, st = crawling("batch_two")
    try:
        out1 = work("two-outer.jsonl")
        tr, ef, err = start_tracer(["--probe-path", "batched", "-p", str(prog.pid), "-o", out1],
                                   "batch_two_outer")
        try:
            wait_for(err, "tracing ")
            d0 = read_state(st)
            inner = []
            for k, mode in enumerate((["-p", str(prog.pid)], ["-a"])):
                out = work("two-inner%d.jsonl" % k)
                rc, i0, i1 = traced_while(["--probe-path", "batched", "-o", out] + mode,
                                          "batch_two_inner%d" % k, st)
                eq(rc, 0, "the inner session's exit code (%s)" % mode[0])
                inner.append((out, i0, i1, mode[0]))
            time.sleep(0.5)
            d1 = read_state(st)
            tr.send_signal(signal.SIGINT)
            eq(tr.wait(timeout=60), 0, "the outer session's exit code")
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
            ef.close()
        check(prog.poll() is None, "the program did not survive the traces")
    finally:
        prog.kill()
        prog.wait()
    check_traced_window(out1, prog.pid, d0[0], d0, d1, "the outer session")
    for out, i0, i1, mode in inner:
        check_traced_window(out, prog.pid, i0[0], i0, i1, "the inner session (%s)" % mode,
                            clean=mode != "-a")


@test
def batch_child_forked_between_sessions():
    """A traced thread forks: the child's only thread, a copy of it, has the same buffer, its
    registration flag set and its parent's records in it, and never traps. --follow traces the
    child from its fork on, none of the parent's records in it again; a session that starts
    after that one ended, on the child alone, learns the buffer from the parent's registration
    (same image, same thread pointer) and traces every record of it."""
    fork = work("batch_fork.fork")
    prog, st = crawling("batch_fork", 1, ("fork", "0", fork))
    out1 = work("fork-follow.jsonl")
    child = None
    try:
        tr, ef, err = start_tracer(["--probe-path", "batched", "--follow", "-p", str(prog.pid),
                                    "-o", out1], "batch_fork_follow")
        try:
            wait_for(err, "tracing ")
            s0 = read_state(st)
            parent_tid = s0[0][0]
            wait_state(st, lambda s: s[1][0] - s0[1][0] >= 5)
            open(fork, "w").close()
            s1 = wait_state(st, lambda s: s[0][0] != parent_tid)
            child = s1[0][0]
            wait_state(st, lambda s: s[1][0] - s1[1][0] >= 10)
            tr.send_signal(signal.SIGINT)
            eq(tr.wait(timeout=60), 0, "the --follow session's exit code")
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
            ef.close()
        out2 = work("fork-child.jsonl")
        rc, d0, d1 = traced_while(["--probe-path", "batched", "-p", str(child), "-o", out2],
                                  "batch_fork_child", st, 3)
        eq(rc, 0, "the session on the child's exit code")
    finally:
        for pid in (prog.pid, child):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        prog.wait()
    # --follow: the parent's thread up to its fork, then the child's, one sequence, each
    # iteration once (the child's copy of the parent's records left out).
    trace = Trace(out1)
    check_clean(trace)
    seq = per_thread(trace, prog.pid).get(parent_tid, []) + per_thread(trace, child).get(child, [])
    k = next(j for j, e in enumerate(seq) if e[0] == "create")
    i0 = (int(seq[k][1], 16) & 0xffffffff) - 1
    want = expected(0, i0, i0 + len(seq))
    body = seq[k:]
    if body != want[:len(body)]:
        j = next(j for j, (a, b) in enumerate(zip(body, want)) if a != b)
        raise Failure("--follow: from iteration %d, event %d is %r, the program fired %r" % (
            i0, j, body[j], want[j]))
    check(len(per_thread(trace, child).get(child, [])) >= 10 * 5, "the child's events under "
          "--follow: %d" % len(per_thread(trace, child).get(child, [])))
    check_traced_window(out2, child, [child], d0, d1, "the forked child, traced later", 1)
