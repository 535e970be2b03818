#!/usr/bin/env bash
# The kernel-build e2e tests' common stage (sourced after lib.sh by kernel_build_test.sh and
# kernel_s3_test.sh): a small stand-in for a Linux tree (real git; its Makefile answers
# kbuild's targets in milliseconds), patch mails, a builder (an agent with `builder:`), a
# simulated board that boots what it is given with a `command` script (release and boot id
# in files; a kernel released as 6.12.0-hangs "hangs" and the board comes back on its stock
# kernel with a console in pstore; one whose image holds SLOWMARK runs the board's agent and
# workloads on one CPU, throttled to a quarter of it in a cpu cgroup the cleanup removes),
# the A/B spec, and the cleanup. Defines:
#   kb_make_tree            $tree, $FL_STATE/{lab.config,fix.mbox,stale.mbox}
#   kb_start_builder NAME   an agent that builds for this arch (and KB_BUILDER_ARCHES), in a
#                           session of its own (BUILDER_PID); builder-1's make can be slowed
#                           (FL_FAKE_SLOW)
#   kb_start_board          sim-board (KB_BUILT_EXTRA: more built_kernels keys, "k: v, ...")
#   spec NAME SERIES [EXTRA] the A/B job spec (vanilla from $tree, patched = vanilla + SERIES)
#   sql, job_state, job_state_is, job_final, kb_cleanup (trap it)
board_dir=$FL_STATE/board
mkdir -p "$board_dir/state" "$FL_STATE/work" "$FL_STATE/builder"
agent_pid() { cat "$board_dir/agent.pid" 2>/dev/null || true; }
e2e_diagnose() {
  sql "SELECT id, label, arch, state, coalesce(error, '') FROM builds ORDER BY id" >&2 || true
  sql "SELECT id, job_id, kernel, state, coalesce(board, ''), coalesce(failure_reason, '') FROM runs ORDER BY id" >&2 || true
  sql "SELECT name, health, health_reason, bootable_kernel_labels FROM boards" >&2 || true
  cat "$board_dir/boots.log" >&2 2>/dev/null || true
}
kb_cleanup() {
  set +e
  e2e_stop_sim_board "$board_dir"
  [ -n "${BUILDER_PID:-}" ] && kill -KILL -- "-$BUILDER_PID" 2>/dev/null
  [ -n "${HTTP_PID:-}" ] && fl_stop_pid "$HTTP_PID"
  [ -n "${RGW_DIR:-}" ] && "$FL_ROOT/tests/support/radosgw.sh" stop "$RGW_DIR" >/dev/null 2>&1
  fl_stop_all
  if [ -n "${slow_cpu_cgroup:-}" ] && [ -d "$slow_cpu_cgroup" ]; then
    while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$slow_cpu_cgroup/cgroup.procs"
    for _ in $(seq 100); do rmdir "$slow_cpu_cgroup" 2>/dev/null && break; sleep 0.1; done
  fi
  [ -n "${FL_KEEP_STATE:-}" ] || rm -rf "$FL_STATE"
}
sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }
job_state() { sql "SELECT state FROM jobs WHERE id = $1"; }
job_state_is() { [ "$(job_state "$1")" = "$2" ]; }
job_final() { case $(job_state "$1") in succeeded|failed|cancelled) return 0 ;; esac; return 1; }

