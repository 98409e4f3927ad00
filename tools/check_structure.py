#!/usr/bin/env python3
"""The shape of user/ (docs/design.md, "Source layout"), checked so that it cannot drift unseen.

    python3 tools/check_structure.py        # from anywhere in the repository; `make structure`

Each rule prints one line per file that breaks it, naming the file and what to do; the exit
status is 1 if any did. The rules:

  circle   no two modules include each other, directly or through others (a module is a .c and
           its .h; an include names a header of user/ by its file name, as the Makefile's -I
           flags find it)
  header   every module but main.c has its own header, beside it (its contract)
  size     no file of user/ over MAX_LINES lines: split it where its concerns part
  stage    a folder includes only its own headers and those of the stages below it, in the
           order of STAGES; folders of one stage (capture/ and model/) not each other's
  raw      the writers (user/outputs/) see decoded events only: none names a raw record kind
           (CORO_EV_..., CORO_REC_..., struct coro_ev_..., struct coro_rec_...) or includes
           the raw record headers; and no model header includes raw.h
  doc      docs/design.md's "Source layout" table names every .c file in its folder's row
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 1200

# From the bottom up; a folder may include the folders of lower stages only. The capture and the
# model are one stage: neither knows the other (the session wires one into the other).
STAGES = [
    ("user/common", 0),
    ("user/record", 1),
    ("user/elf", 2),
    ("user/capture", 3),
    ("user/model", 3),
    ("user/outputs", 4),
    ("user/session", 5),
    ("user", 6),
]
# Headers outside user/ that anyone may include (the two contracts, the BPF skeleton).
OUTSIDE = {"coro_abi.h", "corobpf.h", "corobpf.skel.h"}
RAW_HEADERS = {"raw.h", "records.h", "coro_abi.h"}
RAW_NAME = re.compile(r"\bCORO_(EV|REC)_[A-Z0-9_]+|\bstruct\s+coro_(ev|rec)_[a-z0-9_]+")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def main():
    files = {}
    for d, _ in STAGES:
        full = os.path.join(ROOT, d)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if name.endswith((".c", ".h")):
                files[os.path.join(d, name)] = open(os.path.join(full, name),
                                                    encoding="utf-8").read()
    by_name = {}
    for path in files:
        by_name.setdefault(os.path.basename(path), []).append(path)
    problems = []

    def say(path, what):
        problems.append("%s: %s" % (path, what))

    for name, paths in sorted(by_name.items()):
        if len(paths) > 1:
            say(paths[1], "its name is also %s's: an include could mean either" % paths[0])

    stage_of = dict(STAGES)

    def module(path):
        return path[:-2]

    deps = {}
    for path, text in sorted(files.items()):
        folder = os.path.dirname(path)
        for inc in INCLUDE.findall(strip_comments(text)):
            inc = os.path.basename(inc)
            if inc in OUTSIDE and not (inc in RAW_HEADERS and folder == "user/outputs"):
                continue
            if folder == "user/outputs" and inc in RAW_HEADERS:
                say(path, "a writer includes %s: writers see decoded events only "
                    "(record/event.h through model.h)" % inc)
                continue
            if inc not in by_name:
                continue  # the system's, or a library's
            target = by_name[inc][0]
            tfolder = os.path.dirname(target)
            if path.startswith("user/model/") and path.endswith(".h") and inc in ("raw.h",
                                                                                 "records.h"):
                say(path, "a model header includes %s: the model's observers would see the "
                    "raw record layouts; include what the API needs (event.h, capture_info.h)"
                    % inc)
            if tfolder != folder and (stage_of[tfolder] > stage_of[folder] or
                                      stage_of[tfolder] == stage_of[folder]):
                say(path, "includes %s, of a stage %s it: %s must not depend on %s" % (
                    target, "above" if stage_of[tfolder] > stage_of[folder] else "beside",
                    folder + "/", tfolder + "/"))
            if module(target) != module(path):
                deps.setdefault(module(path), set()).add(module(target))

    # Circles: a module that reaches itself through the includes of the others.
    def reach(start):
        seen, todo, parent = set(), [start], {start: None}
        while todo:
            m = todo.pop()
            for n in sorted(deps.get(m, ())):
                if n == start:
                    chain = [m]
                    while parent[chain[-1]]:
                        chain.append(parent[chain[-1]])
                    return list(reversed(chain))
                if n not in seen:
                    seen.add(n)
                    parent[n] = m
                    todo.append(n)
        return None

    circles = set()
    for m in sorted(deps):
        chain = reach(m)
        if chain:
            key = frozenset(chain)
            if key not in circles:
                circles.add(key)
                say(chain[0] + ".c", "include circle: %s -> %s: one of them must stop "
                    "including the other (move what both need below them)" % (
                        " -> ".join(os.path.basename(c) for c in chain),
                        os.path.basename(chain[0])))

    for path, text in sorted(files.items()):
        lines = text.count("\n")
        if lines > MAX_LINES:
            say(path, "%d lines, over %d: split it where its concerns part" % (lines, MAX_LINES))
        if path.endswith(".c") and path != "user/main.c" and path[:-2] + ".h" not in files:
            say(path, "no header of its own (%s.h): every module but main.c has one" %
                os.path.basename(path[:-2]))
        if path.startswith("user/outputs/"):
            for n, line in enumerate(strip_comments(text).split("\n"), 1):
                m = RAW_NAME.search(line)
                if m:
                    say("%s:%d" % (path, n), "a writer names the raw record kind %s: switch "
                        "on decoded events (enum event_kind) instead" % m.group(0))
    # The design document's table: a row per folder, `user/x/` in its first cell.
    design = open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8").read()
    rows = {}
    for line in design.split("\n"):
        m = re.match(r"\| `(user/[a-z/]*)` \|", line)
        if m:
            rows[m.group(1).rstrip("/")] = line
    for path in sorted(files):
        folder, name = os.path.split(path)
        if path.endswith(".c") and not re.search(r"\b%s\b" % re.escape(name),
                                                 rows.get(folder, "")):
            say(path, "docs/design.md's \"Source layout\" does not name it in the row of "
                "%s/: say there what it does" % folder)
    for p in problems:
        print(p)
    print("structure: %d files of user/ checked, %d problems" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
