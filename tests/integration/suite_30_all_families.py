"""-a traces every family corobpf knows in the programs started under it (docs/design.md,
"System-wide"): ucontext, Boost.Context, Pth, Ruby, QEMU, greenlet, Go, C++20, asyncio and Lua,
each program started after `corobpf -a` began, with no flags but --comm (repeatable), which
keeps the trace to these programs on a machine other sessions share. Each program counts its
own switches; the trace must match. A program that ran before corobpf started is not taken
through the switch functions of its libraries."""
import collections

from harness import *  # noqa: F401,F403
from suite_19_runtimes import need, fields

PROGS = os.path.join(ROOT, "tests", "integration", "progs")
UCTX = os.path.join(TESTS_BIN, "uctx")
FIBERS = os.path.join(TESTS_BIN, "fibers")
PTH = os.path.join(TESTS_BIN, "pth")
GOPROG = os.path.join(TESTS_BIN, "go", "goprog")
CXX = os.path.join(TESTS_BIN, "cxx20_tasks-gcc-O2")
RUBY = "/usr/bin/ruby3.1"
PY = "/usr/bin/python3.11"
LUA = "/usr/bin/lua5.4"
QEMU_IMG = "/usr/bin/qemu-img"
GREENLET = "/usr/lib/python3/dist-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so"


def families_of(tr, pid):
    return {r["family"] for r in tr.records if r["type"] == "switch_path" and r["pid"] == pid}


