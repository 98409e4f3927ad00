"""Names chosen by the traced program never reach a terminal raw.

Coroutine names, span names and the program's own name (its comm, taken
from the file name) are the target's to choose, any bytes. corobpf's text
output (the summary on stderr, `corobpf report`, `corobpf ps`) is read on
root's terminal: an escape sequence there could retitle the window, clear
the screen, or on some terminals answer back with input. Each such byte
must come out escaped (\\xNN) while printable UTF-8 stays as it is, and the
JSONL must keep every name exactly.
"""
import subprocess
import unicodedata

from harness import *  # noqa: F401,F403

# Each name in C, and what it says in the JSONL (invalid bytes as U+FFFD).
NAMES = [
    (r'"\x1b]0;owned\x07"', "\x1b]0;owned\x07"),          # OSC 0: retitles the window
    (r'"\x1b[2J\x1b[H"', "\x1b[2J\x1b[H"),                # clears the screen
    (r'"\xc2\x9b" "31mred"', "\x9b31mred"),               # CSI as a C1 control in UTF-8
    (r'"bad\xff\xfe\x7f utf8"', "bad\ufffd\ufffd\x7f utf8"),  # invalid UTF-8 and DEL
    (r'"rtl\xe2\x80\xae" "gnp.exe"', "rtl\u202egnp.exe"),  # a right-to-left override
    (r'"caf\xc3\xa9-ok"', "caf\u00e9-ok"),                  # printable UTF-8: kept as is
    (r'"line\xe2\x80\xa8" "forged"', "line\u2028forged"),  # a line separator: a new line
    (r'"para\xe2\x80\xa9" "forged"', "para\u2029forged"),  # a paragraph separator
]
# The escaped forms the text output must show instead.
SHOWN = ["\\x1b]0;owned\\x07", "\\x1b[2J\\x1b[H", "\\xc2\\x9b31mred", "bad\\xff\\xfe\\x7f utf8",
         "rtl\\xe2\\x80\\xaegnp.exe", "caf\u00e9-ok", "line\\xe2\\x80\\xa8forged",
         "para\\xe2\\x80\\xa9forged"]
# The separators' escaped forms, which the summary and report show in their span tables.
SEPARATORS = SHOWN[6:]
# The program's file name, so its comm, carries an escape too.
EXE = "hn\x1b[2Jx"

PROG = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "corobpf.h"

static const char *names[] = {%(names)s};
#define N (sizeof(names) / sizeof(names[0]))

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "serve")) {
		/* For corobpf ps: each coroutine names itself, runs and parks, over and over. */
		printf("READY %%d\n", getpid());
		fflush(stdout);
		for (;;) {
			for (unsigned i = 0; i < N; i++) {
				CORO_PROBE(name, 0x71 + i, names[i]);
				CORO_PROBE(switch, 0, 0x71 + i, 0, 0);
				CORO_PROBE(switch, 0x71 + i, 0, CORO_SLEEP, 0);
			}
			usleep(20000);
		}
	}
	/* A span of the thread itself, never closed. */
	CORO_PROBE(span_begin, names[4]);
	for (unsigned i = 0; i < N; i++) {
		CORO_PROBE(create, 0x61 + i, 0);
		CORO_PROBE(name, 0x61 + i, names[i]);
	}
	/* Each runs, opens a span, ends one it never opened, and waits forever on the next. */
	for (unsigned i = 0; i < N; i++) {
		CORO_PROBE(switch, i ? 0x61 + i - 1 : 0, 0x61 + i, CORO_WAIT, 0x1000 + i);
		CORO_PROBE(span_begin, names[i]);
		CORO_PROBE(span_end, names[(i + 1) %% N]);
	}
	CORO_PROBE(switch, 0x61 + N - 1, 0, CORO_WAIT, 0x2000);
	usleep(300000);
	return 0;
}
"""


def _build():
    """The program, compiled into the work directory under its hostile name."""
    exe = work(EXE)
    if os.path.exists(exe):
        return exe
    src = work("hostile_names.c")
    with open(src, "w") as f:
        f.write(PROG % {"names": ", ".join(c for c, _ in NAMES)})
    p = run(["cc", "-O2", "-Wall", "-I" + os.path.join(ROOT, "usdt"), src, "-o", exe])
    eq(p.returncode, 0, "cc hostile_names.c:\n" + p.stderr)
    return exe


def _run_bytes(args, timeout=120):
    return subprocess.run(args, capture_output=True, timeout=timeout)


def _check_terminal_safe(data, what):
    """Valid UTF-8 with no control character but newline: no C0, DEL, C1, bidi override, and
    no line or paragraph separator (U+2028, U+2029), which break a line as a newline does."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Failure("%s is not valid UTF-8 (%s): %r"
                      % (what, e, data[max(0, e.start - 40):e.end + 40]))
    for i, ch in enumerate(text):
        if ch == "\n":
            continue
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") and ch not in "\u00ad\u200d":
            raise Failure("%s carries U+%04X at %d: %r"
                          % (what, ord(ch), i, text[max(0, i - 60):i + 60]))
    return text


