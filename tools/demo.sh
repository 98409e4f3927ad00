#!/bin/sh
# Trace the bundled demo scheduler (build/demo: an M:N "server" with request
# handlers, a DB worker pool, channels, sleeps, spans, failures, one
# cancellation) from its first instruction into out/demo.*, and say how to open each file.
set -e
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "corobpf: tracing needs root: sudo $0" >&2
	exit 3
fi
top=$(pwd -P)
# Under sudo, out/ is made by the user who ran it, and corobpf hands them each trace it writes
# there (SUDO_UID). Root writes into out/ only once inside it, and only if that directory is
# theirs: a name out/ they swapped for a link to another directory is not followed there.
as_user=
if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] &&
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups test -w . 2>/dev/null; then
	as_user="setpriv --reuid=$SUDO_UID --regid=$SUDO_GID --init-groups"
fi
$as_user mkdir -p out
cd out
if [ -n "$as_user" ] && [ "$(stat -c %u .)" != "$SUDO_UID" ]; then
	echo "corobpf: out/ ($(pwd -P)) belongs to uid $(stat -c %u .), not to" \
		"${SUDO_USER:-uid $SUDO_UID} who ran sudo: root writes no traces there for them." \
		"Remove it (sudo rm -rf $top/out) or give it back" \
		"(sudo chown -R --no-dereference $SUDO_UID:$SUDO_GID $top/out), then run this again" >&2
	exit 7
fi
"$top/corobpf" --stacks --force -o demo.pftrace -o demo.db -o demo.jsonl --raw demo.raw \
	-- "$top/build/demo" -d "${DEMO_SECS:-3}"
cat <<MSG

The trace of the demo, in out/:
  out/demo.pftrace  open it at https://ui.perfetto.dev ("Open trace file"; docs/perfetto.md)
  out/demo.db       sqlite3 out/demo.db 'select name, switch_ins from coroutines limit 5'
                    (docs/sqlite.md has the queries)
  out/demo.jsonl    one JSON record a line: grep '"type":"coroutine"' out/demo.jsonl | head -3
                    (docs/jsonl.md)
  out/demo.raw      the raw capture: ./corobpf report out/demo.raw prints the whole analysis
                    again, without root (-o writes any output again)
What each line of the summary above means, and what to do: README.md, "Start here".
MSG
