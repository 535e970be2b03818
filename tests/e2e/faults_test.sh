#!/usr/bin/env bash
# End to end, faults (real PostgreSQL, controller, agents, workloads, network namespaces):
#   A. 20 x SIGKILL of the agent mid-run, at three points in turn: the run just assigned,
#      the workload measuring (its cgroup exists), the result finished but maybe not sent.
#      Every run must end exactly once: a final state, at most one result (of the run's
#      current attempt), nothing spooled or cgrouped left behind.
#   C. PostgreSQL stops mid-study and comes back: calls fail UNAVAILABLE meanwhile, then
#      everything recovers by itself; no job or result lost, none doubled.
#   D. A run OOMs inside its memcg: a clean `failed: oom_killed` result, and the same agent
#      process runs the next job.
#   B. The agent lives in its own network namespace behind a veth pair. A cut shorter than
#      the lease: the finished run's spooled result arrives after the link heals. A cut
#      longer than the lease: the controller gives the run to a new attempt, the old
#      attempt's result is refused when it finally arrives, and the run ends once.
# Usage: faults_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR [PARTS]
#   PARTS: crash (A, C, D), partition (B) or crash,partition (the default). ctest runs them
#   as e2e_faults and e2e_partitions, so a machine without network namespaces reports B
#   skipped and A, C, D passed, each as what it is.
set -euo pipefail

source "$(dirname "$0")/lib.sh" faults "$@"
parts=${5:-crash,partition}
want() { [[ ",$parts," == *",$1,"* ]]; }

NETNS=fl-faults-$$
VETH_HOST=flh$$
VETH_AGENT=fla$$
# What fail() prints before the logs.
e2e_diagnose() {
  sql "SELECT id, job_id, state, attempt, coalesce(failure_reason, '') FROM runs ORDER BY id" >&2 || true
}
cleanup() {
  set +e
  fl_stop_pid "${NETNS_AGENT_PID:-}"
  fl_stop_all
  ip link del "$VETH_HOST" 2>/dev/null
  ip netns del "$NETNS" 2>/dev/null
  rm -rf "$FL_STATE"
}
trap cleanup EXIT
sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }

if [ ! -d /sys/fs/cgroup/memory ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "SKIP: no memory cgroup controller on this machine"; exit 77
fi

# Partitions need network namespaces: asked before anything runs, so a skip is a skip.
if want partition && { ! command -v ip >/dev/null || ! ip netns add "$NETNS" 2>/dev/null; }; then
  echo "SKIP: no network namespaces on this machine: part B (partitions) cannot run; nothing was run"
  exit 77
fi
# Part B's lease is short: 2 s runs + 10 s grace.
export FL_GRPC_HOST=0.0.0.0
export FL_ZRAM_SWAP=256M  # part D's swap-in run needs swap; the agent provisions it per run
export FL_CONTROLLER_ARGS="--lease-grace 10 --requeue-backoff 1"
fl_start_postgres
fl_start_controller
fl_start_agent fault-board

if want crash; then
# ---------------------------------------------------------------- A. 20 x SIGKILL ----
cat >"$FL_STATE/kills.yaml" <<'YAML'
name: kills
benchmark: filemap-thrash
duration: 2s
repetitions: 24
kernels: [vanilla]
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
job=$("$FL_BIN_CLI" submit "$FL_STATE/kills.yaml" 2>/dev/null) || fail "submit"
active_run() { sql "SELECT id FROM runs WHERE job_id = $job AND state IN ('assigned', 'running') LIMIT 1"; }
has_active_run() { [ -n "$(active_run)" ]; }
# The run whose workload is measuring now (its run cgroup exists), if any. The measuring
# kill waits for *a* run to measure, not for the run it saw active earlier: that one may
# finish between two polls on a loaded machine, and its cgroup never comes back.
measuring_run() {
  local d
  for d in /sys/fs/cgroup/memory/faultline/run-* /sys/fs/cgroup/faultline/run-*; do
    [ -d "$d" ] && { echo "${d##*/run-}"; return 0; }
  done
  return 1
}
finished_logged() { grep -q "event=run_finished run=$1 " "$FL_STATE/agent.log"; }
more_hellos() { [ "$(grep -c "event=hello_ok" "$FL_STATE/agent.log" || true)" -gt "$1" ]; }
job_done() { [[ "$(sql "SELECT state FROM jobs WHERE id = $job")" =~ ^(succeeded|failed)$ ]]; }
kills=0
declare -A at_point=([assigned]=0 [measuring]=0 [finished]=0)
for i in $(seq 1 20); do
  # 24 runs absorb 20 kills (each kill touches one run): the job cannot run out first.
  fl_wait_for "a run to be active" has_active_run || fail "no active run before kill $i"
  run=$(active_run)
  case $((i % 3)) in
    1) point="assigned" ;;
    2) point="measuring"
       fl_wait_for "a run to measure" measuring_run || fail "kill $i: no run measured"
       run=$(measuring_run) || run=$(active_run) ;;
    0) point="finished"; fl_wait_for "run $run to finish" finished_logged "$run" || fail "kill $i: run $run never finished" ;;
  esac
  at_point[$point]=$((at_point[$point] + 1))
  kill -KILL "$FL_AGENT_PID"
  wait "$FL_AGENT_PID" 2>/dev/null || true
  kills=$((kills + 1))
  echo "kill $i: run $run (attempt $(sql "SELECT attempt FROM runs WHERE id = $run")), $point"
  # The next agent life must have said hello (releasing what the dead one held) before the
  # next kill point is looked for.
  hellos=$(grep -c "event=hello_ok" "$FL_STATE/agent.log" || true)
  fl_start_agent fault-board >/dev/null 2>&1 || fail "agent did not come back after kill $i"
  fl_wait_for "the new agent's hello" more_hellos "$hellos" || fail "no hello after kill $i"
