#!/usr/bin/env bash
# The series robot's bar on the virtual lab (#45): the seed's three postings of one idea,
# ported to Debian's linux-source-6.12 (tests/e2e/lab_posts/: "[PATCH v2 0/5] mm: reduce
# mmap_lock contention ...", "[RFC PATCH v4 0/3] ..." and "[RFC PATCH v5] ..."; how they were
# ported: deploy/kernel/series/README.md), a netdev patch beside them, posted to a
# public-inbox archive. The controller runs the robot (--robot-config): every series is
# built from source (base and base + series, x86, arm64 and riscv hunks) for every arch with
# a board, studied on every board (filemap thrash with munmap churn and the mmap_lock
# tracepoint), and answered in its thread through an SMTP server that archives what it
# takes; the server kills the controller (kill -9) when the first reply is handed over, and
# the restarted controller sends nothing twice. Checks: three threaded replies (v5 also
# against v4), <= 80 columns, with tables from the lab's runs; a patchwork check on each
# patch (pending, then the verdict); the netdev patch gets nothing.
# TCG: throughputs are functional checks, the counters are evidence.
# Slow (12 kernel builds, then the jobs on three emulated boards: hours): ctest label
# `study`, the weekly tier.
# Usage: lab_robot_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
# Env: FL_LAB_KBUILD_CACHE (the builder's cache, kept: /var/cache/faultline-kbuild),
#      FL_STUDY_ARCHES (default x86_64,aarch64,riscv64), FL_STUDY_OUT (what is kept:
#      /var/tmp/faultline-robot-study), FL_LAB_TEST_KEEP=1
set -euo pipefail

# shellcheck source=tests/e2e/lab_lib.sh
source "$(dirname "$0")/lab_lib.sh" "$@"
export FL_LAB_KBUILD_CACHE=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
ARCHES=${FL_STUDY_ARCHES:-x86_64,aarch64,riscv64}
OUT=${FL_STUDY_OUT:-/var/tmp/faultline-robot-study}
lab_need qemu-system-x86_64:qemu-system-x86 qemu-system-aarch64:qemu-system-arm \
  qemu-system-riscv64:qemu-system-misc aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu \
  riscv64-linux-gnu-gcc:gcc-riscv64-linux-gnu debugfs:e2fsprogs cpio:cpio zstd:zstd \
  psql:postgresql-client flex:flex bison:bison bc:bc git:git \
  public-inbox-init:public-inbox public-inbox-mda:public-inbox
IFS=, read -r -a arch_list <<<"$ARCHES"
for a in "${arch_list[@]}"; do
  [ "$a" = x86_64 ] && continue
  [ -x "$ROOT/build-cross/$a-linux-gnu/bundle/opt/faultline/bin/faultline-agent" ] || {
    echo "SKIP: no $a agent bundle (scripts/cross-build-agent.sh $a)"; exit 77; }
done
lab_state robot
mkdir -p "$OUT"
servers=()
robot_cleanup() {
  local pid
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
  lab_cleanup
}
trap robot_cleanup EXIT
lab_diagnose() {
  sql "SELECT id, version, state, left(coalesce(reason, ''), 300) FROM robot_series ORDER BY id"
  sql "SELECT series_id, kind, state FROM robot_replies ORDER BY series_id"
  sql "SELECT id, label, arch, state, left(coalesce(error, ''), 1000) FROM builds ORDER BY id"
  sql "SELECT id, name, state FROM jobs ORDER BY id"
  sql "SELECT name, health, health_reason FROM boards ORDER BY name"
}

T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$FL_LAB_KBUILD_CACHE/linux-6.12") || fail "linux-tree.sh"
ref=$(git -C "$tree" describe --tags --exact-match HEAD) || fail "no tag in $tree"
pass "tree $tree at $ref ($(secs "$T") s)"

# --- the list: an archive, an SMTP server that archives, patchwork --------------------------
pi=$S/pi
mkdir -p "$pi" "$S/sent"
HOME=$pi PI_CONFIG=$pi/config public-inbox-init -V2 -L basic mm "$pi/mm" http://localhost/mm linux-mm@kvack.org
git config -f "$pi/config" publicinboxmda.spamcheck none
deliver() { HOME=$pi PI_CONFIG=$pi/config ORIGINAL_RECIPIENT=linux-mm@kvack.org public-inbox-mda --no-precheck <"$1"; }
start_server() {  # SCRIPT ARGS...: its port in $port
  local port_file=$S/${1%.py}.port
  python3 -W ignore "$ROOT/tests/support/$1" --port-file "$port_file" "${@:2}" >>"$S/${1%.py}.log" 2>&1 &
  servers+=($!)
  for _ in $(seq 1 100); do [ -s "$port_file" ] && break; sleep 0.1; done
  [ -s "$port_file" ] || fail "$1 did not start"
  port=$(cat "$port_file")
}
start_server smtp_sink.py --dir "$S/sent" --kill-once "$FL_LAB_STATE/up/stack/controller.pid" \
  --deliver-cmd "HOME=$pi PI_CONFIG=$pi/config ORIGINAL_RECIPIENT=linux-mm@kvack.org public-inbox-mda --no-precheck"
