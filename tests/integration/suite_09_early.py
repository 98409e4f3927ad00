"""Before main, after dlopen."""
from harness import *  # noqa: F401,F403


@test
def launch_sees_probes_before_main():
    """Constructors in the executable and in a linked library run before main: all traced."""
    trace, _, p, out, raw = trace_launch("early", [os.path.join(TESTS_BIN, "early")])
    eq(sorted(e["id"] for e in trace.by_ev("create")), ["0xe1", "0xe2", "0xe3", "0xe4"], "creates")
    names = {c["id"]: c["name"] for c in trace.coroutines}
    eq(names.get("0xe1"), "lib-ctor", "name from the library constructor")
    paths = [r["path"] for r in trace.records if r["type"] == "object"]
    check(any(p.endswith("/libearly.so") for p in paths), "libearly.so not attached: %s" % paths)
    check(not any(r.get("late") for r in trace.records if r["type"] == "object"), "a late object")
    check_clean(trace)


@test
def dlopen_is_picked_up():
    """A library dlopened later is attached when ld.so announces it, and marked late."""
    trace, _, p, out, raw = trace_launch("dlopen", [os.path.join(TESTS_BIN, "early"), "dlopen", "300"])
    objects = [r for r in trace.records if r["type"] == "object"]
    dl = [o for o in objects if o["path"].endswith("/libdlprobe.so")]
    eq(len(dl), 1, "libdlprobe.so objects")
    check(dl[0].get("late"), "libdlprobe.so not marked late")
    # Its four probe sites; batched, also the header's batch site (the first record's trap).
    eq(dl[0]["probes"], 5 if BATCHED else 4, "probe sites in libdlprobe.so")
    creates = [e["id"] for e in trace.by_ev("create")]
    check("0xd2" in creates, "the probe fired 300 ms after dlopen is missing: %s" % creates)
    # A launched command is held in ld.so's hook until the library is attached: its
    # constructor's create (before dlopen returns) is traced too.
    check("0xd1" in creates, "the library constructor's create is missing: %s" % creates)
    eq(trace.trailer["lost"]["late_attach"], 1, "late_attach")
    check("attached after they were loaded" in p.stderr, "the summary does not warn:\n" + p.stderr)
    check_replay(out, raw)