done
FL_WAIT_SECONDS=300 fl_wait_for "job $job to end" job_done || fail "job $job did not end after the kills"
total=$(sql "SELECT count(*) FROM runs WHERE job_id = $job")
final=$(sql "SELECT count(*) FROM runs WHERE job_id = $job AND state IN ('succeeded', 'failed')")
succeeded=$(sql "SELECT count(*) FROM runs WHERE job_id = $job AND state = 'succeeded'")
lost=$(sql "SELECT count(*) FROM runs WHERE job_id = $job AND state = 'failed'")
results=$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $job")
fenced=$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id
              WHERE r.job_id = $job AND res.attempt_id = r.attempt_id AND r.state = 'succeeded'")
retried=$(sql "SELECT count(*) FROM runs WHERE job_id = $job AND attempt > 1")
[ "$kills" = 20 ] || fail "$kills kills, not 20"
[ "${at_point[assigned]}" = 7 ] && [ "${at_point[measuring]}" = 7 ] && [ "${at_point[finished]}" = 6 ] \
  || fail "kills per point: assigned ${at_point[assigned]}, measuring ${at_point[measuring]}, finished ${at_point[finished]} (want 7, 7, 6)"
[ "$retried" -ge 1 ] || fail "no run was retried after 20 kills"
[ "$final" = "$total" ] || fail "$((total - final)) runs not in a final state"
[ "$results" = "$succeeded" ] || fail "$results results for $succeeded succeeded runs"
[ "$fenced" = "$results" ] || fail "results not of their run's current attempt"
compgen -G "$FL_STATE/agent-state/spool/*.result" >/dev/null && fail "results left in the spool"
leftover=$({ find /sys/fs/cgroup/memory/faultline /sys/fs/cgroup/faultline -maxdepth 1 -name 'run-*' 2>/dev/null || true; } | wc -l)
[ "$leftover" = 0 ] || fail "$leftover run cgroups left"
sql "SELECT 'run ' || id || ': ' || state || ', attempt ' || attempt || ', ' || coalesce(failure_reason, '')
     FROM runs WHERE job_id = $job AND state <> 'succeeded' ORDER BY id"
from_spool=$(grep -c "event=spooled_result_sent" "$FL_STATE/agent.log" || true)
echo "kills: $kills, runs: $total, succeeded: $succeeded (one result each; $from_spool sent from the spool by the next agent life), failed as lost: $lost, retried: $retried, duplicated: 0"
pass "$kills SIGKILLs of the agent (${at_point[assigned]} assigned, ${at_point[measuring]} measuring, ${at_point[finished]} finished; $retried runs retried): every run ended exactly once ($succeeded succeeded, $lost lost after 3 attempts)"

