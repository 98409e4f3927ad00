"""The command line tells the truth: every command's --help and every exit code, checked against
README.md's "Exit codes" paragraph and against what the program does.

- Each command main.c dispatches (the trace help's synopsis names them) prints its own usage
  line; every option its --help lists is accepted by it, and every option another command
  lists but it does not is refused (exit 2).
- Each --help's exit codes are the ones that command can end with, each meaning what the
  README's entry for that number says.
- Each exit code that can be provoked without special hardware is provoked, and the code
  expected is looked up in the README paragraph by what it says, so that renumbering either
  side fails here.
- -q does what its --help line says, in each command.
"""
import json
import signal

from harness import *  # noqa: F401,F403

README = os.path.join(ROOT, "README.md")
SCEN = os.path.join(TESTS_BIN, "scenarios")

# The commands main.c dispatches ("" is tracing, the default) and the codes each can end with,
# from reading session.c and capture.c: report replays a file (no BPF, no target, no command);
# ps looks at running processes (no command to launch); nothing but a replay reads a capture.
COMMANDS = ("", "report", "ps", "top")
CAN_EXIT = {
    "": {"0", "1", "2", "3", "4", "5", "6", "7", "9", "128+N"},
    "top": {"0", "1", "2", "3", "4", "5", "6", "7", "9", "128+N"},
    "ps": {"0", "1", "2", "3", "4", "5", "6", "7", "128+N"},
    "report": {"0", "1", "2", "7", "8", "128+N"},
}
# What each code's entry says, in the README and in every --help that lists it.
MEANS = {"0": "ok", "1": "runtime failure", "2": "usage", "3": "privilege", "4": "BTF",
         "5": "no such process", "6": "no corobpf probes", "7": "cannot be written",
         "8": "truncated", "9": "cannot be run", "128+N": "signal N"}
MEANS_IN = {("report", "1"): "cannot be opened"}

# A value each option taking one is tried with, and what it needs beside it to be accepted.
VALUES = {"pid": None, "comm": "x", "exec-gate": "5", "output": "NEW.jsonl", "format": "jsonl",
          "coroutine-tracks": "10", "raw": "NEW.raw", "duration": "1", "ring-size": "32",
          "switch": "ucontext", "stacks": "dwarf", "stack-bytes": "1024", "sample-hz": "10",
          "probe-path": "trap", "flight": "1", "flight-mb": "2", "dump-on": "stall",
          "stall": "2", "long-run": "60", "sched-latency": "20", "blocking": "20",
          "spawn-storm": "50", "slow-span": "db=5", "interval": "2", "max-coroutines": "1000",
          "max-coroutines-per-process": "1000", "max-open-spans": "1000",
          "max-open-spans-per-process": "1000", "queue-memory": "64",
          "store-timeout": "connect=5"}
NEEDS = {"comm": ["-a"], "sample-hz": ["--stacks"], "stack-bytes": ["--stacks"],
         "flight-mb": ["--flight", "1"], "dump-on": ["--flight", "1"]}


def entries(text):
    """{code: what it says} from an "Exit codes: N text; N text..." paragraph, split at the
    semicolons outside parentheses."""
    out, depth, cur = {}, 0, []
    for ch in text + ";":
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0:
            piece = " ".join("".join(cur).split()).rstrip(".")
            cur = []
            m = re.match(r"^(\d+(?:\+N)?) (.*)$", piece)
            check(m, "exit code entry %r does not start with its number" % piece)
            check(m.group(1) not in out, "exit code %s given twice" % m.group(1))
            out[m.group(1)] = m.group(2)
        else:
            cur.append(ch)
    return out


def readme_exit_codes():
    with open(README) as f:
        text = f.read()
    m = re.search(r"^Exit codes: (.*?)(?:\n\n|\Z)", text, re.S | re.M)
    check(m, "README.md has no \"Exit codes:\" paragraph")
    # Its last sentence points at --help and is no entry.
    body = re.split(r"\.\s+Each command's", m.group(1))[0]
    return entries(body.replace("`", ""))


def readme_code(says):
    """The one README code whose entry says `says`."""
    codes = [c for c, t in readme_exit_codes().items() if says in t]
    eq(len(codes), 1, "README exit codes whose entry says %r" % says)
    return codes[0]


def readme_int(says):
    code = readme_code(says)
    check(code.isdigit(), "README: %r is said of %s, not of one number" % (says, code))
    return int(code)


