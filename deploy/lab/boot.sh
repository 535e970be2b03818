#!/usr/bin/env bash
# boot.sh ARCH LABEL [options]: boots the pinned kernel ARCH/LABEL (kernels.manifest) under
# qemu TCG with an initramfs (mkinitramfs.sh), user-mode networking (the host's loopback
# is 10.0.2.2 in the guest) and an optional persistent virtio disk (/dev/vda).
#   --disk FILE        raw disk image (lab.sh disk ARCH FILE makes one with boot/ for kexec)
#   --append "ARGS"    added to the kernel command line (faultline.* keys: guest/init)
#   --initrd FILE      default: $FL_LAB_STATE/initrd/ARCH-LABEL.cpio.gz, built when missing
#   --rebuild          rebuild the default initrd first
#   --log FILE         run in the background: console appended to FILE, every line prefixed
#                      with the host's time (epoch seconds); prints the qemu pid (also FILE.pid)
#   --wait             with --log: stay until qemu ends (console drained); exit with qemu's status
#   --pidfile FILE     with --log: qemu's pid also in FILE
#   --accel tcg|kvm    default: lab_accel (FL_LAB_ACCEL, tcg); kvm uses -cpu host on x86_64;
#                      tcg: thread=single on x86_64 (FL_LAB_TCG_THREAD)
#   --mem MB (1024)  --smp N (2)  --hostfwd tcp::HOSTPORT-:GUESTPORT (repeatable)
#   --qemu-arg ARG     one extra qemu argument (repeatable)
# Without --log: qemu in the foreground on this terminal (-nographic; Ctrl-A x quits).
# qemu runs with -no-reboot: a guest reboot or poweroff ends qemu; kexec does not.
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
ARCH=$1 LABEL=$2; shift 2
DISK="" APPEND="" INITRD="" REBUILD=0 LOG="" MEM=1024 SMP=2 FWD="" EXTRA=() WAIT=0 PIDFILE="" ACCEL=""
while [ $# -gt 0 ]; do
  case $1 in
    --disk) DISK=$2; shift 2 ;;
    --append) APPEND="$APPEND $2"; shift 2 ;;
    --initrd) INITRD=$2; shift 2 ;;
    --rebuild) REBUILD=1; shift ;;
    --log) LOG=$2; shift 2 ;;
    --wait) WAIT=1; shift ;;
    --pidfile) PIDFILE=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --hostfwd) FWD="$FWD,hostfwd=$2"; shift 2 ;;
    --qemu-arg) EXTRA+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) lab_die "boot: unknown option $1" ;;
  esac
done

lab_kernel "$ARCH" "$LABEL"   # LAB_KREL, LAB_KIMAGE
case $ARCH in
  x86_64) QEMU=qemu-system-x86_64; QPKG=qemu-system-x86
          MACHINE=(-M q35 -cpu max); CONSOLE=ttyS0 ;;
  aarch64) QEMU=qemu-system-aarch64; QPKG=qemu-system-arm
           MACHINE=(-M virt -cpu cortex-a57); CONSOLE=ttyAMA0 ;;
  riscv64) QEMU=qemu-system-riscv64; QPKG=qemu-system-misc
           MACHINE=(-M virt -bios default); CONSOLE=ttyS0 ;;
esac
lab_need "$QEMU" "$QPKG"
[ -n "$ACCEL" ] || ACCEL=$(lab_accel "$ARCH")
# TCG: x86_64 guests run their vCPUs on one host thread (thread=single). With MTTCG a 6.12
# guest hit "Oops: int3" in text_poke_bp'd code on another vCPU at boot (cross-modifying
# code) now and then. FL_LAB_TCG_THREAD=single|multi overrides.
TCG_THREAD=${FL_LAB_TCG_THREAD:-$([ "$ARCH" = x86_64 ] && echo single || echo multi)}
case $ACCEL in
  tcg) ACCEL=tcg,thread=$TCG_THREAD ;;
  kvm) [ "$ARCH" = x86_64 ] && MACHINE=(-M q35 -cpu host) ;;
  *) lab_die "--accel: tcg or kvm" ;;
esac

if [ -z "$INITRD" ]; then
  INITRD="$FL_LAB_STATE/initrd/$ARCH-$LABEL.cpio.gz"
  if [ "$REBUILD" = 1 ] || [ ! -f "$INITRD" ]; then
    "$FL_LAB_DIR/mkinitramfs.sh" "$ARCH" "$LABEL" "$INITRD"
  fi
fi
[ -f "$INITRD" ] || lab_die "no initrd $INITRD"

# shellcheck disable=SC2054  # (commas are qemu syntax)
ARGS=("${MACHINE[@]}" -accel "$ACCEL" -m "$MEM" -smp "$SMP" -nographic -no-reboot
  -kernel "$LAB_KIMAGE" -initrd "$INITRD"
  -append "console=$CONSOLE panic=-1 faultline.lab=$ARCH-$LABEL$APPEND"
  -netdev "user,id=n0$FWD" -device virtio-net-pci,netdev=n0,romfile=
  -device virtio-rng-pci)
if [ -n "$DISK" ]; then
  [ -f "$DISK" ] || lab_die "no disk $DISK (lab.sh disk $ARCH $DISK)"
  ARGS+=(-drive "file=$DISK,if=virtio,format=raw")
fi
ARGS+=("${EXTRA[@]}")

if [ -z "$LOG" ]; then
  exec "$QEMU" "${ARGS[@]}"
fi
mkdir -p "$(dirname "$LOG")"
rm -f "$LOG.pid"
# The console, each line with the host's time: boot and kexec timings come from here.
# (qemu's status is kept in $LOG.rc: the pipeline's is the reader's.)
rm -f "$LOG.rc"
( ( "$QEMU" "${ARGS[@]}" -monitor none -pidfile "$LOG.pid" </dev/null 2>&1; echo "$?" >"$LOG.rc" ) |
    while IFS= read -r line || [ -n "$line" ]; do printf '%s %s\n' "$EPOCHREALTIME" "${line%$'\r'}"; done >>"$LOG" ) \
  </dev/null >/dev/null 2>&1 &   # not our stdout: $(boot.sh --log ...) returns at once
PIPE_PID=$!
printf '%s qemu-launch %s %s\n' "$EPOCHREALTIME" "$ARCH" "$LABEL" >"$LOG.launch"
for _ in $(seq 1 100); do [ -s "$LOG.pid" ] && break; kill -0 "$PIPE_PID" 2>/dev/null || break; sleep 0.1; done
[ -s "$LOG.pid" ] || { tail -n 20 "$LOG" >&2; lab_die "qemu did not start (log: $LOG)"; }
[ -z "$PIDFILE" ] || cp "$LOG.pid" "$PIDFILE"
if [ "$WAIT" = 1 ]; then
  wait "$PIPE_PID" || true
  exit "$(cat "$LOG.rc" 2>/dev/null || echo 1)"
fi
cat "$LOG.pid"
