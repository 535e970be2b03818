#!/usr/bin/env bash
# End to end (#56): strangers post to a list the robot follows, and none of it may hurt. A
# real controller with its robot, a real builder (its sandbox: bubblewrap), a simulated
# board, the stand-in tree (kbuild_fixture.sh), a public-inbox archive and an SMTP server
# that archives what it takes. Posted, in this order:
#   hostile   a series whose Makefile reads the builder's token and agent.yaml, dumps its
#             environment (a secret in it), writes outside its slot, plants a git hook,
#             connects to a listener on the builder's loopback, leaves a process behind,
#             prints a token it made up, and fails
#   qp        a patch sent quoted-printable (it applies once decoded)
#   latin     a patch from "=?iso-8859-1?q?J=F6rg_R=F6del?=" (the reply's To: must say so)
#   bytes     a patch whose subject and body hold bytes that are no UTF-8
#   traverse  a diff of ../../escape
#   late      a two-patch series whose cover letter comes after its patches
#   honest    an honest series, last
# Checks: nothing of the builder read, written or reached, no process left, no hook run;
# every series answered once ("did not build" for the hostile one, never "No regression";
# the traversal named with its reason; one reply for the late series); the To: encoded.
# Usage: robot_strangers_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" robot-strangers "$@"
E2E_LOG_LINES=60

for tool in public-inbox-init public-inbox-mda bwrap python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh test)"; exit 77; }
done
source "$(dirname "$0")/kbuild_fixture.sh"
servers=()
cleanup() {
  local pid
  for pid in "${servers[@]}"; do fl_stop_pid "$pid"; done
  pkill -KILL -x -f 'sleep 6062' 2>/dev/null || true
  kb_cleanup
}
trap cleanup EXIT
e2e_diagnose() {
  sql "SELECT id, state, reason FROM robot_series ORDER BY id" >&2 || true
  sql "SELECT series_id, kind, state FROM robot_replies ORDER BY series_id" >&2 || true
  sql "SELECT id, label, state, left(coalesce(error, ''), 300) FROM builds ORDER BY id" >&2 || true
  sql "SELECT message_id, reason FROM robot_skipped_mails" >&2 || true
}

# --- the list ------------------------------------------------------------------------------
source "$(dirname "$0")/robot_lib.sh"
mkdir -p "$FL_STATE/mails"
deliver() { pi_deliver "$FL_STATE/mails/$1.eml"; }

# post_mail NAME MSGID SUBJECT FROM [IN_REPLY_TO] < BODY: a mail to the list (headers as given:
# bytes and encodings are the test's).
post_mail() {
  {
    printf 'From: %s\nTo: linux-mm@kvack.org\nSubject: %s\n' "$4" "$3"
    printf 'Date: Sat, 5 Dec 2026 10:00:00 +0000\nMessage-ID: <%s>\n' "$2"
    [ -z "${5:-}" ] || printf 'In-Reply-To: <%s>\nReferences: <%s>\n' "$5" "$5"
    cat
  } >"$FL_STATE/mails/$1.eml"
}
plain() { printf 'MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n\n'; }
# hunk OLD NEW: a one-hunk change of mm/memory.c's line 3.
hunk() {
  printf 'Why.\n---\ndiff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n@@ -2,3 +2,3 @@\n int a;\n-%s\n+%s\n int c;\n-- \n2.39.5\n' "$1" "$2"
}

kb_make_tree
fl_start_postgres
mkdir -p "$FL_STATE/sent"
start_server smtp_sink.py --dir "$FL_STATE/sent" \
  --deliver-cmd "HOME=$pi PI_CONFIG=$pi/config ORIGINAL_RECIPIENT=linux-mm@kvack.org public-inbox-mda --no-precheck"
smtp_port=$port
# A listener on the builder's loopback (the controller's ports are there too): it writes
# down every connection it accepts.
listen_port=$(fl_free_port)
python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c, a = s.accept(); open(sys.argv[2], "a").write("connected %s\n" % (a,)); c.close()
' "$listen_port" "$FL_STATE/connections" >>"$FL_STATE/listener.log" 2>&1 &
servers+=($!)

robot_config
export FL_CONTROLLER_ARGS="--robot-config $FL_STATE/robot.yaml --build-lease 6"
fl_start_controller
# The builder's environment holds a secret (an object store's key, say).
AWS_SECRET_ACCESS_KEY=e2e-object-store-secret kb_start_builder builder-1
kb_start_board
token_file=$(sed -n 's/^token_file: //p' "$FL_STATE/builder/builder-1.yaml")
token=$(cat "$token_file")
[ -n "$token" ] || fail "no builder token"
pass "the controller with its robot, a sandboxed builder (a secret in its environment), a board"

