"""C++20 coroutines (issue 16): the executor of progs/cxx20 built by g++ and clang++ at -O0 and
-O2 and traced unmodified, the same program with the promise adapter (usdt/corobpf_coro.hpp),
and a Boost.Asio program traced unmodified.

Every check is against the program's own record. The executor counts, per frame incarnation
(its coroutine_handle address), the entries into the body (`resumes`), the returns into it
from a coroutine it resumed directly (`nested_returns`), its parent, each suspension's reason
and object, its exit; the trace must hold exactly these:

- adapter (any corobpf): names (the adapter's: the function's unqualified name), parents,
  switch-ins (resumes + nested returns: a nested resume hands the thread back to the
  resumer), the reason and object of every switch out, readies (corobpf::ready where the
  executor queues), spans (corobpf::span), exits and their status, threads; and untraced,
  the adapter takes none of its traced branches;
- unmodified (needs corobpf's tracing of coroutine bodies): the same coroutines, each named by
  its demangled function, with its parent, switch-ins, exit and threads; once with lazy
  coroutines only (--no-eager), once with two eager ones per root (their first run is in their
  ramp: one ends it at an await_suspend call, one at a yield compiled inline) and one main leaves
  waiting forever (still suspended at the end, no lost_wakeup: no wakeup is seen unmodified);
  and once built with one probe of
  corobpf.h about no coroutine (no adapter): still all traced. The awaiter of each visible
  wait, in the switch outs, the stall findings and SQLite's awaiters table; a coroutine run to
  its end switches out `done`, never as a wait on its final awaiter;
- Asio: per coroutine function of the program, as many coroutines as it ran, as many
  switch-ins as it counted resumes; every coroutine of the process (Asio's own too) exits.

A compiler or Boost missing when the programs were built leaves its binary out: outside CI its
test skips, saying so; in CI it fails. COROBPF_BIN runs the suite with another corobpf.
"""
from harness import *  # noqa: F401,F403

REASONS = {0: "unknown", 1: "yield", 2: "wait", 3: "sleep", 4: "io", 5: "done"}

# The standard library's string as the demangler spells it out.
_STR = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
_KEY = ("std::map<%s, std::vector<%s, std::allocator<%s > >, std::less<%s >, "
        "std::allocator<std::pair<%s const, std::vector<%s, std::allocator<%s > > > > >"
        % ((_STR,) * 7))
_EXTRA = ("std::vector<std::pair<%s, %s >, std::allocator<std::pair<%s, %s > > >" % ((_STR,) * 4))

# The executor's coroutine functions: the unqualified name its truth (and the adapter) gives,
# and the demangled function corobpf names unmodified, without the return type the demangler
# prints first for a function template's specialization (`ex::task<int> `), as c++filt prints
# the ramp's symbol (nm build/tests/cxx20_tasks-gcc-O0 | c++filt), up to 255 bytes.
SIGNATURES = {
    "leaf": "leaf(int)",
    "middle": "middle(int)",
    "counter": "counter(int)",
    "watcher": "watcher(ex::event*, long*)",
    "root": "root(int, ex::event*)",
    "setter": "setter(ex::event*, int)",
    "hopper": "hopper(long*)",
    "forgotten": "forgotten(ex::event*)",
    # Longer than 63 bytes; and than 255 (cut there, name_truncated).
    "lookup": "names_for_a_test::registry<int, long>::lookup<char>(int, long, char)",
    "lookup_everything": "names_for_a_test::registry<%s, %s >::lookup_everything<%s >(%s, %s, %s)"
                         % (_KEY, _STR, _EXTRA, _KEY, _STR, _EXTRA),
}


def cxx_name_as_traced(name):
    """What corobpf writes for a C++20 function's name it made itself: 255 bytes kept."""
    return name.encode("utf-8")[:255].decode("utf-8")

# Unmodified, the awaiter types whose await_suspend is a real call in the executor's bodies (the
# others were inlined: nothing of them is left to see), as measured (docs/cxx20.md), by
# (coroutine, awaiter type), "*" for all coroutines: None for every one the program uses.
VISIBLE_AWAITERS = {
    "gcc-O0": None,
    "clang-O0": None,
    "gcc-O2": {("*", "ex::event::aw")},
    "clang-O2": {("*", "ex::event::aw")},
}


