#!/usr/bin/env bash
# End to end: faultline bisect through the real binaries (#28, docs/bisect.md). A history of
# 8 commits on the stand-in tree of kernel_build_test.sh: commit 4 does not build, commit 6
# puts SLOWMARK into the image, and the simulated board runs a kernel whose image holds it on
# one CPU at a quarter of its time (kbuild_fixture.sh; about a sixth of the rounds per second,
# a quarter where the cpu controller is missing and only the CPU is taken away). A builder
# builds each commit the bisection measures; the board boots each one and runs the study.
# Checks: bad input refused naming the field (nothing stored); the controller killed and
# restarted mid-bisection resumes it from PostgreSQL; the culprit is commit 6, commit 4 is
# skipped as broken, the culprit is confirmed against its parent, the bad end with it
# reverted is like good; `bisect log`, `list` and `cancel` (a second bisection, cancelled,
# cancels its job).
# Usage: bisect_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" bisect "$@"
E2E_LOG_LINES=60
source "$(dirname "$0")/kbuild_fixture.sh"
trap kb_cleanup EXIT
command -v taskset >/dev/null || { echo "SKIP: taskset not installed (util-linux)"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "SKIP: the regression is 'one CPU instead of two': needs 2 CPUs"; exit 77; }
e2e_diagnose() {
  sql "SELECT id, label, state, left(coalesce(error, ''), 300) FROM builds ORDER BY id" >&2 || true
  sql "SELECT id, state, current_job, doc->>'phase', doc->>'failure' FROM bisections" >&2 || true
  sql "SELECT job_id, kernel, state, count(*), max(coalesce(failure_reason, '')) FROM runs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3" >&2 || true
  sql "SELECT name, health, health_reason FROM boards" >&2 || true
}

# --- the history ------------------------------------------------------------------------------
kb_make_tree
commit() { git -C "$tree" add -A && git -C "$tree" -c user.name=Dev -c user.email=dev@example.org commit -qm "$1"; }
sed -i 's|^bzImage:$|bzImage:\n\t@! grep -q BROKEN $(CURDIR)/mm/memory.c|' "$tree/Makefile"
commit "kbuild: refuse a broken mm/memory.c"                                     # 1
echo "// two" >>"$tree/mm/memory.c"; commit "mm: two"                              # 2
echo "// three" >>"$tree/mm/memory.c"; commit "mm: three"                          # 3
echo "BROKEN" >>"$tree/mm/memory.c"; commit "mm: does not build"                   # 4
sed -i '/BROKEN/d' "$tree/mm/memory.c"; echo "// five" >>"$tree/mm/memory.c"
commit "mm: fix the build"                                                          # 5
echo "// SLOWMARK" >>"$tree/mm/memory.c"; commit "mm: make faults slow"             # 6
echo "seven" >"$tree/mm/other.c"; commit "mm: seven"                               # 7
echo "eight" >>"$tree/mm/other.c"; commit "mm: eight"                              # 8
git -C "$tree" tag bad
culprit=$(git -C "$tree" rev-parse bad~2)
broken=$(git -C "$tree" rev-parse --short=12 bad~4)

fl_start_postgres
fl_start_controller
kb_start_builder builder-1
kb_start_board
cat >"$FL_STATE/study.yaml" <<YAML
name: bisect-e2e
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 2
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
common=(--tree "$tree" --spec "$FL_STATE/study.yaml" --config tinyconfig --fragment "$FL_STATE/lab.config"
        --block 4)
args=("${common[@]}" --board sim-board)
pass "a history of 8 commits, a builder and a board"

# --- bad input --------------------------------------------------------------------------------
expect_refused() {  # WANT ARGS...
  local want=$1 out; shift
  if out=$("$FL_BIN_CLI" bisect "$@" 2>&1); then fail "bisect $* was accepted"; fi
  grep -qF -- "$want" <<<"$out" || fail "bisect $*: wanted '$want', got: $out"
}
expect_refused "is not an ancestor of --bad" "${args[@]}" --good bad --bad v6.12
expect_refused "--good: 'v9' is not a commit in" "${args[@]}" --good v9 --bad bad
expect_refused "the same commit" "${args[@]}" --good bad --bad bad
expect_refused "metric: the spec does not count sw:page-faults" "${args[@]}" --good v6.12 --bad bad \
  --metric counter:perf.sw:page-faults
expect_refused "cell.threads: the spec does not sweep this knob" "${args[@]}" --good v6.12 --bad bad \
  --cell threads=4
expect_refused "board: no registered board named nowhere" "${common[@]}" --good v6.12 --bad bad --board nowhere
[ "$(sql "SELECT count(*) FROM bisections")" = 0 ] && [ "$(sql "SELECT count(*) FROM jobs")" = 0 ] ||
  fail "a refused bisection left something behind"
pass "refused naming the field: not an ancestor, unknown ref, same commit, metric, cell, board"

# --- the bisection, with a controller restart in the middle -----------------------------------
id=$("$FL_BIN_CLI" bisect "${args[@]}" --good v6.12 --bad bad) || fail "bisect start"
steps_with_jobs() { sql "SELECT count(*) FROM bisections, jsonb_array_elements(doc->'steps') s WHERE id = $id AND s ? 'jobs'"; }
past_endpoints() { [ "$(steps_with_jobs)" -ge 2 ]; }
FL_WAIT_SECONDS=300 fl_wait_for "the bisection to reach its first step" past_endpoints ||
  fail "no step after the endpoints"