smtp_port=$port
posts=$ROOT/tests/e2e/lab_posts
python3 - "$S/patches.json" "$posts" <<'PY'
import email, glob, json, os, sys
patches = []
for i, path in enumerate(sorted(glob.glob(os.path.join(sys.argv[2], "*.eml")))):
    m = email.message_from_file(open(path))
    if " 0/" in m["Subject"]:
        continue
    patches.append({"id": 1000 + i, "msgid": m["Message-ID"].strip(), "name": m["Subject"],
                    "state": "new", "check": "pending"})
json.dump(patches, open(sys.argv[1], "w"))
PY
start_server patchwork_standin.py --token s3cret --patches "$S/patches.json"
pw_port=$port
echo s3cret >"$S/patchwork.token"

# --- the robot's config, the lab with it --------------------------------------------------------
cp "$ROOT/deploy/kernel/board.config" "$S/"
cat >"$S/study.yaml" <<YAML
name: seed-robot
benchmark: filemap-thrash
duration: 2s
repetitions: 8
block_size: 8
events: [mmap_lock:mmap_lock_start_locking, sw:page-faults]
memcg: {memory_max: 128M, memory_high: 96M, swap_max: 0}
params: {file_size: 4M, threads: 4, munmap_threads: 1}
YAML
cat >"$S/robot.yaml" <<YAML
archive: pi/mm
tree: $tree
branch: $ref
studies: [study.yaml]
config_base: tinyconfig
fragments: [board.config]
include: ["mm/*", "include/*", "arch/x86/*", "arch/arm64/*", "arch/riscv/*"]
poll_seconds: 5
replies:
  from: "faultline robot <robot@faultline.example>"
  smtp: 127.0.0.1:$smtp_port
  cc: [mm-tests@faultline.example]
  patchwork: http://127.0.0.1:$pw_port
  patchwork_token_file: patchwork.token
YAML
export FL_CONTROLLER_ARGS="--robot-config $S/robot.yaml"
T=$EPOCHREALTIME
"$LAB" up --arches "$ARCHES" --builder >"$S/up.env" 2>"$S/up.log" || { tail -40 "$S/up.log" >&2; fail "lab.sh up"; }
# shellcheck source=/dev/null
. "$S/up.env"
pass "lab up ($ARCHES) with a builder and the robot in $(secs "$T") s"

for m in v2-0 v2-1 v2-2 v2-3 v2-4 v2-5 v4-0 v4-1 v4-2 v4-3 v5; do deliver "$posts/$m.eml"; done
cat >"$S/net.eml" <<'MAIL'
From: Dev Eloper <dev@example.org>
To: netdev@vger.kernel.org
Subject: [PATCH net-next] net: tidy
Date: Sat, 5 Dec 2026 10:00:00 +0000
Message-ID: <net-tidy@dev.example>

Tidy.

Signed-off-by: Dev Eloper <dev@example.org>
---
diff --git a/net/core/dev.c b/net/core/dev.c
--- a/net/core/dev.c
+++ b/net/core/dev.c
@@ -1,1 +1,1 @@
-#include <linux/uaccess.h>
+#include <linux/uaccess.h> /* tidy */
--
2.39.5
MAIL
deliver "$S/net.eml"
pass "v2 (5 patches), v4 (3), v5 and a netdev patch posted"

# --- hours: the builds and the jobs; the first reply kills the controller ------------------------
deadline=$(( $(date +%s) + ${FL_STUDY_TIMEOUT:-30000} ))
T=$EPOCHREALTIME
until [ -s "$FL_LAB_STATE/up/stack/controller.pid.killed" ]; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "no reply was sent in time"
  [ "$(sql "SELECT count(*) FROM robot_series WHERE state = 'failed'")" = 0 ] || fail "a series failed"
  sleep 30