def awaiter_visible(build, coroutine, awaiter):
    visible = VISIBLE_AWAITERS[build]
    return visible is None or bool({(coroutine, awaiter), ("*", awaiter)} & visible)

ASIO_FUNCTIONS = ("listener", "echo_session", "client", "roundtrip", "ticker")


def cxx20_bin(name):
    """The path of build/tests/NAME, or None after skipping (outside CI) or failing (in CI)."""
    path = os.path.join(TESTS_BIN, name)
    if os.path.exists(path):
        return path
    why = "%s not built (a compiler or libboost-dev missing at build time: tools/deps.sh)" % path
    if CI:
        raise Failure(why)
    print("     skipped: %s" % why, flush=True)
    return None


def incarnations(trace, pid):
    """{(id, n): coroutine record}: the nth incarnation of each id (n from 0), by uid."""
    by_id = {}
    for c in sorted((c for c in trace.coroutines if c["pid"] == pid), key=lambda c: c["uid"]):
        by_id.setdefault(c["id"], []).append(c)
    return {(i, n): c for i, cs in by_id.items() for n, c in enumerate(cs)}


def truth_incarnations(truth):
    seen, out = {}, {}
    for t in truth:
        n = seen.get(t["id"], 0)
        seen[t["id"]] = n + 1
        out[(t["id"], n)] = t
    return out


def match(trace, truth, pid):
    """Pairs (truth, traced) of the same incarnations; the two sets must be the same."""
    got, want = incarnations(trace, pid), truth_incarnations(truth)
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    check(not extra and not missing,
          "frame incarnations differ: %d traced, %d in the program's truth; extra %s, missing %s"
          % (len(got), len(want), extra[:4], missing[:4]))
    reused = sum(1 for k in want if k[1] > 0)
    check(reused > 0, "no frame address was reused: the test lost its reuse case")
    return [(want[k], got[k]) for k in sorted(want)]


def check_frames(trace, truth, pid, name_of, as_traced=name_as_traced, cut=63):
    """What both modes must get right, per incarnation (names kept up to `cut` bytes)."""
    for t, c in match(trace, truth, pid):
        where = "frame %s (%s)" % (t["id"], t["name"])
        name = name_of(t["name"])
        eq(c["name"], as_traced(name), where + " name")
        eq(bool(c.get("name_truncated")), len(name.encode()) > cut, where + " name_truncated")
        eq(c["parent"], t["parent"], where + " parent")
        eq(c["switch_ins"], t["resumes"] + t["nested_returns"],
           where + " switch-ins (resumes %d + nested returns %d)"
           % (t["resumes"], t["nested_returns"]))
        eq(c["end"], "exit" if t["exited"] else "process_exit", where + " end")
        check(c["created"] is not None, where + ": create not seen")
        eq(sorted(c["threads"]), sorted(t["tids"]), where + " threads")
    ev = lambda kind: [e for e in trace.by_ev(kind) if e["pid"] == pid]
    eq(len(ev("create")), len(truth), "create events")
    eq(len(ev("exit")), sum(1 for t in truth if t["exited"]), "exit events")
    eq(sum(1 for e in ev("switch") if e["to"] != "0x0"),
       sum(t["resumes"] + t["nested_returns"] for t in truth), "switch-ins")


