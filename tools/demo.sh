#!/bin/sh
# Trace the bundled demo scheduler (build/demo: an M:N "server" with request
# handlers, a DB worker pool, channels, sleeps, spans, failures, one
# cancellation) from its first instruction, and say where the output is.
set -e
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "corobpf: tracing needs root: sudo make demo" >&2
	exit 3
fi
# Under sudo, out/ is made by the user who ran it (the traces in it are theirs already); made
# by root and handed over it could be swapped for a link between the two steps.
if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] &&
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups test -w . 2>/dev/null; then
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups mkdir -p out
else
	mkdir -p out
fi
./corobpf --stacks --force -o out/demo.pftrace -o out/demo.jsonl --raw out/demo.raw -- build/demo -d "${DEMO_SECS:-3}"
cat <<MSG

The trace of the demo:
  out/demo.pftrace open it at https://ui.perfetto.dev (docs/perfetto.md)
  out/demo.jsonl   one JSON record per event, process, thread and coroutine (docs/jsonl.md)
  out/demo.raw     the raw capture: corobpf report out/demo.raw replays it, no root needed
Try:
  grep '"type":"coroutine"' out/demo.jsonl | head -3
  ./corobpf report out/demo.raw
MSG
