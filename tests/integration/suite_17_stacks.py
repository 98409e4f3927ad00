"""--stacks: where coroutines were created and where they park."""
from harness import *  # noqa: F401,F403


def stack_funcs(trace, sid):
    stacks = {r["id"]: r for r in trace.records if r["type"] == "stack"}
    check(sid in stacks, "stack %r is not defined before the end" % sid)
    return [f.get("func") for f in stacks[sid]["frames"]], stacks[sid]["frames"]


def check_parking_stacks(trace, variant, how):
    """The stacks of progs/stacks.c name the functions its coroutines park in."""
    cor = {c["name"]: c for c in trace.coroutines}
    want_park = {"exe-parker": ["co_sleep_us", "exe_park_here", "exe_parker"],
                 "lib-parker": ["co_sleep_us", "lib_park_here", "lib_parker"],
                 "forgotten": ["chan_recv", "exe_wait_forever", "forgotten"]}
    for name, chain in want_park.items():
        check(name in cor, "%s: coroutine %s missing" % (how, name))
        funcs, frames = stack_funcs(trace, cor[name].get("park_stack"))
        # Innermost first: the scheduler's switch_out_locked, then the chain, in order.
        i = funcs.index(chain[0]) if chain[0] in funcs else -1
        eq(funcs[i:i + len(chain)], chain, "%s: park stack of %s (%s)" % (how, name, funcs))
        cfuncs, _ = stack_funcs(trace, cor[name].get("create_stack"))
        eq(cfuncs[:3], ["co_spawn", "spawn_them", "spawner"],
           "%s: create stack of %s" % (how, name))
        if name == "lib-parker":
            lib = [f for f in frames if f.get("func") == "lib_park_here"][0]
            check(lib["obj"].endswith("/libstackslib-%s.so" % variant),
                  "%s: lib_park_here is in %s" % (how, lib["obj"]))
        if name == "exe-parker":
            exe = [f for f in frames if f.get("func") == "exe_park_here"][0]
            check(exe["obj"].endswith("/stacks-%s" % variant) and
                  exe.get("file", "").endswith("progs/stacks.c") and exe.get("line", 0) > 0,
                  "%s: exe_park_here's object and line: %r" % (how, exe))
    # Every switch and create event names a stack (none lost, none unresolved).
    for e in trace.events:
        if e["ev"] in ("create", "switch") and e["pid"] == trace.processes[0]["pid"]:
            check("stack" in e, "%s: %s event without a stack: %r" % (how, e["ev"], e))
    eq(trace.trailer["lost"]["stacks_lost"], 0, "%s: stacks lost" % how)
    eq(trace.trailer["lost"]["stacks_unresolved"], 0, "%s: stacks unresolved" % how)
    found = [f for f in trace.records if f["type"] == "finding"]
    eq([(f["kind"], f["name"]) for f in found], [("lost_wakeup", "forgotten")], "findings")
    eq(found[0].get("stack"), cor["forgotten"]["park_stack"], "the finding's stack")


def perfetto_callstacks(t):
    """The function names of every event's callstack in a checked trace, root first."""
    return [[fr[0] for fr in ev["_callstack"]] for ts, i, track, ev, name in t.events
            if "_callstack" in ev]


def make_stacks_test(variant, how):
    def t():
        out, raw, db = work("stacks-%s-%s.jsonl" % (variant, how)), \
            work("stacks-%s-%s.raw" % (variant, how)), work("stacks-%s-%s.db" % (variant, how))
        pf = out[:-len(".jsonl")] + ".pftrace"
        # No timer samples: these are the probes' stacks, and none may be lost. A sample's
        # stack is taken in the timer interrupt, on top of whatever runs on that CPU, and
        # may be lost (counted): a CI run once had stacks_lost 1 with every probe's stack
        # present. Samples have their own tests (stacks_long_run_key_frame_*).
        p = corobpf(["--stacks=" + how, "--sample-hz", "0", "--stall", "0.2", "-o", out, "-o", db,
                     "-o", pf, "--raw", raw, "--", os.path.join(TESTS_BIN, "stacks-" + variant)])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        check("DONE" in p.stdout, "the program's output: %r" % p.stdout)
        trace = Trace(out)
        check_parking_stacks(trace, variant, how)
        # The summary shows where the forgotten coroutine is parked.
        check("at switch_out_locked" in p.stderr and "exe_wait_forever" in p.stderr,
              "summary without the finding's stack:\n" + p.stderr)
        # Symbolized again from the raw capture, after the process is gone: the same.
        check_replay(out, raw, ["--stall", "0.2"])
        # Perfetto: valid, and the forgotten coroutine's suspended slice carries its stack.
        t2 = perfetto_check.check(pf, out)
        stacks = perfetto_callstacks(t2)
        check(any(fr[-3:] == ["exe_wait_forever", "chan_recv", "switch_out_locked"]
                  for fr in stacks), "no Perfetto callstack ends in exe_wait_forever: %r" %
              stacks[:5])
        # SQLite: the same stacks, frame by frame.
        con = sqlite3.connect(db)
        for c in trace.coroutines:
            if c["name"] != "lib-parker":
                continue
            got = [r[0] for r in con.execute(
                "SELECT f.func FROM coroutines c JOIN frames f ON f.stack_id = c.park_stack "
                "WHERE c.uid = ? ORDER BY f.depth", (c["uid"],))]
            funcs, _ = stack_funcs(trace, c["park_stack"])
            eq(got, funcs, "SQLite frames of lib-parker's park stack")
        con.close()
    t.__name__ = "stacks_%s_%s" % (how, variant)
    return t


