"""Python's asyncio, traced with no flags (docs/python.md): CPython 3.11 as Debian ships it,
its _asyncio module stripped of every symbol but PyInit__asyncio.

tasks.py counts its own tasks, steps, suspensions by what they wait for, and ends; bpftrace
counts, in the same run, the calls of the three functions corobpf probes, found here by a
reading of the module's relocations of the test's own (not corobpf's). Other CPython builds
on the machine (pyenv's) are traced where their version's layout is known, and refused by
name where not. Outside CI a missing Python skips its test, saying why; in CI it fails."""
import collections

from harness import *  # noqa: F401,F403
from suite_19_runtimes import Bpftrace, need, fields

PROGS = os.path.join(ROOT, "tests", "integration", "progs")
PY311 = "/usr/bin/python3.11"
ASYNCIO311 = "/usr/lib/python3.11/lib-dynload/_asyncio.cpython-311-x86_64-linux-gnu.so"
PYENV = "/root/.pyenv/versions"


def relocated_pointers(so):
    """{place: pointer} of the module's R_X86_64_RELATIVE relocations (readelf -r)."""
    out = {}
    for line in run(["readelf", "-rW", so]).stdout.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "R_X86_64_RELATIVE":
            out[int(f[0], 16)] = int(f[3], 16)
    return out


def string_at(data, name):
    """The file offset (= vaddr in these modules' read-only data) of a NUL-ended string."""
    i = data.find(b"\0" + name.encode() + b"\0")
    check(i >= 0, "%s not in the module" % name)
    return i + 1


def asyncio_functions(so):
    """TaskStepMethWrapper's tp_call, task_wakeup and Task.__init__ of a 3.11 _asyncio module:
    the type objects by their tp_name (at +24), tp_call at +128 and tp_init at +296 of
    PyTypeObject; task_wakeup by its PyMethodDef (ml_name, then ml_meth)."""
    with open(so, "rb") as f:
        data = f.read()
    ptr = relocated_pointers(so)
    by_target = collections.defaultdict(list)
    for at, to in ptr.items():
        by_target[to].append(at)

    def type_of(name):
        for at in by_target[string_at(data, name)]:
            return at - 24
        raise Failure("type %s not found" % name)

    step = ptr[type_of("TaskStepMethWrapper") + 128]
    init = ptr[type_of("_asyncio.Task") + 296]
    wakeup = ptr[by_target[string_at(data, "task_wakeup")][0] + 8]
    return step, wakeup, init


def asyncio_oracle(name, so=ASYNCIO311):
    step, wakeup, init = asyncio_functions(so)
    probes = [("step", so, "0x%x" % step, ""), ("wakeup", so, "0x%x" % wakeup, ""),
              ("init", so, "0x%x" % init, "")]
    return Bpftrace(name, probes, unsafe=True)


NAME = re.compile(r"^Task-\d+ (main|worker|child|sleeper|pre)\(\)$")


