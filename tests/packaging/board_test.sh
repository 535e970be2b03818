#!/usr/bin/env bash
# The agent's package on a board that boots: a qemu guest of ARCH (TCG) with a Debian root
# file system (mmdebstrap; bookworm, trixie for riscv64), systemd as PID 1, cgroup v2 with
# its memory controller and the lab's two pinned Debian kernels of that arch installed as
# Debian installs them (apt, initramfs-tools). On the running board, through its command
# port: `apt install` of the agent's package for that arch (its maintainer scripts run on
# the arch, under systemd), then the operator's configuration. The controller and a
# throwaway PostgreSQL run on the host (the guest reaches its loopback as 10.0.2.2). What
# the nspawn container (systemd_test.sh) cannot show, checked here:
#   1. Delegate=yes on cgroup v2: the agent moves itself into the unit's agent/ leaf, runs
#      live in faultline-agent.service/faultline/run-* with their memory.max;
#   2. kernel switches through systemd: the agent loads the kernel and, with kexec_exec:
#      auto under systemd, asks for `systemctl kexec`: the unit is stopped as part of the
#      shutdown (not restarted), the file systems are unmounted, the new kernel boots and
#      the unit's next life reports the switch (an A/B job: there and back);
#   3. OOMPolicy=continue on cgroup v2, where systemd sees a run's OOM kill in the unit's
#      memory.events: the run fails oom_killed, the unit stays active with the same pid;
#   4. `systemctl stop` mid-run removes the run, its cgroup and the unit's, and start brings
#      the agent back online;
#   5. the CLI's and the controller's packages for the arch, installed by apt beside it: the
#      CLI renders a saved report as its golden file has it, the board's controller (its
#      unit as packaged, TLS) on the host's database answers /readyz and the board's CLI,
#      and stops cleanly.
# The guest's virtio serial port fl.shell is a command port (board_shell.py): the checks
# read the guest's state from there. Foreign arches need binfmt_misc for mmdebstrap (the
# test mounts it and registers qemu-user for the arch while it builds the root file
# system, and undoes what it did).
# Usage: board_test.sh REPO_ROOT [x86_64|aarch64|riscv64]   (default x86_64)
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
build=${FAULTLINE_BUILD_DIR:-$ROOT/build}
packages=${FAULTLINE_PACKAGE_DIR:-$build/packages}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${2:-x86_64}
case $ARCH in
  x86_64) debarch=amd64 suite=bookworm qemu_pkg=qemu-system-x86 kexec_args="" ;;
  # The lab's aarch64 boards load kernels with kexec -i (kexec_file_load would need a
  # signed image on Debian's cloud kernel).
  aarch64) debarch=arm64 suite=bookworm qemu_pkg=qemu-system-arm kexec_args=", kexec_args: [-i]" ;;
  # riscv64's second kernel is trixie-backports' 7.2 (it depends on its linux-base-7.2).
  riscv64) debarch=riscv64 suite=trixie qemu_pkg=qemu-system-misc kexec_args="" ;;
  *) echo "board_test: ARCH is x86_64, aarch64 or riscv64" >&2; exit 2 ;;
esac
# shellcheck source=rootfs.sh
source "$HERE/rootfs.sh"

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, chroot, mkfs.ext4 -d)"
[ "$(uname -m)" = x86_64 ] || skip "the test's host is x86_64 (the controller and the lab's scripts)"
for tool in mmdebstrap "qemu-system-$ARCH:$qemu_pkg" mkfs.ext4:e2fsprogs python3 psql:postgresql-client openssl; do
  command -v "${tool%%:*}" >/dev/null || skip "${tool%%:*} is not installed (apt-get install ${tool#*:})"
done
if [ "$ARCH" != x86_64 ]; then
  [ -f "/usr/lib/binfmt.d/qemu-$ARCH.conf" ] || skip "no /usr/lib/binfmt.d/qemu-$ARCH.conf (apt-get install qemu-user-static)"
  grep -qw binfmt_misc /proc/filesystems || skip "the kernel has no binfmt_misc (mmdebstrap of a foreign arch needs it)"
