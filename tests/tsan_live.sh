#!/bin/sh
# tests/tsan_live.sh BIN: live captures through BIN (corobpf built with ThreadSanitizer, `make
# tsan`), each with the reader and the model thread running side by side: a scenario to every
# output and the raw capture, a flood through a queue of 2 MiB (so that records wait in the
# temporary file, and the reader waits too when there is no file), a flood stopped by -d (the
# stopper thread), top's text snapshots, and the flight recorder dumping from the model thread. Any report fails (exit 66). As root; skipped,
# saying so, otherwise.
set -e
bin=$1
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "tsan_live: skipped: live captures need root" >&2
	exit 0
fi
tmp=$(mktemp -d /tmp/corobpf-tsan.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
fail() { echo "tsan_live: $*" >&2; cat "$tmp/err" >&2; exit 1; }
run() {
	what=$1
	shift
	"$bin" "$@" >"$tmp/out" 2>"$tmp/err" || fail "$what: exit $?"
	! grep -q "ThreadSanitizer" "$tmp/err" || fail "$what: a ThreadSanitizer report"
}

cc -O2 -pthread -Iusdt tools/bench/flood.c -o "$tmp/flood"
run "scenario to every output" -o "$tmp/s.jsonl" -o "$tmp/s.pftrace" -o "$tmp/s.db" \
	-o "$tmp/s.csv" --raw "$tmp/s.raw" -- build/tests/scenarios mixed
run "flood through the file" -v --queue-memory 2 --no-sched -o "$tmp/f.jsonl" -- \
	"$tmp/flood" 1 300000
grep -q "in a temporary file" "$tmp/err" || fail "flood through the file: no record waited in the file"
rm -f "$tmp/f.jsonl"
TMPDIR=/nonexistent-corobpf-tsan run "flood with no file" --queue-memory 2 --no-sched \
	-o "$tmp/g.jsonl" -- "$tmp/flood" 1 300000
rm -f "$tmp/g.jsonl"
"$tmp/flood" 1 4000000000000 >/dev/null &
fp=$!
run "a flood stopped by -d (the stopper thread)" -d 1 --no-sched -p "$fp"
kill "$fp"
run "top's snapshots" top --batch -d 2 --interval 0.5 -- build/tests/scenarios mixed
run "flight dumps" --flight 2 --dump-on spawn_storm -o "$tmp/fl.jsonl" -- build/tests/bugs spawn_storm
ls "$tmp"/fl.1.jsonl >/dev/null 2>&1 || fail "flight dumps: no dump written"
echo "tsan_live: 6 live captures, no ThreadSanitizer report"
