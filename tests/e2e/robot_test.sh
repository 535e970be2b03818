#!/usr/bin/env bash
# End to end: the series robot inside a real faultline-controller (--robot-config). A
# public-inbox archive (public-inbox-init -V2, fed by public-inbox-mda as a list server
# does) gets four posted series: v1 and v2 of an mm patch (v2's cover links v1), an mm patch
# that does not apply, and a netdev patch. The kernels are built by a real builder from a
# stand-in tree (kbuild_fixture.sh: real git, a Makefile that answers in milliseconds) and
# booted and measured on a simulated board. Replies go through an SMTP server
# (tests/support/smtp_sink.py) that hands each to public-inbox-mda, so the list archives
# them; checks go to a patchwork stand-in. The first mail handed over kills the controller
# (kill -9) before the server answers: sent, not recorded. Checks: three replies, each
# threaded under its series and sent once (the killed one too, across the restart), v2
# compared with v1, the netdev series untouched, the stale one answered with its hunk,
# `b4 mbox` over public-inbox-httpd showing the reply in the thread, a pending check and
# a verdict on each patch, /metrics. Then patchwork turns slow (20 s an answer) while a
# builder dies mid-build: its build lease is reaped while the robot waits for patchwork.
# Usage: robot_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" robot "$@"
E2E_LOG_LINES=60

for tool in public-inbox-init public-inbox-mda public-inbox-httpd b4; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh test)"; exit 77; }
done
source "$(dirname "$0")/kbuild_fixture.sh"
servers=()
cleanup() {
  local pid
  for pid in "${servers[@]}"; do fl_stop_pid "$pid"; done
  kb_cleanup
}
trap cleanup EXIT
e2e_diagnose() {
  sql "SELECT id, state, reason FROM robot_series ORDER BY id" >&2 || true
  sql "SELECT series_id, kind, state FROM robot_replies ORDER BY series_id" >&2 || true
  sql "SELECT patch_message_id, kind, state, status, error FROM robot_checks ORDER BY seq" >&2 || true
  sql "SELECT id, label, arch, state, coalesce(error, '') FROM builds ORDER BY id" >&2 || true
  sql "SELECT id, name, state FROM jobs ORDER BY id" >&2 || true
}

# --- the list: an archive, its mails --------------------------------------------------------
source "$(dirname "$0")/robot_lib.sh"
deliver() { pi_deliver "$1"; }

# post FILE MSGID SUBJECT IN_REPLY_TO BODY: a mail to the list.
post() {
  {
    printf 'From: Dev Eloper <dev@example.org>\nTo: linux-mm@kvack.org\nSubject: %s\n' "$3"
    printf 'Date: Sat, 5 Dec 2026 10:00:00 +0000\nMessage-ID: <%s>\n' "$2"
    [ -z "$4" ] || printf 'In-Reply-To: <%s>\nReferences: <%s>\n' "$4" "$4"
    printf 'MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\n%s\n' "$5"
  } >"$FL_STATE/mails/$1"
}
# diff FILE OLD NEW: a one-hunk change of line 3 of the stand-in tree's FILE.
diff_of() {
  printf 'Why.\n\nSigned-off-by: Dev Eloper <dev@example.org>\n---\ndiff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n@@ -2,3 +2,3 @@\n int a;\n-%s\n+%s\n int c;\n-- \n2.39.5' \
    "$1" "$1" "$1" "$1" "$2" "$3"
}
mkdir -p "$FL_STATE/mails"
post v1.eml v1@dev.example "[PATCH] mm: b becomes B" "" "$(diff_of mm/memory.c 'int b;' 'int B;')"
post v2-0.eml v2-0@dev.example "[PATCH v2 0/1] mm: b becomes B" "" \
  "b is B now, and long.

v1: https://lore.kernel.org/all/v1@dev.example/"
post v2-1.eml v2-1@dev.example "[PATCH v2 1/1] mm: b becomes B" v2-0@dev.example \
  "$(diff_of mm/memory.c 'int b;' 'long B;')"
