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


def corobpf_stopped_a_while(args):
    """corobpf ARGS, stopped (SIGSTOP) for half a second once it traces: its ring fills."""
    err = work("stopped-a-while.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF] + args, stdout=subprocess.DEVNULL, stderr=ef)
        try:
            end = time.time() + 60
            while time.time() < end and tr.poll() is None and "tracing " not in open(err).read():
                time.sleep(0.02)
            time.sleep(0.3)
            tr.send_signal(signal.SIGSTOP)
            time.sleep(0.5)
            tr.send_signal(signal.SIGCONT)
            tr.wait(timeout=120)
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
    return subprocess.CompletedProcess(args, tr.returncode, "", open(err).read())


def doc_traces():
    """The traces every doc check reads (made once): JSONL records, SQLite files, CSV files."""
    if _traces:
        return _traces
    # The demo's requests take a few ms: --slow-span 2 makes some of them slow_span findings.
    runs = [("demo", ["--stacks", "--sample-hz", "199", "--slow-span", "2"], [DEMO, "-d", "2"])]
    # A lossy capture with stacks: the smallest ring, the largest stack copies, 15 times the
    # demo's default load, and the reader stopped for a while (it keeps up with all that).
    runs.append(("demo-lossy", ["--stacks", "--stack-bytes", "16384", "--ring-size", "1"],
                 [DEMO, "-d", "2", "-r", "3000"]))
    quiet = ["--sched-latency", "600000", "--blocking", "600000"]
    for prog_arg in ("lost_wakeup", "spawn_storm", "unclosed_span", "stall"):
        runs.append(("bug-" + prog_arg, quiet + ["--long-run", "600000"],
                     [os.path.join(TESTS_BIN, "bugs"), prog_arg]))
    runs.append(("bug-long_run", quiet + ["--stacks", "--sample-hz", "499"],
                 [os.path.join(TESTS_BIN, "bugs"), "long_run"]))
    runs.append(("bug-blocking", ["--stacks", "--long-run", "600000"],
                 [os.path.join(TESTS_BIN, "bugs"), "blocking"]))
    runs.append(("bug-sched_latency", ["--long-run", "600000", "--blocking", "600000"],
                 [os.path.join(TESTS_BIN, "bugs"), "sched_latency"]))
    runs.append(("uctx", [], [os.path.join(TESTS_BIN, "uctx"), "rr", "5", "4"]))
    runs.append(("follow", ["--follow"], ["sh", "-c", "%s -d 1; exec %s -d 1" % (DEMO, DEMO)]))
    records, dbs, csvs, pairs, runs_out = [], [], [], [], []
    for name, extra, cmd in runs:
        out, db, cs = work("docs-%s.jsonl" % name), work("docs-%s.db" % name), \
            work("docs-%s.csv" % name)
        raw, pf = work("docs-%s.raw" % name), work("docs-%s.pftrace" % name)
        args = ["-o", out, "-o", db, "-o", cs, "-o", pf, "--raw", raw] + extra + ["--"] + cmd
        p = corobpf_stopped_a_while(args) if name == "demo-lossy" else corobpf(args)
        pairs.append((raw, out, db))
        eq(p.returncode, 0, "corobpf -- %s exit code (%s)" % (" ".join(cmd), p.stderr.strip()))
        with open(out) as f:
            recs = [json.loads(l) for l in f]
        records += recs
        dbs.append(db)
        csvs.append(cs)
        # The detectors' thresholds, for a report of the same capture.
        thresholds = [a for i, a in enumerate(extra) if a in THRESHOLDS
                      or (i and extra[i - 1] in THRESHOLDS)]
        runs_out.append(dict(name=name, jsonl=out, db=db, csv=cs, raw=raw, pftrace=pf,
                             records=recs, thresholds=thresholds))
    _traces.update(records=records, dbs=dbs, csvs=csvs, pairs=pairs, runs=runs_out)
    return _traces


THRESHOLDS = ("--stall", "--long-run", "--sched-latency", "--blocking", "--slow-span",
              "--spawn-storm")


def c_strings(*paths):
    """The string literals of the program's sources (user/...): the names its writers print."""
    out = set()
    for pat in paths:
        for path in glob.glob(os.path.join(ROOT, pat)):
            with open(path) as f:
                out |= set(re.findall(r'"((?:[^"\\\n]|\\.)*)"', f.read()))
    return out


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


def c_function_strings(path, func):
    """The string literals a C function of the program returns (its table of names), minus "?"."""
    with open(os.path.join(ROOT, path)) as f:
        src = f.read()
    m = re.search(r"\n[^\n]*\b%s\([^)]*\)\n\{\n(.*?)\n\}\n" % re.escape(func), src, re.S)
    check(m, "no function %s in %s" % (func, path))
    return set(re.findall(r'"([^"]*)"', m.group(1))) - {"?"}


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
    # The switch_path families: those the program names.
    fam = re.search(r"^- `family`:(.*?)\.\n", secs["switch_path"], re.S | re.M)
    check(fam, "docs/jsonl.md's switch_path section lists no families")
    eq(sorted(re.findall(r"`([a-z0-9_-]+)`", strip_parens(fam.group(1))[0])),
       sorted(c_function_strings("user/record/kinds.c", "coro_family_name")),
       "switch_path families in docs/jsonl.md")


@test
def docs_jsonl_records_come_in_the_order_said():
    """docs/jsonl.md's order: the header; the process, object, thread, event ... records in time
    order (an `offcpu` event is written when its thread comes back, at its end), findings among
    them, each `stack` before the first record naming it; the coroutine records in the order
    they ended; the span_stats records; the trailer."""
    md = doc("jsonl.md")
    order = re.search(r"Records come in this order:(.*?)\n\n", md, re.S).group(1)
    middle = set(re.findall(r"`([a-z_]+)`", order.split("then one `coroutine`")[0])) - {"header"}
    check({"process", "event", "finding", "stack", "exec"} <= middle,
          "the order paragraph's middle part: %s" % sorted(middle))
    for run_ in doc_traces()["runs"]:
        recs, what = run_["records"], run_["name"]
        eq(recs[0]["type"], "header", "%s: first record" % what)
        eq(recs[-1]["type"], "trailer", "%s: last record" % what)
        parts = [k for k, _ in itertools.groupby(
            "middle" if r["type"] in middle else r["type"] for r in recs[1:-1])]
        want = ["middle", "coroutine", "span_stats"]
        eq(parts, [p for p in want if p in parts], "%s: the order of the record kinds" % what)
        defined, last_ts, last_end = set(), 0, 0
        for r in recs:
            if r["type"] == "stack":
                defined.add(r["id"])
            for k in ("stack", "create_stack", "park_stack"):
                if r["type"] != "stack" and k in r:
                    check(r[k] in defined, "%s: stack %s named before its record: %s"
                          % (what, r[k], str(r)[:200]))
            if r["type"] in middle and r["type"] not in ("finding", "stack") and "ts" in r:
                ts = r["ts"] + r.get("dur", 0) if r.get("ev") == "offcpu" else r["ts"]
                check(ts >= last_ts, "%s: a %s record before the time of the one before it: %s"
                      % (what, r["type"], str(r)[:200]))
                last_ts = ts
            if r["type"] == "coroutine":
                check(r["ended"] >= last_end, "%s: coroutine records not in the order they "
                      "ended: %s" % (what, str(r)[:200]))
                last_end = r["ended"]


def jsonl_lost_sum(path):
    """The counts of a JSONL file's `lost` records, added up, and its trailer."""
    total, trailer = 0, None
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "lost":
                total += r["count"]
            elif r["type"] == "trailer":
                trailer = r
    return total, trailer


@test
def docs_report_of_jsonl_is_report_of_raw():
    """docs/jsonl.md: `corobpf report` reads a JSONL trace through the same analysis as the raw
    capture it was written from: the same numbers, findings and tables, but for what stacks and
    samples give (not read back from JSONL). On a lossy capture with stacks too, where the holes
    must come back where they were; and `attributed` is the sum of the `lost` records (JSONL) and
    of the `lost` table's counts (SQLite)."""
    lossy = 0
    for raw, out, db in doc_traces()["pairs"]:
        name = os.path.basename(out)
        a = corobpf(["report", "--json", raw])
        b = corobpf(["report", "--json", out])
        eq(a.returncode, 0, "report %s (%s)" % (raw, a.stderr.strip()))
        eq(b.returncode, 0, "report %s (%s)" % (out, b.stderr.strip()))
        ja, jb = json.loads(a.stdout), json.loads(b.stdout)
        # As docs/jsonl.md says: stacks and samples are not read back from JSONL.
        for f in ja.get("findings", []):
            for k in ("stack", "samples", "samples_kept", "key_samples", "key_depth", "key_frame"):
                f.pop(k, None)
        diff = sorted(k for k in set(ja) | set(jb) if ja.get(k) != jb.get(k))
        check(not diff, "%s: report of the JSONL differs from report of the raw capture in %s"
              % (name, ", ".join("%s (%s vs %s)" % (k, str(ja.get(k))[:80], str(jb.get(k))[:80])
                                 for k in diff)))
        # The trailers of both replays: every count, loss and anomaly but stacks' and samples'.
        ra, rb = work(name + ".of-raw.jsonl"), work(name + ".of-jsonl.jsonl")
        for src, dst in ((raw, ra), (out, rb)):
            p = corobpf(["report", "-q", src, "--force", "-o", dst])
            eq(p.returncode, 0, "report %s -o %s (%s)" % (src, dst, p.stderr.strip()))
        sa, ta = jsonl_lost_sum(ra)
        sb, tb = jsonl_lost_sum(rb)
        for t in (ta, tb):
            t.pop("samples", None)
            for k in ("stacks_lost", "stacks_unresolved", "stacks_unmapped"):
                t["lost"].pop(k)
        diff = sorted("%s.%s (%s vs %s)" % (k, kk, ta[k].get(kk), tb[k].get(kk))
                      for k in ta if isinstance(ta[k], dict)
                      for kk in set(ta[k]) | set(tb.get(k, {})) if ta[k].get(kk) != tb[k].get(kk))
        diff += sorted("%s (%s vs %s)" % (k, ta.get(k), tb.get(k)) for k in set(ta) | set(tb)
                       if not isinstance(ta.get(k), dict) and ta.get(k) != tb.get(k))
        check(not diff, "%s: the trailer of report of the JSONL differs from that of the raw "
              "capture in %s" % (name, ", ".join(diff)))
        # attributed is the holes the records carry, in every output.
        attributed = ta["lost"]["attributed"]
        eq(sa, attributed, "%s: sum of the lost records' counts (report of the raw capture)" % name)
        eq(sb, attributed, "%s: sum of the lost records' counts (report of the JSONL)" % name)
        eq(jsonl_lost_sum(out)[0], attributed, "%s: sum of the lost records' counts" % name)
        con = sqlite3.connect(db)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = con.execute("SELECT sum(count) FROM lost").fetchone()[0] if "lost" in tables else 0
        meta = int(con.execute("SELECT value FROM meta WHERE key='lost_attributed'").fetchone()[0])
        con.close()
        eq(rows or 0, meta, "%s: sum(count) of the SQLite lost table vs meta lost_attributed"
           % name)
        eq(meta, attributed, "%s: SQLite lost_attributed vs the JSONL trailer's" % name)
        if attributed and ta["events"] and any(r["type"] == "stack" for r in
                                                map(json.loads, open(out))):
            lossy += 1
    check(lossy, "no capture of the docs traces lost events with stacks on: the comparison "
          "needs one (the ring, --ring-size 1 with --stack-bytes 16384 and corobpf stopped half a "
          "second, did not fill)")


@test
def docs_jsonl_trailer_counters_are_the_programs():
    """The trailer example's `lost` and `anomalies` keys are exactly what the program writes."""
    secs = sections(doc("jsonl.md"))
    trailer = [r for r in doc_traces()["records"] if r["type"] == "trailer"][0]
    for obj in ("lost", "anomalies"):
        m = re.search(r'"%s":\{(.*?)\}' % obj, secs["trailer"], re.S)
        check(m, "docs/jsonl.md's trailer example has no %r object" % obj)
        eq(sorted(json_keys(m.group(1))), sorted(trailer[obj]), "trailer %s keys" % obj)


FINDING_KINDS_SEEN = {"lost_wakeup", "stall", "long_run", "sched_latency", "unmatched_span",
                      "spawn_storm", "blocking", "slow_span"}


@test
def docs_jsonl_finding_fields_by_kind():
    """docs/jsonl.md's table of finding fields says, for each field a finding carries, the kinds
    that carry it: every field of every finding written is there, on a kind it names; the fields
    said to be on every finding are; and the waker, state and storm fields are where it says."""
    md = doc("jsonl.md")
    sec = sections(md)["finding"]
    kinds = {k for r in table_rows(sec) if r[0].startswith("`") and len(r) == 3
             for k in backticked(r[0])}
    m = re.search(r"Every finding has (.*?)\. The other fields", sec, re.S)
    check(m, "docs/jsonl.md no longer says which fields every finding has")
    always = backticked(m.group(1))
    table = re.search(r"\| field \| on \|\n\|---\|---\|\n((?:\|.*\n)+)", sec)
    check(table, "docs/jsonl.md has no table of the fields findings carry (| field | on |)")
    on, prefixes = {}, {}
    for cells in table_rows(table.group(1)):
        named = backticked(cells[1]) & kinds
        # A row naming no kind, or that starts "every kind", is about every kind.
        where = kinds if not named or cells[1].startswith("every") else named
        for f in re.findall(r"`([a-z_]+)(\*?)`", cells[0]):
            (prefixes if f[1] else on)[f[0]] = where
    # The slow_span fields are described in their own table, below the kinds' table.
    slow = set()
    for cells in table_rows(sec[sec.index("A `slow_span` finding says"):]):
        slow |= backticked(cells[0])
    findings = [r for r in doc_traces()["records"] if r["type"] == "finding"]
    seen = {f["kind"] for f in findings}
    eq(sorted(FINDING_KINDS_SEEN - seen), [], "finding kinds the doc traces did not make")
    bad = set()
    for f in findings:
        k = f["kind"]
        for a in always:
            check(a in f, "a %s finding has no %r, which docs/jsonl.md says every finding has: %s"
                  % (k, a, f))
        for key in f:
            if key in always or key == "type":
                continue
            where = on.get(key)
            if k == "slow_span" and key in slow:
                where = {"slow_span"}
            if where is None:
                where = next((w for p, w in prefixes.items() if key.startswith(p)), None)
            if where is None or k not in where:
                bad.add("%s.%s" % (k, key))
        # Said in the table's cells: which fields a kind always has, and which it never has.
        if k in ("stall", "sched_latency", "lost_wakeup"):
            check("waker" in f, "a %s finding without `waker` (null when unknown): %s" % (k, f))
        if k == "lost_wakeup" and f.get("state") == "suspended":
            eq(f.get("waker", "absent"), None, "waker of a suspended lost_wakeup")
        if k == "leak":
            check("waker" not in f, "a leak with a waker: %s" % f)
        if k in ("lost_wakeup", "leak"):
            check(f.get("state") in ("suspended", "runnable", "new"), "%s state: %s" % (k, f))
        if k == "stall" or f.get("state") == "suspended":
            check("reason" in f and "obj" in f, "a %s without reason and obj: %s" % (k, f))
        if k == "spawn_storm":
            check("count" in f and "peak_per_s" in f, "a spawn_storm without its counts: %s" % f)
        if k in ("unmatched_span", "slow_span"):
            check("span" in f, "a %s without `span`: %s" % (k, f))
    eq(sorted(bad), [], "finding fields written on a kind docs/jsonl.md does not give them to")
    # --stacks: the kinds the table says carry a stack do, in these traces (blocking included).
    with_stack = {f["kind"] for f in findings if "stack" in f}
    for k in ("blocking", "long_run", "slow_span"):
        check(k in with_stack, "no %s finding of a --stacks trace has a stack" % k)


@test
def docs_no_sched_makes_blocking_a_long_run():
    """docs/jsonl.md: without the kernel's view (--no-sched) a blocking call long enough is a
    long_run finding, no longer a blocking one."""
    md = doc("jsonl.md")
    check(re.search(r"With\s+`--no-sched` there is none.*?is a\s+`long_run` instead", md, re.S),
          "docs/jsonl.md does not say what --no-sched does to blocking calls")
    got = {}
    for extra in ([], ["--no-sched"]):
        out = work("docs-nosched%d.jsonl" % len(extra))
        p = corobpf(["-q", "-o", out] + extra + ["--", os.path.join(TESTS_BIN, "bugs"),
                                                  "blocking"])
        eq(p.returncode, 0, "bugs blocking %s (%s)" % (extra, p.stderr.strip()))
        got[bool(extra)] = sorted(f["kind"] for f in Trace(out).records
                                  if f["type"] == "finding" and f.get("name") == "blocker")
    eq(got[False], ["blocking"], "findings of the 200 ms blocking call")
    eq(got[True], ["long_run"], "findings of the same call under --no-sched")


@test
def docs_jsonl_anomalies_each_explained():
    """Every `anomalies` key the program writes has its row in docs/jsonl.md (what happened,
    what the model did, what to do), and no row names a key it does not write."""
    sec = sections(doc("jsonl.md"))["trailer"]
    part = sec[sec.index("- `anomalies`"):]
    part = "\n".join(l.strip() for l in part.splitlines())  # the table is indented in its item
    rows = [r for r in table_rows(part) if r and r[0].startswith("`")]
    documented = [r[0].strip("`") for r in rows]
    trailer = [r for r in doc_traces()["records"] if r["type"] == "trailer"][0]
    eq(sorted(documented), sorted(trailer["anomalies"]), "anomalies keys documented vs written")
    for r in rows:
        eq(len(r), 4, "cells of the row of %s" % r[0])
        check(all(len(c) >= 5 for c in r[1:]), "the row of %s leaves a cell empty: %s"
              % (r[0], r))


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
    # The meta keys documented with their value: `tool` (`corobpf`).
    meta_values = {}
    for piece in re.split(r",(?![^(]*\))", extra):
        bare_p, inner = strip_parens(piece)
        names = backticked(bare_p)
        if len(names) == 1 and inner:
            meta_values[names.pop()] = set(re.findall(r"`([^`]+)`", " ".join(inner)))
    lists, documented_lists = {}, {}
    for path in doc_traces()["dbs"]:
        db = sqlite3.connect(path)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        # The spans table exists only in a trace with spans.
        has_spans = db.execute("SELECT count(*) FROM events WHERE ev = 'span_begin'").fetchone()[0]
        # So does the awaiters table in one with a C++20 awaiter (its rows: suite_22_cxx20.py),
        # and the lost table in one with holes (its rows: docs_report_of_jsonl_is_report_of_raw).
        has_lost = db.execute("SELECT value FROM meta WHERE key = 'lost_attributed'").fetchone()
        want = {t for t in documented if (t != "spans" or has_spans)
                and (t != "awaiters" or "awaiters" in tables)
                and (t != "lost" or int(has_lost[0]))}
        eq(sorted(tables), sorted(want), "tables in %s" % os.path.basename(path))
        for t, (cols, values, _) in documented.items():
            if t not in want:
                continue
            got = [r[1] for r in db.execute("PRAGMA table_info(%s)" % t)]
            types = {r[1]: r[2] for r in db.execute("PRAGMA table_info(%s)" % t)}
            eq(sorted(got), sorted(cols), "columns of %s" % t)
            for col, vals in values.items():
                # A text column's list of values: every value written is in it (the lists in
                # parentheses of integer columns are notes, not values).
                vals = {v for v in vals if re.match(r"^[a-z][a-z0-9_-]*$", v)}
                for (v,) in db.execute("SELECT DISTINCT %s FROM %s" % (col, t)):
                    if isinstance(v, str) and v and vals:
                        check(v in vals, "%s.%s has %r; docs/sqlite.md lists %s"
                              % (t, col, v, sorted(vals)))
                        lists.setdefault((t, col), set()).add(v)
                if vals and types[col] in ("TEXT", ""):
                    lists.setdefault((t, col), set())
                    documented_lists[(t, col)] = vals
        for key, value in db.execute("SELECT key, value FROM meta"):
            vals = meta_values.get(key)
            if vals and isinstance(value, str) and len(vals) == 1:
                eq(value, next(iter(vals)), "meta %s" % key)
        seen_meta |= {r[0] for r in db.execute("SELECT key FROM meta")}
        db.close()
    eq(sorted(seen_meta - meta_doc), [], "meta keys written but not in docs/sqlite.md")
    # input_error is written only by replays of a damaged capture.
    eq(sorted(meta_doc - seen_meta - {"input_error"}), [], "meta keys documented, never written")
    # Every value a list gives is one the program can write: a name among its sources' strings.
    names = c_strings("user/*.[ch]", "user/*/*.[ch]")
    for (t, col), vals in sorted(documented_lists.items()):
        eq(sorted(vals - names), [], "values docs/sqlite.md lists for %s.%s that no source of "
           "the program writes" % (t, col))
    # The lists the issue found short, checked against values the traces hold: forked
    # processes (--follow), coroutines ended by an exec, yields in the probes' reasons.
    for t, col, v in (("processes", "mode", "forked"), ("events", "reason", "yield"),
                      ("switch_paths", "family", "ucontext")):
        check(v in lists.get((t, col), ()), "no %s.%s %r in the doc traces: %s"
              % (t, col, v, sorted(lists.get((t, col), ()))))
    # Two lists against the names the program's own tables give (no doc trace ends a coroutine
    # by an exec, nor uses every family).
    eq(sorted(documented_lists[("coroutines", "end")]),
       sorted(c_function_strings("user/model/model.c", "coro_end_name")), "coroutines.end values")
    eq(sorted(documented_lists[("switch_paths", "family")]),
       sorted(c_function_strings("user/record/kinds.c", "coro_family_name")),
       "switch_paths.family values")


@test
def docs_csv_is_what_sqlite_md_says():
    """docs/sqlite.md says what the CSV is: the coroutines table, its every column in the
    table's order, and how its values are written. Each CSV is compared with the SQLite file
    of the same run, row for row, column for column."""
    md = doc("sqlite.md")
    m = re.search(r"`-o trace\.csv`.*?its (\d+) columns, in the table's order.*?\n\n", md, re.S)
    check(m, "docs/sqlite.md does not say the CSV has the coroutines table's columns (\"its N "
          "columns, in the table's order\")")
    ncols = int(m.group(1))
    check(re.search(r"`\.csv` \(the coroutines\s+table, its %d columns" % ncols,
                    doc("README.md")), "README.md does not say the CSV is the coroutines table "
          "and its %d columns" % ncols)
    hex_cols = re.search(r"((?:`[a-z_]+`,? (?:and )?)+)are hex\s+text", m.group(0))
    check(hex_cols, "docs/sqlite.md does not say which CSV columns are hex text")
    n = stacks = 0
    for run_ in doc_traces()["runs"]:
        db = sqlite3.connect(run_["db"])
        eq(len(db.execute("PRAGMA table_info(coroutines)").fetchall()), ncols,
           "columns of the coroutines table (%s)" % run_["name"])
        db.close()
        rows, st = check_csv_is_coroutines(run_["csv"], run_["db"],
                                           re.findall(r"`([a-z_]+)`", hex_cols.group(1)))
        n += rows
        stacks += st
    check(n > 1000, "only %d CSV rows compared" % n)


@test
def docs_perfetto_suspended_slices_are_the_ones_written():
    """docs/perfetto.md lists the `suspended: REASON` slices the writer produces: each is one of
    its names, every one the traces hold is listed, and a yield (the demo's request handlers
    yield) is `runnable`, never `suspended: yield`."""
    md = doc("perfetto.md")
    m = re.search(r"`suspended: ([a-z|]+)`", md)
    check(m, "docs/perfetto.md lists no suspended slices")
    listed = set(m.group(1).split("|"))
    writer = {n[len("suspended: "):] for n in c_strings("user/outputs/perfetto.c")
              if n.startswith("suspended: ")}
    eq(sorted(listed - writer), [], "suspended slices docs/perfetto.md lists that the writer lacks")
    produced, yields = set(), 0
    for run_ in doc_traces()["runs"]:
        if run_["name"] not in ("demo", "uctx", "bug-lost_wakeup", "bug-stall"):
            continue
        t = perfetto_check.check(run_["pftrace"], run_["jsonl"])
        produced |= {name[len("suspended: "):] for _, _, _, _, name in t.events
                     if name and name.startswith("suspended: ")}
        yields += sum(1 for r in run_["records"] if r.get("ev") == "switch"
                      and r.get("reason") == "yield" and r.get("from") != "0x0")
    eq(sorted(produced - listed), [], "suspended slices written but not in docs/perfetto.md")
    check(yields > 100, "the doc traces hold only %d yields" % yields)
    check("yield" not in produced, "a `suspended: yield` slice was written")
    # Listed only if produced: `io` comes from a scheduler passing CORO_IO (none of these
    # programs does), `done` from an exit probe after the last switch out (the doc says when).
    eq(sorted(listed - produced - {"io", "done"}), [],
       "suspended slices docs/perfetto.md lists that the doc traces never hold")
    # docs/top.md's WAIT column shows the same reasons of the same suspended state.
    wait = [r for r in table_rows("\n".join(l.strip() for l in doc("top.md").splitlines()))
            if r[0] == "WAIT"]
    check(wait, "docs/top.md has no WAIT row")
    eq(sorted(set(re.findall(r"`([a-z]+)`", strip_parens(wait[0][1].split(";")[0])[0]))),
       sorted(listed),
       "the reasons docs/top.md's WAIT column lists")
    check({"wait", "sleep", "unknown"} <= produced, "suspended slices of the doc traces: "
          "%s" % sorted(produced))


@test
def docs_report_json_fields_are_the_programs():
    """docs/jsonl.md's `corobpf report --json` table lists exactly the fields report --json
    prints, and what it says of them holds against the same run's JSONL and SQLite: findings
    as the finding records, spans as the span_stats records, by_kind as the doc's own
    per-kind query, and the histograms count every running and runnable slice."""
    md = doc("jsonl.md")
    sec = md[md.index("## `corobpf report --json`"):]
    rows = {f: cells[1] for cells in table_rows(sec) if cells[0].startswith("`")
            for f in backticked(cells[0])}
    seen = set()
    for run_ in doc_traces()["runs"]:
        p = corobpf(["report", "--json"] + run_["thresholds"] + [run_["raw"]])
        eq(p.returncode, 0, "report --json %s (%s)" % (run_["name"], p.stderr.strip()))
        j = json.loads(p.stdout)
        seen |= set(j)
        eq(sorted(set(j) - set(rows)), [], "report --json fields not in docs/jsonl.md")
        recs = run_["records"]
        trailer = recs[-1]
        eq(j["lost_events"], trailer["lost"]["events"], "lost_events")
        for k in ("coroutines", "events", "end_reason"):
            eq(j[k], trailer[k], k)
        want = [{k: v for k, v in r.items() if k != "type"} for r in recs
                if r["type"] == "finding"]
        eq(len(j["findings"]), len(want), "findings of %s" % run_["name"])
        for got_f, want_f in zip(j["findings"], want):
            eq(got_f, want_f, "a finding of %s" % run_["name"])
        eq(j["findings_omitted"], 0, "findings_omitted")
        stats = [{k: v for k, v in r.items() if k != "type"} for r in recs
                 if r["type"] == "span_stats"]
        eq(j.get("spans", []), stats, "spans of %s" % run_["name"])
        db = sqlite3.connect(run_["db"])
        # The kind is the name without trailing digits and dashes: the same as rtrim's.
        kinds = {k: (n, run, runq, susp, sw) for k, n, run, runq, susp, sw in db.execute(
            "SELECT rtrim(name, '0123456789-'), count(*), sum(running_ns), sum(runnable_ns), "
            "sum(suspended_ns), sum(switch_ins) FROM coroutines GROUP BY 1")
            if k}
        got = {b["kind"]: (b["coroutines"], b["running_ns"], b["runnable_ns"],
                           b["suspended_ns"], b["switch_ins"]) for b in j["by_kind"]}
        eq({k: v for k, v in got.items() if not k.startswith("(")}, kinds,
           "by_kind of %s against the coroutines table" % run_["name"])
        eq([b["running_ns"] for b in j["by_kind"]],
           sorted((b["running_ns"] for b in j["by_kind"]), reverse=True), "by_kind order")
        eq([pr["pid"] for pr in j["processes"]], sorted(pr["pid"] for pr in j["processes"]),
           "processes by pid")
        for pr in j["processes"]:
            for key, state in (("run_slices", "running"), ("sched_latency", "runnable")):
                want = db.execute("SELECT count(*) FROM slices WHERE pid = ? AND state = ?",
                                  (pr["pid"], state)).fetchone()[0]
                eq(sum(c for _, c in pr[key]), want, "%s of pid %d" % (key, pr["pid"]))
                for lo, c in pr[key]:
                    check(c > 0 and (lo == 0 or (lo % 1000 == 0 and
                                                 (lo // 1000) & (lo // 1000 - 1) == 0)),
                          "%s bucket [%d, %d]: not [0 or 1000 * 2^k ns, count > 0]"
                          % (key, lo, c))
        db.close()
    # A damaged capture: input_error, as the doc says.
    raw = doc_traces()["runs"][0]["raw"]
    cut = work("docs-cut.raw")
    with open(raw, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:os.path.getsize(raw) // 2])
    p = corobpf(["report", "--json", cut])
    eq(p.returncode, 8, "report --json of a cut capture (%s)" % p.stderr.strip())
    j = json.loads(p.stdout)
    check(j.get("input_error"), "report --json of a cut capture has no input_error: %s"
          % p.stdout[:300])
    seen |= set(j)
    eq(sorted(set(rows) - seen), [], "fields docs/jsonl.md gives report --json, never printed")


@test
def docs_full_disk_leaves_only_the_cut_raw_capture():
    """README.md and docs/reliability.md: no output appears under its name half-written, but for
    the raw capture on a full disk, kept under its name as a prefix `corobpf report` replays.
    On a 1 MiB tmpfs: every output format alone leaves nothing there (not even its temporary
    file), exit 7 naming it; with the raw capture there too, the raw capture alone is left."""
    for name in ("README.md", "reliability.md"):
        text = " ".join(doc(name).split())
        check(re.search(r"half-written.{0,200}raw capture|whole, with one exception: the raw "
                        r"capture on a full disk", text),
              "%s no longer says which file a full disk leaves incomplete" % name)
    tiny = work("docs-tiny")
    os.mkdir(tiny)
    r = run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny])
    eq(r.returncode, 0, "mount a 1 MiB tmpfs: " + r.stderr)
    try:
        outs = ["t.jsonl", "t.jsonl.gz", "t.pftrace", "t.db", "t.csv"]
        for out in outs:
            path = os.path.join(tiny, out)
            p = corobpf(["-q", "-o", path, "--", FAULTS, "burst", "20000"])
            eq(p.returncode, 7, "-o %s on a full disk: exit code (%s)" % (out, p.stderr.strip()))
            check("DONE burst 20000" in p.stdout, "the target did not finish: %r" % p.stdout)
            check(out in p.stderr, "the error does not name %s: %s" % (out, p.stderr.strip()))
            eq(os.listdir(tiny), [], "files left on the full disk by -o %s" % out)
        raw = os.path.join(tiny, "t.raw")
        p = corobpf(["-q", "--raw", raw] + [a for o in outs for a in ("-o", os.path.join(tiny, o))]
                    + ["--", FAULTS, "burst", "20000"])
        eq(p.returncode, 7, "all outputs and --raw on a full disk: exit code (%s)"
           % p.stderr.strip())
        eq(os.listdir(tiny), ["t.raw"], "files left on the full disk")
        back = work("docs-tiny-back.jsonl")
        p = corobpf(["report", raw, "-o", back])
        eq(p.returncode, 8, "report of the cut raw capture (%s)" % p.stderr.strip())
        check("ends without its end record" in p.stderr, "where it stops: " + p.stderr)
        got = Trace(back).coroutines
        check(len(got) > 1000, "only %d coroutines read back" % len(got))
        eq([c["id"] for c in got], ["0x%x" % (0x400 + i) for i in range(len(got))],
           "a prefix of the program's coroutines")
    finally:
        run(["umount", tiny])


# Commands shown in the docs that cannot run in a test, and why. A command shown in the docs
# is run unless it is here: a new one that cannot run must be added, with its reason.
NOT_RUN = {
    "sudo tools/quickstart.sh": "the README's first command: CI runs it on a fresh machine",
    "sudo make test": "README's Develop section: this suite is part of it",
    "make": "README's Develop section: builds the tree this suite runs on",
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
    ("N off-CPU stretch", "the kernel (docs/design.md)"),
    ("expected now and then (a few in a thousand stretches", "the kernel (docs/design.md)"),
    ("inconsistencies in the probe stream", "lost events"),
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


def spans_by_name_sorted(lines):
    """The masked summary with the rows of its spans table sorted by name: the table orders
    them by total time, which a busy machine can swap between two names of a run."""
    out, i = list(lines), 0
    while i < len(out):
        if out[i].startswith("name count total "):
            j = i + 1
            while j < len(out) and re.search(r" N% N% N$", out[j]):
                j += 1
            out[i + 1:j] = sorted(out[i + 1:j])
            i = j
        else:
            i += 1
    return out


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
    core = lambda ls: spans_by_name_sorted(
        [l for l in ls if not summary_sometimes(l) and not l.startswith("LONGEST ")])
    eq(core(want), core(got), "README summary example against a real summary (masked, line by "
       "line, without the lines some runs have; the spans table's rows by name)")
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
    sec = text[text.index("## What the quickstart does"):]
    sec = sec[:sec.index("\n## ", 3)]
    named = set(re.findall(r"[a-z0-9][a-z0-9.+-]*[a-z0-9]", sec))
    # Packages every Debian has (the README need not name them).
    base = {"make", "gcc", "g++", "python3", "util-linux", "linux-libc-dev"}
    missing = [p for p in pkgs if p not in named and p not in base]
    check(not missing, "README's first command does not name: %s" % ", ".join(missing))


def readme_first_screen():
    """What a new user reads of README.md first: what corobpf is, "Start here" and "Trace your
    own program", the text before its third section, at most 80 lines."""
    text = doc("README.md")
    heads = [m.start() for m in re.finditer(r"^## ", text, re.M)]
    check(len(heads) >= 3, "README.md has fewer than three sections")
    first = text[:heads[2]]
    check(first.count("\n") <= 80, "README.md's first screen (before its third section) is "
          "%d lines long, more than 80" % first.count("\n"))
    return first


# The README's name for each family `corobpf --switch help` lists (a new family needs its name
# on the first screen, and here).
README_FAMILY = {"ucontext": "ucontext", "boost-context": "Boost.Fiber", "pth": "GNU Pth",
                 "ruby": "Ruby fibers", "qemu": "QEMU coroutines", "greenlet": "greenlets",
                 "go": "Go goroutines", "asyncio": "asyncio tasks",
                 "lua": "Lua coroutines"}


@test
def docs_readme_first_screen_has_what_a_new_user_needs():
    """The README's first screen gives: the clone and the one command that sets up and traces
    the demo (the test suite is under "Develop", with how long it takes); each file
    tools/demo.sh writes with the way to open it, and those ways work on such a trace; the
    summary example, then a bullet for each kind of line in it; how to trace one's own program
    (its commands run), with every runtime corobpf finds by itself named."""
    first = readme_first_screen()
    for cmd in ("git clone ", "sudo tools/quickstart.sh "):
        check(re.search(r"^    " + re.escape(cmd), first, re.M),
              "the first screen does not show %r as a command" % cmd.strip())
    shown = [l.strip() for l in first.splitlines() if l.startswith("    ")
             and not l.startswith("     ") and not l.strip().startswith("corobpf summary")]
    others = [l.split("#")[0].strip() for l in shown
              if not l.startswith(("git clone", "sudo ./corobpf"))]
    eq(others, ["sudo tools/quickstart.sh"], "commands the first screen shows besides the clone "
       "and tracing one's own program")
    text = doc("README.md")
    dev = re.search(r"^## Develop\n(.*?)(?=^## )", text, re.S | re.M)
    check(dev, "README.md has no Develop section")
    m = re.search(r"^    sudo make test +# (.*)$", dev.group(1), re.M)
    check(m and re.search(r"\d+ minutes", m.group(1)), "README's Develop section does not show "
          "`sudo make test` with how long it takes: %r" % (m and m.group(0)))
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
    # The summary example, on the first screen, then every kind of line in it has its bullet
    # ("`K of M ...`" for "1 of 3 ..."), after it.
    example = re.search(r"\n((?:    corobpf summary:.*\n)(?:      .*\n)+)", first)
    check(example, "the first screen shows no summary")
    check(not re.search(r"^- `corobpf summary", first[:example.start()], re.M),
          "the first screen explains the summary's lines before it shows one")
    mask = lambda t: re.sub(r"\b(\d+|[KMN])\b", "N", t)
    heads = [l[4:] for l in example.group(1).splitlines() if not l.startswith("       ")]
    for h in heads:
        key = mask(re.split(r"[:(]", h.strip())[0].strip())
        check("`" + key in mask(first), "the first screen does not explain the summary's %r "
              "line (no bullet starting with `%s`)" % (h.strip(), key))
    # A line the example has only because the quickstart passes --stacks says so.
    samples = [b for b in bullets if b.startswith("- `K of M stack samples")]
    check(samples and "`--stacks`" in samples[0], "the first screen does not say the stack "
          "samples line comes with --stacks: %r" % samples)
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
