"""What the docs name exists: every page of docs/ is in README.md's list of them, and every
command README.md, docs/ and the --help texts name is one the program or the Makefile has.

A reader who types `corobpf trace` because docs/top.md said so gets a usage error; one who
looks for docs/stacks.md in the README's list does not find it. Both are checked here, against
the tree and the program as they are.
"""
import glob

from harness import *  # noqa: F401,F403

DOCS = os.path.join(ROOT, "docs")

# Words that follow "corobpf " in the --help texts' prose, where it names the program, not a
# command ("corobpf follows the context-switch functions"). A command named there must be one
# `corobpf CMD --help` answers.
HELP_PROSE = {"probes", "follows", "finishes", "exits", "then", "before"}


def doc_text(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def doc_names():
    return ["README.md"] + sorted("docs/" + os.path.basename(p)
                                  for p in glob.glob(os.path.join(DOCS, "*.md")))


def code_of(text):
    """The code a doc shows: its backticked spans, and the lines of its code blocks (indented
    or fenced)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if fence or line.startswith("    ") and not line.lstrip().startswith("- "):
            out.append(line.strip())
        else:
            out += re.findall(r"`([^`\n]+)`", line)
    return out


@test
def docs_readme_lists_every_doc():
    """README.md's Layout lists every page of docs/, and no page that is not there."""
    text = doc_text("README.md")
    m = re.search(r"^    docs/ +(.*?)(?=\n    \S|\n\n|\Z)", text, re.S | re.M)
    check(m, "README.md's Layout has no docs/ entry")
    listed = re.findall(r"([A-Za-z0-9_-]+\.md)", m.group(1))
    have = sorted(os.path.basename(p) for p in glob.glob(os.path.join(DOCS, "*.md")))
    eq(sorted(set(have) - set(listed)), [], "pages of docs/ README.md's Layout does not list")
    eq(sorted(set(listed) - set(have)), [], "pages README.md's Layout lists that docs/ lacks")
    eq(len(listed), len(set(listed)), "pages README.md's Layout lists twice")


def command_help_first_line(cmd):
    p = corobpf([cmd, "--help"])
    return p.returncode, (p.stdout.splitlines() or [""])[0]


def make_targets():
    with open(os.path.join(ROOT, "Makefile")) as f:
        return set(re.findall(r"^([a-z][a-z0-9_-]*)\s*:(?!=)", f.read(), re.M))


@test
def docs_name_only_commands_that_exist():
    """Every `corobpf CMD` README.md and docs/ show (in code) and the --help texts name is a
    command: `corobpf CMD --help` prints CMD's own usage. Every `make TARGET` they show is a
    target of the Makefile, and every script they run from tools/ or tests/ is in the tree."""
    named = {}  # corobpf command -> where it is named
    bad = []
    targets = make_targets()
    for name in doc_names():
        for code in code_of(doc_text(name)):
            for m in re.finditer(r"(?:^|\bsudo |\$ |&& |\| )(?:\./)?corobpf ([a-z][a-z-]*)"
                                 r"\b(?![:'-])", code):
                named.setdefault(m.group(1), []).append("%s: %r" % (name, code[:100]))
            for m in re.finditer(r"(?:^|\bsudo |\$ |&& |`)(?:[A-Z_]+=\S+ )*make "
                                 r"([a-z][a-z0-9_-]*)\b", code):
                if m.group(1) not in targets:
                    bad.append("%s: %r: the Makefile has no target %s" % (name, code[:100],
                                                                           m.group(1)))
            for m in re.finditer(r"(?:^|\bsudo |\bsh |\bpython3 )((?:tools|tests)/[\w./-]+)",
                                 code):
                path = m.group(1).rstrip(".")
                if not os.path.exists(os.path.join(ROOT, path)):
                    bad.append("%s: %r: %s is not in the tree" % (name, code[:100], path))
    helps = {}
    for cmd in ("", "report", "ps", "top"):
        p = corobpf(([cmd] if cmd else []) + ["--help"])
        eq(p.returncode, 0, "corobpf %s --help exit code" % cmd)
        helps[cmd] = " ".join(p.stdout.split())
    p = corobpf(["--switch", "help"])
    helps["--switch help"] = " ".join((p.stdout + p.stderr).split())
    for cmd, text in helps.items():
        for m in re.finditer(r"\bcorobpf ([a-z][a-z-]*)\b(?!')", text):
            if m.group(1) not in HELP_PROSE:
                named.setdefault(m.group(1), []).append("corobpf %s --help: %r" % (
                    cmd, text[max(0, m.start() - 40):m.end() + 40]))
    check(len(named) >= 3, "the docs name only these commands: %s" % sorted(named))
    for word, where in sorted(named.items()):
        code, first = command_help_first_line(word)
        if code != 0 or not first.startswith("Usage: corobpf %s " % word):
            bad += ["%s names `corobpf %s`, which is no command (corobpf %s --help exits %d, "
                    "%r)" % (w, word, word, code, first) for w in where]
    eq(bad, [], "commands the docs name that do not exist")