fi
agent_deb=$(ls -t "$packages"/faultline-agent_*_"$debarch".deb 2>/dev/null | head -1)
[ -n "$agent_deb" ] || { echo "FAIL: no faultline-agent $debarch package in $packages (packaging_build makes it)" >&2; exit 1; }
cli_deb=$(ls -t "$packages"/faultline_*_"$debarch".deb 2>/dev/null | head -1)
controller_deb=$(ls -t "$packages"/faultline-controller_*_"$debarch".deb 2>/dev/null | head -1)
[ -n "$cli_deb" ] && [ -n "$controller_deb" ] ||
  { echo "FAIL: no faultline or faultline-controller $debarch package in $packages" >&2; exit 1; }
export FL_BIN_CONTROLLER=$build/services/controller/faultline-controller FL_BIN_CLI=$build/services/cli/faultline
export FL_BIN_AGENT=/nonexistent FL_BIN_WORKLOAD=/nonexistent  # (the board runs the package's)
for b in "$FL_BIN_CONTROLLER" "$FL_BIN_CLI"; do [ -x "$b" ] || { echo "FAIL: no $b" >&2; exit 1; }; done

# The lab's pinned kernels of ARCH (x86_64/aarch64: 6.1 and 6.12; riscv64: 6.12 and 7.2,
# a split kernel of three packages): fetched and sha256-checked.
"$ROOT/deploy/lab/lab.sh" fetch "$ARCH" >/dev/null
FL_LAB_CACHE=${FL_LAB_CACHE:-/var/cache/faultline-lab}
manifest=${FL_LAB_MANIFEST:-$ROOT/deploy/lab/kernels.manifest}
kernel_lines() { awk -v a="$ARCH" -v l="$1" '$1 == a && $2 == l && $4 ~ /^linux-(image|binary|modules)-/' "$manifest"; }
kernel_release() { kernel_lines "$1" | awk '$4 ~ /^linux-image-/ { sub(/^linux-image-/, "", $4); print $4 }'; }
kernel_debs() { kernel_lines "$1" | awk -v d="$FL_LAB_CACHE/debs" '{ n = split($7, p, "/"); print d "/" p[n] }'; }
rel_v=$(kernel_release vanilla) rel_p=$(kernel_release patched)
mapfile -t debs_v < <(kernel_debs vanilla)
mapfile -t debs_p < <(kernel_debs patched)
# kexec-tools as the lab pins it (riscv64's is only in sid).
kexec_deb=$FL_LAB_CACHE/debs/$(awk -v a="$ARCH" '$1 == a && $2 == "userland" && $4 == "kexec-tools" { n = split($7, p, "/"); print p[n] }' "$manifest")
for f in "${debs_v[@]}" "${debs_p[@]}" "$kexec_deb"; do
  [ -f "$f" ] || { echo "FAIL: the lab's kernel package $f is missing" >&2; exit 1; }
done

