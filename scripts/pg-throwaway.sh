#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests and the local stack.
#   pg-throwaway.sh start DIR   -> initdb into DIR, start on a free port, print the URL
#   pg-throwaway.sh stop DIR    -> stop it (fast) and remove DIR
#   pg-throwaway.sh halt DIR    -> stop it (fast), keep DIR (a database outage)
#   pg-throwaway.sh resume DIR  -> start a halted cluster again on its port
# As root the server runs as the 'postgres' user (initdb refuses root).
set -euo pipefail

cmd=${1:?usage: pg-throwaway.sh start|stop DIR}
dir=${2:?usage: pg-throwaway.sh start|stop DIR}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bindir/initdb" ] || { echo "pg-throwaway: PostgreSQL server binaries not found (run scripts/install-deps.sh)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -U faultline -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    for attempt in 1 2 3 4 5; do
      port=$("$(dirname "$0")/free-port.sh")
      if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
           -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
           start >/dev/null; then
        echo "$port" >"$dir/port"
        as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U faultline faultline
        echo "postgresql://faultline@127.0.0.1:$port/faultline"
        exit 0
      fi
    done
    cat "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  halt)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  resume)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
    ;;
  restart)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 \
      -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" restart >/dev/null
    ;;
  *) echo "usage: pg-throwaway.sh start|stop|halt|resume|restart DIR" >&2; exit 2 ;;
esac
