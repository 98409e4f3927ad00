#!/usr/bin/env python3
"""make bench: corobpf's costs, measured side by side in one run.

Absolute times on shared VMs drift; every figure here is measured against
its baseline in the same run, repeated, and reported as a median and as a
ratio. Prints a table and writes it as JSON to results/bench-<time>.json.

    BENCH_QUICK=1 make bench     # small sizes, a few seconds (the test suite runs this)

Sections:
  probe      a probe site untraced vs compiled out; traced by an empty BPF program
             (the kernel's floor), by corobpf, by bpftrace printing its arguments
  sched      added time per context switch with corobpf's scheduling view loaded
  switch     the switch-function path (unmodified libraries): added time per
             swapcontext (ucontext) and per Boost.Fiber yield (ontop_fcontext),
             against an empty BPF program on the same instructions, and against
             one on the functions' entries (single-stepped); and per switch of the
             runtimes traced with no flags (Ruby fibers, greenlets, QEMU coroutines in
             qemu-img bench), against an empty program at every site corobpf probes
             for that family (a runtime not installed is skipped, saying so; in CI it fails).
             The empty program is attached through the link corobpf uses there (one
             uprobe_multi link per object, kernel 6.6+), so both run by the same kernel
             path. Every row times the traced process's own CPU (where the trap and the
             program run; not corobpf's reader): the runtimes' loops read their thread's
             CPU clock, uctx, fibers and qemu-img report theirs through
             tools/bench/cpu_preload.c.
             A last line gives each family's ratio (target: 1.2x)
  interp     the interpreters traced with no flags through uprobe sessions (asyncio tasks,
             Lua coroutines): added time per switch (a task's step or a coroutine's resume is
             a switch in and out), against an empty session program on the same functions
  go         a Go channel ping-pong (unmodified Go): slowdown under corobpf beside its
             slowdown under Go's own execution tracer (runtime/trace), in the same run
  cxx20      C++20 coroutines through the promise adapter: CPU time per resume untraced,
             compiled out, traced by corobpf and by an empty program on the same probes
  replay     events/s and peak RSS replaying synthetic captures to each output
  flood      threads firing ready flat out on the batched path (1, 2, 4; default and 512 MiB
             ring; to JSONL and to a raw capture): events made, traced and lost, the reader's
             records per CPU second, time per event against the in-target limit (FLOOD_BASE=PATH
             interleaves another build)
  size       bytes per event of each output
  loss       events lost at full probe rate with the default ring
  exec_cost  what -a adds to an exec: a loop of /bin/true without corobpf, under -a with
             the exec gate off and on, and under -a for programs never seen (each exec of
             a fresh copy held until examined): median per exec and ratios
  pgstore    events/s storing a synthetic capture into a local PostgreSQL server (default
             settings), of a live run into it, and the server's own ceiling (the same rows
             loaded by psql \\copy), side by side
             (corobpf report CAPTURE -o postgresql://...; a throwaway server of its own,
             tools/pg_server.sh, or COROBPF_PG_URI): target 1 M/s
  scale      a million coroutines (100,000 alive at once) traced live to JSONL,
             Perfetto and SQLite: peak RSS, and the memory per live coroutine

make soak (tools/bench/soak.py) runs the hour-long steady-rate soak.
"""
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
# COROBPF=PATH: measure another build of corobpf (the workloads stay this tree's).
COROBPF = os.environ.get("COROBPF") or os.path.join(ROOT, "corobpf")
QUICK = os.environ.get("BENCH_QUICK") == "1"
# Every row names its probe path: the trap path unless the row says batched (corobpf's default
# is batched; the rows kept from before it compare with their earlier runs on the trap path).
os.environ["COROBPF_PROBE_PATH"] = "trap"
WORK = tempfile.mkdtemp(prefix="corobpf-bench-")
RUNS = 1 if QUICK else 5


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw)


def median(xs):
    return statistics.median(xs)


def per_iter(out):
    return float(re.search(r"([\d.]+) ns/iter", out).group(1))


def cpu_per_iter(out):
    """tools/bench/flood's CPU time per event: its threads' own, not the time others held their
    CPUs."""
    return float(re.search(r"([\d.]+) cpu-ns/iter", out).group(1))


def trailer_of(path):
    """The last line of a JSONL trace, read from its end: reading the whole file would grow
    this process, and every child forked after it starts with that peak RSS."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - 65536))
        return json.loads(f.read().splitlines()[-1])


def timed_cpu(cmd):
    """Wall seconds, this child's own peak RSS (KiB) and its CPU seconds (user + system) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    t = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (cmd, p.stderr.read().decode()))
    return t, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def timed(cmd):
    """Wall seconds and this child's own peak RSS (KiB) of one run."""
    t, rss, _ = timed_cpu(cmd)
    return t, rss


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"kernel": platform.release(), "cpu": model, "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": QUICK}


def probe_costs(res):
    loop, loop_off = os.path.join(BUILD, "bench/probe_loop"), os.path.join(BUILD, "bench/probe_loop_off")
    n_fast = 10**6 if QUICK else 10**9
    on = [per_iter(sh([loop, str(n_fast)]).stdout) for _ in range(RUNS)]
    off = [per_iter(sh([loop_off, str(n_fast)]).stdout) for _ in range(RUNS)]
    res["probe"] = {"untraced_ns_per_iter": median(on), "compiled_out_ns_per_iter": median(off),
                    "untraced_site_ns": median(on) - median(off)}
    loop5 = os.path.join(BUILD, "bench/probe_loop_nop5")
    on5 = [per_iter(sh([loop5, str(n_fast)]).stdout) for _ in range(RUNS)]
    res["probe"]["untraced_site_nop5_ns"] = median(on5) - median(off)
    # CORO_ANNOUNCE_WANTED() in a scheduler's loop, nothing tracing it (usdt/corobpf.h).
    on_a = [per_iter(sh([loop, str(n_fast), "announce"]).stdout) for _ in range(RUNS)]
    off_a = [per_iter(sh([loop_off, str(n_fast), "announce"]).stdout) for _ in range(RUNS)]
    res["probe"]["announce_wanted_untraced_ns"] = median(on_a) - median(off_a)
    n = 2000 if QUICK else 200000
    rows = {"floor": [], "args": [], "counting": [], "corobpf": [], "corobpf_sched": [], "floor_nop5": [],
            "corobpf_nop5": []}
    for _ in range(RUNS):
        # Interleaved, so drift hits all of them alike.
        rows["floor"].append(per_iter(sh([os.path.join(BUILD, "bench/floor"), "ready", "--", loop, str(n)]).stdout))
        # libbpf's generic USDT argument read alone, and a counters-only mode at the least:
        # the argument counted per coroutine in the kernel, no ring buffer.
        rows["args"].append(per_iter(sh([os.path.join(BUILD, "bench/floor"), "args:ready", "--", loop, str(n)]).stdout))
        rows["counting"].append(per_iter(sh([os.path.join(BUILD, "bench/floor"), "count:ready", "--", loop, str(n)]).stdout))
        rows["corobpf"].append(per_iter(sh([COROBPF, "-q", "--no-sched", "--probe-path", "trap", "--", loop,
                                                str(n)]).stdout))
        rows["corobpf_sched"].append(per_iter(sh([COROBPF, "-q", "--probe-path", "trap", "--", loop,
                                                      str(n)]).stdout))
        # The same probe built with COROBPF_NOP5: the floor probes the nop (optimized where the
        # kernel can); corobpf the stack step before it (single-stepped: docs/probes.md).
        rows["floor_nop5"].append(per_iter(sh([os.path.join(BUILD, "bench/floor"), "ready", "--", loop5, str(n)]).stdout))
        rows["corobpf_nop5"].append(per_iter(sh([COROBPF, "-q", "--no-sched", "--probe-path", "trap", "--",
                                                     loop5, str(n)]).stdout))
    base = median(off)
    for k, v in rows.items():
        res["probe"][k + "_ns_per_hit"] = median(v) - base
    res["probe"]["corobpf_over_floor"] = res["probe"]["corobpf_ns_per_hit"] / res["probe"]["floor_ns_per_hit"]
    res["probe"]["corobpf_nop5_over_floor_nop5"] = res["probe"]["corobpf_nop5_ns_per_hit"] / res["probe"]["floor_nop5_ns_per_hit"]
    res["probe"]["corobpf_nop1_over_nop5"] = res["probe"]["corobpf_ns_per_hit"] / res["probe"]["corobpf_nop5_ns_per_hit"]
    with open("/proc/kallsyms") as f:
        res["probe"]["kernel_optimizes_uprobes"] = any(l.rstrip().endswith(" arch_uprobe_optimize") for l in f)
    # What each tool adds beyond the kernel's trap, which neither can avoid.
    res["probe"]["corobpf_added_ns"] = res["probe"]["corobpf_ns_per_hit"] - res["probe"]["floor_ns_per_hit"]
    res["probe"]["counting_added_ns"] = res["probe"]["counting_ns_per_hit"] - res["probe"]["floor_ns_per_hit"]
    res["probe"]["args_added_ns"] = res["probe"]["args_ns_per_hit"] - res["probe"]["floor_ns_per_hit"]
    res["probe"]["corobpf_over_counting"] = res["probe"]["corobpf_ns_per_hit"] / res["probe"]["counting_ns_per_hit"]
    if QUICK:
        res["probe"]["bpftrace"] = "skipped in quick mode"
    elif shutil.which("bpftrace"):
        out = os.path.join(WORK, "bt.txt")
        nb = n // 4
        bt = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            sh(["bpftrace", "-o", out, "-e",
                'usdt:%s:corobpf:ready { printf("%%d %%d\\n", tid, arg0); }' % loop, "-c", "%s %d" % (loop, nb)])
            bt.append((time.perf_counter() - t0))
            # bpftrace's own start-up and exit are not per event: measure them apart.
        idle = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            sh(["bpftrace", "-o", out, "-e",
                'usdt:%s:corobpf:ready { printf("%%d %%d\\n", tid, arg0); }' % loop, "-c", "%s %d" % (loop, 1)])
            idle.append(time.perf_counter() - t0)
        per = (median(bt) - median(idle)) * 1e9 / nb - base
        res["probe"]["bpftrace_ns_per_event"] = per
        res["probe"]["bpftrace_over_corobpf"] = per / res["probe"]["corobpf_ns_per_hit"]
        res["probe"]["bpftrace_added_ns"] = per - res["probe"]["floor_ns_per_hit"]
        res["probe"]["bpftrace_added_over_corobpf_added"] = \
            res["probe"]["bpftrace_added_ns"] / max(res["probe"]["corobpf_added_ns"], 1)


