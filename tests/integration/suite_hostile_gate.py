"""The exec gate under attack (-a): an unprivileged user's execs must not hold anyone else's,
nor hang corobpf, and a process in a chroot or a mount namespace of its own has its own
libraries examined.

The gate holds an exec of a program never examined until corobpf has searched what ld.so will
map for it (docs/reliability.md, "The exec gate"). The search reads the environment of the
process that execs, which its user chose: an LD_LIBRARY_PATH of tens of thousands of
directories, or one in a FUSE filesystem whose daemon never answers root. Whatever it holds,
root's own execs wait no longer than a generous 0.5 s, a traced program loses nothing, and
-d, SIGINT and SIGTERM end the run on time.
"""
import threading

from harness import *  # noqa: F401,F403

FLOOD = os.path.join(TESTS_BIN, "gate_flood")
TARGET = os.path.join(TESTS_BIN, "attach_target-static")
HANGFS = os.path.join(ROOT, "tests", "integration", "progs", "hangfs.py")
EARLY_IDS = {"0xe1", "0xe2", "0xe3", "0xe4"}
# The most an exec of root's may wait while a user floods or hangs the gate: the gate's own
# timeout is 1 s, a search is given a quarter of it, and root's never waits behind a user's.
ROOT_EXEC_MAX = 0.5
# How late -d and a signal may stop the capture (its end record, in the trace), and how long
# corobpf may take after that to finish its outputs and exit (detaching every object -a
# attached on a busy machine takes seconds).
STOP_LATE_MAX = 1.0
EXIT_MAX = 15.0
# Under -a every instrumented program on the machine is traced; --comm keeps the ring to the
# test's own (another session's flood must not decide how fast this capture runs).
NO_COMM = ["--comm", "corobpf-it-none"]


def needs_hundred(d):
    """A program with 101 DT_NEEDED entries (100 libraries that are nowhere, and libc), owned
    by the attacker: ld.so gives up at once, the gate would search for every one of them."""
    b = tempfile.mkdtemp(prefix="needs-", dir=WORK)
    libs = []
    for i in range(100):
        so = os.path.join(b, "libgateneed%03d.so" % i)
        r = run(["cc", "-shared", "-fPIC", "-x", "c", "/dev/null", "-Wl,-soname,%s"
                 % os.path.basename(so), "-o", so])
        eq(r.returncode, 0, "cc (%s)" % r.stderr)
        libs.append(so)
    src = os.path.join(b, "main.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 0; }\n")
    prog = os.path.join(d, "needs100")
    r = run(["cc", src, "-o", prog, "-Wl,--no-as-needed"] + libs)
    eq(r.returncode, 0, "cc (%s)" % r.stderr)
    uid, gid = attacker()
    os.chown(prog, uid, gid)
    return prog


def short_names(n):
    """n distinct directory names of one to four characters."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    for i in range(n):
        s = ""
        i += 1
        while i:
            i, r = divmod(i, len(digits))
            s = digits[r] + s
        out.append(s)
    return out


def exec_seconds(cmd, timeout=60):
    """How long cmd takes to run. Forked, not vforked (preexec_fn): a vfork parent waits,
    untimed, until its child's exec is done, and an exec may be what is held."""
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
                       preexec_fn=lambda: None)
    took = time.monotonic() - start
    eq(p.returncode, 0, "%s exit status" % cmd[0])
    return took


def root_exec_latencies(d, tag, n=8):
    """n execs of a fresh copy of /bin/true (a program never examined: held until it is),
    then n of /bin/true itself; their times (also in WORK/TAG.times, to read with KEEP=1)."""
    took = []
    for i in range(n):
        p = os.path.join(d, "true-%s-%d" % (tag, i))
        shutil.copy2("/bin/true", p)
        took.append(exec_seconds([p]))
    for _ in range(n):
        took.append(exec_seconds(["/bin/true"]))
    with open(work(tag + ".times"), "w") as f:
        f.write(" ".join("%.4f" % t for t in took) + "\n")
    return took


