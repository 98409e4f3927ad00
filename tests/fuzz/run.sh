#!/bin/sh
# tests/fuzz/run.sh OUT SECONDS: run the libFuzzer targets (built by `make fuzz-build`) for
# SECONDS each, after replaying every regression input in tests/fuzz/regress/. Seeds come
# from synthetic captures (gen_raw), their JSONL, and, as root, live captures of a probed
# and of an unmodified scheduler. A crash, a leak or a hang fails, and the input that
# caused it is left in OUT/fuzz/ (crash-*, leak-*, timeout-*).
set -e
out=$1
secs=$2
cd "$(dirname "$0")/../.."
fz=$out/fuzz
for kind in raw jsonl; do
	mkdir -p "$fz/corpus-$kind"
done
# Seeds: small, so that mutations reach every record kind quickly.
"$out/bench/gen_raw" 40 "$fz/corpus-raw/synthetic-40.raw" 3 2 >/dev/null
"$out/bench/gen_raw" 400 "$fz/corpus-raw/synthetic-400.raw" 20 2 >/dev/null
if [ "$(id -u)" = 0 ]; then
	./corobpf -q --raw "$fz/corpus-raw/probes.raw" --force -- "$out/tests/scenarios" mixed \
		>/dev/null 2>&1 || true
	./corobpf -q --raw "$fz/corpus-raw/ucontext.raw" --force -- "$out/tests/uctx" rr 3 2 \
		>/dev/null 2>&1 || true
	./corobpf -q --raw "$fz/corpus-raw/fibers.raw" --force -- "$out/tests/fibers" 2 2 3 \
		>/dev/null 2>&1 || true
fi
for r in "$fz"/corpus-raw/*.raw; do
	[ -s "$r" ] || continue
	./corobpf report -q "$r" -o "$fz/corpus-jsonl/$(basename "$r" .raw).jsonl" --force \
		>/dev/null 2>&1 || true
done
opts="-max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1"
for kind in raw jsonl; do
	set -- tests/fuzz/regress/$kind/*
	if [ -e "$1" ]; then
		echo "fuzz_$kind: $# regression inputs"
		"$fz/fuzz_$kind" $opts "$@" >"$fz/regress-$kind.log" 2>&1 ||
			{ cat "$fz/regress-$kind.log"; exit 1; }
	fi
	echo "fuzz_$kind: $secs s"
	"$fz/fuzz_$kind" $opts -max_total_time="$secs" -artifact_prefix="$fz/" \
		"$fz/corpus-$kind" >"$fz/fuzz-$kind.log" 2>&1 ||
		{ tail -60 "$fz/fuzz-$kind.log"; exit 1; }
	grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$fz/fuzz-$kind.log" |
		tr '\n' ' '
	echo
done
