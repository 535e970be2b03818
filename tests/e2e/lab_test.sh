#!/usr/bin/env bash
# End to end on the virtual board lab (deploy/lab): three qemu TCG boards (x86_64,
# aarch64, riscv64) with pinned Debian kernels, each agent switching kernels for real.
#   - every board runs an A/B study (vanilla vs patched; a tiny filemap-thrash and a tiny
#     swap-in on the agent's zram swap; 2 repetitions in blocks of 1), all boards at once;
#   - every result records the release it ran on; per board the two labels' releases are
#     the lab's and differ; results on a 6.12 guest carry the v2 memcg limit;
#   - at least one kexec switch on each board and one host-side power-cycle switch (the
#     x86_64 board's `patched` uses boot: command -> lab-power -> the supervisor);
#   - a kernel that never comes up (x86_64 `broken`: panics, the supervisor powers the
#     board on with its default kernel) -> needs-check; lab.sh clear-needs-check -> ok.
# Prints boot, switch and study times per board. The agents of aarch64 and riscv64 are the
# cross-built bundles (scripts/cross-build-agent.sh -> build-cross/<triple>/bundle, or
# FL_LAB_BUNDLE_<arch>); a missing one fails the test.
# Usage: lab_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
# Env: FL_LAB_CACHE (downloads, kept), FL_LAB_TEST_TIMEOUT (s, for the studies; 1200),
#      FL_LAB_TEST_KEEP=1 (keep the state directory), FL_LAB_TEST_ARCHES (default all three)
set -euo pipefail

# shellcheck source=tests/e2e/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh" "$@"
ARCHES=${FL_LAB_TEST_ARCHES:-x86_64 aarch64 riscv64}
T_START=$T0
lab_need qemu-system-x86_64:qemu-system-x86 qemu-system-aarch64:qemu-system-arm \
  qemu-system-riscv64:qemu-system-misc debugfs:e2fsprogs mke2fs:e2fsprogs cpio:cpio \
  zstd:zstd readelf:binutils psql:postgresql-client file:file
for arch in $ARCHES; do
  [ "$arch" = x86_64 ] && continue
  var=FL_LAB_BUNDLE_$arch
  bundle=${!var:-${FAULTLINE_CROSS_BUILD_DIR:-$ROOT/build-cross}/$arch-linux-gnu/bundle}
  [ -x "$bundle/opt/faultline/bin/faultline-agent" ] && [ -x "$bundle/opt/faultline/bin/faultline-workload" ] || {
    echo "FAIL: no cross-built agent bundle for $arch in $bundle (scripts/cross-build-agent.sh $arch)" >&2; exit 1; }
done
lab_state lab
lab_diagnose() {
  sql "SELECT id, name, state FROM jobs ORDER BY id"
  sql "SELECT name, health, health_reason, kernel_switches, running_kernel_label FROM boards ORDER BY name"
  sql "SELECT r.id, r.job_id, r.kernel, r.state, coalesce(r.board, ''), coalesce(r.failure_reason, '') FROM runs r ORDER BY r.id"
  "$LAB" timings
}

# --- the lab: stack + three boards, concurrently ---------------------------------------------
T_UP=$EPOCHREALTIME
"$LAB" up --arches "${ARCHES// /,}" >"$S/up.env" 2>"$S/up.log" || { cat "$S/up.log" >&2; fail "lab.sh up"; }
T_UP_END=$EPOCHREALTIME
# shellcheck source=/dev/null
. "$S/up.env"
for arch in $ARCHES; do
  "$FL_BIN_CLI" agents | awk -v b="lab-$arch" '$1 == b && / online / && / vanilla \(/' | grep -q . ||
    fail "lab-$arch is not online running vanilla"
done
grep 'online .* after power-on\|disks ready' "$S/up.log" | sed 's/^\[faultline-lab\] /  /'
pass "lab up in $(secs "$T_UP" "$T_UP_END") s: $(echo "$ARCHES" | wc -w) boards online on vanilla"

board_release() { cat "$FL_LAB_STATE/up/lab-$1/boot/release-$2"; }
job_state() { sql "SELECT state FROM jobs WHERE id = $1"; }
health() { sql "SELECT health FROM boards WHERE name = '$1'"; }

