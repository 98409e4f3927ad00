"""The docs' performance figures come from results files committed with them.

README.md and docs/ quote measurements; each must name the results file `make bench` (or
`make soak`) wrote, by its full name, and that file must be in the repository (a fresh clone
has what git tracks, and nothing else), a JSON record of the machine it ran on. Each figure
quoted with its file is one that file holds.
"""
import itertools
import json
import re
import subprocess

from harness import *  # noqa: F401,F403

CITING = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs"))
                                if f.endswith(".md"))
# A results file named in full.
FULL = re.compile(r"results/((?:bench|soak|soak-flight|findings)-\d{8}-\d{6}(?:-quick)?\.json)")
# A time standing alone for a results file ("`-040025`"): ambiguous, and unchecked.
ABBREVIATED = re.compile(r"`-\d{6}`")
# A figure a run measured: a time per event, hit or switch, or a ratio to a floor.
FIGURE = re.compile(r"\d(?:[\d,.]*)\s*(?:ns|µs)\b|\d\.\d+x\b")


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "results"], capture_output=True,
                         text=True)
    check(out.returncode == 0, "git ls-files results: %s (the suite runs in a git checkout)"
          % out.stderr.strip())
    return {os.path.basename(p) for p in out.stdout.split()}


def text_of(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


@test
def docs_cited_results_are_committed():
    """Every results file the docs cite is committed, by its full name, and records its machine."""
    have = tracked()
    cited = set()
    for name in CITING:
        text = text_of(name)
        for m in ABBREVIATED.finditer(text):
            check(False, "%s cites a results file by its time alone (%s): name it in full"
                  % (name, m.group(0)))
        for m in FULL.finditer(text):
            check(m.group(1) in have, "%s cites results/%s, which is not committed"
                  % (name, m.group(1)))
            cited.add(m.group(1))
    check(cited, "no doc cites a results file")
    for f in sorted(cited):
        with open(os.path.join(ROOT, "results", f)) as fh:
            rec = json.load(fh)
        m = rec.get("machine") or {}
        check(m.get("kernel") and m.get("cpus") and m.get("date"),
              "results/%s does not say which machine it ran on, and when (machine.kernel, "
              "machine.cpus, machine.date)" % f)


@test
def docs_performance_sections_cite_their_run():
    """Each section of docs/performance.md that quotes a measured time or ratio names the run
    it comes from (a results file), so that no figure is stated from memory."""
    text = text_of("docs/performance.md")
    bad = []
    for sec in re.split(r"\n(?=## )", text):
        title = sec.splitlines()[0]
        if FIGURE.search(sec) and not FULL.search(sec):
            bad.append(title)
    eq(bad, [], "sections of docs/performance.md with figures and no results file")


@test
def docs_findings_precision_is_the_committed_run():
    """docs/jsonl.md's table of precision and recall per family is the committed precision
    corpus run it names (FINDINGS_RESULTS=results/findings-*.json python3
    tests/integration/run.py precision), row by row."""
    text = text_of("docs/jsonl.md")
    files = [m.group(1) for m in FULL.finditer(text) if m.group(1).startswith("findings-")]
    eq(len(set(files)), 1, "findings results files docs/jsonl.md cites")
    with open(os.path.join(ROOT, "results", files[0])) as f:
        fams = json.load(f)["families"]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0] in fams:
            rows[cells[0]] = cells[1:]
    eq(sorted(rows), sorted(fams), "families in the table")
    fmt = lambda v: "-" if v is None else "%g" % v
    for name, r in fams.items():
        want = [str(r["runs"]), str(r["planted"]), str(r["found"]), str(r["true_positives"]),
                str(r["false_positives"]), str(r["false_negatives"]), fmt(r["precision"]),
                fmt(r["recall"])]
        eq(rows[name], want, "the table's row for %s" % name)


# ---- the figures quoted, against the run they cite ----

# A measured figure: a number (or a range of two) and a unit of time, rate, size or ratio.
_UNITS = [(r"M events/s|M events per second|M/s", "rate", 1e6), (r"ns", "time", 1),
          (r"µs|us", "time", 1e3), (r"ms", "time", 1e6), (r"GiB", "mem", 2 ** 30),
          (r"MiB", "mem", 2 ** 20), (r"KiB", "mem", 2 ** 10), (r"GB", "mem", 1e9),
          (r"MB", "mem", 1e6), (r"KB", "mem", 1e3), (r"bytes per event", "bpe", 1),
          (r"x|×", "ratio", 1)]
