"""Runtimes nobody instrumented, traced with no flags: Ruby fibers (ruby3.1), QEMU coroutines
(qemu-utils), Python greenlets (python3-greenlet) and PHP fibers (php8.2-cli, through the
Boost.Context assembly built into php), as Debian ships them (tools/deps.sh).

Each program counts its own switches and coroutines; a second oracle counts them in the
same run: bpftrace on the same function where it can probe it, and for Ruby, whose
coroutine_transfer bpftrace cannot probe (an untyped symbol), Ruby's own TracePoint
(:fiber_switch). Outside CI a missing
runtime skips its test, saying why; in CI it fails."""
import atexit

from harness import *  # noqa: F401,F403

PROGS = os.path.join(ROOT, "tests", "integration", "progs")
RUBY = "/usr/bin/ruby3.1"
LIBRUBY = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"
QEMU_IMG = "/usr/bin/qemu-img"
QEMU_IO = "/usr/bin/qemu-io"
# Debian's greenlet is for Debian's python (python3 on PATH may be another one).
PYTHON = "/usr/bin/python3"
GREENLET = "/usr/lib/python3/dist-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so"
G_SWITCH = "_ZN8greenlet8Greenlet13g_switchstackEv"
G_START = "_ZN8greenlet12UserGreenlet13g_initialstubEPv"
PHP = "/usr/bin/php8.2"


def need(*paths):
    """True if every path exists; else skips (outside CI) or fails (in CI), saying which."""
    missing = [p for p in paths if not os.path.exists(p)]
    if not missing:
        return True
    why = "%s missing (install with tools/deps.sh)" % ", ".join(missing)
    if CI:
        raise Failure(why)
    print("     skipped: %s" % why, flush=True)
    return False


def main_id(tid):
    return "0x%x" % ((1 << 63) | tid)


def fields(stdout, key):
    """The line of a program's output that starts with key, as {NAME: int}."""
    for line in stdout.splitlines():
        f = line.split()
        if f and f[0] == key:
            return {f[i]: int(f[i + 1]) for i in range(0, len(f) - 1, 2)}
    raise Failure("no %s line in the program's output: %r" % (key, stdout))


def switch_families(trace, pid):
    return {r["family"] for r in trace.records if r["type"] == "switch_path" and r["pid"] == pid}


def real_switches(trace, pid, launched=True):
    """Switch events of pid, less a launched thread's start in its main context (from 0x0).
    Attached, a thread's first switch leaves a context not known: from 0x0 too."""
    return [e for e in trace.by_ev("switch") if e["pid"] == pid and e["to"] != "0x0" and
            (e["from"] != "0x0" or not launched)]


_oracles = []


@atexit.register
def _stop_oracles():
    """An oracle whose test failed before counts() must not outlive the suite: its uprobes
    would tax every later call of those functions on the machine."""
    for p in _oracles:
        if p.poll() is None:
            p.kill()
            p.wait()


class Bpftrace:
    """A second oracle: bpftrace counts, per pid, the calls of the same functions."""

    def __init__(self, name, probes, unsafe=False):
        """unsafe: probes at addresses of a stripped object (bpftrace cannot check them)."""
        prog = " ".join("uprobe:%s:%s %s { @%s[pid] = count(); }" % (path, fn, pred, key)
                        for key, path, fn, pred in probes)
        self.out = work(name + ".bpftrace")
        self.f = open(self.out, "w")
        self.p = subprocess.Popen(["bpftrace"] + (["--unsafe"] if unsafe else []) + ["-e", prog],
                                  stdout=self.f,
                                  stderr=subprocess.STDOUT, text=True)
        _oracles.append(self.p)
        wait_for(self.out, "Attaching", timeout=60)
        time.sleep(0.5)

    def counts(self, pid):
        # A busy machine can keep bpftrace attaching past the first SIGINT: ask again.
        for i in range(4):
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=30)
                break
            except subprocess.TimeoutExpired:
                if i == 3:
                    raise
        self.f.close()
        got = {}
        with open(self.out) as f:
            for line in f:
                m = re.match(r"@(\w+)\[(\d+)\]: (\d+)", line.strip())
                if m and int(m.group(2)) == pid:
                    got[m.group(1)] = int(m.group(3))
        return got


