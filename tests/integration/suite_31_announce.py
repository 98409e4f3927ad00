"""What exists when a tracer attaches (usdt/corobpf.h, WHAT EXISTS WHEN A TRACER ATTACHES;
user/capture/announce.h): a running scheduler built with corobpf.h lists its coroutines to a
tracer that attaches, and each enters the trace with its name, its parent and its state.

The program (progs/announce.c, on tools/sched/corosched.c) runs 200 coroutines before any
tracer comes: 60 parked on a channel, 60 asleep, 60 busy and 20 nested ones that busy-0
spawned, parked on a second channel. corosched writes each one's truth, with what its last
announce said of it. Attaches come one after another and side by side (the kernel counts
armed sites, not tracers: the later ones arm a spare site to be heard), and a program whose
scheduler never answers is counted and said."""
import threading

from harness import *  # noqa: F401,F403

ANNOUNCE = os.path.join(TESTS_BIN, "announce")
MUTE = os.path.join(TESTS_BIN, "announce_mute")
KINDS = ("parker", "sleeper", "busy", "nested")


def start(name):
    stop, truth = work(name + ".stop"), work(name + ".truth")
    p = subprocess.Popen([ANNOUNCE, stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, COROBPF_TRUTH=truth))
    line = p.stdout.readline().split()
    check(line and line[0] == "READY", "announce did not start: %r" % line)
    return p, stop, truth


def finish(p, stop, truth):
    open(stop, "w").close()
    out, err = p.communicate(timeout=120)
    eq(p.returncode, 0, "announce's exit code (%s)" % err.strip()[-300:])
    check("DONE" in out, "announce did not finish: %r" % out)
    return {t["id"]: t for t in read_truth(truth)}


def attach(pid, name, secs, extra=()):
    out = work(name + ".jsonl")
    p = corobpf(["-p", str(pid), "-d", str(secs), "-v", "-o", out] + list(extra))
    eq(p.returncode, 0, "corobpf -p exit code (%s)" % p.stderr.strip()[-500:])
    return Trace(out), p.stderr


def check_listed(trace, stderr, pid, truth, what):
    """Every coroutine alive at the attach is in the trace, named as the program named it, with
    its parent; the parked ones suspended on the object the program says, all window long."""
    eq(trace.trailer["lost"]["events"], 0, "events lost (%s)" % what)
    eq(trace.trailer["lost"]["announce_unanswered"], 0, "unanswered requests (%s)" % what)
    check("did not list its coroutines" not in stderr, "%s: said unanswered:\n%s" % (what, stderr))
    check("attached while running" not in stderr, "%s: said unlisted:\n%s" % (what, stderr))
    mine = {c["id"]: c for c in trace.coroutines if c["pid"] == pid}
    eq(len(truth), 200, "the program's coroutines")
    by_name = {t["name"]: t for t in truth.values()}
    for tid, t in truth.items():
        c = mine.get(tid)
        check(c is not None, "%s: %s (%s) not in the trace" % (what, t["name"], tid))
        eq(c["name"], t["name"], "%s: the name of %s" % (what, tid))
        eq(c["created"], None, "%s: %s's creation (before the attach: not known)" % (what, tid))
    for i in range(20):
        eq(mine[by_name["nested-%d" % i]["id"]]["parent"], by_name["busy-0"]["id"],
           "%s: nested-%d's parent" % (what, i))
    for i in range(60):
        t = by_name["parker-%d" % i]
        c = mine[t["id"]]
        eq((c["state_at_end"], c["reason_at_end"], c["obj_at_end"]),
           ("suspended", "wait", t["announced"]["obj"]),
           "%s: parker-%d at the end (waiting since before the attach)" % (what, i))
        eq(c["switch_ins"], 0, "%s: parker-%d's switch-ins in the window" % (what, i))
        eq(c["running_ns"], 0, "%s: parker-%d's running time" % (what, i))
    # Listed once per request, and nothing found of coroutines waiting since before the attach.
    eq(len([e for e in trace.by_ev("announce_done") if e["pid"] == pid]) >= 1, True,
       "%s: an announce_done" % what)
    waiting = {by_name["parker-%d" % i]["id"] for i in range(60)}
    waiting |= {by_name["nested-%d" % i]["id"] for i in range(20)}
    bad = [f for f in trace.records if f["type"] == "finding" and f.get("id") in waiting]
    eq(bad, [], "%s: findings on coroutines parked since before the attach" % what)


