#!/bin/sh
# Install what corobpf needs to build and test on Debian 12, if missing. Run as root.
# LuaJIT is OpenResty's (luajit2, libluajit2-5.1-2), the one Debian's nginx Lua module depends
# on: Debian's `luajit` package needs libluajit-5.1-2, which conflicts with it. The tests run
# nginx themselves, on a free loopback port; its service is not needed.
set -e
pkgs="make gcc g++ clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev linux-libc-dev python3 util-linux protobuf-compiler libsqlite3-dev sqlite3 libpq-dev postgresql bpftrace binutils libboost-fiber-dev libboost-dev libpth-dev libclang-rt-14-dev lld ruby3.1 qemu-utils python3-greenlet python3-gevent php8.2-cli libncurses-dev tmux golang-go lua5.4 luajit2 nginx-light libnginx-mod-http-lua"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "corobpf: missing packages:$missing; run this as root (sudo $0)" >&2
		exit 1
	fi
	echo "corobpf: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
