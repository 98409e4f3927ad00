"""Launch through a script: corobpf follows the exec chain to the program and traces it from its
first instruction (each image held at its exec until it is attached)."""
from harness import *  # noqa: F401,F403


def script(name, body):
    path = work(name)
    with open(path, "w") as f:
        f.write(body)
    os.chmod(path, 0o755)
    return path


def check_scenario(name, cmd, exe):
    trace, truth, p, out, raw = trace_launch(name, cmd)
    check(truth, "the scenario wrote no ground truth")
    pid = trace.processes[-1]["pid"]
    check(all(pr["pid"] == pid for pr in trace.processes), "one process: %s" % trace.processes)
    eq(trace.processes[-1]["exe"], exe, "the process's last program")
    eq(trace.processes[-1]["mode"], "launched", "mode")
    check_truth(trace, truth, pid)
    # The shells in the chain map libc's ucontext functions: that must not show.
    eq([r["object"] for r in trace.records if r["type"] == "switch_path"], [],
       "switch_path records of a program traced through its probes")
    check_clean(trace)
    eq(trace.trailer["end_reason"], "targets_exited", "end_reason")
    check_replay(out, raw)
    return trace, p


@test
def launch_script_execs_program():
    """A shell script that execs a program with probes: every create from its first instruction."""
    exe = os.path.join(TESTS_BIN, "scenarios")
    sh = script("exec_scen.sh", "#!/bin/sh\nexec %s \"$@\"\n" % exe)
    check_scenario("script_scen", [sh, "spawn_tree"], exe)


@test
def launch_script_two_level_chain():
    """script -> env sh -> script -> program, all in one pid."""
    exe = os.path.join(TESTS_BIN, "scenarios-so")
    inner = script("inner.sh", "#!/usr/bin/env sh\nexec %s \"$@\"\n" % exe)
    outer = script("outer.sh", "#!/bin/bash\nexec env sh %s \"$@\"\n" % inner)
    check_scenario("script_chain", [outer, "stress1000"], exe)


@test
def launch_script_switch_path():
    """A program without probes behind a script: the switch-function path, switches exact."""
    exe = os.path.join(TESTS_BIN, "uctx")
    sh = script("exec_uctx.sh", "#!/bin/bash\nexec %s \"$@\"\n" % exe)
    tr, _, p, out, raw = trace_launch("script_uctx", [sh, "rr", "5", "4"])
    check_clean(tr)
    eq(tr.processes[-1]["exe"], exe, "the process's last program")
    cos = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "CO":
            cos[f[2]] = int(f[3])
    eq(len(cos), 5, "coroutines the program made")
    got = {c["id"]: c for c in tr.coroutines}
    for cid, resumes in cos.items():
        check(cid in got, "coroutine %s not traced" % cid)
        eq(got[cid]["switch_ins"], resumes, "switch-ins of %s" % cid)
        eq(got[cid]["end"], "exit", "%s end" % cid)
        check(got[cid]["created"] is not None, "%s: makecontext not seen" % cid)
    eq(len(got), len(cos) + 1, "coroutines traced (the program's, and main)")
    # One switch_path record, the program's (bash's libc uprobes went with bash's image).
    eq(len([r for r in tr.records if r["type"] == "switch_path"]), 1, "switch_path records")
    check_replay(out, raw)


@test
def launch_script_without_probes_exits_cleanly():
    sh = script("noprobes.sh", "#!/bin/sh\necho hello\nexit 3\n")
    out = work("noprobes.jsonl")
    p = corobpf(["-o", out, "--", sh])
    eq(p.returncode, 3, "the command's exit status (%s)" % p.stderr.strip())
    eq(p.stdout, "hello\n", "the command's output")
    check("carries no corobpf probes" in p.stderr, "no clear message:\n" + p.stderr)
    check("Traceback" not in p.stderr and "BUG" not in p.stderr, p.stderr)
    Trace(out)


@test
def launch_script_pyenv_shim():
    """`corobpf -- python3 -c ...` where python3 on PATH is a shell-script shim."""
    shims = [os.path.join(d, "python3") for d in os.environ.get("PATH", "").split(":") if d]
    shims.append(os.path.expanduser("~/.pyenv/shims/python3"))
    shim = None
    for cand in shims:
        if os.access(cand, os.X_OK) and os.path.isfile(cand):
            with open(cand, "rb") as f:
                if f.read(2) == b"#!":
                    shim = cand
                    break
    if not shim:
        print("     skipped: no python3 shim (a script) on PATH or in ~/.pyenv/shims")
        return
    env = dict(os.environ, PATH=os.path.dirname(shim) + ":" + os.environ.get("PATH", ""))
    out = work("shim.jsonl")
    p = corobpf(["-o", out, "--", "python3", "-c", "print('shim ok')"], env=env)
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    eq(p.stdout, "shim ok\n", "the program's output")
    tr = Trace(out)
    check("python" in tr.processes[-1]["exe"], "last program: %s" % tr.processes[-1]["exe"])


@test
def launch_script_sets_library_path():
    """The script points LD_LIBRARY_PATH at another copy of the probed library: the image's own
    environment decides what ld.so maps, so that copy is attached before it runs."""
    exe = os.path.join(TESTS_BIN, "scenarios-so")
    libdir = work("altlib")
    os.makedirs(libdir, exist_ok=True)
    shutil.copy(os.path.join(TESTS_BIN, "libcorosched.so"), libdir)
    sh = script("libpath.sh", "#!/bin/sh\nLD_LIBRARY_PATH=%s\nexport LD_LIBRARY_PATH\nexec %s \"$@\"\n"
                % (libdir, exe))
    trace, p = check_scenario("script_libpath", [sh, "spawn_tree"], exe)
    objs = [r["path"] for r in trace.records if r["type"] == "object"]
    check(os.path.join(libdir, "libcorosched.so") in objs, "the copy was not attached: %s" % objs)
    check(not any(r.get("late") for r in trace.records if r["type"] == "object"),
          "an object was attached late")
