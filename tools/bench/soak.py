#!/usr/bin/env python3
"""make soak: corobpf traces a steady load for a long time; its memory must stay flat.

    make soak                                  # one hour (SOAK_SECONDS=3600)
    SOAK_SECONDS=600 SOAK_RATE=2000 make soak  # shorter, faster

The load is tests/integration/progs/faults.c `steady`: RATE coroutines per
second (8 probes each), 1,000 of them suspended at any time, paced every
10 ms. corobpf writes JSONL (compressed), Perfetto and the raw capture, as a
user leaving it on would. Its RSS is sampled every 10 seconds. The result
is the RSS curve, the growth between the first and the last quarter of the
run, and a least-squares slope over the second half. It also checks that
every coroutine is in the trace and nothing was lost. The table is printed
and written to results/soak-<time>.json.

    SOAK_FLIGHT=2 make soak                    # the flight recorder (make soak-flight)

With SOAK_FLIGHT=SECS corobpf runs as a flight recorder (--flight SECS): the
-o outputs are only its dumps, one every SOAK_DUMP_EVERY seconds (default
60) on SIGUSR1, and the memory that must stay flat is its ring of the last
SECS, its second model and the forks that write the dumps. Every dump asked
for must be written whole; the raw capture still holds every coroutine.
"""
import glob
import gzip
import json
import os
import shutil
import signal
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COROBPF = os.path.join(ROOT, "corobpf")
FAULTS = os.path.join(ROOT, "build", "tests", "faults")
SECONDS = int(os.environ.get("SOAK_SECONDS", "3600"))
RATE = int(os.environ.get("SOAK_RATE", "1250"))
LIVE = 1000
EVERY = 10
FLIGHT = os.environ.get("SOAK_FLIGHT")
DUMP_EVERY = int(os.environ.get("SOAK_DUMP_EVERY", "60"))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        return ""


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def slope(points):
    """Least-squares KiB per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(r for _, r in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (r - my) for t, r in points) / den if den else 0.0


def main():
    if os.geteuid() != 0:
        print("make soak needs root (it loads BPF programs)")
        return 1
    work = tempfile.mkdtemp(prefix="corobpf-soak-")
    outs = [os.path.join(work, f) for f in ("soak.jsonl.gz", "soak.pftrace")]
    raw = os.path.join(work, "soak.raw")
    cmd = [COROBPF, "-q"] + (["--flight", FLIGHT] if FLIGHT else []) + [a for o in outs for a in ("-o", o)] + ["--raw", raw, "--",
                                                                    FAULTS, "steady", str(RATE), str(SECONDS), str(LIVE)]
    print("soak: %d coroutines/s (%d probe hits/s), %d s, outputs in %s" % (RATE, 8 * RATE, SECONDS, work))
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []
    asked = 0
    while p.poll() is None:
        time.sleep(EVERY)
        if FLIGHT and p.poll() is None and len(samples) % max(1, DUMP_EVERY // EVERY) == 0:
            p.send_signal(signal.SIGUSR1)
            asked += 1
        r = rss_kib(p.pid)
        if r is not None and p.poll() is None:
            samples.append((time.time() - t0, r))
            if len(samples) % 30 == 0:
                print("  %6.0f s  RSS %.1f MiB" % (samples[-1][0], r / 1024), flush=True)
    out, err = p.communicate()
    if p.returncode != 0 or "DONE steady" not in out:
        print("soak: corobpf exited %d\n%s%s" % (p.returncode, out, err))
        return 1
    chk = subprocess.run([COROBPF, "report", "-q", raw, "-o", raw + ".check.jsonl", "--force"],
                         capture_output=True, text=True)
    with open(raw + ".check.jsonl", "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 8192))
        trailer = json.loads(f.read().splitlines()[-1])
    want = int(out.split()[-1])
    q = max(1, len(samples) // 4)
    first = sum(r for _, r in samples[:q]) / q
    last = sum(r for _, r in samples[-q:]) / q
    half = samples[len(samples) // 2:]
    res = {
        "machine": {"kernel": platform.release(), "cpu": cpu_model(), "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S")},
        "seconds": SECONDS, "coroutines_per_s": RATE, "live": LIVE,
        "coroutines": trailer["coroutines"], "expected_coroutines": want,
        "events": trailer["events"], "lost": trailer["lost"]["events"],
        "report_exit": chk.returncode,
        "rss_kib": samples,
        "rss_first_quarter_mib": first / 1024, "rss_last_quarter_mib": last / 1024,
        "rss_max_mib": max(r for _, r in samples) / 1024 if samples else 0,
        "growth_pct": 100 * (last - first) / first if first else 0,
        "slope_kib_per_min_second_half": slope(half),
        "output_bytes": {os.path.basename(o): os.path.getsize(o) for o in outs + [raw]
                         if os.path.exists(o)},
    }
    ok = (res["coroutines"] == want and res["lost"] == 0 and chk.returncode == 0)
    if FLIGHT:
        # Every dump asked for, whole: its JSONL ends with the trailer.
        dumps = sorted(glob.glob(os.path.join(work, "soak.*.jsonl.gz")))
        whole = 0
        for d in dumps:
            with gzip.open(d, "rt") as f:
                whole += json.loads(f.read().splitlines()[-1])["type"] == "trailer"
        res.update({"flight_seconds": float(FLIGHT), "dumps_asked": asked,
                    "dumps_written": len(dumps), "dumps_whole": whole})
        print("flight: %d dumps asked for, %d written, %d whole" % (asked, len(dumps), whole))
        ok = ok and len(dumps) == asked and whole == asked
    print("soak: %d coroutines, %d events, %d lost, in %d s" % (res["coroutines"], res["events"],
                                                                 res["lost"], SECONDS))
    print("RSS: first quarter %.1f MiB, last quarter %.1f MiB (%+.1f%%), max %.1f MiB; "
          "slope over the second half %+.1f KiB/min" % (
              res["rss_first_quarter_mib"], res["rss_last_quarter_mib"], res["growth_pct"],
              res["rss_max_mib"], res["slope_kib_per_min_second_half"]))
    out_dir = os.path.join(ROOT, "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "soak-%s%s.json" % ("flight-" if FLIGHT else "",
                                                      time.strftime("%Y%m%d-%H%M%S")))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("written: %s" % path)
    shutil.rmtree(work, ignore_errors=True)
    if not ok:
        print("soak: FAILED: %d of %d coroutines, %d lost, report exit %d" % (
            res["coroutines"], want, res["lost"], chk.returncode))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
