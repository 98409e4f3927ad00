"""Signals."""
from harness import *  # noqa: F401,F403


@test
def sigint_finishes_outputs_and_leaves_target_running():
    target, pid = start_waiting("scenarios", "yield", extra=["--linger", "30000"])
    target.send_signal(signal.SIGUSR1)
    out = work("sigint.jsonl")
    tr, ef, err = start_tracer(["-o", out, "-p", str(pid)], "sigint")
    wait_for(err, "tracing")
    time.sleep(0.2)
    tr.send_signal(signal.SIGINT)
    eq(tr.wait(timeout=30), 0, "exit code")
    ef.close()
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "signal", "end_reason")
    check(target.poll() is None, "the target died with the tracer")
    target.kill()
    target.wait()
    check(not [f for f in os.listdir(WORK) if ".tmp-" in f], "temporary files left")


@test
def sigterm_is_passed_to_the_launched_command():
    out = work("sigterm.jsonl")
    tr, ef, err = start_tracer(["-o", out, "--", os.path.join(TESTS_BIN, "scenarios"),
                                "--linger", "20000", "yield"], "sigterm")
    wait_for(err, "tracing")
    time.sleep(0.3)
    tr.send_signal(signal.SIGTERM)
    eq(tr.wait(timeout=30), 128 + signal.SIGTERM, "exit code: the command's, killed by SIGTERM")
    ef.close()
    trace = Trace(out)
    eq(trace.trailer["end_reason"], "signal", "end_reason")


@test
def double_ctrl_c_never_leaves_a_partial_file():
    for i in range(3):
        target, pid = start_waiting("scenarios", "stress1000", extra=["--linger", "30000"])
        target.send_signal(signal.SIGUSR1)
        out = work("double%d.jsonl" % i)
        tr, ef, err = start_tracer(["-o", out, "-p", str(pid)], "double%d" % i)
        wait_for(err, "tracing")
        time.sleep(0.1 * i)
        tr.send_signal(signal.SIGINT)
        tr.send_signal(signal.SIGINT)
        rc = tr.wait(timeout=30)
        ef.close()
        check(rc in (0, 128 + signal.SIGINT), "exit code %d" % rc)
        if os.path.exists(out):
            Trace(out)  # whole: a header and a trailer
        check(not [f for f in os.listdir(WORK) if ".tmp-" in f], "temporary files left")
        # Unharmed: still lingering, or (a very slow machine) past its linger with its own exit.
        check(target.poll() in (None, 0), "the target died (%s)" % target.returncode)
        target.kill()
        target.wait()
