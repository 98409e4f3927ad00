#!/bin/sh
# The README's first command: install what is missing, build, trace the demo (tools/demo.sh).
set -e
cd "$(dirname "$0")/.."
tools/deps.sh
# Under sudo, build as the user who ran it, so that build/ stays theirs (a root-owned build/
# in one's own checkout would need sudo to clean); root only traces, in tools/demo.sh. A
# checkout that user cannot write (cloned as root) is built as root.
as_user=
if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] &&
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups test -w . 2>/dev/null; then
	as_user="setpriv --reuid=$SUDO_UID --regid=$SUDO_GID --init-groups"
fi
echo "corobpf: building ./corobpf and the demo (a few minutes the first time)"
# The build's lines go to a log shown only if it fails: what a new user reads is the trace.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! $as_user make -s -j"$(nproc)" >"$log" 2>&1; then
	tail -n 40 "$log" >&2
	echo "corobpf: the build failed (its last lines are above)" >&2
	# find without -L: the names themselves, never what a link in them points to.
	if [ -n "$as_user" ] &&
		[ -n "$(find build out ! -user "$SUDO_UID" -print -quit 2>/dev/null)" ]; then
		echo "corobpf: build/ or out/ holds files root made (a make run as root, or an" \
			"older quickstart), which ${SUDO_USER:-uid $SUDO_UID} cannot replace; give" \
			"them back, then run this again:" >&2
		echo "  sudo chown -R --no-dereference $SUDO_UID:$SUDO_GID build out" >&2
	fi
	exit 1
fi
tools/demo.sh
