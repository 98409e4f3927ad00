"""Outputs and inputs against another user who can rename in the output directory
(docs/reliability.md, "Outputs and inputs"): every test plays that user for real, as an
unprivileged process racing corobpf (run as root) in a directory it owns, or in a
sticky /tmp-like directory under sudo. Whatever it does, root creates no file outside
the output directory, replaces nothing it was not told to, and keeps every finished
trace."""
import stat

from harness import *  # noqa: F401,F403

SCENARIOS_BIN = os.path.join(TESTS_BIN, "scenarios")

# Run as the attacker: replace every temporary output in DIR by a symlink to TARGET, again
# and again, until killed. Prints "go" once it runs.
SWAP_TEMPS = r"""
import os, sys
d, target = sys.argv[1], sys.argv[2]
print("go", flush=True)
while True:
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if ".tmp-" not in n or os.path.islink(p):
            continue
        try:
            os.unlink(p)
            os.symlink(target, p)
        except OSError:
            pass
"""


def root_only_dir(name):
    """A directory only root may enter: a file the attacker points at inside must never appear."""
    d = tempfile.mkdtemp(prefix="corobpf-it-%s-" % name, dir="/tmp")
    os.chmod(d, 0o700)
    if not os.environ.get("KEEP"):
        import atexit
        atexit.register(shutil.rmtree, d, True)
    return d


