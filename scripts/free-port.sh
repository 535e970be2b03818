#!/usr/bin/env bash
# Prints a TCP port nobody listens on, for servers that cannot bind port 0 and report it
# (PostgreSQL, Prometheus, Alertmanager). The caller retries if it loses the race.
set -euo pipefail
for _ in $(seq 1 100); do
  port=$(( 20000 + RANDOM % 40000 ))
  if ! ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then echo "$port"; exit 0; fi
done
echo "free-port: no free port found" >&2
exit 1
