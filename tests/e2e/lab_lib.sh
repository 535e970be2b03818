#!/usr/bin/env bash
# The virtual-lab e2e tests' common stage (sourced by lab_test.sh, lab_kernel_test.sh and
# lab_seed_study_test.sh with the script's arguments): the binaries, lab.sh, the skip checks,
# a state directory, fail() with the lab's diagnostics, pass(), the cleanup (lab down,
# state removed unless FL_LAB_TEST_KEEP=1).
#   source lab_lib.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
#   lab_need TOOL:PACKAGE...   skips (77) naming the package when a tool is missing; also
#                              skips unless root on x86_64 (the x86_64 board runs the host's agent)
#   lab_state PREFIX           FL_LAB_STATE (exported) under /var/tmp, $S=$FL_LAB_STATE/test
#   lab_diagnose               defined by the script: what fail() prints from the database
#   secs START [END]           seconds between two $EPOCHREALTIME stamps
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export FL_BIN_CONTROLLER=$1/faultline-controller FL_BIN_AGENT=$2/faultline-agent
export FL_BIN_WORKLOAD=$3/faultline-workload FL_BIN_CLI=$4/faultline
LAB=$ROOT/deploy/lab/lab.sh
export FL_LAB_ACCEL=tcg
T0=$EPOCHREALTIME
secs() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }'; }

lab_need() {
  local tool
  for tool in "$@"; do
    command -v "${tool%%:*}" >/dev/null || { echo "SKIP: ${tool%%:*} not installed (apt-get install ${tool#*:})"; exit 77; }
  done
  [ "$(id -u)" = 0 ] || { echo "SKIP: the lab runs as root"; exit 77; }
  [ "$(uname -m)" = x86_64 ] || { echo "SKIP: the lab's x86_64 board runs the host-built agent"; exit 77; }
}

lab_state() {
  export FL_LAB_STATE
  FL_LAB_STATE=$(mktemp -d "/var/tmp/faultline-e2e-$1-XXXXXX")  # disks: 2G sparse each
  chmod 755 "$FL_LAB_STATE"
  S=$FL_LAB_STATE/test
  mkdir -p "$S"
  trap lab_cleanup EXIT
}

sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }
lab_diagnose() { :; }
fail() {
  echo "FAIL: $*" >&2
  set +e
  [ -n "${FL_DATABASE_URL:-}" ] && lab_diagnose >&2
  if [ -f "$FL_LAB_STATE/up/builder/agent.log" ]; then
    echo "--- builder (tail)" >&2; tail -n 30 "$FL_LAB_STATE/up/builder/agent.log" >&2
  fi
  for c in "$FL_LAB_STATE"/up/lab-*/console.log; do
    [ -f "$c" ] && { echo "--- $c (tail)" >&2; tail -n 40 "$c" | cut -c1-300 >&2; }
  done
  echo "--- controller.log (tail)" >&2; tail -n 30 "$FL_LAB_STATE/up/stack/controller.log" >&2
  exit 1
}
pass() { echo "ok: $*"; }
lab_cleanup() {
  set +e
  "$LAB" down >/dev/null 2>&1
  if [ "${FL_LAB_TEST_KEEP:-0}" = 1 ]; then echo "state kept in $FL_LAB_STATE"; else rm -rf "$FL_LAB_STATE"; fi
}
