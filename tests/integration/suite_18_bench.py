"""make bench runs (its numbers are not asserted: this is not a timed test)."""
from harness import *  # noqa: F401,F403


@test
def bench_quick_mode_writes_a_complete_table():
    p = run(["make", "-s", "-C", ROOT, "bench"], env={"BENCH_QUICK": "1"}, timeout=600)
    eq(p.returncode, 0, "make bench (%s)" % (p.stderr.strip()[-500:]))
    path = p.stdout.strip().splitlines()[-1].split("written: ")[-1]
    with open(path) as f:
        res = json.load(f)
    for key in ("floor_ns_per_hit", "corobpf_ns_per_hit", "corobpf_over_floor", "untraced_site_ns"):
        check(isinstance(res["probe"].get(key), (int, float)), "probe.%s missing" % key)
    for n, row in res["replay"].items():
        for fmt in ("model", "jsonl", "pftrace", "db"):
            check(row[fmt + "_events_per_s"] > 0 and row[fmt + "_peak_rss_kib"] > 0,
                  "replay %s %s" % (n, fmt))
    for key in ("none_ns_per_hit", "fp_ns_per_hit", "dwarf_ns_per_hit", "dwarf_lost_max"):
        check(isinstance(res["stacks"].get(key), (int, float)), "stacks.%s missing" % key)
    # The runtime families' rows: measured, or skipped saying why (a runtime not installed).
    for fam in ("ruby", "greenlet", "qemu"):
        row = res["switch"][fam]
        check(isinstance(row.get("corobpf_over_floor"), (int, float)) or
              isinstance(row.get("skipped"), str), "switch.%s: %s" % (fam, row))
    check(res["loss"]["events"] > 0, "the loss run traced nothing")
    eq(res["loss"]["lost"], 0, "events lost at the default ring size in the quick run")
    check("per hit: corobpf" in p.stdout and "bytes per event" in p.stdout and
          "--stacks, per create" in p.stdout, p.stdout)
    os.unlink(path)
