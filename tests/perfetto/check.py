#!/usr/bin/env python3
"""Check a Perfetto trace written by corobpf, without the UI.

    python3 tests/perfetto/check.py trace.pftrace [--jsonl trace.jsonl] [--dump]

Decodes the trace with `protoc --decode` against tests/perfetto/corobpf_trace.proto
(fails on any field that file does not know), then walks it and checks the
rules trace processors enforce and the invariants corobpf promises:

- every packet has a nonzero trusted_packet_sequence_id; the sequence's first
  packet clears incremental state and states the clock (BOOTTIME);
- packets are in time order;
- interned ids start at 1, grow by one, are defined once and before use, and
  packets using them say they need incremental state;
- every track is described before its first event, parents before children;
- slices balance per track, end no earlier than they begin, and on coroutine
  tracks a state slice never nests inside another state slice (which is what
  an end written after the next begin at the same timestamp would produce);
- every flow starts once and terminates once, not before it starts;
- counters only on counter tracks; coroutine tracks never merge.

With --jsonl, also compares with the JSONL of the same run: one track per
coroutine, and per coroutine as many thread-track slices as switch-ins.
With --dump, prints the checked trace one packet per line (the golden form).
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "corobpf_trace.proto")
STATE_NAMES = {"new", "runnable", "running", "unknown"}


class Bad(Exception):
    pass


def decode(path):
    with open(path, "rb") as f:
        p = subprocess.run(["protoc", "--decode=corobpf.Trace", "-I", HERE, PROTO],
                           stdin=f, capture_output=True)
    if p.returncode != 0:
        raise Bad("protoc cannot decode %s: %s" % (path, p.stderr.decode().strip()))
    text = p.stdout.decode("utf-8", "replace")
    for i, line in enumerate(text.splitlines()):
        if re.match(r"^\s*\d+\s*[:{]", line):
            raise Bad("field unknown to corobpf_trace.proto at decoded line %d: %s" % (i + 1, line.strip()))
    return text


def _unquote(s):
    # protoc's text format: C escapes, octal for bytes outside printable ASCII.
    raw = s[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def parse(text):
    """protoc text format (one field per line) -> nested dicts; every field is a list."""
    root, stack = {}, []
    cur = root
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if line == "}":
            cur = stack.pop()
        elif line.endswith(" {"):
            child = {}
            cur.setdefault(line[:-2], []).append(child)
            stack.append(cur)
            cur = child
        else:
            key, _, v = line.partition(": ")
            if v.startswith('"'):
                v = _unquote(v)
            elif v.lstrip("-").isdigit():
                v = int(v)
            elif v in ("true", "false"):
                v = v == "true"
            cur.setdefault(key, []).append(v)
    if stack:
        raise Bad("decoded text ends inside a message")
    return root.get("packet", [])


def one(msg, key, default=None):
    v = msg.get(key)
    return v[0] if v else default


class Trace:
    def __init__(self, packets):
        self.packets = packets
        self.tracks = {}        # uuid -> descriptor dict
        self.events = []        # (ts, index, track_uuid, event dict, resolved name)
        self.names, self.da_names = {}, {}
        self.fn_names, self.src_paths, self.frames, self.callstacks = {}, {}, {}, {}


def check(path, jsonl=None):
    pk = parse(decode(path))
    if not pk:
        raise Bad("no packets")
    t = Trace(pk)
    first = pk[0]
    if not (one(first, "sequence_flags", 0) & 1) or not one(first, "first_packet_on_sequence"):
        raise Bad("the first packet does not clear incremental state")
    defaults = one(first, "trace_packet_defaults", {})
    if one(defaults, "timestamp_clock_id") != 6:
        raise Bad("the clock is not stated as BOOTTIME (6)")
    last_ts = 0
    open_slices = {}   # uuid -> stack of (name, ts)
    flows_start, flows_end = {}, {}
    nested_states = []
    for i, p in enumerate(pk):
        where = "packet %d" % i
        if not one(p, "trusted_packet_sequence_id"):
            raise Bad(where + ": no trusted_packet_sequence_id")
        ts = one(p, "timestamp")
        if ts is None:
            raise Bad(where + ": no timestamp")
        if ts < last_ts:
            raise Bad(where + ": time goes back (%d < %d)" % (ts, last_ts))
        last_ts = ts
        if i and one(p, "sequence_flags", 0) & 1:
            # Incremental state cleared mid-sequence: interned ids start again at 1.
            t.names, t.da_names = {}, {}
            t.fn_names, t.src_paths, t.frames, t.callstacks = {}, {}, {}, {}
        interned = one(p, "interned_data")
        if interned:
            for key, table, field in (("event_names", t.names, "name"),
                                      ("debug_annotation_names", t.da_names, "name"),
                                      ("function_names", t.fn_names, "str"),
                                      ("source_paths", t.src_paths, "str")):
                for e in interned.get(key, []):
                    iid, name = one(e, "iid"), one(e, field)
                    if iid != len(table) + 1:
                        raise Bad(where + ": %s iid %s out of sequence (expected %d)" % (key, iid, len(table) + 1))
                    table[iid] = name
            for e in interned.get("frames", []):
                iid = one(e, "iid")
                if iid != len(t.frames) + 1:
                    raise Bad(where + ": frame iid %s out of sequence" % iid)
                fn, src = one(e, "function_name_id"), one(e, "source_path_iid")
                if fn not in t.fn_names or (src is not None and src not in t.src_paths):
                    raise Bad(where + ": frame %d names an undefined string" % iid)
                t.frames[iid] = (t.fn_names[fn], t.src_paths.get(src), one(e, "line_number"))
            for e in interned.get("callstacks", []):
                iid = one(e, "iid")
                if iid != len(t.callstacks) + 1:
                    raise Bad(where + ": callstack iid %s out of sequence" % iid)
                ids = e.get("frame_ids", [])
                if not ids or any(f not in t.frames for f in ids):
                    raise Bad(where + ": callstack %d names an undefined frame" % iid)
                t.callstacks[iid] = [t.frames[f] for f in ids]
        desc = one(p, "track_descriptor")
        if desc:
            uuid = one(desc, "uuid")
            if not uuid:
                raise Bad(where + ": track without uuid")
            parent = one(desc, "parent_uuid")
            if parent and parent not in t.tracks:
                raise Bad(where + ": track %x's parent %x not described yet" % (uuid, parent))
            if uuid in t.tracks:
                old = t.tracks[uuid]
                for k in ("parent_uuid", "sibling_merge_behavior"):
                    if one(old, k) != one(desc, k):
                        raise Bad(where + ": track %x described again with another %s" % (uuid, k))
            t.tracks[uuid] = desc
        ev = one(p, "track_event")
        if not ev:
            continue
        uses_interning = "name_iid" in ev or "callstack_iid" in ev or \
            any("name_iid" in a for a in ev.get("debug_annotations", []))
        if "callstack_iid" in ev:
            if one(ev, "callstack_iid") not in t.callstacks:
                raise Bad(where + ": callstack iid used before it is defined")
            # Root first: [(function, source, line), ...]
            ev["_callstack"] = t.callstacks[one(ev, "callstack_iid")]
        if uses_interning and not (one(p, "sequence_flags", 0) & 2):
            raise Bad(where + ": uses interned data without SEQ_NEEDS_INCREMENTAL_STATE")
        track = one(ev, "track_uuid")
        if track not in t.tracks:
            raise Bad(where + ": event on undescribed track %s" % track)
        d = t.tracks[track]
        name = one(ev, "name")
        if "name_iid" in ev:
            iid = one(ev, "name_iid")
            if iid not in t.names:
                raise Bad(where + ": name iid %d used before it is defined" % iid)
            name = t.names[iid]
        for a in ev.get("debug_annotations", []):
            if "name_iid" in a and one(a, "name_iid") not in t.da_names:
                raise Bad(where + ": annotation name iid used before it is defined")
            # Resolved now: the tables may be cleared and refilled later in the sequence.
            a["_name"] = t.da_names.get(one(a, "name_iid"), one(a, "name"))
        ev["_name"] = name
        typ = one(ev, "type")
        is_counter = "counter" in d
        if (typ == "TYPE_COUNTER") != is_counter:
            raise Bad(where + ": %s on %s track %x" % (typ, "a counter" if is_counter else "a non-counter", track))
        stack = open_slices.setdefault(track, [])
        if typ == "TYPE_SLICE_BEGIN":
            if not name:
                raise Bad(where + ": slice without a name")
            is_state = name in STATE_NAMES or name.startswith("suspended: ")
            if is_state and stack and (stack[-1][0] in STATE_NAMES or stack[-1][0].startswith("suspended: ")):
                nested_states.append((i, name, stack[-1][0]))
            stack.append((name, ts))
        elif typ == "TYPE_SLICE_END":
            if not stack:
                raise Bad(where + ": slice end without a begin on track %x (%s)" % (track, one(d, "name")))
            stack.pop()
        for f in ev.get("flow_ids", []):
            if f in flows_start:
                raise Bad(where + ": flow %d starts twice" % f)
            flows_start[f] = ts
        for f in ev.get("terminating_flow_ids", []):
            if f in flows_end:
                raise Bad(where + ": flow %d terminates twice" % f)
            flows_end[f] = ts
        t.events.append((ts, i, track, ev, name))
    unbalanced = {u: s for u, s in open_slices.items() if s}
    if unbalanced:
        u, s = next(iter(unbalanced.items()))
        raise Bad("%d tracks end with open slices, e.g. %x (%s): %s" % (len(unbalanced), u, one(t.tracks[u], "name"), s))
    if nested_states:
        raise Bad("%d state slices nested in another state slice, first at packet %d (%s inside %s)" % ((len(nested_states),) + nested_states[0]))
    if set(flows_start) != set(flows_end):
        a, b = set(flows_start) - set(flows_end), set(flows_end) - set(flows_start)
        raise Bad("flows not both started and ended: %d only start, %d only end" % (len(a), len(b)))
    for f, ts in flows_end.items():
        if ts < flows_start[f]:
            raise Bad("flow %d ends before it starts" % f)
    for uuid, d in t.tracks.items():
        if uuid & 15 == 6 and one(d, "sibling_merge_behavior") != "SIBLING_MERGE_BEHAVIOR_NONE":
            raise Bad("coroutine track %x may merge with its siblings" % uuid)
    t.flows = len(flows_start)
    if jsonl:
        check_against_jsonl(t, jsonl)
    return t


def track_label(name):
    """A coroutine's track name for its JSONL name: its first 63 bytes (docs/perfetto.md), each
    byte of a character cut there one U+FFFD."""
    raw = name.encode("utf-8")
    if len(raw) <= 63:
        return name
    raw, out, i = raw[:63], [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):
            try:
                out.append(raw[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def check_against_jsonl(t, jsonl):
    with open(jsonl) as f:
        recs = [json.loads(line) for line in f]
    coros = [r for r in recs if r["type"] == "coroutine"]
    coro_tracks = [u for u in t.tracks if u & 15 == 6]
    lanes = [u for u in t.tracks if u & 15 == 7]
    if not lanes and len(coro_tracks) != len(coros):
        raise Bad("%d coroutine tracks for %d coroutines" % (len(coro_tracks), len(coros)))
    # Each switch-in is one slice on the thread it ran on, carrying the coroutine's uid.
    runs = {}
    for ts, i, track, ev, name in t.events:
        if track & 15 != 5 or one(ev, "type") != "TYPE_SLICE_BEGIN":
            continue
        for a in ev.get("debug_annotations", []):
            if a.get("_name") == "uid":
                runs[one(a, "uint_value")] = runs.get(one(a, "uint_value"), 0) + 1
    # After a hole a coroutine is known to run without its switch-in having been seen:
    # a slice, not a switch-in. Each hole adds at most one such slice.
    holes = sum(1 for r in recs if r["type"] == "lost")
    # A Go goroutine the attach's walk found parked is switched in and out on thread 0, which
    # no real thread is: a switch-in, no thread's slice.
    nowhere = {}
    for r in recs:
        if r["type"] == "event" and r["ev"] == "switch" and r["tid"] == 0 and "to_uid" in r:
            nowhere[r["to_uid"]] = nowhere.get(r["to_uid"], 0) + 1
    extra = 0
    for c in coros:
        n = runs.get(c["uid"], 0)
        want = c["switch_ins"] - nowhere.get(c["uid"], 0)
        if n < want or (not holes and n != want):
            raise Bad("coroutine %s (uid %d): %d thread slices, %d switch-ins on a thread in the "
                      "JSONL" % (c["id"], c["uid"], n, want))
        extra += n - want
    if extra > holes:
        raise Bad("%d thread slices without a switch-in, for %d holes" % (extra, holes))
    named = {one(t.tracks[u], "name") for u in coro_tracks}
    for c in coros:
        if c["name"] and not lanes and track_label(c["name"]) not in named:
            raise Bad("no track named %r" % track_label(c["name"]))


def dump(t, out):
    """One line per packet: time relative to the first, what it does, on which track."""
    base = one(t.packets[0], "timestamp")
    names = {}
    esc = lambda n: json.dumps(n, ensure_ascii=False)[1:-1]
    label = lambda u: "%s#%x" % (esc(names.get(u, "?")), u & 15)
    for p in t.packets:
        ts = one(p, "timestamp") - base
        flags = []
        if one(p, "previous_packet_dropped"):
            flags.append("dropped-before")
        if one(p, "first_packet_on_sequence"):
            flags.append("first clock=%s" % one(one(p, "trace_packet_defaults", {}), "timestamp_clock_id"))
        elif one(p, "sequence_flags", 0) & 1:
            flags.append("interning restarts")
        d = one(p, "track_descriptor")
        ev = one(p, "track_event")
        if d:
            names[one(d, "uuid")] = one(d, "name") or one(one(d, "thread", {}) or {}, "thread_name") \
                or one(one(d, "process", {}) or {}, "process_name") or "?"
            kind = "process pid=%s" % one(one(d, "process"), "pid") if "process" in d else \
                "thread tid=%s" % one(one(d, "thread"), "tid") if "thread" in d else \
                "counter" if "counter" in d else "track"
            extra = ["parent=%s" % label(one(d, "parent_uuid"))] if one(d, "parent_uuid") else []
            for k in ("child_ordering", "sibling_order_rank", "sibling_merge_behavior"):
                if one(d, k) is not None:
                    extra.append("%s=%s" % (k, one(d, k)))
            line = "describe %s %s %s" % (kind, label(one(d, "uuid")), " ".join(extra))
        elif ev:
            typ = one(ev, "type").replace("TYPE_", "").lower()
            name = esc(ev.get("_name") or "")
            args = []
            for a in ev.get("debug_annotations", []):
                an = a.get("_name")
                for k in ("int_value", "uint_value", "string_value"):
                    if k in a:
                        v = one(a, k)
                        args.append("%s=%s" % (an, esc(v) if isinstance(v, str) else v))
                if "pointer_value" in a:
                    args.append("%s=0x%x" % (an, one(a, "pointer_value")))
            if "counter_value" in ev:
                args.append("value=%d" % one(ev, "counter_value"))
            for f in ev.get("flow_ids", []):
                args.append("flow->%d" % f)
            for f in ev.get("terminating_flow_ids", []):
                args.append("->flow%d" % f)
            line = "%-7s %-24s %s %s" % (typ, label(one(ev, "track_uuid")), name, " ".join(args))
        else:
            line = "sequence start"
        out.write("%6d %s%s\n" % (ts, line.rstrip(), (" [" + ", ".join(flags) + "]") if flags else ""))


def main():
    args = sys.argv[1:]
    jsonl = None
    want_dump = "--dump" in args
    if want_dump:
        args.remove("--dump")
    if "--jsonl" in args:
        i = args.index("--jsonl")
        jsonl = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    try:
        t = check(args[0], jsonl)
    except Bad as e:
        print("%s: BAD: %s" % (args[0], e))
        return 1
    if want_dump:
        dump(t, sys.stdout)
        return 0
    print("%s: ok: %d packets, %d tracks, %d track events, %d flows" % (args[0], len(t.packets), len(t.tracks), len(t.events), t.flows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