# ------------------------------------------------------- C. PostgreSQL restart ----
cat >"$FL_STATE/pg.yaml" <<'YAML'
name: pg-restart
benchmark: filemap-thrash
duration: 2s
repetitions: 4
kernels: [vanilla]
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
pgjob=$("$FL_BIN_CLI" submit "$FL_STATE/pg.yaml" 2>/dev/null) || fail "submit"
pg_active() { [ "$(sql "SELECT count(*) FROM runs WHERE job_id = $pgjob AND state IN ('assigned', 'running')")" -ge 1 ]; }
fl_wait_for "a run of job $pgjob to start" pg_active || fail "no run started"
"$FL_ROOT/scripts/pg-throwaway.sh" halt "$FL_STATE/pg"
out=$("$FL_BIN_CLI" jobs 2>&1) && fail "the controller answered without its database: $out"
echo "$out" | grep -q "UNAVAILABLE" || fail "expected UNAVAILABLE while PostgreSQL is down, got: $out"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FL_HTTP_PORT/readyz" | grep -q 503 || fail "/readyz not 503"
# Down long enough for the running attempt to finish and fail to report at least once.
fl_wait_for "a report to fail" grep -q "event=report_failed" "$FL_STATE/agent.log" || fail "no report attempt failed"
"$FL_ROOT/scripts/pg-throwaway.sh" resume "$FL_STATE/pg"
pg_job_done() { [ "$(sql "SELECT state FROM jobs WHERE id = $pgjob")" = succeeded ]; }
FL_WAIT_SECONDS=120 fl_wait_for "job $pgjob to finish" pg_job_done || fail "the study did not recover"
[ "$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $pgjob")" = 4 ] \
  || fail "results lost or doubled across the database restart"
"$FL_BIN_CLI" jobs >/dev/null || fail "the controller did not recover"
pass "PostgreSQL down mid-study: UNAVAILABLE (and /readyz 503) meanwhile, then recovered by itself; 4 of 4 results, none doubled"

# --------------------------------------------------------------- D. OOM in a run ----
cat >"$FL_STATE/oom.yaml" <<'YAML'
name: oom
benchmark: swap-in
duration: 2s
repetitions: 1
kernels: [vanilla]
memcg: {memory_max: 64M, swap_max: 0}
params: {region_size: 256M, readers: 1, pageout_threads: 1, fill: nonzero}
YAML
agent_pid=$FL_AGENT_PID
oomjob=$("$FL_BIN_CLI" submit "$FL_STATE/oom.yaml" 2>/dev/null) || fail "submit"
oom_done() { [ "$(sql "SELECT state FROM runs WHERE job_id = $oomjob")" = failed ]; }
FL_WAIT_SECONDS=120 fl_wait_for "the OOM run to end" oom_done || fail "the OOM run did not fail"
[ "$(sql "SELECT failure_reason FROM runs WHERE job_id = $oomjob")" = oom_killed ] \
  || fail "failure reason: $(sql "SELECT failure_reason FROM runs WHERE job_id = $oomjob")"
kill -0 "$agent_pid" || fail "the agent died with its run"
after=$("$FL_BIN_CLI" submit "$FL_STATE/pg.yaml" --wait 2>/dev/null) || fail "the agent did not run the next job"
pass "OOM in the run's memcg: failed: oom_killed; the same agent process (pid $agent_pid) ran job $after next"

fi  # crash

if want partition; then
# ----------------------------------------------------------- B. network partitions ----
fl_stop_pid "$FL_AGENT_PID"
FL_AGENT_PID=
ip link add "$VETH_HOST" type veth peer name "$VETH_AGENT"
ip link set "$VETH_AGENT" netns "$NETNS"
ip addr add 10.213.7.1/30 dev "$VETH_HOST"
ip link set "$VETH_HOST" up
ip netns exec "$NETNS" ip addr add 10.213.7.2/30 dev "$VETH_AGENT"
ip netns exec "$NETNS" ip link set "$VETH_AGENT" up
ip netns exec "$NETNS" ip link set lo up
sed -e "s/^board: .*/board: netns-board/" -e "s|^token_file: .*|token_file: $(fl_agent_token netns-board)|" \
  -e "s|^state_dir: .*|state_dir: $FL_STATE/netns-state|" "$FL_STATE/agent.yaml" >"$FL_STATE/netns-agent.yaml"
