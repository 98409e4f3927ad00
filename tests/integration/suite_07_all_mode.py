"""System-wide (-a)."""
from harness import *  # noqa: F401,F403


@test
def all_mode_finds_programs_started_later_and_after_exec():
    """-a before two programs: one launched later, one reached through exec; both traced
    with their pids, their coroutines exactly as they count them, their exits closed."""
    out, pf, err = work("all.jsonl"), work("all.pftrace"), work("all.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out, "-o", pf], stderr=ef, stdout=ef)
    procs = []
    try:
        wait_for(err, "tracing every")
        t1, t2 = work("all1.truth"), work("all2.truth")
        p1, pid1 = start_waiting("scenarios", "yield", env={"COROBPF_TRUTH": t1})
        # The second through exec: a shell that becomes the program (same pid).
        p2 = subprocess.Popen(["/bin/sh", "-c", 'exec "$0" --wait chan_pc',
                               os.path.join(TESTS_BIN, "scenarios-so")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, COROBPF_TRUTH=t2))
        line = p2.stdout.readline().split()
        check(line and line[0] == "READY", "scenarios-so did not start: %r" % line)
        pid2 = int(line[1])
        procs = [p1, p2]
        # Their objects are attached when corobpf sees the exec (or already were).
        wait_for_attached(err, "/scenarios")
        wait_for_attached(err, "/libcorosched.so")
        for p in procs:
            p.send_signal(signal.SIGUSR1)
        for p in procs:
            p.wait(timeout=60)
        time.sleep(0.3)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
    trace = Trace(out)
    pids = {p["pid"] for p in trace.processes}
    check({pid1, pid2} <= pids, "processes %s, want %s" % (pids, {pid1, pid2}))
    for pid, truth in ((pid1, t1), (pid2, t2)):
        check_truth(trace, read_truth(truth), pid)
    exits = {r["pid"] for r in trace.records if r["type"] == "process_exit"}
    check({pid1, pid2} <= exits, "process exits %s" % exits)
    # The shell fired no probe: its exec into the program is not the trace's (nor is any other
    # exec on the machine); the program is, from its first probe, named by its process record.
    execs = [r for r in trace.records if r["type"] == "exec"]
    check(all(r["pid"] in pids for r in execs), "execs of processes not traced: %s" %
          sorted({r["pid"] for r in execs} - pids)[:10])
    comm2 = [p["comm"] for p in trace.processes if p["pid"] == pid2]
    eq(comm2, ["scenarios-so"], "process %d's record" % pid2)
    eq(trace.records[-1]["anomalies"]["unknown_pid"], 0, "records of unannounced processes")
    check(all(c["end"] == "exit" for c in trace.coroutines if c["pid"] in (pid1, pid2)),
          "a coroutine left open")
    perfetto_check.check(pf, out)
