"""The docs tell the truth: what README.md and docs/ show is checked against the program.

- Every field a JSONL trace carries is described in its record's section of docs/jsonl.md,
  every `ev` and finding kind is in its table, and the trailer's counter lists are the
  program's own.
- docs/sqlite.md's table of tables is the schema, column for column both ways; the meta keys
  and the value lists it gives hold every value the program writes; the CSV's columns are the
  ones it lists.
- Every command shown in README.md and docs/ runs here as shown (example pids, programs and
  files are replaced by real ones) and writes what it names, or is listed in NOT_RUN with the
  reason it cannot run in a test.

The traces checked are real ones: the demo with stacks and samples, the findings programs,
a program switching through ucontext, and a shell that forks and execs under --follow.
"""
import csv
import glob
import itertools
import json
import re
import shlex
import sqlite3

from harness import *  # noqa: F401,F403

DOCS = os.path.join(ROOT, "docs")
DEMO = os.path.join(BUILD, "demo")

_traces = {}


def doc(name):
    with open(os.path.join(ROOT, name) if name == "README.md" else os.path.join(DOCS, name)) as f:
        return f.read()


def doc_traces():
    """The traces every doc check reads (made once): JSONL records, SQLite files, CSV files."""
    if _traces:
        return _traces
    runs = [("demo", ["--stacks", "--sample-hz", "199"], [DEMO, "-d", "2"])]
    quiet = ["--sched-latency", "600000", "--blocking", "600000"]
    for prog_arg in ("lost_wakeup", "spawn_storm", "unclosed_span", "stall"):
        runs.append(("bug-" + prog_arg, quiet + ["--long-run", "600000"],
                     [os.path.join(TESTS_BIN, "bugs"), prog_arg]))
    runs.append(("bug-long_run", quiet + ["--stacks", "--sample-hz", "499"],
                 [os.path.join(TESTS_BIN, "bugs"), "long_run"]))
    runs.append(("uctx", [], [os.path.join(TESTS_BIN, "uctx"), "rr", "5", "4"]))
    runs.append(("follow", ["--follow"], ["sh", "-c", "%s -d 1; exec %s -d 1" % (DEMO, DEMO)]))
    records, dbs, csvs, pairs = [], [], [], []
    for name, extra, cmd in runs:
        out, db, cs = work("docs-%s.jsonl" % name), work("docs-%s.db" % name), \
            work("docs-%s.csv" % name)
        raw = work("docs-%s.raw" % name)
        p = corobpf(["-o", out, "-o", db, "-o", cs, "--raw", raw] + extra + ["--"] + cmd)
        pairs.append((raw, out))
        eq(p.returncode, 0, "corobpf -- %s exit code (%s)" % (" ".join(cmd), p.stderr.strip()))
        with open(out) as f:
            records += [json.loads(l) for l in f]
        dbs.append(db)
        csvs.append(cs)
    _traces.update(records=records, dbs=dbs, csvs=csvs, pairs=pairs)
    return _traces


def backticked(text):
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", text))


def json_keys(text):
    return set(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)":', text))


def sections(md):
    """{record type: the text of its section} for the `## `type`, `type`` headings."""
    out = {}
    parts = re.split(r"^## ", md, flags=re.M)
    for part in parts[1:]:
        head, _, body = part.partition("\n")
        for t in re.findall(r"`([a-z_]+)`", head):
            out[t] = out.get(t, "") + body
    return out


