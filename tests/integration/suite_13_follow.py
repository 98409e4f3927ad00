"""--follow: the processes a target forks and execs."""
from harness import *  # noqa: F401,F403


@test
def follow_forked_children():
    """--follow: the child a target forks is traced from the fork, its exit status kept."""
    trace, _, p, out, raw = trace_launch("follow", [FAULTS, "fork"], extra=["--follow"])
    m = re.search(r"CHILD (\d+) STATUS 7", p.stdout)
    check(m, "the target's output: %r" % p.stdout)
    parent, child = trace.header["pids"][0], int(m.group(1))
    check_clean(trace)
    procs = {r["pid"]: r for r in trace.processes}
    eq(sorted(procs), sorted([parent, child]), "processes")
    eq((procs[child]["mode"], procs[child]["ppid"], procs[child]["exe"]),
       ("forked", parent, FAULTS), "the child's process record")
    eq(faults_ids(trace, parent), ["0x100", "0x101", "0x102"], "the parent's coroutines")
    eq(faults_ids(trace, child), ["0x200", "0x201", "0x202"], "the child's coroutines")
    # Named even when the child is gone from /proc before corobpf reads it.
    eq([r["comm"] for r in trace.records if r["type"] == "thread" and r["tid"] == child],
       ["faults"], "the child's thread record")
    exits = {r["pid"]: r.get("exit_code") for r in trace.records if r["type"] == "process_exit"}
    eq(exits, {parent: 0, child: 7}, "exit codes")
    eq(trace.trailer["processes"], 2, "trailer processes")
    check_replay(out, raw)


@test
def follow_through_a_shell_and_exec():
    """--follow -- sh -c '...': no probes in the shell; what it forks and execs is traced."""
    out, err = work("follow-sh.jsonl"), work("follow-sh.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "--follow", "-v", "-o", out, "--", "sh", "-c",
                               "%s --wait fork; true" % FAULTS],
                              stdout=subprocess.PIPE, stderr=ef, text=True)
        line = tr.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        fpid = int(line[1])
        # Exec'd after the start: its objects are attached while its exec waits (the exec gate).
        wait_for_attached(err, "/faults")
        os.kill(fpid, signal.SIGUSR1)
        rest, _ = tr.communicate(timeout=60)
    eq(tr.returncode, 0, "corobpf exit code")
    m = re.search(r"CHILD (\d+) STATUS 7", rest)
    check(m and "DONE fork 3" in rest, "the program's output: %r" % rest)
    child = int(m.group(1))
    trace = Trace(out)
    check_clean(trace)
    shell = trace.header["pids"][0]
    procs = {r["pid"]: r for r in trace.processes}
    eq(sorted(procs), sorted([shell, fpid, child]), "processes: the shell, its child, its grandchild")
    eq([procs[shell]["mode"], procs[fpid]["mode"], procs[child]["mode"]],
       ["launched", "forked", "forked"], "modes")
    eq([procs[fpid]["ppid"], procs[child]["ppid"]], [shell, fpid], "parents")
    eq([r["pid"] for r in trace.records if r["type"] == "exec" and r["comm"] == "faults"],
       [fpid], "the exec")
    eq(faults_ids(trace, fpid), ["0x100", "0x101", "0x102"], "coroutines of the exec'd program")
    eq(faults_ids(trace, child), ["0x200", "0x201", "0x202"], "coroutines of its child")
    eq(faults_ids(trace, shell), [], "coroutines of the shell")
    eq(trace.trailer["lost"]["late_attach"], 0, "objects attached after their exec")
    exits = {r["pid"]: r.get("exit_code") for r in trace.records if r["type"] == "process_exit"}
    eq(exits, {shell: 0, fpid: 0, child: 7}, "exit codes")


@test
def follow_short_lived_programs_do_not_block_later_ones():
    """A program exec'd under --follow that is gone before its objects are attached: the
    next process running the same binary is attached anyway."""
    out = work("follow-short.jsonl")
    p = corobpf(["--follow", "-o", out, "--", "sh", "-c",
                 "%s burst 3; %s linger 500" % (FAULTS, FAULTS)])
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip())
    check("DONE burst 3" in p.stdout and "DONE linger 2" in p.stdout, "output: %r" % p.stdout)
    trace = Trace(out)
    linger = [c for c in trace.coroutines if c["id"] in ("0x500", "0x501")]
    # 0x501 fires half a second after the program starts: long after any attach.
    check("0x501" in [c["id"] for c in linger], "the second program was never traced: %s" %
          sorted((c["pid"], c["id"]) for c in trace.coroutines))
    eq(trace.trailer["lost"]["attach_failures"], 0, "attach failures")
    # The exec gate holds the first program until it is attached: nothing of it is missed.
    eq(sorted(c["id"] for c in trace.coroutines if c["id"].startswith("0x40")),
       ["0x400", "0x401", "0x402"], "coroutines of the short-lived program")
    eq(trace.trailer["lost"]["late_attach"], 0, "objects attached after their exec")


@test
def follow_off_the_target_nothing_is_traced():
    """Probes attached for every process under --follow: an unrelated run of the same program stays out."""
    out, err = work("follow-other.jsonl"), work("follow-other.err")
    target = subprocess.Popen([FAULTS, "--wait", "linger", "1500"], stdout=subprocess.PIPE, text=True)
    pid = int(target.stdout.readline().split()[1])
    tr, ef, err = start_tracer(["--follow", "-o", out, "-p", str(pid)], "follow-other")
    wait_for(err, "tracing")
    other = run([FAULTS, "fork"])
    eq(other.returncode, 0, "the unrelated program's exit code")
    target.send_signal(signal.SIGUSR1)
    eq(target.communicate(timeout=30)[0], "RAN 0x500\nDONE linger 2\n", "the target's output")
    eq(tr.wait(timeout=30), 0, "corobpf exit code")
    ef.close()
    trace = Trace(out)
    check_clean(trace)
    eq([r["pid"] for r in trace.processes], [pid], "processes")
    eq(faults_ids(trace, pid), ["0x500", "0x501"], "coroutines")
