#!/usr/bin/env bash
# End to end: kernel images in a real S3-compatible object store (Ceph's radosgw, one node:
# tests/support/radosgw.sh). The controller keeps the images builders upload in the bucket
# instead of the database; a board gets a presigned URL with each kernel switch, fetches the
# image by it (no credentials), verifies it by sha256 and boots it. Checks: a controller
# pointed at a missing bucket or given refused keys does not start and says which; the
# images are objects in the bucket (sizes and hashes as built) and not in the database; the
# board fetched them by URL; the A/B study succeeds on them; a download the network cuts
# short resumes from where it stopped (Range) and is verified; a board whose agent is killed
# mid-download resumes it in its next life on the same boot (not a failed switch). All of it
# over https (radosgw's TLS port, a throwaway CA); without that CA the controller refuses.
# Usage: kernel_s3_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" kbuild-s3 "$@"
E2E_LOG_LINES=60
source "$(dirname "$0")/kbuild_fixture.sh"
trap kb_cleanup EXIT

for tool in radosgw ceph-mon ceph-osd ceph radosgw-admin; do
  command -v "$tool" >/dev/null || {
    echo "SKIP: $tool not installed (scripts/install-deps.sh installs radosgw ceph-mon ceph-osd ceph-common)"
    exit 77
  }
done

# --- the object store ---------------------------------------------------------------------------
RGW_DIR=$FL_STATE/rgw
"$FL_ROOT/tests/support/radosgw.sh" start "$RGW_DIR" >>"$FL_STATE/rgw.log" 2>&1 ||
  fail "radosgw did not start: $(tail -5 "$FL_STATE/rgw.log")"
# shellcheck source=/dev/null
source "$RGW_DIR/env"  # S3_ENDPOINT S3_ACCESS_KEY S3_SECRET_KEY S3_BUCKET S3_REGION
printf 'access_key=%s\nsecret_key=%s\n' "$S3_ACCESS_KEY" "$S3_SECRET_KEY" >"$FL_STATE/s3.creds"
printf 'access_key=%s\nsecret_key=not-the-secret\n' "$S3_ACCESS_KEY" >"$FL_STATE/wrong.creds"
pass "radosgw up at $S3_ENDPOINT (bucket $S3_BUCKET)"

# --- a store the controller cannot use stops its start, naming why ------------------------------
fl_start_postgres
refused() {  # BUCKET CREDENTIALS: the controller's start with these
  if "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --artifact-s3-endpoint "$S3_ENDPOINT" --artifact-s3-bucket "$1" \
    --artifact-s3-region "$S3_REGION" --artifact-s3-credentials "$2" >"$FL_STATE/refused.out" 2>&1; then
    fail "the controller started with bucket $1 and $2"
  fi
  cat "$FL_STATE/refused.out"
}
refused no-such-bucket "$FL_STATE/s3.creds" |
  grep -q "s3 $S3_ENDPOINT bucket no-such-bucket: HTTP 404 (no such bucket)" ||
  fail "missing bucket: $(cat "$FL_STATE/refused.out")"
refused "$S3_BUCKET" "$FL_STATE/wrong.creds" |
  grep -q "s3 $S3_ENDPOINT bucket $S3_BUCKET: HTTP 403 (the credentials are refused)" ||
  fail "wrong secret: $(cat "$FL_STATE/refused.out")"