def table_rows(text):
    """The rows of the markdown tables in text: lists of cells (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.match(r"^\|[-| ]+\|$", line):
            continue
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def strip_parens(s):
    """s without its parenthesized parts (nested ones too), and those parts."""
    out, inner, depth, cur = [], [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
            if depth == 1:
                cur = []
                continue
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                inner.append("".join(cur))
                continue
        (cur if depth else out).append(ch)
    return "".join(out), inner


@test
def docs_jsonl_describes_every_field():
    """Every field of every JSONL record the program writes is in its section of docs/jsonl.md."""
    md = doc("jsonl.md")
    secs = sections(md)
    recs = doc_traces()["records"]
    ev_rows = {ev: r[1] for r in table_rows(secs["event"]) if r[0].startswith("`")
               for ev in backticked(r[0])}
    kinds = {k for r in table_rows(secs["finding"]) if r[0].startswith("`")
             for k in backticked(r[0])}
    missing = set()
    # Said of every record in the introduction; the fields --stacks adds to other records are
    # described, quoted, in the `stack` section.
    everywhere = backticked(md.split("\n## ")[0])
    stack_fields = set(re.findall(r'"([a-z_]+)"', secs["stack"]))
    for r in recs:
        t = r["type"]
        check(t in secs, "record type %r has no section in docs/jsonl.md" % t)
        known = backticked(secs[t]) | json_keys(secs[t]) | everywhere | stack_fields
        if t == "event":
            check(r["ev"] in ev_rows, "event %r is not in docs/jsonl.md's table" % r["ev"])
        if t == "finding":
            check(r["kind"] in kinds, "finding kind %r is not in docs/jsonl.md's table" % r["kind"])
        for k, v in r.items():
            if k not in known:
                missing.add("%s.%s" % (t, k))
            if isinstance(v, dict) and t in ("trailer", "coroutine"):
                for kk in v:
                    # Keys that are values of a documented list (reasons, kinds) count too.
                    if kk not in known and kk not in ev_rows and kk not in kinds:
                        missing.add("%s.%s.%s" % (t, k, kk))
    eq(sorted(missing), [], "fields written but not described in docs/jsonl.md")
    # The order paragraph names every record type.
    order = re.search(r"Records come in this order:(.*?)\n\n", md, re.S).group(1)
    types = {r["type"] for r in recs}
    eq(sorted(types - backticked(order)), [], "record types missing from the order paragraph")


@test
def docs_report_of_jsonl_is_report_of_raw():
    """docs/jsonl.md: `corobpf report` reads a JSONL trace through the same analysis as the raw
    capture it was written from: the same numbers, findings and tables, but for what stacks and
    samples give (not read back from JSONL)."""
    for raw, out in doc_traces()["pairs"]:
        a = corobpf(["report", "--json", raw])
        b = corobpf(["report", "--json", out])
        eq(a.returncode, 0, "report %s (%s)" % (raw, a.stderr.strip()))
        eq(b.returncode, 0, "report %s (%s)" % (out, b.stderr.strip()))
        ja, jb = json.loads(a.stdout), json.loads(b.stdout)
        # As docs/jsonl.md says: stacks and samples are not read back from JSONL.
        for f in ja.get("findings", []):
            for k in ("stack", "samples", "key_samples", "key_depth", "key_frame"):
                f.pop(k, None)
        diff = sorted(k for k in set(ja) | set(jb) if ja.get(k) != jb.get(k))
        check(not diff, "%s: report of the JSONL differs from report of the raw capture in %s"
              % (os.path.basename(out), ", ".join("%s (%s vs %s)" % (k, str(ja.get(k))[:80],
                                                                    str(jb.get(k))[:80])
                                                   for k in diff)))


@test
def docs_jsonl_trailer_counters_are_the_programs():
    """The trailer example's `lost` and `anomalies` keys are exactly what the program writes."""
    secs = sections(doc("jsonl.md"))
    trailer = [r for r in doc_traces()["records"] if r["type"] == "trailer"][0]
    for obj in ("lost", "anomalies"):
        m = re.search(r'"%s":\{(.*?)\}' % obj, secs["trailer"], re.S)
        check(m, "docs/jsonl.md's trailer example has no %r object" % obj)
        eq(sorted(json_keys(m.group(1))), sorted(trailer[obj]), "trailer %s keys" % obj)


def sqlite_doc_tables():
    """{table: (columns, {column: documented values}, rest of the cell)} from docs/sqlite.md."""
    secs = re.split(r"^## ", doc("sqlite.md"), flags=re.M)
    tables_sec = [s for s in secs if s.startswith("Tables")][0]
    out = {}
    for row in table_rows(tables_sec):
        if len(row) != 3 or not row[0].startswith("`"):
            continue
        name, cell = row[0].strip("`"), row[2]
        extra = ""
        if name == "meta":  # `key`, `value`: the keys
            cell, _, extra = cell.partition(":")
        cols, values = [], {}
        for piece in re.split(r",(?![^(]*\))", cell):
            bare, inner = strip_parens(piece)
            names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", bare)
            cols += names
            if names and inner:
                values[names[-1]] = set(re.findall(r"`([^`]+)`", " ".join(inner)))
        out[name] = (cols, values, extra)
    return out


