#!/usr/bin/env python3
"""Integration tests: real BPF on the real kernel, real scheduler programs.

Every test program records its own ground truth (COROBPF_TRUTH): the trace
must match it exactly. Needs root. Outside CI, tests skip with the reason
when BPF cannot be used; with CI=true that is a failure.

The tests live in suite_*.py beside this file, one module per area, on the
common ground of harness.py; they run in the order of the modules' file names
(suite_01_scenarios.py ... suite_18_bench.py, then suite_hostile_*.py), each
module's tests in the order they are written.

    python3 tests/integration/run.py            # all
    python3 tests/integration/run.py attach     # tests whose name contains "attach"
    python3 tests/integration/run.py finding --skip precision_go
                                                # ...but not those whose name contains this
    python3 tests/integration/run.py -j 2       # two tests at a time (JOBS=2 the same), each
                                                # in a worker process of its own, the next
                                                # test to the first worker free: a busy
                                                # machine, another corobpf session beside
                                                # each test, -a ones included (make
                                                # integration: JOBS=2). A test that
                                                # measures runs alone.
    KEEP=1 python3 tests/integration/run.py     # keep the work directory
    LOAD=1 python3 tests/integration/run.py     # under load: a CPU hog per CPU and an unrelated
                                                # instrumented program (build/demo) all along
"""
import atexit
import os
import sys
import time
import shutil
import subprocess

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403


# ---- the tests: every suite_*.py, in file-name order; each registers its tests on import ----

import importlib  # noqa: E402
import glob  # noqa: E402
for _m in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_*.py"))):
    importlib.import_module(os.path.basename(_m)[:-3])


# ---- runner ----

def bpf_usable():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists(COROBPF):
        return "./corobpf is not built"
    p = corobpf(["--switch", "none", "--", "/bin/true"])
    if p.returncode != 6:
        return "corobpf cannot load BPF here (exit %d): %s" % (p.returncode, p.stderr.strip())
    return None


def run_one(t):
    """Run test t: (passed, seconds, what it printed and why it failed)."""
    start = time.time()
    try:
        t()
        return True, time.time() - start, ""
    except Exception as e:  # a test's own failure or an unexpected error: both fail it
        return False, time.time() - start, str(e)


def report(name, passed, secs, why):
    if passed:
        print("ok   %-45s %5.1fs" % (name, secs), flush=True)
    else:
        print("FAIL %-45s %5.1fs\n     %s" % (name, secs, why.replace("\n", "\n     ")), flush=True)


def worker():
    """run.py --worker FD: the tests named on stdin, one a line, each answered on FD as a JSON
    line once it is over (what it printed with it, so that the lines of two tests do not mix)."""
    import io
    import json
    from contextlib import redirect_stdout
    by_name = {t.__name__: t for t in TESTS}
    answers = os.fdopen(int(sys.argv[2]), "w")
    failed = False
    for line in sys.stdin:
        buf = io.StringIO()
        with redirect_stdout(buf):
            passed, secs, why = run_one(by_name[line.strip()])
        failed = failed or not passed
        answers.write(json.dumps({"name": line.strip(), "passed": passed, "secs": secs,
                                  "why": why, "printed": buf.getvalue()}) + "\n")
        answers.flush()
    if not failed and not os.environ.get("KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    else:
        print("work directory kept: %s" % WORK, flush=True)
    return 0


# A test run with nothing beside it under -j: one that measures. Every other test holds beside
# any other, -a and --follow sessions included (a trap-path session reads what another session's
# batched path makes its targets append: docs/probes.md, "Two sessions on different paths").
ALONE_NAMES = ("bench_",)


def runs_alone(t):
    """Whether test t is a measurement."""
    return t.__name__.startswith(ALONE_NAMES)


def run_parallel(tests, jobs):
    """The tests on `jobs` worker processes, each test to the first worker free (one that runs
    alone once every worker is free, and nothing beside it); results in the order they end.
    Returns the names of the failed ones."""
    import json
    import selectors
    sel, workers, failed = selectors.DefaultSelector(), [], []
    queue = [(t, runs_alone(t)) for t in tests]
    # The workers run no load of their own: this process runs it for all of them.
    env = dict(os.environ, LOAD="")
    idle, alone_running = [], False
    for _ in range(min(jobs, len(queue))):
        r, w = os.pipe()
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(w)],
                             stdin=subprocess.PIPE, text=True, pass_fds=(w,), env=env)
        os.close(w)
        f = os.fdopen(r)
        workers.append(p)
        sel.register(f, selectors.EVENT_READ, p)
        idle.append(p)

    def dispatch():
        nonlocal alone_running
        while idle and queue and not alone_running:
            t, alone = queue[0]
            if alone and len(idle) < len(workers):
                return  # it waits for every worker to be free
            queue.pop(0)
            p = idle.pop(0)
            p.stdin.write(t.__name__ + "\n")
            p.stdin.flush()
            alone_running = alone

    dispatch()
    while len(idle) < len(workers):
        for key, _ in sel.select():
            p, line = key.data, key.fileobj.readline()
            if not line:
                raise RuntimeError("an integration test worker died (exit %s)" % p.wait())
            a = json.loads(line)
            sys.stdout.write(a["printed"])
            report(a["name"], a["passed"], a["secs"], a["why"])
            if not a["passed"]:
                failed.append(a["name"])
            idle.append(p)
            alone_running = False
            dispatch()
    for p in workers:
        p.stdin.close()
    for p in workers:
        p.wait()
    return failed


def main():
    if sys.argv[1:2] == ["--worker"]:
        return worker()
    wanted, skipped, args = [], [], sys.argv[1:]
    jobs = int(os.environ.get("JOBS") or 1)
    while args:
        a = args.pop(0)
        if a == "--skip" and args:
            skipped.append(args.pop(0))
        elif a == "-j" and args:
            jobs = int(args.pop(0))
        else:
            wanted.append(a)
    why = bpf_usable()
    if why:
        if CI:
            print("FAIL: integration tests cannot run in CI: %s" % why)
            return 1
        print("SKIP integration tests: %s (they need root and a BPF-capable kernel)" % why)
        return 0
    if os.environ.get("LOAD") == "1":
        load = Load().start()
        atexit.register(load.stop)
        print("under load: %d CPU hogs and build/demo running" % (len(load.procs) - 1), flush=True)
    tests = [t for t in TESTS if (not wanted or any(w in t.__name__ for w in wanted))
             and not any(w in t.__name__ for w in skipped)]
    if jobs > 1:
        failed = run_parallel(tests, jobs)
    else:
        failed = []
        for t in tests:
            passed, secs, why = run_one(t)
            report(t.__name__, passed, secs, why)
            if not passed:
                failed.append(t.__name__)
    print("%d tests, %d failed%s" % (len(tests), len(failed),
                                     ": " + " ".join(failed) if failed else ""))
    if jobs > 1 or (not failed and not os.environ.get("KEEP")):
        # Under -j this one is unused: each worker said where it kept its own.
        shutil.rmtree(WORK, ignore_errors=True)
    else:
        print("work directory kept: %s" % WORK)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