# --- A/B studies on every board at once ------------------------------------------------------
declare -A JOBS=() T_SUBMIT=() T_DONE=()
for arch in $ARCHES; do
  cat >"$S/ft-$arch.yaml" <<YAML
name: lab-ft-$arch
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
kernels: [vanilla, patched]
boards: [lab-$arch]
memcg: {memory_max: 128M, swap_max: 0}
params: {file_size: 2M}
matrix: {threads: [2]}
events: [calls:handle_mm_fault, sw:page-faults]
YAML
  cat >"$S/swap-$arch.yaml" <<YAML
name: lab-swap-$arch
benchmark: swap-in
duration: 1s
repetitions: 2
block_size: 1
kernels: [vanilla, patched]
boards: [lab-$arch]
memcg: {memory_max: 128M, swap_max: max}
params: {region_size: 16M, readers: 1, pageout_threads: 1}
YAML
  T_SUBMIT[$arch]=$EPOCHREALTIME
  JOBS[$arch]="$("$FL_BIN_CLI" submit "$S/ft-$arch.yaml" 2>/dev/null) $("$FL_BIN_CLI" submit "$S/swap-$arch.yaml" 2>/dev/null)" ||
    fail "submit for $arch"
done
pass "submitted: $(for a in $ARCHES; do printf '%s jobs %s; ' "$a" "${JOBS[$a]}"; done)"

# Polls until every board's jobs ended; the broken-kernel check runs on x86_64 as soon as
# its studies are done, while the other boards go on.
BROKEN_DONE=0
[[ " $ARCHES " == *" x86_64 "* ]] || BROKEN_DONE=1
deadline=$(( $(date +%s) + ${FL_LAB_TEST_TIMEOUT:-1200} ))
pending=$ARCHES
while [ -n "$pending" ]; do
  still=""
  for arch in $pending; do
    done_all=1
    for j in ${JOBS[$arch]}; do
      st=$(job_state "$j")
      case $st in
        succeeded) ;;
        failed|cancelled) fail "job $j ($arch) ended $st" ;;
        *) done_all=0 ;;
      esac
    done
    if [ "$done_all" = 1 ]; then
      T_DONE[$arch]=$EPOCHREALTIME
      echo "  $arch: studies done in $(secs "${T_SUBMIT[$arch]}") s"
    else
      still="$still $arch"
    fi
  done
  pending=$still
  if [ "$BROKEN_DONE" = 0 ] && [ -n "${T_DONE[x86_64]:-}" ]; then
    # --- a kernel that never comes up -> needs-check -> cleared ------------------------------
    cat >"$S/broken.yaml" <<'YAML'