def check_awaiters(trace, truth, pid, build):
    """Each switch out of an incarnation that says an awaiter names the one the program's
    await_suspend recorded for that suspension, in order; where the compiler inlined an
    awaiter's await_suspend, none says it. A final awaiter is never a wait: the coroutine's
    last switch out is its end."""
    visible = VISIBLE_AWAITERS[build]
    outs, nth, exits = {}, {}, {}
    for e in trace.events:
        if e["pid"] != pid:
            continue
        if e["ev"] == "create":
            nth[e["id"]] = nth.get(e["id"], -1) + 1
        elif e["ev"] == "switch" and e["from"] != "0x0":
            outs.setdefault((e["from"], nth.get(e["from"], 0)), []).append(e)
        elif e["ev"] == "exit":
            exits[(e["id"], nth.get(e["id"], 0))] = e["ts"]
    expected = 0
    for k, t in truth_incarnations(truth).items():
        where = "frame %s (%s)" % (t["id"], t["name"])
        sw = outs.get(k, [])
        got = [e["awaiter"] for e in sw if "awaiter" in e]
        for e in sw:
            if "awaiter" in e:
                eq(e["reason"], "wait", where + ": the reason of a switch out with an awaiter")
        want = [a for (r, _), a in zip(t["suspends"], t["awaiters"])
                if a and r != 5 and awaiter_visible(build, t["name"], a)]
        eq(got, want, where + " awaiters of its switch outs")
        # Run to its end (its final awaiter's await_suspend ran): its last switch out is that
        # end, `done`, at or after its exit (the exit comes first where await_suspend destroys
        # the frame), even where the final awaiter's await_suspend is a real call that hands
        # over by a call (GCC -O0's transfer to the parent).
        if t["status"] == 0 and t["suspends"] and t["suspends"][-1][0] == 5:
            check(sw, where + ": no switch out")
            eq((sw[-1]["reason"], sw[-1].get("awaiter")), ("done", None),
               where + " its last switch out (reason, awaiter)")
            check(k in exits and exits[k] <= sw[-1]["ts"],
                  where + ": exit %s after its last switch out at %d" % (exits.get(k), sw[-1]["ts"]))
        expected += len(want)
    # Lazy runs at -O2 show none: the event's awaiter, the only one left a call, is waited on
    # by eager coroutines only.
    check(expected > 0 or visible is not None, "no awaiter the program used is visible here")


def check_awaiter_findings(trace, pid, raw, build):
    """Replayed with a stall threshold every suspension passes, the stalls are the waits whose
    switch out said an awaiter (checked against the program's truth above) and were resumed:
    each says it, and the report's text says it. No other suspension is one: traced
    unmodified, a suspension of unknown reason may wait for anything (docs/jsonl.md)."""
    out = work("cxx20_%s_stalls.jsonl" % build)
    p = corobpf(["report", raw, "--stall", "0.000001", "-o", out, "--force"])
    eq(p.returncode, 0, "corobpf report --stall exit code (%s)" % p.stderr.strip())
    outs = {(e["from"], e["ts"]): e for e in trace.events
            if e["pid"] == pid and e["ev"] == "switch" and e["from"] != "0x0"}
    stalls = [f for f in Trace(out).records
              if f["type"] == "finding" and f["kind"] == "stall" and f["pid"] == pid]
    said = 0
    for f in stalls:
        sw = outs.get((f["id"], f["ts"]))
        check(sw, "stall of %s at %d: no switch out there" % (f["id"], f["ts"]))
        eq(f.get("awaiter"), sw.get("awaiter"),
           "stall of %s at %d: its awaiter against its switch out's" % (f["id"], f["ts"]))
        said += "awaiter" in f
    eq(said, len(stalls), "stalls saying an awaiter, of %d" % len(stalls))
    eq(said > 0, any("awaiter" in e for e in outs.values()), "stalls saying an awaiter")
    # Here every wait is an awaiter's: each finding the text shows as one names it.
    waits = re.findall(r"\(pid \d+\), wait on 0x[0-9a-f]+(.*)$", p.stdout + p.stderr, re.M)
    check(all(w.startswith(", waiting on ") for w in waits),
          "a wait in the report's findings names no awaiter:\n" + p.stdout + p.stderr)
    if VISIBLE_AWAITERS[build] is None:
        check(waits, "the report shows no wait among its findings")


