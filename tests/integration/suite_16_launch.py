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


MULTICALL = """#!/bin/sh
# A multi-call script: what it does is the name it was run by, as busybox does.
case "$(basename "$0")" in
hello) echo "hello from $0"; exec %s "$@" ;;
*) echo "unknown applet: $(basename "$0")" >&2; exit 3 ;;
esac
"""


@test
def launch_execs_what_was_typed():
    """The command is exec'd as a shell would: a multi-call script run through a symbolic link
    sees the link's name in $0 (by a relative path, and found in PATH), and /usr/bin/python3
    keeps its comm, python3, not its link target's (python3.11)."""
    d = work("multicall")
    os.makedirs(d, exist_ok=True)
    sh = os.path.join(d, "multicall.sh")
    with open(sh, "w") as f:
        f.write(MULTICALL % os.path.join(TESTS_BIN, "scenarios"))
    os.chmod(sh, 0o755)
    os.symlink("multicall.sh", os.path.join(d, "hello"))
    truth = work("multicall.truth")
    for cmd, env, dollar0 in ((["./hello"], {}, "./hello"),
                              (["hello"], {"PATH": d + ":" + os.environ["PATH"]},
                               os.path.join(d, "hello"))):
        out = work("multicall.jsonl")
        e = dict(os.environ, COROBPF_TRUTH=truth, **env)
        p = subprocess.run([COROBPF, "--force", "-o", out, "--"] + cmd + ["spawn_tree"], cwd=d,
                           env=e, capture_output=True, text=True, timeout=120)
        eq(p.returncode, 0, "corobpf -- %s: exit code (%s)" % (cmd[0], p.stderr.strip()))
        check(p.stdout.startswith("hello from %s\n" % dollar0),
              "corobpf -- %s: the script's $0 is not what was typed:\n%s%s"
              % (cmd[0], p.stdout, p.stderr))
        trace = Trace(out)
        check_truth(trace, read_truth(truth), trace.processes[-1]["pid"])

    # A program behind a symbolic link: its comm is the link's name, as under a shell.
    py = "/usr/bin/python3"
    if not os.path.islink(py):
        print("     skipped the python3 part: %s is not a symbolic link" % py)
        return
    out = work("python3-comm.jsonl")
    p = corobpf(["-o", out, "--", py, "-c",
                 "print(open('/proc/self/comm').read().strip()); import sys; print(sys.argv[0])"])
    eq(p.returncode, 0, "corobpf -- %s: exit code (%s)" % (py, p.stderr.strip()))
    eq(p.stdout, "python3\n-c\n", "the program's comm and argv[0]")
    trace = Trace(out)
    eq(trace.processes[0]["comm"], "python3", "the process's comm in the trace")
    eq(trace.processes[0]["exe"], os.path.realpath(py), "the process's exe (the file run)")
    check("tracing python3 (pid" in p.stderr, "the start message's name:\n" + p.stderr)


@test
def launch_file_replaced_before_exec_is_not_run():
    """The command's file is replaced by another, back and forth (renamed over it), while corobpf
    examines and attaches to it: a program whose file is not the one attached to is killed
    before its first instruction and said (exit 9), never run untraced."""
    import threading
    d = work("swap")
    os.makedirs(d, exist_ok=True)
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    shutil.copy(os.path.join(TESTS_BIN, "scenarios"), a)
    shutil.copy(os.path.join(TESTS_BIN, "scenarios"), b)  # the same program, another file
    prog, tmp = os.path.join(d, "prog"), os.path.join(d, "prog.tmp")
    os.link(a, prog)
    stop = threading.Event()

    def flip():
        n = 0
        while not stop.is_set():
            n += 1
            os.link(b if n % 2 else a, tmp)
            os.replace(tmp, prog)
            time.sleep(0.0002)

    th = threading.Thread(target=flip)
    th.start()
    outcomes = []
    try:
        for i in range(10):
            truth, out = work("swap%d.truth" % i), work("swap%d.jsonl" % i)
            p = corobpf(["-o", out, "--", prog, "spawn_tree"], env={"COROBPF_TRUTH": truth})
            if p.returncode == 9:
                check("was replaced between its examination and its exec" in p.stderr,
                      "exit 9 without the reason:\n" + p.stderr)
                check(not os.path.exists(truth), "the program ran (it wrote its ground truth)")
                outcomes.append("refused")
                continue
            eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
            trace = Trace(out)
            # Whichever file ran, it is the one attached to before it ran: every probe it
            # fired is traced, and nothing was attached only once it ran.
            check_truth(trace, read_truth(truth), trace.processes[-1]["pid"])
            late = [r["path"] for r in trace.records if r["type"] == "object" and r.get("late")]
            eq(late, [], "objects attached once the program ran")
            outcomes.append("traced")
    finally:
        stop.set()
        th.join()
    print("     outcomes: %s" % " ".join(outcomes))
