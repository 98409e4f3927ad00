"""Errors: each with its message and exit code."""
from harness import *  # noqa: F401,F403


@test
def error_no_such_process():
    p = corobpf(["-p", "999999", "-o", work("e1.jsonl")])
    eq(p.returncode, 5, "exit code")
    check("no process with PID 999999" in p.stderr, p.stderr)
    check(not os.path.exists(work("e1.jsonl")), "an output was left behind")


@test
def error_thread_is_not_a_process():
    target, pid = start_waiting("scenarios", "yield")
    try:
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid) if int(t) != pid]
        check(tids, "the scenario has no second thread while waiting")
        p = corobpf(["-p", str(tids[0])])
        eq(p.returncode, 5, "exit code")
        check("is a thread of process %d" % pid in p.stderr, p.stderr)
    finally:
        target.kill()
        target.wait()


@test
def error_no_probes():
    p = corobpf(["-o", work("e2.jsonl"), "--switch", "none", "--", "/bin/true"])
    eq(p.returncode, 6, "exit code")
    check("no corobpf probes" in p.stderr and "/usr/bin/true" in p.stderr.replace("/bin/true", "/usr/bin/true"),
          p.stderr)
    check("libc.so.6" in p.stderr, "the searched libraries are not named:\n" + p.stderr)
    check(not os.path.exists(work("e2.jsonl")), "an output was left behind")
    # A static program with neither probes nor any switch function: nothing to follow.
    p = corobpf(["-o", work("e3.jsonl"), "--", os.path.join(TESTS_BIN, "static_plain")])
    eq(p.returncode, 6, "exit code (static program)")
    check("no corobpf probes and no known switch functions" in p.stderr, p.stderr)
    check("--switch" in p.stderr, "the error does not point at --switch:\n" + p.stderr)


@test
def error_command_not_found():
    p = corobpf(["--", "/nonexistent/cmd"])
    eq(p.returncode, 9, "exit code")
    p = corobpf(["--", "no-such-command-corobpf"])
    eq(p.returncode, 9, "exit code")
    check("command not found" in p.stderr, p.stderr)


@test
def error_unwritable_and_existing_output():
    p = corobpf(["-o", "/nonexistent-dir/x.jsonl", "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 7, "exit code")
    check("/nonexistent-dir/x.jsonl" in p.stderr, p.stderr)
    existing = work("exists.jsonl")
    with open(existing, "w") as f:
        f.write("keep me")
    p = corobpf(["-o", existing, "--", os.path.join(TESTS_BIN, "scenarios"), "yield"])
    eq(p.returncode, 7, "exit code")
    check("--force" in p.stderr, p.stderr)
    with open(existing) as f:
        eq(f.read(), "keep me", "existing file")
    p = corobpf(["-o", work("x.unknownext"), "--", "/bin/true"])
    eq(p.returncode, 2, "unknown format exit code (usage)")


@test
def error_usage():
    for args in (["-p", "abc"], [], ["-p", "1", "--", "true"], ["-d", "-1", "-p", "1"],
                 ["--ring-size", "3", "-p", "1"], ["--ring-size", "4096", "-p", "1"],
                 ["-d", "nan", "-p", "1"], ["-d", "1e-12", "-p", "1"], ["--"],
                 ["--follow", "-a"], ["--follow", "--switch", "ucontext", "-p", "1"]):
        p = corobpf(args)
        eq(p.returncode, 2, "exit code for %s (%s)" % (args, p.stderr.strip()))
    # Each command's --help offers what that command takes, under its own name.
    p = corobpf(["ps", "--help"])
    eq(p.returncode, 0, "ps --help")
    check(p.stdout.startswith("Usage: corobpf ps"), p.stdout[:200])
    for refused in ("--all", "--follow", "--comm", "[-- CMD"):
        check(refused not in p.stdout, "ps --help offers %s, which ps refuses" % refused)
    for args in (["ps", "-a"], ["ps", "--follow", "-p", "1"], ["ps", "-p", "1", "--", "true"]):
        eq(corobpf(args).returncode, 2, "exit code for %s" % args)
    p = corobpf(["report", "--help"])
    check(p.stdout.startswith("Usage: corobpf report"), p.stdout[:200])
    for impossible in ("3 missing privilege", "5 no such process", "9 the command"):
        check(impossible not in p.stdout, "report --help lists exit code '%s'" % impossible)


@test
def error_not_privileged():
    if not shutil.which("setpriv"):
        raise Failure("setpriv (util-linux) is needed for this test")
    p = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             COROBPF, "-p", "1"])
    eq(p.returncode, 3, "exit code (%s)" % p.stderr.strip())
    check("CAP_BPF" in p.stderr and "sudo" in p.stderr, p.stderr)


@test
def error_damaged_raw_capture():
    trace, truth, p, out, raw = trace_launch("dmg", [os.path.join(TESTS_BIN, "scenarios"), "stress1000"])
    size = os.path.getsize(raw)
    cut = work("cut.raw")
    with open(raw, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[: size - 100])
    again = work("cut.jsonl")
    p = corobpf(["report", cut, "-o", again])
    eq(p.returncode, 8, "exit code")
    check("truncated" in p.stderr or "cut short" in p.stderr, p.stderr)
    t = Trace(again)
    check("input_error" in t.trailer, "the output does not say the capture was damaged")
    check(len(t.events) > 0, "nothing kept from before the damage")
    p = corobpf(["report", work("nonexistent.raw")])
    eq(p.returncode, 1, "exit code for a missing capture (not a damaged one)")
    check("nonexistent.raw" in p.stderr, p.stderr)
    # A file that is no capture at all is a bad capture.
    junk = work("junk.raw")
    with open(junk, "w") as f:
        f.write("not a capture\n")
    p = corobpf(["report", junk])
    eq(p.returncode, 8, "exit code for a file that is no capture")
    # An output whose format cannot be told is a usage error, before anything runs.
    p = corobpf(["report", cut, "-o", work("x.unknownext")])
    eq(p.returncode, 2, "exit code for an output of no known format")
    check("x.unknownext" in p.stderr and "-f " in p.stderr, p.stderr)
    check(not os.path.exists(work("x.unknownext")), "a file was made for the unknown format")
