"""Attach under attack: targets an unprivileged user controls must not hang, crash or steer
corobpf, nor take what other targets need; and what corobpf needs to attach is what it says."""
from harness import *  # noqa: F401,F403

TARGET = os.path.join(TESTS_BIN, "attach_target")


def start_target(cmd, user=False):
    """Start a target that prints READY <pid>; returns (Popen, pid)."""
    if user:
        cmd = as_attacker(cmd)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if len(line) != 2 or line[0] != "READY":
        p.kill()
        raise Failure("%s did not start: %r %s" % (cmd, line, p.stderr.read()))
    return p, int(line[1])


def creates_of(trace, pid):
    return len([e for e in trace.by_ev("create") if e["pid"] == pid])


def finish(p):
    out, err = p.communicate(timeout=60)
    eq(p.returncode, 0, "target exit (%s)" % err.strip())
    done = [l for l in out.splitlines() if l.startswith("DONE ")]
    eq(len(done), 1, "target's DONE line")
    return int(done[0].split()[1])


@test
def hostile_attach_fifo_planted_in_a_chroot_does_not_hang():
    """A user's chrooted program plants a FIFO at the path its maps name, inside its root:
    corobpf opens the file the process maps (-a and -p), traces it, and ends on time."""
    jail = attacker_dir("jail")
    prog = os.path.join(jail, "prog")
    shutil.copy(TARGET + "-static", prog)
    uid, gid = attacker()
    os.chown(prog, uid, gid)
    # Inside the jail, the jail's own absolute path: what /proc/PID/root + maps path names.
    decoy = jail + jail
    r = run(as_attacker(["sh", "-c", "mkdir -p %s && mkfifo %s/prog" % (decoy, decoy)]))
    eq(r.returncode, 0, "attacker's FIFO (%s)" % r.stderr)
    t, pid = start_target(["unshare", "-Ur", "chroot", jail, "/prog", "run", "120"], user=True)
    try:
        for mode in (["-a"], ["-p", str(pid)]):
            out = work("chroot-fifo-%s.jsonl" % mode[0][1:])
            p = corobpf(mode + ["-d", "1", "-o", out], timeout=90)
            eq(p.returncode, 0, "corobpf %s exit code (%s)" % (mode[0], p.stderr.strip()))
            check(creates_of(Trace(out), pid) > 0,
                  "%s: the chrooted program's probes were not traced:\n%s" % (mode[0], p.stderr))
    finally:
        t.kill()
        t.communicate()


@test
def hostile_attach_thirty_processes_of_a_program_with_many_specs():
    """-p on 30 processes of a program with 404 argument specifications: every one attached
    and traced (libbpf's own pool held 256 and its cleanup then crashed corobpf)."""
    procs = [start_target([TARGET + "-specs400", "run", "30"]) for _ in range(30)]
    try:
        args = []
        for _, pid in procs:
            args += ["-p", str(pid)]
        out = work("thirty.jsonl")
        p = corobpf(args + ["-d", "1", "-o", out], timeout=300)
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip()[-2000:])
        trace = Trace(out)
        eq(trace.trailer["lost"]["attach_failures"], 0, "attach failures")
        missing = [pid for _, pid in procs if creates_of(trace, pid) == 0]
        eq(missing, [], "processes without events")
    finally:
        for t, _ in procs:
            t.kill()
            t.communicate()


def build_specs_variant(directory, base, extra):
    path = os.path.join(directory, "specs-%d-%d" % (extra, base))
    r = run(["cc", "-O2", "-Iusdt", "-DSPECS_EXTRA=%d" % extra, "-DSPECS_BASE=%d" % base,
             os.path.join(ROOT, "tests", "integration", "progs", "attach_target.c"), "-o", path],
            cwd=ROOT)
    eq(r.returncode, 0, "cc (%s)" % r.stderr)
    uid, gid = attacker()
    os.chown(path, uid, gid)
    return path


@test
def hostile_attach_one_user_cannot_take_the_spec_slots():
    """Under -a, a user's object with 604 argument specifications is refused, and past 2048
    per user the next object is refused too, saying why; root's program is traced all the
    same, and corobpf ends normally."""
    d = attacker_dir("specs")
    big = build_specs_variant(d, 1000000, 600)
    small = [build_specs_variant(d, 2000000 + 10000 * i, 400) for i in range(6)]
    users = [start_target([b, "run", "30"], user=True) for b in [big] + small]
    mine, mypid = start_target([TARGET + "-specs400", "run", "4"])
    try:
        out = work("specs-a.jsonl")
        p = corobpf(["-a", "-d", "2", "-o", out], timeout=120)
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip()[-2000:])
        check(re.search(r"specs-600-1000000 \(owner uid \d+\): not attached: .*"
                        r"more than one object may have", p.stderr), p.stderr)
        refused = re.findall(r"specs-400-\d+ \(owner uid \d+\): not attached: .*more than its "
                             r"owner's objects may have together", p.stderr)
        eq(len(refused), 1, "small objects refused for their owner's share")
        trace = Trace(out)
        check(creates_of(trace, mypid) > 0, "root's program was not traced")
        traced_users = [pid for _, pid in users if creates_of(trace, pid) > 0]
        eq(len(traced_users), 5, "the user's programs traced (5 of 7 objects fit)")
        eq(trace.trailer["lost"]["attach_refused"], 2, "objects refused, counted")
    finally:
        for t, _ in users + [(mine, mypid)]:
            t.kill()
            t.communicate()


@test
def hostile_attach_nothing_attached_is_an_error():
    """-p on a process whose only object with probes is refused (and no switch functions
    wanted): exit 1 and say so, never a silent, empty, successful trace."""
    t, pid = start_target([TARGET + "-specs600", "run", "20"])
    try:
        p = corobpf(["-p", str(pid), "--switch", "none", "-d", "1", "-o",
                     work("refused.jsonl")], timeout=60)
        eq(p.returncode, 1, "exit code (%s)" % p.stderr.strip())
        check("nothing attached" in p.stderr and "more than one object may have" in p.stderr,
              p.stderr)
    finally:
        t.kill()
        t.communicate()


def with_caps(cmd, caps):
    uid, gid = attacker()
    c = ",".join("+" + x for x in caps)
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
            "--inh-caps=" + c, "--ambient-caps=" + c, "--"] + list(cmd)


@test
def caps_bpf_and_perfmon_trace_ones_own_processes():
    """With exactly CAP_BPF and CAP_PERFMON, a user traces a program of their own, every
    coroutine it ran; a process of another user is refused with the real reason (exit 3)."""
    d = attacker_dir("caps")
    out = os.path.join(d, "own.jsonl")
    p = run(with_caps([COROBPF, "-o", out, "--", TARGET + "-static", "run", "1"],
                      ["bpf", "perfmon"]), cwd=d)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    ran = [l for l in p.stdout.splitlines() if l.startswith("DONE ")]
    eq(len(ran), 1, "DONE line")
    trace = Trace(out)
    eq(len(trace.by_ev("create")), int(ran[0].split()[1]), "coroutines traced")
    check_clean(trace)
    t, pid = start_target([TARGET + "-static", "run", "20"])
    try:
        p = run(with_caps([COROBPF, "-p", str(pid), "-d", "1", "-o",
                           os.path.join(d, "other.jsonl")], ["bpf", "perfmon"]), cwd=d)
        eq(p.returncode, 3, "exit code for another user's process (%s)" % p.stderr.strip())
        check("another user" in p.stderr, p.stderr)
    finally:
        t.kill()
        t.communicate()