def help_text(cmd):
    p = corobpf(([cmd] if cmd else []) + ["--help"])
    eq(p.returncode, 0, "corobpf %s --help exit code" % cmd)
    eq(p.stderr, "", "corobpf %s --help stderr" % cmd)
    return p.stdout


def help_options(text):
    """{long name: takes a value} for the options a --help lists."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^ {2,6}(?:-\S, )?--([a-z][a-z0-9-]*)(\[?=\S+)?(?:\s|$)", line)
        if m and m.group(1) not in ("help", "usage", "version"):
            out[m.group(1)] = bool(m.group(2))
    return out


def help_exit_codes(text):
    m = re.search(r"^Exit codes: (.*?)(?:\n\n|\Z)", text, re.S | re.M)
    check(m, "no \"Exit codes:\" paragraph in:\n" + text[-600:])
    return entries(m.group(1))


def no_such_pid():
    pid = 4000000
    while os.path.exists("/proc/%d" % pid):
        pid += 1
    return str(pid)


def option_args(name, takes, scratch):
    args = list(NEEDS.get(name, []))
    if not takes:
        return args + ["--" + name]
    check(name in VALUES, "--%s is listed but this test has no value for it: add one to VALUES"
          % name)
    v = VALUES[name]
    if v is None:
        return args + ["--" + name, no_such_pid()]
    if v.startswith("NEW"):
        v = os.path.join(scratch, "opt-%s%s" % (name, v[3:]))
    return args + ["--%s=%s" % (name, v)]


def base_args(cmd, scratch):
    """Arguments after which the command ends, before tracing anything, with a code that is
    not usage: an output that exists (7) and a pid that does not (5) for the live commands (the
    options that open no output, --force and --flight, reach the pid); a capture that does not
    exist (1) for report."""
    if cmd == "report":
        return [os.path.join(scratch, "no-such-capture.raw")], {1}
    existing = os.path.join(scratch, "exists.jsonl")
    with open(existing, "w") as f:
        f.write("keep\n")
    return ["-p", no_such_pid(), "-o", existing], {5, 7}


@test
def cli_every_command_prints_its_own_help():
    """Each command's --help: its own usage line, options it takes and no other command's."""
    trace_help = help_text("")
    # The trace help's synopsis names every other command, each with a --help of its own.
    named = set(re.findall(r"^  corobpf (\w+) ", trace_help, re.M))
    eq(sorted(named), sorted(c for c in COMMANDS if c), "commands the trace help names")
    scratch = work("cli-help")
    os.makedirs(scratch, exist_ok=True)
    helps = {c: (trace_help if not c else help_text(c)) for c in COMMANDS}
    opts = {c: help_options(h) for c, h in helps.items()}
    every = {}
    for c in COMMANDS:
        every.update(opts[c])
    for c in COMMANDS:
        h = helps[c]
        first = h.splitlines()[0]
        want = "Usage: corobpf %s[OPTION...]" % (c + " " if c else "")
        check(first.startswith(want), "corobpf %s --help's first line is %r, not %r..."
              % (c, first, want))
        if c == "ps" or c == "report":
            check("-- CMD" not in h, "corobpf %s --help speaks of -- CMD, which %s refuses"
                  % (c, c))
        check("quiet" in opts[c], "corobpf %s --help does not list -q" % c)
        base, ends = base_args(c, scratch)
        prefix = [c] if c else []
        for name, takes in sorted(every.items()):
            args = prefix + base + option_args(name, takes, scratch)
            p = corobpf(args)
            if name in opts[c]:
                check(p.returncode in ends, "corobpf %s --help lists --%s, but %s exits %d "
                      "(want one of %s): %s" % (c, name, " ".join(args), p.returncode,
                                                sorted(ends), p.stderr.strip()[:300]))
            else:
                eq(p.returncode, 2, "corobpf %s takes --%s, which its --help does not list "
                   "(%s): exit code" % (c, name, " ".join(args)))
    # Nothing above was written over.
    with open(os.path.join(scratch, "exists.jsonl")) as f:
        eq(f.read(), "keep\n", "the existing output")


@test
def cli_help_exit_codes_are_the_commands_and_the_readmes():
    """Each --help lists exactly the codes its command can end with, each meaning what the
    README says of that number; the README lists every code any command can end with."""
    readme = readme_exit_codes()
    every = set()
    for c in COMMANDS:
        every |= CAN_EXIT[c]
        listed = help_exit_codes(help_text(c))
        eq(sorted(listed), sorted(CAN_EXIT[c]), "exit codes corobpf %s --help lists" % c)
        for code, text in listed.items():
            says = MEANS_IN.get((c, code), MEANS[code])
            check(says in text, "corobpf %s --help: %s %r does not say %r" % (c, code, text, says))
            check(code in readme and says in readme[code],
                  "README's exit code %s (%r) does not say %r, as corobpf %s --help does"
                  % (code, readme.get(code), says, c))
    eq(sorted(readme), sorted(every), "exit codes in README's paragraph")


@test
def cli_exit_codes_as_the_readme_says():
    """Every code that can be provoked here, provoked, with the README's number for it and a
    message naming what failed."""
    d = work("cli-codes")
    os.makedirs(d, exist_ok=True)
    usage = readme_int("usage")
    # A capture that cannot be opened: missing, or a directory.
    for what in (os.path.join(d, "missing.raw"), d):
        p = corobpf(["report", what, "-o", os.path.join(d, "r.jsonl")])
        eq(p.returncode, readme_int("cannot be opened"), "report %s: exit code" % what)
        check(what in p.stderr and p.stderr.count("\n") == 1,
              "report %s: one line naming it:\n%s" % (what, p.stderr))
        check(not os.path.exists(os.path.join(d, "r.jsonl")), "an output was left behind")
    # An output of no known format, for every command: usage, before anything runs.
    bad = os.path.join(d, "trace.xyz")
    pid = no_such_pid()
    for args in (["-o", bad, "--", "/bin/true"], ["-o", bad, "-p", pid],
                 ["ps", "-o", bad, "-p", pid], ["top", "--batch", "-o", bad, "-p", pid],
                 ["report", "-o", bad, os.path.join(d, "missing.raw")]):
        p = corobpf(args)
        eq(p.returncode, usage, "%s: exit code" % " ".join(args))
        check(bad in p.stderr and "extension" in p.stderr, p.stderr)
        check(not os.path.exists(bad), "%s made %s" % (" ".join(args), bad))
    # No such process, for each live command.
    for args in (["-p", pid], ["ps", "-p", pid], ["top", "--batch", "-d", "1", "-p", pid]):
        p = corobpf(args)
        eq(p.returncode, readme_int("no such process"), "%s: exit code" % " ".join(args))
        check("PID %s" % pid in p.stderr, p.stderr)
    # No probes and no switch functions to follow.
    p = corobpf(["--switch", "none", "--", "/bin/true"])
    eq(p.returncode, readme_int("no corobpf probes"), "--switch none -- /bin/true: exit code")
    # Missing privilege: an unprivileged user, no capabilities.
    check(shutil.which("setpriv"), "setpriv (util-linux) is needed for this test")
    p = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             COROBPF, "-p", pid])
    eq(p.returncode, readme_int("privilege"), "-p as nobody: exit code (%s)" % p.stderr.strip())
    # A command that cannot be run.
    p = corobpf(["--", os.path.join(d, "no-such-program")])
    eq(p.returncode, readme_int("cannot be run"), "-- a missing program: exit code")
    check("no-such-program" in p.stderr, p.stderr)
    # The command's own status, a capture of it, and an output that exists.
    raw, out = os.path.join(d, "cap.raw"), os.path.join(d, "cap.jsonl")
    p = corobpf(["-q", "-o", out, "--raw", raw, "--", SCEN, "--exit-code", "42", "yield"])
    check(readme_code("command's own") == "0", "README: the command's status is not said "
          "under 0 ok")
    eq(p.returncode, 42, "-- CMD exiting 42: exit code (%s)" % p.stderr.strip())
    for args in (["-o", out, "--", SCEN, "yield"], ["report", raw, "-o", out]):
        p = corobpf(args)
        eq(p.returncode, readme_int("cannot be written"), "%s: exit code" % " ".join(args))
        check(out in p.stderr and "--force" in p.stderr, p.stderr)
    # A truncated capture, and one corrupt in the middle: replayed up to the damage.
    with open(raw, "rb") as f:
        data = f.read()
    cut, bent = os.path.join(d, "cut.raw"), os.path.join(d, "bent.raw")
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 100])
    with open(bent, "wb") as f:
        mid = len(data) // 2
        f.write(data[:mid] + bytes(b ^ 0xff for b in data[mid:mid + 64]) + data[mid + 64:])
    for damaged in (cut, bent):
        again = damaged + ".jsonl"
        p = corobpf(["report", "-q", damaged, "-o", again])
        eq(p.returncode, readme_int("truncated"), "report %s: exit code" % damaged)
        check(damaged in p.stderr, p.stderr)
        check("input_error" in Trace(again).trailer, "%s does not say the capture was damaged"
              % again)


@test
def cli_signals_as_the_readme_says():
    """128+N: a command killed by signal N, and corobpf stopped by a second signal while it
    waits for its command (which it then leaves running)."""
    code = readme_code("killed the command")
    eq(code, "128+N", "README's code for a command killed by a signal")
    p = corobpf(["-q", "--", "sh", "-c", "kill -TERM $$"])
    eq(p.returncode, 128 + signal.SIGTERM, "-- a command killed by SIGTERM: exit code")
    check(readme_code("a second time") == "128+N", "README: a second signal is not under 128+N")
    out = work("cli-sig.jsonl")
    tr, ef, err = start_tracer(["-o", out, "--", "sh", "-c", "trap '' TERM; exec sleep 60"],
                               "cli-sig")
    child = None
    try:
        wait_for(err, "tracing")
        with open(err) as f:
            child = int(re.search(r"\(pid (\d+)\)", f.read()).group(1))
        # Once it ignores SIGTERM: its shell set the trap and became sleep.
        for _ in range(500):
            with open("/proc/%d/comm" % child) as f:
                if f.read().strip() == "sleep":
                    break
            time.sleep(0.01)
        tr.send_signal(signal.SIGTERM)  # passed on to the command, which ignores it (and the
        # same pid runs sleep after the exec: killed below)
        wait_for(err, "waiting for")
        tr.send_signal(signal.SIGINT)
        eq(tr.wait(timeout=30), 128 + signal.SIGINT, "exit code after a second signal")
        check(os.path.exists("/proc/%d" % child), "the command did not keep running")
        Trace(out)  # finished before the wait: whole
    finally:
        ef.close()
        if tr.poll() is None:
            tr.kill()
            tr.wait()
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass


@test
def cli_quiet_does_what_it_says():
    """-q: no summary and no messages but errors and warnings (trace, ps), no summary and no
    analysis (report; --json still prints its document)."""
    d = work("cli-quiet")
    os.makedirs(d, exist_ok=True)
    raw = os.path.join(d, "q.raw")
    p = corobpf(["-o", os.path.join(d, "loud.jsonl"), "--", SCEN, "yield"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    check("corobpf summary" in p.stderr and "wrote" in p.stderr, "no summary without -q:\n"
          + p.stderr)
    p = corobpf(["-q", "-o", os.path.join(d, "q.jsonl"), "--raw", raw, "--", SCEN, "yield"])
    eq(p.returncode, 0, "exit code with -q (%s)" % p.stderr.strip())
    eq(quiet_stderr(p.stderr), "", "stderr of a clean run with -q")
    Trace(os.path.join(d, "q.jsonl"))

    p = corobpf(["report", raw])
    eq(p.returncode, 0, "report exit code")
    check("corobpf summary" in p.stdout, "report prints no summary without -q")
    p = corobpf(["report", "-q", raw])
    eq((p.returncode, p.stdout, p.stderr), (0, "", ""), "report -q: exit code, stdout, stderr")
    p = corobpf(["report", "-q", "--json", raw])
    eq((p.returncode, p.stderr), (0, ""), "report -q --json: exit code, stderr")
    check(isinstance(json.loads(p.stdout), dict), "report -q --json printed no document")

    target, pid = start_waiting("scenarios", "yield")
    try:
        p = corobpf(["ps", "-p", str(pid), "-d", "0.3"])
        eq(p.returncode, 0, "ps exit code (%s)" % p.stderr.strip())
        check("tracing" in p.stderr, "ps says nothing on stderr without -q:\n" + p.stderr)
        p = corobpf(["ps", "-q", "-p", str(pid), "-d", "0.3"])
        eq((p.returncode, quiet_stderr(p.stderr)), (0, ""), "ps -q: exit code, stderr")
        check(p.stdout.strip(), "ps -q printed no table")
    finally:
        target.kill()
        target.wait()


@test
def cli_help_starts_with_the_commands():
    """corobpf --help names every command in its first lines, before the targets and options;
    every --help is laid out as argp lays out what fits: no line of blanks alone, no line of a
    table wrapped to the left margin."""
    text = help_text("")
    first = text.splitlines()[:12]
    for c in COMMANDS:
        if c:
            check(any(l.startswith("  corobpf %s " % c) for l in first),
                  "corobpf --help does not name `corobpf %s` in its first lines:\n%s"
                  % (c, "\n".join(first)))
    for c in COMMANDS:
        lines = help_text(c).splitlines()
        blank = [i + 1 for i, l in enumerate(lines) if l and not l.strip()]
        eq(blank, [], "corobpf %s --help: lines of blanks alone (a line that filled the "
           "width exactly)" % c)
        # The text before the options: a table row (indented) is never followed, within its
        # table, by a line at the margin (a row too long for the width, wrapped).
        body = lines[1:next(i for i, l in enumerate(lines) if re.match(r"^  -|^      --", l))]
        for prev, l in zip(body, body[1:]):
            if prev.startswith("  ") and l and not l.startswith(" ") and not l.endswith(":"):
                check(False, "corobpf %s --help: a table row wrapped to the margin: %r after %r"
                      % (c, l, prev))


@test
def cli_format_lists_every_format():
    """-f's --help line lists every format -f takes: the names the program itself offers when
    an output's extension tells none (`give -f a|b|...`), each of which -f accepts."""
    d = work("cli-format")
    os.makedirs(d, exist_ok=True)
    p = corobpf(["-o", os.path.join(d, "trace.xyz"), "-p", no_such_pid()])
    m = re.search(r"give -f ([a-z|]+)", p.stderr)
    check(m, "the extension error offers no -f names: " + p.stderr)
    names = m.group(1).split("|")
    check(len(names) >= 5, "-f names offered: %s" % names)
    for c in ("", "report", "top"):
        h = " ".join(help_text(c).split())
        fm = re.search(r"-f, --format=FMT (.*?)(?= -[a-zA-Z?], | --[a-z])", h)
        check(fm, "corobpf %s --help has no -f line" % c)
        listed = re.findall(r"\b([a-z]+)\b", fm.group(1).split(":", 1)[1])
        missing = [n for n in names if n not in listed]
        eq(missing, [], "formats -f takes that corobpf %s --help's -f line does not list" % c)
    for n in names:
        out = "postgresql://127.0.0.1:1/x" if n.startswith("postgres") else \
            os.path.join(d, "out.any")
        p = corobpf(["-f", n, "-o", out, "-p", no_such_pid()])
        check(p.returncode != readme_int("usage") and "unknown format" not in p.stderr,
              "-f %s is refused: exit %d, %s" % (n, p.returncode, p.stderr.strip()))
    p = corobpf(["-f", "nosuch", "-o", os.path.join(d, "o"), "-p", no_such_pid()])
    eq(p.returncode, readme_int("usage"), "-f nosuch: exit code")
    for n in names:
        check(n in p.stderr, "-f nosuch's error does not list %s: %s" % (n, p.stderr.strip()))


