#!/bin/sh
# The README's first command: install what is missing, build, trace the demo.
set -e
cd "$(dirname "$0")/.."
tools/deps.sh
# Under sudo, build as the user who ran it, so that build/ stays theirs (a root-owned build/
# in one's own checkout would need sudo to clean); root only traces. A checkout that user
# cannot write (cloned as root) is built as root.
if [ -n "${SUDO_UID:-}" ] && [ "$SUDO_UID" != 0 ] &&
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups test -w . 2>/dev/null; then
	setpriv --reuid="$SUDO_UID" --regid="$SUDO_GID" --init-groups make -s
else
	make -s
fi
make -s demo
