#!/usr/bin/env bash
# The seed's own study on the virtual lab, every arch: "[RFC PATCH v5] mm: retry page faults
# once under the per-VMA lock" (deploy/kernel/series/) on Debian's linux-source-6.12,
# vanilla and patched built from source for x86_64, aarch64 and riscv64 by a host builder
# (tinyconfig + deploy/kernel/board.config; the series' x86, arm64 and riscv hunks only),
# each board kexecs each build and runs the filemap-thrash + munmap churn A/B of
# deploy/examples/seed-v5-built.yaml with the mmap_lock tracepoint counted. Checks: six
# builds done (the patched ones incremental), every result on its build's release, on every
# board; prints per arch the counters' comparison (the cover letter's "mmap_lock contention
# -98%" direction is mmap_lock_start_locking per round going down) and keeps the report,
# the builds and the timings in $FL_STUDY_OUT (default /var/tmp/faultline-seed-study).
# TCG: throughput is a functional check, not evidence; the counters are.
# Slow (cold: three kernel builds, then the study on three emulated boards): ctest label
# `study`, not part of the default run (`ctest -L study`).
# Usage: lab_seed_study_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
# Env: FL_LAB_KBUILD_CACHE (the builder's cache, kept: /var/cache/faultline-kbuild),
#      FL_STUDY_ARCHES (default x86_64,aarch64,riscv64), FL_LAB_TEST_KEEP=1
set -euo pipefail

# shellcheck source=tests/e2e/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh" "$@"
export FL_LAB_KBUILD_CACHE=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
ARCHES=${FL_STUDY_ARCHES:-x86_64,aarch64,riscv64}
OUT=${FL_STUDY_OUT:-/var/tmp/faultline-seed-study}
lab_need qemu-system-x86_64:qemu-system-x86 qemu-system-aarch64:qemu-system-arm \
  qemu-system-riscv64:qemu-system-misc aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu \
  riscv64-linux-gnu-gcc:gcc-riscv64-linux-gnu debugfs:e2fsprogs cpio:cpio zstd:zstd \
  psql:postgresql-client flex:flex bison:bison bc:bc git:git
IFS=, read -r -a arch_list <<<"$ARCHES"
for a in "${arch_list[@]}"; do
  [ "$a" = x86_64 ] && continue
  [ -x "$ROOT/build-cross/$a-linux-gnu/bundle/opt/faultline/bin/faultline-agent" ] || {
    echo "SKIP: no $a agent bundle (scripts/cross-build-agent.sh $a)"; exit 77; }
done
lab_state seed
mkdir -p "$OUT"
S=$OUT
lab_diagnose() {
  sql "SELECT id, label, arch, state, coalesce(builder, ''), left(coalesce(error, ''), 2000) FROM builds ORDER BY id"
  sql "SELECT name, health, health_reason, running_kernel_labels FROM boards ORDER BY name"
  sql "SELECT r.board, r.kernel, r.state, count(*), max(coalesce(r.failure_reason, '')) FROM runs r GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
}

T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$FL_LAB_KBUILD_CACHE/linux-6.12") || fail "linux-tree.sh"
ref=$(git -C "$tree" describe --tags --exact-match HEAD) || fail "no tag in $tree"
pass "tree $tree at $ref ($(secs "$T") s)"

T=$EPOCHREALTIME
"$LAB" up --arches "$ARCHES" --builder >"$S/up.env" 2>"$S/up.log" || { tail -40 "$S/up.log" >&2; fail "lab.sh up"; }
# shellcheck source=/dev/null
. "$S/up.env"
pass "lab up ($ARCHES) with a builder in $(secs "$T") s"

# The example spec with this tree's path and tag, its files next to it.
cp "$ROOT/deploy/kernel/board.config" "$ROOT/deploy/kernel/series/rfc-v5-retry-page-faults-once-under-vma-lock.mbox" "$S/"
sed -e "s|tree: /var/cache/faultline-kbuild/linux-6.12, ref: v6.12.[0-9]*|tree: $tree, ref: $ref|" \
    -e "s|\.\./kernel/board.config|board.config|" \
    -e "s|\.\./kernel/series/||" "$ROOT/deploy/examples/seed-v5-built.yaml" >"$S/study.yaml"
