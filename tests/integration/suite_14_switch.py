"""Unmodified schedulers: the switch-function path."""
import errno

from harness import *  # noqa: F401,F403


def main_id(tid):
    return "0x%x" % ((1 << 63) | tid)


def switch_paths(trace, pid):
    return {r["family"]: r for r in trace.records if r["type"] == "switch_path" and r["pid"] == pid}


@test
def switch_ucontext_round_robin():
    """Plain ucontext: exactly the program's coroutines, each switch-in, each exit."""
    tr, _, p, out, raw = trace_launch("uctx_rr", [os.path.join(TESTS_BIN, "uctx"), "rr", "5", "4"])
    check_clean(tr)
    pid = tr.processes[0]["pid"]
    cos = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            cos[f[2]] = int(f[3])
        elif f[0] == "MAIN":
            tid = int(f[1])
    eq(len(cos), 5, "coroutines the program made")
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), set(cos) | {main_id(tid)}, "coroutines traced (the program's, and main)")
    for cid, resumes in cos.items():
        c = got[cid]
        eq(c["switch_ins"], resumes, "switch-ins of %s" % cid)
        eq(c["end"], "exit", "%s ended by its return (uc_link)" % cid)
        eq(c["parent"], main_id(tid), "%s created by main" % cid)
        check(c["created"] is not None, "%s: makecontext not seen" % cid)
    m = got[main_id(tid)]
    eq(m["name"], "main", "main context named main, as every family's")
    eq(m["switch_ins"], 1 + 5 * 5, "main's switch-ins (its start, and every coroutine's return)")
    # Every switch out of a finished coroutine says so.
    done = [e for e in tr.by_ev("switch") if e["reason"] == "done"]
    eq(sorted(e["from"] for e in done), sorted(cos), "one 'done' switch per coroutine")
    sp = switch_paths(tr, pid)
    eq(set(sp), {"ucontext"}, "families used")
    check("swapcontext+0x" in sp["ucontext"]["sites"] and "emulated" in sp["ucontext"]["sites"],
          sp["ucontext"]["sites"])
    eq(sp["ucontext"]["single_stepped"], 0, "single-stepped switch sites")
    check("switch functions of unmodified libraries" in p.stderr, p.stderr)
    check_replay(out, raw)
    # Read back from JSONL: the same coroutines, not translated twice.
    back = work("uctx_rr.back.jsonl")
    q = corobpf(["report", "-q", out, "-o", back])
    eq(q.returncode, 0, "report of the JSONL (%s)" % q.stderr.strip())
    eq([(c["id"], c["switch_ins"], c["end"]) for c in Trace(back).coroutines],
       [(c["id"], c["switch_ins"], c["end"]) for c in tr.coroutines], "coroutines read back")