name: lab-broken
benchmark: filemap-thrash
duration: 1s
repetitions: 1
kernels: [broken]
boards: [lab-x86_64]
memcg: {memory_max: 128M}
params: {file_size: 2M}
matrix: {threads: [2]}
YAML
    T_B=$EPOCHREALTIME
    broken=$("$FL_BIN_CLI" submit "$S/broken.yaml" 2>/dev/null) || fail "submit broken"
    bdeadline=$(( $(date +%s) + 300 ))
    until [ "$(health lab-x86_64)" = needs-check ]; do
      [ "$(date +%s)" -lt "$bdeadline" ] || fail "lab-x86_64 not needs-check 300 s after the broken kernel was asked for"
      sleep 1
    done
    T_NC=$EPOCHREALTIME
    reason=$(sql "SELECT health_reason FROM boards WHERE name = 'lab-x86_64'")
    expect="switch to 'broken' came back running $(board_release x86_64 vanilla), expected $(board_release x86_64 vanilla)-broken"
    [ "$reason" = "$expect" ] || fail "needs-check reason: '$reason', expected '$expect'"
    "$FL_BIN_CLI" agents | grep -q "^lab-x86_64 .*needs-check: switch to 'broken'" || fail "faultline agents does not show the needs-check"
    grep -q 'FLLAB-HOST launch [0-9]* label=vanilla .*reason=fallback' "$FL_LAB_STATE/up/lab-x86_64/console.log" ||
      fail "no fallback power-on of the default kernel on lab-x86_64's console"
    [ "$(sql "SELECT state FROM runs WHERE job_id = $broken")" = queued ] || fail "the broken job's run did not wait"
    pass "broken kernel: the board fell back to vanilla and is needs-check after $(secs "$T_B" "$T_NC") s ($reason)"
    "$FL_BIN_CLI" cancel "$broken" >/dev/null || fail "cancel $broken"
    T_C=$EPOCHREALTIME
    "$LAB" clear-needs-check lab-x86_64 2>>"$S/clear.log" || { cat "$S/clear.log" >&2; fail "lab.sh clear-needs-check"; }
    [ "$(health lab-x86_64)" = ok ] || fail "lab-x86_64 health $(health lab-x86_64) after clearing"
    grep -q 'FLLAB needs-check-cleared' "$FL_LAB_STATE/up/lab-x86_64/console.log" || fail "the guest did not clear the check"
    pass "lab.sh clear-needs-check: lab-x86_64 ok again after $(secs "$T_C") s"
    BROKEN_DONE=1
    continue
  fi
  [ -n "$pending" ] || break
  [ "$(date +%s)" -lt "$deadline" ] || fail "studies not done after ${FL_LAB_TEST_TIMEOUT:-1200} s on:$pending"
  sleep 2
done
[ "$BROKEN_DONE" = 1 ] || fail "the broken-kernel check did not run"
pass "every board's A/B studies succeeded"

# --- what the results say ---------------------------------------------------------------------
for arch in $ARCHES; do
  b=lab-$arch jobs=${JOBS[$arch]// /,}
  n=$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id IN ($jobs)")
  [ "$n" = 8 ] || fail "$b: $n results, expected 8 (2 jobs x 2 kernels x 2 repetitions)"
  missing=$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id
                 WHERE r.job_id IN ($jobs) AND coalesce(res.environment->>'kernel.release', '') = ''")
  [ "$missing" = 0 ] || fail "$b: $missing results without kernel.release"
  for label in vanilla patched; do
    rels=$(sql "SELECT string_agg(DISTINCT res.environment->>'kernel.release', ',') FROM results res
                JOIN runs r ON r.id = res.run_id WHERE r.job_id IN ($jobs) AND r.kernel = '$label'")
    [ "$rels" = "$(board_release "$arch" "$label")" ] || fail "$b $label results ran on '$rels', expected $(board_release "$arch" "$label")"
    [ "$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id
              WHERE r.job_id IN ($jobs) AND r.kernel = '$label' AND res.board = '$b'")" = 4 ] || fail "$b: $label results not on $b"
  done
  [ "$(board_release "$arch" vanilla)" != "$(board_release "$arch" patched)" ] || fail "$b: both labels have one release"
  accel=$(sql "SELECT string_agg(DISTINCT res.environment->>'virt.accel', ',') FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id IN ($jobs)")
  [ "$accel" = tcg ] || fail "$b: virt.accel '$accel', expected tcg"
  swaps=$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id JOIN jobs j ON j.id = r.job_id
               WHERE r.job_id IN ($jobs) AND j.benchmark = 'swap-in' AND res.environment->>'swap.devices' LIKE '%zram%'")
  [ "$swaps" = 4 ] || fail "$b: $swaps of 4 swap-in results ran with a zram swap device"
  # calls:handle_mm_fault (a kprobe per thread; Debian's kernels have the kprobe PMU): every
  # fault of the filemap study goes through handle_mm_fault, retries twice.
  calls=$(sql "SELECT count(*) || ' ' || coalesce(round(min((res.counters->>'perf.calls:handle_mm_fault')::float8
                 / nullif((res.counters->>'perf.sw:page-faults')::float8, 0))::numeric, 2), -1) || ' '
                 || coalesce(round(max((res.counters->>'perf.calls:handle_mm_fault')::float8
                 / nullif((res.counters->>'perf.sw:page-faults')::float8, 0))::numeric, 2), -1)
               FROM results res JOIN runs r ON r.id = res.run_id JOIN jobs j ON j.id = r.job_id
               WHERE r.job_id IN ($jobs) AND j.benchmark = 'filemap-thrash'
                 AND (res.counters->>'perf.calls:handle_mm_fault')::float8 > 0")
  read -r n_calls lo hi <<<"$calls"
  [ "$n_calls" = 4 ] || fail "$b: $n_calls of 4 filemap results counted calls:handle_mm_fault ($(sql "SELECT DISTINCT res.environment->>'perf.unsupported.calls:handle_mm_fault' FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id IN ($jobs)"))"
  awk -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(lo >= 0.9 && hi <= 2) }' ||
    fail "$b: calls:handle_mm_fault per sw:page-faults $lo..$hi, expected within 0.9..2"
  # Where the kernel refused a probe on ftrace's patch site (riscv64's 6.12 has no
  # KPROBES_ON_FTRACE) the agent probes past it and says so.
  how=$(sql "SELECT string_agg(DISTINCT (res.environment->>'kernel.release') || ': '
                || (res.environment->>'perf.how.calls:handle_mm_fault'), '; ')
             FROM results res JOIN runs r ON r.id = res.run_id
             WHERE r.job_id IN ($jobs) AND res.environment ? 'perf.how.calls:handle_mm_fault'")
  pass "$b: 8 results; vanilla on $(board_release "$arch" vanilla), patched on $(board_release "$arch" patched); virt.accel tcg; swap-in on zram; handle_mm_fault calls per fault $lo..$hi${how:+ ($how)}"
