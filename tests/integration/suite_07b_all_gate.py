"""The exec gate: -a and --follow hold the exec of a program never seen until it is attached."""
from harness import *  # noqa: F401,F403

RUNS = 10


def fresh_copy(name):
    """An instrumented program at a path (and inode) corobpf has never seen."""
    d = tempfile.mkdtemp(prefix=name + "-", dir=WORK)
    exe = os.path.join(d, "sc")
    shutil.copy2(os.path.join(TESTS_BIN, "scenarios"), exe)
    return d, exe


def creates_of(trace, pid):
    return sum(1 for e in trace.by_ev("create") if e["pid"] == pid)


def check_runs(trace, runs, err):
    """Every run listed, every create of every run traced, each run exactly as it counts."""
    pids = {p["pid"] for p in trace.processes}
    got = sum(creates_of(trace, pid) for pid, _ in runs)
    want = sum(len(read_truth(t)) for _, t in runs)
    missing = [pid for pid, _ in runs if pid not in pids]
    check(not missing and got == want,
          "%d of %d creates traced; processes not listed: %s\n%s"
          % (got, want, missing, open(err).read()[-2000:]))
    for pid, truth in runs:
        check_truth(trace, read_truth(truth), pid)
    check("ran after waiting" not in open(err).read(), "an exec outlived the gate's timeout")


@test
def all_gate_program_never_seen_traced_from_its_first_probe():
    """-a, then a fresh copy of an instrumented program: ten short runs and one reached
    through `sh -c exec`; every create of every run is in the trace, every process listed
    (without the gate, the first run's probes fire before the rescan its exec asks for)."""
    out, err = work("gate.jsonl"), work("gate.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out], stderr=ef, stdout=ef)
    runs = []
    try:
        wait_for(err, "tracing every")
        check("exec gate:" in open(err).read(), "no exec gate:\n" + open(err).read())
        d, exe = fresh_copy("gate")
        for i in range(RUNS):
            truth = os.path.join(d, "run%d.truth" % i)
            p = subprocess.Popen([exe, "concurrent20"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=dict(os.environ, COROBPF_TRUTH=truth))
            eq(p.wait(timeout=60), 0, "run %d exit status" % i)
            runs.append((p.pid, truth))
        # Through a shell that becomes the program: its exec is the one held. A second fresh
        # copy, so this exec is also of a program never seen.
        d2, exe2 = fresh_copy("gate-sh")
        truth = os.path.join(d2, "sh.truth")
        p = subprocess.Popen(["/bin/sh", "-c", 'exec "$0" concurrent20', exe2],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, COROBPF_TRUTH=truth))
        eq(p.wait(timeout=60), 0, "sh -c exec exit status")
        runs.append((p.pid, truth))
        time.sleep(0.3)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
    check_runs(Trace(out), runs, err)


@test
def all_gate_follow_children_exec_programs_never_seen():
    """--follow -- sh: the shell copies an instrumented program to a new directory and runs
    it three times as its children; each run is traced from its first create."""
    d = tempfile.mkdtemp(prefix="gate-follow-", dir=WORK)
    out, err = work("gate-follow.jsonl"), work("gate-follow.err")
    script = ('cp "$1" "$2/sc" && for i in 0 1 2; do COROBPF_TRUTH="$2/run$i.truth" '
              '"$2/sc" concurrent20 >/dev/null & echo $! >> "$2/pids"; wait $!; done')
    p = corobpf(["--follow", "-v", "-o", out, "--", "/bin/sh", "-c", script, "sh",
                 os.path.join(TESTS_BIN, "scenarios"), d])
    with open(err, "w") as f:
        f.write(p.stderr)
    eq(p.returncode, 0, "corobpf --follow exit status (%s)" % p.stderr[-2000:])
    check("exec gate:" in p.stderr, "no exec gate:\n" + p.stderr)
    with open(os.path.join(d, "pids")) as f:
        pids = [int(x) for x in f.read().split()]
    eq(len(pids), 3, "runs")
    check_runs(Trace(out), [(pid, os.path.join(d, "run%d.truth" % i))
                            for i, pid in enumerate(pids)], err)


@test
def all_gate_off_says_so():
    """--exec-gate 0: no gate, and corobpf says nothing about one."""
    tr, ef, err = start_tracer(["-a", "-v", "--exec-gate", "0", "-d", "1", "-o",
                                work("gate-off.jsonl")], "gate-off")
    tr.wait(timeout=60)
    ef.close()
    check("exec gate:" not in open(err).read(), "a gate with --exec-gate 0")


def early_copy(name):
    """early and its libearly.so (found through RUNPATH $ORIGIN), both never seen."""
    d = tempfile.mkdtemp(prefix=name + "-", dir=WORK)
    for f in ("early", "libearly.so"):
        shutil.copy2(os.path.join(TESTS_BIN, f), os.path.join(d, f))
    return d, os.path.join(d, "early")


EARLY_IDS = {"0xe1", "0xe2", "0xe3", "0xe4"}


def check_early(trace, pids, err):
    """Each run's four creates: two fired by constructors (the program's and its library's)."""
    for pid in pids:
        got = {e["id"] for e in trace.by_ev("create") if e["pid"] == pid}
        check(got == EARLY_IDS, "process %d: creates %s, want %s\n%s"
              % (pid, sorted(got), sorted(EARLY_IDS), open(err).read()[-2000:]))


@test
def all_gate_constructors_of_a_program_and_its_library_never_seen():
    """-a, then a fresh copy of a program and of the library it needs: the probes their
    constructors fire, before main, are traced from the first run (the library is found as
    ld.so finds it, through RUNPATH $ORIGIN, while the exec waits)."""
    out, err = work("gate-early.jsonl"), work("gate-early.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out], stderr=ef, stdout=ef)
    pids = []
    try:
        wait_for(err, "tracing every")
        d, exe = early_copy("gate-early")
        for i in range(3):
            p = subprocess.Popen([exe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            eq(p.wait(timeout=60), 0, "run %d exit status" % i)
            pids.append(p.pid)
        time.sleep(0.3)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
    check_early(Trace(out), pids, err)


@test
def all_gate_follow_constructors_of_a_child_never_seen():
    """--follow -- sh: a child runs a fresh copy of a program and its library; their
    constructors' probes are traced."""
    d, exe = early_copy("gate-follow-early")
    out, err = work("gate-follow-early.jsonl"), work("gate-follow-early.err")
    script = 'for i in 0 1; do "$1" >/dev/null & echo $! >> "$2/pids"; wait $!; done'
    p = corobpf(["--follow", "-v", "-o", out, "--", "/bin/sh", "-c", script, "sh", exe, d])
    with open(err, "w") as f:
        f.write(p.stderr)
    eq(p.returncode, 0, "corobpf --follow exit status (%s)" % p.stderr[-2000:])
    with open(os.path.join(d, "pids")) as f:
        pids = [int(x) for x in f.read().split()]
    check_early(Trace(out), pids, err)
