"""The probe header, compiled every way."""
from harness import *  # noqa: F401,F403


MATRIX = ["usdt_matrix_c_O0", "usdt_matrix_c_O2", "usdt_matrix_cxx_O0", "usdt_matrix_cxx_O2",
          "usdt_matrix_clang_O2", "usdt_matrix_clang_lld", "usdt_matrix_so",
          "usdt_matrix_c_O2_nop5"]


def make_matrix_test(binary):
    def t():
        out = work(binary + ".jsonl")
        p = corobpf(["-o", out, "--", os.path.join(TESTS_BIN, binary), "3", "5"])
        eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
        expected = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        check(expected, "the program printed no expectations")
        trace = Trace(out)
        # The probes' events (the kernel's off-CPU stretches are not probes).
        events = [e for e in trace.events if e["ev"] not in ("offcpu", "offcpu_begin")]
        eq(len(events), len(expected), "events (traced %s)" % [e["ev"] for e in events])
        reasons = ["unknown", "yield", "wait", "sleep", "io", "done"]
        for want, got in zip(expected, events):
            where = "%s %s (seq %d)" % (want["variant"], want["probe"], want["seq"])
            eq(got["ev"], want["probe"], where + " probe")
            for k, v in want.items():
                if k in ("seq", "variant", "probe"):
                    continue
                if k == "str":
                    k = "name"
                if k == "reason":
                    v = reasons[v]
                eq(got.get(k), v, where + " field " + k)
    t.__name__ = "usdt_" + binary
    return t


for b in MATRIX:
    test(make_matrix_test(b))


@test
def usdt_nop5_sites_keep_the_red_zone():
    """COROBPF_NOP5: sites the kernel may turn into a call (corobpf probes the instruction
    before each instead: fault_fork_child_runs_five_byte_sites_unharmed); a leaf's red zone
    survives them."""
    kind = "five-byte nops"
    out = work("redzone.jsonl")
    untraced = run([os.path.join(TESTS_BIN, "redzone"), "1000"])
    eq(untraced.stdout, "redzone: 0 of 1000 clobbered\n", "untraced")
    # The sites trap on the trap path only: batched, a probe is a call the compiler sees (the
    # function is no leaf then, and this test's hand-made red zone would not be its own).
    p = corobpf(["-v", "--probe-path", "trap", "-o", out, "--", os.path.join(TESTS_BIN, "redzone"),
                 "20000"])
    eq(p.returncode, 0, "exit code (%s)" % p.stderr.strip())
    eq(p.stdout, "redzone: 0 of 20000 clobbered\n", "traced")
    check(kind in p.stderr, "corobpf does not say what the sites are:\n" + p.stderr)
    with open("/proc/kallsyms") as f:
        optimized = any(l.rstrip().endswith(" arch_uprobe_optimize") for l in f)
    check("at the instruction before it, which the kernel single-steps" in p.stderr,
          "corobpf does not say where it probes them:\n" + p.stderr)
    check(("dies of SIGSEGV" if optimized else "would single-step the nop as well") in p.stderr,
          "the site note does not match the kernel (optimized: %s):\n%s" % (optimized, p.stderr))
    trace = Trace(out)
    check_clean(trace)
    eq(len(trace.coroutines), 20000, "coroutines")
    eq({c["end"] for c in trace.coroutines}, {"exit"}, "ends")