@test
def docs_sqlite_tables_are_the_schema():
    """docs/sqlite.md's tables and columns are the schema written, both ways; its meta keys and
    value lists hold every key and value in the traces."""
    documented = sqlite_doc_tables()
    meta_doc = set()
    cols, _, extra = documented["meta"]
    bare, _ = strip_parens(extra)
    meta_doc = backticked(bare)
    seen_meta = set()
    for path in doc_traces()["dbs"]:
        db = sqlite3.connect(path)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        # The spans table exists only in a trace with spans.
        has_spans = db.execute("SELECT count(*) FROM events WHERE ev = 'span_begin'").fetchone()[0]
        # So does the awaiters table in one with a C++20 awaiter (its rows: suite_22_cxx20.py).
        want = {t for t in documented if (t != "spans" or has_spans)
                and (t != "awaiters" or "awaiters" in tables)}
        eq(sorted(tables), sorted(want), "tables in %s" % os.path.basename(path))
        for t, (cols, values, _) in documented.items():
            if t not in want:
                continue
            got = [r[1] for r in db.execute("PRAGMA table_info(%s)" % t)]
            eq(sorted(got), sorted(cols), "columns of %s" % t)
            for col, vals in values.items():
                for (v,) in db.execute("SELECT DISTINCT %s FROM %s" % (col, t)):
                    if isinstance(v, str) and v and vals and all(
                            re.match(r"^[a-z_]+$", x) for x in vals):
                        check(v in vals, "%s.%s has %r; docs/sqlite.md lists %s"
                              % (t, col, v, sorted(vals)))
        seen_meta |= {r[0] for r in db.execute("SELECT key FROM meta")}
        db.close()
    eq(sorted(seen_meta - meta_doc), [], "meta keys written but not in docs/sqlite.md")
    # input_error is written only by replays of a damaged capture.
    eq(sorted(meta_doc - seen_meta - {"input_error"}), [], "meta keys documented, never written")


@test
def docs_csv_columns_are_listed():
    """The CSV's header is the column list docs/sqlite.md gives for it, in order."""
    md = doc("sqlite.md")
    m = re.search(r"`-o trace\.csv`.*?in this order:(.*?)\.\s", md, re.S)
    check(m, "docs/sqlite.md does not list the CSV's columns (\"in this order: ...\")")
    listed = re.findall(r"`([a-z_]+)`", m.group(1))
    for path in doc_traces()["csvs"]:
        with open(path, newline="") as f:
            header = next(csv.reader(f))
        eq(header, listed, "CSV columns of %s" % os.path.basename(path))


# Commands shown in the docs that cannot run in a test, and why. A command shown in the docs
# is run unless it is here: a new one that cannot run must be added, with its reason.
NOT_RUN = {
    "sudo tools/quickstart.sh": "the README's first command: CI runs it on a fresh machine",
    "sudo make test": "the README's second command: this suite is part of it",
    "sqlite3 trace.db": "interactive; the queries of docs/sqlite.md are run by sqlite_doc_queries",
    "sudo corobpf --switch 'uprobe:/usr/lib/libx.so:my_switch:from=arg0,to=arg1' -p 4242":
        "names a library that exists only as an example",
}


def doc_commands():
    """(file, command) for each command line in the indented code blocks of README and docs."""
    out = []
    for name in ["README.md"] + sorted(os.path.basename(p) for p in glob.glob(DOCS + "/*.md")):
        prev_blank = True
        in_fence = False
        for line in doc(name).splitlines():
            if line.startswith("```"):
                in_fence = not in_fence
            if not in_fence and line.startswith("    ") and not line.startswith("     "):
                cmd = line[4:].split("  #")[0].strip()
                word = cmd.split()[0] if cmd else ""
                if word == "sudo":
                    word = cmd.split()[1]
                if word in ("corobpf", "make", "sqlite3") or (word.startswith("tools/") and word != "tools/"):
                    if not cmd.startswith("corobpf:") and not cmd.startswith("corobpf summary"):
                        out.append((name, cmd))
            prev_blank = not line.strip()
    return out


