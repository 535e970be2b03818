#!/usr/bin/env bash
# End to end: two controllers on one PostgreSQL run the background duties (lease reaping,
# switch expiry, change points, schedules) on exactly one of them at a time.
#   1. both start: one takes the duty lease, the other stands by;
#   2. the holder is killed with SIGKILL: the other takes over once the lease lapses
#      (15 s lease, renewed every second; goal: within 30 s);
#   3. the CLI, given both addresses with the dead one first, answers through the live one;
#   4. the killed one comes back and stands by; the holder stops cleanly (SIGTERM) and
#      releases the lease: the other takes over on its next pass.
# Real PostgreSQL and controllers; no agent. Usage: duty_lease_test.sh CONTROLLER_DIR AGENT_DIR
# WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" duties "$@"

declare -A PID
cleanup() {
  for c in "${!PID[@]}"; do fl_stop_pid "${PID[$c]}"; done
  "$FL_ROOT/scripts/pg-throwaway.sh" stop "$FL_STATE/pg" >/dev/null 2>&1 || true
  rm -rf "$FL_STATE"
}
trap cleanup EXIT

start() {  # start controller $1, logging to $FL_STATE/$1.log
  local c=$1
  rm -f "$FL_STATE/$c.ports"
  "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --port-file "$FL_STATE/$c.ports" >>"$FL_STATE/$c.log" 2>&1 &
  PID[$c]=$!
  fl_wait_alive "controller $c to listen" "${PID[$c]}" test -s "$FL_STATE/$c.ports" ||
    fail "controller $c did not start"
}
# Lines of event $2 in controller $1's log.
events() { grep -c "event=$2 " "$FL_STATE/$1.log" || true; }
has_more() { [ "$(events "$1" "$2")" -gt "$3" ]; }
other() { [ "$1" = a ] && echo b || echo a; }

fl_start_postgres
start a
start b
fl_wait_for "one controller to take the duties" \
  bash -c "grep -q 'event=duties_taken ' '$FL_STATE/a.log' '$FL_STATE/b.log'" ||
  fail "no controller took the duty lease"
if has_more a duties_taken 0; then holder=a; else holder=b; fi
standby=$(other "$holder")
fl_wait_for "controller $standby to stand by" has_more "$standby" duties_standby 0 ||
  fail "controller $standby neither took the lease nor stood by"
[ "$(events "$standby" duties_taken)" = 0 ] || fail "both controllers took the duties"
echo "ok: controller $holder holds the duties, $standby stands by"

# 2. SIGKILL: no release; the lease must lapse.
taken_before=$(events "$standby" duties_taken)
kill -KILL "${PID[$holder]}"
wait "${PID[$holder]}" 2>/dev/null || true
unset "PID[$holder]"
killed=$EPOCHREALTIME
FL_WAIT_SECONDS=45 fl_wait_for "controller $standby to take over" \
  has_more "$standby" duties_taken "$taken_before" || fail "controller $standby never took over"
took=$(awk -v a="$killed" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
awk -v t="$took" 'BEGIN { exit !(t <= 30) }' || fail "takeover after SIGKILL took $took s (goal 30 s)"
echo "ok: holder killed with SIGKILL; controller $standby took over after $took s"

# 3. Failover in the client: both addresses, the dead one first.
dead=$(sed -n 's/^grpc=//p' "$FL_STATE/$holder.ports")
live=$(sed -n 's/^grpc=//p' "$FL_STATE/$standby.ports")
fl_user_token
"$FL_BIN_CLI" --controller "127.0.0.1:$dead,127.0.0.1:$live" jobs >"$FL_STATE/cli.out" 2>&1 ||
  fail "the CLI did not fail over to the live controller: $(cat "$FL_STATE/cli.out")"
if "$FL_BIN_CLI" --controller "127.0.0.1:$dead,controller.invalid:1" jobs >"$FL_STATE/cli.out" 2>&1; then
  fail "a list with a host name was accepted"
fi
grep -q "controller.invalid:1" "$FL_STATE/cli.out" || fail "the CLI's error does not name the entry"
echo "ok: the CLI given the dead controller first answered through the live one"

# 4. The killed controller returns and stands by; the holder stops cleanly and releases.
start "$holder"
FL_WAIT_SECONDS=30 fl_wait_for "controller $holder to stand by" \
  has_more "$holder" duties_standby 0 || fail "the returning controller did not stand by"
taken_before=$(events "$holder" duties_taken)
[ "$taken_before" = 1 ] || fail "the returning controller took the duties from a live holder"
fl_stop_pid "${PID[$standby]}"
unset "PID[$standby]"
grep -q "event=duties_released " "$FL_STATE/$standby.log" ||
  fail "controller $standby did not release the lease when it stopped"
stopped=$EPOCHREALTIME
fl_wait_for "controller $holder to take over" has_more "$holder" duties_taken "$taken_before" ||
  fail "controller $holder did not take over a released lease"
took=$(awk -v a="$stopped" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
echo "ok: holder stopped cleanly (lease released); controller $holder took over after $took s"