def check_awaiter_tables(trace, pid, raw, build):
    """Replayed into SQLite, the awaiters table holds one row per switch out that says an
    awaiter, keyed as that wait's rows elsewhere (its switch in events, the suspended slice it
    opens): none where no awaiter is visible, and no table then."""
    db = work("cxx20_%s.db" % build)
    p = corobpf(["report", "-q", raw, "-o", db, "--force"])
    eq(p.returncode, 0, "corobpf report -o %s exit code (%s)" % (db, p.stderr.strip()))
    want = sorted((e["pid"], e["from_uid"], int(e["from"], 16), e["ts"], int(e["obj"], 16),
                   e["awaiter"]) for e in trace.events if e["ev"] == "switch" and "awaiter" in e)
    con = sqlite3.connect(db)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    eq("awaiters" in tables, bool(want), "an awaiters table (%d awaiters in the JSONL)" % len(want))
    if want:
        got = sorted(con.execute("SELECT pid, uid, id, ts, obj, awaiter FROM awaiters"))
        eq(got, want, "the awaiters table against the JSONL's switches")
        joined = con.execute(
            "SELECT count(*) FROM awaiters a JOIN events e ON e.ev = 'switch' AND e.uid = a.uid"
            " AND e.ts = a.ts AND e.reason = 'wait' AND e.obj = a.obj JOIN slices s ON"
            " s.uid = a.uid AND s.start_ts = a.ts AND s.state = 'suspended'"
            " AND s.reason = 'wait' AND s.obj = a.obj").fetchone()[0]
        eq(joined, len(want), "awaiter rows joined to their switch and suspended slice")
    con.close()


def check_never_resumed(trace, truth, pid, raw, build):
    """The coroutine the program leaves waiting on an event nobody sets (eager runs): traced
    unmodified, no wakeup of any coroutine is seen, so none can be seen missing (issue 33):
    replayed with a stall threshold it passes, no lost_wakeup, of it or any other. It is still
    suspended at the end, on its last switch out (the wait, its awaiter's address); where its
    await_suspend is a real call the report's longest suspensions name its awaiter's type."""
    forgotten = [t for t in truth if t["name"] == "forgotten"]
    eq([t["exited"] for t in forgotten], [False], "the program's never resumed coroutine")
    seen = awaiter_visible(build, "forgotten", "ex::event::aw")
    out = work("cxx20_%s_lost.jsonl" % build)
    p = corobpf(["report", raw, "--stall", "0.000001", "-o", out, "--force"])
    eq(p.returncode, 0, "corobpf report --stall exit code (%s)" % p.stderr.strip())
    lost = [f for f in Trace(out).records
            if f["type"] == "finding" and f["kind"] == "lost_wakeup" and f["pid"] == pid]
    eq(lost, [], "lost_wakeup findings of a program traced unmodified")
    c = [r for r in trace.coroutines if r["pid"] == pid and r["id"] == forgotten[0]["id"]]
    eq(len(c), 1, "the never resumed coroutine in the trace")
    sw = [e for e in trace.events if e["pid"] == pid and e["ev"] == "switch"
          and e["from"] == forgotten[0]["id"]][-1]
    eq((c[0]["state_at_end"], c[0]["reason_at_end"], c[0]["obj_at_end"]),
       ("suspended", "wait", sw["obj"]), "its state at the end against its last switch out")
    line = [l for l in (p.stdout + p.stderr).splitlines()
            if forgotten[0]["id"] in l and "still suspended at the end" in l]
    if seen and line:
        check("waiting on ex::event::aw" in line[0],
              "the report's longest suspensions do not name the awaiter:\n" + line[0])


def run_tasks(name, binary, args=()):
    trace, truth, p, out, raw = trace_launch(name, [binary] + list(args))
    check(truth, "%s wrote no truth:\n%s" % (binary, p.stdout))
    pid = trace.processes[0]["pid"]
    return trace, truth, p, out, raw, pid


# ---- the adapter: main's corobpf, the probes of corobpf.h ----

