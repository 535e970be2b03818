#!/usr/bin/env bash
# End to end: from a schedule that follows a branch to the first bad commit (#28,
# docs/bisect.md). A schedule builds `track` of the stand-in tree (kbuild_fixture.sh) at
# every slot; the slots are brought forward through the database (each one a minute of
# its own in the past) instead of waiting for the cron. Seven nights at commit A, then the
# branch moves by three commits, the middle one SLOWMARK (the simulated board runs it on
# one CPU: about half the rounds per second), then five nights at commit B. The detector
# needs Welch's p < 0.001 on the nightly medians, which a busy host spreads: with four
# nights before, 342 432 431 468 | 81 93 92 94 missed it (seen once); with five and four,
# 471 276 412 355 449 | 127 132 114 144 (p 0.0014, a niced clang-tidy beside it, seen
# 2026-12-04). Seven and five with that spread (its extremes repeated) give p 0.00016.
# Checks: every night is a build of its own under LABEL@<hash>+<slot>, the unchanged
# branch a cache hit, the nights one series; the detector finds one change point at night
# 6 that names night 5 as the job before; the controller's robot (robot.yaml
# bisect_changes) starts the bisection by itself, between the commits the two nights ran,
# with the robot's fragments; `faultline bisect --from-change` refuses what it cannot use and
# a second bisection of it; the bisection names the culprit, and its author gets one mail
# (replies.culprits, written to the dry-run directory).
# Usage: bisect_change_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" bisect-change "$@"
E2E_LOG_LINES=60
source "$(dirname "$0")/kbuild_fixture.sh"
trap kb_cleanup EXIT
command -v public-inbox-init >/dev/null || { echo "SKIP: public-inbox not installed (scripts/install-deps.sh test)"; exit 77; }
command -v taskset >/dev/null || { echo "SKIP: taskset not installed (util-linux)"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "SKIP: the regression is 'one CPU instead of two': needs 2 CPUs"; exit 77; }
e2e_diagnose() {
  sql "SELECT id, label, state, outcome->>'base_commit', left(coalesce(error, ''), 200) FROM builds ORDER BY id" >&2 || true
  sql "SELECT id, name, state FROM jobs ORDER BY id" >&2 || true
  sql "SELECT job_id, kernel, median FROM job_series_medians ORDER BY job_id" >&2 || true
  sql "SELECT * FROM change_points" >&2 || true
  sql "SELECT id, state, doc->>'phase', doc->>'failure' FROM bisections" >&2 || true
  sql "SELECT name, health, health_reason FROM boards" >&2 || true
}

kb_make_tree
commit() { git -C "$tree" add -A && git -C "$tree" -c user.name=Dev -c user.email=dev@example.org commit -qm "$1"; }
git -C "$tree" checkout -qb track
echo "// one" >>"$tree/mm/memory.c"; commit "mm: one"
a=$(git -C "$tree" rev-parse HEAD)

# The robot's list: an empty archive (no series is posted here; its nightly side is tested).
pi=$FL_STATE/pi
mkdir -p "$pi"
HOME=$pi PI_CONFIG=$pi/config public-inbox-init -V2 -L basic mm "$pi/mm" http://localhost/mm linux-mm@kvack.org
cat >"$FL_STATE/robot-study.yaml" <<YAML
benchmark: filemap-thrash
duration: 1s
memcg: {memory_max: 256M}
YAML
cat >"$FL_STATE/robot.yaml" <<YAML
archive: pi/mm
tree: $tree
branch: track
studies: [robot-study.yaml]
config_base: tinyconfig
fragments: [lab.config]
poll_seconds: 1
bisect_changes: true
replies:
  from: "faultline robot <robot@faultline.example>"
  dry_run_dir: mails
  culprits: true
YAML

fl_start_postgres
export FL_CONTROLLER_ARGS="--robot-config $FL_STATE/robot.yaml"
fl_start_controller
kb_start_builder builder-1
kb_start_board
cat >"$FL_STATE/track.yaml" <<YAML
name: track-nightly
benchmark: filemap-thrash
duration: 1s
repetitions: 3
boards: [sim-board]
kernels:
  nightly: {tree: $tree, ref: track, config: {base: tinyconfig, fragments: [lab.config]}}