def start_all(args, name, cwd=None):
    """corobpf -a ARGS, up and tracing; returns (Popen, stderr file object, its path, when it
    was ready, time.monotonic())."""
    err = work(name + ".err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v"] + args, stdout=ef, stderr=ef, cwd=cwd)
    try:
        wait_for(err, "tracing every", timeout=60)
    except Failure:
        tr.kill()
        tr.wait()
        raise
    return tr, ef, err, time.monotonic()


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def wait_end(tr, out, by, what, err, cleanup=None):
    """corobpf must have stopped tracing by `by` (CLOCK_BOOTTIME seconds; None: the header's
    start plus `what`'s -d) give or take STOP_LATE_MAX, as its trace's end record says, and
    exited soon after; else it is killed and the test fails."""
    try:
        tr.wait(timeout=EXIT_MAX + (max(by - boottime(), 0) if by else float(what.split()[-1])))
    except subprocess.TimeoutExpired:
        if cleanup:
            cleanup()
        tr.kill()
        tr.wait()
        raise Failure("%s: corobpf was still running %.0f s after it should have stopped:\n%s"
                      % (what, EXIT_MAX, open(err).read()[-3000:]))
    trace = Trace(out)
    if by is None:
        by = trace.header["start_ts"] / 1e9 + float(what.split()[-1])
    late = trace.trailer["last_ts"] / 1e9 - by
    check(late <= STOP_LATE_MAX, "%s: corobpf stopped tracing %.2f s late:\n%s"
          % (what, late, open(err).read()[-3000:]))
    return trace


def creates_of(trace, pid):
    return sum(1 for e in trace.by_ev("create") if e["pid"] == pid)