tls_port=${S3_TLS_ENDPOINT##*:}
S3_ENDPOINT=$S3_TLS_ENDPOINT refused "$S3_BUCKET" "$FL_STATE/s3.creds" |
  grep -q "s3 $S3_TLS_ENDPOINT: TLS with 127.0.0.1:$tls_port failed: unable to get local issuer certificate" ||
  fail "https without the store's CA: $(cat "$FL_STATE/refused.out")"
pass "a missing bucket, a wrong secret and an https store whose CA is not given stop the controller's start, naming them"

# --- builds go to the bucket; the board fetches them by URL --------------------------------------
# Over https through a proxy (TLS on both sides, the test CA) that cuts the first image
# download after 100 bytes of its body (the network dropping mid-download: the board must
# resume with a Range request) and stalls the second after 200 (the board's agent is killed
# there: its next life must resume it).
python3 "$FL_ROOT/tests/support/cutting_proxy.py" "$FL_STATE/proxy.port" 127.0.0.1 "$tls_port" \
  "/$S3_BUCKET/faultline/kernels/" cut:100,stall:200 "$FL_STATE/proxy.log" \
  "$S3_TLS_CERT" "$S3_TLS_KEY" "$S3_CA" >>"$FL_STATE/proxy.out" 2>&1 &
HTTP_PID=$!
fl_wait_for "the proxy" test -s "$FL_STATE/proxy.port" || fail "the proxy did not start"
S3_VIA_PROXY=https://127.0.0.1:$(cat "$FL_STATE/proxy.port")
FL_CONTROLLER_ARGS="--artifact-s3-endpoint $S3_VIA_PROXY --artifact-s3-bucket $S3_BUCKET \
  --artifact-s3-region $S3_REGION --artifact-s3-credentials $FL_STATE/s3.creds \
  --artifact-s3-ca $S3_CA" fl_start_controller
grep -q "event=artifact_store endpoint=$S3_VIA_PROXY bucket=$S3_BUCKET" "$FL_STATE/controller.log" ||
  fail "the controller does not say it keeps images in the object store"
kb_make_tree
kb_start_builder builder-1
KB_BUILT_EXTRA="url_ca: $S3_CA" kb_start_board
spec s3-ab fix.mbox >"$FL_STATE/ab.yaml"
job=$("$FL_BIN_CLI" submit "$FL_STATE/ab.yaml") || fail "submit"
# The second image's download stalls: kill the board's agent there and start it again on
# the same boot (as systemd would).
FL_WAIT_SECONDS=240 fl_wait_for "the second download to stall" \
  grep -q "^stalled after 200 body bytes$" "$FL_STATE/proxy.log" || fail "no stalled download"
killed=$(agent_pid)
kill -KILL "$killed"
fl_wait_for "the killed agent to be gone" bash -c "! kill -0 $killed 2>/dev/null" || fail "agent $killed lives"
! grep -q "Range: bytes=200-" "$FL_STATE/proxy.log" || fail "resumed before the agent was killed"
[ "$(grep -c "event=kernel_fetched" "$FL_STATE/agent.log")" = 1 ] || fail "the stalled image was fetched"
"$board_dir/start-agent.sh"
FL_WAIT_SECONDS=240 fl_wait_for "job $job to finish" job_final "$job" || fail "job $job did not finish"
job_state_is "$job" succeeded || fail "job $job: $(job_state "$job")"
[ "$(sql "SELECT count(*) FROM builds WHERE state = 'done'")" = 2 ] || fail "builds"
[ "$(sql "SELECT count(*) FROM artifacts WHERE location = 's3'")" = 2 ] &&
  [ "$(sql "SELECT count(*) FROM artifact_chunks")" = 0 ] ||
  fail "images in the database: $(sql "SELECT sha256, location FROM artifacts")"
while IFS='|' read -r label sha bytes; do
  stat=$(radosgw-admin -c "$RGW_DIR/ceph.conf" object stat --bucket "$S3_BUCKET" \
    --object "faultline/kernels/$sha" 2>>"$FL_STATE/rgw.log") || fail "no object for $label ($sha)"
  size=$(jq -r '.size' <<<"$stat")
  [ "$size" = "$bytes" ] || fail "$label: object of $size bytes, built $bytes"
  grep -q "^$label [^ ]* $sha$" "$board_dir/boots.log" || fail "$label not booted with its sha256: $(cat "$board_dir/boots.log")"
done < <(sql "SELECT label, image_sha256, outcome->>'image_bytes' FROM builds")
[ "$(grep -c "event=kernel_fetched .* from=url" "$FL_STATE/agent.log")" = 2 ] ||
  fail "the board did not fetch both images by URL: $(grep event=kernel_fetched "$FL_STATE/agent.log")"
pass "both images are objects in the bucket (sizes as built), fetched by presigned URL, verified and booted; the study succeeded"
grep -q "^cut after 100 body bytes$" "$FL_STATE/proxy.log" &&
  grep -q "^GET /$S3_BUCKET/faultline/kernels/[0-9a-f]\{64\}?X-Amz-Algorithm=.* HTTP/1.1 Range: bytes=100-$" "$FL_STATE/proxy.log" &&
  grep -q "event=kernel_fetch_retry .*cut short at 100 of" "$FL_STATE/agent.log" ||
  fail "no resumed download: $(cat "$FL_STATE/proxy.log"; grep -h "kernel_fetch" "$FL_STATE/agent.log")"
pass "a download cut after 100 bytes resumed from byte 100 (Range) and verified"
grep -q "^GET /$S3_BUCKET/faultline/kernels/[0-9a-f]\{64\}?X-Amz-Algorithm=.* HTTP/1.1 Range: bytes=200-$" "$FL_STATE/proxy.log" ||
  fail "the killed agent's download did not resume: $(cat "$FL_STATE/proxy.log")"
grep -q "event=kernel_switch_not_begun board=sim-board" "$FL_STATE/controller.log" ||
  fail "the controller did not see a switch that never began"
[ "$(sql "SELECT count(*) FROM bad_boots")" = 0 ] &&
  [ "$(sql "SELECT health FROM boards WHERE name = 'sim-board'")" = ok ] &&
  ! grep -q "needs-check\|needs_check" "$FL_STATE/controller.log" ||
  fail "the agent's restart counted as a failed switch: $(sql "SELECT * FROM bad_boots")"
pass "an agent killed mid-download resumed it in its next life (from byte 200, verified); the switch was ordered again, the board never needed a check"