def check_tasks(tr, pid, counts, oracle, launched=True):
    """The trace against the program's own counts and bpftrace's."""
    eq({r["family"] for r in tr.records if r["type"] == "switch_path" and r["pid"] == pid}
       >= {"asyncio"}, True, "families used")
    cos = [c for c in tr.coroutines if c["pid"] == pid]
    eq(len(cos), counts["TASKS"], "coroutines (the program's count of its tasks)")
    check(all(NAME.match(c["name"] or "") for c in cos),
          "names: %s" % sorted({c["name"] for c in cos if not NAME.match(c["name"] or "")})[:5])
    sw = [e for e in tr.by_ev("switch") if e["pid"] == pid]
    ins = [e for e in sw if e["to"] != "0x0"]
    outs = [e for e in sw if e["to"] == "0x0"]
    eq(len(ins), counts["STEPS"], "switch-ins (the program's count of its steps)")
    eq(sum(c["switch_ins"] for c in cos), counts["STEPS"], "the coroutines' switch_ins")
    eq(len(outs), len(ins), "a switch out after each switch in")
    eq(all(e["from"] == "0x0" for e in ins), True, "steps start from the event loop (0x0)")
    if oracle is not None:
        # Attached, bpftrace (started first) also saw the steps before the attach: main's
        # first two and each PRE task's first.
        eq(len(ins) + (0 if launched else 2 + 20), oracle.get("step", 0) + oracle.get("wakeup", 0),
           "switch-ins (bpftrace's count of the step functions)")
        # Attached, main and the PRE tasks were made before it (bpftrace saw them made).
        eq(oracle.get("init", 0), counts["TASKS"], "bpftrace's count of Task.__init__")
        eq(len([e for e in tr.by_ev("create") if e["pid"] == pid]),
           counts["TASKS"] - (0 if launched else 1 + 20), "creates")
    why = collections.Counter(e["reason"] for e in outs)
    exits = [e for e in tr.by_ev("exit") if e["pid"] == pid]
    eq(why["yield"], counts["YIELDS"], "suspensions that yield (asyncio.sleep(0))")
    eq(why["sleep"], counts["SLEEPS"], "sleeps")
    eq(why["wait"], counts["WAITS"], "waits on a future or a task")
    eq(why["io"], counts["IOS"], "I/O waits (loop.sock_recv)")
    eq(why["done"], len(exits), "a 'done' switch out after each exit")
    status = collections.Counter(e["status"] for e in exits)
    eq(status[0], counts["OK"], "tasks that returned (status 0)")
    eq(status[-1], counts["ERR"], "tasks that raised (status -1)")
    eq(status[-125], counts["CANCELLED"], "tasks cancelled (-ECANCELED)")
    eq(len(exits), counts["OK"] + counts["ERR"] + counts["CANCELLED"], "exits")
    # The wait-for graph: a task awaiting a task waits on that task's id (a task's memory is
    # reused by later ones: the incarnation alive at the wait).
    uids = {c["uid"]: c for c in cos}
    alive = collections.defaultdict(list)
    for c in cos:
        alive[c["id"]].append(c)

    def at(cid, ts):
        for c in alive.get(cid, ()):
            if (c["created"] or c["first_seen"]) <= ts <= c["ended"]:
                return c
        return None

    on_tasks = [e for e in outs if e["reason"] == "wait" and at(e.get("obj"), e["ts"])]
    eq(len(on_tasks), counts["TASKWAITS"], "waits whose object is a task of the trace")
    for e in on_tasks:
        awaited = at(e["obj"], e["ts"])
        check(awaited["name"].split()[1] in ("child()", "sleeper()"),
              "a wait on %s (%s)" % (e["obj"], awaited["name"]))
        eq(awaited["parent_uid"], e["from_uid"], "the awaited task's parent is the task awaiting it")
    by_name = collections.Counter(c["name"].split()[1] for c in cos)
    for c in cos:
        kind = c["name"].split()[1]
        if kind in ("child()", "sleeper()"):
            check(uids.get(c["parent_uid"], {}).get("name", "").endswith("worker()"),
                  "%s's parent: %s" % (c["name"], c["parent"]))
        if kind == "worker()" and launched:
            check(uids.get(c["parent_uid"], {}).get("name", "").endswith("main()"),
                  "%s's parent: %s" % (c["name"], c["parent"]))
    return by_name


@test
def python_asyncio_tasks_launched():
    """corobpf -- python3.11 tasks.py: every task, every step, what each waits for, how it
    ends, and who made it, exact, with no flags."""
    if not need(PY311, ASYNCIO311):
        return
    cmd = [PY311, os.path.join(PROGS, "tasks.py"), "200", "10"]
    oracle = asyncio_oracle("asyncio")
    tr, _, p, out, raw = trace_launch("asyncio", cmd)
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(tr)
    counts = fields(p.stdout, "TASKS")
    by_name = check_tasks(tr, pid, counts, got)
    eq(by_name["main()"], 1, "one main task")
    eq(by_name["worker()"], 200, "workers")
    main = [c for c in tr.coroutines if c["pid"] == pid and c["name"].endswith("main()")][0]
    eq(main["parent"], "0x0", "main's parent: made outside any task")
    check("asyncio: %s: CPython 3.11" % ASYNCIO311 in p.stderr, p.stderr)
    check("no context switch seen" not in p.stderr, p.stderr)
    check_replay(out, raw)


