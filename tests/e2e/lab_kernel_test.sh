#!/usr/bin/env bash
# End to end on the virtual lab with kernels built from source: Debian's linux-source-6.12
# as a git tree (deploy/kernel/linux-tree.sh), tinyconfig + deploy/kernel/board.config,
# vanilla and patched = vanilla + a one-line x86 change whose counter effect is certain
# (deploy/kernel/series/ci-x86-faults-take-mmap-lock.mbox: every user fault takes
# mmap_lock). A host builder (lab.sh up --builder) builds both; the x86_64 board fetches
# each image from the controller, kexecs it, and runs an A/B filemap-thrash with the
# mmap_lock tracepoint counted. Checks: two builds (the second incremental), each run on
# its build's release, and perf.mmap_lock:mmap_lock_start_locking per round significantly
# higher on patched (ratio > 10); every run profiled (#46), and the lock path's frames
# changed significantly: lock_vma_under_rcu down, lock_mm_and_find_vma up. Throughput under
# TCG is not evidence; the counter and the frames are.
# Prints each build's time and size, the fetch and switch times.
# Usage: lab_kernel_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
# Env: FL_LAB_KBUILD_CACHE (the builder's cache, kept: /var/cache/faultline-kbuild),
#      FL_LAB_TEST_KEEP=1 (keep the lab's state directory)
set -euo pipefail

# shellcheck source=tests/e2e/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh" "$@"
export FL_LAB_KBUILD_CACHE=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
lab_need qemu-system-x86_64:qemu-system-x86 debugfs:e2fsprogs cpio:cpio zstd:zstd \
  psql:postgresql-client flex:flex bison:bison bc:bc git:git
lab_state labk
lab_diagnose() {
  sql "SELECT id, label, arch, state, coalesce(builder, ''), left(coalesce(error, ''), 2000) FROM builds ORDER BY id"
  sql "SELECT name, health, health_reason, running_kernel_labels FROM boards ORDER BY name"
  sql "SELECT r.id, r.kernel, r.state, coalesce(r.failure_reason, '') FROM runs r ORDER BY r.id"
}

T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$FL_LAB_KBUILD_CACHE/linux-6.12") || fail "linux-tree.sh"
ref=$(git -C "$tree" describe --tags --exact-match HEAD) || fail "no tag in $tree"
pass "tree $tree at $ref ($(secs "$T") s)"

T=$EPOCHREALTIME
"$LAB" up --arches x86_64 --builder >"$S/up.env" 2>"$S/up.log" || { cat "$S/up.log" >&2; fail "lab.sh up"; }
# shellcheck source=/dev/null
. "$S/up.env"
pass "lab up with a builder in $(secs "$T") s"

cp "$ROOT/deploy/kernel/board.config" "$ROOT/deploy/kernel/series/ci-x86-faults-take-mmap-lock.mbox" "$S/"
cat >"$S/ab.yaml" <<YAML
name: lab-kernels-ci
benchmark: filemap-thrash
duration: 1s
repetitions: 20
block_size: 20
boards: [lab-x86_64]
kernels:
  vanilla: {tree: $tree, ref: $ref, config: {base: tinyconfig, fragments: [board.config]}}
  patched: {from: vanilla, series: [ci-x86-faults-take-mmap-lock.mbox], include: ["arch/x86/*"]}
events: [mmap_lock:mmap_lock_start_locking, sw:page-faults]
memcg: {memory_max: 128M, swap_max: 0}
params: {file_size: 2M, threads: 2}
profile: {frequency_hz: 499}
YAML
T=$EPOCHREALTIME
job=$("$FL_BIN_CLI" submit "$S/ab.yaml") || fail "submit"
job_state() { sql "SELECT state FROM jobs WHERE id = $job"; }
builds_done() { [ "$(sql "SELECT count(*) FROM builds WHERE state IN ('done', 'failed')")" = 2 ]; }
deadline=$(( $(date +%s) + ${FL_LAB_TEST_TIMEOUT:-2700} ))
until builds_done; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "builds not done in time"
  sleep 5
done
[ "$(sql "SELECT count(*) FROM builds WHERE state = 'done'")" = 2 ] || fail "a build failed"
T_BUILT=$EPOCHREALTIME
until case $(job_state) in succeeded|failed|cancelled) true ;; *) false ;; esac; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "job $job not finished in time"
  sleep 5
