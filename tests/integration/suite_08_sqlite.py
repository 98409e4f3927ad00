"""SQLite and CSV."""
from harness import *  # noqa: F401,F403


@test
def sqlite_matches_jsonl_and_documented_queries_run():
    out, db, cs, raw = work("sq.jsonl"), work("sq.db"), work("sq.csv"), work("sq.raw")
    p = corobpf(["--stacks", "-o", out, "-o", db, "-o", cs, "--raw", raw, "--",
                 os.path.join(BUILD, "demo"), "-d", "1"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    con = sqlite3.connect(db)
    one_ = lambda q, *a: con.execute(q, a).fetchone()[0]
    eq(one_("SELECT value FROM meta WHERE key = 'schema_version'"), 1, "schema_version")
    eq(one_("SELECT count(*) FROM coroutines"), len(trace.coroutines), "coroutines rows")
    eq(one_("SELECT count(*) FROM events"),
       len([e for e in trace.events if e["ev"] not in ("offcpu", "offcpu_begin")]),
       "events rows")
    eq(one_("SELECT count(*) FROM offcpu"), len(trace.by_ev("offcpu")), "offcpu rows")
    eq(one_("SELECT count(*) FROM findings"),
       sum(1 for r in trace.records if r["type"] == "finding"), "findings rows")
    eq(one_("SELECT count(*) FROM processes"), 1, "processes rows")
    eq(one_("SELECT value FROM meta WHERE key = 'events'"), trace.trailer["events"], "meta events")
    # Per coroutine, the slices add up to its life, as the JSONL's state times do.
    for c in trace.coroutines[:50]:
        total = one_("SELECT coalesce(sum(dur_ns), 0) FROM slices WHERE uid = ?", c["uid"])
        eq(total, c["ended"] - c["first_seen"], "slices of uid %d" % c["uid"])
        eq(one_("SELECT switch_ins FROM coroutines WHERE uid = ?", c["uid"]), c["switch_ins"],
           "switch_ins of uid %d" % c["uid"])
    # Every documented query runs and returns rows.
    with open(os.path.join(ROOT, "docs", "sqlite.md")) as f:
        queries = re.findall(r"```sql\n(.*?)```", f.read(), re.S)
    check(len(queries) >= 6, "docs/sqlite.md has %d queries" % len(queries))
    for q in queries[:-1]:   # the last lists findings: the demo may have none
        check(con.execute(q).fetchall(), "no rows from documented query:\n" + q)
    # The spawn tree: exactly the acceptor's descendants, from the JSONL's parent links.
    by_parent = {}
    for c in trace.coroutines:
        by_parent.setdefault(c["parent_uid"], []).append(c["uid"])
    root = [c["uid"] for c in trace.coroutines if c["name"] == "acceptor"][0]
    want, todo = 0, [root]
    while todo:
        u = todo.pop()
        want += 1
        todo.extend(by_parent.get(u, []))
    tree = queries[0].replace("LIMIT 20", "")
    eq(len(con.execute(tree).fetchall()), want, "spawn tree rows")
    with open(cs, newline="") as f:
        rows = list(csv.DictReader(f))
    eq(len(rows), len(trace.coroutines), "CSV rows")
    eq({r["name"] for r in rows}, {c["name"] for c in trace.coroutines}, "CSV names")
    check_replay(out, raw)


@test
def sqlite_csv_carries_every_coroutines_column():
    """The CSV is the coroutines table, column for column: the demo with --stacks (its stacks
    as text), and the spans program (a coroutine ending with a span open), live and replayed
    from the raw capture."""
    runs = [("csvd", ["--stacks", "--", os.path.join(BUILD, "demo"), "-d", "1"]),
            ("csvs", ["--", os.path.join(TESTS_BIN, "spans"), work("csvs.truth")])]
    stacks = spans = 0
    for name, args in runs:
        db, cs, raw = work(name + ".db"), work(name + ".csv"), work(name + ".raw")
        p = corobpf(["-o", db, "-o", cs, "--raw", raw] + args)
        eq(p.returncode, 0, "exit code of %s (%s)" % (name, p.stderr.strip()))
        for csv_path, db_path in ((cs, db), (work(name + ".replay.csv"),
                                             work(name + ".replay.db"))):
            if csv_path != cs:
                p = corobpf(["report", "-q", raw, "-o", db_path, "-o", csv_path])
                eq(p.returncode, 0, "report exit code (%s)" % p.stderr.strip())
            rows, st = check_csv_is_coroutines(csv_path, db_path)
            check(rows > 0, "no coroutine in %s" % csv_path)
            stacks += st
        con = sqlite3.connect(db)
        spans += con.execute("SELECT count(*) FROM coroutines WHERE open_spans IS NOT NULL"
                             ).fetchone()[0]
        con.close()
    check(stacks > 0, "no stack compared")
    check(spans > 0, "no coroutine ended with a span open")


@test
def sqlite_hostile_names_are_bound_not_pasted():
    out, db = work("sqn.jsonl"), work("sqn.db")
    p = corobpf(["-o", out, "-o", db, "--", os.path.join(TESTS_BIN, "scenarios"), "names"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    trace = Trace(out)
    con = sqlite3.connect(db)
    got = {r[0]: r[1] for r in con.execute("SELECT uid, name FROM coroutines")}
    for c in trace.coroutines:
        eq(got[c["uid"]], c["name"], "name of uid %d" % c["uid"])
