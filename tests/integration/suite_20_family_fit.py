"""A program traced through the switch-function path as the wrong family (docs/switch.md, "When
the family does not fit"): the summary says so at its end, naming the family and the object,
and says what to do; a program traced as its own family gets no such warning."""
from harness import *  # noqa: F401,F403

QEMU_IMG = "/usr/bin/qemu-img"
MAIN = 1 << 63
WARNING = "does not look like a program of the family it was traced as"


def qemu_bench(name):
    img = work(name + ".qcow2")
    p = run([QEMU_IMG, "create", "-q", "-f", "qcow2", img, "16M"])
    eq(p.returncode, 0, "qemu-img create (%s)" % p.stderr.strip())
    return [QEMU_IMG, "bench", "-c", "3000", "-d", "8", "-f", "qcow2", img]


def misfit_lines(stderr):
    """The warning and the lines under it, up to the end of the summary."""
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if WARNING in line:
            return lines[i:i + 3]
    return []


@test
def switch_family_misfit_named():
    """QEMU forced through ucontext (what auto-selection once chose): each coroutine is seen
    switched in once and made again without having run; the summary ends by naming ucontext and
    libc, and suggests --switch; its replay says the same."""
    if not os.path.exists(QEMU_IMG):
        check(not CI, "%s missing (tools/deps.sh)" % QEMU_IMG)
        print("     skipped: %s missing" % QEMU_IMG, flush=True)
        return
    tr, _, p, out, raw = trace_launch("misfit_qemu", qemu_bench("misfit"),
                                      extra=["--switch", "ucontext"])
    got = misfit_lines(p.stderr)
    check(got, "no misfit warning:\n" + p.stderr)
    check(re.search(r"^  WARNING: pid \d+ does not look", got[0]), got[0])
    check(re.search(r"^    seen through ucontext: \S*libc\.so\.6$", got[1]), got[1])
    check("--switch" in got[2] and "--switch uprobe:" in got[2], got[2])
    # The warning is the summary's last word.
    summary = p.stderr.split("corobpf summary:", 1)[1].splitlines()
    last = [l for l in summary if l.startswith("  ")]
    eq(last[-3:], got, "the summary's last lines")
    r = corobpf(["report", raw, "-o", work("misfit_qemu.replay.jsonl"), "--force"])
    eq(r.returncode, 0, "corobpf report (%s)" % r.stderr.strip())
    eq(misfit_lines(r.stdout), got, "the replay's warning (report prints on stdout)")


@test
def switch_family_fit_no_warning():
    """QEMU traced as qemu (no flags) and the Boost.Fiber and ucontext test programs: no
    misfit warning."""
    runs = [("fit_uctx", [os.path.join(TESTS_BIN, "uctx"), "threads", "3", "8", "4"]),
            ("fit_fibers", [os.path.join(TESTS_BIN, "fibers"), "4", "6", "20"])]
    if os.path.exists(QEMU_IMG):
        runs.append(("fit_qemu", qemu_bench("fit")))
    for name, cmd in runs:
        if not os.path.exists(cmd[0]):
            continue
        _, _, p, _, _ = trace_launch(name, cmd)
        check(WARNING not in p.stderr, "%s: misfit warning on a healthy trace:\n%s"
              % (name, p.stderr))


@test
def switch_fibers_dispatcher_idle_not_blocking():
    """Boost.Fiber's work-stealing scheduler idle on 3 threads (every fiber in a fiber sleep):
    each thread's dispatcher waits in the kernel, which is no blocking finding, and it is named
    "boost dispatcher [tid]"; a fiber calling usleep(200 ms) still is one."""
    tr, _, p, out, raw = trace_launch("fibers_steal",
                                      [os.path.join(TESTS_BIN, "fibers"), "steal", "3", "200"])
    check("DONE" in p.stdout, p.stdout)
    # Ground truth: an address on each program fiber's stack, just under its id (the top).
    mine = {}
    for f in (l.split() for l in p.stdout.splitlines()):
        if f and f[0] == "FIBER":
            mine[f[1]] = int(f[3], 16)
    eq(len(mine), 7, "fibers the program made")

    # The threads' own contexts (ids MAIN | tid) are neither.
    others = [c for c in tr.coroutines if not int(c["id"], 16) & MAIN]
    # Each program fiber's is the lowest id above its address (stacks are adjacent).
    owner = {}
    for n, sp in mine.items():
        above = [c["id"] for c in others if int(c["id"], 16) > sp]
        if above:
            owner[min(above, key=lambda i: int(i, 16))] = n

    def program_fiber(cid):
        return owner.get(cid)

    dispatchers = [c for c in others if program_fiber(c["id"]) is None]
    eq(len([c for c in others if program_fiber(c["id"])]), 7, "program fibers traced")
    eq(sorted(c["name"] for c in dispatchers),
       sorted("boost dispatcher [%d]" % c["threads"][0] for c in dispatchers),
       "dispatchers named after their threads")
    eq(len({c["threads"][0] for c in dispatchers}), 3, "one dispatcher per thread")
    blocking = [r for r in tr.records if r["type"] == "finding" and r["kind"] == "blocking"]
    on = sorted((program_fiber(f["id"]) or f["name"] or f["id"]) for f in blocking)
    eq(on, ["blocker"], "blocking findings (the idle dispatchers have none)")
    check(blocking[0]["dur"] >= 190 * 1000000, "blocker's blocking: %d ns" % blocking[0]["dur"])
    check_replay(out, raw)
