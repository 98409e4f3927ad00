"""corobpf top: the live view, driven in a real terminal (tmux: keys sent, the screen read back)
and as text snapshots when stdout is not a terminal. The ground truth is the demo's own design
(tools/demo/demo.c): four "db-worker-N" coroutines wait on the query channel, "metrics" sleeps
100 ms at a time, "acceptor" sleeps between requests; its last line says how it ended."""
import shlex

from harness import *  # noqa: F401,F403

DEMO = os.path.join(BUILD, "demo")
NAMES = ["acceptor", "db-worker-0", "db-worker-1", "db-worker-2", "db-worker-3", "metrics"]
# The screen's columns (top.c draw_table): PID ID NAME STATE FOR TID WAIT OBJECT SWITCH RUN,
# OBJECT left out on a terminal narrower than 106 columns.
ROW = re.compile(r"^(\d+)\s+(0x[0-9a-f]+)\s+(.+?)\s+(new|runnable|running|suspended|unknown)\s+"
                 r"(\S+)\s+(\d+)\s+(\S+)\s+(?:(\S+)\s+)?(\d+)\s+(\S+)\s*$")
TEXT_COLS = "PID ID STATE FOR TID REASON OBJECT SWITCHES RUNNING NAME"


class Tmux:
    """One tmux server of our own (its own socket), one window running cmd."""

    def __init__(self, name, cmd, width=160, height=45):
        self.sock = "corobpf-it-%s-%d" % (name, os.getpid())
        self.status = work(name + ".status")
        full = "%s; echo EXIT=$? > %s; sleep 600" % (cmd, shlex.quote(self.status))
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-s", "t",
                        "-x", str(width), "-y", str(height), full], check=True)

    def screen(self):
        p = subprocess.run(["tmux", "-L", self.sock, "capture-pane", "-p", "-t", "t"],
                           capture_output=True, text=True)
        return p.stdout

    def keys(self, *keys, literal=False):
        subprocess.run(["tmux", "-L", self.sock, "send-keys", "-t", "t"] + (["-l"] if literal
                                                                             else []) + list(keys),
                       check=True)

    def resize(self, width, height):
        subprocess.run(["tmux", "-L", self.sock, "resize-window", "-t", "t", "-x", str(width),
                        "-y", str(height)], check=True)

    def wait(self, pred, what, timeout=30):
        """The screen once pred(screen) holds; a busy machine gets the whole timeout."""
        end = time.time() + timeout
        s = ""
        while time.time() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.1)
        raise Failure("%s never showed on the screen; last screen:\n%s" % (what, s))

    def exit_status(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if os.path.exists(self.status):
                with open(self.status) as f:
                    t = f.read().strip()
                if t.startswith("EXIT="):
                    return int(t[5:])
            time.sleep(0.1)
        raise Failure("the command in tmux did not end; last screen:\n" + self.screen())

    def kill(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


def rows(screen):
    """The coroutine table's rows on the screen: dicts by column."""
    out = []
    for line in screen.splitlines():
        m = ROW.match(line)
        if m:
            out.append({"pid": int(m.group(1)), "id": m.group(2), "name": m.group(3),
                        "state": m.group(4), "for": m.group(5), "tid": int(m.group(6)),
                        "wait": m.group(7), "obj": m.group(8) or "", "switches": int(m.group(9)),
                        "run": m.group(10)})
    return out


def ns(d):
    """A duration as top prints it ("850us", "12.3ms", "2m03s") in ns."""
    m = re.match(r"^(\d+)m(\d+)s$", d)
    if m:
        return (int(m.group(1)) * 60 + int(m.group(2))) * 10**9
    m = re.match(r"^(\d+)h(\d+)m$", d)
    if m:
        return (int(m.group(1)) * 3600 + int(m.group(2)) * 60) * 10**9
    m = re.match(r"^([\d.]+)(ns|us|ms|s)$", d)
    check(m, "not a duration: %r" % d)
    return float(m.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]


def demo_state_ok(r):
    """What the demo's own design says each of its long-lived coroutines waits for: a db-worker
    for the next query on its channel, or in its query's sleep (0.2 to 1.5 ms: rare, but both
    snapshots of a CI run beside another test found db-worker-1 there)."""
    if r["name"].startswith("db-worker-"):
        return r["state"] == "suspended" and r["wait"] in ("wait", "sleep")
    if r["name"] in ("metrics", "acceptor"):
        return r["state"] == "suspended" and r["wait"] == "sleep"
    return True


def all_demo_rows_in_state(screen):
    rs = {r["name"]: r for r in rows(screen)}
    return all(n in rs for n in NAMES) and all(demo_state_ok(rs[n]) for n in NAMES)


def title_pid(screen):
    m = re.search(r"corobpf top - pid (\d+) \(demo\)", screen)
    return int(m.group(1)) if m else 0


def kill_quietly(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, TypeError):
        pass


@test
def top_shows_the_demo_coroutines_sorts_filters_and_details():
    """In a terminal: the demo's coroutines with the states its design gives them; sorting by
    name, by switch-ins and by running time orders the rows so (and reverses); / keeps the
    matching names; Enter shows the chosen coroutine's name and its recent states; a resized
    terminal is redrawn to its new width; q ends the screen."""
    t = Tmux("top-demo", "%s top -- %s -d 60 -r 20" % (COROBPF, DEMO))
    pid = 0
    try:
        s = t.wait(all_demo_rows_in_state, "the demo's coroutines in their states")
        pid = title_pid(s)
        check(pid > 0, "the title names the demo's pid:\n" + s)
        check(all(r["pid"] == pid for r in rows(s)), "rows of another pid:\n" + s)
        check(re.search(r"processes 1 +coroutines \d+: running", s), "header:\n" + s)
        check(re.search(r"events/s \d+ +events \d+ +lost \d+ +ring [\d.]+%", s), "header:\n" + s)
        # The four workers wait on the one query channel: on a screen where none of them is
        # in its query's sleep (which the first screen may show), they name one object.
        def workers_waiting(s):
            return len([r for r in rows(s) if r["name"].startswith("db-worker-") and
                        r["state"] == "suspended" and r["wait"] == "wait"]) == 4
        s = t.wait(workers_waiting, "the four db-workers waiting for a query")
        objs = {r["obj"] for r in rows(s) if r["name"].startswith("db-worker-")}
        check(len(objs) == 1 and objs.pop().startswith("0x"), "the workers' wait object:\n" + s)

        # space: paused, the view frozen (the demo runs on); space again: live.
        t.keys("Space")
        s = t.wait(lambda s: "[PAUSED]" in s.splitlines()[0], "[PAUSED]")
        frozen = s.splitlines()[1:3]
        time.sleep(2.5)  # longer than two refreshes: nothing may change meanwhile
        eq(t.screen().splitlines()[1:3], frozen, "the header while paused")
        t.keys("Space")
        t.wait(lambda s: "[PAUSED]" not in s.splitlines()[0] and s.splitlines()[2] != frozen[1],
               "the view live again")

        # 3: by name, ascending; again: descending.
        t.keys("3")
        s = t.wait(lambda s: "sort: NAME " in s.splitlines()[0] + " "
                   and "(reversed)" not in s.splitlines()[0], "sort: NAME")
        names = [r["name"] for r in rows(s)]
        eq(names, sorted(names), "rows sorted by name")
        t.keys("3")
        s = t.wait(lambda s: "sort: NAME (reversed)" in s, "sort: NAME (reversed)")
        names = [r["name"] for r in rows(s)]
        eq(names, sorted(names, reverse=True), "rows sorted by name, reversed")
        # 8: by switch-ins, most first; s: the next column, running time, most first.
        t.keys("8")
        s = t.wait(lambda s: "sort: SWITCHES" in s, "sort: SWITCHES")
        sw = [r["switches"] for r in rows(s)]
        eq(sw, sorted(sw, reverse=True), "rows sorted by switch-ins")
        t.keys("s")
        s = t.wait(lambda s: "sort: RUNNING" in s, "sort: RUNNING")
        run = [ns(r["run"]) for r in rows(s)]
        eq(run, sorted(run, reverse=True), "rows sorted by running time")
        t.keys("S")
        t.wait(lambda s: "sort: SWITCHES" in s, "S: back to SWITCHES")

        # /: the filter keeps the names holding it.
        t.keys("/")
        t.keys("db-worker", literal=True)
        t.keys("Enter")
        s = t.wait(lambda s: "filter: db-worker" in s.splitlines()[0] and
                   sorted(r["name"] for r in rows(s)) == NAMES[1:5], "the db-worker filter")
        t.keys("/")
        t.keys("BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace",
               "BSpace")
        t.keys("metrics", literal=True)
        t.keys("Enter")
        s = t.wait(lambda s: [r["name"] for r in rows(s)] == ["metrics"], "the metrics filter")
        mid = rows(s)[0]["id"]

        # Enter: the detail of the one selected, with its recent states.
        t.keys("Enter")
        s = t.wait(lambda s: "recent states" in s and len(re.findall(
            r"^\s+-\S+\s+suspended\s+sleep", s, re.M)) >= 3, "metrics' detail")
        check(re.search(r"^coroutine %s metrics \(pid %d\)" % (mid, pid), s, re.M),
              "the detail names the coroutine:\n" + s)
        check(re.search(r"^\s+-\S+\s+running\s", s, re.M), "it ran between sleeps:\n" + s)
        tl = [ln for ln in s.splitlines() if ln.startswith("last ")]
        check(tl and "." in tl[0] and "#" in tl[0], "the timeline shows sleeps and runs:\n" + s)
        t.keys("Escape")
        t.wait(lambda s: [r["name"] for r in rows(s)] == ["metrics"], "back to the table")

        # ?: help; any key back.
        t.keys("?")
        t.wait(lambda s: "corobpf top: keys" in s, "the help")
        t.keys("x")
        t.wait(lambda s: [r["name"] for r in rows(s)] == ["metrics"], "back from the help")

        # A smaller terminal: redrawn to it, every line within it.
        t.resize(100, 30)
        s = t.wait(lambda s: [r["name"] for r in rows(s)] == ["metrics"] and
                   max(len(ln) for ln in s.splitlines()) <= 100 and len(s.splitlines()) <= 30,
                   "the table at 100 columns")

        t.keys("q")
        t.wait(lambda s: "corobpf top - " not in s, "the screen closed by q", timeout=15)
        check(pid and os.path.exists("/proc/%d" % pid), "the demo died with q")
    finally:
        kill_quietly(pid)
        t.kill()


@test
def top_q_detaches_and_the_target_runs_on():
    """q in top -p: corobpf exits 0 at once, the target keeps running and ends as it would have,
    exit 0 and its own summary line."""
    out = work("top-q.demo.out")
    with open(out, "w") as f:
        demo = subprocess.Popen([DEMO, "-d", "14", "-r", "20"], stdout=f, stderr=subprocess.STDOUT)
    t = Tmux("top-q", "%s top -p %d" % (COROBPF, demo.pid))
    try:
        # Attached mid-life, the names fired at creation are not seen: the four db workers
        # are known by waiting on their one channel, metrics and the acceptor by sleeping.
        def demo_seen(s):
            rs = [r for r in rows(s) if r["pid"] == demo.pid and r["state"] == "suspended"]
            waits = [r for r in rs if r["wait"] == "wait"]
            return (len(waits) == 4 and len({r["obj"] for r in waits}) == 1 and
                    len([r for r in rs if r["wait"] == "sleep"]) >= 2)
        t.wait(demo_seen, "the demo's workers waiting and its sleepers")
        t.keys("q")
        eq(t.exit_status(timeout=20), 0, "corobpf top exit status after q")
        check(demo.poll() is None, "the demo did not survive corobpf top's q")
        eq(demo.wait(timeout=60), 0, "the demo's exit status")
        with open(out) as f:
            text = f.read()
        check(re.search(r"^demo: \d+ requests: \d+ served", text, re.M),
              "the demo's own summary line:\n" + text)
    finally:
        kill_quietly(demo.pid)
        demo.wait()
        t.kill()


def snapshots(text):
    """Text snapshots: [(header dict, [row dict])]."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("# corobpf top "):
            i += 1
            continue
        head = dict(kv.split("=", 1) for kv in lines[i][len("# corobpf top "):].split())
        eq(lines[i + 1], TEXT_COLS, "the column line")
        i += 2
        rs = []
        while i < len(lines) and not lines[i].startswith("# findings "):
            f = lines[i].split(None, 9)
            eq(len(f), 10, "fields of %r" % lines[i])
            rs.append({"pid": int(f[0]), "id": f[1], "state": f[2], "for": ns(f[3]),
                       "tid": int(f[4]), "wait": f[5], "obj": f[6], "switches": int(f[7]),
                       "run": ns(f[8]), "name": f[9]})
            i += 1
        check(i < len(lines), "a snapshot without its findings line")
        out.append((head, rs))
    return out


def only_snapshots(text):
    """The lines of text that are no part of a snapshot, as docs/top.md gives one: its header,
    the column line, a line per coroutine, "# findings N", at most 10 findings, an empty line."""
    stray, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if not lines[i].startswith("# corobpf top "):
            if lines[i] or i != len(lines) - 1:
                stray.append(lines[i])
            i += 1
            continue
        i += 1
        if i < len(lines) and lines[i] == TEXT_COLS:
            i += 1
        while i < len(lines) and len(lines[i].split(None, 9)) == 10 and \
                re.match(r"^\d+ 0x[0-9a-f]+ [a-z]+ ", lines[i]):
            i += 1
        m = re.match(r"^# findings (\d+)$", lines[i]) if i < len(lines) else None
        if not m:
            continue
        i += 1
        for _ in range(min(int(m.group(1)), 10)):
            if i < len(lines) and re.match(r"^\+[\d.]+s [a-z_]+ pid \d+ ", lines[i]):
                i += 1
        if i < len(lines) and lines[i] == "":
            i += 1
    return stray


@test
def top_prints_text_snapshots_when_stdout_is_no_terminal():
    """Not a terminal: a snapshot about every second with the documented header and columns;
    the demo's coroutines in them, with the pid and ids the JSONL written by -o gives them."""
    jl = work("top-text.jsonl")
    # --stall 0.09: every 100 ms sleep of metrics is a stall finding, shown as it is made.
    p = corobpf(["top", "--stall", "0.09", "-o", jl, "--", DEMO, "-d", "3.5", "-r", "20"],
                timeout=120)
    eq(p.returncode, 0, "corobpf top exit status (%s)" % p.stderr.strip())
    snaps = snapshots(p.stdout)
    check(len(snaps) >= 3, "%d snapshots in 3.5 s:\n%s" % (len(snaps), p.stdout))
    for head, _ in snaps:
        for k in ("elapsed", "processes", "coroutines", "running", "runnable", "suspended", "new",
                  "unknown", "events", "events/s", "lost", "ring"):
            check(k in head, "the header lacks %s: %r" % (k, head))
    trace = Trace(jl)
    pid = trace.processes[0]["pid"]
    ids = {c["name"]: c["id"] for c in trace.coroutines if c["pid"] == pid}
    good = False
    for head, rs in snaps[:-1]:
        by = {r["name"]: r for r in rs}
        eq(int(head["coroutines"]), len(rs), "the header's count of rows")
        check(all(r["pid"] == pid for r in rs), "rows of another pid")
        for n in NAMES:
            if n in by:
                eq(int(by[n]["id"], 16), int(ids[n], 16), "%s's id" % n)
        if all(n in by for n in NAMES) and all(demo_state_ok(by[n]) for n in NAMES):
            good = True
    check(good, "no snapshot shows the demo's coroutines in their states:\n" + p.stdout)
    # Findings as they are made: counted in each snapshot, the newest listed, and every one of
    # them in the JSONL written alongside.
    found = [int(m) for m in re.findall(r"^# findings (\d+)$", p.stdout, re.M)]
    eq(len(found), len(snaps), "findings lines")
    check(found == sorted(found) and found[-1] > 0, "findings counted as made: %r" % found)
    stalls = re.findall(r"^\+[\d.]+s stall pid %d %s metrics for ([\d.]+ms) sleep$"
                        % (pid, ids["metrics"]), p.stdout, re.M)
    check(stalls and all(90 <= ns(d) / 1e6 < 1000 for d in stalls),
          "metrics' 100 ms sleeps as stalls:\n" + p.stdout)
    jf = [r for r in trace.records if r["type"] == "finding"]
    check(len(jf) >= found[-1], "%d findings in the JSONL, %d shown" % (len(jf), found[-1]))
    check("\x1b" not in p.stdout, "an escape character in the snapshots")
    # stdout holds the snapshots and nothing else: the launched demo's own stdout (its summary
    # line) goes to stderr (docs/top.md).
    eq(only_snapshots(p.stdout), [], "lines on stdout that are no part of a snapshot")
    check(re.search(r"^demo: \d+ requests: \d+ served", p.stderr, re.M),
          "the demo's own summary line is not on stderr:\n" + p.stderr[-2000:])


@test
def top_hostile_names_reach_no_terminal_raw():
    """Coroutine names and a comm carrying escape sequences (suite_hostile_names' program):
    escaped in the text snapshots and on the screen, whose title and table stay in place."""
    import suite_hostile_names as hn
    exe = hn._build()
    prog = subprocess.Popen([exe, "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t = None
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == b"READY", "the program did not start: %r" % line)
        pid = int(line[1])
        p = subprocess.run([COROBPF, "top", "-d", "1.5", "-p", str(pid)], capture_output=True,
                           timeout=120)
        eq(p.returncode, 0, "corobpf top exit code (%r)" % p.stderr)
        out = hn._check_terminal_safe(p.stdout, "corobpf top's snapshots")
        for shown in hn.SHOWN:
            check(shown in out, "%r not in corobpf top's snapshots:\n%s" % (shown, out))
        t = Tmux("top-hostile", "%s top -p %d" % (COROBPF, pid))
        s = t.wait(lambda s: all(shown in s for shown in hn.SHOWN[:5]),
                   "the escaped names on the screen")
        check(s.splitlines()[0].startswith("corobpf top - pid %d (hn" % pid),
              "the title line moved or changed:\n" + s)
        t.keys("q")
        eq(t.exit_status(), 0, "corobpf top exit status after q")
        check(prog.poll() is None, "the program died with corobpf top")
    finally:
        prog.kill()
        prog.wait()
        if t:
            t.kill()