done
v2=$(sql "SELECT res.board || ' ' || (res.environment->>'kernel.release') FROM results res
          WHERE res.environment->>'kernel.release' LIKE '6.12.%' AND res.environment->>'cgroup.version' = '2'
            AND res.environment->>'memcg.memory_max' = 'memory.max=134217728' LIMIT 1")
[ -n "$v2" ] || fail "no result on a 6.12 guest with cgroup v2 and memory.max=134217728"
pass "v2 memcg limit on a 6.12 guest: memory.max=134217728 in a result of $v2"

# --- switches: kexec on every board, host-side power control on x86_64 -----------------------
"$LAB" timings >"$S/timings.txt"
for arch in $ARCHES; do
  b=lab-$arch
  k=$(awk -v b="$b" '$1 == b && $2 == "switch" && $3 == "kexec" && $7 == "ok"' "$S/timings.txt" | wc -l)
  p=$(awk -v b="$b" '$1 == b && $2 == "switch" && $3 == "power-cycle" && $7 == "ok"' "$S/timings.txt" | wc -l)
  db=$(sql "SELECT kernel_switches FROM boards WHERE name = '$b'")
  [ "$k" -ge 1 ] || fail "$b: no verified kexec switch"
  [ "$arch" != x86_64 ] || [ "$p" -ge 1 ] || fail "$b: no verified host-side (power-cycle) switch"
  [ "$db" -ge $((k + p)) ] || fail "$b: controller counts $db switches, the console $((k + p))"
  pass "$b: $k kexec and $p host-side switches verified (controller: $db switches)"
done

# --- timings ------------------------------------------------------------------------------------
echo "== timings (host seconds; boot: power-on -> agent start, switch: ordered -> verified on the new kernel)"
awk '{ printf "  %-12s %-6s %-17s %-8s %6s s  %s %s\n", $1, $2, $3, $4, $5, $6, $7 }' "$S/timings.txt"
for arch in $ARCHES; do
  awk -v b="lab-$arch" -v a="$arch" '$1 == b && $2 == "switch" && $7 == "ok" { n[$3]++; s[$3] += $5 }
    END { for (m in n) printf "  %s: %d %s switches, mean %.1f s\n", a, n[m], m, s[m] / n[m] }' "$S/timings.txt"
  echo "  $arch: studies (2 jobs, 8 runs) $(secs "${T_SUBMIT[$arch]}" "${T_DONE[$arch]}") s"
done
echo "  lab up (disks + boots): $(secs "$T_UP" "$T_UP_END") s; total: $(secs "$T_START") s"
echo "PASS: lab e2e"
