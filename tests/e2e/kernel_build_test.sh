#!/usr/bin/env bash
# End to end: a job that brings its own kernels. A builder (an agent with `builder:`) builds
# them with kbuild from a git tree, a ref, a config and a patch series; a board (simulated
# as in kernel_switch_test.sh: release and boot id in files, a `command` boot script) fetches
# each image from the controller, verifies it, boots it and runs the A/B study on it. The
# tree is a small stand-in for Linux (its Makefile answers kbuild's targets in milliseconds:
# the real kernel is built by e2e_lab_kernels); git, the series, the cache and every RPC
# are real. Checks: the labels get unique names, two builds, the board boots each image it
# was given (sha256 checked by the boot script), results carry the builds' releases; a
# second job with the same kernels reuses both builds; a series that does not apply fails
# its build and its job naming the patch, the file and the hunk; bad input at submit; a
# builder killed mid-build; a prebuilt image fetched over HTTP, verified and booted, and
# one whose sha256 differs failing its job; a kernel that does not come back (bad on the
# board, its console tail kept, its runs failed, the board cleared goes on without it).
# Usage: kernel_build_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" kbuild "$@"
E2E_LOG_LINES=60

source "$(dirname "$0")/kbuild_fixture.sh"
trap kb_cleanup EXIT

# --- the stage: a stand-in tree, a builder, a board ------------------------------------------
kb_make_tree
fl_start_postgres
FL_CONTROLLER_ARGS="--build-lease 6" fl_start_controller
other_arch=aarch64
[ "$(uname -m)" != aarch64 ] || other_arch=riscv64
KB_BUILDER_ARCHES=$other_arch kb_start_builder builder-1
kb_start_board
pass "a builder (x86_64 builds) and a board that boots built kernels registered"

# --- bad input is refused at submit, naming the field -----------------------------------------
spec bad-arch fix.mbox "arches: [riscv64]" >"$FL_STATE/bad-arch.yaml"
if out=$("$FL_BIN_CLI" submit "$FL_STATE/bad-arch.yaml" 2>&1); then fail "a job no board can boot was accepted"; fi
grep -q "kernels.vanilla: no eligible board boots kernels" <<<"$out" || fail "bad arch error: $out"
head -c 1100000 /dev/zero | tr '\0' x >"$FL_STATE/huge.mbox"
spec huge huge.mbox >"$FL_STATE/huge.yaml"
if out=$("$FL_BIN_CLI" submit "$FL_STATE/huge.yaml" 2>&1); then fail "an oversize series was accepted"; fi
grep -q "kernels.patched.series\[0\]: huge.mbox is .* over the 1 MiB limit" <<<"$out" || fail "size error: $out"
[ "$(sql "SELECT count(*) FROM builds")" = 0 ] && [ "$(sql "SELECT count(*) FROM jobs")" = 0 ] ||
  fail "a refused job left something behind"
pass "refused at submit: no board for the arch, a series over 1 MiB (nothing stored)"

# --- the study, beside a cold build of another arch ---------------------------------------------
# A lane per arch: a build of the other arch that is still compiling (its make waits for
# slow.d/slow-Image to go) holds up none of this arch's builds.
touch "$FL_STATE/slow.d/slow-Image"
sql "INSERT INTO builds (label, arch, source) VALUES ('cold@000000000000', '$other_arch',
     '{\"tree\": \"$tree\", \"ref\": \"v6.12\", \"config_base\": \"tinyconfig\"}')" >/dev/null
cold_building() { [ "$(sql "SELECT state FROM builds WHERE label = 'cold@000000000000'")" = building ]; }
fl_wait_for "builder-1's $other_arch lane to take the cold build" cold_building || fail "no $other_arch build under way"
fl_wait_for "its make to wait" pgrep -f "slow-Image" >/dev/null || fail "the cold make is not waiting"
spec built-ab fix.mbox >"$FL_STATE/ab.yaml"
job=$("$FL_BIN_CLI" submit "$FL_STATE/ab.yaml") || fail "submit"
FL_WAIT_SECONDS=240 fl_wait_for "job $job to finish" job_final "$job" || fail "job $job did not finish"
job_state_is "$job" succeeded || fail "job $job: $(job_state "$job")"
cold_building || fail "the cold $other_arch build is no longer building: the job did not finish beside it"
rm -f "$FL_STATE/slow.d/slow-Image"
cold_done() { [ "$(sql "SELECT state FROM builds WHERE label = 'cold@000000000000'")" = done ]; }
fl_wait_for "the cold $other_arch build to finish" cold_done ||
  fail "cold build: $(sql "SELECT state, error FROM builds WHERE label = 'cold@000000000000'")"
