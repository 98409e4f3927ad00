"""Probe notes that would harm the target: corobpf refuses the object and says why.

corobpf runs as root and attaches to objects that any user may have written. The tests take
build/tests/hostile (tests/integration/progs/hostile.c), rewrite one of its notes the way a
hostile or broken object would have it, and run it as an unprivileged user, with corobpf -p
attached before its work starts (or launched by corobpf, where that is when the harm is done).
Each test checks that corobpf refuses the object with the reason on stderr, that the program's
own results (a hot loop it checks, constants in .rodata and .data.rel.ro, a .bss word) are
what they are untraced, and that nothing crashed. See docs/probes.md, "What corobpf refuses".
"""
import os
import re
import signal
import struct
import subprocess
import time

from harness import *  # noqa: F401,F403

HOSTILE = os.path.join(TESTS_BIN, "hostile")
HOSTILE_MANY = os.path.join(TESTS_BIN, "hostile_many")
LOOPS = 101
UNTRACED = "loop: 0 of %d wrong\nro_const: 4242\nrelro_const: 4242\nbss_counter: 0\n" % LOOPS


class Elf:
    """Just enough of an x86-64 ELF to find symbols and stapsdt notes and to rewrite them."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = bytearray(f.read())
        d = self.data
        check(d[:4] == b"\x7fELF" and d[4] == 2 and d[5] == 1, "%s: not a 64-bit LE ELF" % path)
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
        raw = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
        strtab = raw[shstrndx][4]
        self.sections = {}
        for name, typ, flags, addr, off, size, link, info, align, entsize in raw:
            sname = bytes(d[strtab + name:d.index(b"\0", strtab + name)]).decode()
            self.sections.setdefault(sname, dict(type=typ, addr=addr, off=off, size=size,
                                                 link=link, align=align))

    def section(self, name):
        check(name in self.sections, "no section %s" % name)
        return self.sections[name]

    def symbol(self, name):
        st = self.section(".symtab")
        strs = self.sections[".strtab"]["off"]
        for at in range(st["off"], st["off"] + st["size"], 24):
            nm, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, at)
            end = self.data.index(b"\0", strs + nm)
            if bytes(self.data[strs + nm:end]).decode(errors="replace") == name:
                return value
        raise Failure("no symbol %s" % name)

    def notes(self):
        """The stapsdt notes, in file order: dict(desc=file offset of the descriptor,
        pc, base, sem, provider, name, name_off=file offset of the name)."""
        sec = self.section(".note.stapsdt")
        align = 8 if sec["align"] == 8 else 4
        up = lambda v: (v + align - 1) & ~(align - 1)
        out, off, end = [], sec["off"], sec["off"] + sec["size"]
        while off + 12 <= end:
            namesz, descsz, typ = struct.unpack_from("<III", self.data, off)
            desc = off + 12 + up(namesz)
            if typ == 3 and bytes(self.data[off + 12:off + 12 + namesz]) == b"stapsdt\0":
                pc, base, sem = struct.unpack_from("<QQQ", self.data, desc)
                prov_end = self.data.index(b"\0", desc + 24)
                name_end = self.data.index(b"\0", prov_end + 1)
                out.append(dict(desc=desc, pc=pc, base=base, sem=sem,
                                provider=bytes(self.data[desc + 24:prov_end]).decode(),
                                name=bytes(self.data[prov_end + 1:name_end]).decode(),
                                name_off=prov_end + 1))
            off = desc + up(descsz)
        return out

    def note(self, name, nth=0):
        mine = [n for n in self.notes() if n["provider"] == "corobpf" and n["name"] == name]
        check(len(mine) > nth, "no note %d of corobpf:%s" % (nth, name))
        return mine[nth]

    def set_pc(self, note, pc):
        struct.pack_into("<Q", self.data, note["desc"], pc)

    def set_sem(self, note, sem):
        struct.pack_into("<Q", self.data, note["desc"] + 16, sem)

    def set_name(self, note, raw):
        check(len(raw) == len(note["name"]), "a new name must keep the old one's length")
        self.data[note["name_off"]:note["name_off"] + len(raw)] = raw

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.data)
        os.chmod(path, 0o755)


def attacker_copy(src, name, rewrite):
    """A rewritten copy of `src` that the unprivileged account owns, in a directory of its own."""
    d = attacker_dir("hostile-elf")
    path = os.path.join(d, name)
    elf = Elf(src)
    rewrite(elf)
    elf.write(path)
    uid, gid = attacker()
    os.chown(path, uid, gid)
    return path


def run_attacked(path, name):
    """The program run as the unprivileged account with corobpf -p attached before its loop.
    Returns (its stdout, its exit code, corobpf's completed process)."""
    target = subprocess.Popen(as_attacker([path, "--wait", str(LOOPS)]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    tr = None
    try:
        line = target.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        out, err = work(name + ".jsonl"), work(name + ".err")
        with open(err, "w") as ef:
            tr = subprocess.Popen([COROBPF, "-o", out, "-p", line[1]], stdout=ef, stderr=ef)
            # Attached (it says "tracing") or gone (nothing it could attach to).
            end = time.time() + 60
            while tr.poll() is None and time.time() < end:
                with open(err, errors="replace") as f:
                    if "tracing" in f.read():
                        break
                time.sleep(0.05)
            target.send_signal(signal.SIGUSR1)
            stdout, _ = target.communicate(timeout=60)
            rc = tr.wait(timeout=60)
        with open(err, encoding="utf-8", errors="surrogateescape") as f:
            stderr = f.read()
    finally:
        for p in (target, tr):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    return stdout, target.returncode, subprocess.CompletedProcess([COROBPF], rc, "", stderr)


def run_launched(path, name):
    """The program launched by corobpf (as root: there is no option to drop to another user),
    which attaches before the program's segments are mapped."""
    p = corobpf(["-o", work(name + ".jsonl"), "--", path, str(LOOPS)])
    return p.stdout, p.returncode, p


def refusal_line(stderr):
    lines = [l for l in stderr.splitlines() if "refusing its probes" in l]
    check(len(lines) == 1, "no (single) refusal warning:\n" + stderr)
    line = lines[0]
    check(all(c >= " " and c != "\x7f" for c in line),
          "control characters reach the terminal: %r" % line)
    return line


def check_refused(path, name, reasons, launched=False):
    plain = run(as_attacker([path, str(LOOPS)]), timeout=60)
    eq(plain.stdout, UNTRACED, "untraced output")
    traced, rc, p = (run_launched if launched else run_attacked)(path, name)
    check(p.returncode in (0, 6) or (launched and p.returncode == rc),
          "corobpf exited %d:\n%s" % (p.returncode, p.stderr))
    eq(traced, plain.stdout, "the program's results under corobpf")
    eq(rc, 0, "the program's exit code under corobpf")
    line = refusal_line(p.stderr)
    for r in reasons:
        check(r in line, "%r is not in the refusal:\n%s" % (r, line))
    return line


@test
def hostile_elf_site_inside_an_instruction():
    """A site moved two bytes into the `add` of the hot loop (the immediate, whose bytes the
    kernel would probe as `push`): an int3 there changes the sum on every iteration."""
    def rewrite(elf):
        note = elf.note("ready")
        elf.set_pc(note, elf.symbol("hostile_insn") + 2)
    path = attacker_copy(HOSTILE, "hostile-site", rewrite)
    check_refused(path, "hostile-site", ["site 1 of corobpf:ready at 0x",
                                         "is not a nop (bytes 50 50 50 50",
                                         "not an instruction our SDK emits"])


@test
def hostile_elf_site_on_a_nop_byte_inside_an_instruction():
    """A site moved two bytes into the second `add` of the hot loop, whose immediate is four
    0x90 bytes: the byte is the nop our SDK writes, but not where an instruction starts. A
    breakpoint there turns the immediate's first byte into int3 (0xcc) and the sum changes
    on every iteration. Decoded from the start of its function, the site is refused."""
    def rewrite(elf):
        note = elf.note("ready")
        elf.set_pc(note, elf.symbol("hostile_insn90") + 2)
    path = attacker_copy(HOSTILE, "hostile-site90", rewrite)
    check_refused(path, "hostile-site90", ["site 1 of corobpf:ready at 0x",
                                           "is inside the instruction at 0x",
                                           "(bytes 48 05 90 90 90 90) of function step",
                                           "not an instruction boundary"])


@test
def hostile_elf_five_byte_site_whose_step_is_inside_an_instruction():
    """A site moved onto a five-byte nop between the bytes of COROBPF_NOP5's stack steps, where
    the step down is the end of a `movabs` immediate, not an instruction. corobpf probes such a
    site at its step (an optimized uprobe on the nop kills forked children: docs/probes.md), so
    the step must be where an instruction starts: an int3 there would change the immediate and
    the sum on every iteration. Refused."""
    def rewrite(elf):
        note = elf.note("ready")
        elf.set_pc(note, elf.symbol("hostile_insn5"))
    path = attacker_copy(HOSTILE, "hostile-site5", rewrite)
    check_refused(path, "hostile-site5", ["site 1 of corobpf:ready at 0x",
                                          "is inside the instruction at 0x",
                                          "(bytes 48 b9 00 00 00 48 8d 64",
                                          "not an instruction boundary"])


@test
def hostile_elf_semaphore_on_a_rodata_constant():
    """A semaphore pointed at a constant in .rodata. The kernel increments a semaphore only in
    a writable mapping of its file offset: here that is the data segment's mapping of the
    same file page, not where the program reads the constant, but with another layout it
    would be; and it is not a semaphore our SDK wrote."""
    def rewrite(elf):
        elf.set_sem(elf.note("create"), elf.symbol("hostile_ro_const"))
    path = attacker_copy(HOSTILE, "hostile-sem-ro", rewrite)
    check_refused(path, "hostile-sem-ro", ["semaphore of corobpf:create at 0x",
                                           "is outside .probes (in .rodata)"])


@test
def hostile_elf_semaphore_on_a_relro_constant():
    """A semaphore pointed at a constant in .data.rel.ro, launched: the data segment is still
    writable when the kernel maps it (ld.so makes it read-only later), so the kernel
    increments the constant before the program starts."""
    def rewrite(elf):
        elf.set_sem(elf.note("create"), elf.symbol("hostile_relro_const") + 8)
    path = attacker_copy(HOSTILE, "hostile-sem-relro", rewrite)
    check_refused(path, "hostile-sem-relro", ["semaphore of corobpf:create at 0x",
                                              "is outside .probes (in .data.rel.ro)"],
                  launched=True)


@test
def hostile_elf_semaphore_on_a_bss_counter():
    """A semaphore pointed at a .bss word the program prints, attached to the running program:
    the word shares its page with .data, which is mapped from the file, and the kernel
    increments it there."""
    def rewrite(elf):
        elf.set_sem(elf.note("exit"), elf.symbol("hostile_bss_counter"))
    path = attacker_copy(HOSTILE, "hostile-sem-bss", rewrite)
    check_refused(path, "hostile-sem-bss", ["semaphore of corobpf:exit at 0x",
                                            "is outside .probes (in .bss)"])


@test
def hostile_elf_names_and_paths_reach_the_terminal_escaped():
    """A probe name and a file name with escape sequences: refused (no name our SDK writes),
    and the warning shows them as \\x escapes, never as raw control bytes."""
    def rewrite(elf):
        elf.set_name(elf.note("ready"), b"\x1b[2J\x07")
    path = attacker_copy(HOSTILE, "hostile-\x1b[31mred", rewrite)
    line = check_refused(path, "hostile-name", ["is not a C identifier"])
    # One backslash or more: the log may escape the escapes again.
    for shown in (r"hostile-\\+x1b\[31mred:", r"corobpf:\\+x1b\[2J\\+x07 at 0x"):
        check(re.search(shown, line), "%s is not in the refusal:\n%s" % (shown, line))


@test
def hostile_elf_tens_of_thousands_of_notes():
    """55,000 notes, 41 names (more than corobpf keeps): scanned whole and without harm, within
    the run's timeout. Then the same with one bad site among them: the object is refused."""
    out = work("many.jsonl")
    p = corobpf(["-o", out, "--", HOSTILE_MANY, str(LOOPS)], timeout=120)
    eq(p.returncode, 0, "corobpf exit code (%s)" % p.stderr.strip()[-800:])
    eq(p.stdout, UNTRACED, "the program's output under corobpf")
    trace = Trace(out)
    evs = [e["ev"] for e in trace.events if e["ev"] not in ("offcpu", "offcpu_begin")]
    eq((evs.count("create"), evs.count("ready"), evs.count("exit")), (1, LOOPS, 1),
       "events of the program's own probes")

    def rewrite(elf):
        bulk = [n for n in elf.notes() if n["provider"] == "corobpf" and n["name"] == "bulk"]
        eq(len(bulk), 50000, "bulk notes")
        elf.set_pc(bulk[29999], elf.symbol("hostile_insn") + 2)
    path = attacker_copy(HOSTILE_MANY, "hostile-many", rewrite)
    check_refused(path, "hostile-many", ["site 30000 of corobpf:bulk at 0x", "is not a nop"])


# The sparse note: 8 GiB declared in a file of a few KiB on disk (HUGE_NOTE=BYTES overrides,
# to see an old build fail without taking 8 GiB of a shared machine's memory).
HUGE_NOTE = int(os.environ.get("HUGE_NOTE", 8 << 30))
# What corobpf may take, at most, while it refuses the object: far below what reading would.
RSS_BOUND = 256 << 20


def sparse_note_copy(name):
    """hostile's copy whose .note.stapsdt declares HUGE_NOTE bytes: the file is made that long
    by a hole, so the section is in the file, all of it zeros but the real notes."""
    def rewrite(elf):
        sec = elf.section(".note.stapsdt")
        shoff, = struct.unpack_from("<Q", elf.data, 0x28)
        shentsize, shnum, _ = struct.unpack_from("<HHH", elf.data, 0x3a)
        for i in range(shnum):
            at = shoff + i * shentsize
            typ, = struct.unpack_from("<I", elf.data, at + 4)
            off, = struct.unpack_from("<Q", elf.data, at + 24)
            if typ == 7 and off == sec["off"]:
                struct.pack_into("<Q", elf.data, at + 32, HUGE_NOTE)
                return
        raise Failure("no .note.stapsdt header")
    path = attacker_copy(HOSTILE, name, rewrite)
    with open(path, "r+b") as f:
        f.truncate(Elf(path).section(".note.stapsdt")["off"] + HUGE_NOTE)
    st = os.stat(path)
    check(st.st_blocks * 512 < 1 << 20, "the copy is not sparse: %d blocks" % st.st_blocks)
    return path


def check_huge_note_refused(stderr, rss, what):
    check(rss < RSS_BOUND, "%s: corobpf's peak RSS is %.1f MiB" % (what, rss / 2**20))
    line = refusal_line(stderr)
    want = "declares %d bytes of notes, more than the 64 MiB corobpf reads" % HUGE_NOTE
    check(want in line, "%s: %r is not in the refusal:\n%s" % (what, want, line))


@test
def hostile_elf_sparse_note_of_gigabytes_is_not_read():
    """A .note.stapsdt that declares 8 GiB, in a sparse file of a few KiB on disk: refused by
    its size, never read, under -p (attached before the program's work) and under -a (the
    program only run, by its owner), corobpf's peak RSS small; the program's results are
    what they are untraced."""
    import suite_hostile_memory as hm
    path = sparse_note_copy("hostile-huge-note")
    plain = run(as_attacker([path, str(LOOPS)]), timeout=60)
    eq(plain.stdout, UNTRACED, "untraced output")

    # -p: the program waits for SIGUSR1 before its loop.
    target = subprocess.Popen(as_attacker([path, "--wait", str(LOOPS)]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    tr = None
    try:
        line = target.stdout.readline().split()
        check(line and line[0] == "READY", "the program did not start: %r" % line)
        err = work("huge-note-p.err")
        with open(err, "w") as ef:
            tr = subprocess.Popen([COROBPF, "-o", work("huge-note-p.jsonl"), "-d", "3", "-p",
                                   line[1]], stdout=ef, stderr=ef)
            rc, rss = hm.watch_hwm(tr)
        target.send_signal(signal.SIGUSR1)
        out, _ = target.communicate(timeout=60)
        eq(out, UNTRACED, "the program's results after corobpf -p")
        check(rc in (0, 6), "corobpf -p exited %d" % rc)
        with open(err, errors="replace") as f:
            check_huge_note_refused(f.read(), rss, "-p")
    finally:
        for p in (target, tr):
            if p and p.poll() is None:
                p.kill()
                p.wait()

    # -a: a plain run of the program while a system-wide session is on.
    err = work("huge-note-a.err")
    with open(err, "w") as ef:
        tr = subprocess.Popen([COROBPF, "-a", "-d", "6", "-o", work("huge-note-a.jsonl")],
                              stdout=ef, stderr=ef)
        try:
            wait_for(err, "tracing every", timeout=30)
            ran = run(as_attacker([path, str(LOOPS)]), timeout=60)
            rc, rss = hm.watch_hwm(tr)
        finally:
            if tr.poll() is None:
                tr.kill()
                tr.wait()
    eq(ran.stdout, UNTRACED, "the program's results under corobpf -a")
    eq(rc, 0, "corobpf -a exit code")
    with open(err, errors="replace") as f:
        text = f.read()
    check(rss < RSS_BOUND, "-a: corobpf's peak RSS is %.1f MiB" % (rss / 2**20))
    lines = [l for l in text.splitlines() if "refusing its probes" in l and path in l]
    check(lines, "-a: no refusal of %s:\n%s" % (path, text))
    check("declares %d bytes of notes" % HUGE_NOTE in lines[0], "-a: the refusal:\n" + lines[0])
