"""The docs' performance figures come from results files committed with them.

docs/performance.md, docs/reliability.md, docs/probes.md, docs/store.md and README.md quote
measurements; each must name the results file `make bench` (or `make soak`) wrote, by its
full name, and that file must be in the repository (a fresh clone has what git tracks, and
nothing else), a JSON record of the machine it ran on.
"""
import json
import re
import subprocess

from harness import *  # noqa: F401,F403

CITING = ["README.md"] + ["docs/" + f for f in ("performance.md", "reliability.md", "probes.md",
                                               "store.md", "go.md", "switch.md", "cxx20.md",
                                               "jsonl.md")]
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