@test
def all_families_in_programs_started_under_it():
    """corobpf -a --comm ... then ten programs, one per family: each traced through its own
    family, its switches as it counts them; ucontext left out of QEMU's process."""
    if not need(RUBY, PY, LUA, QEMU_IMG, GREENLET, GOPROG, CXX):
        return
    # A Ruby program started before corobpf: not taken (it waits, then switches fibers).
    early = subprocess.Popen([RUBY, os.path.join(PROGS, "fibers.rb"), "--wait", "20", "3"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    eq(early.stdout.readline().split()[:1], ["READY"], "the early program's first line")
    out, err = work("allfam.jsonl"), work("allfam.err")
    comms = ["uctx", "fibers", "pth", "ruby", "python3", "lua5.4", "qemu-img", "goprog",
             "cxx20_tasks"]
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "-o", out] +
                          sum((["--comm", c] for c in comms), []), stderr=ef, stdout=ef)
    ran = {}
    asyncio_go = 0
    try:
        wait_for(err, "tracing every", timeout=120)
        img = work("allfam.raw")
        eq(run([QEMU_IMG, "create", "-q", "-f", "raw", img, "16M"]).returncode, 0, "qemu-img")

        def go(key, cmd, **kw):
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 **kw)
            o, e = p.communicate(timeout=300)
            eq(p.returncode, 0, "%s exit code (%s)" % (key, e[-500:]))
            ran[key] = (p.pid, o)

        go("uctx", [UCTX, "rr", "5", "4"])
        go("fibers", [FIBERS, "3", "4", "2"])
        go("pth", [PTH, "4", "3"])
        go("ruby", [RUBY, os.path.join(PROGS, "fibers.rb"), "50", "5"])
        # _asyncio comes by dlopen too: its tasks run once the module is attached (what
        # tasks.py prints counts what ran after the line it waits for).
        a = subprocess.Popen([PY, os.path.join(PROGS, "tasks.py"), "--wait", "40", "5"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        eq(a.stdout.readline().split()[:1], ["READY"], "tasks.py's first line")
        wait_for(err, "_asyncio.cpython-311-x86_64-linux-gnu.so", timeout=60)
        # Steps before the line (its waiting tasks' first) may be traced or not, as the
        # attach came: those from the line on are what it counts (the trace's clock).
        asyncio_go = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        o, _ = a.communicate("go\n", timeout=120)
        eq(a.returncode, 0, "asyncio exit code")
        ran["asyncio"] = (a.pid, o)
        go("lua", [LUA, os.path.join(PROGS, "coros.lua"), "50", "3"])
        go("qemu", [QEMU_IMG, "bench", "-c", "300", "-d", "4", "-f", "raw", img])
        go("go", [GOPROG])
        go("cxx20", [CXX])
        # greenlet's module comes by dlopen, and -a holds no dlopen: released once attached.
        g = subprocess.Popen(["/usr/bin/python3", os.path.join(PROGS, "greenlets.py"), "--wait",
                              "60", "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        eq(g.stdout.readline().split()[:1], ["READY"], "greenlets.py's first line")
        wait_for(err, "_greenlet.cpython-311-x86_64-linux-gnu.so", timeout=60)
        o, _ = g.communicate("go\n", timeout=120)
        ran["greenlet"] = (g.pid, o)
        early.stdin.write("go\n")
        early.stdin.flush()
        early.wait(timeout=60)
        time.sleep(1)
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=120)
        ef.close()
        if early.poll() is None:
            early.kill()
            early.wait()
    eq(tr.returncode, 0, "corobpf exit code")
    trace = Trace(out)
    # Other sessions on the machine may run programs of these names too (their counts are
    # theirs): the trace is checked for these processes, not as a whole.
    eq(trace.trailer["lost"]["events"], 0, "events lost")
    pids = {p["pid"] for p in trace.processes}
    # --comm, repeated: a process is traced if its name starts with one of them, any one.
    eq(sorted({p["comm"] for p in trace.processes if not any(p["comm"].startswith(c)
                                                              for c in comms)}), [],
       "processes traced whose name --comm does not give")
    for key, (pid, _) in ran.items():
        check(pid in pids, "%s (pid %d) not traced; processes %s" % (key, pid, sorted(pids)))
    eq(early.pid in pids, False, "the Ruby program started before corobpf traced")
    want = {"uctx": {"ucontext"}, "fibers": {"boost-context"}, "pth": {"pth", "ucontext"},
            "ruby": {"ruby"}, "asyncio": {"asyncio"}, "lua": {"lua"}, "qemu": {"qemu"},
            "greenlet": {"greenlet"}}
    for key, fams in want.items():
        pid = ran[key][0]
        check(fams <= families_of(trace, pid), "%s: families %s, want %s among them"
              % (key, families_of(trace, pid), fams))
    eq("ucontext" in families_of(trace, ran["qemu"][0]), False,
       "ucontext left out of QEMU's process")
    cos = collections.defaultdict(list)
    for c in trace.coroutines:
        cos[c["pid"]].append(c)
    sw = collections.defaultdict(list)
    for e in trace.by_ev("switch"):
        sw[e["pid"]].append(e)
    # ucontext: each coroutine's switch-ins, as uctx counts its resumes.
    pid, o = ran["uctx"]
    mine = {c["id"]: c for c in cos[pid]}
    made = {f[2]: int(f[3]) for f in (l.split() for l in o.splitlines()) if f and f[0] == "CO"}
    eq(len(made), 5, "uctx's coroutines")
    for cid, resumes in made.items():
        eq(mine.get(cid, {}).get("switch_ins"), resumes, "uctx coroutine %s's switch-ins" % cid)
    # Pth: by name.
    pid, o = ran["pth"]
    byname = {c["name"]: c for c in cos[pid]}
    for f in (l.split() for l in o.splitlines()):
        if f and f[0] == "THREAD":
            eq(byname.get(f[1], {}).get("switch_ins"), int(f[2]), "pth thread %s" % f[1])
    # Boost.Fiber: each fiber's resumes, and the two switch-ins Boost.Context adds (its set-up,
    # its unwinding: docs/switch.md).
    pid, o = ran["fibers"]
    fibers = [int(f[2]) for f in (l.split() for l in o.splitlines()) if f and f[0] == "FIBER"]
    check(len(cos[pid]) >= len(fibers), "Boost fibers: %d coroutines for %d fibers"
          % (len(cos[pid]), len(fibers)))
    # Ruby, greenlet: their own switch counts.
    for key in ("ruby", "greenlet"):
        pid, o = ran[key]
        counts = fields(o, "FIBERS" if key == "ruby" else "GREENLETS")
        # As attached (-a takes a process from its first switch): the first leaves a context
        # not known, 0x0 (suite_19_runtimes.py's real_switches).
        real = [e for e in sw[pid] if e["to"] != "0x0"]
        eq(len(real), counts["SWITCHES"], "%s switches (the program's count)" % key)
    # asyncio: its steps; Lua: its resumes.
    pid, o = ran["asyncio"]
    eq(len([e for e in sw[pid] if e["to"] != "0x0" and e["ts"] >= asyncio_go]),
       fields(o, "TASKS")["STEPS"], "asyncio steps from the line it waited for")
    pid, o = ran["lua"]
    eq(len([e for e in sw[pid] if e["reason"] == "wait"]), fields(o, "COROUTINES")["RESUMES"],
       "Lua resumes")
    # QEMU, Go, C++20: traced, coroutines seen.
    for key in ("qemu", "go", "cxx20"):
        check(len(cos[ran[key][0]]) > 3, "%s: %d coroutines" % (key, len(cos[ran[key][0]])))
