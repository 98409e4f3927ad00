"""A flood on the batched path (docs/performance.md, "Flood"): one thread firing `ready` as fast
as it can (tools/bench/flood.c, which counts its own events) makes events far faster than
corobpf's reader takes them in with the default ring. Whatever the reader keeps up with, nothing
may be lost silently: every event the program made is in the trace or counted lost, and -d still
ends the run."""
import json

from harness import *  # noqa: F401,F403

SRC = os.path.join(ROOT, "tools", "bench", "flood.c")
EVENTS = 2000000


def flood_prog():
    """The bench's flood program, built with this tree's header (once per run)."""
    exe = work("flood")
    if not os.path.exists(exe):
        p = run(["cc", "-O2", "-pthread", "-I", os.path.join(ROOT, "usdt"), SRC, "-o", exe])
        eq(p.returncode, 0, "building flood: " + p.stderr)
    return exe


def ready_lines(path, pid):
    """The trace's ready events of pid, as (tid, ts, id, waker), read line by line (millions)."""
    out, trailer = [], None
    with open(path) as f:
        for line in f:
            if line.startswith('{"type":"event"') and '"ev":"ready"' in line:
                e = json.loads(line)
                if e["pid"] == pid:
                    out.append((e["tid"], e["ts"], int(e["id"], 16), e["waker"]))
            elif line.startswith('{"type":"trailer"'):
                trailer = json.loads(line)
    return out, trailer


@test
def flood_one_thread_every_event_traced_or_counted():
    """One thread, two million readies flat out, the default 16 MiB ring, no scheduling view (so
    that the only records are the program's): the events traced plus the events counted lost
    are exactly the events the program says it made; the count said on stderr is the trailer's;
    and every ready traced is one the program made, in the thread's order."""
    exe = flood_prog()
    out = work("flood1.jsonl")
    p = corobpf(["--probe-path", "batched", "--no-sched", "-o", out, "--", exe, "1", str(EVENTS)],
                timeout=300)
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    made = int(re.search(r"produced (\d+)", p.stdout).group(1))
    eq(made, EVENTS, "events the program says it made")
    pid = None
    with open(out) as f:
        for line in f:
            if line.startswith('{"type":"process"'):
                pid = json.loads(line)["pid"]
                break
    check(pid, "no process record in the trace")
    readies, trailer = ready_lines(out, pid)
    lost = trailer["lost"]["events"]
    eq(trailer["events_by_kind"]["ready"], len(readies), "the trailer's ready count")
    eq(len(readies) + lost, made, "ready events traced (%d) + counted lost (%d)" % (
        len(readies), lost))
    said = re.search(r"batched path: (\d+) records dropped", p.stderr)
    eq(int(said.group(1)) if said else 0, lost, "records dropped said on stderr")
    # The program readies ids 1..1024 of its thread 1 in turn: what was kept keeps that order.
    tids = {r[0] for r in readies}
    eq(len(tids), 1, "threads with readies")
    prev_ts, prev_k = 0, None
    for k, (_, ts, cid, _) in enumerate(readies):
        eq(cid >> 32, 1, "ready %d: the thread's id space" % k)
        check(1 <= (cid & 0xffffffff) <= 1024, "ready %d: id 0x%x was never made" % (k, cid))
        check(ts >= prev_ts, "ready %d: time goes back (%d < %d)" % (k, ts, prev_ts))
        prev_ts = ts
        prev_k = k
    check(prev_k is not None, "no ready traced")


@test
def flood_one_thread_stops_at_its_duration():
    """The same flood without end: -d 1 ends the trace at its second (no event a second past
    it), the run itself within a generous bound (liveness, not speed: the drain and the outputs
    come after the stop), and the end reason says so."""
    exe = flood_prog()
    out = work("flood1-d.jsonl")
    prog = subprocess.Popen([exe, "1", "4000000000000"], stdout=subprocess.DEVNULL)
    try:
        tr, ef, err = start_tracer(["--probe-path", "batched", "-d", "1", "-p", str(prog.pid),
                                    "-o", out], "flood1-d")
        try:
            wait_for(err, "tracing ")
            told = time.clock_gettime(time.CLOCK_BOOTTIME)
            rc = tr.wait(timeout=120)
        except subprocess.TimeoutExpired:
            tr.kill()
            tr.wait()
            rc = None
        finally:
            ef.close()
        eq(rc, 0, "corobpf exit code (None: still running 120 s on)")
        ended = time.clock_gettime(time.CLOCK_BOOTTIME)
        check(ended - told < 60, "the run ended %.1f s after its start, -d 1" % (ended - told))
        print("    -d 1: the run ended %.1f s after its start" % (ended - told))
        # Millions of events: read for their times alone.
        last, trailer = 0, None
        with open(out) as f:
            for line in f:
                if line.startswith('{"type":"event"'):
                    last = max(last, int(re.search(r'"ts":(\d+)', line).group(1)))
                elif line.startswith('{"type":"trailer"'):
                    trailer = json.loads(line)
        eq(trailer["end_reason"], "duration", "end reason")
        check(trailer["events_by_kind"]["ready"], "no ready traced")
        late = last / 1e9 - (told + 1)
        check(late <= 1.0, "the trace runs %.1f s past the moment it had to stop" % late)
        check(prog.poll() is None, "the program did not survive the trace")
    finally:
        prog.kill()
        prog.wait()