for _variant, _how in (("nofp", "dwarf"), ("fp", "dwarf"), ("fp", "fp"), ("nopie", "dwarf"),
                       ("lld", "dwarf")):
    test(make_stacks_test(_variant, _how))


@test
def stacks_fp_without_frame_pointers_is_short_and_says_so():
    """--stacks=fp on code built without frame pointers: few frames (the reason dwarf is the
    default), never a crash or a lost event."""
    out = work("stacks-nofp-fpwalk.jsonl")
    p = corobpf(["--stacks=fp", "-o", out, "--", os.path.join(TESTS_BIN, "stacks-nofp")])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    cor = {c["name"]: c for c in trace.coroutines}
    funcs, _ = stack_funcs(trace, cor["exe-parker"]["park_stack"])
    check("exe_park_here" not in funcs, "a frame-pointer walk found frames it cannot: %r" % funcs)
    eq(trace.trailer["lost"]["events"], 0, "events lost")


def make_key_frame_test(variant, how):
    def t():
        out, db = work("spin-%s-%s.jsonl" % (variant, how)), work("spin-%s-%s.db" % (variant, how))
        # The ticker beside the spinner may wait for its worker on a busy machine: not this
        # test's finding.
        p = corobpf(["--stacks=" + how, "--sched-latency", "600000", "-o", out, "-o", db, "--",
                     os.path.join(TESTS_BIN, "stacks-" + variant), "spin"])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        trace = Trace(out)
        found = [f for f in trace.records if f["type"] == "finding"]
        eq([(f["kind"], f["name"]) for f in found], [("long_run", "spinner")], "findings")
        f = found[0]
        # 300 ms at 99 Hz: about 30 samples, nearly all in spin_here.
        check(f.get("samples", 0) >= 10, "samples of the run: %r" % f.get("samples"))
        check(f.get("key_frame", "").startswith("spin_here+"), "key frame: %r" % f.get("key_frame"))
        check(f["key_samples"] * 10 > f["samples"] * 3, "the key frame's share")
        funcs, _ = stack_funcs(trace, f["stack"])
        eq(funcs[f["key_depth"]], "spin_here", "the key frame in its stack")
        check("spinner" in funcs, "the sampled stack reaches the coroutine's function: %r" % funcs)
        check("key frame: spin_here+" in p.stderr, "summary:\n" + p.stderr)
        con = sqlite3.connect(db)
        eq(con.execute("SELECT key_frame, samples FROM findings").fetchone(),
           (f["key_frame"], f["samples"]), "SQLite key frame")
        con.close()
    t.__name__ = "stacks_long_run_key_frame_%s_%s" % (how, variant)
    return t


for _variant, _how in (("nofp", "dwarf"), ("fp", "fp")):
    test(make_key_frame_test(_variant, _how))


@test
def stacks_report_after_the_binary_changed():
    """A capture symbolized after its binary was replaced by another build: that object's frames
    keep their addresses, and corobpf says why, rather than naming functions of the new build;
    the unchanged library's frames are still named."""
    d = work("rebuilt")
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "stacks-nofp")
    shutil.copy(os.path.join(TESTS_BIN, "stacks-nofp"), exe)
    shutil.copy(os.path.join(TESTS_BIN, "libstackslib-nofp.so"), d)
    raw, out, again = work("rebuilt.raw"), work("rebuilt.jsonl"), work("rebuilt-again.jsonl")
    p = corobpf(["--stacks", "--raw", raw, "-o", out, "--", exe])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    cor = {c["name"]: c for c in Trace(out).coroutines}
    funcs, _ = stack_funcs(Trace(out), cor["lib-parker"]["park_stack"])
    check("lib_park_here" in funcs and "lib_parker" in funcs, "live: %r" % funcs)
    shutil.copy(os.path.join(TESTS_BIN, "stacks-fp"), exe)   # another build, another build-id
    r = corobpf(["report", raw, "-o", again])
    eq(r.returncode, 0, "report exit code (%s)" % r.stderr.strip())
    check("changed since the capture" in r.stderr and exe in r.stderr, "no warning:\n" + r.stderr)
    trace = Trace(again)
    cor = {c["name"]: c for c in trace.coroutines}
    _, frames = stack_funcs(trace, cor["lib-parker"]["park_stack"])
    exe_frames = [f for f in frames if f.get("obj") == exe]
    check(exe_frames and all("func" not in f for f in exe_frames),
          "frames of the replaced binary named anyway: %r" % exe_frames)
    check(any(f.get("func") == "lib_park_here" for f in frames), "the library's frame: %r" % frames)