if [ ! -d /sys/fs/cgroup/memory ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "SKIP: no memory cgroup controller on this machine"; exit 77
fi
command -v git >/dev/null || { echo "SKIP: git not installed"; exit 77; }


# x86_image FILE RELEASE: a file with an x86 boot image header ("HdrS" at 0x202,
# kernel_version at 0x20e -> 0x300), enough for a builder's checks and the simulated board.
x86_image() {
python3 - "$1" "$2" <<'PY'
import sys
b = bytearray(0x3000)
b[0x202:0x206] = b"HdrS"
b[0x20e], b[0x20f] = 0x00, 0x01
v = sys.argv[2].encode() + b" (ci@faultline) #1 SMP"
b[0x300:0x300 + len(v)] = v
open(sys.argv[1], "wb").write(bytes(b))
PY
}

kb_make_tree() {
tree=$FL_STATE/linux
mkdir -p "$tree/mm" "$tree/scripts/kconfig"
cat >"$tree/Makefile" <<'MK'
O ?= .
tinyconfig defconfig:
	@mkdir -p $(O) && cp $(CURDIR)/base.config $(O)/.config
olddefconfig:
	@true
bzImage:
	@test -z "$(FL_FAKE_SLOW)" || ! test -f "$(FL_FAKE_SLOW)" || sleep 120
	@mkdir -p $(O)/arch/x86/boot && cat $(CURDIR)/mm/memory.c $(O)/.config > $(O)/arch/x86/boot/bzImage
	@echo "Linux version 6.12.0$(LOCALVERSION)" >> $(O)/arch/x86/boot/bzImage
	@echo "  BUILD   arch/x86/boot/bzImage"
Image:
	@while test -n "$(FL_FAKE_SLOW)" && test -f "$(FL_FAKE_SLOW)-Image"; do sleep 0.2; done
	@mkdir -p $(O)/arch/$(ARCH)/boot && cat $(CURDIR)/mm/memory.c $(O)/.config > $(O)/arch/$(ARCH)/boot/Image
	@echo "Linux version 6.12.0$(LOCALVERSION)" >> $(O)/arch/$(ARCH)/boot/Image
kernelrelease:
	@echo 6.12.0$(LOCALVERSION)
MK
printf 'CONFIG_%s=y\n' CGROUPS MEMCG SWAP ZRAM KEXEC RELOCATABLE PERF_EVENTS TRACING VM_EVENT_COUNTERS BLK_DEV_INITRD >"$tree/base.config"
printf '// mm\nint a;\nint b;\nint c;\n' >"$tree/mm/memory.c"
cat >"$tree/scripts/kconfig/merge_config.sh" <<'SH'
#!/bin/sh
# -m -O DIR BASE FRAGMENT...: the fragments appended (later lines win in this stand-in)
shift; shift; shift; base=$1; shift
cat "$@" >>"$base"
SH
chmod +x "$tree/scripts/kconfig/merge_config.sh"
git -C "$tree" init -q && git -C "$tree" add -A &&
  git -C "$tree" -c user.name=t -c user.email=t@t commit -qm base && git -C "$tree" tag v6.12
echo "CONFIG_VIRTIO_BLK=y" >"$FL_STATE/lab.config"
mail() {  # SUBJECT FROM TO: a one-hunk patch of mm/memory.c as git format-patch writes it
  printf 'From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\nFrom: Dev <dev@example.org>\nSubject: %s\n\nWhy.\n---\ndiff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n@@ -2,3 +2,3 @@\n int a;\n-%s\n+%s\n int c;\n-- \n2.39.5\n' "$1" "$2" "$3"
}
mail "[PATCH] mm: b becomes B" "int b;" "int B;" >"$FL_STATE/fix.mbox"
mail "[PATCH] mm: x becomes y" "int x;" "int y;" >"$FL_STATE/stale.mbox"

}

kb_start_builder() {  # NAME
cat >"$FL_STATE/builder/$1.yaml" <<YAML
board: $1
work_dir: $FL_STATE/builder/$1-work
state_dir: $FL_STATE/builder/$1-state
token_file: $(fl_agent_token "$1")
kernels: [{label: builder-host, release: running}]
builder: {arches: [$(uname -m)${KB_BUILDER_ARCHES:+, $KB_BUILDER_ARCHES}], cache: $FL_STATE/builder/$1-cache, jobs: 1,
          sandbox_pass_env: [FL_FAKE_SLOW], sandbox_readonly: [$FL_STATE/slow.d]}
YAML
# In a session of its own (setsid): killing it "mid-build" kills its make too.
# builder-1 only: its make sleeps while $FL_STATE/slow.d/slow exists (a build to kill
# midway), and an arm64 or riscv `Image` while slow.d/slow-Image does; its sandbox sees that
# directory, read-only, and the variable naming it. KB_BUILDER_ARCHES: arches it builds
# besides the host's, with a stand-in cross compiler (fakebin/: only `--version`; the
# stand-in tree compiles nothing).
mkdir -p "$FL_STATE/fakebin"
for cross in aarch64-linux-gnu riscv64-linux-gnu x86_64-linux-gnu; do
  printf '#!/bin/sh\necho "%s-gcc (faultline stand-in) 12.2.0"\n' "$cross" >"$FL_STATE/fakebin/$cross-gcc"
  chmod +x "$FL_STATE/fakebin/$cross-gcc"
done
mkdir -p "$FL_STATE/slow.d"
slow=""
[ "$1" = builder-1 ] && slow=$FL_STATE/slow.d/slow
FL_FAKE_SLOW=$slow PATH="$FL_STATE/fakebin:$PATH" setsid "$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" \
  --config "$FL_STATE/builder/$1.yaml" --workload-binary "$FL_BIN_WORKLOAD" \
  >>"$FL_STATE/$1.log" 2>&1 </dev/null &
BUILDER_PID=$!
fl_wait_for "$1 to register" fl_agent_online "$1" || fail "$1 did not register"

}

kb_start_board() {
# The slow kernel's cpu cgroup (v1 only: on v2 a cgroup of the agent's own would move the
# workloads' memory cgroups too).
slow_cpu_cgroup=/sys/fs/cgroup/cpu/faultline-e2e-slow-$$
[ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cgroup.procs ] || slow_cpu_cgroup=/nonexistent/cpu
echo 6.1.0-sim-stock >"$board_dir/release"
cat /proc/sys/kernel/random/uuid >"$board_dir/boot_id"
cat >"$board_dir/start-agent.sh" <<SH
#!/usr/bin/env bash
[ ! -e "$board_dir/halted" ] || exit 0  # the test is over (e2e_stop_sim_board)
# A kernel whose image says SLOWMARK "runs" the board on one CPU, and where the cgroup v1 cpu
# controller is at hand at a quarter of it (bisect_test.sh's regression: on a 2-core machine
# busy with the controller and PostgreSQL, one CPU alone was only 20-35% slower, within
# the night-to-night noise). Every other kernel gets every online CPU and all of its time
# back (the agent that boots it was pinned and throttled).
pin=(taskset -c "\$(cat /sys/devices/system/cpu/online)")
if [ -d "$slow_cpu_cgroup" ] || mkdir "$slow_cpu_cgroup" 2>/dev/null; then
  echo 25000 >"$slow_cpu_cgroup/cpu.cfs_quota_us"
  echo \$\$ >"$(dirname "$slow_cpu_cgroup")/cgroup.procs"
fi
if [ -f "$board_dir/one-cpu" ]; then
  pin=(taskset -c 0)
  [ -d "$slow_cpu_cgroup" ] && echo \$\$ >"$slow_cpu_cgroup/cgroup.procs"
fi
"\${pin[@]}" "$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" --config "$board_dir/agent.yaml" \
  --workload-binary "$FL_BIN_WORKLOAD" >>"$FL_STATE/agent.log" 2>&1 </dev/null &
echo \$! >"$board_dir/agent.pid"
SH
cat >"$board_dir/boot.sh" <<SH
#!/usr/bin/env bash
set -eu
echo "\$FAULTLINE_KERNEL_LABEL \$FAULTLINE_KERNEL_RELEASE \$(sha256sum <"\$FAULTLINE_KERNEL_IMAGE" | cut -c1-64)" >>"$board_dir/boots.log"
release=\$FAULTLINE_KERNEL_RELEASE
if grep -q SLOWMARK "\$FAULTLINE_KERNEL_IMAGE"; then touch "$board_dir/one-cpu"; else rm -f "$board_dir/one-cpu"; fi
if [ "\$release" = 6.12.0-hangs ]; then
  # This kernel hangs at its first disk read: the watchdog powers the board on again with
  # its default kernel; ramoops kept the console.
  mkdir -p "$board_dir/pstore"
  printf '[    0.000000] Linux version 6.12.0-hangs\n[    1.234567] virtio_blk virtio1: [vda] 2097152 512-byte logical blocks\n[  121.000000] INFO: task init:1 blocked for more than 120 seconds.\n' >"$board_dir/pstore/console-ramoops-0"
  release=6.1.0-sim-stock
fi
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
pstore_dir: $board_dir/pstore
kernels: [{label: stock, release: 6.1.0-sim-stock, boot: none}]
built_kernels: {dir: $board_dir/kernels, max_size: 64M, boot: command, command: [$board_dir/boot.sh]${KB_BUILT_EXTRA:+, $KB_BUILT_EXTRA}}
YAML
"$board_dir/start-agent.sh"
fl_wait_for "the board to register" fl_agent_online sim-board || fail "board did not register"
}

spec() {  # NAME SERIES [EXTRA]: the A/B job spec with the patched label's series
  cat <<YAML
name: $1
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
boards: [sim-board]
kernels:
  vanilla: {tree: $tree, ref: v6.12, config: {base: tinyconfig, fragments: [lab.config]}}
  patched: {from: vanilla, series: [$2]}
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
${3:-}
YAML
}
