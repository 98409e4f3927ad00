#!/bin/sh
# tests/fuzz/replay_asan.sh BIN: replay captures of every kind through BIN (corobpf built with
# AddressSanitizer and UBSan, `make asan`) into every output, read the JSONL back, and
# replay damaged copies, which must fail with exit 8 and a message, never a sanitizer
# report. Live captures (as root) come from the normal ./corobpf.
set -e
bin=$1
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/corobpf-asan.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "replay_asan: $*" >&2; exit 1; }

build/bench/gen_raw 3000 "$tmp/small.raw" 30 2 >/dev/null
build/bench/gen_raw 200000 "$tmp/large.raw" 2000 4 >/dev/null
if [ "$(id -u)" = 0 ]; then
	./corobpf -q --raw "$tmp/probes.raw" -- build/tests/scenarios mixed >/dev/null 2>&1 ||
		fail "live capture (probes) failed"
	./corobpf -q --raw "$tmp/ucontext.raw" -- build/tests/uctx threads 2 3 2 >/dev/null 2>&1 ||
		fail "live capture (ucontext) failed"
	./corobpf -q --raw "$tmp/fibers.raw" -- build/tests/fibers 3 3 5 >/dev/null 2>&1 ||
		fail "live capture (Boost.Fiber) failed"
	./corobpf -q --raw "$tmp/bugs.raw" -- build/tests/bugs spawn_storm >/dev/null 2>&1 ||
		fail "live capture (bugs) failed"
fi
n=0
for r in "$tmp"/*.raw; do
	b=${r%.raw}
	"$bin" report -q "$r" -o "$b.jsonl" -o "$b.pftrace" -o "$b.db" -o "$b.csv" >/dev/null 2>"$b.err" ||
		{ cat "$b.err"; fail "report $(basename "$r") failed"; }
	"$bin" report "$r" --json >/dev/null 2>"$b.err" || { cat "$b.err"; fail "report --json failed"; }
	"$bin" report -q "$b.jsonl" -o "$b.back.jsonl" >/dev/null 2>"$b.err" ||
		{ cat "$b.err"; fail "reading $(basename "$b").jsonl back failed"; }
	size=$(stat -c %s "$r")
	# Cut short, and one byte flipped in the middle: exit 8, said clearly, no sanitizer report.
	for cut in 100 $((size / 3)) $((size - 5)); do
		head -c "$cut" "$r" >"$b.cut"
		set +e
		"$bin" report -q "$b.cut" -o "$b.cut.jsonl" --force >/dev/null 2>"$b.err"
		rc=$?
		set -e
		[ $rc = 8 ] || { cat "$b.err"; fail "$(basename "$r") cut at $cut: exit $rc, want 8"; }
	done
	cp "$r" "$b.flip"
	printf '\377' | dd of="$b.flip" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
	set +e
	"$bin" report -q "$b.flip" -o "$b.flip.jsonl" --force >/dev/null 2>"$b.err"
	rc=$?
	set -e
	[ $rc = 8 ] || { cat "$b.err"; fail "$(basename "$r") with a flipped byte: exit $rc, want 8"; }
	n=$((n + 1))
done
echo "replay_asan: $n captures replayed into every output, read back, and damaged, cleanly"