def batch_costs(res):
    """The two probe paths side by side on one program in one run (docs/performance.md,
    "The batched path"): the kernel's trap floor (an empty BPF program on every hit), corobpf's
    per-event path on the default and the five-byte site, the batched path with and without the
    scheduler view, bpftrace; each as time per event beyond the compiled-out loop, and the events
    each lost."""
    loop, loop_off = os.path.join(BUILD, "bench/probe_loop"), os.path.join(BUILD, "bench/probe_loop_off")
    loop5 = os.path.join(BUILD, "bench/probe_loop_nop5")
    floor = os.path.join(BUILD, "bench/floor")
    n = 20000 if QUICK else 2000000
    out = os.path.join(WORK, "batch.jsonl")
    rows = {k: [] for k in ("floor", "trap", "trap_nop5", "batched", "batched_sched", "batched_ring512",
                            "untraced", "off")}
    lost = {k: 0 for k in ("trap", "trap_nop5", "batched", "batched_sched", "batched_ring512")}

    def traced(key, cmd):
        p = sh([COROBPF, "-q", "--force", "-o", out] + cmd)
        rows[key].append(per_iter(p.stdout))
        lost[key] = max(lost[key], trailer_of(out)["lost"]["events"])

    for _ in range(RUNS):
        # Interleaved, so drift hits all of them alike.
        rows["off"].append(per_iter(sh([loop_off, str(n)]).stdout))
        rows["untraced"].append(per_iter(sh([loop, str(n)]).stdout))
        rows["floor"].append(per_iter(sh([floor, "ready", "--", loop, str(n)]).stdout))
        traced("trap", ["--no-sched", "--probe-path", "trap", "--", loop, str(n)])
        traced("trap_nop5", ["--no-sched", "--probe-path", "trap", "--", loop5, str(n)])
        traced("batched", ["--no-sched", "--probe-path", "batched", "--", loop, str(n)])
        traced("batched_sched", ["--probe-path", "batched", "--", loop, str(n)])
        # The batched path outruns the reader of the default 16 MiB ring on this flood.
        traced("batched_ring512", ["--no-sched", "--probe-path", "batched", "--ring-size", "512", "--",
                                   loop, str(n)])
    base = median(rows["off"])
    b = {k + "_ns_per_event": median(v) - base for k, v in rows.items() if k != "off"}
    b["events"] = n
    b.update({k + "_lost": v for k, v in lost.items()})
    # Beyond the probe as it costs untraced (the batched probe's semaphore test is in both).
    b["batched_added_ns"] = b["batched_ns_per_event"] - b["untraced_ns_per_event"]
    b["trap_added_over_floor_ns"] = b["trap_ns_per_event"] - b["floor_ns_per_event"]
    b["batched_added_over_floor"] = b["batched_added_ns"] / b["floor_ns_per_event"]
    b["trap_over_batched"] = b["trap_ns_per_event"] / max(b["batched_ns_per_event"], 1e-9)
    p = res.get("probe", {})
    if "bpftrace_ns_per_event" in p:
        b["bpftrace_ns_per_event"] = p["bpftrace_ns_per_event"]
    res["batch"] = b


def flood_remove_outputs():
    """The last traced flood's outputs, gone; returns their path without the extension."""
    base = os.path.join(WORK, "flood")
    for ext in (".jsonl", ".raw"):
        if os.path.exists(base + ext):
            os.unlink(base + ext)
    return base


def flood_settle():
    """Before a measured run: the last traced run's outputs gone, the disk written, a moment for
    what the kernel does after a process (its ring's memory freed, its pages written back).
    Quick mode (no figures come of it) does not wait."""
    flood_remove_outputs()
    if not QUICK:
        os.sync()
        time.sleep(1.0)