@test
def hostile_names_live_summary_and_report():
    """Escape sequences in coroutine, span and program names: escaped in the summary and in
    corobpf report's text, exact in the JSONL and its replay."""
    exe = _build()
    out, raw = work("hostile-names.jsonl"), work("hostile-names.raw")
    pf = work("hostile-names.pftrace")
    p = _run_bytes([COROBPF, "-o", out, "-o", pf, "--raw", raw, "--", exe])
    eq(p.returncode, 0, "corobpf exit code (%r)" % p.stderr)
    err = _check_terminal_safe(p.stderr, "corobpf's stderr")
    check("tracing hn\\x1b[2Jx (pid" in err, "the comm, escaped, in the start message:\n" + err)
    # The longest-suspended list (the first five) and the findings name them; the spans too.
    for shown in SHOWN[:5]:
        check(shown in err, "%r not in the summary:\n%s" % (shown, err))
    check('span "\\x1b]0;owned\\x07" never closed' in err, "an unclosed span:\n" + err)
    for shown in SEPARATORS:
        check(shown in err, "%r not in the summary's spans:\n%s" % (shown, err))

    # The JSONL keeps the exact names (invalid bytes as U+FFFD, as JSON needs).
    trace = Trace(out)
    names = {e["id"]: e["name"] for e in trace.by_ev("name")}
    eq([names.get("0x%x" % (0x61 + i)) for i in range(len(NAMES))], [n for _, n in NAMES],
       "names in the JSONL")
    eq(sorted(set(e["name"] for e in trace.by_ev("span_begin"))), sorted(n for _, n in NAMES),
       "span names in the JSONL")
    eq(trace.processes[0]["comm"], EXE, "the comm in the JSONL")
    check_replay(out, raw)

    # corobpf report: its summary and its tables on stdout, from the capture and the JSONL.
    for src in (raw, out):
        r = _run_bytes([COROBPF, "report", src])
        eq(r.returncode, 0, "corobpf report %s (%r)" % (os.path.basename(src), r.stderr))
        text = _check_terminal_safe(r.stdout, "corobpf report's output")
        _check_terminal_safe(r.stderr, "corobpf report's stderr")
        # Read back from the JSONL, the invalid bytes are U+FFFD already.
        want = SHOWN[:5] if src == raw else SHOWN[:3] + ["bad\ufffd\ufffd\\x7f utf8", SHOWN[4]]
        want += SEPARATORS
        for shown in want:
            check(shown in text, "%r not in corobpf report %s:\n%s"
                  % (shown, os.path.basename(src), text))
        # The table by kind shows every name: invalid bytes as U+FFFD there (kinds are
        # grouped as the JSON report has them), trailing digits dropped.
        kinds = text.split("by kind of coroutine")[1]
        for kind in SHOWN[:3] + ["bad\ufffd\ufffd\\x7f utf", SHOWN[4], SHOWN[5]] + SEPARATORS:
            check(kind in kinds, "kind %r not in the table:\n%s" % (kind, kinds))


@test
def hostile_names_ps():
    """corobpf ps on a live program whose names and comm carry escape sequences."""
    exe = _build()
    prog = subprocess.Popen([exe, "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = prog.stdout.readline().split()
        check(line and line[0] == b"READY", "the program did not start: %r" % line)
        pid = int(line[1])
        p = _run_bytes([COROBPF, "ps", "-p", str(pid), "-d", "0.5"])
        eq(p.returncode, 0, "corobpf ps exit code (%r)" % p.stderr)
        out = _check_terminal_safe(p.stdout, "corobpf ps's output")
        _check_terminal_safe(p.stderr, "corobpf ps's stderr")
        # The comm, as the attach read it: escaped here, or made safe before ('?').
        check("process %d (hn\\x1b[2Jx)" % pid in out or "process %d (hn?[2Jx)" % pid in out,
              "no process header:\n" + out)
        for shown in SHOWN:
            check(shown in out, "%r not in corobpf ps:\n%s" % (shown, out))
    finally:
        prog.kill()
        prog.wait()