fl_stop_pid "$FL_CONTROLLER_PID"
fl_start_controller
pass "controller restarted during step $(steps_with_jobs)"
state() { sql "SELECT state FROM bisections WHERE id = $id"; }
ended() { [ "$(state)" != running ]; }
FL_WAIT_SECONDS=900 fl_wait_for "bisection $id to end" ended || fail "bisection $id did not end"
[ "$(state)" = done ] || fail "bisection $id: $(state): $(sql "SELECT doc->>'failure' FROM bisections WHERE id = $id")"
"$FL_BIN_CLI" bisect log "$id" >"$FL_STATE/log.txt" || fail "bisect log"
cat "$FL_STATE/log.txt"
grep -q "^First bad commit: $culprit" "$FL_STATE/log.txt" || fail "the culprit is not commit 6"
grep -q "mm: make faults slow" "$FL_STATE/log.txt" || fail "no subject"
grep -q "Author: Dev <dev@example.org>" "$FL_STATE/log.txt" || fail "no author"
grep -q "^Confirmed against its parent .*: yes" "$FL_STATE/log.txt" || fail "not confirmed"
grep -q "^Reverted on the bad end: like good" "$FL_STATE/log.txt" || fail "revert not like good"
grep -A2 "$broken skipped: " "$FL_STATE/log.txt" | tr '\n' ' ' | grep -q "make bzImage *failed" ||
  fail "commit 4 not skipped as broken"
grep -q "^Reproduce: faultline bisect --tree $tree" "$FL_STATE/log.txt" || fail "no command to reproduce"
awk 'length > 80 && !/^Reproduce: / { bad = 1; print "too wide: " $0 } END { exit bad }' "$FL_STATE/log.txt" ||
  fail "the log is wider than 80 columns"
"$FL_BIN_CLI" bisect list | grep -q "^$id *done" || fail "bisect list: $("$FL_BIN_CLI" bisect list)"
pass "culprit commit 6 named, commit 4 skipped, confirmed, revert like good (resumed after a restart)"

# --- cancel -----------------------------------------------------------------------------------
id2=$("$FL_BIN_CLI" bisect "${args[@]}" --good v6.12 --bad bad~3) || fail "second bisect"
has_job() { [ "$(sql "SELECT coalesce(current_job, 0) FROM bisections WHERE id = $id2")" != 0 ]; }
FL_WAIT_SECONDS=60 fl_wait_for "its first job" has_job || fail "no job for bisection $id2"
job2=$(sql "SELECT current_job FROM bisections WHERE id = $id2")
"$FL_BIN_CLI" bisect cancel "$id2" | grep -q "bisection $id2 cancelled" || fail "cancel"
job_state_is "$job2" cancelled || fail "job $job2 of the cancelled bisection is $(job_state "$job2")"
if "$FL_BIN_CLI" bisect watch "$id2" >/dev/null 2>&1; then fail "watch of a cancelled bisection exited 0"; fi
pass "a cancelled bisection cancels its job; watch exits non-zero"

# --- from a job that compared two refs ----------------------------------------------------------
cat >"$FL_STATE/ab-refs.yaml" <<YAML
name: two-refs
benchmark: filemap-thrash
duration: 1s
repetitions: 1
boards: [sim-board]
kernels:
  before: {tree: $tree, ref: v6.12, config: {base: tinyconfig, fragments: [lab.config]}}
  after: {tree: $tree, ref: bad, config: {base: tinyconfig, fragments: [lab.config]}}
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
ab=$("$FL_BIN_CLI" submit "$FL_STATE/ab-refs.yaml") || fail "submit the two-refs job"
if out=$("$FL_BIN_CLI" bisect --from "$ab" --board sim-board 2>&1); then fail "--from without the fragment was accepted"; fi
grep -q "pass them with --fragment" <<<"$out" || fail "--from without fragments: $out"
id3=$("$FL_BIN_CLI" bisect --from "$ab" --fragment "$FL_STATE/lab.config" --board sim-board) || fail "bisect --from $ab"
[ "$(sql "SELECT doc->'request'->'commits'->0->>'sha' FROM bisections WHERE id = $id3")" = "$(git -C "$tree" rev-parse v6.12)" ] &&
  [ "$(sql "SELECT doc->'request'->'commits'->-1->>'sha' FROM bisections WHERE id = $id3")" = "$(git -C "$tree" rev-parse bad)" ] &&
  [ "$(sql "SELECT doc->'request'->>'origin' FROM bisections WHERE id = $id3")" = "job $ab" ] ||
  fail "bisect --from $ab: $(sql "SELECT doc->'request' FROM bisections WHERE id = $id3")"
"$FL_BIN_CLI" bisect cancel "$id3" >/dev/null || fail "cancel $id3"
"$FL_BIN_CLI" cancel "$ab" >/dev/null || fail "cancel job $ab"
pass "bisect --from a job: good = its baseline's ref, bad = the other's"