@test
def cli_stacks_takes_its_mode_after_a_space():
    """`--stacks fp` is `--stacks=fp` (the mode is optional, so argp alone would refuse "fp"
    as an argument), in every command that takes --stacks: --stack-bytes, which only dwarf
    takes, is refused with fp and accepted with dwarf."""
    pid = no_such_pid()
    for prefix in ([], ["ps"], ["top", "--batch"]):
        for mode, code in (("fp", readme_int("usage")), ("dwarf", readme_int("no such process"))):
            args = prefix + ["--stacks", mode, "--stack-bytes", "1024", "-p", pid]
            p = corobpf(args)
            eq(p.returncode, code, "%s: exit code (%s)" % (" ".join(args), p.stderr.strip()))
            if mode == "fp":
                check("--stack-bytes sizes --stacks=dwarf" in p.stderr, p.stderr)
        p = corobpf(prefix + ["--stacks", "fp", "-p", pid])
        eq(p.returncode, readme_int("no such process"), "%s --stacks fp -p PID: exit code (%s)"
           % (" ".join(prefix), p.stderr.strip()))
    p = corobpf(["--stacks", "nosuch", "-p", pid])
    eq(p.returncode, readme_int("usage"), "--stacks nosuch: exit code")


@test
def cli_launch_failure_says_only_why():
    """A command that cannot be run: one line on stderr, the error naming it, and nothing said
    before it as if tracing had begun (no "tracing", no probe path)."""
    d = work("cli-launch")
    os.makedirs(d, exist_ok=True)
    for cmd in (d, os.path.join(d, "no-such-program")):
        p = corobpf(["-o", os.path.join(d, "t.jsonl"), "--", cmd])
        eq(p.returncode, readme_int("cannot be run"), "-- %s: exit code" % cmd)
        lines = p.stderr.splitlines()
        eq(len(lines), 1, "-- %s: lines on stderr:\n%s" % (cmd, p.stderr))
        check(cmd in lines[0] and "error" in lines[0], "-- %s: %s" % (cmd, lines[0]))
        check(not os.path.exists(os.path.join(d, "t.jsonl")), "an output was left behind")
