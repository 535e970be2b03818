#!/usr/bin/env bash
# End to end: results survive network loss and agent crashes. The controller goes away
# while a run is measuring; the finished result waits in the agent's spool (on disk).
#   1. network loss: the controller comes back; the agent's retries deliver the result.
#   2. crash while cut off: the agent is killed with SIGKILL holding a spooled result; the
#      controller and a new agent come back; the new agent sends the spooled result before
#      it says hello, and the original attempt's result is stored (no re-run).
# Each run ends exactly once (one result, attempt 1). Real PostgreSQL, controller, agent.
# Usage: spool_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" spool "$@"

spool=$FL_STATE/agent-state/spool
# What fail() prints before the logs.
e2e_diagnose() {
  sql "SELECT id, job_id, state, attempt, coalesce(failure_reason, '') FROM runs ORDER BY id" >&2 || true
  ls -l "$spool" >&2 || true
}
cleanup() { fl_stop_all; rm -rf "$FL_STATE"; }
trap cleanup EXIT

sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }
run_state_is() { [ "$(sql "SELECT state FROM runs WHERE job_id = $1")" = "$2" ]; }
run_active() { [[ "$(sql "SELECT state FROM runs WHERE job_id = $1")" =~ ^(assigned|running)$ ]]; }
spooled() { compgen -G "$spool/*.result" >/dev/null; }
spool_empty() { ! spooled; }

if [ ! -d /sys/fs/cgroup/memory ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "SKIP: no memory cgroup controller on this machine"; exit 77
fi

fl_start_postgres
fl_start_controller
fl_start_agent spool-board

cat >"$FL_STATE/job.yaml" <<'YAML'
name: spool
benchmark: filemap-thrash
duration: 3s
repetitions: 1
kernels: [vanilla]
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML

# --- 1. network loss ------------------------------------------------------------------
job=$("$FL_BIN_CLI" submit "$FL_STATE/job.yaml" 2>/dev/null) || fail "submit"
fl_wait_for "run of job $job to start" run_active "$job" || fail "run did not start"
fl_stop_pid "$FL_CONTROLLER_PID"
fl_wait_for "the result to be spooled" spooled || fail "no spooled result while the controller is away"
pass "the controller went away mid-run; the finished result is in the spool"
fl_start_controller
FL_WAIT_SECONDS=90 fl_wait_for "job $job to succeed" run_state_is "$job" succeeded || fail "result not delivered"
fl_wait_for "the spool to drain" spool_empty || fail "the delivered result stayed in the spool"
[ "$(sql "SELECT count(*) || '/' || max(r.attempt) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $job")" = 1/1 ] \
  || fail "expected one result of attempt 1"
pass "network loss: the agent's retries delivered the result once (attempt 1), spool drained"

# --- 2. crash while cut off ---------------------------------------------------------------
job=$("$FL_BIN_CLI" submit "$FL_STATE/job.yaml" 2>/dev/null) || fail "submit"
fl_wait_for "run of job $job to start" run_active "$job" || fail "run did not start"
fl_stop_pid "$FL_CONTROLLER_PID"
fl_wait_for "the result to be spooled" spooled || fail "no spooled result"
kill -KILL "$FL_AGENT_PID"
wait "$FL_AGENT_PID" 2>/dev/null || true
spooled || fail "the spooled result did not survive SIGKILL"
pass "agent killed with SIGKILL while holding a spooled result"
fl_start_controller
fl_start_agent spool-board
FL_WAIT_SECONDS=60 fl_wait_for "job $job to succeed" run_state_is "$job" succeeded || fail "spooled result not delivered"
spool_empty || fail "spool not drained"
grep -q "event=spooled_result_sent" "$FL_STATE/agent.log" || fail "the new agent did not send from its spool"
[ "$(sql "SELECT count(*) || '/' || max(r.attempt) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $job")" = 1/1 ] \
  || fail "expected one result of attempt 1 (the crashed agent's), not a re-run"
[ "$(sql "SELECT count(*) FROM results")" = 2 ] || fail "results stored more than once"
pass "crash: the next agent sent the spooled result before hello; stored once, attempt 1, no re-run"
echo "PASS: spool e2e"
