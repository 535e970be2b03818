#!/usr/bin/env bash
# End to end: an A/B study on a board that must switch kernels between blocks. The board
# is simulated on this machine: its agent reads "the running release" and "the boot id"
# from files (release_file, boot_id_file), and its kernels use the `command` boot method
# with a boot script that does what a lab's power/boot script makes a real board do: the
# agent goes away (SIGTERM, as at shutdown), the board comes back with another release and
# a new boot id, and a new agent process starts. The workloads are real (memcg, this
# machine's kernel). A second boot script run "falls back" to the default kernel, as
# grub-reboot does after a bad boot: the board must end up needs-check and run nothing.
# Usage: kernel_switch_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" switch "$@"
E2E_LOG_LINES=60

board_dir=$FL_STATE/board  # the simulated board's identity and the agent's on-disk state
mkdir -p "$board_dir/state" "$FL_STATE/work"

agent_pid() { cat "$board_dir/agent.pid" 2>/dev/null || true; }
# What fail() prints before the logs.
e2e_diagnose() {
  sql "SELECT id, job_id, kernel, state, coalesce(board, ''), coalesce(failure_reason, '') FROM runs ORDER BY id" >&2 || true
  sql "SELECT name, health, health_reason, kernel_switches FROM boards" >&2 || true
  cat "$board_dir/boots.log" >&2 2>/dev/null || true
}
cleanup() {
  set +e
  e2e_stop_sim_board "$board_dir"
  fl_stop_all
  rm -rf "$FL_STATE"
}
trap cleanup EXIT

sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }
job_state_is() { [ "$(sql "SELECT state FROM jobs WHERE id = $1")" = "$2" ]; }
board_health_is() { [ "$(sql "SELECT health FROM boards WHERE name = 'sim-board'")" = "$1" ]; }
agent_restarted() { local pid; pid=$(agent_pid); [ -n "$pid" ] && [ "$pid" != "$1" ] && kill -0 "$pid"; }