def adapter(build):
    b = cxx20_bin(build)
    if not b:
        return
    trace, truth, p, out, raw, pid = run_tasks(build, b)
    check_clean(trace)
    check_frames(trace, truth, pid, lambda short: short)
    got = incarnations(trace, pid)
    want = truth_incarnations(truth)
    # Switch-outs per incarnation, split at each create of the id: the last one, after the
    # exit the adapter fires first, carries no from_uid.
    outs, spans, nth = {}, {}, {}
    for e in trace.events:
        if e["pid"] != pid:
            continue
        if e["ev"] == "create":
            nth[e["id"]] = nth.get(e["id"], -1) + 1
        elif e["ev"] == "switch" and e["from"] != "0x0":
            outs.setdefault((e["from"], nth.get(e["from"], 0)), []).append((e["reason"], e["obj"]))
        elif e["ev"] in ("span_begin", "span_end"):
            spans.setdefault((e["id"], nth.get(e["id"], 0)), []).append((e["ev"], e["name"]))
    for k, t in want.items():
        where = "frame %s (%s)" % (t["id"], t["name"])
        if t["exited"]:
            eq(got[k]["status"], t["status"], where + " exit status")
        eq(outs.get(k, []), [(REASONS[r], o) for r, o in t["suspends"]],
           where + " switch-outs (reason, obj)")
        eq(got[k]["readies"], t["readies"], where + " readies (put on a run queue)")
        # Spans here close in the reverse order they open and never nest the same name.
        opened = [("span_begin", n) for n in t["spans"]]
        eq(sorted(spans.get(k, [])), sorted(opened + [("span_end", n) for n in t["spans"]]),
           where + " spans")
        check(not got[k].get("open_spans"),
              where + ": spans left open %s" % got[k].get("open_spans"))
    check(any(t["status"] != 0 for t in truth), "no frame was cancelled: the test lost that case")
    check(any(t["spans"] for t in truth), "no span opened: the test lost that case")
    # Each traced branch of the adapter fired exactly one probe; a name goes with its create.
    hooks = int(re.search(r"^hooks (\d+)$", p.stdout, re.M).group(1))
    n = sum(1 for e in trace.events if e["pid"] == pid and e["ev"] in ("switch", "create", "exit"))
    eq(hooks, n, "the adapter's traced branches (hooks) against its probes in the trace")
    check_replay(out, raw)


@test
def cxx20_adapter_exact_gcc():
    adapter("cxx20_tasks-adapter")


@test
def cxx20_adapter_exact_clang():
    adapter("cxx20_tasks-adapter-clang")


@test
def cxx20_adapter_untraced_takes_no_branch():
    """Not traced, the adapter is a semaphore test per hook: none of its traced branches runs."""
    b = cxx20_bin("cxx20_tasks-adapter")
    if not b:
        return
    p = run([b], env={"COROBPF_TRUTH": work("cxx20_untraced.truth")})
    eq(p.returncode, 0, "exit code of %s (%s)" % (b, p.stderr))
    hooks = re.search(r"^hooks (\d+)$", p.stdout, re.M).group(1)
    if hooks != "0" and other_sessions():
        # Another session's -a (or --follow) attached to it: it was traced, not untraced.
        print("     (another corobpf session traced the program: %s hooks taken)" % hooks)
    else:
        eq(hooks, "0", "traced branches taken untraced")
    truth = read_truth(work("cxx20_untraced.truth"))
    check(len(truth) > 50, "the program ran %d coroutines" % len(truth))


# ---- unmodified: the coroutine bodies, as the compilers emit them ----

def unmodified(build, eager):
    b = cxx20_bin("cxx20_tasks-" + build)
    if not b:
        return
    name = "cxx20_%s%s" % (build, "" if eager else "_lazy")
    trace, truth, p, out, raw, pid = run_tasks(name, b, () if eager else ("--no-eager",))
    check(any(t["name"] == "watcher" for t in truth) == eager, "the program's eager switch")
    mine = [c for c in trace.coroutines if c["pid"] == pid]
    check(mine, "%s: no coroutine traced at all (%d events; the switch paths found: %s)" % (
        build, len([e for e in trace.events if e["pid"] == pid]),
        sorted({r["family"] for r in trace.records if r["type"] == "switch_path"})))
    check_clean(trace)
    check_frames(trace, truth, pid, lambda short: SIGNATURES[short], cxx_name_as_traced, 255)
    check_awaiters(trace, truth, pid, build)
    check_awaiter_findings(trace, pid, raw, build)
    check_awaiter_tables(trace, pid, raw, build + ("" if eager else "_lazy"))
    if eager:
        check_never_resumed(trace, truth, pid, raw, build)
    check_replay(out, raw)


@test
def cxx20_unmodified_gcc_O0():
    unmodified("gcc-O0", eager=False)