done
[ "$(job_state)" = succeeded ] || fail "job $job: $(job_state)"
pass "job $job: built in $(secs "$T" "$T_BUILT") s, studied in $(secs "$T_BUILT") s"

"$FL_BIN_CLI" kernels --job "$job" | tee "$S/kernels.txt"
sql "SELECT label, outcome->>'release', round((outcome->>'build_seconds')::numeric), outcome->>'cached',
            outcome->>'image_bytes', outcome->>'compiler' FROM builds ORDER BY id" | tee "$S/builds.txt"
grep -h "event=kernel_fetched" "$FL_LAB_STATE"/up/lab-x86_64/console.log | sed 's/^.*event=/  event=/' || true
mismatched=$(sql "SELECT count(*) FROM runs r JOIN results res ON res.run_id = r.id JOIN builds b ON b.label = r.kernel
                  WHERE r.job_id = $job AND res.environment->>'kernel.release' <> b.outcome->>'release'")
[ "$mismatched" = 0 ] || fail "$mismatched results on another kernel than their build's"
[ "$(sql "SELECT count(*) FROM results res JOIN runs r ON r.id = res.run_id WHERE r.job_id = $job")" = 40 ] ||
  fail "40 results"
pass "40 results, each on its build's release"

"$FL_BIN_CLI" report "$job" --counters significant | tee "$S/report.txt"
"$FL_BIN_CLI" report "$job" --format csv --counters all >"$S/counters.csv" || fail "report csv"
row=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["counter"] == "perf.mmap_lock:mmap_lock_start_locking" {
    print $col["ratio"], $col["significant"], $col["baseline_median"], $col["candidate_median"], $col["ci_low"], $col["ci_high"] }' "$S/counters.csv")
read -r ratio significant base cand lo hi <<<"$row"
[ "$significant" = true ] || fail "mmap_lock_start_locking not significant: $row"
awk -v r="$ratio" 'BEGIN { exit !(r > 10) }' || fail "mmap_lock_start_locking ratio $ratio (expected > 10)"
pass "mmap_lock_start_locking per round: $base -> $cand (x$ratio, 95% CI $lo..$hi), significant"

# The profiles (#46): the lock path's frames changed, significantly, the way the patch says:
# no fault tries the per-VMA lock (lock_vma_under_rcu gone), every one takes mmap_lock
# (lock_mm_and_find_vma, under 0.5% of vanilla's samples, on every patched stack).
frame() {  # NAME: "significant change low high" of profile.total.NAME (change: ratio or difference)
  awk -F, -v n="profile.total.$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["counter"] == n { d = $col["difference"] != ""
      print $col["significant"], (d ? $col["difference"] : $col["ratio"]), (d ? $col["difference_low"] : $col["ci_low"]), (d ? $col["difference_high"] : $col["ci_high"]), (d ? "difference" : "ratio") }' "$S/counters.csv"
}
read -r sig change lo hi kind <<<"$(frame lock_vma_under_rcu)"
[ "$sig" = true ] || fail "profile.total.lock_vma_under_rcu not significant: $(frame lock_vma_under_rcu)"
awk -v h="$hi" -v k="$kind" 'BEGIN { exit !((k == "ratio" && h < 1) || (k == "difference" && h < 0)) }' ||
  fail "lock_vma_under_rcu did not drop: $kind $change [$lo, $hi]"
pass "lock_vma_under_rcu samples per round: $kind $change [$lo, $hi], significant"
read -r sig change lo hi kind <<<"$(frame lock_mm_and_find_vma)"
[ "$sig" = true ] || fail "profile.total.lock_mm_and_find_vma not significant: $(frame lock_mm_and_find_vma)"
awk -v l="$lo" -v k="$kind" 'BEGIN { exit !((k == "ratio" && l > 1) || (k == "difference" && l > 0)) }' ||
  fail "lock_mm_and_find_vma did not rise: $kind $change [$lo, $hi]"
pass "lock_mm_and_find_vma samples per round: $kind $change [$lo, $hi], significant"
echo "frames that changed significantly:"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["counter"] ~ /^profile\./ && $col["significant"] == "true" { print "  " $col["counter"], $col["ratio"], $col["difference"] }' "$S/counters.csv"
echo "total $(secs "$T0") s"
