# The hook selftest.sh serves to its guest (faultline.hook=URL); @X@ are filled in.
# Each boot runs it once; its phase lives on the board's disk.
S=/var/lib/faultline/selftest
B=/var/lib/faultline/boot
mkdir -p "$S"
REL=$(uname -r)
BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
PHASE=$(cat "$S/phase" 2>/dev/null || echo 0)
check() {  # check NAME ok|FAIL DETAIL
  echo "FLLAB check $1 $2 [phase $PHASE, $REL] $3"
}

# network: the hook came over it; fetch a token too
got=$(wget -q -O - "http://10.0.2.2:@PORT@/ping.txt" 2>&1)
[ "$got" = "@TOKEN@" ] && check net ok "wget http://10.0.2.2:@PORT@/ping.txt" || check net FAIL "got '$got'"
# disk
if grep -q "^/dev/vda /var/lib/faultline " /proc/mounts; then
  check disk ok "$(grep '^/dev/vda ' /proc/mounts | cut -d' ' -f2-3)"
else
  check disk FAIL "/dev/vda not mounted on /var/lib/faultline"
fi
# zram swap
if [ -e /sys/block/zram0 ]; then
  echo 64M >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0 &&
    grep -q zram0 /proc/swaps && check zram ok "swapon /dev/zram0 ($(cat /sys/block/zram0/comp_algorithm))" ||
    check zram FAIL "$(cat /proc/swaps)"
  swapoff /dev/zram0 2>/dev/null; echo 1 >/sys/block/zram0/reset 2>/dev/null
else
  check zram FAIL "no /sys/block/zram0 ($(lsmod | grep -c zram) zram modules)"
fi
# memory cgroup (v2)
ctl=$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)
case " $ctl " in
  *" memory "*)
    mkdir -p /sys/fs/cgroup/fl-selftest && echo 64M >/sys/fs/cgroup/fl-selftest/memory.max &&
      check cgroup2-memory ok "controllers: $ctl; memory.max=$(cat /sys/fs/cgroup/fl-selftest/memory.max)" ||
      check cgroup2-memory FAIL "cannot set memory.max"
    rmdir /sys/fs/cgroup/fl-selftest 2>/dev/null ;;
  *) check cgroup2-memory FAIL "controllers: $ctl" ;;
esac
kexec --version >/dev/null 2>&1 && check kexec-binary ok "$(kexec --version 2>&1 | head -n1)" || check kexec-binary FAIL "$(kexec --version 2>&1 | head -n2)"
# the agent (x86_64: the host build with its libraries)
if [ -x /opt/faultline/bin/faultline-agent ]; then
  out=$(/opt/faultline/bin/faultline-agent --help 2>&1); rc=$?
  [ $rc = 0 ] && check agent-help ok "$(echo "$out" | head -n1)" || check agent-help FAIL "rc=$rc $(echo "$out" | head -n3)"
  out=$(/opt/faultline/bin/faultline-workload filemap-thrash --threads 1 --file-size 1M --duration 1s --dir /var/lib/faultline/work 2>&1); rc=$?
  echo "$out" | sed 's/^/FLLAB workload: /' | head -n 20
  [ $rc = 0 ] && check workload ok "filemap-thrash 1 s rc=0" || check workload FAIL "rc=$rc"
fi

load() {  # load RELEASE: kexec --load the disk's kernel RELEASE
  img=$B/vmlinuz-$1; [ -f "$img" ] || img=$B/vmlinux-$1
  cmdline=$(cat /proc/cmdline)
  t0=$(cut -d' ' -f1 /proc/uptime)
  out=$(kexec @KEXEC_ARGS@ --load "$img" --initrd="$B/initrd.img-$1" --command-line="$cmdline" 2>&1); rc=$?
  t1=$(cut -d' ' -f1 /proc/uptime)
  echo "FLLAB kexec-load rc=$rc $(basename "$img") in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s $out"
  [ $rc = 0 ] && check kexec-load ok "$1" || check kexec-load FAIL "$1 rc=$rc: $out"
  echo "$BOOT_ID" >"$S/boot_id_before_kexec"
  return $rc
}

case $PHASE in
  0)  # first boot (vanilla): leave a marker, power off
    echo "$BOOT_ID" >"$S/marker"; echo 1 >"$S/phase"; sync
    echo "FLLAB phase 0 done: marker written, power off"
    poweroff -f ;;
  1)  # second boot (vanilla): the marker survived; kexec to patched
    if [ -f "$S/marker" ] && [ "$(cat "$S/marker")" != "$BOOT_ID" ]; then
      check persist ok "marker from boot $(cat "$S/marker") found"
    else
      check persist FAIL "marker: '$(cat "$S/marker" 2>/dev/null)'"
    fi
    echo 2 >"$S/phase"; sync
    load @PATCHED@ && systemctl kexec
    check kexec-exec FAIL "still running $REL after systemctl kexec"
    poweroff -f ;;
  2)  # after kexec: patched
    [ "$REL" = @PATCHED@ ] && check kexec-release ok "$REL" || check kexec-release FAIL "$REL, expected @PATCHED@"
    prev=$(cat "$S/boot_id_before_kexec")
    [ "$prev" != "$BOOT_ID" ] && check kexec-boot-id ok "$prev -> $BOOT_ID" || check kexec-boot-id FAIL "same boot id $BOOT_ID"
    echo 3 >"$S/phase"; sync
    load @VANILLA@ && systemctl kexec
    check kexec-exec FAIL "still running $REL after systemctl kexec"
    poweroff -f ;;
  3)  # after the second kexec: vanilla again
    [ "$REL" = @VANILLA@ ] && check kexec-back ok "$REL" || check kexec-back FAIL "$REL, expected @VANILLA@"
    echo 4 >"$S/phase"; sync
    echo "FLLAB selftest-done"
    poweroff -f ;;
  *) echo "FLLAB selftest: phase $PHASE, nothing to do" ;;
esac
