#!/bin/sh
# The README's first command: install what is missing, build, trace the demo.
set -e
cd "$(dirname "$0")/.."
tools/deps.sh
make -s
make -s demo