def attach_to(target, name, extra=()):
    """corobpf -p for a program waiting on stdin: attached, then the program is released."""
    out = work(name + ".jsonl")
    tr, ef, err = start_tracer(["-p", str(target.pid), "-o", out] + list(extra), name)
    try:
        wait_for(err, "Ctrl-C to stop", timeout=60)
        target.stdin.write("go\n")
        target.stdin.flush()
        stdout = target.stdout.read()
        target.wait(timeout=120)
        tr.wait(timeout=120)
    finally:
        ef.close()
        if tr.poll() is None:
            tr.kill()
    with open(err) as f:
        errtext = f.read()
    eq(tr.returncode, 0, "corobpf exit code (%s)" % errtext)
    eq(target.returncode, 0, "the traced program's exit code")
    return Trace(out), stdout, errtext


# ---- Ruby ----

def check_ruby(tr, pid, counts, launched):
    n, resumes = counts["FIBERS"], counts["RESUMES"]
    eq(switch_families(tr, pid) >= {"ruby"}, True, "families used: %s" % switch_families(tr, pid))
    sw = real_switches(tr, pid, launched)
    eq(len(sw), counts["SWITCHES"], "switches (the program's count)")
    eq(len(sw), counts["TRACEPOINT"], "switches (Ruby's own TracePoint :fiber_switch count)")
    cos = [c for c in tr.coroutines if c["pid"] == pid]
    eq(len(cos), n + 1, "coroutines: the fibers and the main fiber")
    ins = sorted(c["switch_ins"] for c in cos)
    eq(ins[:-1], [resumes // n] * n, "each fiber's resumes")
    eq(ins[-1], resumes + (1 if launched else 0), "the main fiber's switch-ins")
    eq([c["name"] for c in cos if c["switch_ins"] == ins[-1]], ["main"],
       "the main fiber's name (the thread's own stack)")
    if launched:
        tid = [c for c in cos if c["switch_ins"] == ins[-1]][0]
        eq(tid["id"], main_id(pid), "the main fiber is the thread's main context")


@test
def runtime_ruby_fibers_launched():
    """sudo corobpf -- ruby app.rb: every fiber, every switch, no flags."""
    if not need(RUBY, LIBRUBY):
        return
    plain = run([RUBY, os.path.join(PROGS, "fibers.rb"), "300", "20"])
    tr, _, p, out, raw = trace_launch("ruby", [RUBY, os.path.join(PROGS, "fibers.rb"), "300", "20"])
    check_clean(tr)
    eq(p.stdout, plain.stdout, "the program's output, traced and not")
    pid = tr.processes[0]["pid"]
    check_ruby(tr, pid, fields(p.stdout, "FIBERS"), True)
    eq(switch_families(tr, pid), {"ruby", "ucontext"}, "families used")
    check("coroutine_transfer+0x0 (emulated" in p.stderr, p.stderr)
    check_replay(out, raw)


@test
def runtime_ruby_fibers_attached():
    """corobpf -p on a waiting Ruby program: the main fiber is one coroutine, switches exact."""
    if not need(RUBY, LIBRUBY):
        return
    target = subprocess.Popen([RUBY, os.path.join(PROGS, "fibers.rb"), "--wait", "200", "10"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = target.stdout.readline().split()
    eq(line[:1], ["READY"], "the program's first line")
    tr, stdout, _ = attach_to(target, "ruby_attached")
    check_clean(tr)
    check_ruby(tr, target.pid, fields(stdout, "FIBERS"), False)


# ---- QEMU ----

def check_qemu(tr, pid, oracle, launched=True):
    eq(switch_families(tr, pid), {"qemu"}, "families used (ucontext is wrong in QEMU)")
    sw = real_switches(tr, pid, launched)
    eq(len(sw), oracle.get("sw", 0), "switches (bpftrace's count of qemu_coroutine_switch)")
    check(len(sw) > 1000, "too few switches to mean anything: %d" % len(sw))
    exits = [e for e in tr.by_ev("exit") if e["pid"] == pid]
    eq(len(exits), oracle.get("term", 0), "exits (bpftrace's count of COROUTINE_TERMINATE)")
    done = [e for e in sw if e["reason"] == "done"]
    eq(len(done), len(exits), "a 'done' switch after each exit")
    ended = [c for c in tr.coroutines if c["pid"] == pid and c["end"] == "exit"]
    eq(len(ended), len(exits), "coroutines ended by their return")
    creates = [e for e in tr.by_ev("create") if e["pid"] == pid]
    eq(len(creates), oracle.get("made", 0), "creates (bpftrace's count of qemu_coroutine_create)")
    # Launched, the main context only is not seen made; attached, the main context (QEMU's
    # leader: the thread's own stack) is named main too, whatever else was made before.
    unmade = [c for c in tr.coroutines if c["pid"] == pid and c["created"] is None]
    if launched:
        eq(len(unmade), 1, "coroutines not seen made: only the main context")
    eq(len([c for c in unmade if c["name"] == "main"]), 1, "the main context named main: %s"
       % [(c["id"], c["name"], c["switch_ins"]) for c in unmade][:5])
    made = [c for c in tr.coroutines if c["pid"] == pid and c["created"] is not None]
    if not launched:
        # Named after their entry function: a symbol, or where it is in the stripped binary
        # (Debian's QEMU has no symbols for its static functions), also those made as it
        # quits, read after it is gone (runtime_qemu_short_runs_name_entries checks the
        # addresses).
        pat = r"^([A-Za-z_]\w*(\+0x[0-9a-f]+)?|qemu-io\+0x[0-9a-f]+)$"
        eq(sorted({c["name"] for c in made if not re.match(pat, c["name"] or "")}), [],
           "names of made coroutines not after their entry function")
        check(len(made) >= 400, "too few coroutines made to mean anything: %d" % len(made))


def qemu_image(name, fmt):
    img = work(name + "." + fmt)
    p = run([QEMU_IMG, "create", "-q", "-f", fmt, img, "16M"])
    eq(p.returncode, 0, "qemu-img create (%s)" % p.stderr.strip())
    return img


def qemu_oracle(name):
    exe = QEMU_IMG if "io" not in name else QEMU_IO
    return Bpftrace(name, [("sw", exe, "qemu_coroutine_switch", ""),
                           ("term", exe, "qemu_coroutine_switch", "/arg2 == 2/"),
                           ("made", exe, "qemu_coroutine_create", "")])


@test
def runtime_qemu_img_bench_launched():
    """corobpf -- qemu-img bench: QEMU's own switches (not ucontext's), exact, with creates
    and exits."""
    if not need(QEMU_IMG):
        return
    for fmt in ("qcow2", "raw"):
        img = qemu_image("bench", fmt)
        cmd = [QEMU_IMG, "bench", "-c", "3000", "-d", "8", "-f", fmt, img]
        plain = run(cmd)
        oracle = qemu_oracle("qemu_bench_" + fmt)
        tr, _, p, out, raw = trace_launch("qemu_bench_" + fmt, cmd)
        pid = tr.processes[0]["pid"]
        got = oracle.counts(pid)
        check_clean(tr)
        eq(p.stdout.splitlines()[0], plain.stdout.splitlines()[0], "qemu-img's output")
        check_qemu(tr, pid, got)
        check("qemu_coroutine_switch+0x" in p.stderr, p.stderr)
        check_replay(out, raw)


@test
def runtime_qemu_io_attached():
    """corobpf -p on qemu-io reading commands: switches and exits exact, no ucontext view."""
    if not need(QEMU_IO, QEMU_IMG):
        return
    img = qemu_image("io", "qcow2")
    target = subprocess.Popen([QEMU_IO, "-f", "qcow2", img], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    # The image opened (in coroutines) before either tracer looks: both see the same calls.
    time.sleep(1)
    oracle = qemu_oracle("qemu_io")
    out = work("qemu_io.jsonl")
    tr, ef, err = start_tracer(["-p", str(target.pid), "-o", out], "qemu_io")
    try:
        wait_for(err, "Ctrl-C to stop", timeout=60)
        cmds = "".join("aio_write -P 0x%02x %d 4k\n" % (i % 256, i * 4096) for i in range(200))
        cmds += "aio_flush\n" + "".join("read -P 0x%02x %d 4k\n" % (i % 256, i * 4096)
                                        for i in range(200))
        target.stdin.write(cmds)
        target.stdin.flush()
        # Alive while corobpf reads its records: names come from its mappings.
        time.sleep(1.5)
        stdout, _ = target.communicate("quit\n", timeout=120)
        tr.wait(timeout=120)
    finally:
        ef.close()
        if tr.poll() is None:
            tr.kill()
    eq(tr.returncode, 0, "corobpf exit code")
    eq(target.returncode, 0, "qemu-io's exit code")
    check("Pattern verification failed" not in stdout, stdout[-500:])
    got = oracle.counts(target.pid)
    tr = Trace(out)
    check_clean(tr)
    check_qemu(tr, target.pid, got, False)


class EntryOracle:
    """bpftrace, in the same run: every qemu_coroutine_create(entry, opaque) of exe, as
    (pid, entry) -> count; the entry as the process had it (its load bias in)."""

    def __init__(self, name, exe):
        self.out = work(name + ".entries")
        self.f = open(self.out, "w")
        self.p = subprocess.Popen(["bpftrace", "-e", "uprobe:%s:qemu_coroutine_create "
                                   "{ @e[pid, arg0] = count(); }" % exe],
                                  stdout=self.f, stderr=subprocess.STDOUT, text=True)
        _oracles.append(self.p)
        wait_for(self.out, "Attaching", timeout=60)
        time.sleep(0.5)

    def entries(self, pid):
        # A busy machine can keep bpftrace attaching past the first SIGINT: ask again.
        for i in range(4):
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=30)
                break
            except subprocess.TimeoutExpired:
                if i == 3:
                    raise
        self.f.close()
        got = {}
        with open(self.out) as f:
            for line in f:
                m = re.match(r"@e\[(\d+), (\d+)\]: (\d+)", line.strip())
                if m and int(m.group(1)) == pid:
                    got[int(m.group(2))] = int(m.group(3))
        return got


def dynamic_symbols(path):
    """The functions path exports, by name: their addresses in the file (nm -D)."""
    p = run(["nm", "-D", "--defined-only", path])
    eq(p.returncode, 0, "nm -D %s (%s)" % (path, p.stderr.strip()))
    syms = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "Tt":
            syms[f[2]] = int(f[0], 16)
    return syms


@test
def runtime_qemu_short_runs_name_entries():
    """Short QEMU runs (qemu-img convert, info and check, qemu-io -c), launched, each gone
    before corobpf reads its records: every coroutine named after its entry function as
    documented, the symbol where the binary exports one, else object+offset
    (`qemu-img+0x3be50`), never this run's absolute address. The names against bpftrace's
    entries of the same run (qemu_coroutine_create's first argument), looked up
    independently: nm -D for a symbol, and for the rest one shift, the load bias (a whole
    number of pages), from the binary's addresses to the process's."""
    if not need(QEMU_IMG, QEMU_IO):
        return
    raw = qemu_image("short", "raw")
    qcow = qemu_image("short2", "qcow2")
    runs = [("convert", QEMU_IMG, [QEMU_IMG, "convert", "-O", "qcow2", raw,
                                   work("short-out.qcow2")]),
            ("info", QEMU_IMG, [QEMU_IMG, "info", qcow]),
            ("check", QEMU_IMG, [QEMU_IMG, "check", qcow]),
            ("io", QEMU_IO, [QEMU_IO, "-f", "qcow2", "-c", "read 0 4k", "-c", "write 0 4k",
                             qcow])]
    for name, exe, cmd in runs:
        syms = dynamic_symbols(exe)
        base = os.path.basename(exe)
        oracle = EntryOracle("qemu_short_" + name, exe)
        tr, _, p, out, _ = trace_launch("qemu_short_" + name, cmd)
        pid = tr.processes[0]["pid"]
        want = oracle.entries(pid)
        check_clean(tr)
        made = [c for c in tr.coroutines if c["pid"] == pid and c["created"] is not None]
        eq(len(made), sum(want.values()), "%s: coroutines made (bpftrace's count of "
           "qemu_coroutine_create)" % name)
        vaddrs, bad = [], []
        for c in made:
            n = c["name"]
            m = re.match(r"^%s\+0x([0-9a-f]+)$" % re.escape(base), n)
            if m:
                vaddrs.append(int(m.group(1), 16))
            elif n in syms:
                vaddrs.append(syms[n])
            else:
                bad.append(n)
        eq(sorted(set(bad)), [], "%s: names neither an exported function of %s nor %s+0xOFF"
           % (name, exe, base))
        got = sorted(vaddrs)
        have = sorted(a for a, k in want.items() for _ in range(k))
        shift = {h - g for g, h in zip(got, have)}
        check(len(shift) == 1 and list(shift)[0] % 4096 == 0,
              "%s: the names' addresses %s and the entries bpftrace saw %s are not one load "
              "bias apart (%s)" % (name, [hex(a) for a in sorted(set(got))],
                                   [hex(a) for a in sorted(set(have))],
                                   [hex(x) for x in sorted(shift)][:5]))


# ---- greenlet ----

def check_greenlets(tr, pid, counts, oracle, launched):
    n = counts["GREENLETS"]
    eq(switch_families(tr, pid) >= {"greenlet"}, True, "families: %s" % switch_families(tr, pid))
    sw = real_switches(tr, pid, launched)
    eq(len(sw), counts["SWITCHES"], "switches (the program's count)")
    eq(len(sw), oracle.get("sw", 0), "switches (bpftrace's count of g_switchstack)")
    cos = [c for c in tr.coroutines if c["pid"] == pid]
    eq(len(cos), n + 1, "coroutines: the greenlets and the main greenlet, once")
    made = [c for c in cos if c["created"] is not None]
    eq(len(made), n, "greenlets seen made (g_initialstub)")
    eq(oracle.get("made", 0), n, "bpftrace's count of g_initialstub")
    eq(len([c for c in made if c["end"] == "exit"]), counts["DEAD"], "greenlets seen ending")
    mains = [c for c in cos if c["created"] is None]
    eq(len(mains), 1, "one main greenlet")
    eq(mains[0]["name"], "main", "the main greenlet's name")
    if launched:
        eq(mains[0]["id"], main_id(pid), "the main greenlet is the thread's main context")


def greenlet_oracle(name):
    return Bpftrace(name, [("sw", GREENLET, G_SWITCH, ""), ("made", GREENLET, G_START, "")])


@test
def runtime_greenlet_launched():
    """corobpf -- python3 app.py: greenlet is loaded with dlopen, and still every switch is seen."""
    if not need(PYTHON, GREENLET):
        return
    cmd = [PYTHON, os.path.join(PROGS, "greenlets.py"), "300", "10"]
    plain = run(cmd)
    oracle = greenlet_oracle("greenlet")
    tr, _, p, out, raw = trace_launch("greenlet", cmd)
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(tr)
    eq(p.stdout, plain.stdout, "the program's output, traced and not")
    check_greenlets(tr, pid, fields(p.stdout, "GREENLETS"), got, True)
    check_replay(out, raw)


@test
def runtime_greenlet_attached():
    """corobpf -p on a waiting Python program: greenlets, the main greenlet once."""
    if not need(PYTHON, GREENLET):
        return
    oracle = greenlet_oracle("greenlet_attached")
    target = subprocess.Popen([PYTHON, os.path.join(PROGS, "greenlets.py"), "--wait", "200", "10"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    eq(target.stdout.readline().split()[:1], ["READY"], "the program's first line")
    tr, stdout, _ = attach_to(target, "greenlet_attached")
    got = oracle.counts(target.pid)
    check_clean(tr)
    check_greenlets(tr, target.pid, fields(stdout, "GREENLETS"), got, False)


# ---- the switch-function path where users hit it ----

@test
def runtime_switch_spec_errors_and_no_switch_notice():
    """uprobe: specs: NOTYPE symbols, any offset, 0xADDR; a spec that cannot be placed is an
    error naming it; auto mode that saw no switch says so."""
    if not need(RUBY, LIBRUBY):
        return
    prog = [RUBY, os.path.join(PROGS, "fibers.rb"), "20", "3"]
    spec = "uprobe:%s:coroutine_transfer:from=arg0,to=arg1" % LIBRUBY
    tr, _, p, _, _ = trace_launch("ruby_spec", prog, extra=["--switch", spec])
    check_clean(tr)
    eq(len(real_switches(tr, tr.processes[0]["pid"])), fields(p.stdout, "FIBERS")["SWITCHES"],
       "switches through the NOTYPE symbol")
    # The same place by address (the symbol's value).
    addr = None
    for line in run(["readelf", "-Ws", LIBRUBY]).stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] == "coroutine_transfer":
            addr = int(f[1], 16)
    check(addr, "coroutine_transfer not in readelf's output")
    tr, _, p, _, _ = trace_launch("ruby_addr", prog, extra=[
        "--switch", "uprobe:%s:0x%x:from=arg0,to=arg1" % (LIBRUBY, addr)])
    eq(len(real_switches(tr, tr.processes[0]["pid"])), fields(p.stdout, "FIBERS")["SWITCHES"],
       "switches through 0xADDR")
    # Offsets far inside a large function (past 4 KiB): on an instruction, inside one, past it.
    big = None
    for line in run(["readelf", "-Ws", LIBRUBY]).stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND" and int(f[2], 0) > 8192:
            big = (f[7], int(f[1], 16), int(f[2], 0))
            break
    check(big, "no function over 8 KiB to try offsets in")
    name, start, size = big
    dis = run(["objdump", "-d", "--start-address=0x%x" % start,
               "--stop-address=0x%x" % (start + 4096 + 64), LIBRUBY]).stdout
    insn = None
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )+)", line)
        if m and len(m.group(2).split()) > 1 and int(m.group(1), 16) > start + 4096:
            insn = int(m.group(1), 16) - start
            break
    check(insn, "no instruction found past 4 KiB in %s" % name)
    at = "uprobe:%s:%s+0x%x:from=arg0,to=arg1" % (LIBRUBY, name, insn)
    q = corobpf(["--switch", at, "--"] + prog)
    eq(q.returncode, 0, "exit code with a probe at %s+0x%x (%s)" % (name, insn, q.stderr.strip()))
    check("%s+0x%x (" % (name, insn) in q.stderr, q.stderr)
    q = corobpf(["--switch", at.replace("+0x%x:" % insn, "+0x%x:" % (insn + 1)), "--"] + prog)
    eq(q.returncode, 6, "exit code inside an instruction (%s)" % q.stderr.strip())
    check("is not at an instruction boundary (it is inside the instruction at %s+0x%x)"
          % (name, insn) in q.stderr, q.stderr)
    check(name in q.stderr and "no known switch functions" not in q.stderr, q.stderr)
    q = corobpf(["--switch", at.replace("+0x%x:" % insn, "+0x%x:" % (size + 16)), "--"] + prog)
    eq(q.returncode, 6, "exit code past the end (%s)" % q.stderr.strip())
    check("past the end of %s" % name in q.stderr, q.stderr)
    # A spec naming a symbol that is not there: an error naming the spec.
    q = corobpf(["--switch", "uprobe:%s:no_such_function:from=arg0,to=arg1" % LIBRUBY, "--",
                 "/bin/true"])
    eq(q.returncode, 6, "exit code (%s)" % q.stderr.strip())
    check("uprobe:%s:no_such_function" % LIBRUBY in q.stderr and "no function named" in q.stderr,
          q.stderr)
    # Auto mode, no switch at all: said at the end.
    q = corobpf(["--", "/bin/true"])
    eq(q.returncode, 0, "exit code (%s)" % q.stderr.strip())
    check("no context switch" in q.stderr and "--switch" in q.stderr, q.stderr)


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, Z...), or None once it is reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def wait_state(pid, want, timeout):
    end = time.time() + timeout
    while time.time() < end:
        s = proc_state(pid)
        if want(s):
            return s
        time.sleep(0.02)
    return proc_state(pid)


@test
def runtime_dlopen_hold_survives_corobpf_killed():
    """corobpf SIGKILLed while its launched command is held (stopped) at greenlet's dlopen: the
    kernel continues the command (its parent-death signal), which runs to its end."""
    if not need(PYTHON, GREENLET):
        return
    prog = os.path.join(PROGS, "greenlets.py")
    # greenlet is imported only once a line is read: corobpf is attached and running by then.
    code = ("import sys; sys.stdin.readline(); sys.argv = [%r, '50', '5']; "
            "exec(compile(open(%r).read(), %r, 'exec'))" % (prog, prog, prog))
    tr = subprocess.Popen([COROBPF, "-q", "-o", work("hold_killed.jsonl"), "--force", "--",
                           PYTHON, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    child = None
    try:
        end = time.time() + 30
        while time.time() < end and child is None:
            try:
                with open("/proc/%d/task/%d/children" % (tr.pid, tr.pid)) as f:
                    kids = [int(x) for x in f.read().split()]
                if kids and os.readlink("/proc/%d/exe" % kids[0]).startswith("/usr/bin/python"):
                    child = kids[0]
            except OSError:
                pass
            time.sleep(0.02)
        check(child, "the launched python never ran under corobpf")
        time.sleep(0.5)
        # corobpf frozen: the hold at greenlet's dlopen is not released.
        tr.send_signal(signal.SIGSTOP)
        tr.stdin.write("\n")
        tr.stdin.flush()
        eq(wait_state(child, lambda s: s == "T", 20), "T", "the command's state, held at dlopen")
        tr.kill()
        tr.wait(timeout=30)
        s = wait_state(child, lambda s: s != "T", 10)
        check(s != "T", "the command was left stopped (state T) after corobpf was killed")
        out, _ = tr.communicate(timeout=60)  # EOF: the command has exited too
        check("GREENLETS 50 SWITCHES 600 DEAD 50" in out, "the command's output: %r" % out)
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait()
        if child and proc_state(child) not in (None, "Z"):
            os.kill(child, signal.SIGCONT)
            os.kill(child, signal.SIGKILL)


# ---- PHP ----

def check_php(tr, pid, counts, oracle, launched):
    n, resumes = counts["FIBERS"], counts["RESUMES"]
    eq(switch_families(tr, pid) >= {"boost-context"}, True,
       "families used: %s" % switch_families(tr, pid))
    paths = {r["object"] for r in tr.records if r["type"] == "switch_path" and
             r["pid"] == pid and r["family"] == "boost-context"}
    eq(paths, {os.path.realpath(PHP)}, "boost-context found in the php binary itself")
    sw = real_switches(tr, pid, launched)
    eq(len(sw), counts["SWITCHES"], "switches (the program's count)")
    eq(len(sw), oracle.get("sw", 0), "switches (bpftrace's count of jump_fcontext)")
    cos = [c for c in tr.coroutines if c["pid"] == pid]
    eq(len(cos), n + 1, "coroutines: the fibers and the main context")
    made = [c for c in cos if c["created"] is not None]
    eq(len(made), oracle.get("made", 0), "fibers seen made (bpftrace's count of make_fcontext)")
    eq(len(made), n, "fibers made")
    ins = sorted(c["switch_ins"] for c in cos)
    eq(ins[:-1], [resumes // n] * n, "each fiber's resumes")
    eq(ins[-1], resumes + (1 if launched else 0), "the main context's switch-ins")
    eq([c["name"] for c in cos if c["switch_ins"] == ins[-1]], ["main"],
       "the main context's name (the thread's own stack)")


def php_oracle(name):
    real = os.path.realpath(PHP)
    return Bpftrace(name, [("sw", real, "jump_fcontext", ""), ("made", real, "make_fcontext", "")])


@test
def runtime_php_fibers_launched():
    """sudo corobpf -- php app.php: PHP 8.2's fibers through the Boost.Context code inside
    php, found with no flags; every fiber, every switch."""
    if not need(PHP):
        return
    prog = os.path.join(PROGS, "fibers.php")
    plain = run([PHP, prog, "200", "10"])
    oracle = php_oracle("php")
    tr, _, p, out, raw = trace_launch("php", [PHP, prog, "200", "10"])
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(tr)
    eq(p.stdout, plain.stdout, "the program's output, traced and not")
    check_php(tr, pid, fields(p.stdout, "FIBERS"), got, True)
    check("boost-context: %s" % os.path.realpath(PHP) in p.stderr, p.stderr)
    check_replay(out, raw)


@test
def runtime_php_fibers_attached():
    """corobpf -p on a waiting PHP program: its fibers, switches exact."""
    if not need(PHP):
        return
    oracle = php_oracle("php_attached")
    target = subprocess.Popen([PHP, os.path.join(PROGS, "fibers.php"), "--wait", "150", "8"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    eq(target.stdout.readline().split()[:1], ["READY"], "the program's first line")
    tr, stdout, _ = attach_to(target, "php_attached")
    got = oracle.counts(target.pid)
    check_clean(tr)
    check_php(tr, target.pid, fields(stdout, "FIBERS"), got, False)
