"""Attach to a running process."""
from harness import *  # noqa: F401,F403


@test
def attach_to_running_process():
    truth = work("attach.truth")
    target, pid = start_waiting("scenarios", "chan_pc", env={"COROBPF_TRUTH": truth})
    out, err = work("attach.jsonl"), work("attach.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-o", out, "-p", str(pid)], stderr=ef, stdout=ef)
        wait_for(err, "tracing")
        target.send_signal(signal.SIGUSR1)
        target.wait(timeout=60)
        rc = tr.wait(timeout=60)
    eq(rc, 0, "corobpf exit code")
    trace = Trace(out)
    eq(trace.processes[0]["mode"], "attached", "mode")
    eq(trace.header["pids"], [pid], "header pids")
    # Attached before the scheduler's work started: every coroutine is seen from its creation.
    check_truth(trace, read_truth(truth), pid)
    check_clean(trace)
    eq(trace.trailer["end_reason"], "targets_exited", "end_reason")


@test
def attach_mid_life_and_stop_by_duration():
    """Attach while coroutines live: they appear with created null; -d ends the trace."""
    target, pid = start_waiting("scenarios", "stress1000", extra=["--linger", "30000"])
    target.send_signal(signal.SIGUSR1)
    time.sleep(0.3)
    out = work("midlife.jsonl")
    p = corobpf(["-o", out, "-d", "1", "-p", str(pid)])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "duration", "end_reason")
    check(target.poll() is None, "the target did not survive tracing")
    target.kill()
    target.wait()
    check_clean(trace)


@test
def attach_two_processes_and_shared_library():
    procs, pids, truths = [], [], []
    for i, binary in enumerate(["scenarios", "scenarios-so"]):
        truths.append(work("two-%d.truth" % i))
        p, pid = start_waiting(binary, "yield", env={"COROBPF_TRUTH": truths[-1]})
        procs.append(p)
        pids.append(pid)
    out, err = work("two.jsonl"), work("two.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-o", out, "-p", str(pids[0]), "-p", str(pids[1])],
                              stderr=ef, stdout=ef)
        wait_for(err, "tracing")
        for p in procs:
            p.send_signal(signal.SIGUSR1)
        for p in procs:
            p.wait(timeout=60)
        rc = tr.wait(timeout=60)
    eq(rc, 0, "corobpf exit code")
    trace = Trace(out)
    eq(sorted(p["pid"] for p in trace.processes), sorted(pids), "processes")
    objects = [r for r in trace.records if r["type"] == "object"]
    check(any(o["path"].endswith("libcorosched.so") for o in objects),
          "no probes attached in libcorosched.so: %s" % [o["path"] for o in objects])
    for pid, truth in zip(pids, truths):
        check_truth(trace, read_truth(truth), pid)
    check_clean(trace)