@test
def cxx20_unmodified_gcc_O2():
    unmodified("gcc-O2", eager=False)


@test
def cxx20_unmodified_clang_O0():
    unmodified("clang-O0", eager=False)


@test
def cxx20_unmodified_clang_O2():
    unmodified("clang-O2", eager=False)


# The executor with no adapter but one probe of corobpf.h about no coroutine (a ready of id 1,
# in a constructor main runs): its coroutines are traced unmodified all the same, exactly (the
# adapter's coroutines are told apart one by one, not by the object having probes).

def unrelated_probe(build):
    b = cxx20_bin("cxx20_tasks-" + build)
    if not b:
        return
    trace, truth, p, out, raw, pid = run_tasks("cxx20_" + build, b, ("--no-eager",))
    check_clean(trace)
    # The probe was attached and fired: id 1 is ready once, a coroutine of no body (seen only
    # there). The rest is the executor's, exact.
    one = lambda r: r["pid"] == pid and r.get("id") == "0x1"
    eq([e["ev"] for e in trace.events if one(e)], ["ready"], "the unrelated probe's events")
    eq([(c["created"], c["switch_ins"]) for c in trace.coroutines if one(c)], [(None, 0)],
       "the unrelated probe's coroutine")
    trace.events = [e for e in trace.events if not one(e)]
    trace.coroutines = [c for c in trace.coroutines if not one(c)]
    check(trace.coroutines, "%s: no coroutine traced" % build)
    check_frames(trace, truth, pid, lambda short: SIGNATURES[short], cxx_name_as_traced, 255)
    check_replay(out, raw)


@test
def cxx20_unmodified_with_unrelated_probe_gcc():
    unrelated_probe("probe")


@test
def cxx20_unmodified_with_unrelated_probe_clang():
    unrelated_probe("probe-clang")


# An eager coroutine (initial_suspend never suspends) runs in its ramp up to its first
# suspension: that is its first run, and its creator's body is entered again after it. Apart,
# since telling it from machine code alone is the hard case of the unmodified model.

@test
def cxx20_unmodified_eager_gcc_O0():
    unmodified("gcc-O0", eager=True)


@test
def cxx20_unmodified_eager_gcc_O2():
    unmodified("gcc-O2", eager=True)


@test
def cxx20_unmodified_eager_clang_O0():
    unmodified("clang-O0", eager=True)


@test
def cxx20_unmodified_eager_clang_O2():
    unmodified("clang-O2", eager=True)


# ---- Boost.Asio ----

def asio(build):
    b = cxx20_bin("cxx20_asio-" + build)
    if not b:
        return
    trace, truth, p, out, raw = trace_launch("cxx20_asio_" + build, [b, "4", "12"])
    check(truth, "%s wrote no counters:\n%s" % (b, p.stdout))
    pid = trace.processes[0]["pid"]
    mine = [c for c in trace.coroutines if c["pid"] == pid]
    check(mine, "asio %s: no coroutine traced at all" % build)
    check_clean(trace)
    for t in truth:
        fn = [c for c in mine if c["name"].startswith(t["fn"] + "(")]
        eq(len(fn), t["ran"], "asio %s: coroutines of %s" % (build, t["fn"]))
        eq(sum(c["switch_ins"] for c in fn), t["resumes"],
           "asio %s: resumes of %s" % (build, t["fn"]))
        for c in fn:
            check(c["created"] is not None,
                  "asio %s: %s %s: create not seen" % (build, t["fn"], c["id"]))
    ended = {}
    for c in mine:
        ended[c["end"]] = ended.get(c["end"], 0) + 1
    eq(ended, {"exit": len(mine)},
       "asio %s: how the process's %d coroutines ended" % (build, len(mine)))
    ev = lambda kind: [e for e in trace.by_ev(kind) if e["pid"] == pid]
    eq(len(ev("create")), len(mine), "asio %s: create events" % build)
    eq(len(ev("exit")), len(mine), "asio %s: exit events" % build)
    check_replay(out, raw)


@test
def cxx20_asio_gcc():
    asio("gcc")


@test
def cxx20_asio_clang():
    asio("clang")