if [ ! -d /sys/fs/cgroup/memory ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "SKIP: no memory cgroup controller on this machine"; exit 77
fi

fl_start_postgres
fl_start_controller

echo 6.1.0-sim-vanilla >"$board_dir/release"
cat /proc/sys/kernel/random/uuid >"$board_dir/boot_id"

# Starts the board's agent in the background (the board's init system, so to speak).
cat >"$board_dir/start-agent.sh" <<SH
#!/usr/bin/env bash
[ ! -e "$board_dir/halted" ] || exit 0  # the test is over (e2e_stop_sim_board)
"$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" --config "$board_dir/agent.yaml" \
  --workload-binary "$FL_BIN_WORKLOAD" >>"$FL_STATE/agent.log" 2>&1 </dev/null &
echo \$! >"$board_dir/agent.pid"
SH
# The `command` boot method's script: the agent's environment says which kernel to boot.
# It returns at once and "reboots" the board in the background: stop the agent (by its
# pid, as shutdown would), switch the identity files, start a new agent.
cat >"$board_dir/boot.sh" <<SH
#!/usr/bin/env bash
set -eu
release=\$FAULTLINE_KERNEL_RELEASE
# The "broken" kernel never comes up: the board falls back to the default one.
[ "\$FAULTLINE_KERNEL_LABEL" != broken ] || release=6.1.0-sim-vanilla
echo "\$FAULTLINE_KERNEL_LABEL \$FAULTLINE_BOARD \$FAULTLINE_AGENT_PID" >>"$board_dir/boots.log"
setsid bash -c '
  kill -TERM "\$0"
  while kill -0 "\$0" 2>/dev/null; do sleep 0.1; done
  echo "\$1" >"$board_dir/release"
  cat /proc/sys/kernel/random/uuid >"$board_dir/boot_id"
  exec "$board_dir/start-agent.sh"' "\$FAULTLINE_AGENT_PID" "\$release" </dev/null >/dev/null 2>&1 &
SH
chmod +x "$board_dir/start-agent.sh" "$board_dir/boot.sh"
cat >"$board_dir/agent.yaml" <<YAML
board: sim-board
work_dir: $FL_STATE/work
state_dir: $board_dir/state
release_file: $board_dir/release
boot_id_file: $board_dir/boot_id
token_file: $(fl_agent_token sim-board)
switch_timeout: 60s
kernels:
  - {label: vanilla, release: 6.1.0-sim-vanilla, boot: command, command: [$board_dir/boot.sh]}
  - {label: patched, release: 6.1.0-sim-patched, boot: command, command: [$board_dir/boot.sh]}
  - {label: broken, release: 6.1.0-sim-broken, boot: command, command: [$board_dir/boot.sh]}
  - {label: manual, release: 6.1.0-sim-manual, boot: none}
YAML
"$board_dir/start-agent.sh"
fl_wait_for "the simulated board to register" fl_agent_online sim-board || fail "agent did not register"
[ "$(sql "SELECT bootable_kernel_labels::text FROM boards WHERE name = 'sim-board'")" = '["vanilla", "patched", "broken"]' ] \
  || fail "bootable kernels: $(sql "SELECT bootable_kernel_labels FROM boards")"
pass "the board registers running vanilla and able to boot vanilla, patched, broken"

# A/B with blocks of one repetition: vanilla, patched, vanilla, patched -> 3 switches.
cat >"$FL_STATE/ab.yaml" <<'YAML'
name: switch-ab
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
kernels: [vanilla, patched]
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
YAML
job=$("$FL_BIN_CLI" submit "$FL_STATE/ab.yaml")
[ -n "$job" ] || fail "submit printed no job id"
FL_WAIT_SECONDS=180 fl_wait_for "job $job to finish" job_state_is "$job" succeeded || fail "job $job did not succeed"
[ "$(cut -d' ' -f1 "$board_dir/boots.log" | paste -sd' ')" = "patched vanilla patched" ] \
  || fail "boots: $(cat "$board_dir/boots.log")"
[ "$(sql "SELECT kernel_switches FROM boards WHERE name = 'sim-board'")" = 3 ] || fail "switch count"
board_health_is ok || fail "board health after verified switches"
pass "A/B study ran in kernel blocks with 3 verified switches (boot script restarted the agent each time)"

# Every result was measured on the kernel its run asked for, in the planned order.
order=$(sql "SELECT string_agg(r.kernel, ' ' ORDER BY res.created_at) FROM runs r JOIN results res ON res.run_id = r.id WHERE r.job_id = $job")
[ "$order" = "vanilla patched vanilla patched" ] || fail "run order: $order"
mismatched=$(sql "SELECT count(*) FROM runs r JOIN results res ON res.run_id = r.id
                  WHERE r.job_id = $job AND (res.environment->>'kernel.release') <> ('6.1.0-sim-' || r.kernel)")
[ "$mismatched" = 0 ] || fail "$mismatched results measured on another kernel than their run's"
[ "$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $job")" = 4 ] \
  || fail "each run stored once"
"$FL_BIN_CLI" report "$job" >"$FL_STATE/report.txt" || fail "report"
grep -q "patched" "$FL_STATE/report.txt" || fail "report lacks the patched column: $(cat "$FL_STATE/report.txt")"
pass "4 results, each on its run's kernel (release recorded), order vanilla patched vanilla patched"

# A kernel that does not come up: the board comes back on vanilla -> needs-check, no runs.
cat >"$FL_STATE/broken.yaml" <<'YAML'
name: switch-broken
benchmark: filemap-thrash
duration: 1s
repetitions: 1
kernels: [broken]
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
YAML
before=$(agent_pid)
broken=$("$FL_BIN_CLI" submit "$FL_STATE/broken.yaml") || fail "submit broken"
fl_wait_for "the board to need a check" board_health_is needs-check || fail "no needs-check after a bad boot"
reason=$(sql "SELECT health_reason FROM boards WHERE name = 'sim-board'")
echo "$reason" | grep -q "switch to 'broken' came back running 6.1.0-sim-vanilla, expected 6.1.0-sim-broken" \
  || fail "needs-check reason: $reason"
"$FL_BIN_CLI" agents | grep -q "needs-check: switch to 'broken'" || fail "faultline agents does not show the check"
# Read whole before grep -q: with pipefail, curl's write after grep -q has exited (a body in
# more than one write) fails the pipeline although the line was there.
metrics=$(curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/metrics") || fail "metrics unreadable"
grep -q 'faultline_board_health{arch="[a-z0-9_]*",board="sim-board",health="needs-check"} 1' <<<"$metrics" \
  || fail "metrics do not show needs-check"
[ "$(sql "SELECT state FROM runs WHERE job_id = $broken")" = queued ] || fail "the broken job's run did not wait"
agent_restarted "$before" || fail "the agent did not come back after the bad boot"
pass "a boot that falls back to the default kernel: needs-check (agent, controller, metrics), the run waits"

# An operator cancels the job, checks the board and clears it there; the board is back.
"$FL_BIN_CLI" cancel "$broken" >/dev/null || fail "cancel"
"$FL_BIN_AGENT" --config "$board_dir/agent.yaml" --clear-needs-check >>"$FL_STATE/agent.log" 2>&1 \
  || fail "--clear-needs-check"
fl_wait_for "the board to be healthy again" board_health_is ok || fail "board still needs a check after clearing"
[ "$(wc -l <"$board_dir/boots.log")" = 4 ] || fail "unexpected boots: $(cat "$board_dir/boots.log")"
pass "clearing the check on the board brings it back"
echo "PASS: kernel switch e2e"