@test
def switch_ucontext_threads_and_setcontext():
    """Several threads, each with its main context; and coroutines left with setcontext."""
    tr, _, p, _, _ = trace_launch("uctx_thr", [os.path.join(TESTS_BIN, "uctx"), "threads", "3", "4", "2"])
    check_clean(tr)
    want, mains = [], set()
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            want.append((int(f[1]), f[2], int(f[3])))
        elif f[0] == "MAIN":
            mains.add(int(f[1]))
    eq(len(want), 12, "coroutines the program made")
    # Addresses come back from malloc across threads: match (thread, id) per incarnation.
    got = sorted((c["threads"][0], c["id"], c["switch_ins"]) for c in tr.coroutines
                 if not c["id"].startswith("0x8") and len(c["threads"]) == 1)
    eq(got, sorted(want), "(thread, coroutine, switch-ins)")
    eq({c["id"] for c in tr.coroutines if c["id"].startswith("0x8")}, {main_id(t) for t in mains},
       "one main context per worker thread")
    eq({c["name"] for c in tr.coroutines if c["id"].startswith("0x8")}, {"main"},
       "the main contexts' names")
    for c in tr.coroutines:
        if not c["id"].startswith("0x8"):
            eq(c["end"], "exit", "%s end" % c["id"])

    tr, _, p, _, _ = trace_launch("uctx_chain", [os.path.join(TESTS_BIN, "uctx"), "chain", "3", "2"])
    check_clean(tr)
    cos = {f[2]: int(f[3]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "CO"}
    got = {c["id"]: c for c in tr.coroutines}
    for cid, resumes in cos.items():
        eq(got[cid]["switch_ins"], resumes, "switch-ins of %s" % cid)
        # setcontext names no "from": the thread's current coroutine is.
        outs = [e for e in tr.by_ev("switch") if e["from"] == cid]
        eq(len(outs), resumes, "switches out of %s (the last by setcontext)" % cid)
        eq(got[cid]["end"], "process_exit", "%s never returned: no exit" % cid)


@test
def switch_boost_fiber():
    """Boost.Fiber through Boost.Context: every fiber the program made, every resume."""
    tr, _, p, out, raw = trace_launch("fibers", [os.path.join(TESTS_BIN, "fibers"), "4", "6", "20"])
    check_clean(tr)
    check("SUM 210" in p.stdout, "the program's own result changed:\n" + p.stdout)
    pid = tr.processes[0]["pid"]
    resumes = sorted(int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "FIBER")
    eq(len(resumes), 6, "fibers the program made")
    mains = [c for c in tr.coroutines if c["id"] == main_id(pid)]
    eq(len(mains), 1, "the main thread's context")
    eq(mains[0]["name"], "main", "the main thread's context's name")
    fibers = [c for c in tr.coroutines if c["id"] != main_id(pid)]
    # Boost.Fiber's dispatcher fiber (made when the first fiber is), and the program's six.
    eq(len(fibers), 1 + 6, "fibers traced (the dispatcher and the program's)")
    for c in fibers:
        check(c["created"] is not None, "%s: make_fcontext not seen" % c["id"])
    # Each fiber is entered once by Boost.Context when it is set up (and leaves at once),
    # once per resume the program counts, and once more when the fiber object is
    # destroyed (its stack is unwound). Which one is the dispatcher the program cannot
    # say: exactly one choice must leave the program's counts.
    fits = [d["id"] for d in fibers
            if sorted(c["switch_ins"] - 2 for c in fibers if c is not d) == resumes]
    check(len(fits) >= 1, "switch-ins %s do not match the program's resumes %s (+2 each)"
          % (sorted(c["switch_ins"] for c in fibers), resumes))
    sp = switch_paths(tr, pid)
    check("boost-context" in sp, "families: %s" % sorted(sp))
    # Their calls are probed instead of the functions (a call is emulated).
    eq(sp["boost-context"]["single_stepped"], 0, "single-stepped switch sites")
    callers = [r for r in tr.records if r["type"] == "switch_path" and "calls of jump_fcontext" in r["sites"]]
    check(len(callers) >= 2, "call sites in the program and in libboost_fiber: %s" % [r["object"] for r in callers])
    check("probed where they are called" in p.stderr, p.stderr)
    check_replay(out, raw)
    # A program that takes jump_fcontext's address may call it in ways no call site shows:
    # then the functions' entries are probed (single-stepped), with the same result.
    tr, _, p, _, _ = trace_launch("fibers_addr", [os.path.join(TESTS_BIN, "fibers-addr"), "2", "3", "5"])
    check_clean(tr)
    resumes = sorted(int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "FIBER")
    fibers = [c for c in tr.coroutines if c["id"] != main_id(tr.processes[0]["pid"])]
    check(any(sorted(c["switch_ins"] - 2 for c in fibers if c is not d) == resumes for d in fibers),
          "entry probes: switch-ins %s, resumes %s" % (sorted(c["switch_ins"] for c in fibers), resumes))
    lib = [r for r in tr.records if r["type"] == "switch_path" and "libboost_context" in r["object"]]
    eq([r["single_stepped"] for r in lib], [2], "jump_fcontext and ontop_fcontext probed at entry")
    check("single-steps" in p.stderr, "the summary does not warn of the cost:\n" + p.stderr)


@test
def switch_boost_fiber_attached_mid_life():
    """Fibers made before corobpf attached: each followed as one coroutine, never split."""
    target = subprocess.Popen([os.path.join(TESTS_BIN, "fibers"), "slow", "3", "4"],
                              stdout=subprocess.PIPE, text=True)
    try:
        eq(target.stdout.readline().strip(), "READY", "the program's first line")
        out = work("fibers_attached.jsonl")
        p = corobpf(["-d", "1", "-p", str(target.pid), "-o", out])
        eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
        tr = Trace(out)
        check_clean(tr)
        busy = [c for c in tr.coroutines if c["switch_ins"] >= 20]
        # Three sleepers and the dispatcher; the main fiber waits in join throughout.
        eq(len(tr.coroutines), 4, "coroutines: %s" % [(c["id"], c["switch_ins"]) for c in tr.coroutines])
        eq(len(busy), 4, "each seen resuming many times (not split into new ids)")
        for c in tr.coroutines:
            eq(c["created"], None, "%s was made before the trace" % c["id"])
    finally:
        target.wait(timeout=30)
    check(target.returncode == 0, "the traced program failed")


@test
def switch_pth_names_and_exits():
    """GNU Pth through ucontext: its threads, named as pth names them, each exit."""
    tr, _, p, out, raw = trace_launch("pth", [os.path.join(TESTS_BIN, "pth"), "4", "3"])
    check_clean(tr)
    want = {f[1]: int(f[2]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "THREAD"}
    eq(len(want), 4, "pth threads the program made")
    byname = {c["name"]: c for c in tr.coroutines}
    for name, resumes in want.items():
        check(name in byname, "no coroutine named %s: %s" % (name, sorted(byname)))
        eq(byname[name]["switch_ins"], resumes, "switch-ins of %s" % name)
        eq(byname[name]["end"], "exit", "%s ended by pth_exit" % name)
    check("**SCHEDULER**" in byname, "pth's scheduler thread is not named: %s" % sorted(byname))
    sp = switch_paths(tr, tr.processes[0]["pid"])
    eq(set(sp), {"ucontext", "pth"}, "families used")
    check_replay(out, raw)
    db = work("pth.db")
    q = corobpf(["report", "-q", raw, "-o", db])
    eq(q.returncode, 0, "report to SQLite (%s)" % q.stderr.strip())
    con = sqlite3.connect(db)
    eq(sorted(r[0] for r in con.execute("SELECT family FROM switch_paths")), ["pth", "ucontext"],
       "switch_paths rows")
    eq(sorted(r[0] for r in con.execute("SELECT name FROM coroutines WHERE end = 'exit'")),
       sorted(list(want) + ["victim"]), "exited coroutines in SQLite (the workers, and the cancelled one)")
    con.close()


@test
def switch_custom_function_and_path_choice():
    """--switch uprobe:PATH:SYMBOL; probes win unless --switch is given; --switch none."""
    exe = os.path.join(TESTS_BIN, "uctx")
    spec = "uprobe:%s:task_switch:from=arg0,to=arg1" % exe
    tr, _, p, _, _ = trace_launch("custom", [exe, "custom", "3", "2"], extra=["--switch", spec])
    check_clean(tr)
    tasks = {f[2]: int(f[3]) for f in (l.split() for l in p.stdout.splitlines()) if f[0] == "TASK"}
    tid = int([l.split()[1] for l in p.stdout.splitlines() if l.startswith("MAINTASK")][0])
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), set(tasks) | {main_id(tid)}, "coroutines (the tasks, and main)")
    for t, resumes in tasks.items():
        eq(got[t]["switch_ins"], resumes, "switch-ins of task %s" % t)
    eq(set(switch_paths(tr, tr.processes[0]["pid"])), {"custom"}, "only the function asked for")
    # A program with probes: the probes are used, no switch path...
    sc = [os.path.join(TESTS_BIN, "scenarios"), "yield"]
    tr, _, p, _, _ = trace_launch("probes_win", sc)
    eq(switch_paths(tr, tr.processes[0]["pid"]), {}, "switch path with probes present")
    # ...unless asked: then the probes are left alone, and said so.
    tr, _, p, _, _ = trace_launch("switch_forced", sc, extra=["--switch", "ucontext"])
    eq(set(switch_paths(tr, tr.processes[0]["pid"])), {"ucontext"}, "forced family")
    check("probe sites left alone" in p.stderr, p.stderr)
    eq(len(tr.by_ev("ready")), 0, "probe events with --switch")
    # Bad specs are usage errors that say what is wrong.
    for bad, what in (("uprobe:%s:task_switch:from=arg9,to=arg1" % exe, "arg9"),
                      ("uprobe:%s:task_switch:to=arg1" % exe, "from= and to="),
                      ("fcontext2", "unknown --switch family")):
        q = corobpf(["--switch", bad, "--", exe, "rr", "1", "1"])
        eq(q.returncode, 2, "exit code for --switch %s" % bad)
        check(what in q.stderr, q.stderr)
    q = corobpf(["--switch", "uprobe:%s:no_such_function:from=arg0,to=arg1" % exe, "--", exe, "rr", "1", "1"])
    eq(q.returncode, 6, "exit code for a function that is not there")
    check("no function named no_such_function" in q.stderr, q.stderr)
    q = corobpf(["--switch", "help"])
    eq(q.returncode, 0, "--switch help")
    check("boost-context" in q.stdout and "uprobe:PATH:SYMBOL" in q.stdout, q.stdout)