@test
def hostile_gate_search_flood_holds_no_one_else():
    """A user execs a program with 101 DT_NEEDED entries, touched before each exec, from a
    process whose LD_LIBRARY_PATH has 24,000 directories: root's execs of programs never seen
    wait under 0.5 s each, a traced program's every coroutine is in the trace (with a 1 MiB
    ring), -d ends the run on time, and the searches cut short are said. (Before: each search
    took the capture thread for about a minute.)"""
    secs = 8
    d = attacker_dir("gate-flood")
    prog = needs_hundred(d)
    w = os.path.join(d, "w")
    os.mkdir(w)
    names = short_names(24000)
    for n in names:
        os.mkdir(os.path.join(w, n))
    run(["chown", "-R", "%d:%d" % attacker(), w], timeout=120)
    llp = ":".join(names)
    check(len(llp) < 128 * 1024, "LD_LIBRARY_PATH must fit in one environment string")
    mine = tempfile.mkdtemp(prefix="gate-flood-root-", dir=WORK)
    victim = os.path.join(mine, "victim")
    shutil.copy2(TARGET, victim)
    out = work("gate-flood.jsonl")
    # corobpf runs in the attacker's directory too: its own current directory must not be where
    # the relative entries are found (before, it was, and each search took a minute).
    tr, ef, err, _ = start_all(["--comm", "victim", "--ring-size", "1", "-d", str(secs), "-o",
                                    out], "gate-flood", cwd=w)
    flood = vic = None
    try:
        # The library path is given to gate_flood alone (by env, run without it): setpriv's
        # own ld.so would spend a minute in it.
        flood = subprocess.Popen(as_attacker(["env", "LD_LIBRARY_PATH=" + llp, FLOOD, prog,
                                              str(secs)]), cwd=w, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        vic = subprocess.Popen([victim, "run", "3"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        took = root_exec_latencies(mine, "flood")
        vout, verr = vic.communicate(timeout=60)
        eq(vic.returncode, 0, "victim exit status (%s)" % verr)
        trace = wait_end(tr, out, None, "-d %d" % secs, err)
        fout, ferr = flood.communicate(timeout=60)
        eq(flood.returncode, 0, "gate_flood exit status (%s)" % ferr)
    finally:
        for p in (flood, vic, tr):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        ef.close()
    stderr = open(err).read()
    execs = int(fout.split()[1])
    check(execs >= 3, "the flood ran %d execs" % execs)
    check(max(took) < ROOT_EXEC_MAX, "root's execs took up to %.3f s (%s) while a user flooded "
          "the gate:\n%s" % (max(took), ", ".join("%.3f" % t for t in took), stderr[-3000:]))
    lines = vout.split()
    vpid = int(lines[1])
    ran = int(lines[3])
    eq(creates_of(trace, vpid), ran, "the victim's coroutines traced (lost: %s)"
       % trace.trailer["lost"]["events"])
    check(re.search(r"exec gate: \d+ searches? .*cut short", stderr),
          "the searches cut short are not said:\n" + stderr[-3000:])


def fuse_mount(name, serve=None):
    """hangfs mounted on a fresh directory, for the attacker, allow_other (serving the file
    `serve` as lib.so, if given); (daemon, path)."""
    d = attacker_dir(name)
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    uid, gid = attacker()
    daemon = subprocess.Popen([sys.executable, HANGFS, mnt, str(uid), str(gid)]
                              + ([serve] if serve else []),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = daemon.stdout.readline().strip()
    if line != "READY":
        daemon.kill()
        raise Failure("hangfs did not mount: %r %s" % (line, daemon.stderr.read()))
    return daemon, mnt


def fuse_unmount(daemon, mnt):
    daemon.kill()
    daemon.wait()
    subprocess.run(["umount", "-l", mnt], capture_output=True)


def user_runs_with_library_path_in(mnt, d, runs=3):
    """As the attacker, from a shell whose own environment has LD_LIBRARY_PATH in the FUSE
    directory: a program never seen (touched before each run), run `runs` times."""
    prog = os.path.join(d, "prog-%d" % time.monotonic_ns())
    shutil.copy2("/bin/true", prog)
    uid, gid = attacker()
    os.chown(prog, uid, gid)
    loop = 'for i in %s; do touch "$0" && "$0" || exit 1; done' % " ".join(
        str(i) for i in range(runs))
    # The library path is set by the attacker's shell, not by root's setpriv (ld.so would
    # search it as root, and wait for ever); the inner shell execs with it in its environment.
    script = 'export LD_LIBRARY_PATH="$1/lib"; exec sh -c \'%s\' "$2"' % loop
    p = subprocess.run(as_attacker(["sh", "-c", script, "sh", mnt, prog]),
                       capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "the attacker's runs (%s)" % p.stderr)


@test
def hostile_gate_fuse_directory_that_never_answers():
    """An LD_LIBRARY_PATH entry in a FUSE directory whose daemon never answers root: corobpf
    never looks into it (it says so), root's execs wait under 0.5 s, -d and SIGINT end the run
    on time. (Before: the capture thread hung in the lookup, unkillably, and with it -d,
    SIGINT and the second Ctrl-C.)"""
    daemon, mnt = fuse_mount("gate-fuse")
    mine = tempfile.mkdtemp(prefix="gate-fuse-root-", dir=WORK)
    d = attacker_dir("gate-fuse-prog")
    cleanup = lambda: fuse_unmount(daemon, mnt)  # noqa: E731
    try:
        secs = 4
        tr, ef, err, _ = start_all(NO_COMM + ["-d", str(secs), "-o",
                                                  work("gate-fuse-d.jsonl")], "gate-fuse-d")
        try:
            user_runs_with_library_path_in(mnt, d)
            took = root_exec_latencies(mine, "fuse-d")
            wait_end(tr, work("gate-fuse-d.jsonl"), None, "-d %d" % secs, err, cleanup)
        finally:
            if tr.poll() is None:
                cleanup()
                tr.kill()
                tr.wait()
            ef.close()
        stderr = open(err).read()
        check(max(took) < ROOT_EXEC_MAX, "root's execs took up to %.3f s:\n%s"
              % (max(took), stderr[-3000:]))
        check(re.search(r"not searched.*fuse\.hangfs", stderr),
              "the directory not searched is not said:\n" + stderr[-3000:])

        for sig in (signal.SIGINT, signal.SIGTERM):
            tr, ef, err, _ = start_all(NO_COMM + ["-o", work("gate-fuse-%d.jsonl" % sig)],
                                           "gate-fuse-%d" % sig)
            try:
                user_runs_with_library_path_in(mnt, d)
                took = root_exec_latencies(mine, "fuse-%d" % sig, n=3)
                sent = boottime()
                tr.send_signal(sig)
                wait_end(tr, work("gate-fuse-%d.jsonl" % sig), sent, signal.Signals(sig).name,
                         err, cleanup)
            finally:
                if tr.poll() is None:
                    cleanup()
                    tr.kill()
                    tr.wait()
                ef.close()
            check(max(took) < ROOT_EXEC_MAX, "root's execs took up to %.3f s" % max(took))
    finally:
        fuse_unmount(daemon, mnt)


@test
def hostile_gate_rescan_of_a_library_on_fuse_that_never_answers():
    """A user's program dlopens a library from a FUSE filesystem that answers the user and
    never root: -a's rescan of its mappings (not the gate: a dlopen is not an exec) must not
    open it, and says so; -d ends the run on time. (Before: the capture thread hung in the
    open of the mapped file, unkillably, and with it -d and SIGINT.)"""
    lib = os.path.join(tempfile.mkdtemp(prefix="rescan-fuse-", dir=WORK), "lib.so")
    r = run(["cc", "-shared", "-fPIC", "-x", "c", "/dev/null", "-o", lib])
    eq(r.returncode, 0, "cc (%s)" % r.stderr)
    daemon, mnt = fuse_mount("rescan-fuse", serve=lib)
    cleanup = lambda: fuse_unmount(daemon, mnt)  # noqa: E731
    user = None
    try:
        secs = 3
        tr, ef, err, _ = start_all(NO_COMM + ["-d", str(secs), "-o",
                                              work("rescan-fuse.jsonl")], "rescan-fuse")
        try:
            # The attacker's own process maps it (its requests are answered) and stays.
            user = subprocess.Popen(as_attacker([
                sys.executable, "-c", "import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); "
                "print('MAPPED', flush=True); time.sleep(60)", os.path.join(mnt, "lib.so")]),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = user.stdout.readline().strip()
            eq(line, "MAPPED", "the attacker's dlopen (%s)" % (line or user.stderr.read()))
            # Not a tight bound: -d plus a generous time to stop and exit, else it hung.
            try:
                tr.wait(timeout=secs + 20)
            except subprocess.TimeoutExpired:
                raise Failure("corobpf was still running 20 s after -d %d:\n%s"
                              % (secs, open(err).read()[-3000:]))
        finally:
            if tr.poll() is None:
                cleanup()
                tr.kill()
                tr.wait()
            ef.close()
        stderr = open(err).read()
        check(re.search(r"not opened, on a filesystem that may hang.*first .*lib\.so "
                        r"\(fuse\.hangfs", stderr),
              "the refusal is not said:\n" + stderr[-3000:])
        trace = Trace(work("rescan-fuse.jsonl"))
        check(trace.trailer["lost"]["attach_refused"] >= 1, "attach_refused not counted")
    finally:
        if user:
            user.kill()
            user.wait()
        fuse_unmount(daemon, mnt)


def early_in(root, exe_dir, lib_dir):
    """early at root/exe_dir/early and libearly.so at root/lib_dir (where only the chroot or
    the mount namespace finds it: not beside early, where RUNPATH $ORIGIN would)."""
    os.makedirs(os.path.join(root, exe_dir.lstrip("/")), exist_ok=True)
    os.makedirs(os.path.join(root, lib_dir.lstrip("/")), exist_ok=True)
    shutil.copy2(os.path.join(TESTS_BIN, "early"), os.path.join(root, exe_dir.lstrip("/"), "early"))
    shutil.copy2(os.path.join(TESTS_BIN, "libearly.so"),
                 os.path.join(root, lib_dir.lstrip("/"), "libearly.so"))


def check_early(out, pids, err):
    trace = Trace(out)
    for pid in pids:
        got = {e["id"] for e in trace.by_ev("create") if e["pid"] == pid}
        check(got == EARLY_IDS, "process %d: creates %s, want %s (the library's constructor "
              "fires 0xe1 before main)\n%s" % (pid, sorted(got), sorted(EARLY_IDS),
                                                open(err).read()[-3000:]))


def run_traced(name, cmds):
    """corobpf -a while each command runs once (each prints nothing we need); their pids."""
    out = work(name + ".jsonl")
    tr, ef, err, _ = start_all(["--comm", "early", "-o", out], name)
    pids = []
    try:
        for cmd in cmds:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            _, e = p.communicate(timeout=60)
            eq(p.returncode, 0, "%s exit status (%s)" % (cmd, e))
            pids.append(p.pid)
        time.sleep(0.3)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
    return out, pids, err


@test
def hostile_gate_chroot_libraries_found_in_its_root():
    """-a, a program run in a chroot whose library is in the chroot's /usr/lib only (ld.so
    and libc copied there, /lib64's loader a symlink inside it): the gate searches the
    chroot, not the host, and the library's constructor probe is traced from the first run."""
    jail = tempfile.mkdtemp(prefix="gate-jail-", dir=WORK)
    multi = "/usr/lib/x86_64-linux-gnu"
    early_in(jail, "/bin", multi)
    for lib in ("libc.so.6", "ld-linux-x86-64.so.2"):
        shutil.copy2(os.path.realpath(os.path.join(multi, lib)),
                     os.path.join(jail, multi.lstrip("/"), lib))
    os.symlink("usr/lib", os.path.join(jail, "lib"))
    os.makedirs(os.path.join(jail, "lib64"))
    os.symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
               os.path.join(jail, "lib64", "ld-linux-x86-64.so.2"))
    out, pids, err = run_traced("gate-jail", [["chroot", jail, "/bin/early"]] * 2)
    check_early(out, pids, err)


@test
def hostile_gate_mount_namespace_libraries_found_in_its_mounts():
    """-a, a program whose library directory is a tmpfs mounted in its own mount namespace
    only (named by LD_LIBRARY_PATH in the environment of the shell that execs it): the gate
    searches that namespace's mounts, and the library's constructor probe is traced."""
    d = tempfile.mkdtemp(prefix="gate-ns-", dir=WORK)
    shutil.copy2(os.path.join(TESTS_BIN, "early"), os.path.join(d, "early"))
    lib = os.path.join(d, "lib")
    os.mkdir(lib)
    script = ('mount -t tmpfs gate-ns "$1/lib" && cp "$2" "$1/lib/" && '
              'export LD_LIBRARY_PATH="$1/lib" && exec sh -c \'exec "$0/early"\' "$1"')
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", d,
           os.path.join(TESTS_BIN, "libearly.so")]
    out, pids, err = run_traced("gate-ns", [cmd])
    check_early(out, pids, err)


@test
def hostile_gate_stopped_corobpf_holds_execs_a_bounded_time():
    """corobpf -a stopped with SIGSTOP (which it cannot refuse): an exec, of a program never
    seen and of one examined, waits about the gate's timeout at most, not until corobpf
    continues; once continued, corobpf ends normally and says how many execs it let go."""
    mine = tempfile.mkdtemp(prefix="gate-stop-", dir=WORK)
    tr, ef, err, _ = start_all(NO_COMM + ["-o", work("gate-stop.jsonl")], "gate-stop")
    took = []
    try:
        exec_seconds(["/bin/true"])
        # Whatever happens to the test, corobpf is continued within 30 s: while it is stopped
        # (without the watchdog), every exec on the machine may wait.
        cont = threading.Timer(30, os.kill, (tr.pid, signal.SIGCONT))
        cont.start()
        os.kill(tr.pid, signal.SIGSTOP)
        try:
            for i in range(2):
                p = os.path.join(mine, "true-stop-%d" % i)
                shutil.copy2("/bin/true", p)
                for cmd in ([p], ["/bin/true"]):
                    try:
                        took.append(exec_seconds(cmd, timeout=10))
                    except subprocess.TimeoutExpired:
                        took.append(10.0)
        finally:
            os.kill(tr.pid, signal.SIGCONT)
            cont.cancel()
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait()
        ef.close()
    stderr = open(err).read()
    check(max(took) < 3.0, "execs waited up to %.1f s while corobpf was stopped (%s):\n%s"
          % (max(took), ", ".join("%.2f" % t for t in took), stderr[-3000:]))
    eq(tr.returncode, 0, "corobpf's exit status")
    check(re.search(r"exec gate: \d+ execs? let go by its watchdog", stderr),
          "the execs let go while corobpf was stopped are not said:\n" + stderr[-3000:])