def flood_run(corobpf, threads, n, ring, raw_only):
    """One traced flood: the program's own count and time per event, what the trace holds and
    lost, and corobpf's CPU seconds (user + system) for the whole run."""
    flood = os.path.join(BUILD, "bench/flood")
    base = flood_remove_outputs()
    out = ["--raw", base + ".raw"] if raw_only else ["-o", base + ".jsonl"]
    cmd = [corobpf, "-v", "--force", "--probe-path", "batched"] + out
    if ring:
        cmd += ["--ring-size", str(ring)]
    t0 = time.perf_counter()
    with open(base + ".err", "w+") as ef:
        p = subprocess.Popen(cmd + ["--", flood, str(threads), str(n)], stdout=subprocess.PIPE,
                             stderr=ef, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        text = p.stdout.read()
        ef.seek(0)
        err = ef.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed: %s" % (cmd, err))
    produced = int(re.search(r"produced (\d+)", text).group(1)) if n else 0
    r = {"produced": produced, "ns_per_event": per_iter(text) if n else 0.0,
         "cpu_ns_per_event": cpu_per_iter(text) if n else 0.0,
         "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}
    # The reader's own pace (its -v line): records per second of reading the ring, the model
    # thread's work apart. A build from before the line has none.
    m = re.search(r"reader: \d+ records in [\d.]+ ms of reading the ring \(([\d.]+) M", err)
    r["reader_records_per_s"] = float(m.group(1)) * 1e6 if m else None
    if raw_only:
        j = json.loads(sh([corobpf, "report", "--json", base + ".raw"]).stdout)
        # The program's readies (the kernel's records of the run apart); a build from before
        # events_by_kind in report --json counts every event.
        r["drained"] = j["events_by_kind"]["ready"] if "events_by_kind" in j else j["events"]
        r["lost"] = j["lost_events"]
    else:
        t = trailer_of(base + ".jsonl")
        r["drained"], r["lost"] = t["events_by_kind"]["ready"], t["lost"]["events"]
    return r


def flood_costs(res):
    """Threads firing ready flat out on the batched path (docs/performance.md, "Flood"): per 1, 2
    and 4 threads, the default and a 512 MiB ring, to JSONL and to a raw capture only, the events
    the program made, the trace held and lost, the reader's records per CPU second (corobpf's CPU
    beyond an empty run's), and the program's time per event against the in-target limit (the
    same 40-byte record into a thread-local buffer with a vDSO timestamp, no corobpf). FLOOD_BASE
    names another build of corobpf to interleave with this one (before and after, one run)."""
    flood = os.path.join(BUILD, "bench/flood")
    n = 20000 if QUICK else 2000000
    runs = 1 if QUICK else 3
    builds = [("new", COROBPF)]
    if os.environ.get("FLOOD_BASE"):
        builds.append(("base", os.environ["FLOOD_BASE"]))
    configs = [(t, ring, raw) for t in (1, 2, 4) for ring in (0, 512) for raw in (False, True)]
    rows = {}
    limits = {t: {"limit": [], "limit_tsc": [], "untraced": [], "limit_cpu": []}
              for t in (1, 2, 4)}
    for _ in range(runs):
        for t in (1, 2, 4):
            flood_settle()
            for mode in ("limit", "limit_tsc"):
                out = sh([flood, str(t), str(n), mode]).stdout
                limits[t][mode].append(per_iter(out))
                if mode == "limit":
                    limits[t]["limit_cpu"].append(cpu_per_iter(out))
            limits[t]["untraced"].append(per_iter(sh([flood, str(t), str(n)]).stdout))
        for name, bin_ in builds:
            # An empty run (no event) per output and ring: start-up, attach and exit.
            for ring in (0, 512):
                for raw in (False, True):
                    key = (name, "idle", ring, raw)
                    rows.setdefault(key, []).append(flood_run(bin_, 1, 0, ring, raw))
            for t, ring, raw in configs:
                # The limit again right before each traced run: the VM's pace moves by tens of
                # percent over minutes, and a ratio means what it says only of runs side by side.
                # Both after the last run's aftermath (its outputs' pages, the kernel freeing its
                # ring) has settled, so that neither of the pair runs into it.
                flood_settle()
                out = sh([flood, str(t), str(n), "limit"]).stdout
                r = flood_run(bin_, t, n, ring, raw)
                r["limit_ns"], r["limit_cpu_ns"] = per_iter(out), cpu_per_iter(out)
                rows.setdefault((name, t, ring, raw), []).append(r)
    f = {"events_per_thread": n, "runs": runs, "rows": []}
    for t in (1, 2, 4):
        f["limit_%d_ns_per_event" % t] = median(limits[t]["limit"])
        f["limit_%d_cpu_ns_per_event" % t] = median(limits[t]["limit_cpu"])
        f["limit_tsc_%d_ns_per_event" % t] = median(limits[t]["limit_tsc"])
        f["untraced_%d_ns_per_event" % t] = median(limits[t]["untraced"])
    for name, _ in builds:
        for t, ring, raw in configs:
            rs = rows[(name, t, ring, raw)]
            idle = median([r["cpu_s"] for r in rows[(name, "idle", ring, raw)]])
            reader = [r["drained"] / max(r["cpu_s"] - idle, 1e-3) for r in rs]
            row = {"build": name, "threads": t, "ring_mib": ring or 16,
                   "output": "raw" if raw else "jsonl",
                   "produced": median([r["produced"] for r in rs]),
                   "drained": median([r["drained"] for r in rs]),
                   "lost": median([r["lost"] for r in rs]),
                   "lost_share": median([r["lost"] / max(r["produced"], 1) for r in rs]),
                   "reader_records_per_cpu_s": median(reader),
                   "reader_records_per_s": (median([r["reader_records_per_s"] for r in rs])
                                            if all(r["reader_records_per_s"] for r in rs)
                                            else None),
                   "ns_per_event": median([r["ns_per_event"] for r in rs]),
                   "cpu_ns_per_event": median([r["cpu_ns_per_event"] for r in rs])}
            # Each run over the limit measured just before it, the median of those ratios
            # (results before 2026-12-03 12:00 divided by the limit's median over the rounds).
            row["limit_ns_per_event"] = median([r["limit_ns"] for r in rs])
            row["limit_cpu_ns_per_event"] = median([r["limit_cpu_ns"] for r in rs])
            row["over_limit"] = median([r["ns_per_event"] / r["limit_ns"] for r in rs])
            # The program's own CPU per event (the BPF copies it traps into among it) over the
            # limit's: what tracing costs the program, apart from the CPUs corobpf's reader and
            # model thread share with it.
            row["cpu_over_limit"] = median([r["cpu_ns_per_event"] / r["limit_cpu_ns"] for r in rs])
            # And in nanoseconds: what tracing adds per event, which does not scale with the
            # clock the way a ratio does.
            row["cpu_ns_added"] = median([r["cpu_ns_per_event"] - r["limit_cpu_ns"] for r in rs])
            # Every event made is in the trace or counted lost (the sched view's own are apart).
            row["accounted"] = all(r["drained"] + r["lost"] >= r["produced"] for r in rs)
            f["rows"].append(row)
    # The section in three figures, per build: the rows' ratios (median and worst) and what
    # tracing adds per event in nanoseconds (median over the rows).
    for name, _ in builds:
        mine = [r for r in f["rows"] if r["build"] == name]
        f["%s_cpu_over_limit_median" % name] = median([r["cpu_over_limit"] for r in mine])
        f["%s_cpu_over_limit_max" % name] = max(r["cpu_over_limit"] for r in mine)
        f["%s_cpu_ns_added_median" % name] = median([r["cpu_ns_added"] for r in mine])
    if len(builds) > 1:
        by = {(r["build"], r["threads"], r["ring_mib"], r["output"]): r for r in f["rows"]}
        f["new_over_base_records_per_cpu_s"] = median(
            [by[("new",) + k[1:]]["reader_records_per_cpu_s"] /
             by[("base",) + k[1:]]["reader_records_per_cpu_s"] for k in by if k[0] == "new"])
    res["flood"] = f


def stacks_cost(res):
    """--stacks: what a stack adds per event, on a probe that carries one (create), in a loop
    built with frame pointers (so fp walks them); and fp on the usual build without them."""
    loop_fp, loop = os.path.join(BUILD, "bench/probe_loop_fp"), os.path.join(BUILD, "bench/probe_loop")
    loop_off = os.path.join(BUILD, "bench/probe_loop_off")
    n = 2000 if QUICK else 200000
    base = median([per_iter(sh([loop_off, str(n)]).stdout) for _ in range(RUNS)])
    runs = {"none": (loop_fp, None), "fp": (loop_fp, "fp"), "dwarf": (loop_fp, "dwarf"),
            "fp_without_frame_pointers": (loop, "fp")}
    times = {k: [] for k in runs}
    lost = {k: [] for k in runs}
    out = os.path.join(WORK, "stk.jsonl")
    for _ in range(RUNS):
        for k, (binary, mode) in runs.items():
            args = [COROBPF, "-q", "--no-sched", "--force", "-o", out]
            if mode:
                args.append("--stacks=" + mode)
            times[k].append(per_iter(sh(args + ["--", binary, str(n), "create"]).stdout))
            trailer = trailer_of(out)
            lost[k].append(trailer["lost"]["events"] + trailer["lost"].get("stacks_lost", 0))
    r = res["stacks"] = {"events": n}
    for k in runs:
        r[k + "_ns_per_hit"] = median(times[k]) - base
        r[k + "_lost_max"] = max(lost[k])
    for k in ("fp", "dwarf", "fp_without_frame_pointers"):
        r[k + "_added_ns"] = r[k + "_ns_per_hit"] - r["none_ns_per_hit"]
        r[k + "_over_none"] = r[k + "_ns_per_hit"] / r["none_ns_per_hit"]


def sched_cost(res):
    if not shutil.which("perf"):
        res["sched"] = {"skipped": "perf (linux-perf) not installed"}
        return
    loops = 5000 if QUICK else 200000
    target = subprocess.Popen([os.path.join(BUILD, "tests/scenarios"), "--wait", "yield"],
                              stdout=subprocess.PIPE, text=True)
    pid = target.stdout.readline().split()[1]
    without, with_ = [], []

    def pipe_us():
        out = sh(["perf", "bench", "sched", "pipe", "-l", str(loops)]).stdout
        return float(re.search(r"([\d.]+) usecs/op", out).group(1))
    try:
        for _ in range(RUNS):
            without.append(pipe_us())
            tr = subprocess.Popen([COROBPF, "-q", "-p", pid], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            time.sleep(0.3 if QUICK else 1.0)
            with_.append(pipe_us())
            tr.send_signal(signal.SIGINT)
            tr.wait()
    finally:
        target.kill()
        target.wait()
    # Each pipe operation is two context switches.
    res["sched"] = {"pipe_us_per_op": median(without), "pipe_us_per_op_traced": median(with_),
                    "added_ns_per_context_switch": (median(with_) - median(without)) * 1000 / 2,
                    "ratio": median(with_) / median(without)}


def switch_sites(cmd):
    """The instructions corobpf chose (from its JSONL switch_path records): {(lib, func): off}."""
    out = os.path.join(WORK, "sites.jsonl")
    sh([COROBPF, "-q", "--force", "--no-sched", "-o", out, "--"] + cmd)
    sites = {}
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] != "switch_path":
                continue
            for m in re.finditer(r"(\w+)\+0x([0-9a-f]+) \(", r["sites"]):
                sites[(r["object"], m.group(1))] = int(m.group(2), 16)
    return sites


def func_offset(lib, func):
    """File offset of a defined dynamic function (the text segments here map at their offset)."""
    addr = None
    for line in sh(["nm", "-D", "--defined-only", lib]).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[2].split("@")[0] == func:
            addr = int(f[0], 16)
    for line in sh(["readelf", "-lW", lib]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:8]:
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if vaddr <= addr < vaddr + filesz:
                return addr - vaddr + off
    raise RuntimeError("%s: %s not found" % (lib, func))


def call_offsets(obj):
    """File offsets of the calls (and tail jumps) to jump_fcontext/ontop_fcontext, by objdump."""
    offs = []
    for line in sh(["objdump", "-d", "--no-show-raw-insn", obj]).stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(call|jmp)\s+[0-9a-f]+ <(jump|ontop)_fcontext(@plt)?>", line)
        if m:
            offs.append(vaddr_offset(obj, int(m.group(1), 16)))
    return offs


def vaddr_offset(obj, addr):
    for line in sh(["readelf", "-lW", obj]).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:8]:
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if vaddr <= addr < vaddr + filesz:
                return addr - vaddr + off
    raise RuntimeError("%s: 0x%x is not in code" % (obj, addr))


CPU_PRELOAD = os.path.join(BUILD, "bench/cpu_preload.so")


def cpu_loop(cmd, switches):
    """One run of a loop workload that prints its wall ns per switch: that, and its own CPU ns
    per switch (tools/bench/cpu_preload.c; the trap and the BPF program run in its thread, a
    wait for a CPU and corobpf's reader do not), as (cpu, wall)."""
    p = sh(cmd, env=dict(os.environ, LD_PRELOAD=CPU_PRELOAD))
    comm = os.path.basename(cmd[cmd.index("--") + 1] if "--" in cmd else cmd[0])[:15]
    m = [l.split() for l in p.stderr.splitlines() if l.startswith("BENCH_CPU %s " % comm)]
    if not m:
        raise RuntimeError("%s reported no CPU time: %s" % (cmd, p.stderr[-300:]))
    return (float(m[-1][2]) + float(m[-1][3])) * 1e9 / switches, per_iter(p.stdout)


def loop_rows(cmds, switches):
    """Each command RUNS times, interleaved: the rows of CPU ns per switch, and of wall ns."""
    cpu, wall = {k: [] for k in cmds}, {k: [] for k in cmds}
    for _ in range(RUNS):
        for k, cmd in cmds.items():
            c, w = cpu_loop(cmd, switches)
            cpu[k].append(c)
            wall[k].append(w)
    return cpu, wall


def added(row, cpu, wall):
    """corobpf's and the floors' added time per switch over native, on the thread's CPU time
    (the ratio the row reports) and on the wall clock the loop prints (kept, noisier)."""
    base, wbase = median(cpu["native"]), median(wall["native"])
    for k in cpu:
        if k != "native":
            row[k + "_added_ns"] = median(cpu[k]) - base
            row[k + "_added_wall_ns"] = median(wall[k]) - wbase
    row["native_ns"] = base
    row["native_wall_ns"] = wbase
    row["corobpf_over_floor"] = row["corobpf_added_ns"] / row["floor_site_added_ns"]
    row["corobpf_over_floor_wall"] = row["corobpf_added_wall_ns"] / row["floor_site_added_wall_ns"]
    row["entry_over_site"] = row["floor_entry_added_ns"] / row["floor_site_added_ns"]
    row["runs"] = {"cpu_ns": cpu, "wall_ns": wall}


def switch_costs(res):
    uctx, fibers = os.path.join(BUILD, "tests/uctx"), os.path.join(BUILD, "tests/fibers")
    floor = os.path.join(BUILD, "bench/floor")
    n = 2000 if QUICK else 100000
    out = {}
    # ucontext: every swapcontext (2n of them), corobpf at the instruction it chose, the floor
    # there and at the entry (single-stepped).
    sites = switch_sites([uctx, "loop", "10"])
    libc = next(lib for (lib, fn) in sites if fn == "swapcontext")
    sc = func_offset(libc, "swapcontext")
    at = sc + sites[(libc, "swapcontext")]
    loop = [uctx, "loop", str(n)]
    cpu, wall = loop_rows({"native": loop,
                           "corobpf": [COROBPF, "-q", "--no-sched", "--"] + loop,
                           "floor_site": [floor, "uprobe:%s:%x" % (libc, at), "--"] + loop,
                           "floor_entry": [floor, "uprobe:%s:%x" % (libc, sc), "--"] + loop},
                          2 * n)
    u = {"site": "swapcontext+0x%x" % sites[(libc, "swapcontext")]}
    added(u, cpu, wall)
    out["ucontext"] = u
    # Boost.Fiber: a yield is one ontop_fcontext (Boost.Fiber resumes with resume_with).
    # Nothing in the switch functions is emulated; corobpf probes their calls. The floors:
    # an empty program on every call (found here with objdump, independently), and on the
    # two entries (single-stepped).
    lib = sh(["sh", "-c", "ldd %s | awk '/libboost_context/ {print $3}'" % fibers]).stdout.strip()
    fiberlib = sh(["sh", "-c", "ldd %s | awk '/libboost_fiber/ {print $3}'" % fibers]).stdout.strip()
    entries = "uprobe:%s:%s" % (lib, ",".join("%x" % func_offset(lib, fn)
                                             for fn in ("jump_fcontext", "ontop_fcontext")))
    calls = ";".join("uprobe:%s:%s" % (obj, ",".join("%x" % o for o in offs))
                     for obj, offs in ((o, call_offsets(o)) for o in (fibers, fiberlib)) if offs)
    # A loop of n yields by each of two fibers: 2n + 2 switches, as the program counts them.
    loop = [fibers, "loop", str(n)]
    cpu, wall = loop_rows({"native": loop,
                           "corobpf": [COROBPF, "-q", "--no-sched", "--"] + loop,
                           "floor_site": [floor, calls, "--"] + loop,
                           "floor_entry": [floor, entries, "--"] + loop}, 2 * n + 2)
    b = {"site": "the calls of jump_fcontext/ontop_fcontext"}
    added(b, cpu, wall)
    out["fcontext"] = b
    for fam, fn in (("ruby", ruby_switch), ("greenlet", greenlet_switch), ("qemu", qemu_switch)):
        out[fam] = fn(floor)
    res["switch"] = out


# The runtimes traced with no flags (docs/switch.md). Each row: the workload native, under
# corobpf, and under an empty program at every site corobpf probes for that family, interleaved
# run by run; the added time per switch, and corobpf's over the floor's.
RUBY = "/usr/bin/ruby3.1"
LIBRUBY = "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"
PYTHON = "/usr/bin/python3"   # Debian's: python3-greenlet is built for it, python3 may be another
GREENLET = "/usr/lib/python3/dist-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so"
QEMU_IMG = "/usr/bin/qemu-img"


def runtime_missing(*paths):
    """None if every path exists; else why the row is skipped. In CI a missing runtime fails
    the bench, as it fails tests/integration/suite_19_runtimes.py there."""
    missing = [p for p in paths if not os.path.exists(p)]
    if not missing:
        return None
    why = "%s missing (install with tools/deps.sh)" % ", ".join(missing)
    if os.environ.get("CI") == "true":
        raise RuntimeError("switch: " + why)
    return why


def family_run(cmd, family, env=None):
    """One traced run: the sites corobpf chose for family (its switch_path record) as
    [(func, offset in func, how)], their object, and the run's trailer."""
    out = os.path.join(WORK, "fam.jsonl")
    sh([COROBPF, "-q", "--force", "--no-sched", "-o", out, "--"] + cmd, env=env)
    rec = None
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "switch_path" and r["family"] == family:
                rec = r
    if rec is None:
        raise RuntimeError("corobpf chose no %s sites for %s" % (family, cmd))
    sites = [(m.group(1), int(m.group(2), 16), m.group(3))
             for m in re.finditer(r"(\w+)\+0x([0-9a-f]+) \(([\w-]+)", rec["sites"])]
    return rec["object"], sites, trailer_of(out)


def floor_spec(obj, sites):
    offs = ("%x" % (func_offset(obj, fn) + off) for fn, off, _ in sites)
    return "uprobe:%s:%s" % (obj, ",".join(offs))


def site_names(sites):
    return ", ".join("%s+0x%x (%s)" % (fn, off, how) for fn, off, how in sites)


def private_copy(path):
    """A copy of a runtime's file in the bench's directory, for the workload to run. A uprobe
    is on an inode, for every process: another tracer on the installed file (a test's bpftrace
    on this shared machine, left behind once) makes even the native run pay the trap, and the
    row measures nothing. The copy has the same instructions and no one else's probes."""
    dst = os.path.join(WORK, "private", path.lstrip("/"))
    if not os.path.exists(dst):
        if os.path.isdir(path):
            shutil.copytree(path, dst)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(path, dst)
    return dst


def loop_switch(floor, cmd, family, n, env):
    """A workload timing its own loop of n round trips (two switches each)."""
    env = dict(os.environ, **env)
    obj, sites, _ = family_run(cmd + ["10"], family, env)
    rows = {"native": [], "corobpf": [], "floor": []}
    spec = floor_spec(obj, sites)
    for _ in range(RUNS):
        rows["native"].append(per_iter(sh(cmd + [str(n)], env=env).stdout) / 2)
        rows["corobpf"].append(per_iter(sh([COROBPF, "-q", "--no-sched", "--"] + cmd + [str(n)],
                                           env=env).stdout) / 2)
        rows["floor"].append(per_iter(sh([floor, spec, "--"] + cmd + [str(n)], env=env).stdout) / 2)
    base = median(rows["native"])
    r = {"native_ns": base, "switches_per_run": 2 * n, "sites": site_names(sites),
         "corobpf_added_ns": median(rows["corobpf"]) - base,
         "floor_added_ns": median(rows["floor"]) - base}
    r["corobpf_over_floor"] = r["corobpf_added_ns"] / r["floor_added_ns"]
    r["runs"] = rows
    return r


def ruby_switch(floor):
    """A fiber resumed n times: coroutine_transfer twice per resume. corobpf probes only
    coroutine_transfer for Ruby (libruby exports nothing where a fiber starts or ends)."""
    why = runtime_missing(RUBY, LIBRUBY)
    if why:
        return {"skipped": why}
    lib = os.path.dirname(private_copy(LIBRUBY))
    return loop_switch(floor, [RUBY, os.path.join(ROOT, "tools/bench/fiber_loop.rb")], "ruby",
                       2000 if QUICK else 100000, {"LD_LIBRARY_PATH": lib})


def greenlet_switch(floor):
    """Two greenlets switching n times: g_switchstack twice per round trip. The floor also
    holds the family's start and finish sites, which fire once in the run."""
    why = runtime_missing(PYTHON, GREENLET)
    if why:
        return {"skipped": why}
    pkg = os.path.dirname(private_copy(os.path.dirname(GREENLET)))
    return loop_switch(floor, [PYTHON, os.path.join(ROOT, "tools/bench/greenlet_loop.py")],
                       "greenlet", 2000 if QUICK else 100000, {"PYTHONPATH": pkg})


def qemu_run_s(out):
    return float(re.search(r"Run completed in ([\d.]+) seconds", out).group(1))


def qemu_switch(floor):
    """qemu-img bench on a small raw image: a coroutine per request, made (qemu_coroutine_create,
    whose site is single-stepped), switched to and from, and ended (a switch with
    COROUTINE_TERMINATE), so every site fires per request. qemu-img times its own run; its
    switches and creates are counted once, from corobpf's trailer of a run of the same size.
    The floor is run on all the sites and on the switch site alone, to say where the time goes."""
    why = runtime_missing(QEMU_IMG)
    if why:
        return {"skipped": why}
    img = os.path.join(WORK, "qemu.raw")
    sh([QEMU_IMG, "create", "-q", "-f", "raw", img, "16M"])
    cmd = [private_copy(QEMU_IMG), "bench", "-c", str(1000 if QUICK else 30000), "-d", "8",
           "-f", "raw", img]
    obj, sites, trailer = family_run(cmd, "qemu")
    switches, creates = trailer["events_by_kind"]["switch"], trailer["events_by_kind"]["create"]
    spec = floor_spec(obj, sites)
    sw_only = [s for s in sites if s[0] == "qemu_coroutine_switch"]
    spec_sw = floor_spec(obj, sw_only)
    # The process's CPU time per switch (cpu_preload.so), as the loop rows; the run's wall time,
    # as qemu-img reports it, is kept beside it.
    cmds = {"native": cmd, "corobpf": [COROBPF, "-q", "--no-sched", "--"] + cmd,
            "floor": [floor, spec, "--"] + cmd, "floor_switch_site": [floor, spec_sw, "--"] + cmd}
    cpu, wall = {k: [] for k in cmds}, {k: [] for k in cmds}
    for _ in range(RUNS):
        for k, c in cmds.items():
            p = sh(c, env=dict(os.environ, LD_PRELOAD=CPU_PRELOAD))
            m = [l.split() for l in p.stderr.splitlines() if l.startswith("BENCH_CPU qemu-img ")]
            if not m:
                raise RuntimeError("%s reported no CPU time: %s" % (c, p.stderr[-300:]))
            cpu[k].append((float(m[-1][2]) + float(m[-1][3])) * 1e9 / switches)
            wall[k].append(qemu_run_s(p.stdout) * 1e9 / switches)
    base, wbase = median(cpu["native"]), median(wall["native"])
    r = {"native_ns": base, "native_wall_ns": wbase, "switches_per_run": switches,
         "creates_per_run": creates, "sites": site_names(sites)}
    for k in ("corobpf", "floor", "floor_switch_site"):
        r[k + "_added_ns"] = median(cpu[k]) - base
        r[k + "_added_wall_ns"] = median(wall[k]) - wbase
    r["corobpf_over_floor"] = r["corobpf_added_ns"] / r["floor_added_ns"]
    r["corobpf_over_floor_wall"] = r["corobpf_added_wall_ns"] / r["floor_added_wall_ns"]
    r["runs"] = {"cpu_ns": cpu, "wall_ns": wall}
    return r


PY311 = "/usr/bin/python3.11"
ASYNCIO311 = "/usr/lib/python3.11/lib-dynload/_asyncio.cpython-311-x86_64-linux-gnu.so"


def interp_run(cmd, family, env=None):
    """One traced run of an interpreter's family (docs/python.md, docs/lua.md): its object and
    the file offsets of the functions corobpf's switch_path record names ("at 0xVADDR")."""
    out = os.path.join(WORK, "interp.jsonl")
    sh([COROBPF, "-q", "--force", "--no-sched", "-o", out, "--"] + cmd, env=env)
    with open(out) as f:
        recs = [json.loads(line) for line in f]
    rec = next((r for r in recs if r["type"] == "switch_path" and r["family"] == family), None)
    if rec is None:
        raise RuntimeError("corobpf attached no %s functions for %s" % (family, cmd))
    vaddrs = [int(v, 16) for v in re.findall(r"at 0x([0-9a-f]+)", rec["sites"])]
    return rec["object"], [vaddr_offset(rec["object"], v) for v in vaddrs], rec["sites"]


def session_switch(floor, cmd, family, n, env):
    """A loop of n runs of a coroutine, each two switches (in and out), timing itself: native,
    under corobpf, and under an empty uprobe session program on the functions corobpf probes."""
    obj, offs, sites = interp_run(cmd + ["10"], family, env)
    spec = "session:%s:%s" % (obj, ",".join("%x" % o for o in offs))
    rows = {"native": [], "corobpf": [], "floor": []}
    for _ in range(RUNS):
        rows["native"].append(per_iter(sh(cmd + [str(n)], env=env).stdout) / 2)
        rows["corobpf"].append(per_iter(sh([COROBPF, "-q", "--no-sched", "--"] + cmd + [str(n)],
                                           env=env).stdout) / 2)
        rows["floor"].append(per_iter(sh([floor, spec, "--"] + cmd + [str(n)], env=env).stdout) / 2)
    base = median(rows["native"])
    r = {"native_ns": base, "switches_per_run": 2 * n, "sites": sites,
         "corobpf_added_ns": median(rows["corobpf"]) - base,
         "floor_added_ns": median(rows["floor"]) - base}
    r["corobpf_over_floor"] = r["corobpf_added_ns"] / r["floor_added_ns"]
    r["runs"] = rows
    return r


def asyncio_switch(floor):
    """One task stepping n times (asyncio.sleep(0)): a step is a switch in and a switch out,
    seen at the entry and the return of TaskStepMethWrapper's tp_call. corobpf reads the task's
    state and what it awaits at the return; the floor is an empty session program on the same
    three functions (the step functions and Task.__init__). The module is a private copy,
    first on PYTHONPATH."""
    why = runtime_missing(PY311, ASYNCIO311)
    if why:
        return {"skipped": why}
    env = dict(os.environ, PYTHONPATH=os.path.dirname(private_copy(ASYNCIO311)))
    return session_switch(floor, [PY311, os.path.join(ROOT, "tools/bench/asyncio_loop.py")],
                          "asyncio", 2000 if QUICK else 100000, env)


LUA54 = "/usr/bin/lua5.4"


def lua_switch(floor):
    """One coroutine resumed n times from the main thread (coroutine.resume, a yield back):
    a resume is a switch in and a switch out, seen at the entry and the return of lua_resume.
    lua5.4 carries its interpreter (the probes are on the binary): a private copy runs."""
    why = runtime_missing(LUA54)
    if why:
        return {"skipped": why}
    return session_switch(floor, [private_copy(LUA54), os.path.join(ROOT, "tools/bench/lua_loop.lua")],
                          "lua", 2000 if QUICK else 100000, {})


def interp_costs(res):
    floor = os.path.join(BUILD, "bench/floor")
    res["interp"] = {"asyncio": asyncio_switch(floor), "lua": lua_switch(floor)}


CXX20_PROBES = "switch,create,name,exit,ready,span_begin,span_end"


def cxx20_costs(res):
    """C++20 coroutines through the promise adapter (usdt/corobpf_coro.hpp): the executor
    program of tests/integration/progs/cxx20, its CPU time per resume (every thread's: the
    workers' idle waits do not count) untraced, with the probes compiled out, traced by corobpf
    and by an empty BPF program on the same probes (all seven: the executor fires ready where
    it queues, and spans)."""
    prog = os.path.join(BUILD, "bench/cxx20_tasks_adapter")
    off = os.path.join(BUILD, "bench/cxx20_tasks_adapter_off")
    floor = os.path.join(BUILD, "bench/floor")
    roots = 300 if QUICK else 20000
    cmd = [prog, "--bench", str(roots)]
    rows = {"native": [], "compiled_out": [], "corobpf": [], "floor": []}
    for _ in range(RUNS):
        # Interleaved, so drift hits all of them alike.
        rows["native"].append(per_iter(sh(cmd).stdout))
        rows["compiled_out"].append(per_iter(sh([off, "--bench", str(roots)]).stdout))
        rows["corobpf"].append(per_iter(sh([COROBPF, "-q", "--no-sched", "--"] + cmd).stdout))
        rows["floor"].append(per_iter(sh([floor, CXX20_PROBES, "--"] + cmd).stdout))
    resumes = int(re.search(r"resumes (\d+)", sh(cmd).stdout).group(1))
    base = median(rows["native"])
    r = {"roots": roots, "resumes_per_run": resumes, "native_ns_per_resume": base,
         "compiled_out_ns_per_resume": median(rows["compiled_out"]),
         "untraced_adapter_ns_per_resume": base - median(rows["compiled_out"]),
         "corobpf_ns_per_resume": median(rows["corobpf"]),
         "floor_ns_per_resume": median(rows["floor"]),
         "runs": rows}
    r["corobpf_added_ns"] = r["corobpf_ns_per_resume"] - base
    r["floor_added_ns"] = r["floor_ns_per_resume"] - base
    r["corobpf_over_floor"] = r["corobpf_added_ns"] / r["floor_added_ns"]
    r["traced_over_untraced"] = r["corobpf_ns_per_resume"] / base
    res["cxx20"] = r


def replay_dir():
    """Where replays write: a tmpfs with room if there is one. Gigabytes written to a disk
    leave writeback and reclaim behind that land in the next runs' time, whatever they are."""
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if st.f_bavail * st.f_frsize >= 6 << 30:
            return tempfile.mkdtemp(prefix="corobpf-bench-", dir=shm)
    except OSError:
        pass
    return WORK


def replay(res):
    work = replay_dir()
    try:
        replay_in(res, work)
    finally:
        if work != WORK:
            shutil.rmtree(work, ignore_errors=True)


def replay_in(res, work):
    sizes = [20000, 100000] if QUICK else [1000000, 10000000]
    gen = os.path.join(BUILD, "bench/gen_raw")
    res["replay"], res["size"] = {}, {}
    res["replay_dir_tmpfs"] = work != WORK
    for n in sizes:
        raw = os.path.join(work, "g%d.raw" % n)
        sh([gen, str(n), raw])
        row = {"events": n}
        for fmt in ("model", "jsonl", "pftrace", "db", "jsonl.gz"):
            out = os.path.join(work, "g%d.%s" % (n, fmt))
            cmd = [COROBPF, "report", "-q", raw, "--force"] + ([] if fmt == "model" else ["-o", out])
            ts, rss, cpus = [], [], []
            for _ in range(1 if fmt in ("db", "jsonl.gz") and not QUICK else RUNS):
                # A new file each time: replacing the last run's gigabyte would time its unlinking.
                if os.path.exists(out):
                    os.unlink(out)
                t, r, c = timed_cpu(cmd)
                ts.append(t)
                rss.append(r)
                cpus.append(c)
            row[fmt + "_events_per_s"] = n / median(ts)
            # One thread does it all: events per second of its CPU time is the one-core rate.
            row[fmt + "_events_per_cpu_s"] = n / median(cpus)
            row[fmt + "_peak_rss_kib"] = max(rss)
            if fmt != "model":
                res["size"].setdefault(fmt + "_bytes_per_event", os.path.getsize(out) / n)
                os.unlink(out)
        res["size"]["raw_bytes_per_event"] = os.path.getsize(raw) / n
        os.unlink(raw)
        res["replay"][str(n)] = row


PG_ROW_TABLES = ("events", "slices", "spans", "offcpu", "coroutines", "stacks", "frames")


def pg_db_uri(uri, db):
    u = uri.split("?", 1)
    return re.sub(r"/[^/]*$", "/" + db, u[0]) + ("?" + u[1] if len(u) > 1 else "")


def pg_fresh_db(uri, db):
    sh(["psql", "-X", "-q", uri, "-c", "DROP DATABASE IF EXISTS %s" % db])
    sh(["psql", "-X", "-q", uri, "-c", "CREATE DATABASE %s" % db])
    return pg_db_uri(uri, db)


def pg_dump_rows(dburi):
    """The schema and the per-event tables' rows of a stored capture, as files in COPY's binary
    format (what corobpf sends)."""
    d = tempfile.mkdtemp(prefix="corobpf-bench-pgrows-", dir=WORK)
    os.chmod(d, 0o755)
    schema = sh(["pg_dump", "-s", dburi]).stdout
    for t in PG_ROW_TABLES:
        sh(["psql", "-X", "-q", dburi, "-c", "\\copy (SELECT * FROM %s) TO '%s' (FORMAT binary)"
            % (t, os.path.join(d, t))])
    return d, schema


def pg_load_rows(uri, dump, db):
    """Seconds the server takes to take those rows into a fresh database of the same schema,
    one psql \\copy per table side by side (as corobpf's writers), binary as corobpf sends
    them: what the server can ingest at most here, whatever the client."""
    d, schema = dump
    dburi = pg_fresh_db(uri, db)
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", dburi], input=schema,
                   text=True, check=True, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    ps = [subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", dburi, "-c",
                            "\\copy %s FROM '%s' (FORMAT binary)" % (t, os.path.join(d, t))])
          for t in PG_ROW_TABLES]
    if any(p.wait() for p in ps):
        raise SystemExit("pgstore: psql \\copy into %s failed" % db)
    t = time.monotonic() - t0
    sh(["psql", "-X", "-q", uri, "-c", "DROP DATABASE %s" % db])
    return t