@test
def stacks_follow_through_a_shell_and_exec():
    """--follow --stacks: the shell forks, the child execs the program. Its mappings are read
    afresh after the exec (the shell's image is gone), and its stacks name its functions."""
    out = work("follow-stacks.jsonl")
    # "late": the exec'd binary is attached a few ms after its exec; it starts after that.
    p = corobpf(["--follow", "--stacks", "-o", out, "--", "sh", "-c",
                 os.path.join(TESTS_BIN, "stacks-nofp") + " late; true"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    cor = {c["name"]: c for c in trace.coroutines}
    for name, fn in (("exe-parker", "exe_park_here"), ("lib-parker", "lib_park_here")):
        funcs, _ = stack_funcs(trace, cor[name]["park_stack"])
        check(fn in funcs and name.replace("-", "_") in funcs, "%s: %r" % (name, funcs))
    eq(trace.trailer["lost"]["stacks_unmapped"], 0, "stacks with unmapped addresses")


@test
def stacks_state_goes_with_each_process():
    """--follow --stacks over two runs of a program, one after the other: each run's stacks
    name its functions, and what the resolver held for each (mappings, stacks, unwinds) goes
    when it ends: at the end nothing is held (a day of -a would otherwise keep every ended
    process's)."""
    out = work("ended-stacks.jsonl")
    prog = os.path.join(TESTS_BIN, "stacks-nofp")
    p = corobpf(["--follow", "--stacks", "-v", "-o", out, "--", "sh", "-c",
                 "%s late; %s late; true" % (prog, prog)])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip()[-500:])
    trace = Trace(out)
    runs = {}
    for c in trace.coroutines:
        if c["name"] == "exe-parker":
            runs[c["pid"]] = stack_funcs(trace, c["park_stack"])[0]
    eq(len(runs), 2, "exe-parker coroutines in two processes: %r" % list(runs))
    for pid, funcs in runs.items():
        check("exe_park_here" in funcs, "pid %d: %r" % (pid, funcs))
    m = re.search(r"state held for (\d+) processes \((\d+) stacks and unwinds remembered\)", p.stderr)
    check(m, "no resolver summary in -v output: %s" % p.stderr.strip()[-800:])
    eq((int(m.group(1)), int(m.group(2))), (0, 0), "resolver state left after every process ended")


@test
def stacks_all_mode_program_started_later():
    """-a --stacks: a program started after corobpf is admitted on its first probe; its
    mappings are read then, and its park stacks name its functions, executable and library."""
    out, err = work("all-stacks.jsonl"), work("all-stacks.err")
    ef = open(err, "w")
    tr = subprocess.Popen([COROBPF, "-a", "-v", "--stacks", "-o", out], stderr=ef, stdout=ef)
    prog = None
    try:
        wait_for(err, "tracing every")
        prog = subprocess.Popen([os.path.join(TESTS_BIN, "stacks-nofp"), "serve"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        pid = int(line[1])
        wait_for_attached(err, "/stacks-nofp")
        # Programs without probes exec meanwhile: -a sees their execs, never traces them.
        for _ in range(5):
            subprocess.run(["/bin/true"], check=True)
        time.sleep(0.6)   # a dozen parks of each parker
    finally:
        tr.send_signal(signal.SIGINT)
        tr.wait(timeout=60)
        ef.close()
        if prog:
            prog.kill()
            prog.wait()
    # The resolver holds state for the one traced process still alive, none for the others.
    # Other instrumented programs on the machine are traced too: held are those alive at the
    # end (a process record, no exit), ours among them, never the untraced ones.
    trace = Trace(out)
    exited = {r["pid"] for r in trace.records if r["type"] == "process_exit"}
    alive = {r["pid"] for r in trace.processes} - exited
    check(pid in alive, "the program is not among the processes alive at the end")
    m = re.search(r"state held for (\d+) processes", open(err).read())
    check(m and int(m.group(1)) == len(alive), "resolver state at the end: %r, %d traced "
          "processes alive" % (m and m.group(0), len(alive)))
    stacks = {r["id"]: [f.get("func") for f in r["frames"]] for r in trace.records
              if r["type"] == "stack"}
    parks = [stacks.get(e.get("stack"), []) for e in trace.events
             if e["ev"] == "switch" and e["pid"] == pid and e["from"] != "0x0"]
    for fn in ("exe_park_here", "lib_park_here"):
        check(any(fn in f and "co_sleep_us" in f for f in parks),
              "no switch out of %d parks in %s: %r" % (pid, fn, parks[:3]))


@test
def stacks_blocking_finding_names_the_blocking_call():
    """A coroutine that blocks its worker in usleep: the blocking finding's stack is the
    thread's user stack when it left the CPU, through libc (no frame pointers) to the
    coroutine's function."""
    out = work("block-stacks.jsonl")
    # The ticker beside it (the work it holds up) may wait for its worker on a busy machine.
    p = corobpf(["--stacks", "--sched-latency", "600000", "-o", out, "--",
                 os.path.join(TESTS_BIN, "bugs"), "blocking"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    found = [f for f in trace.records if f["type"] == "finding"]
    eq([f["kind"] for f in found], ["blocking"], "findings")
    funcs, _ = stack_funcs(trace, found[0].get("stack"))
    i = funcs.index("usleep") if "usleep" in funcs else -1
    check(i >= 0 and funcs[i + 1:i + 2] == ["blocker"], "the blocking stack: %r" % funcs)


@test
def ps_lists_live_coroutines_where_they_park():
    """corobpf ps on a running process: each coroutine that parks during the window, with the
    function it parks in (executable and library, no frame pointers); exits 0 and leaves the
    process running."""
    prog = subprocess.Popen([os.path.join(TESTS_BIN, "stacks-nofp"), "serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        pid = int(line[1])
        p = corobpf(["ps", "-p", str(pid), "-d", "0.5"])
        eq(p.returncode, 0, "corobpf ps exit code (%s)" % p.stderr.strip())
        out = p.stdout
        check("process %d (stacks-nofp)" % pid in out, "no process header:\n" + out)
        # Attached mid-life: named by the scheduler's list of what exists (docs/probes.md).
        blocks = out.split("\n  0x")[1:]
        for fn in ("exe_park_here", "lib_park_here"):
            mine = [b for b in blocks if fn in b]
            eq(len(mine), 1, "coroutines parked in %s:\n%s" % (fn, out))
            b = mine[0]
            check("suspended: sleep for " in b.splitlines()[0], "state: %s" % b.splitlines()[0])
            want = "exe-parker" if fn == "exe_park_here" else "lib-parker"
            check(b.splitlines()[0].split()[1] == want, "name: %s" % b.splitlines()[0])
            check("at switch_out_locked" in b and "co_sleep_us" in b, "where it parks:\n" + b)
            if fn == "lib_park_here":
                check("libstackslib-nofp.so" in b, "the library is named:\n" + b)
        # Parked since before the window, the forgotten one fired nothing: listed all the same,
        # as its scheduler listed it, with what it waits on and no stack; the output says so.
        eq(len(blocks), 3, "coroutines listed")
        forgotten = [b for b in blocks if b.splitlines()[0].split()[1] == "forgotten"]
        eq(len(forgotten), 1, "the forgotten coroutine listed:\n" + out)
        check("suspended: wait on 0x" in forgotten[0] and "its scheduler listed it" in
              forgotten[0], "the forgotten one:\n" + forgotten[0])
        check("the scheduler listed what existed" in out, "no note about the list:\n" + out)
        check(prog.poll() is None, "the process did not survive corobpf ps")
    finally:
        prog.kill()
        prog.wait()
    p = corobpf(["ps", "--", "/bin/true"])
    eq(p.returncode, 2, "corobpf ps -- CMD is a usage error")


@test
def stacks_usage_errors():
    for args, text in ((["--stacks=lbr"], "invalid --stacks"),
                       (["--stack-bytes", "100", "--stacks"], "invalid --stack-bytes"),
                       (["--stacks=fp", "--stack-bytes", "4096"], "--stack-bytes sizes"),
                       (["--sample-hz", "99"], "add --stacks"),
                       (["--stacks", "--sample-hz", "x"], "invalid --sample-hz")):
        p = corobpf(args + ["--", "/bin/true"])
        eq(p.returncode, 2, "exit code of %r" % args)
        check(text in p.stderr, "%r: %s" % (args, p.stderr.strip()))
