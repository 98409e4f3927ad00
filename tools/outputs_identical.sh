#!/bin/sh
# Refactors change no output: replay every capture in DIR (*.raw, and *.jsonl that are not
# replays) with two builds of corobpf and compare what they write, byte for byte (SQLite by
# its dump). Prints one line per difference and a count; exits 1 if any output differs.
#
#   tools/outputs_identical.sh OLD_COROBPF NEW_COROBPF DIR [REPORT_ARGS...]
#
# Captures to compare: KEEP=1 python3 tests/integration/run.py keeps the suite's work
# directory (its path is printed at the end); build/bench/gen_raw N FILE.raw makes a large
# synthetic one.
set -u
old=$(realpath "$1") new=$(realpath "$2") dir=$(realpath "$3")
shift 3
out=$(mktemp -d /tmp/corobpf-identical-XXXXXX)
trap 'rm -rf "$out"' EXIT
n=0 bad=0
for cap in "$dir"/*.raw "$dir"/*.jsonl; do
	[ -f "$cap" ] || continue
	case "$cap" in *.replay.*) continue ;; esac
	base=$(basename "$cap")
	for who in old new; do
		bin=$old
		[ "$who" = new ] && bin=$new
		mkdir -p "$out/$who"
		# In its own directory, by relative names: messages name the same files.
		(cd "$out/$who" && "$bin" report -q "$cap" "$@" -o "$base.jsonl" -o "$base.pftrace" \
			-o "$base.db" -o "$base.csv" >"$base.stdout" 2>"$base.stderr"
		echo "exit $?" >>"$base.stdout"
		"$bin" report "$cap" "$@" >"$base.report" 2>&1
		if [ -f "$base.db" ]; then
			sqlite3 "$base.db" .dump >"$base.db.dump" 2>&1
			rm -f "$base.db"
		fi)
	done
	for f in "$out/old/$base".*; do
		g="$out/new/${f#"$out/old/"}"
		if ! cmp -s "$f" "$g"; then
			echo "differs: ${f#"$out/old/"}"
			bad=$((bad + 1))
		fi
	done
	n=$((n + 1))
	rm -rf "$out/old" "$out/new"
done
echo "$n captures compared, $bad outputs differ"
[ "$bad" -eq 0 ]
