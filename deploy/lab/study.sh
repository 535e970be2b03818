#!/usr/bin/env bash
# study.sh [SPEC.yaml] [--keep]: an A/B study on one virtual x86_64 board whose agent
# switches kernels with kexec (vanilla <-> patched, both from the board's disk).
# A throwaway PostgreSQL and the controller run on this machine (deploy/local/stack.sh);
# the guest reaches the controller's gRPC port at 10.0.2.2. Default spec: filemap-thrash,
# 1 s runs, 2 repetitions in blocks of 1 (3 kexec switches).
# Env: FL_BIN_CONTROLLER, FL_BIN_AGENT, FL_BIN_WORKLOAD, FL_BIN_CLI (default build/...),
#      FL_LAB_BOARD (lab-x86-01), FL_LAB_TIMEOUT (job timeout, s; 900)
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"
SPEC="" KEEP=0
for a in "$@"; do case $a in --keep) KEEP=1 ;; *) SPEC=$a ;; esac; done
ARCH=x86_64
[ "$(uname -m)" = "$ARCH" ] || lab_die "study.sh runs the host-built agent: x86_64 hosts only"
BIN=${FAULTLINE_BUILD_DIR:-$FL_ROOT/build}
export FL_BIN_CONTROLLER=${FL_BIN_CONTROLLER:-$BIN/services/controller/faultline-controller}
export FL_BIN_AGENT=${FL_BIN_AGENT:-$BIN/agent/faultline-agent}
export FL_BIN_WORKLOAD=${FL_BIN_WORKLOAD:-$BIN/agent/workloads/faultline-workload}
export FL_BIN_CLI=${FL_BIN_CLI:-$BIN/services/cli/faultline}
for b in "$FL_BIN_CONTROLLER" "$FL_BIN_AGENT" "$FL_BIN_WORKLOAD" "$FL_BIN_CLI"; do
  [ -x "$b" ] || lab_die "$b missing (build it first)"
done
BOARD=${FL_LAB_BOARD:-lab-x86-01}
FL_STATE="$FL_LAB_STATE/study"
rm -rf "$FL_STATE"; mkdir -p "$FL_STATE/overlay/etc/faultline"; chmod 755 "$FL_STATE"
# shellcheck source=../local/stack.sh
source "$FL_ROOT/deploy/local/stack.sh"
QEMU_PID=""
stop() {
  set +e
  [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null
  fl_stop_all
}
[ "$KEEP" = 1 ] || trap stop EXIT

fl_start_postgres
fl_start_controller
cp "$(fl_agent_token "$BOARD")" "$FL_STATE/overlay/etc/faultline/agent.token"

"$FL_LAB_DIR/lab.sh" fetch "$ARCH"
"$FL_LAB_DIR/lab.sh" disk "$ARCH" "$FL_STATE/disk.img" --force --size 2G --agent --overlay "$FL_STATE/overlay"
VANILLA_REL=$(lab_kernel "$ARCH" vanilla; echo "$LAB_KREL")
debugfs -R "dump boot/initrd.img-$VANILLA_REL $FL_STATE/initrd-vanilla" "$FL_STATE/disk.img" 2>/dev/null
QEMU_PID=$("$FL_LAB_DIR/boot.sh" "$ARCH" vanilla --disk "$FL_STATE/disk.img" --initrd "$FL_STATE/initrd-vanilla" \
  --append "faultline.board=$BOARD faultline.controller=10.0.2.2:$FL_GRPC_PORT" --log "$FL_STATE/console.log")
lab_log "board $BOARD: qemu pid $QEMU_PID, console $FL_STATE/console.log"
FL_WAIT_SECONDS=180 fl_wait_for "board $BOARD to register" fl_agent_online "$BOARD" ||
  { tail -n 40 "$FL_STATE/console.log" >&2; lab_die "the board did not register"; }
"$FL_BIN_CLI" agents

if [ -z "$SPEC" ]; then
  SPEC=$FL_STATE/ab.yaml
  cat >"$SPEC" <<'YAML'
name: lab-kexec-ab
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
kernels: [vanilla, patched]
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
YAML
fi
T0=$EPOCHREALTIME
job=$("$FL_BIN_CLI" submit "$SPEC")
lab_log "job $job submitted"
timeout "${FL_LAB_TIMEOUT:-900}" "$FL_BIN_CLI" watch "$job" || lab_log "job $job did not succeed (or timed out)"
lab_log "job $job: $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f s", b - a }')"
"$FL_BIN_CLI" jobs
"$FL_BIN_CLI" agents
"$FL_BIN_CLI" report "$job" || true
echo "== kexec switches seen on the console"
grep -E 'FLLAB (systemctl-kexec|init-start)' "$FL_STATE/console.log" || true
