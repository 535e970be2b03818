# The e2e scripts' common start, sourced first thing by each of them:
#   source "$(dirname "$0")/lib.sh" NAME "$@"
# with ctest's arguments CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR [...]. It sets
# FL_BIN_CONTROLLER, FL_BIN_AGENT, FL_BIN_WORKLOAD and FL_BIN_CLI, makes FL_STATE (a fresh
# /tmp/faultline-e2e-NAME-XXXXXX; the script's cleanup removes it), sources the local
# stack's functions (deploy/local/stack.sh) and defines
#   fail MESSAGE   "FAIL: MESSAGE", then the script's e2e_diagnose (if it defines one), then
#                  the last E2E_LOG_LINES (40) lines of every log in FL_STATE; exit 1
#   pass MESSAGE   "ok: MESSAGE"
# A script that cannot run here says "SKIP: why" and exits 77 (ctest: skipped).
FL_BIN_CONTROLLER=$2/faultline-controller
FL_BIN_AGENT=$3/faultline-agent
FL_BIN_WORKLOAD=$4/faultline-workload
FL_BIN_CLI=$5/faultline
FL_STATE=$(mktemp -d "/tmp/faultline-e2e-$1-XXXXXX")
chmod 755 "$FL_STATE"
source "$(dirname "${BASH_SOURCE[0]}")/../../deploy/local/stack.sh"

fail() {
  echo "FAIL: $*" >&2
  if declare -F e2e_diagnose >/dev/null; then e2e_diagnose >&2 || true; fi
  local f
  for f in "$FL_STATE"/*.log; do
    [ -f "$f" ] || continue
    echo "--- ${f##*/}" >&2
    tail -n "${E2E_LOG_LINES:-40}" "$f" >&2 || true
  done
  exit 1
}
pass() { echo "ok: $*"; }

# e2e_stop_sim_board BOARD_DIR: ends a simulated board (kernel_switch_test.sh,
# kbuild_fixture.sh) for good. Its boot script "reboots" in the background: a restarter
# waits for the old agent to exit, then runs BOARD_DIR/start-agent.sh, which starts a new
# agent and writes BOARD_DIR/agent.pid. A cleanup that only read agent.pid while a reboot
# was in flight left that new agent running after the test. So: BOARD_DIR/halted stops
# start-agent.sh from starting anything, then every restarter and start-agent.sh (their
# command lines name start-agent.sh) is killed and every agent of the board (its
# --config BOARD_DIR/agent.yaml) stopped by pid, until none is left.
e2e_stop_sim_board() {
  local dir=$1 pid left _
  touch "$dir/halted"
  for _ in $(seq 1 50); do
    left=""
    for pid in $(pgrep -f -- "$dir/start-agent\.sh"); do
      kill -KILL "$pid" 2>/dev/null && left=1
    done
    for pid in $(pgrep -f -- "--config $dir/agent\.yaml"); do
      fl_stop_pid "$pid"
      left=1
    done
    [ -n "$left" ] || return 0
  done
  echo "e2e_stop_sim_board: processes of $dir still start after 50 rounds" >&2
  return 1
}