[ "$(sql "SELECT outcome->>'compiler' FROM builds WHERE label = 'cold@000000000000'")" = \
  "$other_arch-linux-gnu-gcc (faultline stand-in) 12.2.0" ] || fail "the cold build's compiler"
pass "the A/B's $(uname -m) builds and runs finished while a $other_arch build compiled beside them"
cold_sha=$(sql "SELECT image_sha256 FROM builds WHERE label = 'cold@000000000000'")
sql "DELETE FROM builds WHERE label = 'cold@000000000000'; DELETE FROM artifacts WHERE sha256 = '$cold_sha'" >/dev/null
# Where its time went, recorded once by the controller (jobs.phases) and in /metrics.
phases_kept() { [ "$(sql "SELECT phases IS NOT NULL FROM jobs WHERE id = $job")" = t ]; }
fl_wait_for "job $job's phases" phases_kept || fail "no phases recorded"
arch=$(uname -m)
[ "$(sql "SELECT count(*) FROM jsonb_object_keys((SELECT phases->'$arch' FROM jobs WHERE id = $job))")" = 6 ] &&
  [ "$(sql "SELECT (phases->'$arch'->>'building')::float > 0 AND (phases->'$arch'->>'measuring')::float > 0
                   AND (phases->'$arch'->>'switching')::float > 0 FROM jobs WHERE id = $job")" = t ] ||
  fail "phases: $(sql "SELECT phases FROM jobs WHERE id = $job")"
[ "$(sql "SELECT count(*) FROM kernel_switches WHERE job_id = $job AND outcome = 'booted'")" -ge 2 ] ||
  fail "switches: $(sql "SELECT board, label, outcome FROM kernel_switches")"
curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/metrics" | grep -q "^faultline_job_phase_seconds_count{arch=\"$arch\",phase=\"building\"} [1-9]" ||
  fail "no faultline_job_phase_seconds in /metrics"
pass "job $job's phases: $(sql "SELECT phases->'$arch' FROM jobs WHERE id = $job")"
[ "$(sql "SELECT count(*) FROM builds WHERE state = 'done'")" = 2 ] || fail "builds"
vanilla=$(sql "SELECT label FROM builds WHERE label LIKE 'vanilla@%'")
patched=$(sql "SELECT label FROM builds WHERE label LIKE 'patched@%'")
[[ $vanilla =~ ^vanilla@[0-9a-f]{12}$ && $patched =~ ^patched@[0-9a-f]{12}$ ]] || fail "labels: $vanilla $patched"
rel() { sql "SELECT outcome->>'release' FROM builds WHERE label = '$1'"; }
sha() { sql "SELECT image_sha256 FROM builds WHERE label = '$1'"; }
[[ $(rel "$vanilla") =~ ^6\.12\.0-fl[0-9a-f]{10}$ ]] && [ "$(rel "$vanilla")" != "$(rel "$patched")" ] ||
  fail "releases: $(rel "$vanilla") $(rel "$patched")"
expected="$vanilla $(rel "$vanilla") $(sha "$vanilla")
$patched $(rel "$patched") $(sha "$patched")
$vanilla $(rel "$vanilla") $(sha "$vanilla")
$patched $(rel "$patched") $(sha "$patched")"
[ "$(cat "$board_dir/boots.log")" = "$expected" ] || fail "boots (label release sha256 of the image booted):
$(cat "$board_dir/boots.log")
expected:
$expected"
mismatched=$(sql "SELECT count(*) FROM runs r JOIN results res ON res.run_id = r.id JOIN builds b ON b.label = r.kernel
                  WHERE r.job_id = $job AND res.environment->>'kernel.release' <> b.outcome->>'release'")
[ "$mismatched" = 0 ] || fail "$mismatched results on another kernel than their build's"
"$FL_BIN_CLI" report "$job" >"$FL_STATE/report.txt" || fail "report"
grep -q "$patched" "$FL_STATE/report.txt" || fail "report: $(cat "$FL_STATE/report.txt")"
grep -q "^  $patched ($(uname -m)): $(rel "$patched"), base [0-9a-f]\{12\} (v6.12) + 1 patch, config tinyconfig [0-9a-f]\{12\}, gcc" "$FL_STATE/report.txt" &&
  grep -q "^      \[PATCH\] mm: b becomes B$" "$FL_STATE/report.txt" ||
  fail "the report does not say what each kernel is: $(cat "$FL_STATE/report.txt")"
"$FL_BIN_CLI" kernels --job "$job" >"$FL_STATE/kernels.txt" || fail "faultline kernels"
grep -q "$(rel "$patched")" "$FL_STATE/kernels.txt" || fail "kernels: $(cat "$FL_STATE/kernels.txt")"
pass "two builds ($vanilla, $patched), each image booted with its sha256 and release, 4 results on their builds"

# --- the same kernels again: no new build -------------------------------------------------------
started=$(grep -c "event=build_started" "$FL_STATE/builder-1.log")
spec again fix.mbox >"$FL_STATE/again.yaml"
again=$("$FL_BIN_CLI" submit "$FL_STATE/again.yaml") || fail "submit again"
FL_WAIT_SECONDS=240 fl_wait_for "job $again to finish" job_final "$again" || fail "job $again did not finish"
job_state_is "$again" succeeded || fail "job $again: $(job_state "$again")"
[ "$(sql "SELECT count(*) FROM builds")" = 2 ] || fail "a second build of the same kernels"
[ "$(grep -c "event=build_started" "$FL_STATE/builder-1.log")" = "$started" ] || fail "the builder built again"
[ "$(sql "SELECT count(*) FROM job_builds WHERE job_id = $again")" = 2 ] || fail "job_builds"
pass "a second job with the same kernels ran on the same two builds (none rebuilt)"

# --- a series that does not apply ----------------------------------------------------------------
spec stale stale.mbox >"$FL_STATE/stale.yaml"
stale=$("$FL_BIN_CLI" submit "$FL_STATE/stale.yaml") || fail "submit stale"
FL_WAIT_SECONDS=120 fl_wait_for "job $stale to finish" job_final "$stale" || fail "job $stale did not finish"
job_state_is "$stale" failed || fail "job $stale: $(job_state "$stale")"
err=$(sql "SELECT error FROM builds WHERE state = 'failed'")
grep -q 'patch 1 "\[PATCH\] mm: x becomes y" (stale.mbox) does not apply: mm/memory.c, hunk @@ -2,3 +2,3 @@' <<<"$err" ||
  fail "build error: $err"
"$FL_BIN_CLI" kernels --job "$stale" >"$FL_STATE/kernels-stale.txt" 2>&1 || true
grep -q "failed: series: patch 1" "$FL_STATE/kernels-stale.txt" || fail "kernels: $(cat "$FL_STATE/kernels-stale.txt")"
reason=$(sql "SELECT DISTINCT failure_reason FROM runs WHERE job_id = $stale AND kernel LIKE 'patched@%'")
grep -q "failed: series: patch 1" <<<"$reason" || fail "run failure: $reason"
pass "a series that does not apply: build and job failed, naming the patch, the file and the hunk"

# --- a builder killed mid-build: the build is retried by another, no half image served -----------
cat >"$FL_STATE/other.mbox" <<'MBOX'
From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: Dev <dev@example.org>
Subject: [PATCH] mm: a becomes A

Why.
---
diff --git a/mm/memory.c b/mm/memory.c
--- a/mm/memory.c
+++ b/mm/memory.c
@@ -1,3 +1,3 @@
 // mm
-int a;
+int A;
 int b;
-- 
2.39.5
MBOX
touch "$FL_STATE/slow.d/slow"
spec killed other.mbox >"$FL_STATE/killed.yaml"
killed=$("$FL_BIN_CLI" submit "$FL_STATE/killed.yaml") || fail "submit killed"
building() { [ "$(sql "SELECT count(*) FROM builds WHERE state = 'building' AND builder = 'builder-1'")" = 1 ]; }
fl_wait_for "builder-1 to take the new build" building || fail "no build under way"
fl_wait_for "the slow make to start" pgrep -f "sleep 120" >/dev/null || true
kill -KILL -- "-$BUILDER_PID"
BUILDER_PID=
kb_start_builder builder-2
FL_WAIT_SECONDS=240 fl_wait_for "job $killed to finish" job_final "$killed" || fail "job $killed did not finish"
job_state_is "$killed" succeeded || fail "job $killed: $(job_state "$killed")"
row=$(sql "SELECT builder, attempts FROM builds WHERE label LIKE 'patched@%' AND state = 'done' ORDER BY id DESC LIMIT 1")
[ "$row" = "builder-2|2" ] || fail "the retried build: $row (builder|attempts)"
orphans=$(sql "SELECT count(*) FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM builds b WHERE b.image_sha256 = a.sha256)")
[ "$orphans" = 0 ] || fail "$orphans stored images that no finished build names"
pass "a builder killed mid-build: its lease lapsed, builder-2 built it (attempt 2), the job succeeded"

# --- a prebuilt image: fetched over HTTP by a builder, verified, stored, booted ----------------
served=$FL_STATE/served
mkdir -p "$served"
x86_image "$served/bzImage" 6.12.0-prebuilt
image_sha=$(sha256sum <"$served/bzImage" | cut -c1-64)
http_port=$(fl_free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$served" "$http_port" >>"$FL_STATE/http.log" 2>&1 &
HTTP_PID=$!
fl_wait_for "the image server" curl -fsS -o /dev/null "http://127.0.0.1:$http_port/bzImage" ||
  fail "the image server did not start"
url=http://127.0.0.1:$http_port/bzImage
prebuilt_spec() {  # NAME SHA256 [ARCH]
  cat <<YAML
name: $1
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
boards: [sim-board]
kernels:
  vanilla: {tree: $tree, ref: v6.12, config: {base: tinyconfig, fragments: [lab.config]}}
  prebuilt: {image: "$url", sha256: $2, arch: ${3:-$(uname -m)}}
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
YAML
}
prebuilt_spec no-arch "$image_sha" '""' >"$FL_STATE/no-arch.yaml"
if out=$("$FL_BIN_CLI" submit "$FL_STATE/no-arch.yaml" 2>&1); then fail "an image without its arch was accepted"; fi
grep -q "kernels.prebuilt.arch: the arch the image boots is needed" <<<"$out" || fail "no-arch error: $out"
prebuilt_spec other-arch "$image_sha" riscv64 >"$FL_STATE/other-arch.yaml"
if out=$("$FL_BIN_CLI" submit "$FL_STATE/other-arch.yaml" 2>&1); then fail "an image for no eligible board was accepted"; fi
grep -q "kernels.prebuilt.arch: the image boots riscv64 but the job's eligible boards are $(uname -m)" <<<"$out" ||
  fail "other-arch error: $out"
prebuilt_spec prebuilt "$image_sha" >"$FL_STATE/prebuilt.yaml"
pre=$("$FL_BIN_CLI" submit "$FL_STATE/prebuilt.yaml") || fail "submit prebuilt"
FL_WAIT_SECONDS=240 fl_wait_for "job $pre to finish" job_final "$pre" || fail "job $pre did not finish"
job_state_is "$pre" succeeded || fail "job $pre: $(job_state "$pre")"
prebuilt=$(sql "SELECT label FROM builds WHERE label LIKE 'prebuilt@%' AND state = 'done'")
[[ $prebuilt =~ ^prebuilt@[0-9a-f]{12}$ ]] || fail "prebuilt label: $prebuilt"
[ "$(rel "$prebuilt")" = 6.12.0-prebuilt ] && [ "$(sha "$prebuilt")" = "$image_sha" ] ||
  fail "the prebuilt build: release $(rel "$prebuilt"), sha256 $(sha "$prebuilt")"
grep -qx "$prebuilt 6.12.0-prebuilt $image_sha" "$board_dir/boots.log" ||
  fail "the board did not boot the image: $(cat "$board_dir/boots.log")"
grep -q "GET /bzImage" "$FL_STATE/http.log" || fail "the image was not fetched over HTTP"
"$FL_BIN_CLI" report "$pre" >"$FL_STATE/report-pre.txt" || fail "report"
grep -q "^  $prebuilt ($(uname -m)): 6.12.0-prebuilt, prebuilt $url, sha256 ${image_sha:0:12}" "$FL_STATE/report-pre.txt" ||
  fail "the report does not say what the prebuilt kernel is: $(cat "$FL_STATE/report-pre.txt")"
curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/metrics" >"$FL_STATE/metrics.txt" || fail "/metrics"
# (labels in name order, as the exposition writes them)
grep -q "^faultline_kernel_build_info{arch=\"$(uname -m)\",.*image_sha256=\"${image_sha:0:12}\",image_url=\"$url\",kernel=\"$prebuilt\",.*release=\"6.12.0-prebuilt\",.*} 1$" "$FL_STATE/metrics.txt" &&
  grep -q "^faultline_kernel_build_info{arch=\"$(uname -m)\",base_commit=\"[0-9a-f]\{12\}\",compiler=\"gcc[^\"]*\",config_sha256=\"[0-9a-f]\{12\}\",image_sha256=\"$(sha "$patched" | cut -c1-12)\",image_url=\"\",kernel=\"$patched\",patches=\"1\",ref=\"v6.12\",release=\"$(rel "$patched")\",series=\"\[PATCH\] mm: b becomes B\"} 1$" "$FL_STATE/metrics.txt" ||
  fail "faultline_kernel_build_info: $(grep faultline_kernel_build "$FL_STATE/metrics.txt")"
pass "a prebuilt image fetched over HTTP by a builder, its sha256 checked, booted, named in the report and /metrics"

# --- an image whose sha256 differs: its build and job fail, naming both, nothing stored ----------
artifacts=$(sql "SELECT count(*) FROM artifacts")
wrong=0000000000000000000000000000000000000000000000000000000000000000
prebuilt_spec wrong-sha "$wrong" >"$FL_STATE/wrong.yaml"
bad=$("$FL_BIN_CLI" submit "$FL_STATE/wrong.yaml") || fail "submit wrong-sha"
FL_WAIT_SECONDS=120 fl_wait_for "job $bad to finish" job_final "$bad" || fail "job $bad did not finish"
job_state_is "$bad" failed || fail "job $bad: $(job_state "$bad")"
err=$(sql "SELECT error FROM builds b JOIN job_builds jb ON jb.build_id = b.id WHERE jb.job_id = $bad AND b.state = 'failed'")
[ "$err" = "image: the sha256 of $url is $image_sha, the job says $wrong" ] || fail "build error: $err"
reason=$(sql "SELECT DISTINCT failure_reason FROM runs WHERE job_id = $bad AND kernel LIKE 'prebuilt@%'")
grep -q "the sha256 of $url is $image_sha" <<<"$reason" || fail "run failure: $reason"
[ "$(sql "SELECT count(*) FROM artifacts")" = "$artifacts" ] || fail "an image that failed its check was stored"
pass "an image whose sha256 differs: build and job failed naming both hashes, nothing stored"

# --- a kernel that does not come back: bad on this board, console kept, its runs failed ---------
x86_image "$served/hangs" 6.12.0-hangs
hangs_sha=$(sha256sum <"$served/hangs" | cut -c1-64)
sed -e "s|^name: prebuilt|name: hangs|" -e "s|/bzImage\"|/hangs\"|" -e "s|sha256: $image_sha|sha256: $hangs_sha|" \
  -e "s|^  prebuilt:|  hangs:|" "$FL_STATE/prebuilt.yaml" >"$FL_STATE/hangs.yaml"
board_health() { sql "SELECT health FROM boards WHERE name = 'sim-board'"; }
hung=$("$FL_BIN_CLI" submit "$FL_STATE/hangs.yaml") || fail "submit hangs"
bad_recorded() { [ "$(sql "SELECT count(*) FROM bad_boots WHERE board = 'sim-board' AND console <> ''")" = 1 ]; }
FL_WAIT_SECONDS=240 fl_wait_for "the failed boot to be recorded" bad_recorded || fail "no bad boot recorded"
hangs=$(sql "SELECT label FROM bad_boots")
[[ $hangs =~ ^hangs@[0-9a-f]{12}$ ]] || fail "bad boot label: $hangs"
[ "$(board_health)" = needs-check ] || fail "board health: $(board_health)"
sql "SELECT reason FROM bad_boots" | grep -q "switch to '$hangs' came back running 6.1.0-sim-stock, expected 6.12.0-hangs" ||
  fail "bad boot reason: $(sql "SELECT reason FROM bad_boots")"
sql "SELECT bootable_kernel_labels FROM boards WHERE name = 'sim-board'" | grep -qv "$hangs" ||
  fail "the board still offers $hangs"
"$FL_BIN_CLI" kernels --job "$hung" >"$FL_STATE/kernels-hung.txt" 2>&1 || true
grep -q "did not boot on sim-board: switch to '$hangs' came back running" "$FL_STATE/kernels-hung.txt" &&
  grep -q "^    \[  121.000000\] INFO: task init:1 blocked for more than 120 seconds.$" "$FL_STATE/kernels-hung.txt" ||
  fail "faultline kernels: $(cat "$FL_STATE/kernels-hung.txt")"
hung_runs_open() { [ "$(sql "SELECT count(*) FROM runs WHERE job_id = $hung AND kernel = '$hangs' AND state <> 'failed'")" = 0 ]; }
fl_wait_for "its runs to fail" hung_runs_open ||
  fail "runs of $hangs: $(sql "SELECT state, failure_reason FROM runs WHERE job_id = $hung AND kernel = '$hangs'")"
sql "SELECT DISTINCT failure_reason FROM runs WHERE job_id = $hung AND kernel = '$hangs'" |
  grep -q "kernel $hangs did not boot on board sim-board and no other board can boot it" ||
  fail "run failure: $(sql "SELECT DISTINCT failure_reason FROM runs WHERE job_id = $hung AND kernel = '$hangs'")"
# The operator checks the board and clears it: it goes on with the job, never that kernel again.
"$FL_BIN_AGENT" --config "$board_dir/agent.yaml" --clear-needs-check >>"$FL_STATE/agent.log" 2>&1 ||
  fail "--clear-needs-check"
board_ok() { [ "$(board_health)" = ok ]; }
fl_wait_for "the board to be healthy again" board_ok || fail "board still needs a check"
FL_WAIT_SECONDS=240 fl_wait_for "job $hung to finish" job_final "$hung" || fail "job $hung did not finish"
job_state_is "$hung" failed || fail "job $hung: $(job_state "$hung")"
[ "$(grep -c " 6.12.0-hangs " "$board_dir/boots.log")" = 1 ] || fail "the bad kernel was booted again: $(cat "$board_dir/boots.log")"
[ "$(sql "SELECT count(*) FROM runs WHERE job_id = $hung AND kernel <> '$hangs' AND state = 'succeeded'")" -gt 0 ] ||
  fail "the job's other runs did not run"
curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/metrics" >"$FL_STATE/metrics-bad.txt" || fail "/metrics"
grep -q "^faultline_kernel_build_bad_boots{arch=\"$(uname -m)\",kernel=\"$hangs\"} 1$" "$FL_STATE/metrics-bad.txt" ||
  fail "faultline_kernel_build_bad_boots: $(grep faultline_kernel_build_bad "$FL_STATE/metrics-bad.txt")"
pass "a kernel that did not come back: bad on the board with its console tail, its runs failed, the board cleared went on without it"