_NUM = r"(\d[\d,]*(?:\.\d+)?)"
# "5.3–6.8 µs", "13.7 / 6.4 / 5.1 M events/s": each number has the unit.
MEASURED = re.compile(r"(?<![\w.,])(" + _NUM + r"(?:\s*(?:–|-|to|/)\s*" + _NUM + r")*)\s?("
                      + "|".join(u for u, _, _ in _UNITS) + r")(?![\w/])")
# A sentence about runs whose results files were not kept, and says so: another machine's
# (the AMD VM of earlier sessions) or an earlier session's. Its figures cite no file.
NOT_KEPT = re.compile(r"AMD|earlier session")
# A size that is a setting of the run, not something it measured.
SETTING_AFTER = re.compile(r"\s*(?:ring\b|reorder window|sample\b)")
# Figures a sentence gives with their run that are not one of its values or a difference,
# ratio or size the test derives, with how they come from it.
DERIVED = {
    ("docs/python.md", "2,110 ns"): "a step is two switches: twice interp.asyncio.native_ns",
    ("docs/performance.md", "2,110 ns"): "twice interp.asyncio.native_ns, as in python.md",
    ("docs/lua.md", "98 ns"): "a resume is two switches: twice interp.lua.native_ns",
    ("docs/performance.md", "98 ns"): "twice interp.lua.native_ns, as in lua.md",
    ("docs/performance.md", "1.1 KB"): "the difference of two peak RSS over 99,000 coroutines",
    ("docs/reliability.md", "1.1 KB"): "the difference of two peak RSS over 99,000 coroutines",
}


def _unit_kind(u):
    return next((kind, scale) for pat, kind, scale in _UNITS if re.fullmatch(pat, u))


def _key_kind(key):
    """What a results file's key holds, in which unit, from its name."""
    k = key.lower()
    if "events_per" in k:
        return "rate", 1
    if "bytes_per_event" in k:
        return "bpe", 1
    if re.search(r"(^|_)ns($|_)", k):
        return "time", 1
    if re.search(r"(^|_)us($|_)", k):
        return "time", 1e3
    if re.search(r"(^|_)kib($|_)", k):
        return "mem", 2 ** 10
    if re.search(r"(^|_)(mib|mb)($|_)", k):
        return "mem", 2 ** 20
    if k.endswith("bytes"):
        return "mem", 1
    if "over" in k or "ratio" in k or "slowdown" in k:
        return "ratio", 1
    return "count", 1


def results_leaves(name, _cache={}):
    """[(path, kind, value in base units)] of every number a results file holds (ns, events/s,
    bytes, ratios; "count" for the rest). A number's unit is its key's, or its nearest
    enclosing key's that has one (the runs of a row, an RSS time series); keys that are
    numbers (a replay's event count) are counts."""
    if name in _cache:
        return _cache[name]
    with open(os.path.join(ROOT, "results", name)) as f:
        rec = json.load(f)
    out = []

    def walk(obj, path, unit):
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k.isdigit():
                    out.append((path + (k, "#"), "count", float(k)))
                kind = _key_kind(k)
                walk(v, path + (k,), kind if kind[0] != "count" else unit)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, path + (i,), unit)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            out.append((path, unit[0], obj * unit[1]))
    walk(rec, (), ("count", 1))
    _cache[name] = out
    return out


def results_values(names):
    """{kind: values} the results files give, in base units: each value; the differences and
    ratios of two values of one kind side by side (in one object); sizes per event times a
    replay's count of events (a numeric key); and, of files cited together, the mean of each
    value they share (the median of two runs)."""
    out = {k: set() for k in ("time", "rate", "mem", "bpe", "ratio", "count")}
    by_path, events = {}, set()
    for name in names:
        siblings = {}
        for path, kind, v in results_leaves(name):
            out[kind].add(v)
            if path[-1] == "#":
                events.add(v)
            by_path.setdefault(path, []).append((kind, v))
            siblings.setdefault(path[:-1], []).append((kind, v))
        for typed in siblings.values():
            for (k1, a), (k2, b) in itertools.permutations(typed, 2):
                if k1 == k2 and k1 in ("time", "rate", "mem"):
                    if k1 != "rate":
                        out[k1].add(a - b)
                    if b:
                        out["ratio"].add(a / b)
    for vals in by_path.values():
        if len(vals) > 1:
            out[vals[0][0]].add(sum(v for _, v in vals) / len(vals))
    out["mem"] |= {b * n for b in out["bpe"] for n in events}
    return out