def runnable(cmd, pid, raw):
    """The command with its example pid, program and files made real, or None."""
    argv = shlex.split(cmd.replace("$(pidof server)", str(pid)))
    if argv[0] == "sudo":
        argv = argv[1:]
    if argv[0] != "corobpf":
        return None
    argv[0] = COROBPF
    if "--" in argv:
        prog = argv[argv.index("--") + 1]
        real = [os.path.join(TESTS_BIN, "fibers"), "2", "3", "5"] if "fiber" in prog \
            else [DEMO, "-d", "1"]
        argv = argv[:argv.index("--") + 1] + real
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-p", "--pid") and argv[i + 1] == "4242":
            out += [a, str(pid)]
            i += 2
            continue
        if a in ("-d", "--duration"):  # shorter, the same meaning
            out += [a, "1"]
            i += 2
            continue
        if a.endswith(".raw") and not a.startswith("-"):
            if out and out[-1] == "--raw":
                out.append(a)
            else:
                out.append(raw)
            i += 1
            continue
        out.append(a)
        i += 1
    attaches = any(a in ("-p", "--pid", "-a", "--all") for a in out)
    if attaches and "-d" not in out and out[1] != "ps":
        out[1:1] = ["-d", "1"]
    return out


@test
def docs_commands_run_as_shown():
    """Every command in README.md and docs/ runs (exit 0) and writes every file it names."""
    raw = work("docs-cmd-source.raw")
    p = corobpf(["-q", "--raw", raw, "--", DEMO, "-d", "1"])
    eq(p.returncode, 0, "making a capture for the report commands (%s)" % p.stderr.strip())
    target = subprocess.Popen([DEMO, "-d", "600"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        cmds = doc_commands()
        check(len(cmds) >= 15, "found only %d commands in the docs" % len(cmds))
        not_shown = set(NOT_RUN) - {c for _, c in cmds}
        eq(sorted(not_shown), [], "NOT_RUN entries no doc shows any more")
        ran = 0
        for name, cmd in cmds:
            if cmd in NOT_RUN:
                continue
            argv = runnable(cmd, target.pid, raw)
            check(argv is not None, "%s: %r cannot be run by this test: make it runnable or "
                  "add it to NOT_RUN with the reason" % (name, cmd))
            d = work("docs-cmd-%d" % ran)
            os.makedirs(d)
            r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=120)
            check(r.returncode == 0, "%s: %r (run as %s) exited %d:\n%s" %
                  (name, cmd, " ".join(argv), r.returncode, r.stderr[-2000:]))
            for i, a in enumerate(argv):
                if a in ("-o", "--raw") and i + 1 < len(argv):
                    f = os.path.join(d, argv[i + 1])
                    check(os.path.exists(f) and os.path.getsize(f) > 0,
                          "%s: %r did not write %s" % (name, cmd, argv[i + 1]))
            check(target.poll() is None, "the target died under %r" % cmd)
            ran += 1
    finally:
        target.kill()
        target.wait()


# Summary lines a run of the demo prints only sometimes (masked as summary_shape masks them):
# those a README example may show, or a real run add, with what decides whether they appear.
SUMMARY_SOMETIMES = [
    ("N of N stack samples (--sample-hz) have no stack", "samples landing in a probe"),
    ("expected: a sample that lands while", "samples landing in a probe"),
    ("N events have no stack", "stacks not taken"),
    ("N events and N of N stack samples have no stack", "stacks not taken"),
    ("each is kept without it;", "stacks not taken"),
    ("N off-CPU stretches ended at their thread's next record", "the kernel (docs/design.md)"),
    ("inconsistencies in the probe stream", "a stack sample inside a switch probe"),
    ("N events were lost (ring buffer full)", "load"),
    ("N of them were lost after their thread's last delivered event", "load"),
]


def summary_sometimes(line):
    return next((why for prefix, why in SUMMARY_SOMETIMES if line.startswith(prefix)), None)


def summary_shape(lines):
    """A summary's lines with what varies run to run masked: numbers, ids, durations, the
    names in the longest-suspended list (LONGEST and the reason), and the findings, which load
    can cause, as one FINDINGS line whether there are none or some."""
    out, in_longest, in_findings = [], False, False
    for line in lines:
        m = re.sub(r"0x[0-9a-f]+", "H", line)
        m = re.sub(r"\d+(\.\d+)?", "N", m)
        m = re.sub(r"\bN (us|ms|s)\b", "T", m)
        m = " ".join(m.split())
        if m.startswith("spans by name") or m == "longest suspended:":
            in_findings = False
        if in_findings:
            continue
        if m == "no findings" or m.startswith("findings (N):"):
            in_findings = m != "no findings"
            out.append("FINDINGS")
            continue
        if in_longest and re.match(r"^T H \S+ pid N, ", m):
            out.append("LONGEST " + m.split(", ", 1)[1].split(" on ")[0])
            continue
        in_longest = m == "longest suspended:"
        out.append(m)
    return out


def demo_summary(extra, secs):
    """The masked summary of the demo traced like tools/demo.sh does (--stacks), plus extra."""
    p = corobpf(["--stacks"] + extra + ["-o", work("readme-summary-%d.jsonl" % len(extra)),
                                        "--force", "--", DEMO, "-d", str(secs)])
    eq(p.returncode, 0, "demo (%s)" % p.stderr.strip()[-300:])
    real = p.stderr.splitlines()
    start = [i for i, l in enumerate(real) if l.startswith("corobpf summary:")]
    check(start, "no summary in:\n" + p.stderr)
    real = real[start[0]:]
    real = real[:1] + [l for l in itertools.takewhile(lambda l: l.startswith("  "), real[1:])]
    return summary_shape(real)


@test
def docs_readme_summary_is_the_programs():
    """The README's summary example is a real summary of the demo run as tools/demo.sh runs it
    (--stacks), line by line: the same lines in the same order, each of the same shape (only
    numbers, ids, names and durations differ; the findings are one slot). A line the demo
    prints only sometimes may be missing from either side, but one the README shows must be
    the program's: from this run, or from a run at 999 Hz that makes samples land in probes."""
    text = doc("README.md")
    m = re.search(r"\n((?:    corobpf summary:.*\n)(?:      .*\n)+)", text)
    check(m, "README.md has no summary example")
    want = summary_shape([l[4:] for l in m.group(1).splitlines()])
    got = demo_summary([], 2)
    core = lambda ls: [l for l in ls if not summary_sometimes(l) and not l.startswith("LONGEST ")]
    eq(core(want), core(got), "README summary example against a real summary (masked, line by "
       "line, without the lines some runs have)")
    # The sometimes-lines sit where the program prints them: after the first line, before the
    # findings.
    for ls, who in ((want, "README"), (got, "the program")):
        pos = [i for i, l in enumerate(ls) if summary_sometimes(l)]
        check(all(0 < i < ls.index("FINDINGS") for i in pos),
              "%s: a sometimes-line outside the first line and the findings: %s" % (who, ls))
    shown = [l for l in want if summary_sometimes(l)]
    unseen = [l for l in shown if l not in got]
    for _ in range(3):
        if not unseen:
            break
        provoked = demo_summary(["--sample-hz", "999"], 1)
        unseen = [l for l in unseen if l not in provoked]
    eq(unseen, [], "README summary lines the program does not print (in this run or three at "
       "999 Hz)")
    longest = lambda ls: [l for l in ls if l.startswith("LONGEST ")]
    eq(len(longest(got)), len(longest(want)), "longest-suspended entries")
    for l in longest(want):
        check(l in ("LONGEST sleep", "LONGEST wait"), "README's entry %r is no reason the "
              "demo's coroutines suspend for" % l)


@test
def docs_readme_lists_the_packages_installed():
    """The README's first command says which Debian packages it installs: exactly those
    tools/deps.sh installs."""
    with open(os.path.join(ROOT, "tools", "deps.sh")) as f:
        pkgs = re.search(r'^pkgs="([^"]*)"', f.read(), re.M).group(1).split()
    text = doc("README.md")
    sec = text[text.index("## What the two commands do"):]
    sec = sec[:sec.index("\n## ", 3)]
    named = set(re.findall(r"[a-z0-9][a-z0-9.+-]*[a-z0-9]", sec))
    # Packages every Debian has (the README need not name them).
    base = {"make", "gcc", "g++", "python3", "util-linux", "linux-libc-dev"}
    missing = [p for p in pkgs if p not in named and p not in base]
    check(not missing, "README's first command does not name: %s" % ", ".join(missing))


def readme_first_screen():
    """What a new user sees of README.md before scrolling: its first 60 lines."""
    return "\n".join(doc("README.md").splitlines()[:60])


# The README's name for each family `corobpf --switch help` lists (a new family needs its name
# on the first screen, and here).
README_FAMILY = {"ucontext": "ucontext", "boost-context": "Boost.Fiber", "pth": "GNU Pth",
                 "ruby": "Ruby fibers", "qemu": "QEMU coroutines", "greenlet": "greenlets",
                 "go": "Go goroutines"}


@test
def docs_readme_first_screen_has_what_a_new_user_needs():
    """The README's first screen gives: the clone and the two commands; each file tools/demo.sh
    writes with the way to open it, and those ways work on such a trace; a bullet for each kind
    of line of the summary example; how to trace one's own program (its commands run), with
    every runtime corobpf finds by itself named."""
    first = readme_first_screen()
    for cmd in ("git clone ", "sudo tools/quickstart.sh ", "sudo make test "):
        check(re.search(r"^    " + re.escape(cmd), first, re.M),
              "the first screen does not show %r as a command" % cmd.strip())
    with open(os.path.join(ROOT, "tools", "demo.sh")) as f:
        files = re.findall(r"(?:-o|--raw) (demo\.[a-z]+)", f.read())
    eq(sorted(files), ["demo.db", "demo.jsonl", "demo.pftrace", "demo.raw"],
       "tools/demo.sh's files")
    bullets = re.split(r"\n(?=- )", first)
    opener = {"demo.pftrace": "https://ui.perfetto.dev", "demo.db": "`sqlite3 out/demo.db ",
              "demo.jsonl": "docs/jsonl.md", "demo.raw": "`./corobpf report out/demo.raw`"}
    shown = {}
    for name in files:
        b = [b for b in bullets if b.startswith("- `out/%s`" % name)]
        check(b and opener[name] in b[0], "the first screen has no bullet for out/%s saying %r"
              % (name, opener[name]))
        shown[name] = b[0]
    # The ways shown, run on a trace made as tools/demo.sh makes it, from out/'s parent.
    d = work("readme-first")
    os.makedirs(os.path.join(d, "out"))
    p = corobpf(["--stacks", "-q"] + sum([["--raw" if n.endswith(".raw") else "-o",
                                           os.path.join(d, "out", n)] for n in files], []) +
                ["--", DEMO, "-d", "1"])
    eq(p.returncode, 0, "the demo traced as tools/demo.sh does (%s)" % p.stderr.strip())
    for name in ("demo.db", "demo.raw"):
        cmd = shlex.split(re.search(r"`((?:sqlite3|\./corobpf) [^`]*)`", shown[name]).group(1))
        if cmd[0] == "./corobpf":
            cmd[0] = COROBPF
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and r.stdout.strip(), "%s, as the first screen shows it, "
              "exited %d with no output:\n%s" % (" ".join(cmd), r.returncode, r.stderr[-1000:]))
        if name == "demo.db":
            check(re.search(r"^db-worker-0\|\d+$", r.stdout, re.M),
                  "sqlite3 on out/demo.db does not list the demo's coroutines:\n" + r.stdout)
        else:
            check("corobpf summary:" in r.stdout + r.stderr, "report printed no summary")
    # Every kind of line in the summary example has its bullet ("`K of M ...`" for "1 of 3 ...").
    example = re.search(r"\n((?:    corobpf summary:.*\n)(?:      .*\n)+)", doc("README.md"))
    mask = lambda t: re.sub(r"\b(\d+|[KMN])\b", "N", t)
    heads = [l[4:] for l in example.group(1).splitlines() if not l.startswith("       ")]
    for h in heads:
        key = mask(re.split(r"[:(]", h.strip())[0].strip())
        check("`" + key in mask(first), "the first screen does not explain the summary's %r "
              "line (no bullet starting with `%s`)" % (h.strip(), key))
    # Tracing one's own program: the probe header, every family found without flags, and the
    # commands shown, run on the demo.
    check("`usdt/corobpf.h`" in first, "the first screen does not name usdt/corobpf.h")
    r = subprocess.run([COROBPF, "--switch", "help"], capture_output=True, text=True)
    fams = re.findall(r"^  ([a-z][a-z-]+)  ", r.stdout + r.stderr, re.M)
    check(len(fams) >= 7, "corobpf --switch help lists %s" % fams)
    for fam in fams:
        check(fam in README_FAMILY, "family %s: give it its README name in README_FAMILY" % fam)
        check(README_FAMILY[fam] in " ".join(first.split()), "the first screen does not name "
              "%s among the runtimes found by themselves" % README_FAMILY[fam])
    check("C++20" in first, "the first screen does not name C++20 coroutines")
    own = [l[4:].split("  #")[0].strip() for l in first.splitlines()
           if l.startswith("    sudo ./corobpf ")]
    check(len(own) >= 2, "the first screen shows no command to trace one's own program")
    target = subprocess.Popen([DEMO, "-d", "600"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for i, cmd in enumerate(own):
            argv = runnable(cmd.replace("./corobpf", "corobpf", 1), target.pid, work("x.raw"))
            wd = work("readme-own-%d" % i)
            os.makedirs(wd)
            r = subprocess.run(argv, cwd=wd, capture_output=True, text=True, timeout=120)
            check(r.returncode == 0, "%r (run as %s) exited %d:\n%s" %
                  (cmd, " ".join(argv), r.returncode, r.stderr[-2000:]))
            for j, a in enumerate(argv):
                if a == "-o":
                    check(os.path.getsize(os.path.join(wd, argv[j + 1])) > 0,
                          "%r did not write %s" % (cmd, argv[j + 1]))
    finally:
        target.kill()
        target.wait()


@test
def docs_readme_quickstart_traces_belong_to_the_sudo_user():
    """Under sudo from a user's checkout, tools/demo.sh (the quickstart's root part) makes out/
    as that user, and every trace in it is theirs and readable by them; an out/ swapped for a
    link to a directory of root's is refused, and nothing is written there."""
    uid, gid = attacker()
    checkout = os.path.join(attacker_dir("readme"), "corobpf")
    os.makedirs(os.path.join(checkout, "tools"))
    os.makedirs(os.path.join(checkout, "build"))
    shutil.copy(os.path.join(ROOT, "tools", "demo.sh"), os.path.join(checkout, "tools"))
    os.symlink(COROBPF, os.path.join(checkout, "corobpf"))
    os.symlink(DEMO, os.path.join(checkout, "build", "demo"))
    for dirpath, dirnames, filenames in os.walk(checkout):
        for n in [dirpath] + [os.path.join(dirpath, x) for x in dirnames + filenames]:
            os.lchown(n, uid, gid)
    env = dict(os.environ, SUDO_UID=str(uid), SUDO_GID=str(gid), SUDO_USER=ATTACKER,
               DEMO_SECS="1")
    demo_sh = os.path.join(checkout, "tools", "demo.sh")
    p = subprocess.run(["sh", demo_sh], env=env, capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "tools/demo.sh under sudo (%s)" % p.stderr.strip()[-1000:])
    out = os.path.join(checkout, "out")
    names = sorted(os.listdir(out))
    eq(names, ["demo.db", "demo.jsonl", "demo.pftrace", "demo.raw"], "what out/ holds")
    for n in [out] + [os.path.join(out, x) for x in names]:
        st = os.lstat(n)
        eq((st.st_uid, st.st_gid), (uid, gid), "owner of %s" % n)
    r = subprocess.run(as_attacker(["cat"] + [os.path.join(out, x) for x in names]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    eq(r.returncode, 0, "the user reading their traces (%s)" % r.stderr.strip())
    check("out/demo.pftrace" in p.stdout and "ui.perfetto.dev" in p.stdout,
          "tools/demo.sh does not say where the trace is and how to open it:\n" + p.stdout)
    # The user swaps out/ for a link to a directory root owns: root writes nothing there.
    shutil.rmtree(out)
    roots = tempfile.mkdtemp(prefix="corobpf-it-roots-", dir="/tmp")  # like /etc/cron.d
    os.chmod(roots, 0o755)
    if not os.environ.get("KEEP"):
        import atexit
        atexit.register(shutil.rmtree, roots, True)
    os.symlink(roots, out)
    os.lchown(out, uid, gid)
    p = subprocess.run(["sh", demo_sh], env=env, capture_output=True, text=True, timeout=120)
    eq(p.returncode, 7, "tools/demo.sh with out/ a link to root's directory (%s)" %
       p.stderr.strip()[-1000:])
    check("belongs to uid 0" in p.stderr and "chown -R --no-dereference" in p.stderr,
          "the refusal does not say whose out/ is and what to do:\n" + p.stderr)
    eq(os.listdir(roots), [], "what root wrote into the directory out/ linked to")
