"""Faults: in the target, in corobpf, on the disk."""
from harness import *  # noqa: F401,F403


@test
def fault_ten_thousand_threads():
    """10,000 threads come and go, each running one coroutine: every one is seen, on its own thread."""
    out = work("threads.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "threads", "10000"], timeout=300)
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    check("DONE threads 10000" in p.stdout, "the target did not finish: %r" % p.stdout)
    trace = Trace(out)
    check_clean(trace)
    pid = trace.processes[0]["pid"]
    eq(len(trace.coroutines), 10000, "coroutines")
    tids = set()
    for c in trace.coroutines:
        i = int(c["id"], 16) - 0x10000000
        check(0 <= i < 10000, "unexpected coroutine %s" % c["id"])
        where = "coroutine %s" % c["id"]
        eq((c["name"], c["end"], c["status"], c["switch_ins"]), ("t%d" % i, "exit", 0, 1), where)
        eq(len(c["threads"]), 1, where + " threads")
        tids.add(c["threads"][0])
    eq(len(tids), 10000, "distinct threads the coroutines ran on")
    check(pid not in tids, "a coroutine ran on the main thread")
    known = {r["tid"] for r in trace.records if r["type"] == "thread"}
    check(tids <= known, "%d threads with events have no thread record" % len(tids - known))


@test
def fault_fork_child_is_not_traced_without_follow():
    out = work("fork.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "fork"])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    m = re.search(r"CHILD (\d+) STATUS (-?\d+)", p.stdout)
    check(m, "the target did not report its child: %r" % p.stdout)
    # The child inherits the parent's probe sites (int3 in copied pages): it must run unharmed.
    eq(int(m.group(2)), 7, "the child's exit status")
    child = int(m.group(1))
    trace = Trace(out)
    check_clean(trace)
    eq([r["pid"] for r in trace.processes], [trace.header["pids"][0]], "processes traced")
    check(not [r for r in trace.records if r.get("pid") == child], "records of the child")
    eq(faults_ids(trace, trace.header["pids"][0]), ["0x100", "0x101", "0x102"], "coroutines")


@test
def fault_fork_child_runs_five_byte_sites_unharmed():
    """COROBPF_NOP5 sites, traced, then run by a forked child: a kernel that optimizes a uprobe
    on the nop into a call (6.18) does not map the call's trampoline into the child, which died
    of SIGSEGV there. corobpf probes such a site at the instruction before it."""
    for path in ("trap", "batched"):
        for follow in ([], ["--follow"]):
            where = "%s path%s" % (path, " with --follow" if follow else "")
            out = work("fork-nop5-%s%s.jsonl" % (path, "-follow" if follow else ""))
            p = corobpf(["-o", out, "--probe-path", path] + follow + ["--", FAULTS_NOP5, "fork"])
            eq(p.returncode, 0, "corobpf exit code, %s (%s)" % (where, p.stderr.strip()))
            m = re.search(r"CHILD (\d+) STATUS (-?\d+)", p.stdout)
            check(m, "the target did not report its child, %s: %r" % (where, p.stdout))
            eq(int(m.group(2)), 7, "the child's exit status, %s (-1: killed)" % where)
            check("five-byte nops" in p.stderr, "no word on the sites, %s:\n%s" % (where, p.stderr))
            trace = Trace(out)
            check_clean(trace)
            parent, child = trace.header["pids"][0], int(m.group(1))
            eq(faults_ids(trace, parent), ["0x100", "0x101", "0x102"], "the parent's, " + where)
            eq(faults_ids(trace, child), ["0x200", "0x201", "0x202"] if follow else [],
               "the child's, " + where)
            for c in trace.coroutines:
                eq((c["end"], c.get("name")), ("exit", "child" if c["pid"] == child else "parent"),
                   "coroutine %s, %s" % (c["id"], where))


@test
def fault_target_crashes():
    """The target dies of SIGSEGV mid-wait: its coroutines end there, the summary says so."""
    out = work("crash.jsonl")
    p = corobpf(["-o", out, "--", FAULTS, "crash"])
    eq(p.returncode, 128 + signal.SIGSEGV, "corobpf exit code: the command's (%s)" % p.stderr)
    check("DONE crash 2" in p.stdout, "the target's output: %r" % p.stdout)
    trace = Trace(out)
    check_clean(trace)
    pid = trace.header["pids"][0]
    exits = [r for r in trace.records if r["type"] == "process_exit"]
    eq([(r["pid"], r.get("signal")) for r in exits], [(pid, signal.SIGSEGV)], "process_exit")
    by_id = {c["id"]: c for c in trace.coroutines}
    eq((by_id["0x300"]["end"], by_id["0x300"]["status"]), ("exit", 0), "0x300")
    c = by_id["0x301"]
    eq((c["end"], c["state_at_end"], c["reason_at_end"], c["ended"]),
       ("process_exit", "suspended", "wait", exits[0]["ts"]), "0x301 at the crash")
    eq(trace.trailer["end_reason"], "targets_exited", "end_reason")
    check("process %d (faults) was killed by SIGSEGV (signal 11)" % pid in p.stderr,
          "the summary does not name the crash:\n" + p.stderr)


@test
def fault_sigkill_of_corobpf():
    """corobpf killed outright: the target goes on unharmed; the raw capture reads back to where it stopped."""
    target = subprocess.Popen([FAULTS, "--wait", "linger", "1500"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    pid = int(target.stdout.readline().split()[1])
    raw, out = work("killed.raw"), work("killed.jsonl")
    tr, ef, err = start_tracer(["--raw", raw, "-o", out, "-p", str(pid)], "killed")
    wait_for(err, "tracing")
    target.send_signal(signal.SIGUSR1)
    eq(target.stdout.readline().strip(), "RAN 0x500", "the target's first step")
    time.sleep(1.2)  # the raw capture is written out every second
    tr.kill()
    tr.wait()
    ef.close()
    # Its probes went with corobpf: the rest of the target runs as if never traced.
    rest, _ = target.communicate(timeout=30)
    eq((rest, target.returncode), ("DONE linger 2\n", 0), "the target after corobpf's death")
    check(not os.path.exists(raw) and not os.path.exists(out), "a file under a requested name")
    left = sorted(f for f in os.listdir(WORK) if f.startswith("killed.raw.tmp-"))
    eq(len(left), 1, "raw capture left under its temporary name (%s)" % os.listdir(WORK))
    back = work("killed-back.jsonl")
    p = corobpf(["report", work(left[0]), "-o", back])
    eq(p.returncode, 8, "report of a cut capture: exit code (%s)" % p.stderr)
    check("ends without its end record" in p.stderr, "report does not say where it stops: "
          + p.stderr)
    trace = Trace(back)
    eq([c["id"] for c in trace.coroutines], ["0x500"], "coroutines read back")
    eq(trace.coroutines[0]["end"], "exit", "0x500 end")


@test
def fault_disk_full():
    """The raw capture's disk fills: corobpf says so and exits 7; the other outputs and the target are whole."""
    tiny = work("tiny")
    os.mkdir(tiny)
    r = run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny])
    eq(r.returncode, 0, "mount a 1 MiB tmpfs: " + r.stderr)
    try:
        raw, out = os.path.join(tiny, "full.raw"), work("full.jsonl")
        p = corobpf(["--raw", raw, "-o", out, "--", FAULTS, "burst", "20000"])
        eq(p.returncode, 7, "corobpf exit code (%s)" % p.stderr)
        check("DONE burst 20000" in p.stdout, "the target's output: %r" % p.stdout)
        check("writing %s failed (No space left on device)" % raw in p.stderr,
              "no clear error: " + p.stderr)
        trace = Trace(out)
        check_clean(trace)
        ids = [c["id"] for c in trace.coroutines]
        eq(ids, ["0x%x" % (0x400 + i) for i in range(len(ids))],
           "the JSONL's coroutines: the program's, in order")
        if trace.trailer["end_reason"] == "error":
            # The run stops at the first flush after the disk filled (once a second): on a busy
            # machine the burst is still going then. The JSONL is whole up to the stop: every
            # coroutine complete, the one alive at the stop ended by the trace's end.
            check(all(c["end"] == "exit" for c in trace.coroutines[:-1]) and
                  trace.coroutines[-1]["end"] in ("exit", "trace_end"),
                  "coroutines cut short before the stop")
        else:
            eq(len(ids), 20000, "coroutines in the JSONL")
        back = work("full-back.jsonl")
        p = corobpf(["report", raw, "-o", back])
        eq(p.returncode, 8, "report of the cut capture: exit code (%s)" % p.stderr)
        check("ends without its end record" in p.stderr, "where it stops: " + p.stderr)
        # Whole blocks up to the full disk: a prefix of the coroutines, each complete.
        got = Trace(back).coroutines
        check(len(got) > 1000, "only %d coroutines read back from a 1 MiB capture" % len(got))
        eq([c["id"] for c in got], ["0x%x" % (0x400 + i) for i in range(len(got))],
           "a prefix of the coroutines")
        check(all(c["end"] == "exit" for c in got[:-1]), "coroutines cut short before the end")
        check(len(ids) >= len(got), "the JSONL has %d coroutines, the raw capture %d"
              % (len(ids), len(got)))
    finally:
        run(["umount", tiny])


@test
def fault_pid_reused_after_the_target_exits():
    """A traced process exits and a new one gets its pid while corobpf runs: the newcomer is not traced."""
    a = subprocess.Popen([FAULTS, "--wait", "burst", "3"], stdout=subprocess.PIPE, text=True)
    apid = int(a.stdout.readline().split()[1])
    b = subprocess.Popen([FAULTS, "--wait", "linger", "2500"], stdout=subprocess.PIPE, text=True)
    bpid = int(b.stdout.readline().split()[1])
    out = work("reuse.jsonl")
    tr, ef, err = start_tracer(["-o", out, "-p", str(apid), "-p", str(bpid)], "reuse")
    wait_for(err, "tracing")
    a.send_signal(signal.SIGUSR1)
    eq(a.communicate(timeout=30)[0].split("\n")[0], "DONE burst 3", "first incarnation")
    b.send_signal(signal.SIGUSR1)
    eq(b.stdout.readline().strip(), "RAN 0x500", "B's first step")
    # A new program with apid (clone3's set_tid: exactly that pid, whatever else starts).
    again = subprocess.Popen([FAULTS, "--as-pid", str(apid), FAULTS, "linger", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, why = again.communicate(timeout=30)
    eq(again.returncode, 0, "the program run as pid %d (%s)" % (apid, why.strip()))
    eq(got, "RAN 0x500\nDONE linger 2\n", "second incarnation")
    b.communicate(timeout=30)
    eq(tr.wait(timeout=30), 0, "corobpf exit code")
    ef.close()
    trace = Trace(out)
    check_clean(trace)
    eq(faults_ids(trace, apid), ["0x400", "0x401", "0x402"], "coroutines of pid %d" % apid)
    eq(faults_ids(trace, bpid), ["0x500", "0x501"], "coroutines of B (traced on)")
    eq(sorted(r["pid"] for r in trace.processes), sorted([apid, bpid]), "process records")
    eq(sorted(r["pid"] for r in trace.records if r["type"] == "process_exit"),
       sorted([apid, bpid]), "process_exit records")
    check(not [r for r in trace.records if r["type"] == "exec"], "an exec was recorded")
