#!/usr/bin/env bash
# selftest.sh ARCH [--no-agent] [--timeout SECONDS]: checks a virtual board of ARCH end to
# end, with a fresh disk, and prints the timings.
#   boot 1 (vanilla): network (wget from a host HTTP server on 10.0.2.2), /dev/vda mounted,
#     zram swapon, cgroup v2 memory, kexec present; with the agent (x86_64 host build):
#     faultline-agent --help and a 1 s filemap-thrash on the disk; writes a marker, powers off
#   boot 2 (vanilla): the marker survived; kexec --load patched from the disk, systemctl
#     kexec (the guest's stand-in: kexec -e)
#   after kexec (patched): release and boot id changed; the same checks; kexec back
#   after kexec (vanilla): release back; power off
# Console logs: $FL_LAB_STATE/selftest/ARCH/boot*.log (each line with the host's time).
# FL_LAB_KEXEC_ARGS: extra kexec --load options (e.g. -i: purgatory skips its sha256 check).
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"

ARCH=${1:?usage: selftest.sh ARCH [--no-agent] [--timeout SECONDS]}; shift
AGENT=auto TIMEOUT=${FL_LAB_TIMEOUT:-600}
while [ $# -gt 0 ]; do
  case $1 in
    --no-agent) AGENT=0; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    *) lab_die "selftest: unknown option $1" ;;
  esac
done
lab_need busybox busybox-static   # the host's HTTP server (busybox httpd)
DIR="$FL_LAB_STATE/selftest/$ARCH"
rm -rf "$DIR"; mkdir -p "$DIR/www"

"$FL_LAB_DIR/lab.sh" fetch "$ARCH"
INITRD_ARGS=()
if [ "$AGENT" = auto ]; then
  AGENT=0
  if [ "$ARCH" = "$(uname -m)" ] && [ -x "${FL_BIN_AGENT:-$FL_ROOT/build/agent/faultline-agent}" ] &&
     [ -x "${FL_BIN_WORKLOAD:-$FL_ROOT/build/agent/workloads/faultline-workload}" ]; then AGENT=1; fi
fi
[ "$AGENT" = 1 ] && INITRD_ARGS+=(--agent)
T=$(date +%s.%N)
"$FL_LAB_DIR/lab.sh" disk "$ARCH" "$DIR/disk.img" --force --size 1G "${INITRD_ARGS[@]}"
lab_log "disk with both kernels and initrds: $(awk -v a="$T" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
VANILLA_REL=$(lab_kernel "$ARCH" vanilla; echo "$LAB_KREL")
PATCHED_REL=$(lab_kernel "$ARCH" patched; echo "$LAB_KREL")

# The HTTP server the guest reaches as 10.0.2.2.
PORT=$("$FL_ROOT/scripts/free-port.sh" 2>/dev/null || echo $((20000 + RANDOM % 20000)))
TOKEN=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$TOKEN" >"$DIR/www/ping.txt"
sed -e "s/@PORT@/$PORT/g" -e "s/@TOKEN@/$TOKEN/g" -e "s/@VANILLA@/$VANILLA_REL/g" \
  -e "s/@PATCHED@/$PATCHED_REL/g" -e "s/@KEXEC_ARGS@/${FL_LAB_KEXEC_ARGS:-}/g" "$FL_LAB_DIR/guest/selftest-hook.sh" >"$DIR/www/hook.sh"
busybox httpd -f -p "127.0.0.1:$PORT" -h "$DIR/www" &
HTTPD_PID=$!
QEMU_PID=""
cleanup() {
  [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null || true
  kill "$HTTPD_PID" 2>/dev/null || true
}
trap cleanup EXIT

# Boots vanilla from the disk's initrd (the one kexec uses too) and waits for qemu to end.
run_boot() {
  local n=$1 log="$DIR/boot$1.log" deadline
  QEMU_PID=$("$FL_LAB_DIR/boot.sh" "$ARCH" vanilla --disk "$DIR/disk.img" \
    --initrd "$DIR/initrd-vanilla" --append "faultline.hook=http://10.0.2.2:$PORT/hook.sh" --log "$log")
  lab_log "boot $n: qemu pid $QEMU_PID, console $log"
  deadline=$(( $(date +%s) + TIMEOUT ))
  while kill -0 "$QEMU_PID" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      lab_log "boot $n: timed out after ${TIMEOUT}s"; kill "$QEMU_PID"; QEMU_PID=""; return 1
    fi
    sleep 1
  done
  QEMU_PID=""
  sleep 0.5   # the console pipe drains
}
# The initrd of vanilla, from the disk (what lab.sh disk built).
debugfs -R "dump boot/initrd.img-$VANILLA_REL $DIR/initrd-vanilla" "$DIR/disk.img" 2>/dev/null
[ -s "$DIR/initrd-vanilla" ] || lab_die "boot/initrd.img-$VANILLA_REL not on $DIR/disk.img"

run_boot 1 || true
run_boot 2 || true

# --- report ------------------------------------------------------------------------------
echo "== checks ($ARCH)"
cat "$DIR"/boot*.log | sed -n 's/^[0-9.]* FLLAB check /  /p'
echo "== timings ($ARCH)"
for n in 1 2; do
  log="$DIR/boot$n.log"
  [ -f "$log" ] || continue
  launch=$(cut -d' ' -f1 "$log.launch")
  awk -v launch="$launch" -v n="$n" '
    / FLLAB init-start / { for (i = 3; i <= NF; i++) if ($i ~ /^uptime=|^release=/) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (!k) printf "  boot %s: qemu launch -> /init %.2f s (host), kernel start -> /init %s s (guest uptime), %s\n", n, $1 - launch, v["uptime"], v["release"]
      else printf "  kexec %d: \"kexec -e\" -> new /init %.2f s (host), new kernel start -> /init %s s, now %s\n", k, $1 - kx, v["uptime"], v["release"]
    }
    / FLLAB systemctl-kexec / { k++; kx = $1 }
    / FLLAB kexec-load / { printf "  kexec %d: %s\n", k + 1, substr($0, index($0, "kexec-load")) }
    / FLLAB (check workload|workload) / { }
  ' "$log"
done
fails=$(cat "$DIR"/boot*.log | grep -c ' FLLAB check .* FAIL' || true)
oks=$(cat "$DIR"/boot*.log | grep -c ' FLLAB check .* ok' || true)
final=$(cat "$DIR"/boot*.log | grep -c ' FLLAB selftest-done' || true)
echo "== $oks ok, $fails failed, finished: $([ "$final" -gt 0 ] && echo yes || echo no)"
[ "$fails" = 0 ] && [ "$final" -gt 0 ]