# --- the mails ---------------------------------------------------------------------------------
# hostile: its Makefile, as git format-patch mails it.
scratch=$FL_STATE/hostile-tree
git clone -q "$tree" "$scratch"
python3 - "$scratch/Makefile" "$token_file" "$FL_STATE" "$tree" "$listen_port" <<'PY'
import sys
path, token_file, state, tree, port = sys.argv[1:]
recipe = "".join("\t" + line + "\n" for line in [
    "@cat %s %s/builder/builder-1.yaml 2>&1 | sed 's/^/LEAK: /' || true" % (token_file, state),
    "@env | sed 's/^/ENV: /'",
    "@touch %s/pwned 2>/dev/null || true" % state,
    "@mkdir -p %s/.git/hooks 2>/dev/null; printf '#!/bin/sh\\ntouch %s/hooked\\n' > %s/.git/hooks/post-checkout 2>/dev/null || true" % (tree, state, tree),
    "@python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %s), 2)' 2>&1 | tail -1 || true" % port,
    "@setsid sh -c 'sleep 6062 >/dev/null 2>&1 &' || true",
    "@echo 'token: made-up-not-the-builders'; exit 1",
])
text = open(path).read()
text = text.replace("bzImage:\n", "bzImage:\n" + recipe, 1)
open(path, "w").write(text)
PY
sed -i 's/^int b;$/int bee;/' "$scratch/mm/memory.c"  # so that an mm filter takes it
git -C "$scratch" -c user.name=S -c user.email=s@example.org commit -qam "mm: tidy the build"
git -C "$scratch" format-patch -1 --stdout | sed -n '/^$/,$p' >"$FL_STATE/hostile.body"
{ plain; sed 1d "$FL_STATE/hostile.body"; } | post_mail hostile hostile@s.example "[PATCH] mm: tidy the build" "S <s@example.org>"
# qp: quoted-printable, with a soft line break inside the added line.
{ printf 'MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: quoted-printable\n\n'
  hunk 'int b;' 'int b =3D 1; /* decoded from quoted-printable, and long enough to be wra=
pped */'; } | post_mail qp qp@s.example "[PATCH] mm: b gets a value" "Q <q@example.org>"
{ plain; hunk 'int b;' 'int Bee;'; } |
  post_mail latin latin@s.example "[PATCH] mm: b is Bee" "=?iso-8859-1?q?J=F6rg_R=F6del?= <joro@example.org>"
{ printf 'MIME-Version: 1.0\nContent-Type: text/plain\n\n'; printf 'Caf\xe9 \xff.\n'; hunk 'int b;' 'int bb;'; } |
  post_mail bytes bytes@s.example "$(printf '[PATCH] mm: caf\xe9 \xfe')" "B <b@example.org>"
{ plain; hunk 'int b;' 'int b2;' | sed '/^-- $/,$d'; printf 'diff --git a/../../escape b/../../escape\nnew file mode 100644\n--- /dev/null\n+++ b/../../escape\n@@ -0,0 +1 @@\n+owned\n-- \n2.39.5\n'; } |
  post_mail traverse traverse@s.example "[PATCH] mm: add a file" "T <t@example.org>"
{ plain; printf 'Two changes.\n'; } | post_mail late-0 late-0@s.example "[PATCH 0/2] mm: two" "L <l@example.org>"
{ plain; hunk 'int b;' 'int b1;'; } | post_mail late-1 late-1@s.example "[PATCH 1/2] mm: one" "L <l@example.org>" late-0@s.example
{ plain; printf 'Why.\n---\ndiff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n@@ -1,3 +1,3 @@\n // mm\n-int a;\n+int a1;\n int b1;\n-- \n2.39.5\n'; } |
  post_mail late-2 late-2@s.example "[PATCH 2/2] mm: two" "L <l@example.org>" late-0@s.example
{ plain; hunk 'int b;' 'int honest;'; } | post_mail honest honest@s.example "[PATCH] mm: an honest one" "H <h@example.org>"

for m in hostile qp latin bytes traverse late-1 late-2; do deliver "$m"; done
series_state() { sql "SELECT state FROM robot_series WHERE id = '$1'"; }
late_decided() { [ -n "$(series_state late-1@s.example)" ]; }
fl_wait_for "the late series to be decided" late_decided ||
  fail "the late series was not decided from its patches"
deliver late-0  # its cover letter, after its patches were taken
deliver honest

replies() { sql "SELECT count(*) FROM robot_replies WHERE state = 'sent'"; }
seven() { [ "$(replies)" -ge 7 ]; }
FL_WAIT_SECONDS=600 fl_wait_for "seven replies" seven || fail "replies sent: $(replies)"
pass "seven series answered, the honest one last"

# --- nothing of the builder read, written or reached -------------------------------------------
hostile_error=$(sql "SELECT coalesce(string_agg(error, ' | '), '') FROM builds WHERE state = 'failed'")
grep -q "made-up-not-the-builders" <<<"$hostile_error" || fail "the hostile build's error: $hostile_error"
! grep -qF "$token" <<<"$hostile_error" || fail "the builder's token is in a build's error"
logs=$FL_STATE/builder/builder-1-cache/logs
! grep -rqF "$token" "$logs" || fail "the builder's token reached a build log"
! grep -rq "e2e-object-store-secret" "$logs" || fail "the builder's environment reached a build log"
grep -rq "^LEAK: cat: $token_file: No such file" "$logs" || fail "the token file was visible: $(grep -rh LEAK "$logs")"
[ ! -e "$FL_STATE/pwned" ] || fail "the build wrote outside its slot"
[ ! -e "$tree/.git/hooks/post-checkout" ] || fail "the build planted a git hook"
[ ! -e "$FL_STATE/hooked" ] || fail "a planted hook ran"
[ ! -s "$FL_STATE/connections" ] || fail "the build reached the loopback: $(cat "$FL_STATE/connections")"
! pgrep -x -f 'sleep 6062' >/dev/null || fail "a process of the build outlived it"
ls /sys/fs/cgroup/*/faultline/build-* -d 2>/dev/null | grep -q . && fail "build cgroups left: $(ls -d /sys/fs/cgroup/*/faultline/build-*)"
pass "no secret read, nothing written outside the slot, no connection, no process left, no hook"

