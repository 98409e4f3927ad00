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
    KEEP=1 python3 tests/integration/run.py     # keep the work directory
    LOAD=1 python3 tests/integration/run.py     # under load: a CPU hog per CPU and an unrelated
                                                # instrumented program (build/demo) all along
"""
import atexit
import os
import sys
import time
import shutil

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


def main():
    wanted, skipped, args = [], [], sys.argv[1:]
    while args:
        a = args.pop(0)
        if a == "--skip" and args:
            skipped.append(args.pop(0))
        else:
            wanted.append(a)
    why = bpf_usable()
    if why:
        if CI:
            print("FAIL: integration tests cannot run in CI: %s" % why)
            return 1
        print("SKIP integration tests: %s (they need root and a BPF-capable kernel)" % why)
        return 0
    failed, ran = [], 0
    if os.environ.get("LOAD") == "1":
        load = Load().start()
        atexit.register(load.stop)
        print("under load: %d CPU hogs and build/demo running" % (len(load.procs) - 1), flush=True)
    for t in TESTS:
        if wanted and not any(w in t.__name__ for w in wanted):
            continue
        if any(w in t.__name__ for w in skipped):
            continue
        ran += 1
        start = time.time()
        try:
            t()
            print("ok   %-45s %5.1fs" % (t.__name__, time.time() - start), flush=True)
        except Exception as e:  # a test's own failure or an unexpected error: both fail it
            failed.append(t.__name__)
            print("FAIL %-45s %5.1fs\n     %s" % (t.__name__, time.time() - start,
                                                  str(e).replace("\n", "\n     ")), flush=True)
    print("%d tests, %d failed%s" % (ran, len(failed), ": " + " ".join(failed) if failed else ""))
    if not failed and not os.environ.get("KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)
    else:
        print("work directory kept: %s" % WORK)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
