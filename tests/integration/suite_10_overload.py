"""Overload: every lost event is counted."""
from harness import *  # noqa: F401,F403


@test
def overload_every_lost_event_is_counted():
    """Attach and stop the reader; the target floods the ring (phase 1); resume the reader;
    the target runs again on the same threads (phase 2), whose first events carry the holes.
    Traced + lost equals exactly what the program fired, and every hole is accounted for."""
    out, raw, pf = work("overload.jsonl"), work("overload.raw"), work("overload.pftrace")
    target = subprocess.Popen([os.path.join(BUILD, "demo"), "--pingpong", "10000", "--wait",
                               "--again"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = target.stdout.readline().split()
    check(line and line[0] == "READY", "the demo did not announce itself: %r" % line)
    tr, ef, err = start_tracer(["-o", out, "-o", pf, "--raw", raw, "--ring-size", "1",
                                "--no-sched", "-p", line[1]], "overload")
    wait_for(err, "tracing")
    tr.send_signal(signal.SIGSTOP)
    target.send_signal(signal.SIGUSR1)
    first = target.stdout.readline()             # phase 1 ran while the reader was stopped
    check(first.startswith("pingpong:"), "phase 1: %r" % first)
    tr.send_signal(signal.SIGCONT)
    time.sleep(0.5)                              # the reader drains the ring
    target.send_signal(signal.SIGUSR1)
    stdout, _ = target.communicate(timeout=120)
    eq(tr.wait(timeout=60), 0, "exit code")
    ef.close()
    with open(err) as f:
        stderr = f.read()
    fields = dict(kv.split("=") for kv in stdout.split()[1:])   # cumulative over both phases
    fired = int(fields["created"]) * 2 + int(fields["readies"]) + int(fields["switches"]) \
        + int(fields["exits"])
    trace = Trace(out)
    t = trace.trailer
    lost = t["lost"]["events"]
    check(int(fields["switches"]) > 2 * 16384, "the workload cannot overflow a 1 MiB ring")
    check(lost > 0, "nothing was lost")
    eq(sum(t["events_by_kind"].values()) + lost, fired, "traced + lost vs fired")
    lost_records = [r for r in trace.records if r["type"] == "lost"]
    eq(t["lost"]["attributed"], sum(r["count"] for r in lost_records), "attributed")
    check(t["lost"]["attributed"] > 0, "no hole was pinned to a thread")
    eq(t["lost"]["attributed"] + t["lost"]["unattributed"], lost, "attributed + unattributed")
    check(any(c.get("uncertain") for c in trace.coroutines), "no coroutine marked uncertain")
    check("events were lost" in stderr, "the summary does not say so:\n" + stderr)
    # Perfetto: still well formed, and the holes marked where the UI counts data loss.
    t = perfetto_check.check(pf, out)
    dropped = sum(1 for p in t.packets if perfetto_check.one(p, "previous_packet_dropped"))
    eq(dropped, len(lost_records), "packets marked previous_packet_dropped")
    check_replay(out, raw)