def start_swapper(d, target):
    sw = subprocess.Popen(as_attacker(["python3", "-c", SWAP_TEMPS, d, target]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    eq(sw.stdout.readline().strip(), "go", "the attacker's loop started")
    return sw


def stop(p):
    p.kill()
    p.wait()


def start_target():
    """A scenario that waits for SIGUSR1: the run lasts as long as the test needs."""
    p = subprocess.Popen([SCENARIOS_BIN, "--wait", "yield"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    check(line and line[0] == "READY", "the scenario did not announce itself: %r" % line)
    return p, int(line[1])


def wait_text(path, text, timeout=60):
    for _ in range(int(timeout / 0.05)):
        with open(path) as f:
            if text in f.read():
                return
        time.sleep(0.05)
    raise Failure("%r never appeared in %s" % (text, path))


def trace_while(args, name, during, env=None):
    """corobpf ARGS -p TARGET; `during()` runs once it traces; then the target ends.
    Returns (exit code, stderr)."""
    target, pid = start_target()
    err = work(name + ".err")
    e = dict(os.environ)
    if env:
        e.update(env)
    try:
        with open(err, "w") as ef:
            tr = subprocess.Popen([COROBPF] + args + ["-p", str(pid)], stdout=ef, stderr=ef,
                                  env=e)
            try:
                wait_text(err, "tracing")
                during()
            finally:
                target.send_signal(signal.SIGUSR1)
                target.wait(timeout=60)
                rc = tr.wait(timeout=60)
    finally:
        if target.poll() is None:
            stop(target)
    with open(err) as f:
        return rc, f.read()


def root_files(d):
    """Names in d that root owns, with their kind."""
    out = {}
    for n in os.listdir(d):
        st = os.lstat(os.path.join(d, n))
        if st.st_uid == 0:
            out[n] = "link" if stat.S_ISLNK(st.st_mode) else \
                "dir" if stat.S_ISDIR(st.st_mode) else "file"
    return out


def sqlite_rows(path):
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return db.execute("SELECT count(*) FROM coroutines").fetchone()[0]
    finally:
        db.close()


_capture = []


def capture():
    """A raw capture and its JSONL, made once."""
    if not _capture:
        raw, out = work("hostile-cap.raw"), work("hostile-cap.jsonl")
        p = corobpf(["-q", "--raw", raw, "-o", out, "--", SCENARIOS_BIN, "yield"])
        eq(p.returncode, 0, "making a capture (%s)" % p.stderr.strip())
        _capture.extend([raw, out])
    return _capture


@test
def hostile_out_symlinked_temp_in_the_users_dir():
    """The user owns the output directory and swaps symlinks in for every temporary file
    all run long: root never writes through them (SQLite included)."""
    d, r = attacker_dir("swap"), root_only_dir("swap-victim")
    victim = os.path.join(r, "victim.db")
    sw = start_swapper(d, victim)
    try:
        rc, err = trace_while(["-o", os.path.join(d, "t.db"), "-o", os.path.join(d, "t.jsonl"),
                               "--raw", os.path.join(d, "t.raw")], "swap", lambda: None)
    finally:
        stop(sw)
    check(not os.path.lexists(victim), "root wrote through a symlink to %s (exit %d):\n%s"
          % (victim, rc, err))
    eq(os.listdir(r), [], "files in the root-only directory")
    check(rc in (0, 7), "exit code %d:\n%s" % (rc, err))
    for n, kind in root_files(d).items():
        eq(kind, "file", "what root left in the user's directory: " + n)
    if rc == 7:
        check("replaced or removed during the run" in err, "the error does not say what happened:\n" + err)


@test
def hostile_out_sudo_in_a_sticky_dir():
    """Under sudo into a sticky world-writable directory (/tmp): the temporary files stay
    root's until complete, so the user cannot swap them; each output is then the user's."""
    uid, gid = attacker()
    d = tempfile.mkdtemp(prefix="corobpf-it-sticky-", dir="/tmp")
    os.chmod(d, 0o1777)
    if not os.environ.get("KEEP"):
        import atexit
        atexit.register(shutil.rmtree, d, True)
    r = root_only_dir("sticky-victim")
    victim = os.path.join(r, "victim.db")
    sw = start_swapper(d, victim)
    outs = [os.path.join(d, n) for n in ("t.db", "t.jsonl", "t.raw")]
    try:
        rc, err = trace_while(["-o", outs[0], "-o", outs[1], "--raw", outs[2]], "sticky",
                              lambda: None, env={"SUDO_UID": str(uid), "SUDO_GID": str(gid)})
    finally:
        stop(sw)
    check(not os.path.lexists(victim), "root wrote through a symlink to %s" % victim)
    eq(os.listdir(r), [], "files in the root-only directory")
    eq(rc, 0, "exit code (%s)" % err)
    for o in outs:
        st = os.lstat(o)
        check(stat.S_ISREG(st.st_mode), "%s is not a regular file" % o)
        eq((st.st_uid, st.st_gid), (uid, gid), "owner of " + o)
        eq(oct(stat.S_IMODE(st.st_mode)), "0o600", "mode of " + o)
    check(sqlite_rows(outs[0]) > 0, "no coroutines in the database")
    Trace(outs[1])
    eq(sorted(os.listdir(d)), ["t.db", "t.jsonl", "t.raw"], "files left in the directory")


@test
def hostile_out_file_and_dir_appear_mid_run():
    """Another user creates a file at one output's name and a directory at another's while
    corobpf runs: neither is replaced, both traces are kept under their temporary names."""
    d = attacker_dir("appear")
    out, raw = os.path.join(d, "t.jsonl"), os.path.join(d, "t.raw")

    def plant():
        p = run(as_attacker(["sh", "-c", 'printf mine > "$1" && mkdir "$2"', "sh", out, raw]))
        eq(p.returncode, 0, "the attacker's files: " + p.stderr)

    rc, err = trace_while(["-o", out, "--raw", raw], "appear", plant)
    eq(rc, 7, "exit code (%s)" % err)
    with open(out) as f:
        check(f.read() == "mine", "the file that appeared at %s was replaced" % out)
    check(os.path.isdir(raw) and not os.listdir(raw), "the directory that appeared at " + raw)
    kept = sorted(n for n in os.listdir(d) if ".tmp-" in n)
    eq(len(kept), 2, "finished traces kept (%s)" % os.listdir(d))
    for n in kept:
        check("%s appeared during the run; the finished trace is kept as %s"
              % (os.path.join(d, n.split(".tmp-")[0]), os.path.join(d, n)) in err,
              "the error does not say where %s is:\n%s" % (n, err))
    Trace(os.path.join(d, [n for n in kept if n.startswith("t.jsonl")][0]))
    back = work("appear-back.jsonl")
    p = corobpf(["report", "-q", os.path.join(d, [n for n in kept if n.startswith("t.raw")][0]),
                 "-o", back])
    eq(p.returncode, 0, "report of the kept capture (%s)" % p.stderr.strip())


@test
def hostile_out_dir_appears_with_force():
    """--force replaces files, never a directory: the finished trace is kept."""
    d = attacker_dir("appear-force")
    out = os.path.join(d, "t.db")

    def plant():
        p = run(as_attacker(["mkdir", out]))
        eq(p.returncode, 0, "the attacker's directory: " + p.stderr)

    rc, err = trace_while(["--force", "-o", out], "appear-force", plant)
    eq(rc, 7, "exit code (%s)" % err)
    check(os.path.isdir(out), "the directory at " + out)
    kept = [n for n in os.listdir(d) if ".tmp-" in n]
    eq(len(kept), 1, "finished trace kept (%s)" % os.listdir(d))
    check(os.path.join(d, kept[0]) in err, "the error does not name the kept file:\n" + err)
    check(sqlite_rows(os.path.join(d, kept[0])) > 0, "no coroutines in the kept database")


@test
def hostile_out_report_of_a_fifo():
    """A FIFO as the capture: refused at once, not read forever."""
    fifo = work("hostile.fifo")
    os.mkfifo(fifo)
    for extra in ([], ["-o", work("fifo.jsonl")]):
        try:
            p = corobpf(["report", fifo] + extra, timeout=20)
        except subprocess.TimeoutExpired:
            raise Failure("corobpf report %s blocked" % fifo)
        # A capture that cannot be opened as one (README's exit codes): 1, not 8.
        eq(p.returncode, 1, "exit code for a FIFO (%s)" % p.stderr.strip())
        check("not a regular file" in p.stderr, "no clear error: " + p.stderr)
    check(not os.path.exists(work("fifo.jsonl")), "an output was written")


@test
def hostile_out_same_output_twice():
    """One file named by two -o (or --raw and -o), however spelled: a usage error."""
    raw, _ = capture()
    d = work("twice")
    os.mkdir(d)
    link = work("twice-link")
    os.symlink(d, link)
    x = os.path.join(d, "x.jsonl")
    for args in (["report", raw, "-o", x, "-o", x],
                 ["report", raw, "-o", x, "-o", os.path.join(d, ".", "x.jsonl")],
                 ["report", raw, "-o", x, "-o", os.path.join(link, "x.jsonl")],
                 ["report", raw, "-o", x, "-o", os.path.join(d, "..", "twice", "x.jsonl"),
                  "--force"]):
        p = corobpf(args)
        eq(p.returncode, 2, "exit code for %s (%s)" % (args[2:], p.stderr.strip()))
        check("same file" in p.stderr, "no clear error: " + p.stderr)
        eq(os.listdir(d), [], "files written")
    p = corobpf(["-o", x, "--raw", os.path.join(link, "x.jsonl"), "--", SCENARIOS_BIN, "yield"])
    eq(p.returncode, 2, "exit code for --raw and -o the same (%s)" % p.stderr.strip())
    eq(os.listdir(d), [], "files written")


@test
def hostile_out_report_onto_its_input():
    """report never writes over its own capture, under any of its names."""
    raw, jsonl = capture()
    d = work("onto")
    os.mkdir(d)
    cap_raw, cap_jsonl = os.path.join(d, "c.raw"), os.path.join(d, "c.jsonl")
    shutil.copy(raw, cap_raw)
    shutil.copy(jsonl, cap_jsonl)
    hard, soft = os.path.join(d, "hard.jsonl"), os.path.join(d, "soft.jsonl")
    os.link(cap_jsonl, hard)
    os.symlink("c.jsonl", soft)
    with open(cap_raw, "rb") as f:
        want_raw = f.read()
    with open(cap_jsonl, "rb") as f:
        want_jsonl = f.read()
    for args in ([cap_raw, "-f", "jsonl", "-o", cap_raw],
                 [cap_jsonl, "-o", cap_jsonl],
                 [cap_jsonl, "-o", os.path.join(d, ".", "c.jsonl")],
                 [cap_jsonl, "-o", hard],
                 [soft, "-o", cap_jsonl],
                 [cap_jsonl, "-o", soft]):
        p = corobpf(["report", "-q", "--force"] + args)
        eq(p.returncode, 2, "exit code for report %s (%s)" % (args, p.stderr.strip()))
        check("input" in p.stderr, "no clear error: " + p.stderr)
        with open(cap_raw, "rb") as f:
            check(f.read() == want_raw, "the raw capture changed")
        with open(cap_jsonl, "rb") as f:
            check(f.read() == want_jsonl, "the JSONL capture changed")
        check(os.path.islink(soft) and os.path.samefile(hard, cap_jsonl), "a name replaced")
    eq(sorted(os.listdir(d)), ["c.jsonl", "c.raw", "hard.jsonl", "soft.jsonl"], "files")


@test
def hostile_out_file_modes():
    """A live capture's outputs hold other users' data: 0600. A report run by a user keeps
    its umask's mode (0644 under umask 022)."""
    d = work("modes")
    os.mkdir(d)
    outs = [os.path.join(d, n) for n in ("m.jsonl", "m.pftrace", "m.db", "m.csv", "m.jsonl.gz")]
    raw = os.path.join(d, "m.raw")
    args = ["-q", "--raw", raw]
    for o in outs:
        args += ["-o", o]
    p = run(["sh", "-c", 'umask 022 && exec "$@"', "sh", COROBPF] + args +
            ["--", SCENARIOS_BIN, "yield"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    for o in outs + [raw]:
        eq(oct(stat.S_IMODE(os.stat(o).st_mode)), "0o600", "mode of " + o)
    # The same capture replayed by an ordinary user into a directory of theirs.
    u = attacker_dir("modes")
    cap = os.path.join(u, "m.raw")
    shutil.copy(raw, cap)
    os.chmod(cap, 0o644)
    mine = os.path.join(u, "m.jsonl")
    p = run(as_attacker(["sh", "-c", 'umask 022 && exec "$@"', "sh", COROBPF, "report", "-q",
                         cap, "-o", mine]))
    eq(p.returncode, 0, "report as a user (%s)" % p.stderr.strip())
    eq(oct(stat.S_IMODE(os.stat(mine).st_mode)), "0o644", "mode of a user's report")