@test
def python_asyncio_tasks_attached():
    """corobpf -p on a Python program whose loop runs: tasks made before the attach are
    named when they next run; every step after it counted exactly."""
    if not need(PY311, ASYNCIO311):
        return
    oracle = asyncio_oracle("asyncio_attached")
    target = subprocess.Popen([PY311, os.path.join(PROGS, "tasks.py"), "--wait", "150", "10"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    eq(target.stdout.readline().split()[:1], ["READY"], "the program's first line")
    from suite_19_runtimes import attach_to
    tr, stdout, _ = attach_to(target, "asyncio_attached")
    got = oracle.counts(target.pid)
    check_clean(tr)
    counts = fields(stdout, "TASKS")
    by_name = check_tasks(tr, target.pid, counts, got, launched=False)
    eq(by_name["pre()"], 20, "tasks made before the attach, named at their first step after it")
    eq(by_name["main()"], 1, "the main task, made before the attach, named")


@test
def python_asyncio_idle_loop_is_no_finding():
    """The event loop waiting in epoll with nothing to run is its idle wait, no finding; a
    task that blocks its thread (time.sleep) while other tasks' timers come due (work waiting
    for the thread: the loop runs them as soon as it gets the thread back) is the one blocking
    finding."""
    if not need(PY311, ASYNCIO311):
        return
    code = ("import asyncio, time\n"
            "async def idle(): await asyncio.sleep(0.3)\n"
            "async def ticker(): await asyncio.sleep(0.05)\n"
            "async def blocker():\n"
            "    await asyncio.sleep(0.01)\n"
            "    time.sleep(0.1)\n"
            "async def main(): await asyncio.gather(idle(), idle(), ticker(), ticker(), blocker())\n"
            "asyncio.run(main())\n")
    tr, _, p, _, _ = trace_launch("asyncio_idle", [PY311, "-c", code])
    check_clean(tr)
    found = [r for r in tr.records if r["type"] == "finding"]
    eq([(f["kind"], f["name"].split()[1]) for f in found], [("blocking", "blocker()")],
       "findings")


@test
def python_asyncio_other_builds():
    """pyenv's CPython 3.11 (another build, with symbols) is traced as Debian's is; CPython
    versions whose layout corobpf does not know are refused by name, the program run."""
    if not need(os.path.join(PYENV, "3.11.7", "bin", "python3.11")):
        return
    py = os.path.join(PYENV, "3.11.7", "bin", "python3.11")
    so = os.path.join(PYENV, "3.11.7", "lib", "python3.11", "lib-dynload",
                      "_asyncio.cpython-311-x86_64-linux-gnu.so")
    oracle = asyncio_oracle("asyncio_pyenv", so)
    tr, _, p, _, _ = trace_launch("asyncio_pyenv", [py, os.path.join(PROGS, "tasks.py"), "50", "5"])
    pid = tr.processes[0]["pid"]
    got = oracle.counts(pid)
    check_clean(tr)
    counts = fields(p.stdout, "TASKS")
    check_tasks(tr, pid, counts, got)
    for v in sorted(os.listdir(PYENV)):
        minor = v.split(".")[1] if v.startswith("3.") else None
        if not minor or minor == "11" or int(minor) < 7:
            continue
        py = os.path.join(PYENV, v, "bin", "python3")
        q = corobpf(["-o", work("asyncio_%s.jsonl" % v), "--",
                     py, os.path.join(PROGS, "tasks.py"), "5", "2"])
        eq(q.returncode, 0, "exit code under CPython %s (%s)" % (v, q.stderr.strip()))
        check("CPython 3.%s's asyncio: its task layout is not known to this corobpf" % minor
              in q.stderr, "CPython %s: %s" % (v, q.stderr))
        check("TASKS" in q.stdout, "the program ran under CPython %s: %r" % (v, q.stdout))