# --- what each reply says ------------------------------------------------------------------------
reply_to() { grep -l "^In-Reply-To: <$1>" "$FL_STATE/sent"/*.eml; }
body_of() { sed -n '/^$/,$p' "$1"; }
for id in hostile qp latin bytes traverse honest; do
  n=$(grep -l "^In-Reply-To: <$id@s.example>" "$FL_STATE/sent"/*.eml | wc -l)
  [ "$n" = 1 ] || fail "$id: $n replies"
done
# The late series: one reply, to its cover letter or to its first patch (whichever was there
# when the reply was written).
n=$(grep -lE "^In-Reply-To: <late-[012]@s.example>" "$FL_STATE/sent"/*.eml | wc -l)
[ "$n" = 1 ] || fail "the late series: $n replies"
hostile=$(reply_to hostile@s.example)
body_of "$hostile" | grep -q "^Not tested: 1 kernel build(s) failed:" &&
  ! grep -q "No regression" "$hostile" && body_of "$hostile" | grep -q "did not build" ||
  fail "the hostile series' reply: $(body_of "$hostile" | head -8)"
qp=$(reply_to qp@s.example)
! grep -q "does not apply" "$qp" || fail "the quoted-printable patch was answered: $(body_of "$qp" | head -5)"
latin=$(reply_to latin@s.example)
grep -q "^To: =?UTF-8?B?SsO2cmcgUsO2ZGVs?= <joro@example.org>$" "$latin" ||
  fail "the To: of Jörg's reply: $(grep '^To:' "$latin")"
LC_ALL=C grep -q $'[\x80-\xff]' <(sed '/^$/q' "$latin") && fail "a header byte that is not ASCII"
traverse=$(reply_to traverse@s.example)
grep -q "fails in ../../escape" "$traverse" && grep -q "because a path outside the tree" "$traverse" ||
  fail "the traversal's reply: $(body_of "$traverse" | head -8)"
[ -n "$(reply_to bytes@s.example)" ] || fail "the bytes series was not answered"
[ "$(series_state honest@s.example)" = replied ] || fail "honest: $(series_state honest@s.example)"
pass "the hostile build said failed (never 'no regression'), the quoted-printable patch applied, Jörg's To: encoded, the traversal named with its reason, one reply to the late series"