@test
def switch_custom_function_on_a_five_byte_nop_leaves_forked_children_unharmed():
    """A switch function that begins with a five-byte nop (uctx nop5fork: -mnop-mcount and
    hot-patch areas leave one): on a kernel that optimizes uprobes (6.18 here) a uprobe on
    it becomes a call to a trampoline a child forked afterwards does not have, and the child
    dies of SIGSEGV at its first call. corobpf refuses that offset, saying why and what to
    name instead; named past the nop, every call is traced; the child exits as it means to
    both ways."""
    exe, n = os.path.join(TESTS_BIN, "uctx"), 100
    with open("/proc/kallsyms") as f:
        optimizes = any(l.rstrip().endswith(" arch_uprobe_optimize") for l in f)
    spec = "uprobe:%s:nop5_switch:from=arg0,to=arg1" % exe
    p = corobpf(["-o", work("nop5_on.jsonl"), "--switch", spec, "--", exe, "nop5fork", str(n)])
    if optimizes:
        # The only function asked for cannot be probed: nothing to attach, the program not run.
        eq(p.returncode, 1, "exit code (%s)" % p.stderr.strip())
        check("not attached at file offset" in p.stderr and "dies of SIGSEGV" in p.stderr
              and "SYMBOL+OFFSET past the nop" in p.stderr,
              "corobpf does not say why it left the nop alone:\n" + p.stderr)
        check(exe in p.stderr, "the refusal does not name the file:\n" + p.stderr)
    else:
        check("CHILD exited 7" in p.stdout,
              "the forked child, probed on the nop:\n%s%s" % (p.stdout, p.stderr))
    spec = "uprobe:%s:nop5_switch+5:from=arg0,to=arg1" % exe
    tr, _, p, _, _ = trace_launch("nop5_past", [exe, "nop5fork", str(n)], extra=["--switch", spec])
    check("CHILD exited 7" in p.stdout, "the forked child, probed past the nop:\n" + p.stdout)
    check("not attached" not in p.stderr, p.stderr)
    # The calls alternate a -> b, b -> a: b is switched to n/2 times; a, the thread's main
    # (the first call comes from it), n/2 times and once as the thread began.
    eq(sorted(c["switch_ins"] for c in tr.coroutines), [n // 2, n // 2 + 1],
       "switch-ins (the parent's calls)")


def uctx_truth(p):
    """The program's own account: {'main': (tid, address), 'cos': [(tid, address, resumes, how)]}."""
    cos, main = [], None
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            cos.append((int(f[1]), f[2], int(f[3]), f[4] if len(f) > 4 else ""))
        elif f[0] == "MAIN":
            main = (int(f[1]), f[2])
    return main, cos


@test
def switch_ucontext_jump_is_no_coroutine():
    """getcontext then setcontext into the same context: a jump, no coroutine, no switch."""
    tr, _, p, out, raw = trace_launch("uctx_jump", [os.path.join(TESTS_BIN, "uctx"), "jump", "3"])
    check_clean(tr)  # no anomalies either
    check("JUMPS 6" in p.stdout, p.stdout)
    (tid, main_addr), cos = uctx_truth(p)
    eq(len(cos), 1, "coroutines the program made")
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), {cos[0][1], main_id(tid)}, "coroutines traced (no jump target among them)")
    eq(got[cos[0][1]]["switch_ins"], cos[0][2], "switch-ins of the coroutine")
    eq(got[cos[0][1]]["end"], "exit", "the coroutine returned")
    # Its start, the coroutine's yield and its return: jumps are not switches.
    eq(got[main_id(tid)]["switch_ins"], 3, "main's switch-ins")
    eq(len(tr.by_ev("switch")), 1 + 2 * 2, "switches (main's start, two in and two out)")
    check_replay(out, raw)

    # The context saved by main and set by a coroutine: a switch back to main.
    tr, _, p, _, _ = trace_launch("uctx_recover", [os.path.join(TESTS_BIN, "uctx"), "recover"])
    check_clean(tr)
    check("RECOVERED" in p.stdout, p.stdout)
    (tid, _), cos = uctx_truth(p)
    got = {c["id"]: c for c in tr.coroutines}
    eq(set(got), {cos[0][1], main_id(tid)}, "coroutines traced (the recovery point is main)")
    eq(got[cos[0][1]]["switch_ins"], 1, "the coroutine ran once")
    eq(got[main_id(tid)]["switch_ins"], 2, "main: its start, and the jump back to it")
    outs = [e for e in tr.by_ev("switch") if e["from"] == cos[0][1]]
    eq([e["to"] for e in outs], [main_id(tid)], "the coroutine's setcontext goes to main")