memcg: {memory_max: 256M}
params: {file_size: 4M, threads: 2}
YAML
sid=$("$FL_BIN_CLI" schedule "$FL_STATE/track.yaml" --cron '0 3 1 1 *' --name track) ||
  fail "a schedule that builds its kernel was refused"
pass "a schedule that builds its kernel from a branch"

# --- the nights ----------------------------------------------------------------------------------
nights=()
night() {  # N: the slot N minutes after a start 100 minutes ago
  local n=$1
  sql "UPDATE schedules SET next_run = date_trunc('minute', now()) - interval '100 minutes' + interval '$n minutes' WHERE id = $sid" >/dev/null
  fired() { [ "$(sql "SELECT count(*) FROM jobs WHERE schedule_id = $sid")" -ge "$n" ]; }
  FL_WAIT_SECONDS=60 fl_wait_for "night $n to be submitted" fired || fail "night $n was not submitted"
  local job
  job=$(sql "SELECT max(id) FROM jobs WHERE schedule_id = $sid")
  FL_WAIT_SECONDS=180 fl_wait_for "night $n (job $job) to finish" job_final "$job" || fail "night $n did not finish"
  job_state_is "$job" succeeded || fail "night $n (job $job): $(job_state "$job")"
  nights+=("$job")
}
nights_a=7 nights_b=5
for n in $(seq 1 $nights_a); do night "$n"; done
echo "// two" >>"$tree/mm/memory.c"; commit "mm: two"
echo "// SLOWMARK" >>"$tree/mm/memory.c"; commit "mm: make faults slow"
culprit=$(git -C "$tree" rev-parse HEAD)
echo "four" >"$tree/mm/other.c"; commit "mm: four"
b=$(git -C "$tree" rev-parse HEAD)
for n in $(seq $((nights_a + 1)) $((nights_a + nights_b))); do night "$n"; done
all=$((nights_a + nights_b))

