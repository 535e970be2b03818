#!/usr/bin/env bash
# The agent's idle cost (#14): a throwaway PostgreSQL, a controller and one agent with no
# work; after 10 s of settling, the agent's CPU over SECONDS (default 60) and its RSS, split
# into anonymous memory (the agent's own) and clean file pages (shared libraries' text,
# reclaimable and shared with any other process that maps them), with the largest maps.
# Usage: tests/bench/agent-idle.sh [BUILD_DIR] [SECONDS]   (as root; builds are not made)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SECONDS_IDLE=${2:-60}
FL_BIN_CONTROLLER=$BUILD/services/controller/faultline-controller
FL_BIN_AGENT=$BUILD/agent/faultline-agent
FL_BIN_WORKLOAD=$BUILD/agent/workloads/faultline-workload
FL_BIN_CLI=$BUILD/services/cli/faultline
export FL_BIN_CONTROLLER FL_BIN_AGENT FL_BIN_WORKLOAD FL_BIN_CLI
FL_STATE=$(mktemp -d /tmp/faultline-agent-idle-XXXXXX)
chmod 755 "$FL_STATE"
# shellcheck source=../../deploy/local/stack.sh
source "$ROOT/deploy/local/stack.sh"
trap 'fl_stop_all; rm -rf "$FL_STATE"' EXIT
fl_start_postgres
fl_start_controller
fl_start_agent idle-board
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
fl_log "settling 10 s, then measuring ${SECONDS_IDLE} s"
sleep 10
c1=$(cpu_ticks "$FL_AGENT_PID"); t1=$EPOCHREALTIME
sleep "$SECONDS_IDLE"
c2=$(cpu_ticks "$FL_AGENT_PID"); t2=$EPOCHREALTIME
awk -v a="$c1" -v b="$c2" -v t1="$t1" -v t2="$t2" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "agent idle: %.3f%% of one core over %.0f s\n", 100 * (b - a) / hz / (t2 - t1), t2 - t1 }'
awk '/^(VmRSS|VmHWM|Threads):/ { print "agent idle: " $0 }' "/proc/$FL_AGENT_PID/status"
grep -E "^(Pss|Anonymous|Private_Dirty|Shared_Clean|Private_Clean):" "/proc/$FL_AGENT_PID/smaps_rollup" |
  sed 's/^/agent idle: /'
awk '/^[0-9a-f]+-/ { name = ($6 == "" ? "[anonymous]" : $6) }
     /^Rss:/ { rss[name] += $2 }
     END { for (n in rss) if (rss[n] >= 256) printf "agent idle: rss %6d kB %s\n", rss[n], n }' \
  "/proc/$FL_AGENT_PID/smaps" | sort -k4 -rn | head -12