grep -q "tree: $tree, ref: $ref" "$S/study.yaml" || fail "could not point the spec at $tree"
T=$EPOCHREALTIME
job=$("$FL_BIN_CLI" submit "$S/study.yaml") || fail "submit"
nbuilds=$(( ${#arch_list[@]} * 2 ))
job_state() { sql "SELECT state FROM jobs WHERE id = $job"; }
builds_done() { [ "$(sql "SELECT count(*) FROM builds WHERE state IN ('done', 'failed')")" = "$nbuilds" ]; }
deadline=$(( $(date +%s) + ${FL_STUDY_TIMEOUT:-6600} ))
until builds_done; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "builds not done in time"
  sleep 10
done
[ "$(sql "SELECT count(*) FROM builds WHERE state = 'done'")" = "$nbuilds" ] || fail "a build failed"
T_BUILT=$EPOCHREALTIME
until case $(job_state) in succeeded|failed|cancelled) true ;; *) false ;; esac; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "job $job not finished in time"
  sleep 10
done
[ "$(job_state)" = succeeded ] || fail "job $job: $(job_state)"
pass "job $job: $nbuilds builds in $(secs "$T" "$T_BUILT") s, studied in $(secs "$T_BUILT") s"

"$FL_BIN_CLI" kernels --job "$job" | tee "$S/kernels.txt"
sql "SELECT label, arch, outcome->>'release', round((outcome->>'build_seconds')::numeric), outcome->>'cached',
            outcome->>'image_bytes' FROM builds ORDER BY arch, id" | tee "$S/builds.txt"
for c in "$FL_LAB_STATE"/up/lab-*/console.log; do
  grep -h "event=kernel_fetched" "$c" | sed "s|^.*event=|  ${c%/console.log}: event=|; s|$FL_LAB_STATE/up/||" || true
done | tee "$S/fetches.txt"
mismatched=$(sql "SELECT count(*) FROM runs r JOIN results res ON res.run_id = r.id
                    JOIN boards bo ON bo.name = r.board JOIN builds b ON b.label = r.kernel AND b.arch = bo.arch
                  WHERE r.job_id = $job AND res.environment->>'kernel.release' <> b.outcome->>'release'")
[ "$mismatched" = 0 ] || fail "$mismatched results on another kernel than their build's"
per_board=$(sql "SELECT count(DISTINCT r.board) FROM runs r JOIN results res ON res.run_id = r.id WHERE r.job_id = $job")
[ "$per_board" = "${#arch_list[@]}" ] || fail "results from $per_board boards, expected ${#arch_list[@]}"
pass "every result on its build's release, on all ${#arch_list[@]} boards"

"$FL_BIN_CLI" report "$job" --counters significant | tee "$S/report.txt"
"$FL_BIN_CLI" report "$job" --format csv --counters all >"$S/counters.csv" || fail "report csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  $col["counter"] == "perf.mmap_lock:mmap_lock_start_locking" {
    print $col["board"], $col["baseline_median"], $col["candidate_median"], $col["ratio"], $col["ci_low"], $col["ci_high"], $col["q_value"], $col["significant"] }' \
  "$S/counters.csv" | tee "$S/mmap-lock.txt"
[ "$(wc -l <"$S/mmap-lock.txt")" -ge "${#arch_list[@]}" ] || fail "mmap_lock_start_locking is not compared on every board"
# The spec traces mmap_lock waits: the seed's tables on every board, from all 14 runs a
# kernel, and the munmap thread's write acquisitions in them.
"$FL_BIN_CLI" report "$job" --format json >"$S/report.json" || fail "report json"
tables=$(jq '[.comparisons[] | select((.tables | length) >= 3)] | length' "$S/report.json")
[ "$tables" -ge "${#arch_list[@]}" ] || fail "mmap_lock tables on $tables comparisons, expected ${#arch_list[@]}"
jq -r '.comparisons[] | .board as $b | .tables[0].rows[] | select(.label == "Write Lock Count")
  | "\($b) \(.baseline.n) \(.baseline.median) \(.candidate.n) \(.candidate.median)"' \
  "$S/report.json" | tee "$S/lock-writes.txt"
awk '$2 != 14 || $4 != 14 || !($3 > 0) || !($5 > 0) { bad = 1 } END { exit bad }' "$S/lock-writes.txt" \
  || fail "write acquisitions not traced in every run: $(cat "$S/lock-writes.txt")"
pass "mmap_lock wait tables on all ${#arch_list[@]} boards"
"$LAB" timings | tee "$S/timings.txt" || true
echo "total $(secs "$T0") s; kept in $S"