def pg_live(uri, db, secs):
    """A ping-pong at full speed traced live into the store for secs: (events stored, seconds
    from the program's start to corobpf's exit with every row stored, events lost, seconds from
    the end of tracing to that exit: the rows the store had still to send)."""
    dburi = pg_fresh_db(uri, db)
    target = subprocess.Popen([os.path.join(BUILD, "demo"), "--pingpong", str(10**9), "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pid = target.stdout.readline().split()[1]
    ts = time.monotonic()
    tr = subprocess.Popen([COROBPF, "-q", "--no-sched", "-d", str(secs), "-o", dburi, "-p", pid],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)   # attached (the pipe of -p's attach is quick)
    t0 = time.monotonic()
    target.send_signal(signal.SIGUSR1)
    tr.wait()
    t1 = time.monotonic()
    t = t1 - t0
    target.kill()
    target.wait()
    if tr.returncode:
        raise RuntimeError("pgstore: live run failed: %s" % tr.stderr.read().decode())
    q = sh(["psql", "-X", "-At", dburi, "-c", "SELECT c.events, m.value FROM captures c "
            "JOIN capture_meta m ON m.capture_id = c.capture_id AND m.key = 'lost_events' "
            "WHERE c.complete"]).stdout.split("|")
    sh(["psql", "-X", "-q", uri, "-c", "DROP DATABASE %s" % db])
    return int(q[0]), t, int(q[1]), max(0.0, t1 - ts - secs)


def pgstore(res):
    """corobpf report CAPTURE -o postgresql://...: every row stored, into a fresh database each
    run, timed to the end (the writers' last COPY and the capture marked complete); a live run
    into the store; and the server's own ceiling on the same rows, in the same run. The server
    is PostgreSQL as installed (tools/pg_server.sh start-default: fsync on, commits waited
    for); corobpf itself only sets synchronous_commit off for its COPYs."""
    n = 100000 if QUICK else 1000000
    uri, server = os.environ.get("COROBPF_PG_URI"), None
    if not uri:
        import glob
        if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
            if os.environ.get("CI") == "true":
                raise SystemExit("pgstore: PostgreSQL is not installed")
            res["pgstore"] = {"skipped": "PostgreSQL is not installed"}
            return
        server = tempfile.mkdtemp(prefix="corobpf-bench-pg-")
        uri = sh([os.path.join(ROOT, "tools", "pg_server.sh"), "start-default",
                  server]).stdout.strip()
    try:
        raw = os.path.join(WORK, "pg%d.raw" % n)
        sh([os.path.join(BUILD, "bench/gen_raw"), str(n), raw])
        ts, cs, live = [], [], []
        for i in range(RUNS):
            # Upload, ceiling and live run in turn: a machine busier for a while weighs on all.
            dburi = pg_fresh_db(uri, "corobpf_bench_%d" % i)
            t, _ = timed([COROBPF, "report", "-q", raw, "-o", dburi])
            ts.append(t)
            if i == 0:
                dump = pg_dump_rows(dburi)
            sh(["psql", "-X", "-q", uri, "-c", "DROP DATABASE corobpf_bench_%d" % i])
            cs.append(pg_load_rows(uri, dump, "corobpf_bench_ceiling_%d" % i))
            live.append(pg_live(uri, "corobpf_bench_live_%d" % i, 1 if QUICK else 5))
        res["pgstore"] = {"events": n, "runs": RUNS, "seconds": median(ts),
                          "events_per_s": n / median(ts),
                          "ceiling_seconds": median(cs), "ceiling_events_per_s": n / median(cs),
                          "live_events_per_s": median(e / t for e, t, _, _ in live),
                          "live_events": median(e for e, _, _, _ in live),
                          "live_lost": max(l for _, _, l, _ in live),
                          "live_drain_seconds": median(d for _, _, _, d in live)}
        shutil.rmtree(dump[0], ignore_errors=True)
        os.unlink(raw)
    finally:
        if server:
            sh([os.path.join(ROOT, "tools", "pg_server.sh"), "stop", server])
            shutil.rmtree(server, ignore_errors=True)


def loss(res):
    """Attach to a ping-pong at full speed for a few seconds with the default ring."""
    secs = 1 if QUICK else 10
    target = subprocess.Popen([os.path.join(BUILD, "demo"), "--pingpong", str(10**9), "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pid = target.stdout.readline().split()[1]
    out = os.path.join(WORK, "loss.jsonl")
    tr = subprocess.Popen([COROBPF, "-q", "--no-sched", "-d", str(secs), "-o", out, "-p", pid],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)   # attached (the pipe of -p's attach is quick)
    target.send_signal(signal.SIGUSR1)
    tr.wait()
    target.kill()
    target.wait()
    with open(out, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 8192))
        trailer = json.loads(f.read().splitlines()[-1])
    res["loss"] = {"seconds": secs, "events": trailer["events"],
                   "events_per_s": trailer["events"] / secs, "lost": trailer["lost"]["events"],
                   "ring_mib": 16}


def scale(res):
    """Many coroutines, many alive at once: peak RSS of the whole live run, outputs included.
    The program is paced (faults steady) at a rate the writers keep up with: unpaced, it makes
    events faster than three outputs are written, and a run that loses events measures nothing."""
    rate, secs, lives = (20000, 1, (200, 2000)) if QUICK else (10000, 60, (1000, 100000))
    n = rate * secs
    row = {"coroutines": n, "per_second": rate}
    for live in lives:
        outs = [os.path.join(WORK, "scale-%d.%s" % (live, f)) for f in ("jsonl", "pftrace", "db")]
        # The program ends its LIVE suspended coroutines at once, unpaced (100,000: 400,000
        # events in a burst): a 64 MiB ring holds them for the writers.
        cmd = [COROBPF, "-q", "--force", "--ring-size", "64"] + [a for o in outs for a in ("-o", o)] + \
            ["--", os.path.join(BUILD, "tests/faults"), "steady", str(rate), str(secs), str(live)]
        t, rss = timed(cmd)
        with open(outs[0], "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            trailer = json.loads(f.read().splitlines()[-1])
        if trailer["coroutines"] != n or trailer["peak_live"] != live + 1 or trailer["lost"]["events"]:
            raise RuntimeError("scale run with %d alive: %d coroutines, peak %d, %d lost" % (
                live, trailer["coroutines"], trailer["peak_live"], trailer["lost"]["events"]))
        row["live_%d" % live] = {"seconds": t, "events": trailer["events"], "peak_rss_kib": rss}
        for o in outs:
            os.unlink(o)
    a, b = row["live_%d" % lives[0]], row["live_%d" % lives[1]]
    row["bytes_per_live_coroutine"] = (b["peak_rss_kib"] - a["peak_rss_kib"]) * 1024 / (lives[1] - lives[0])
    row["lives"] = list(lives)
    res["scale"] = row


def exec_loop(cmds):
    """Wall seconds of each exec + exit + wait of cmds, one after the other."""
    ts = []
    for cmd in cmds:
        t0 = time.perf_counter()
        pid = os.posix_spawn(cmd[0], cmd, os.environ)
        os.waitpid(pid, 0)
        ts.append(time.perf_counter() - t0)
    return ts


def exec_cost(res):
    """-a's exec gate: the time of an exec of /bin/true without corobpf, under -a without the
    gate, with it (a program examined already: one round trip to corobpf), and of programs
    never seen (a fresh copy each time, held until corobpf has examined it)."""
    n = 50 if QUICK else 300
    true = shutil.which("true") or "/bin/true"
    rows = {"none": [], "all_gate_off": [], "all_gate": [], "all_gate_new_programs": []}
    modes = (("none", None), ("all_gate_off", ["--exec-gate", "0"]), ("all_gate", []),
             ("all_gate_new_programs", []))
    for r in range(RUNS):
        copies = []
        d = tempfile.mkdtemp(prefix="exec-", dir=WORK)
        for i in range(n):
            c = os.path.join(d, "true%d" % i)
            shutil.copy2(true, c)
            copies.append([c])
        for name, extra in modes:
            tr = None
            if extra is not None:
                err = os.path.join(WORK, "exec-%s.err" % name)
                ef = open(err, "w")
                tr = subprocess.Popen([COROBPF, "-a", "-o", os.path.join(WORK, "exec.jsonl"), "--force"]
                                      + extra, stderr=ef, stdout=subprocess.DEVNULL)
                end = time.time() + 30
                while "tracing every" not in open(err).read():
                    if time.time() > end or tr.poll() is not None:
                        raise RuntimeError("corobpf -a did not start: " + open(err).read())
                    time.sleep(0.05)
            try:
                cmds = copies if name == "all_gate_new_programs" else [[true]] * n
                exec_loop([[true]] * 5)  # warm
                rows[name].append(median(exec_loop(cmds)) * 1e6)
            finally:
                if tr:
                    tr.send_signal(signal.SIGINT)
                    tr.wait(timeout=60)
                    ef.close()
        shutil.rmtree(d, ignore_errors=True)
    base = median(rows["none"])
    row = {"execs_per_run": n, "runs": RUNS}
    for k, v in rows.items():
        row[k + "_us"] = median(v)
        row[k + "_us_min"], row[k + "_us_max"] = min(v), max(v)
        row[k + "_ratio"] = median(v) / base
    res["exec_cost"] = row


GO_PINGPONG = os.path.join(BUILD, "bench", "go_pingpong")


def go_costs(res):
    """Two goroutines passing a token over unbuffered channels (tools/bench/go_pingpong.go,
    Debian's golang-go): each round trip parks and readies each goroutine once. The
    program times its loop; it runs untraced, under corobpf (its defaults, a raw capture
    written; and again with --no-sched, as the switch rows run), and under Go's own
    execution tracer (GO_TRACE: runtime/trace.Start, the trace written to a file),
    interleaved run by run. Slowdowns are each median over the untraced median. Without go
    the row is skipped, saying so (in CI it fails)."""
    why = runtime_missing(GO_PINGPONG)
    if why:
        res["go"] = {"skipped": why + " (built by make bench-tools where go is installed)"}
        return
    n = 5000 if QUICK else 200000
    raw, gotrace = os.path.join(WORK, "go.raw"), os.path.join(WORK, "go.trace")
    cmd = [GO_PINGPONG, str(n)]
    rows = {"native": [], "corobpf": [], "corobpf_no_sched": [], "go_trace": []}
    r = {"round_trips": n}
    for _ in range(RUNS):
        rows["native"].append(per_iter(sh(cmd).stdout))
        for key, flags in (("corobpf", []), ("corobpf_no_sched", ["--no-sched"])):
            p = subprocess.run([COROBPF, "-q", "--force", "--raw", raw] + flags + ["--"] + cmd,
                               capture_output=True, text=True)
            if p.returncode == 0:
                rows[key].append(per_iter(p.stdout))
            else:
                r["corobpf_failed"] = "exit %d: %s" % (p.returncode,
                                                       p.stderr.strip().splitlines()[0])
        rows["go_trace"].append(per_iter(sh(cmd, env=dict(os.environ, GO_TRACE=gotrace)).stdout))
        r["go_trace_bytes"] = os.path.getsize(gotrace)
        if os.path.exists(raw):
            r["corobpf_raw_bytes"] = os.path.getsize(raw)
    base = median(rows["native"])
    r["native_ns_per_round_trip"] = base
    r["go_trace_ns_per_round_trip"] = median(rows["go_trace"])
    r["go_trace_slowdown"] = r["go_trace_ns_per_round_trip"] / base
    if rows["corobpf"] and "corobpf_failed" not in r:
        r["corobpf_ns_per_round_trip"] = median(rows["corobpf"])
        r["corobpf_slowdown"] = r["corobpf_ns_per_round_trip"] / base
        r["corobpf_over_go_trace"] = r["corobpf_slowdown"] / r["go_trace_slowdown"]
        r["corobpf_no_sched_slowdown"] = median(rows["corobpf_no_sched"]) / base
        # What a round trip costs in events: a run of its own, to JSONL, for the trailer.
        out = os.path.join(WORK, "go.jsonl")
        small = 5000
        sh([COROBPF, "-q", "--force", "-o", out, "--", GO_PINGPONG, str(small)])
        t = trailer_of(out)
        r["corobpf_events_per_round_trip"] = t["events"] / small
        r["corobpf_lost_events"] = t["lost"]["events"]
        os.unlink(out)
    res["go"] = r


def table(res):
    lines = ["corobpf bench (%s, kernel %s, %s CPUs%s)" % (res["machine"]["cpu"], res["machine"]["kernel"],
                                                       res["machine"]["cpus"], ", quick" if QUICK else ""),
             ""]
    p = res.get("probe")
    if p:
        lines += ["probe site, not traced          %8.2f ns   (compiled out: %.2f ns per loop iteration)" % (
                      p["untraced_site_ns"], p["compiled_out_ns_per_iter"]),
                  "per hit: empty BPF (the floor)  %8.0f ns" % p["floor_ns_per_hit"],
                  "per hit: corobpf, full capture  %8.0f ns   %.2fx the floor" % (p["corobpf_ns_per_hit"], p["corobpf_over_floor"]),
                  "per hit: corobpf + sched view   %8.0f ns" % p["corobpf_sched_ns_per_hit"],
                  "per hit: argument read only    %8.0f ns   (libbpf's USDT argument path: %.0f ns beyond the floor)" % (
                      p["args_ns_per_hit"], p["args_added_ns"]),
                  "per hit: counted in the kernel  %8.0f ns   (a counters-only mode at the least: %.0f ns "
                  "beyond the floor, against corobpf's %.0f)" % (
                      p["counting_ns_per_hit"], p["counting_added_ns"], p["corobpf_added_ns"]),
                  "COROBPF_NOP5 sites (kernel %s optimized uprobes): not traced %.2f ns; per hit: empty BPF at "
                  "the nop %.0f ns, corobpf at the step before it %.0f ns (%.2fx that floor; the default "
                  "site costs %.2fx as much)" % (
                      "has" if p["kernel_optimizes_uprobes"] else "lacks", p["untraced_site_nop5_ns"],
                      p["floor_nop5_ns_per_hit"], p["corobpf_nop5_ns_per_hit"],
                      p["corobpf_nop5_over_floor_nop5"], p["corobpf_nop1_over_nop5"])]
        if "announce_wanted_untraced_ns" in p:
            lines.append("CORO_ANNOUNCE_WANTED(), not traced %.2f ns per call" %
                         p["announce_wanted_untraced_ns"])
    if p and "bpftrace_ns_per_event" in p:
        lines.append("per event: bpftrace printf      %8.0f ns   %.1fx corobpf" % (p["bpftrace_ns_per_event"], p["bpftrace_over_corobpf"]))
        lines.append("added beyond the floor: corobpf %.0f ns, bpftrace %.0f ns (%.1fx)" % (
            p["corobpf_added_ns"], p["bpftrace_added_ns"], p["bpftrace_added_over_corobpf_added"]))
    b = res.get("batch")
    if b:
        lines += ["probe paths, one program, %d events each (ns per event beyond the compiled-out "
                  "loop; events lost):" % b["events"],
                  "  not traced                    %8.1f ns" % b["untraced_ns_per_event"],
                  "  empty BPF on every hit (floor) %7.0f ns" % b["floor_ns_per_event"],
                  "  corobpf, per-event trap        %7.0f ns   lost %d" % (b["trap_ns_per_event"], b["trap_lost"]),
                  "  corobpf, per-event, nop5 site  %7.0f ns   lost %d" % (b["trap_nop5_ns_per_event"],
                                                                          b["trap_nop5_lost"]),
                  "  corobpf, batched               %7.1f ns   lost %d   (%.1f ns added: %.3fx the floor; "
                  "the trap path costs %.0fx as much)" % (
                      b["batched_ns_per_event"], b["batched_lost"], b["batched_added_ns"],
                      b["batched_added_over_floor"], b["trap_over_batched"]),
                  "  corobpf, batched + sched view  %7.1f ns   lost %d" % (b["batched_sched_ns_per_event"],
                                                                          b["batched_sched_lost"])]
        lines.append("  corobpf, batched, 512 MiB ring %7.1f ns   lost %d" % (b["batched_ring512_ns_per_event"],
                                                                          b["batched_ring512_lost"]))
        if "bpftrace_ns_per_event" in b:
            lines.append("  bpftrace printf               %7.0f ns" % b["bpftrace_ns_per_event"])
    fl = res.get("flood")
    if fl:
        lines.append("flood, ready flat out on the batched path, %d events per thread (medians of %d; "
                     "in-target limit: 1 thread %.1f ns, %.1f ns of CPU, TSC stamp %.1f ns; each run "
                     "over the limit measured just before it):" % (
                         fl["events_per_thread"], fl["runs"], fl["limit_1_ns_per_event"],
                         fl["limit_1_cpu_ns_per_event"], fl["limit_tsc_1_ns_per_event"]))
        for r in fl["rows"]:
            pace = r.get("reader_records_per_s")
            lines.append("  %-4s %d thr, ring %3d MiB, %-5s: made %9d, traced %9d, lost %9d (%4.1f%%); "
                         "reader %s M rec/s reading, %5.2f M rec/CPU-s in all; %.1f ns/event = "
                         "%.2fx the limit, CPU %.1f ns/event = %.2fx (%.1f ns added)" % (
                             r["build"], r["threads"], r["ring_mib"], r["output"], r["produced"],
                             r["drained"], r["lost"], 100 * r["lost_share"],
                             "%5.1f" % (pace / 1e6) if pace else "  -  ",
                             r["reader_records_per_cpu_s"] / 1e6, r["ns_per_event"], r["over_limit"],
                             r["cpu_ns_per_event"], r["cpu_over_limit"],
                             r.get("cpu_ns_added", float("nan"))))
        for name in ("new", "base"):
            if "%s_cpu_over_limit_median" % name in fl:
                lines.append("  %-4s the program's CPU per event over the limit: median over the rows "
                             "%.2fx, worst %.2fx; added %.1f ns per event (median)" % (
                                 name, fl["%s_cpu_over_limit_median" % name],
                                 fl["%s_cpu_over_limit_max" % name],
                                 fl["%s_cpu_ns_added_median" % name]))
        if "new_over_base_records_per_cpu_s" in fl:
            lines.append("  reader records per CPU second, this build over FLOOD_BASE: %.2fx (median "
                         "over the rows)" % fl["new_over_base_records_per_cpu_s"])
    st = res.get("stacks")
    if st:
        lines.append("--stacks, per create (a stack each): none %.0f ns; fp %.0f ns (+%.0f, %.2fx); "
                     "dwarf %.0f ns (+%.0f, %.2fx); fp on code without frame pointers %.0f ns "
                     "(+%.0f); lost at most: none %d, fp %d, dwarf %d of %d" % (
                         st["none_ns_per_hit"], st["fp_ns_per_hit"], st["fp_added_ns"], st["fp_over_none"],
                         st["dwarf_ns_per_hit"], st["dwarf_added_ns"], st["dwarf_over_none"],
                         st["fp_without_frame_pointers_ns_per_hit"],
                         st["fp_without_frame_pointers_added_ns"], st["none_lost_max"],
                         st["fp_lost_max"], st["dwarf_lost_max"], st["events"]))
    s = res.get("sched", {})
    if "added_ns_per_context_switch" in s:
        lines.append("context switch, sched view on   %+8.0f ns   (pipe op %.2f -> %.2f us, %.3fx)" % (
            s["added_ns_per_context_switch"], s["pipe_us_per_op"], s["pipe_us_per_op_traced"], s["ratio"]))
    sw = res.get("switch")
    if sw:
        u, b = sw["ucontext"], sw["fcontext"]
        lines.append("swapcontext (%.0f ns native), added (the thread's CPU time): corobpf at %s "
                     "%.0f ns = %.2fx an empty program there (%.0f ns); at the entry (stepped) "
                     "%.0f ns = %.1fx; on the wall clock %.2fx" % (
                         u["native_ns"], u["site"], u["corobpf_added_ns"], u["corobpf_over_floor"],
                         u["floor_site_added_ns"], u["floor_entry_added_ns"], u["entry_over_site"],
                         u["corobpf_over_floor_wall"]))
        lines.append("Boost.Fiber yield (%.0f ns native), added (the thread's CPU time): corobpf at "
                     "%s %.0f ns = %.2fx an empty program there (%.0f ns); at the entries "
                     "(stepped) %.0f ns = %.1fx; on the wall clock %.2fx" % (
                         b["native_ns"], b["site"], b["corobpf_added_ns"], b["corobpf_over_floor"],
                         b["floor_site_added_ns"], b["floor_entry_added_ns"], b["entry_over_site"],
                         b["corobpf_over_floor_wall"]))
        for fam, what in (("ruby", "Ruby fiber switch"), ("greenlet", "greenlet switch"),
                          ("qemu", "QEMU coroutine switch (qemu-img bench)")):
            r = sw.get(fam)
            if r is None:
                continue
            if "skipped" in r:
                lines.append("%s: skipped, %s" % (what, r["skipped"]))
                continue
            lines.append("%s (%.0f ns native), added per switch: corobpf %.0f ns = %.2fx an empty "
                         "program on the same sites (%.0f ns): %s" % (
                             what, r["native_ns"], r["corobpf_added_ns"], r["corobpf_over_floor"],
                             r["floor_added_ns"], r["sites"]))
            if "creates_per_run" in r:
                lines.append("  %d switches and %d creates per run; the floor on the switch site "
                             "alone adds %.0f ns per switch" % (
                                 r["switches_per_run"], r["creates_per_run"],
                                 r["floor_switch_site_added_ns"]))
        ratios = [(fam, sw[fam]["corobpf_over_floor"]) for fam in
                  ("ucontext", "fcontext", "ruby", "greenlet", "qemu")
                  if fam in sw and "corobpf_over_floor" in sw[fam]]
        lines.append("switch path, corobpf's added time over an empty program's on the same sites "
                     "and link (medians of %d runs; target 1.2x): %s" % (
                         RUNS, ", ".join("%s %.2fx" % fr for fr in ratios)))
    it = res.get("interp")
    if it:
        for fam, what in (("asyncio", "asyncio task step (a switch in and out)"),
                          ("lua", "Lua 5.4 coroutine resume (a switch in and out)"),
                          ("luajit", "LuaJIT coroutine resume from C (a switch in and out)")):
            r = it.get(fam)
            if r is None:
                continue
            if "skipped" in r:
                lines.append("%s: skipped, %s" % (what, r["skipped"]))
                continue
            lines.append("%s (%.0f ns native per switch), added per switch: corobpf %.0f ns = "
                         "%.2fx an empty session program on the same functions (%.0f ns): %s" % (
                             what, r["native_ns"], r["corobpf_added_ns"], r["corobpf_over_floor"],
                             r["floor_added_ns"], r["sites"]))
    g = res.get("go")
    if g and "skipped" in g:
        lines.append("Go channel ping-pong: skipped, %s" % g["skipped"])
    elif g:
        lines.append("Go channel ping-pong (%.0f ns per round trip native: two parks, two "
                     "readies): Go's execution tracer %.0f ns (%.2fx), corobpf %s" % (
                         g["native_ns_per_round_trip"], g["go_trace_ns_per_round_trip"],
                         g["go_trace_slowdown"],
                         "%.0f ns (%.2fx; %.2fx Go's tracer's slowdown; %.2fx with --no-sched; "
                         "%.1f events per round trip)" % (
                             g["corobpf_ns_per_round_trip"], g["corobpf_slowdown"],
                             g["corobpf_over_go_trace"], g["corobpf_no_sched_slowdown"],
                             g["corobpf_events_per_round_trip"])
                         if "corobpf_slowdown" in g
                         else "failed (%s)" % g.get("corobpf_failed")))
    c = res.get("cxx20")
    if c:
        lines.append("C++20 adapter, CPU per resume: untraced %.0f ns (probes compiled out %.0f ns: "
                     "%+.0f ns); added: corobpf %.0f ns = %.2fx an empty program on the same probes "
                     "(%.0f ns); traced %.2fx untraced" % (
                         c["native_ns_per_resume"], c["compiled_out_ns_per_resume"],
                         c["untraced_adapter_ns_per_resume"], c["corobpf_added_ns"],
                         c["corobpf_over_floor"], c["floor_added_ns"], c["traced_over_untraced"]))
    if "replay" in res:
        lines.append("")
        lines.append("replay of a synthetic capture on one thread: events per wall second "
                     "[per CPU second] (peak RSS)%s" % (", written to tmpfs" if res.get("replay_dir_tmpfs") else ""))
        for n, row in res["replay"].items():
            lines.append("  %10s events: " % n + ", ".join(
                "%s %.2f [%.2f] M/s (%.0f MiB)" % (
                    f, row[f + "_events_per_s"] / 1e6, row.get(f + "_events_per_cpu_s", 0) / 1e6,
                    row[f + "_peak_rss_kib"] / 1024)
                for f in ("model", "pftrace", "jsonl", "jsonl.gz", "db")))
        lines.append("bytes per event: " + ", ".join("%s %.0f" % (k.replace("_bytes_per_event", ""), v)
                                                     for k, v in sorted(res["size"].items())))
    pg = res.get("pgstore")
    if pg and "skipped" in pg:
        lines.append("PostgreSQL store: skipped, %s" % pg["skipped"])
    elif pg:
        lines.append("PostgreSQL store, into a local server (default settings), medians of %d "
                     "(target 1 M/s):" % pg["runs"])
        lines.append("  upload (report -o) of a synthetic capture: %d events in %.2f s, %.2f M "
                     "events/s" % (pg["events"], pg["seconds"], pg["events_per_s"] / 1e6))
        if "live_events_per_s" in pg:
            lines.append("  live (a ping-pong traced into the store): %.2f M events/s stored "
                         "(%d events, %d lost; stored %.2f s after tracing stopped)" % (
                             pg["live_events_per_s"] / 1e6, pg["live_events"], pg["live_lost"],
                             pg.get("live_drain_seconds", 0)))
        lines.append("  the server's own ceiling, the same rows loaded by psql \\copy (binary, a "
                     "table per psql side by side): %.2f s, %.2f M events/s" % (
                         pg["ceiling_seconds"], pg["ceiling_events_per_s"] / 1e6))
    l = res.get("loss")
    if l:
        lines.append("loss at full rate: %d events in %d s (%.0f/s), %d lost, %d MiB ring" % (
            l["events"], l["seconds"], l["events_per_s"], l["lost"], l["ring_mib"]))
    ex = res.get("exec_cost")
    if ex:
        lines.append("exec of /bin/true (median of %d, %d runs): %.0f us alone; under -a: gate off %.0f us "
                     "(%.2fx), gate on %.0f us (%.2fx); a program never seen, held until examined: "
                     "%.0f us (%.2fx)" % (
                         ex["execs_per_run"], ex["runs"], ex["none_us"], ex["all_gate_off_us"],
                         ex["all_gate_off_ratio"], ex["all_gate_us"], ex["all_gate_ratio"],
                         ex["all_gate_new_programs_us"], ex["all_gate_new_programs_ratio"]))
    sc = res.get("scale")
    if sc:
        lo, hi = sc["lives"]
        a, b = sc["live_%d" % lo], sc["live_%d" % hi]
        lines.append("%d coroutines (%d a second) traced live to JSONL+Perfetto+SQLite: peak RSS %.0f MiB "
                     "with %d alive at once, %.0f MiB with %d; %.0f bytes per live coroutine" % (
                         sc["coroutines"], sc.get("per_second", 0), b["peak_rss_kib"] / 1024, hi,
                         a["peak_rss_kib"] / 1024, lo,
                         sc["bytes_per_live_coroutine"]))
    return "\n".join(lines)


def main():
    if os.geteuid() != 0:
        print("make bench needs root (it loads BPF programs)")
        return 1
    res = {"machine": machine()}
    only = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
    for step in (probe_costs, batch_costs, flood_costs, stacks_cost, sched_cost, switch_costs, interp_costs, go_costs,
                 cxx20_costs, replay,
                 pgstore, loss, scale, exec_cost):
        # A step by its function's name or its section's (BENCH_ONLY=switch: switch_costs).
        if not only or step.__name__ in only or step.__name__.split("_")[0] in only:
            # A section that fails is said and recorded; the others still run and are written.
            try:
                step(res)
            except Exception as e:  # noqa: BLE001 (any failure of a section is its own)
                print("bench: %s failed: %s" % (step.__name__, e), file=sys.stderr)
                res.setdefault("failed", {})[step.__name__] = str(e)[:2000]
    text = table(res)
    print(text)
    out_dir = os.path.join(ROOT, "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "bench-%s%s.json" % (time.strftime("%Y%m%d-%H%M%S"), "-quick" if QUICK else ""))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("\nwritten: %s" % path)
    shutil.rmtree(WORK, ignore_errors=True)
    for name, why in res.get("failed", {}).items():
        print("FAILED: %s: %s" % (name, why.splitlines()[0] if why else ""))
    return 1 if res.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