post stale.eml stale@dev.example "[PATCH] mm: x becomes y" "" "$(diff_of mm/memory.c 'int x;' 'int y;')"
post net.eml net@dev.example "[PATCH net-next] net: tidy" "" "$(diff_of net/core/dev.c 'int n;' 'int N;')"

# --- the stage: a tree, PostgreSQL, an SMTP server, patchwork, the controller, builder, board --
kb_make_tree
fl_start_postgres
mkdir -p "$FL_STATE/sent"
start_server smtp_sink.py --dir "$FL_STATE/sent" --kill-once "$FL_STATE/controller.pid" \
  --deliver-cmd "HOME=$pi PI_CONFIG=$pi/config ORIGINAL_RECIPIENT=linux-mm@kvack.org public-inbox-mda --no-precheck"
smtp_port=$port
python3 - "$FL_STATE/patches.json" <<'PY'
import json, sys
patches = [(101, "v1@dev.example", "mm: b becomes B"), (201, "v2-1@dev.example", "[v2,1/1] mm: b becomes B"),
           (301, "stale@dev.example", "mm: x becomes y"), (401, "net@dev.example", "[net-next] net: tidy")]
json.dump([{"id": i, "msgid": "<%s>" % m, "name": n, "state": "new", "check": "pending"}
           for i, m, n in patches], open(sys.argv[1], "w"))
PY
start_server patchwork_standin.py --token s3cret --patches "$FL_STATE/patches.json" \
  --hold-file "$FL_STATE/pw.hold" --hold-seconds 20
pw_port=$port
echo s3cret >"$FL_STATE/patchwork.token"
robot_config "  cc: [mm-tests@faultline.example]
  patchwork: http://127.0.0.1:$pw_port
  patchwork_token_file: patchwork.token"
export FL_CONTROLLER_ARGS="--robot-config $FL_STATE/robot.yaml --build-lease 6"
fl_start_controller
kb_start_builder builder-1
kb_start_board
pass "an archive, an SMTP server that archives, patchwork, the controller with its robot, a builder, a board"

for m in v1 v2-0 v2-1 stale net; do deliver "$FL_STATE/mails/$m.eml"; done
series_state() { sql "SELECT state FROM robot_series WHERE id = '$1'"; }

# --- the first reply handed over kills the controller; a new one sends nothing twice ---------
FL_WAIT_SECONDS=300 fl_wait_for "the first reply to be handed over" test -s "$FL_STATE/controller.pid.killed" ||
  fail "no reply was sent"
