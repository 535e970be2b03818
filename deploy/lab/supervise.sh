#!/usr/bin/env bash
# supervise.sh BOARD_DIR: the host-side power control of one board of `lab.sh up` (started
# by it, one process per board, pid in BOARD_DIR/supervisor.pid). Runs qemu (-no-reboot,
# so a guest reboot, poweroff or panic ends it) and powers the board on again whenever it
# ends, with:
#   - the kernel the guest asked for on its console before it went down
#     ("FLLAB power-cycle LABEL": guest/lab-power, the `command` boot method), else
#   - the board's default kernel: also what a kernel that never comes up falls back to
#     (as a watchdog and grub's default entry would on a real board).
# BOARD_DIR/clear-request (a nonce, written by lab.sh clear-needs-check, which then ends
# qemu): the next power-on passes faultline.clear_needs_check=NONCE (guest/init clears
# the agent's needs-check state on the disk before the agent starts).
# BOARD_DIR/board.env: ARCH BOARD DEFAULT_LABEL APPEND MEM SMP ACCEL. Console (every line
# with the host's time) in BOARD_DIR/console.log, with a "FLLAB-HOST launch ..." line per
# power-on; qemu's pid in BOARD_DIR/qemu.pid. SIGTERM: ends qemu and the supervisor.
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"
DIR=${1:?usage: supervise.sh BOARD_DIR}
# shellcheck source=/dev/null
. "$DIR/board.env"
: "${ARCH:?}" "${BOARD:?}" "${DEFAULT_LABEL:?}" "${APPEND:=}" "${MEM:=1024}" "${SMP:=2}" "${ACCEL:=tcg}"
echo $$ >"$DIR/supervisor.pid"
LOG=$DIR/console.log

host_line() { printf '%s FLLAB-HOST %s\n' "$EPOCHREALTIME" "$*" >>"$LOG"; }
BOOT_PID=""
stop() {
  local q
  q=$(cat "$DIR/qemu.pid" 2>/dev/null || true)
  [ -z "$q" ] || kill "$q" 2>/dev/null || true
  [ -z "$BOOT_PID" ] || wait "$BOOT_PID" 2>/dev/null || true
  host_line "supervisor-stop"
  exit 0
}
trap stop TERM INT

n=0 quick=0 next="" reason=power-on
while :; do
  [ ! -e "$DIR/stop" ] || stop
  label=${next:-$DEFAULT_LABEL}
  if [ ! -f "$DIR/boot/release-$label" ]; then
    host_line "unknown-label $label: booting $DEFAULT_LABEL"
    label=$DEFAULT_LABEL
  fi
  rel=$(cat "$DIR/boot/release-$label")
  extra=""
  if [ -s "$DIR/clear-request" ]; then
    extra=" faultline.clear_needs_check=$(cat "$DIR/clear-request")"
    rm -f "$DIR/clear-request"
  fi
  n=$((n + 1))
  offset=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
  host_line "launch $n label=$label release=$rel reason=$reason$extra"
  t0=$(date +%s)
  rm -f "$DIR/qemu.pid"
  "$FL_LAB_DIR/boot.sh" "$ARCH" "$label" --disk "$DIR/disk.img" --initrd "$DIR/boot/initrd.img-$rel" \
    --append "$APPEND$extra" --mem "$MEM" --smp "$SMP" --accel "$ACCEL" \
    --log "$LOG" --pidfile "$DIR/qemu.pid" --wait &
  BOOT_PID=$!
  rc=0; wait "$BOOT_PID" || rc=$?
  BOOT_PID=""
  rm -f "$DIR/qemu.pid"
  # What the guest asked for last (a power-cycle line not followed by another boot).
  next=$(tail -c +"$((offset + 1))" "$LOG" | awk '
    / FLLAB power-cycle / { for (i = 1; i <= NF; i++) if ($i == "power-cycle") want = $(i + 1) }
    / FLLAB init-start / { want = "" }
    END { print want }')
  if [ -n "$next" ]; then reason=power-cycle
  elif [ -s "$DIR/clear-request" ]; then reason=clear-needs-check
  else reason=fallback; fi
  host_line "exit $n rc=$rc next=${next:-$DEFAULT_LABEL} reason=$reason"
  # A qemu that cannot start at all: do not spin.
  if [ $(( $(date +%s) - t0 )) -lt 5 ]; then quick=$((quick + 1)); else quick=0; fi
  if [ "$quick" -ge 3 ]; then
    host_line "qemu ended quickly $quick times: waiting 30 s"
    for _ in $(seq 1 300); do [ ! -e "$DIR/stop" ] || stop; sleep 0.1; done
  fi
done