# nsenter --net, not `ip netns exec`: the latter remounts /sys, hiding the cgroup mounts.
nsenter --net="/run/netns/$NETNS" "$FL_BIN_AGENT" --controller "10.213.7.1:$FL_GRPC_PORT" \
  --config "$FL_STATE/netns-agent.yaml" --workload-binary "$FL_BIN_WORKLOAD" >>"$FL_STATE/agent-netns.log" 2>&1 &
NETNS_AGENT_PID=$!
fl_wait_for "the namespaced agent" fl_agent_online netns-board || fail "the agent in the namespace did not register"
cat >"$FL_STATE/one.yaml" <<'YAML'
name: partition
benchmark: filemap-thrash
duration: 2s
repetitions: 1
kernels: [vanilla]
boards: [netns-board]
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
run_of() { sql "SELECT id FROM runs WHERE job_id = $1"; }
run_state() { sql "SELECT state FROM runs WHERE job_id = $1"; }
run_active() { [[ "$(run_state "$1")" =~ ^(assigned|running)$ ]]; }
run_state_is() { [ "$(run_state "$1")" = "$2" ]; }
netns_spooled() { compgen -G "$FL_STATE/netns-state/spool/*.result" >/dev/null; }
netns_logged() { grep -q "$1" "$FL_STATE/agent-netns.log"; }

# B1: a cut shorter than the lease (12 s).
short=$("$FL_BIN_CLI" submit "$FL_STATE/one.yaml" 2>/dev/null) || fail "submit"
fl_wait_for "the run to start" run_active "$short" || fail "run did not start"
ip link set "$VETH_HOST" down
fl_wait_for "the result to wait in the spool" netns_spooled || fail "no spooled result during the cut"
ip link set "$VETH_HOST" up
FL_WAIT_SECONDS=60 fl_wait_for "the spooled result to arrive" run_state_is "$short" succeeded \
  || fail "the result did not arrive after the link healed"
[ "$(sql "SELECT attempt FROM runs WHERE job_id = $short")" = 1 ] || fail "short cut: re-run"
pass "cut shorter than the lease: the spooled result arrived after the link healed (attempt 1)"

# B2: a cut longer than the lease: the lease lapses, the old attempt's result is refused.
long=$("$FL_BIN_CLI" submit "$FL_STATE/one.yaml" 2>/dev/null) || fail "submit"
fl_wait_for "the run to start" run_active "$long" || fail "run did not start"
first_attempt=$(sql "SELECT attempt_id FROM runs WHERE job_id = $long")
ip link set "$VETH_HOST" down
fl_wait_for "the result to wait in the spool" netns_spooled || fail "no spooled result during the cut"
FL_WAIT_SECONDS=60 fl_wait_for "the lease to lapse" run_state_is "$long" queued || fail "the lease did not lapse"
ip link set "$VETH_HOST" up
FL_WAIT_SECONDS=90 fl_wait_for "the run to end" run_state_is "$long" succeeded || fail "the run did not end"
fl_wait_for "the old result to be refused" netns_logged "event=result_refused run=$(run_of "$long")" \
  || fail "the stale attempt's result was not refused"
[ "$(sql "SELECT count(*) FROM results WHERE run_id = $(run_of "$long")")" = 1 ] || fail "stored twice"
[ "$(sql "SELECT attempt FROM runs WHERE job_id = $long")" = 2 ] || fail "expected the second attempt"
[ "$(sql "SELECT count(*) FROM results WHERE run_id = $(run_of "$long") AND attempt_id::text = '$first_attempt'")" = 0 ] \
  || fail "the lapsed attempt's result was stored"
netns_spooled && fail "the refused result stayed in the spool"
pass "cut longer than the lease: the old attempt's result was refused, attempt 2 stored once"
fi  # partition
echo "PASS: faults e2e ($parts)"
