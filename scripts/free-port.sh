#!/usr/bin/env bash
# Prints a TCP port nobody uses, for servers that cannot bind port 0 and report it
# (PostgreSQL, Prometheus, Alertmanager). The port comes from below the kernel's ephemeral
# range (net.ipv4.ip_local_port_range), so no outgoing connection can take it as its local
# port between this pick and the server's bind; only another listener can, and the callers
# retry with another port when their server could not bind.
set -euo pipefail
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral_low=32768
low=10000 high=$((ephemeral_low - 1))
# A board whose ephemeral range starts low: any port, and the callers' retries.
if [ "$high" -le $((low + 1000)) ]; then low=20000 high=60000; fi
for _ in $(seq 1 100); do
  port=$((low + (RANDOM * 32768 + RANDOM) % (high - low + 1)))
  if ! ss -Htan "sport = :$port" 2>/dev/null | grep -q .; then echo "$port"; exit 0; fi
done
echo "free-port: no free port found in $low..$high" >&2
exit 1
