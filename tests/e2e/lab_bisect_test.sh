#!/usr/bin/env bash
# faultline bisect for real (#28, docs/bisect.md): deploy/kernel/bisect-demo.sh puts 16
# commits of our own on Debian's linux-source-6.12 (commit 8 does not build, commit 11 makes
# every x86 user fault take mmap_lock); `faultline bisect` on the lab's x86_64 board (TCG)
# builds each commit it measures with the lab's builder, kexecs it, runs the demo study and
# holds mmap_lock:mmap_lock_start_locking per round against the effect measured between the
# ends. Checks: the culprit is commit 11 (by subject), commit 8 was skipped as broken, the
# culprit is confirmed against its parent, and the bad end with it reverted is like good;
# the bisection lives in PostgreSQL (its document names the jobs of every step).
# Keeps the log, the status and the timings in $FL_BISECT_OUT (/var/tmp/faultline-bisect-demo).
# Slow (kernel builds, then kexec and runs on an emulated board): ctest label `study`.
# Usage: lab_bisect_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

# shellcheck source=tests/e2e/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh" "$@"
export FL_LAB_KBUILD_CACHE=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
OUT=${FL_BISECT_OUT:-/var/tmp/faultline-bisect-demo}
lab_need qemu-system-x86_64:qemu-system-x86 debugfs:e2fsprogs cpio:cpio zstd:zstd \
  psql:postgresql-client flex:flex bison:bison bc:bc git:git
lab_state bisect
mkdir -p "$OUT"
lab_diagnose() {
  sql "SELECT id, label, state, left(coalesce(error, ''), 400) FROM builds ORDER BY id"
  sql "SELECT id, state, current_job, doc->>'phase', doc->>'failure' FROM bisections"
  sql "SELECT r.job_id, r.kernel, r.state, count(*), max(coalesce(r.failure_reason, '')) FROM runs r GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
}

T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$FL_LAB_KBUILD_CACHE/linux-6.12") || fail "linux-tree.sh"
read -r good bad < <("$ROOT/deploy/kernel/bisect-demo.sh" "$tree") || fail "bisect-demo.sh"
pass "history: $good..$bad, $(git -C "$tree" rev-list --count "$good..$bad") commits ($(secs "$T") s)"

T=$EPOCHREALTIME
"$LAB" up --arches x86_64 --builder >"$S/up.env" 2>"$S/up.log" || { tail -40 "$S/up.log" >&2; fail "lab.sh up"; }
# shellcheck source=/dev/null
. "$S/up.env"
pass "lab up (x86_64) with a builder in $(secs "$T") s"

# Bad input first: each refused with the field named, nothing stored.
# From the checkout, with its relative paths: the result's "Reproduce:" line is what a user
# of a checkout types.
cd "$ROOT"
args=(--tree "$tree" --spec deploy/examples/bisect-demo.yaml --config tinyconfig
      --fragment deploy/kernel/board.config --arch x86_64)
expect_refused() {  # WANT ARGS...: the CLI exits non-zero and says WANT
  local want=$1 out; shift
  if out=$("$FL_BIN_CLI" bisect "$@" 2>&1); then fail "bisect $* was accepted"; fi
  grep -qF -- "$want" <<<"$out" || fail "bisect $*: wanted '$want', got: $out"
}
expect_refused "is not an ancestor of --bad" "${args[@]}" --good "$bad" --bad "$good"
expect_refused "'no-such-ref' is not a commit" "${args[@]}" --good no-such-ref --bad "$bad"
expect_refused "the spec does not count sw:page-faults" "${args[@]}" --good "$good" --bad "$bad" \
  --metric counter:perf.sw:page-faults
[ "$(sql "SELECT count(*) FROM bisections")" = 0 ] || fail "a refused bisection was stored"
pass "bad input refused naming the field"

T=$EPOCHREALTIME
set +e
"$FL_BIN_CLI" bisect "${args[@]}" --good "$good" --bad "$bad" \
  --metric counter:perf.mmap_lock:mmap_lock_start_locking --watch >"$S/result.txt" 2>"$S/progress.txt"
rc=$?
set -e
cp "$S/result.txt" "$OUT/result.txt"; cp "$S/progress.txt" "$OUT/progress.txt"
cat "$S/result.txt"
[ "$rc" = 0 ] || fail "bisect exited $rc: $(tail -5 "$S/progress.txt")"
pass "bisection finished in $(secs "$T") s"

grep -q "^First bad commit: $(git -C "$tree" rev-parse "$bad~5")" "$S/result.txt" \
  || fail "the culprit is not commit 11 ($(git -C "$tree" log -1 --format=%s "$bad~5"))"
grep -q "x86/mm: take mmap_lock for every user fault" "$S/result.txt" || fail "culprit subject missing"
grep -q "^Confirmed against its parent .*: yes" "$S/result.txt" || fail "not confirmed"
grep -q "^Reverted on the bad end: like good" "$S/result.txt" || fail "the revert is not like good"
broken=$(git -C "$tree" rev-parse --short=12 "$bad~8")
grep -q "$broken skipped: " "$S/result.txt" || fail "commit 8 ($broken) was not skipped as broken"
id=$(sql "SELECT id FROM bisections ORDER BY id DESC LIMIT 1")
[ "$(sql "SELECT state FROM bisections WHERE id = $id")" = done ] || fail "bisection $id not done in the database"
jobs=$(sql "SELECT count(*) FROM jobs WHERE name LIKE 'bisect $id %'")
pass "culprit named, commit 8 skipped, confirmed, revert like good; $jobs jobs"
"$FL_BIN_CLI" bisect log "$id" >"$OUT/log.txt"
sql "SELECT label, state, round((outcome->>'build_seconds')::numeric), outcome->>'cached', left(coalesce(error, ''), 120) FROM builds ORDER BY id" | tee "$OUT/builds.txt"
"$LAB" timings | tee "$OUT/timings.txt" || true
echo "total $(secs "$T0") s; kept in $OUT"
