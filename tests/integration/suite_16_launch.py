"""Launch mode details."""
from harness import *  # noqa: F401,F403


@test
def launch_keeps_stdio_and_exit_status():
    out = work("stdio.jsonl")
    p = run([COROBPF, "-q", "-o", out, "--", os.path.join(TESTS_BIN, "usdt_matrix_c_O2"), "3", "5"],
            input="")
    eq(p.returncode, 0, "exit code")
    check(p.stdout.startswith("{"), "the command's stdout did not reach ours: %r" % p.stdout[:80])
    eq(quiet_stderr(p.stderr), "", "corobpf -q wrote to stderr")
    p = corobpf(["-o", work("st.jsonl"), "--", os.path.join(TESTS_BIN, "scenarios"), "--exit-code", "7", "yield"])
    eq(p.returncode, 7, "the command's exit status")


@test
def launched_command_keeps_its_signal_dispositions():
    """corobpf ignores SIGPIPE and handles SIGHUP; the command must not inherit either."""
    early = os.path.join(TESTS_BIN, "early")
    p = run([COROBPF, "-q", "-o", work("sig1.jsonl"), "--", early, "sigs"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    ign = int(p.stdout.split()[1], 16)
    check(not ign & (1 << (signal.SIGPIPE - 1)), "the command runs with SIGPIPE ignored")
    # Under nohup SIGHUP is ignored, and stays so for the command.
    p = subprocess.run([COROBPF, "-q", "-o", work("sig2.jsonl"), "--", early, "sigs"],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    ign = int(p.stdout.split()[1], 16)
    check(ign & (1 << (signal.SIGHUP - 1)), "nohup's SIGHUP ignore was lost")


@test
def gzip_output_and_two_outputs():
    out1, out2 = work("g.jsonl.gz"), work("g.jsonl")
    p = corobpf(["-o", out1, "-o", out2, "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    with gzip.open(out1, "rb") as a, open(out2, "rb") as b:
        check(a.read() == b.read(), "the .gz output differs from the plain one")


@test
def demo_runs_and_traces():
    """The README's first command traces this program."""
    out = work("demo.jsonl")
    p = corobpf(["-o", out, "--", os.path.join(BUILD, "demo"), "-d", "1"], timeout=60)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    check_clean(trace)
    check(len(trace.coroutines) > 50, "only %d coroutines" % len(trace.coroutines))
    statuses = {c["status"] for c in trace.coroutines}
    check(-5 in statuses and -125 in statuses, "the demo's failures are not traced: %s" % statuses)
    check(trace.by_ev("span_begin"), "no spans")
    check("longest suspended" in p.stderr, "no summary:\n" + p.stderr)