S=$(mktemp -d /var/tmp/faultline-pkg-board-XXXXXX)  # the disk: a few GB, sparse
chmod 755 "$S"
QEMU_PID=""
BINFMT_MOUNTED="" BINFMT_REGISTERED=""
binfmt_undo() {
  [ -n "$BINFMT_REGISTERED" ] && echo -1 >"/proc/sys/fs/binfmt_misc/$BINFMT_REGISTERED"
  [ -n "$BINFMT_MOUNTED" ] && umount /proc/sys/fs/binfmt_misc
  BINFMT_MOUNTED="" BINFMT_REGISTERED=""
}
cleanup() {
  set +e
  binfmt_undo
  if [ -n "${FL_PACKAGING_KEEP:-}" ]; then
    echo "kept: $S (qemu pid $QEMU_PID; console $S/console.log; shell: $HERE/board_shell.py $S/shell.sock 60 CMD)" >&2
    return
  fi
  [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null && while kill -0 "$QEMU_PID" 2>/dev/null; do sleep 0.1; done
  [ -n "${FL_STATE:-}" ] && fl_stop_all >/dev/null 2>&1
  rm -rf "$S"
}
trap cleanup EXIT
on_board() {  # CMD (one string, run by bash on the board; 60 s unless BOARD_TIMEOUT)
  python3 "$HERE/board_shell.py" "$S/shell.sock" "${BOARD_TIMEOUT:-60}" "$1"
}
fail() {
  echo "FAIL: $*" >&2
  set +e
  echo "--- console (tail)" >&2; tail -n 40 "$S/console.log" 2>/dev/null | cut -d' ' -f2- | cut -c1-300 >&2
  echo "--- the agent's journal on the board (tail)" >&2
  BOARD_TIMEOUT=20 on_board 'journalctl --no-pager -o short-monotonic -n 40 -u faultline-agent' >&2
  [ -n "${FL_STATE:-}" ] && { echo "--- controller.log (tail)" >&2; tail -n 20 "$FL_STATE/controller.log" >&2; }
  exit 1
}
pass() { echo "ok: $*"; }
wait_until() {  # SECONDS CMD...: poll, no fixed sleeps
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.5; done
}

# ------------------------------------------------------------ the root file system ----
# Cached by its recipe: the packages (our packages' Depends included, so their installation
# on the board needs no network), the kernels' sha256 and the files below.
deps=$(for d in "$agent_deb" "$cli_deb" "$controller_deb"; do dpkg-deb -f "$d" Depends; echo ,; done |
  tr -d '\n' | sed 's/([^)]*)//g; s/|[^,]*//g; s/ //g; s/,$//')
mkdir -p "$S/files"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' >"$S/files/80-dhcp.network"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$S/files/fstab"
kexec_depends=$(dpkg-deb -f "$kexec_deb" Depends | sed 's/([^)]*)//g; s/|[^,]*//g; s/ //g')
include="systemd,systemd-sysv,dbus,initramfs-tools,kmod,linux-base,procps,zstd,curl,$kexec_depends,$deps"
# The kernels go in with apt (a kernel's own dependencies come from the archive), with
# $suite-backports as a source where a kernel comes from there.
backports=""
grep -q "^$ARCH [a-z]* $suite-backports " "$manifest" && backports="deb $DEBIAN_MIRROR $suite-backports main"
key=$( (echo "$ARCH $suite $include $DEBIAN_MIRROR $backports apt -t"; sha256sum "${debs_v[@]}" "${debs_p[@]}" "$kexec_deb" | cut -d' ' -f1
        cat "$S/files/"*) | sha256sum | cut -c1-16)
tarball=$ROOTFS_CACHE/board-$suite-$debarch-$key.tar
if [ ! -f "$tarball" ] && [ "$ARCH" != x86_64 ]; then
  # mmdebstrap runs the foreign packages' maintainer scripts under qemu-user.
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || fail "mounting binfmt_misc"
    BINFMT_MOUNTED=1
  fi
  if [ ! -e "/proc/sys/fs/binfmt_misc/qemu-$ARCH" ]; then
    cat "/usr/lib/binfmt.d/qemu-$ARCH.conf" >/proc/sys/fs/binfmt_misc/register || fail "registering qemu-$ARCH"
    BINFMT_REGISTERED=qemu-$ARCH
  fi
fi
kernel_hooks=()
for f in "${debs_v[@]}" "${debs_p[@]}" "$kexec_deb"; do
  kernel_hooks+=(--customize-hook="upload $f /tmp/kernel-$(basename "$f")")
done
rootfs_cached "$tarball" "$S/mmdebstrap.log" "$suite" "$DEBIAN_MIRROR" --variant=minbase --arch="$debarch" \
  --include="$include" "${kernel_hooks[@]}" \
  --customize-hook="echo '$backports' >\"\$1/etc/apt/sources.list.d/backports.list\"" \
  --customize-hook="chroot \"\$1\" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${backports:+-t $suite-backports} /tmp/kernel-*.deb && rm /tmp/kernel-*.deb /etc/apt/sources.list.d/backports.list'" \
  --customize-hook="upload $S/files/80-dhcp.network /etc/systemd/network/80-dhcp.network" \
  --customize-hook="upload $S/files/fstab /etc/fstab" \
  --customize-hook='echo fl-board >"$1/etc/hostname"; mkdir -p "$1/var/log/journal"' \
  --customize-hook='chroot "$1" systemctl enable systemd-networkd >/dev/null 2>&1' \
  --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1; chroot "$1" passwd -d root >/dev/null'
binfmt_undo

# ------------------------------------------------------------ the stack on the host ----
export FL_STATE=$S/stack
mkdir -p "$FL_STATE"
# shellcheck source=../../deploy/local/stack.sh
source "$ROOT/deploy/local/stack.sh"
fl_start_postgres >/dev/null 2>&1 || fail "PostgreSQL"
fl_start_controller 2>/dev/null || fail "the controller"
url=$FL_DATABASE_URL
sql() { psql -XAtq "$url" -c "$1"; }
cli() { "$FL_BIN_CLI" "$@"; }
board=pkg-board-$ARCH
token_file=$(fl_agent_token "$board") || fail "agent token"

# ------------------------------------------------------------ the board's disk ----
t0=$SECONDS
rootfs_extract "$tarball" "$S/rootfs"
cp "$agent_deb" "$cli_deb" "$controller_deb" "$ROOT/report/testdata/ab-report.json" \
  "$ROOT/report/testdata/ab-report.mail" "$S/rootfs/var/tmp/"
# The test's command port (on the disk, not in the cached tarball: it is the test's own).
mkdir -p "$S/shell"
cat >"$S/shell/fl-test-shell" <<'EOF'
#!/bin/bash
# The faultline packaging test's command port, the virtio serial port fl.shell
# (tests/packaging/board_shell.py): one line "TAG BASE64" per command, answered
# "@@FL TAG begin", its output, "@@FL TAG rc=N". The port stays open: it reads end of
# file while no host is connected, and the next host's command after that.
port=/dev/virtio-ports/fl.shell
until [ -e $port ]; do sleep 0.2; done
exec <>$port >&0 2>&0
while :; do
  while read -r tag b64; do
    [ -n "$b64" ] || continue
    echo "@@FL $tag begin"
    bash -c "$(echo "$b64" | base64 -d)" </dev/null 2>&1
    printf '\n@@FL %s rc=%d\n' "$tag" "$?"
  done
  sleep 0.2
done
EOF
cat >"$S/shell/fl-test-shell.service" <<'EOF'
[Unit]
Description=faultline packaging test: command port on virtio port fl.shell
[Service]
ExecStart=/usr/local/sbin/fl-test-shell
Restart=always
RestartSec=1
[Install]
WantedBy=multi-user.target
EOF
install -m 0755 "$S/shell/fl-test-shell" "$S/rootfs/usr/local/sbin/fl-test-shell"
install -m 0644 "$S/shell/fl-test-shell.service" "$S/rootfs/etc/systemd/system/fl-test-shell.service"
mkdir -p "$S/rootfs/etc/systemd/system/multi-user.target.wants"
ln -s /etc/systemd/system/fl-test-shell.service "$S/rootfs/etc/systemd/system/multi-user.target.wants/fl-test-shell.service"
image() {  # RELEASE: the kernel image Debian installed (vmlinux on riscv64)
  if [ -f "$S/rootfs/boot/vmlinuz-$1" ]; then echo "/boot/vmlinuz-$1"; else echo "/boot/vmlinux-$1"; fi
}
img_v=$(image "$rel_v") img_p=$(image "$rel_p")
for f in "$img_v" "$img_p" "/boot/initrd.img-$rel_v" "/boot/initrd.img-$rel_p"; do
  [ -f "$S/rootfs$f" ] || fail "the root file system has no $f"
done
cp "$S/rootfs/boot/initrd.img-$rel_v" "$S/initrd-vanilla"
size_mb=$(( $(du -sm "$S/rootfs" | cut -f1) + 1536 ))
mkfs.ext4 -q -F -L flroot -d "$S/rootfs" "$S/disk.img" "${size_mb}M" >"$S/mkfs.log" 2>&1 || { cat "$S/mkfs.log" >&2; fail "mkfs.ext4 -d"; }
rm -rf "$S/rootfs"
pass "board disk ($ARCH, Debian $suite, kernels $rel_v and $rel_p): ${size_mb} MiB ext4 in $((SECONDS - t0)) s"

# ------------------------------------------------------------ power on ----
t_on=$EPOCHREALTIME
QEMU_PID=$("$ROOT/deploy/lab/boot.sh" "$ARCH" vanilla --disk "$S/disk.img" --initrd "$S/initrd-vanilla" \
  --append "root=/dev/vda rw faultline.virt_accel=tcg" --log "$S/console.log" \
  --qemu-arg -device --qemu-arg virtio-serial-pci,id=flser \
  --qemu-arg -chardev --qemu-arg "socket,id=flsh,path=$S/shell.sock,server=on,wait=off" \
  --qemu-arg -device --qemu-arg "virtserialport,bus=flser.0,chardev=flsh,name=fl.shell") || fail "qemu did not start"
up() { [ "$(BOARD_TIMEOUT=5 on_board 'cat /proc/1/comm' 2>/dev/null)" = systemd ]; }
wait_until 600 up || fail "the board did not answer on its command port"
BOARD_TIMEOUT=300 on_board 'systemctl is-system-running --wait' >/dev/null || true
st=$(on_board 'systemctl is-system-running' || true)
[ "$st" = running ] || fail "the board is '$st', not running: $(on_board 'systemctl --failed --no-legend' || true)"
pass "board up: systemd PID 1 ($st), $(on_board 'uname -r') on $(on_board 'uname -m'), $(awk -v a="$t_on" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s after power-on (TCG)"

# ------------------------------------------------------------ install, configure ----
# apt on the board: the maintainer scripts run on this arch under systemd (postinst
# enables and starts the unit, which fails once, unconfigured). Then the operator's files:
# the controller, the token, the board's two kernels (kexec, kexec_exec: auto, so
# `systemctl kexec` under systemd); cgroup_parent stays the package's `delegated`.
t0=$SECONDS
BOARD_TIMEOUT=600 on_board "DEBIAN_FRONTEND=noninteractive apt-get install -y /var/tmp/$(basename "$agent_deb") </dev/null" \
  >"$S/apt.log" 2>&1 || { tail -20 "$S/apt.log" >&2; fail "apt install of the agent package on the board"; }
[ "$(on_board 'systemctl is-enabled faultline-agent')" = enabled ] || fail "the package did not enable faultline-agent"
apt_s=$((SECONDS - t0))
put() {  # FILE MODE PATH: a host file onto the board
  on_board "echo $(base64 -w0 "$1") | base64 -d >$3 && chmod $2 $3" || fail "writing $3 on the board"
}
echo "FAULTLINE_CONTROLLER=10.0.2.2:$FL_GRPC_PORT" >"$S/agent.default"
on_board 'cat /etc/faultline/agent.yaml' >"$S/agent.yaml" || fail "reading the packaged agent.yaml"
grep -q '^cgroup_parent: delegated$' "$S/agent.yaml" || fail "the packaged agent.yaml no longer says cgroup_parent: delegated"
sed -i "s|^#board: .*|board: $board|; s|^labels: .*|labels: {site: packaging-test}|; /^kernels:/,\$d" "$S/agent.yaml"
cat >>"$S/agent.yaml" <<YAML
kernels:
  - {label: vanilla, release: $rel_v, boot: kexec, kernel: $img_v, initrd: /boot/initrd.img-$rel_v, cmdline: running$kexec_args}
  - {label: patched, release: $rel_p, boot: kexec, kernel: $img_p, initrd: /boot/initrd.img-$rel_p, cmdline: running$kexec_args}
YAML
put "$token_file" 600 /etc/faultline/agent.token
put "$S/agent.default" 644 /etc/default/faultline-agent
put "$S/agent.yaml" 644 /etc/faultline/agent.yaml
on_board 'systemctl reset-failed faultline-agent; systemctl restart faultline-agent' || fail "restarting the configured agent"
agent_row() { cli agents 2>/dev/null | awk -v b="$board" '$1 == b'; }
online_on() { agent_row | grep -q " $1 (.* online "; }
wait_until 300 online_on vanilla || fail "the board's agent did not come online on vanilla"
pass "apt install of $(basename "$agent_deb") on the board in $apt_s s (unit enabled); configured, online on vanilla ($rel_v)"
agent_prop() { on_board "systemctl show -P $1 faultline-agent"; }
[ "$(agent_prop Delegate)" = yes ] || fail "the unit does not delegate its cgroup"
[ "$(on_board 'stat -fc %T /sys/fs/cgroup')" = cgroup2fs ] || fail "the board does not run cgroup v2"
agent_cg=$(on_board 'cat /proc/$(systemctl show -P MainPID faultline-agent)/cgroup')
[ "$agent_cg" = "0::/system.slice/faultline-agent.service/agent" ] || fail "the agent runs in '$agent_cg', not the unit's agent/ leaf"
pass "cgroup v2, Delegate=yes: the agent moved itself into $agent_cg"

# ------------------------------------------------ 1. an A/B job across kexecs ----
cat >"$S/ab.yaml" <<'YAML'
name: packaging-board-ab
benchmark: filemap-thrash
duration: 2s
repetitions: 2
block_size: 1
kernels: [vanilla, patched]
min_effect: 0.5
memcg: {memory_max: 128M, swap_max: 0}
params: {file_size: 4M, threads: 2}
YAML
t0=$SECONDS
job=$(cli submit "$S/ab.yaml") || fail "submit"
timeout 1200 "$FL_BIN_CLI" watch "$job" >"$S/ab-watch.log" 2>&1 || { tail -20 "$S/ab-watch.log" >&2; fail "A/B job $job did not succeed"; }
ab_s=$((SECONDS - t0))
# Every run on the kernel it asked for, each a v2 memcg.
bad=$(sql "SELECT r.kernel || ' ran on ' || coalesce(x.environment->>'kernel.release', '?') || ' cgroup ' || coalesce(x.environment->>'cgroup.version', '?')
           FROM runs r JOIN results x ON x.run_id = r.id WHERE r.job_id = $job AND NOT (
             x.environment->>'cgroup.version' = '2' AND x.environment->>'kernel.release' =
             CASE r.kernel WHEN 'vanilla' THEN '$rel_v' ELSE '$rel_p' END)")
[ -z "$bad" ] || fail "runs on the wrong kernel or cgroup: $bad"
[ "$(sql "SELECT count(*) FROM results x JOIN runs r ON r.id = x.run_id WHERE r.job_id = $job")" = 4 ] || fail "job $job has not 4 results"
switches=$(sql "SELECT kernel_switches FROM boards WHERE name = '$board'")
[ "$switches" -ge 2 ] || fail "$switches kernel switches for an A/B job on one board (2 at least: there and back)"
kexecs=$(grep -c 'kexec_core: Starting new kernel' "$S/console.log" || true)
[ "$kexecs" = "$switches" ] || fail "$switches switches but $kexecs kexecs on the console"
boots=$(on_board "journalctl --list-boots | grep -Ec '^ *-?[0-9]+ '")
[ "$boots" = $((switches + 1)) ] || fail "$boots boots in the journal after $switches switches"
# Each switch through systemd: the agent asked for `systemctl kexec`, systemd stopped the
# unit as part of the shutdown (exit 0, not restarted), the next life verified the boot.
for b in $(seq $((-switches)) -1); do
  j=$(on_board "journalctl -b $b -o cat -u faultline-agent --no-pager")
  grep -q 'event=boot_command label=[a-z]* command="systemctl kexec"' <<<"$j" || fail "boot $b: the agent did not ask for systemctl kexec: $(tail -3 <<<"$j")"
  grep -q 'faultline-agent.service: Deactivated successfully' <<<"$j" || fail "boot $b: the unit did not end cleanly at the kexec: $(tail -3 <<<"$j")"
  grep -q 'Scheduled restart job' <<<"$j" && fail "boot $b: systemd restarted the agent during the kexec"
  on_board "journalctl -b $((b + 1)) -o cat -u faultline-agent --no-pager | grep -q event=kernel_switch_verified" ||
    fail "boot $((b + 1)): the agent did not verify the switch"
done
# The file systems were unmounted before each kexec: no boot had to recover the journal.
rec=$(on_board "journalctl -k --no-pager -o cat | grep -c 'EXT4-fs (vda): recovery complete'" || true)
[ "$rec" = 0 ] || fail "$rec boots recovered an unclean root file system after a kexec"
pass "A/B job $job: 4 runs on $rel_v and $rel_p (cgroup v2) in $ab_s s, $switches switches by systemctl kexec (auto): the unit stopped cleanly at each shutdown, every next life verified its kernel, no boot recovered its file system"
running=$(agent_row | awk '{ for (i = 1; i <= NF; i++) if ($i == "vanilla" || $i == "patched") { print $i; exit } }')

# ------------------------------------------------ 2. OOMPolicy=continue on cgroup v2 ----
agent_pid=$(agent_prop MainPID); restarts=$(agent_prop NRestarts)
cat >"$S/oom.yaml" <<YAML
name: packaging-board-oom
benchmark: shmem-folio-fault
duration: 1s
repetitions: 1
kernels: [$running]
memcg: {memory_max: 16M, swap_max: 0}
params: {threads: 32}
YAML
oomjob=$(cli submit "$S/oom.yaml") || fail "submit oom"
timeout 600 "$FL_BIN_CLI" watch "$oomjob" >"$S/oom.log" 2>&1 || true
reason=$(sql "SELECT state || ': ' || coalesce(failure_reason, '') FROM runs WHERE job_id = $oomjob")
[ "$reason" = "failed: oom_killed" ] || { cat "$S/oom.log" >&2; fail "the OOM run is '$reason', not failed: oom_killed"; }
[ "$(agent_prop ActiveState)" = active ] || fail "the agent unit is $(agent_prop ActiveState) after an OOM kill"
[ "$(agent_prop MainPID)" = "$agent_pid" ] && [ "$(agent_prop NRestarts)" = "$restarts" ] || fail "the agent was restarted after an OOM kill"
seen=$(on_board 'journalctl -b -o cat -u faultline-agent --no-pager | grep -c "killed by the OOM killer"' || true)
[ "$seen" -ge 1 ] || fail "systemd did not see the OOM kill in the unit (cgroup v2 memory.events)"
pass "a run OOM-killed in its 16M memcg: failed: oom_killed; systemd saw it in the unit ($seen journal line(s)) and kept the agent (OOMPolicy=$(agent_prop OOMPolicy), pid $agent_pid)"

# ------------------------------------------------ 3. a run's cgroup; stop mid-run ----
sed -e 's/^name: .*/name: packaging-board-long/; s/^duration: .*/duration: 120s/; s/^repetitions: .*/repetitions: 1/' \
  -e "s/^kernels: .*/kernels: [$running]/; /^block_size/d" "$S/ab.yaml" >"$S/long.yaml"
longjob=$(cli submit "$S/long.yaml") || fail "submit long"
workload_pid() { on_board 'pgrep -o -f /usr/bin/faultline-workload'; }
wait_until 120 workload_pid || fail "no workload started for job $longjob"
wcg=$(on_board 'cat /proc/$(pgrep -o -f /usr/bin/faultline-workload)/cgroup')
case $wcg in 0::/system.slice/faultline-agent.service/faultline/run-*) ;; *) fail "the run is in '$wcg'";; esac
max=$(on_board "cat /sys/fs/cgroup${wcg#0::}/memory.max")
[ "$max" = 134217728 ] || fail "the run's memory.max is $max, not 128M"
ctl=$(on_board 'cat /sys/fs/cgroup/system.slice/faultline-agent.service/cgroup.subtree_control /sys/fs/cgroup/system.slice/faultline-agent.service/faultline/cgroup.subtree_control' | tr '\n' ' ')
grep -Eq 'memory.* .*memory' <<<"$ctl" || fail "memory is not enabled down to the runs: subtree_control '$ctl'"
t0=$EPOCHREALTIME
on_board 'systemctl stop faultline-agent' || fail "systemctl stop"
took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
on_board 'pgrep -f /usr/bin/faultline-workload' && fail "a workload survived systemctl stop"
on_board 'test ! -e /sys/fs/cgroup/system.slice/faultline-agent.service' || fail "the unit's cgroup is left after stop"
awk -v t="$took" 'BEGIN { exit !(t < 55) }' || fail "stop took $took s (TimeoutStopSec is 60 s: SIGKILL)"
pass "a run lives in ${wcg#0::} (memory.max 128M, memory enabled at each level); systemctl stop mid-run: done in $took s, no workload and no cgroup left"
on_board 'systemctl start faultline-agent' || fail "systemctl start"
wait_until 120 online_on "$running" || fail "the agent did not come back online after start"
cli cancel "$longjob" >/dev/null 2>&1 || true
pass "systemctl start: online again on $running"

