"""A program traced through the switch-function path as the wrong family (docs/switch.md, "When
the family does not fit"): the summary says so at its end, naming the family and the object,
and says what to do; a program traced as its own family gets no such warning."""
from harness import *  # noqa: F401,F403

QEMU_IMG = "/usr/bin/qemu-img"
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
    switched in once and re-created without exit; the summary ends by naming ucontext and
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