def figure_holds(text, kind, scale, values):
    """True if one of values, in the figure's unit, rounds to the figure: to its last decimal,
    or for a whole number ending in zeros ("about 420"), to its last other digit."""
    f = float(text.replace(",", ""))
    digits = text.replace(",", "")
    if "." in digits:
        ulp = 10 ** -len(digits.split(".")[1])
    else:
        ulp = 10 ** (len(digits) - len(digits.rstrip("0"))) if f else 1
    return any(abs(v / scale - f) <= ulp * 0.5001 for v in values.get(kind, ()))


def doc_claims(text):
    """(section title, kind, text, its sentences) for each table row, list item and paragraph
    outside code; kind is "row" or "prose"."""
    out, cur, fence, title = [], [], False, ""

    def flush():
        if cur:
            para = " ".join(cur)
            out.append((title, "prose", para,
                        re.split(r"(?<=[.;])\s+(?=[A-Z(`*])", para)))
            cur.clear()
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            flush()
            continue
        if fence or (line.startswith("    ") and not cur):
            continue
        if line.startswith("#"):
            flush()
            title = line.lstrip("#").strip()
        elif line.startswith("|"):
            flush()
            out.append((title, "row", line, [line]))
        elif not line.strip() or line.startswith("- "):
            flush()
            if line.strip():
                cur.append(line.strip())
        else:
            cur.append(line.strip())
    flush()
    return out


@test
def docs_figures_are_their_runs():
    """A time, rate, size or ratio a doc gives with the results file of its run is that run's:
    a value the file holds, to the figure's last digit, or a difference or ratio of two it
    holds side by side, or a size per event times a count. A figure in a sentence (or table
    row) naming a results file is checked against the files it names; in a table row naming
    none, against the files the first paragraph of its section names (docs/performance.md's
    tables). A sentence that gives a measured figure and sends the reader to
    docs/performance.md or `make bench` for it names the results file too, so that what it
    says can be checked. Figures of runs whose files were not kept (a sentence that names the
    AMD VM or an earlier session), settings (a ring's size) and the DERIVED ones are left out."""
    have = tracked()
    bad, checked = [], 0
    for name in CITING:
        section, source = None, []
        for title, kind, unit, sentences in doc_claims(text_of(name)):
            if title != section:
                section, source = title, []
                if kind == "prose":
                    source = FULL.findall(unit)
            for s in sentences:
                files = FULL.findall(s) or (source if kind == "row" else [])
                figures = [m for m in MEASURED.finditer(s)
                           if not SETTING_AFTER.match(s[m.end():])]
                if not figures or NOT_KEPT.search(s):
                    continue
                if not files:
                    if name != "docs/performance.md" and re.search(
                            r"docs/performance\.md|make bench", s):
                        bad.append("%s: %r gives a measured figure and points at "
                                   "docs/performance.md: name its results file" % (name, s[:160]))
                    continue
                # A file not committed: docs_cited_results_are_committed says so.
                values = results_values(sorted(set(f for f in files if f in have)))
                for m in figures:
                    unit = m.group(m.lastindex)
                    kind_, scale = _unit_kind(unit)
                    for num in re.findall(_NUM, m.group(1)):
                        checked += 1
                        fig = "%s %s" % (num, unit)
                        if (name, fig) in DERIVED or figure_holds(num, kind_, scale, values):
                            continue
                        bad.append("%s: %s is not in %s: %r" % (
                            name, fig, ", ".join(sorted(set(files))),
                            s[max(0, m.start() - 80):m.end() + 40]))
    check(checked > 100, "only %d figures checked" % checked)
    eq(bad, [], "figures in the docs that their runs' results files do not hold")