# ------------------------------------------------ 5. the CLI and the controller ----
# Their packages for this arch by apt beside the agent's (postinst: the system user, the
# controller's unit enabled and started: it fails once, unconfigured). The board's
# controller runs its unit as packaged (TLS, 0.0.0.0:50051 and :8080) on the host's
# database, beside the host's controller.
t0=$SECONDS
BOARD_TIMEOUT=600 on_board "DEBIAN_FRONTEND=noninteractive apt-get install -y /var/tmp/$(basename "$cli_deb") /var/tmp/$(basename "$controller_deb") </dev/null" \
  >"$S/apt-more.log" 2>&1 || { tail -20 "$S/apt-more.log" >&2; fail "apt install of the CLI and controller packages on the board"; }
apt_more_s=$((SECONDS - t0))
on_board 'id -u faultline' >/dev/null || fail "the controller's package made no system user"
on_board 'faultline report --from /var/tmp/ab-report.json --format mail | cmp - /var/tmp/ab-report.mail' ||
  fail "the board's CLI renders the saved report differently from the golden file"
test_tls "$S/tls"
put "$S/tls/server.pem" 640 /etc/faultline/controller/server.pem
put "$S/tls/server.key" 640 /etc/faultline/controller/server.key
put "$S/tls/ca.pem" 644 /var/tmp/ca.pem
on_board "chgrp faultline /etc/faultline/controller/server.pem /etc/faultline/controller/server.key &&
  sed -i 's|^#FAULTLINE_DATABASE_URL=.*|FAULTLINE_DATABASE_URL=${url/127.0.0.1/10.0.2.2}|' /etc/faultline/controller/controller.env &&
  systemctl reset-failed faultline-controller; systemctl restart faultline-controller" ||
  fail "configuring the board's controller"
