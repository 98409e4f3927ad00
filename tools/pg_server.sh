#!/bin/sh
# A throwaway PostgreSQL server for the tests and the bench (Debian's postgresql package):
#   tools/pg_server.sh start DIR   initdb into DIR/data (unless there), listen on a Unix socket in DIR only
#                                  (no TCP), print the connection URI
#   tools/pg_server.sh start-default DIR
#                                  the same, with PostgreSQL's default settings (fsync on, each commit
#                                  waited for): a local server as a user has it, for the bench
#   tools/pg_server.sh stop DIR    stop it (DIR stays: its caller removes it)
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` system user
# the package creates, and DIR is handed to it.
set -e
cmd=$1
dir=$2
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|start-default|stop DIR" >&2; exit 2; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "$0: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 3; }
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}
case $cmd in
start | start-default)
	mkdir -p "$dir"
	[ "$(id -u)" -eq 0 ] && chown postgres "$dir" && chmod 700 "$dir"
	# A stopped server starts again on its data.
	[ -d "$dir/data" ] ||
		as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync \
			>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
	# A test server: nothing to keep across a crash, so no fsync.
	opts="-c fsync=off -c synchronous_commit=off -c max_wal_size=2GB"
	[ "$cmd" = start-default ] && opts=
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses='' -k $dir $opts" \
		start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
	echo "postgresql://postgres@/postgres?host=$dir"
	;;
stop)
	[ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	;;
*)
	echo "usage: $0 start|start-default|stop DIR" >&2
	exit 2
	;;
esac