@test
def switch_ucontext_context_remade():
    """makecontext again on one ucontext_t: an incarnation each, none an inconsistency."""
    tr, _, p, out, raw = trace_launch("uctx_recycle",
                                      [os.path.join(TESTS_BIN, "uctx"), "recycle", "4", "2"])
    check_clean(tr)
    (tid, _), cos = uctx_truth(p)
    eq([c[3] for c in cos], ["unused", "returned", "abandoned", "returned", "abandoned"],
       "the program's incarnations")
    addr = cos[0][1]
    inc = [c for c in tr.coroutines if c["id"] == addr]
    eq([c["switch_ins"] for c in inc], [c[2] for c in cos], "switch-ins of each incarnation")
    # Made again: ended there (status 0); the last one abandoned lives to the end.
    eq([c["end"] for c in inc], ["exit"] * 4 + ["process_exit"], "how each incarnation ended")
    check(all(c["created"] is not None for c in inc), "every incarnation created")
    eq({c["id"] for c in tr.coroutines}, {addr, main_id(tid)}, "no other coroutine")
    check("re-created without exit" not in p.stderr, p.stderr)
    check_replay(out, raw)


@test
def switch_pth_exit_values_and_cancel():
    """pth_exit's value is the exit status; a cancelled thread's is -ECANCELED."""
    tr, _, p, out, raw = trace_launch("pth_status", [os.path.join(TESTS_BIN, "pth"), "3", "2"])
    check_clean(tr)
    want = {f[1]: (int(f[2]), int(f[3])) for f in (l.split() for l in p.stdout.splitlines())
            if f[0] == "THREAD"}
    eq(len(want), 3, "pth threads the program made")
    cancelled = [l.split() for l in p.stdout.splitlines() if l.startswith("CANCELLED")]
    eq(len(cancelled), 1, "the victim was cancelled:\n" + p.stdout)
    byname = {c["name"]: c for c in tr.coroutines}
    for name, (resumes, value) in want.items():
        eq((byname[name]["end"], byname[name]["status"]), ("exit", value), "%s exit" % name)
    v = byname["victim"]
    eq(v["switch_ins"], int(cancelled[0][2]), "switch-ins of the victim")
    eq((v["end"], v["status"]), ("exit", -errno.ECANCELED), "the victim's exit")
    check_replay(out, raw)