board_ready() { on_board 'curl -fsS http://127.0.0.1:8080/readyz'; }
wait_until 300 board_ready || fail "the board's controller never answered /readyz: $(on_board 'journalctl -b -o cat -u faultline-controller --no-pager | tail -5')"
ctl_user=$(on_board 'ps -o user= -p "$(systemctl show -P MainPID faultline-controller)"')
[ "$ctl_user" = faultline ] || fail "the board's controller runs as '$ctl_user'"
btoken=$(on_board 'set -a; . /etc/faultline/controller/controller.env; faultline-controller tokens create --name board-user --role user') ||
  fail "tokens create by the board's controller binary"
on_board "FAULTLINE_CONTROLLER=127.0.0.1:50051 FAULTLINE_TOKEN=$btoken faultline --tls-ca /var/tmp/ca.pem agents" >"$S/board-agents.txt" ||
  fail "the board's CLI through the board's controller: $(cat "$S/board-agents.txt")"
awk -v b="$board" '$1 == b && /online/ { f = 1 } END { exit !f }' "$S/board-agents.txt" ||
  fail "the board's controller does not list $board online: $(cat "$S/board-agents.txt")"
on_board 'systemctl stop faultline-controller' || fail "systemctl stop faultline-controller"
ctl_end=$(on_board 'for p in ActiveState Result ExecMainStatus; do systemctl show -P $p faultline-controller; done | tr "\n" " "')
[ "$ctl_end" = "inactive success 0 " ] || fail "the board's controller after stop: $ctl_end"
pass "apt install of $(basename "$cli_deb") and $(basename "$controller_deb") on the board in $apt_more_s s: the CLI's mail report equals the golden file; the controller (user $ctl_user, TLS, $(dpkg-deb -f "$controller_deb" Depends | grep -o 'libpqxx-[0-9.]*')) answered /readyz and listed $board online to the board's CLI; stopped: $ctl_end"

# ------------------------------------------------ power off ----
on_board 'systemctl poweroff' >/dev/null 2>&1 || true
t0=$SECONDS
while kill -0 "$QEMU_PID" 2>/dev/null && [ $((SECONDS - t0)) -lt 120 ]; do sleep 0.5; done
kill -0 "$QEMU_PID" 2>/dev/null && fail "the board did not power off within 120 s"
QEMU_PID=""
pass "systemctl poweroff: the board went down in $((SECONDS - t0)) s"