# Reaped here (until then a killed child is a zombie, which kill -0 still finds): 137 is
# SIGKILL's status.
status=0
wait "$FL_CONTROLLER_PID" 2>/dev/null || status=$?
[ "$status" = 137 ] || fail "the controller did not die of SIGKILL (status $status)"
first=$(ls "$FL_STATE/sent"/*.eml)
killed_reply=$(sql "SELECT message_id FROM robot_replies WHERE state = 'sending'")
[ -n "$killed_reply" ] || fail "the reply handed over is not left 'sending'"
pass "the controller died (kill -9) between handing a reply over and recording it"
fl_start_controller

all_replied() { [ "$(sql "SELECT count(*) FROM robot_replies WHERE state = 'sent'")" = 3 ]; }
FL_WAIT_SECONDS=600 fl_wait_for "three replies sent" all_replied || fail "not every series was answered"
[ "$(ls "$FL_STATE/sent"/*.eml | wc -l)" = 3 ] || fail "mails sent: $(ls "$FL_STATE/sent")"
grep -q "event=robot_reply_uncertain message_id=$killed_reply" "$FL_STATE/controller.log" &&
  grep -q "event=robot_reply_archived message_id=$killed_reply" "$FL_STATE/controller.log" ||
  fail "the interrupted reply was not settled from the archive"
[ "$(grep -l "^Message-ID: <$killed_reply>" "$FL_STATE/sent"/*.eml)" = "$first" ] ||
  fail "the interrupted reply was sent again"
[ "$(series_state net@dev.example)" = skipped ] || fail "net: $(series_state net@dev.example)"
pass "three replies, each sent once (the interrupted one settled by the archive's copy); the netdev series skipped"

# --- what each reply says ---------------------------------------------------------------------
reply_to() { grep -l "^In-Reply-To: <$1>" "$FL_STATE/sent"/*.eml; }
for id in v1@dev.example v2-0@dev.example stale@dev.example; do
  f=$(reply_to "$id") || fail "no reply to $id"
  awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$f" || fail "$f: lines over 80 columns"
  grep -q "^References: <$id>" "$f" || fail "$f: References"
done
v2=$(reply_to v2-0@dev.example)
grep -q "^Subject: Re: \[PATCH v2 0/1\] mm: b becomes B" "$v2" || fail "v2 subject: $(head -20 "$v2")"
sed -n '/^$/,$p' "$v2" | sed -n 2p | grep -Eq "^(No regression in [0-9]+ comparisons( \([0-9]+ inconclusive\))?\.|Regression: )" ||
  fail "v2: the verdict is not first: $(sed -n '/^$/,$p' "$v2" | head -5)"
grep -q "against its base and against v1" "$v2" || fail "v2 is not compared with v1"
[ "$(grep -c "^faultline job " "$v2")" = 2 ] || fail "v2: two job reports expected: $(cat "$v2")"
grep -q "rounds/s" "$v2" || fail "v2: no throughput table"
# Where the time went: each job's phases on the arch, from what the store kept.
[ "$(grep -c "^Job [0-9]*, from its submission:$" "$v2")" = 2 ] &&
  [ "$(grep -Ec "^  $(uname -m), [0-9][^:]*: [a-z]" "$v2")" = 2 ] &&
  [ "$(grep -Ec "measuring [0-9]" "$v2")" = 2 ] ||
  fail "v2: where the time went: $(sed -n '/^Time:/,$p' "$v2")"
stale=$(reply_to stale@dev.example)
grep -q "it does not apply to" "$stale" &&
  grep -q "^Patch 1 of 1 fails in mm/memory.c, the hunk @@ -2,3 +2,3 @@:" "$stale" &&
  grep -q "^> -int x;" "$stale" || fail "the stale series' reply: $(cat "$stale")"
# Cancelled when the robot saw the build fail (a job that ended first, failed, stays so).
stale_jobs=$(sql "SELECT jobs->>0 FROM robot_series WHERE id = 'stale@dev.example'")
[[ $(job_state "$stale_jobs") =~ ^(cancelled|failed)$ ]] ||
  fail "the stale series' job: $(job_state "$stale_jobs")"
pass "v2's reply: verdict first, its base and v1, real reports, its phases; the stale one names its hunk"

# --- b4 mbox over public-inbox-httpd: the reply in the series' thread ---------------------------
httpd_port=$(fl_free_port)
# Not through pi_env (a function: $! would be its subshell, not the server).
env HOME="$pi" PI_CONFIG="$pi/config" public-inbox-httpd -l "127.0.0.1:$httpd_port" \
  >>"$FL_STATE/httpd.log" 2>&1 &
servers+=($!)
fl_wait_for "public-inbox-httpd" curl -fsS "http://127.0.0.1:$httpd_port/mm/" || fail "public-inbox-httpd"
mkdir -p "$FL_STATE/b4"
(cd "$FL_STATE/b4" && HOME=$FL_STATE/b4 b4 -q mbox -C -o . "http://127.0.0.1:$httpd_port/mm/v2-0@dev.example/") \
  >>"$FL_STATE/b4.log" 2>&1 || fail "b4 mbox"
mbx=$(ls "$FL_STATE/b4"/*.mbx)
[ "$(grep -c '^Message-ID: ' "$mbx")" = 3 ] &&
  grep -q "^In-Reply-To: <v2-0@dev.example>" "$mbx" && grep -q "^From: faultline robot" "$mbx" ||
  fail "b4's thread: $(grep -E '^(Message-ID|In-Reply-To|From):' "$mbx")"
pass "b4 mbox: the cover letter, its patch and the robot's reply, threaded"

# --- patchwork and /metrics -------------------------------------------------------------------
# The verdict checks go out at the end of the pass that sent the last reply.
verdicts_posted() { [ "$(sql "SELECT count(*) FROM robot_checks WHERE kind = 'verdict' AND status = 'posted'")" = 3 ]; }
fl_wait_for "the verdict checks" verdicts_posted || fail "the verdict checks were not posted"
checks() { curl -fsS "http://127.0.0.1:$pw_port/api/1.2/patches/$1/checks/" |
  python3 -c 'import json,sys; print("|".join(c["state"] + ": " + c["description"] for c in json.load(sys.stdin)))'; }
[[ $(checks 301) == "pending: 1 A/B jobs running (1 arches)|fail: does not apply to v6.12: patch 1" ]] ||
  fail "stale's checks: $(checks 301)"
[[ $(checks 201) =~ ^pending:\ 2\ A/B\ jobs\ running\ \(1\ arches\)\|(success|warning):\ [0-9]+\ comparisons ]] ||
  fail "v2's checks: $(checks 201)"
[ -z "$(checks 401)" ] || fail "the netdev patch got a check: $(checks 401)"
metrics=$(curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/metrics")
grep -q '^faultline_robot_series{state="replied"} 3$' <<<"$metrics" &&
  grep -q '^faultline_robot_series{state="skipped"} 1$' <<<"$metrics" &&
  grep -q '^faultline_robot_replies{state="sent"} 3$' <<<"$metrics" &&
  grep -q '^faultline_robot_patchwork_checks{status="posted"} 6$' <<<"$metrics" &&
  grep -q '^faultline_robot_kernel_builds{state="done"} 3$' <<<"$metrics" &&
  grep -q '^faultline_robot_kernel_builds{state="failed"} 1$' <<<"$metrics" ||
  fail "metrics: $(grep faultline_robot <<<"$metrics")"
pass "patchwork: pending then the verdict on each tested patch, nothing on the netdev one; /metrics"

# --- a slow patchwork does not hold up the duties (#57) ---------------------------------------
# Patchwork takes 20 s an answer from now on; a new series is posted and its kernel's build
# (builder-1's make sleeps) is left by its builder, killed. The robot's pass waits for
# patchwork on its own thread: the duties reap the build lease (6 s) meanwhile, before the
# robot's request is answered. (Inside the duties, as it was, the reaping waited for it.)
reaps_before=$(grep -c "event=build_leases_expired" "$FL_STATE/controller.log" || true)
touch "$FL_STATE/pw.hold" "$FL_STATE/slow.d/slow"
post slow.eml slow@dev.example "[PATCH] mm: c becomes C" "" "$(diff_of mm/memory.c 'int b;' 'int bee;')"
deliver "$FL_STATE/mails/slow.eml"
held() { grep -q '^held ' "$FL_STATE/pw.hold.log" 2>/dev/null; }
building() { [ "$(sql "SELECT count(*) FROM builds WHERE state = 'building' AND builder = 'builder-1'")" -ge 1 ]; }
fl_wait_for "the robot's request held by patchwork" held || fail "the robot asked patchwork nothing"
held_at=$(date +%s)
fl_wait_for "builder-1 to build the new series' kernel" building || fail "no build started"
kill -KILL "$BUILDER_PID"
reaped() { [ "$(grep -c "event=build_leases_expired" "$FL_STATE/controller.log")" -gt "$reaps_before" ]; }
fl_wait_for "the build lease to be reaped" reaped || fail "the build lease was not reaped"
reaped_s=$(($(date +%s) - held_at))
# The robot's own view: its patchwork call for the series had not ended (it logs each end).
if grep -q "event=patchwork_[a-z]* series=slow@dev.example" "$FL_STATE/controller.log" ||
  grep -q '^answered ' "$FL_STATE/pw.hold.log"; then
  fail "the robot's patchwork call ended before the lease was reaped: $(cat "$FL_STATE/pw.hold.log")"
fi
rm -f "$FL_STATE/pw.hold" "$FL_STATE/slow.d/slow"
answered() { grep -q '^answered ' "$FL_STATE/pw.hold.log"; }
fl_wait_for "patchwork to answer" answered || fail "patchwork never answered"
pass "a slow patchwork (held 20 s) did not hold up the duties: the build lease was reaped ${reaped_s} s into the robot's wait"