# Each night its own build and label; the commit it ran; the same commit a cache hit.
for i in $(seq 0 $((all - 1))); do
  row=$(sql "SELECT b.label || ' ' || (b.outcome->>'base_commit') || ' ' || coalesce(b.outcome->>'cached', 'false')
               FROM builds b JOIN job_builds jb ON jb.build_id = b.id WHERE jb.job_id = ${nights[$i]}")
  read -r label commit cached <<<"$row"
  want=$a; [ "$i" -lt "$nights_a" ] || want=$b
  [[ $label =~ ^nightly@[0-9a-f]{12}\+[0-9]{8}T[0-9]{4}$ ]] || fail "night $((i + 1)): label '$label'"
  [ "$commit" = "$want" ] || fail "night $((i + 1)) ran $commit, not $want"
  [ "$i" = 0 ] || [ "$i" = "$nights_a" ] || [ "$cached" = true ] ||
    fail "night $((i + 1)): an unchanged branch was built again"
done
# The nights' own builds and series: by now the robot may have started the bisection, whose
# step jobs build and measure kernels of their own (good@..., bad@...).
nights_sql="SELECT id FROM jobs WHERE schedule_id = $sid"
[ "$(sql "SELECT count(DISTINCT b.label) FROM builds b JOIN job_builds jb ON jb.build_id = b.id
          WHERE jb.job_id IN ($nights_sql)")" = "$all" ] || fail "not one build per night"
[ "$(sql "SELECT count(DISTINCT kernel) FROM job_series_medians WHERE job_id IN ($nights_sql)")" = 1 ] ||
  fail "the nights are not one series: $(sql "SELECT DISTINCT kernel FROM job_series_medians WHERE job_id IN ($nights_sql)")"
pass "$all nights: a build and a label each, commit A then B, unchanged nights from the cache, one series"

# --- the change point -------------------------------------------------------------------------
found() { [ "$(sql "SELECT count(*) FROM change_points WHERE study = 'track-nightly'")" -ge 1 ]; }
FL_WAIT_SECONDS=90 fl_wait_for "the change point" found || fail "no change point"
[ "$(sql "SELECT count(*) FROM change_points")" = 1 ] || fail "more than one change point"
read -r cp cp_job cp_before cp_kernel <<<"$(sql "SELECT id || ' ' || job_id || ' ' || previous_job_id || ' ' || kernel FROM change_points")"
[ "$cp_job" = "${nights[$nights_a]}" ] && [ "$cp_before" = "${nights[$((nights_a - 1))]}" ] ||
  fail "change point between jobs $cp_before and $cp_job, not ${nights[$((nights_a - 1))]} and ${nights[$nights_a]}"
[[ $cp_kernel =~ ^nightly@[0-9a-f]{12}$ ]] || fail "change point kernel '$cp_kernel'"
pass "change point $cp at night $((nights_a + 1)) (job $cp_job), night $nights_a (job $cp_before) before it"

# --- the robot bisects it ---------------------------------------------------------------------
started() { [ "$(sql "SELECT count(*) FROM bisections")" -ge 1 ]; }
FL_WAIT_SECONDS=60 fl_wait_for "the robot to start a bisection" started || fail "no bisection started by itself"
[ "$(sql "SELECT count(*) FROM bisections")" = 1 ] || fail "more than one bisection"
id=$(sql "SELECT id FROM bisections")
req() { sql "SELECT doc->'request'$1 FROM bisections WHERE id = $id"; }
[ "$(req "->'commits'->0->>'sha'")" = "$a" ] && [ "$(req "->'commits'->-1->>'sha'")" = "$b" ] &&
  [ "$(req "->>'origin'")" = "change point $cp" ] && [ "$(req "->>'board'")" = sim-board ] &&
  [ "$(req "->'fragments'->0->>'content'" | base64 -d)" = "$(cat "$FL_STATE/lab.config")" ] &&
  [ "$(req "->>'command'")" = "faultline bisect --from-change $cp --fragment lab.config" ] ||
  fail "the robot's bisection of change point $cp: $(req "")"
pass "the robot bisects change point $cp by itself: commits A..B, its board, the robot's fragment"

expect_refused() {  # WANT ARGS...
  local want=$1 out; shift
  if out=$("$FL_BIN_CLI" bisect "$@" 2>&1); then fail "bisect $* was accepted"; fi
  grep -qF -- "$want" <<<"$out" || fail "bisect $*: wanted '$want', got: $out"
}
expect_refused "--from-change: no change point 999" --from-change 999
expect_refused "--from and --from-change exclude each other" --from-change "$cp" --from "$cp_job"
expect_refused "change point $cp is bisected by bisection $id" --from-change "$cp" --fragment "$FL_STATE/lab.config"
[ "$(sql "SELECT count(*) FROM bisections")" = 1 ] || fail "a refused bisection was stored"
pass "bisect --from-change refuses an unknown change point, --from with it, and a second bisection"
state() { sql "SELECT state FROM bisections WHERE id = $id"; }
ended() { [ "$(state)" != running ]; }
FL_WAIT_SECONDS=600 fl_wait_for "bisection $id to end" ended || fail "bisection $id did not end"
[ "$(state)" = done ] || fail "bisection $id: $(state): $(sql "SELECT doc->>'failure' FROM bisections WHERE id = $id")"
"$FL_BIN_CLI" bisect log "$id" >"$FL_STATE/log.txt" || fail "bisect log"
cat "$FL_STATE/log.txt"
grep -q "^First bad commit: $culprit" "$FL_STATE/log.txt" || fail "the culprit is not 'mm: make faults slow'"
grep -q "^Confirmed against its parent .*: yes" "$FL_STATE/log.txt" || fail "not confirmed"
grep -q "^Reverted on the bad end: like good" "$FL_STATE/log.txt" || fail "revert not like good"
pass "bisection $id: between the commits the nights around it ran; culprit named, confirmed, reverted"

# --- the culprit's author gets one mail ---------------------------------------------------------
mailed() { compgen -G "$FL_STATE/mails/*.eml" >/dev/null; }
FL_WAIT_SECONDS=60 fl_wait_for "the culprit mail" mailed || fail "no mail to the culprit's author"
mails=("$FL_STATE"/mails/*.eml)
[ "${#mails[@]}" = 1 ] || fail "${#mails[@]} mails, not one"
grep -q "^To: Dev <dev@example.org>" "${mails[0]}" && grep -q "^Subject: \[faultline\] first bad commit: mm: make faults slow" "${mails[0]}" &&
  grep -q "faultline bisect --from-change $cp --fragment lab.config" "${mails[0]}" ||
  fail "the culprit mail: $(cat "${mails[0]}")"
[ "$(sql "SELECT count(*) FROM robot_replies WHERE kind = 'culprit'")" = 1 ] || fail "not one culprit mail in the outbox"
pass "one mail to the culprit's author, with the command that runs the bisection again"

echo "e2e: all checks passed"
