#!/usr/bin/env bash
# End to end: a list of controller addresses over TLS. gRPC checks a channel's certificates
# against its target name, and for a list that name was the whole list ("Peer name
# 127.0.0.1:1,127.0.0.1:34817 is not in peer certificate"): no list worked over TLS.
#   1. two controllers on one database, one certificate naming IP 127.0.0.1: the CLI given
#      a dead address, then both, answers; with the first live one killed it answers
#      through the second (the name checked is the first address's host);
#   2. a controller whose certificate names only DNS:faultline-controller: the list fails
#      the check, with --tls-server-name faultline-controller it answers.
# Real PostgreSQL, controllers and CLI; no agent.
# Usage: tls_list_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

command -v openssl >/dev/null || { echo "SKIP: openssl not installed"; exit 77; }
source "$(dirname "$0")/lib.sh" tls-list "$@"

declare -A PID
cleanup() {
  for c in "${!PID[@]}"; do fl_stop_pid "${PID[$c]}"; done
  "$FL_ROOT/scripts/pg-throwaway.sh" stop "$FL_STATE/pg" >/dev/null 2>&1 || true
  rm -rf "$FL_STATE"
}
trap cleanup EXIT

# A CA and two server certificates: one for IP 127.0.0.1, one for a shared DNS name only.
(
  cd "$FL_STATE"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=faultline-test-ca" \
    -keyout ca.key -out ca.pem 2>/dev/null
  for cert in ip:IP:127.0.0.1 name:DNS:faultline-controller; do
    name=${cert%%:*}
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout "$name.key" \
      -out "$name.csr" 2>/dev/null
    printf 'subjectAltName=%s\n' "${cert#*:}" >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
      -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  done
) || fail "making the certificates"

start() {  # start controller $1 with certificate $2
  local c=$1
  "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --port-file "$FL_STATE/$c.ports" \
    --tls-cert "$FL_STATE/$2.pem" --tls-key "$FL_STATE/$2.key" >>"$FL_STATE/$c.log" 2>&1 &
  PID[$c]=$!
  fl_wait_alive "controller $c to listen" "${PID[$c]}" test -s "$FL_STATE/$c.ports" ||
    fail "controller $c did not start"
}
port() { sed -n 's/^grpc=//p' "$FL_STATE/$1.ports"; }
cli() { "$FL_BIN_CLI" --tls-ca "$FL_STATE/ca.pem" "$@" >"$FL_STATE/cli.out" 2>&1; }

fl_start_postgres
fl_user_token  # the CLI reads $FAULTLINE_TOKEN
start a ip
start b ip
dead=$("$FL_ROOT/scripts/free-port.sh")  # nothing listens there
cli --controller "127.0.0.1:$dead,127.0.0.1:$(port a),127.0.0.1:$(port b)" jobs ||
  fail "the CLI did not answer through a TLS list: $(cat "$FL_STATE/cli.out")"
fl_stop_pid "${PID[a]}"
unset "PID[a]"
cli --controller "127.0.0.1:$dead,127.0.0.1:$(port a),127.0.0.1:$(port b)" jobs ||
  fail "the CLI did not fail over to the second TLS controller: $(cat "$FL_STATE/cli.out")"
echo "ok: a TLS list answers with a dead address first, and after the first live one died"

start c name
if cli --controller "127.0.0.1:$dead,127.0.0.1:$(port c)" jobs; then
  fail "a certificate without 127.0.0.1 passed the check for 127.0.0.1"
fi
grep -q "peer certificate" "$FL_STATE/cli.out" || fail "unexpected error: $(cat "$FL_STATE/cli.out")"
cli --controller "127.0.0.1:$dead,127.0.0.1:$(port c)" --tls-server-name faultline-controller jobs ||
  fail "--tls-server-name did not name the certificate: $(cat "$FL_STATE/cli.out")"
echo "ok: a shared certificate name is checked with --tls-server-name, and only then"
echo "PASS: TLS with a list of controllers"