@test
def announce_attach_lists_what_exists():
    """-p on a server running 200 coroutines: all 200 named, with parents, parked ones
    suspended on their channel from the attach on, in the JSONL and on their Perfetto tracks;
    ps lists the parked ones too."""
    p, stop, truth_path = start("announce-one")
    pf = work("announce-one.pftrace")
    try:
        trace, stderr = attach(p.pid, "announce-one", 1.5, extra=("-o", pf))
        ps = corobpf(["ps", "-p", str(p.pid), "-d", "1"])
    finally:
        truth = finish(p, stop, truth_path)
    check_listed(trace, stderr, p.pid, truth, "the attach")
    listed = [e for e in trace.by_ev("announce") if e["pid"] == p.pid]
    eq(len({e["id"] for e in listed}), 200, "coroutines announced")
    # Each named coroutine's Perfetto track carries its name (an announce names a coroutine the
    # model has just made, and given a track, in the state the list says): a TrackDescriptor's
    # name, field 2, length-delimited. The whole check (tests/perfetto/check.py) would take
    # minutes on this busy server's trace; suite_07's -a test runs it.
    names = {c["name"].encode() for c in trace.coroutines if c["pid"] == p.pid and c["name"]}
    with open(pf, "rb") as f:
        data = f.read()
    pat = re.compile(b"\x12(" + b"|".join(re.escape(bytes([len(n)]) + n) for n in names) + b")")
    found = {m.group(1)[1:] for m in pat.finditer(data)}
    eq(sorted(names - found)[:5], [], "named coroutines with no Perfetto track of that name")
    check(len(names) >= 200, "named coroutines: %d" % len(names))
    eq(ps.returncode, 0, "ps exit code (%s)" % ps.stderr.strip()[-300:])
    check("the scheduler listed what existed" in ps.stdout,
          "ps does not say the scheduler listed what existed:\n" + ps.stdout[-500:])
    for i in (0, 59):
        check("parker-%d " % i in ps.stdout or ps.stdout.rstrip().endswith("parker-%d" % i),
              "ps does not list parker-%d:\n%s" % (i, ps.stdout))


@test
def announce_sessions_one_after_another_and_side_by_side():
    """Three attaches one after another, then two at once: each hears the whole list (a
    scheduler that answered a count before is asked again through a spare site)."""
    p, stop, truth_path = start("announce-many")
    results = {}
    try:
        for i in range(3):
            results["after-%d" % i] = attach(p.pid, "announce-after-%d" % i, 1)

        def beside(key, secs, delay):
            time.sleep(delay)
            results[key] = attach(p.pid, "announce-" + key, secs)

        ts = [threading.Thread(target=beside, args=("long", 4, 0)),
              threading.Thread(target=beside, args=("short", 1, 1.5))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        truth = finish(p, stop, truth_path)
    eq(sorted(results), ["after-0", "after-1", "after-2", "long", "short"], "attaches made")
    for key, (trace, stderr) in sorted(results.items()):
        check_listed(trace, stderr, p.pid, truth, "attach " + key)


@test
def announce_unanswered_is_counted_and_said():
    """A program with the announce probes whose scheduler never answers: traced as before,
    the request counted (announce_unanswered 1) and said, with what it means."""
    stop = work("announce-mute.stop")
    p = subprocess.Popen([MUTE, stop], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        check(line and line[0] == "READY", "announce_mute did not start: %r" % line)
        trace, stderr = attach(p.pid, "announce-mute", 2)
    finally:
        open(stop, "w").close()
        p.wait(timeout=60)
    eq(trace.trailer["lost"]["announce_unanswered"], 1, "unanswered requests")
    check("did not list its coroutines within a second of the attach" in stderr,
          "the unanswered request is not said:\n" + stderr)
    check("attached while running: coroutines from before the attach" in stderr,
          "the summary does not say what the attach cannot know:\n" + stderr)
    eq(len([c for c in trace.coroutines if c["pid"] == p.pid]), 1, "its coroutine, traced")


EAGER = os.path.join(TESTS_BIN, "announce_eager")


@test
def announce_answer_given_while_attaching_is_asked_again():
    """A scheduler that answers the moment its count moves (progs/announce_eager.c) answers
    while corobpf is still attaching: the kernel raises the count before it writes a site's
    breakpoint, so that list passed the announce site unarmed and only its done was seen (every
    time, before: 0 of 50 listed). corobpf asks again once every site is armed: all 50 listed,
    named, parked on their object, in each of two sessions. (With another session holding the
    sites armed, no answer comes during the attach: a spare asks, as for any later session.)"""
    stop = work("announce-eager.stop")
    p = subprocess.Popen([EAGER, stop, "50"], stdout=subprocess.PIPE, text=True)
    results = []
    try:
        line = p.stdout.readline().split()
        check(line and line[0] == "READY", "announce_eager did not start: %r" % line)
        for session in (1, 2):
            results.append(attach(p.pid, "announce-eager-%d" % session, 0.5))
    finally:
        open(stop, "w").close()
        out, _ = p.communicate(timeout=60)
    answers = re.search(r"ANSWERS (\d+)", out)
    check(answers and int(answers.group(1)) >= 2, "announce_eager's answers: %r" % out)
    for session, (trace, stderr) in enumerate(results, 1):
        what = "session %d" % session
        eq(trace.trailer["lost"]["announce_unanswered"], 0, "unanswered requests (%s)" % what)
        mine = {c["id"]: c for c in trace.coroutines if c["pid"] == p.pid}
        eq(len(mine), 50, "%s: coroutines in the trace (%s)" % (what, stderr.strip()[-600:]))
        for i in range(1, 51):
            c = mine.get("0x%x" % i)
            check(c is not None, "%s: eager-%d not in the trace" % (what, i))
            eq((c["name"], c["state_at_end"], c["reason_at_end"], c["obj_at_end"]),
               ("eager-%d" % i, "suspended", "wait", "0x77"), "%s: eager-%d" % (what, i))
        listed = {e["id"] for e in trace.by_ev("announce") if e["pid"] == p.pid}
        eq(len(listed), 50, "%s: coroutines announced" % what)
    # Asked once every site was armed: after the answer given during the attach (the race),
    # or, with another session holding the sites armed (-a beside), through a spare alone.
    for session, (_, stderr) in enumerate(results, 1):
        check("asked its scheduler for its coroutines" in stderr,
              "session %d does not say it asked the scheduler:\n%s" % (session, stderr[-800:]))