done
pass "the first reply handed over after $(secs "$T") s; the controller was killed (kill -9)"
killed_reply=$(sql "SELECT message_id FROM robot_replies WHERE state = 'sending'")
[ -n "$killed_reply" ] || fail "the reply handed over is not left 'sending'"
# Restarted on the same ports (the boards and the builder reconnect to them).
(
  # shellcheck source=deploy/local/stack.sh
  source "$ROOT/deploy/local/stack.sh"
  FL_STATE=$FL_LAB_STATE/up/stack
  FL_GRPC_PORT=$(sed -n 's/^grpc=//p' "$FL_STATE/controller.ports")
  FL_HTTP_PORT=$(sed -n 's/^http=//p' "$FL_STATE/controller.ports")
  fl_start_controller
) || fail "the controller did not restart"
pass "the controller restarted"

until [ "$(sql "SELECT count(*) FROM robot_replies WHERE state = 'sent'")" = 3 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "not three replies in time"
  sleep 30
done
[ "$(ls "$S/sent"/*.eml | wc -l)" = 3 ] || fail "mails sent: $(ls "$S/sent")"
[ "$(grep -l "^Message-ID: <$killed_reply>" "$S/sent"/*.eml | wc -l)" = 1 ] ||
  fail "the interrupted reply was sent again"
[ "$(sql "SELECT state FROM robot_series WHERE id = 'net-tidy@dev.example'")" = skipped ] ||
  fail "the netdev patch was not skipped"
pass "three replies, each sent once; the netdev patch skipped"

reply_to() { grep -l "^In-Reply-To: <$1>" "$S/sent"/*.eml; }
for id in 20260430040427.4672-1-baohua@kernel.org 20260804095135.45897-1-zhanghongru@xiaomi.com \
          20260814085300.7356-1-zhanghongru@xiaomi.com; do
  f=$(reply_to "$id") || fail "no reply to $id"
  awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$f" || fail "$f: lines over 80 columns"
  grep -q "rounds/s" "$f" || fail "$f: no throughput table"
  for a in "${arch_list[@]}"; do grep -q "$a" "$f" || fail "$f: nothing on $a"; done
  cp "$f" "$OUT/reply-${id%%@*}.eml"
done
v5=$(reply_to 20260814085300.7356-1-zhanghongru@xiaomi.com)
grep -q "against its base and against v4" "$v5" || fail "v5 is not compared with v4"
pass "the three replies: <= 80 columns, tables from the lab's runs on every arch, v5 also against v4"

verdicts=$(sql "SELECT count(*) FROM robot_checks WHERE kind = 'verdict' AND status = 'posted'")
[ "$verdicts" = 9 ] || fail "$verdicts verdict checks posted, not 9 (one per patch)"
pass "a patchwork verdict on each of the 9 patches"

# Where each series' time went (#58): its jobs' phases per arch (jobs.phases, recorded by the
# controller once a job finished) and the time from the robot's first sight of the series to
# its reply. Kept in $OUT/phases.txt; each reply ends with the same.
for id in 20260430040427.4672-1-baohua@kernel.org 20260804095135.45897-1-zhanghongru@xiaomi.com \
          20260814085300.7356-1-zhanghongru@xiaomi.com; do
  grep -q "^Job [0-9]*, from its submission:$" "$(reply_to "$id")" || fail "$id: no phases in its reply"
done
until [ "$(sql "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL AND phases IS NULL")" = 0 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "jobs' phases not recorded"
  sleep 1
done
{
  echo "series job arch total build_queue building board_wait switching measuring (s)"
  sql "SELECT s.version, j.id, a.key, round((a.value->>'total')::numeric),
              round((a.value->>'build_queue')::numeric), round((a.value->>'building')::numeric),
              round((a.value->>'board_wait')::numeric), round((a.value->>'switching')::numeric),
              round((a.value->>'measuring')::numeric)
         FROM robot_series s CROSS JOIN jsonb_array_elements_text(s.jobs) AS jid
         JOIN jobs j ON j.id = jid::bigint CROSS JOIN jsonb_each(j.phases) AS a
        ORDER BY s.version, j.id, a.key" | tr '|' ' '
  echo "series seen_to_reply (s)"
  sql "SELECT s.version, round(extract(epoch FROM r.sent_at - s.created_at))
         FROM robot_series s JOIN robot_replies r ON r.series_id = s.id
        WHERE r.kind = 'results' ORDER BY s.version" | tr '|' ' '
} | tee "$OUT/phases.txt"
pass "each job's phases per arch recorded and in its reply (kept in $OUT/phases.txt)"
"$LAB" timings | tee "$OUT/timings.txt" || true
echo "total $(secs "$T0") s; replies kept in $OUT"
