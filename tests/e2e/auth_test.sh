#!/usr/bin/env bash
# End to end: who may call what. Real PostgreSQL, controller (bearer tokens required), agents
# and the CLI. No token, a wrong token, a revoked token: UNAUTHENTICATED. A user token on
# the agent API, an agent token on the job API, an agent token used for another board:
# PERMISSION_DENIED. Only hashes are stored. Then TLS: the CLI reaches a TLS controller
# only with its CA, and with mutual TLS an agent needs a client certificate.
# Usage: auth_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" auth "$@"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do fl_stop_pid "$pid"; done
  fl_stop_all
  rm -rf "$FL_STATE"
}
trap cleanup EXIT
sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }

# cli_fails EXPECTED_TEXT ARGS...: the CLI must fail (exit != 0) printing EXPECTED_TEXT.
cli_fails() {
  local expected=$1 out; shift
  if out=$("$FL_BIN_CLI" "$@" 2>&1); then fail "'faultline $*' succeeded; expected: $expected"; fi
  echo "$out" | grep -q "$expected" || fail "'faultline $*': expected '$expected', got: $out"
}

# An agent process for BOARD with TOKEN_FILE, its log in $FL_STATE/agent-NAME.log.
start_agent_as() {
  local name=$1 board=$2 token_file=$3 extra=${4:-}
  mkdir -p "$FL_STATE/$name"
  cat >"$FL_STATE/$name/agent.yaml" <<YAML
board: $board
work_dir: $FL_STATE/$name
state_dir: $FL_STATE/$name/state
token_file: $token_file
kernels: [{label: vanilla, release: running}]
$extra
YAML
  "$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" --config "$FL_STATE/$name/agent.yaml" \
    --workload-binary "$FL_BIN_WORKLOAD" >>"$FL_STATE/agent-$name.log" 2>&1 &
  PIDS+=($!)
}
logged() { grep -q "$2" "$FL_STATE/agent-$1.log" 2>/dev/null; }

fl_start_postgres
fl_start_controller
fl_start_agent board-a
pass "controller with tokens required; board-a's agent registered with its agent token"

user_token=$FAULTLINE_TOKEN
agent_a_token=$(cat "$FL_STATE/board-a.token")
FAULTLINE_TOKEN= cli_fails "UNAUTHENTICATED: missing credentials" agents
FAULTLINE_TOKEN=flt_0123456789 cli_fails "UNAUTHENTICATED: unknown or revoked token" agents
FAULTLINE_TOKEN=$agent_a_token cli_fails "PERMISSION_DENIED: token 'agent-board-a' is an agent token" jobs
"$FL_BIN_CLI" agents >/dev/null || fail "the user token does not work"
pass "job API: no token / unknown token -> UNAUTHENTICATED, agent token -> PERMISSION_DENIED, user token OK"

# The agent API: a user token, another board's token, and the right one.
start_agent_as swapped board-b "$FL_STATE/user.token"
fl_wait_for "the user-token agent to be refused" logged swapped "is a user token: AgentService needs an agent token" \
  || fail "an agent with a user token was not refused"
cp "$FL_STATE/board-a.token" "$FL_STATE/stolen.token"
start_agent_as impostor board-b "$FL_STATE/stolen.token"
fl_wait_for "the impostor to be refused" logged impostor "acts for board 'board-a', not 'board-b'" \
  || fail "board-a's token worked for board-b"
echo flt_forged >"$FL_STATE/forged.token"
start_agent_as forged board-c "$FL_STATE/forged.token"
fl_wait_for "the forged token to be refused" logged forged "unknown or revoked token" || fail "forged agent token"
[ "$(sql "SELECT count(*) FROM boards WHERE name IN ('board-b', 'board-c')")" = 0 ] \
  || fail "a refused agent registered a board"
start_agent_as board-b board-b "$(fl_agent_token board-b)"
fl_wait_for "board-b to register with its own token" fl_agent_online board-b || fail "board-b's own token"
pass "agent API: user token, another board's token, forged token refused (no board registered); own token OK"

# Only hashes are stored; revocation takes effect (within the 10 s cache).
[ "$(sql "SELECT count(*) FROM api_tokens WHERE token_sha256 = '$user_token'")" = 0 ] || fail "plaintext token stored"
[ "$(sql "SELECT token_sha256 FROM api_tokens WHERE name = 'local-user'")" = \
  "$(printf '%s' "$user_token" | sha256sum | cut -d' ' -f1)" ] || fail "stored hash is not the token's SHA-256"
"$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens list | grep -q "^local-user	user	-	live$" \
  || fail "tokens list"
"$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens revoke --name local-user || fail "revoke"
revoked() { ! "$FL_BIN_CLI" agents >/dev/null 2>&1; }
fl_wait_for "the revocation to take effect" revoked || fail "a revoked token still works"
cli_fails "UNAUTHENTICATED: unknown or revoked token" agents
pass "tokens stored as SHA-256 only; a revoked token is refused"

# TLS: a second controller on the same database, serving gRPC over TLS with a test CA.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=faultline-test-ca" \
  -keyout "$FL_STATE/ca.key" -out "$FL_STATE/ca.pem" >/dev/null 2>&1 || fail "CA"
make_cert() {  # make_cert NAME: a certificate for localhost signed by the test CA
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$FL_STATE/$1.key" \
    -out "$FL_STATE/$1.csr" >/dev/null 2>&1
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$FL_STATE/$1.ext"
  openssl x509 -req -in "$FL_STATE/$1.csr" -CA "$FL_STATE/ca.pem" -CAkey "$FL_STATE/ca.key" \
    -CAcreateserial -days 1 -extfile "$FL_STATE/$1.ext" -out "$FL_STATE/$1.pem" >/dev/null 2>&1
}
make_cert server && make_cert client || fail "certificates"
"$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens create --name tls-user --role user \
  >"$FL_STATE/tls-user.token" || fail "token"
tls_port=$(fl_free_port)
"$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen "127.0.0.1:$tls_port" \
  --http-listen 127.0.0.1:0 --port-file "$FL_STATE/tls.ports" --tls-cert "$FL_STATE/server.pem" \
  --tls-key "$FL_STATE/server.key" --tls-client-ca "$FL_STATE/ca.pem" >>"$FL_STATE/tls-controller.log" 2>&1 &
PIDS+=($!)
fl_wait_for "the TLS controller" test -s "$FL_STATE/tls.ports" || fail "TLS controller did not start"
tls="--controller localhost:$tls_port --token-file $FL_STATE/tls-user.token"
# shellcheck disable=SC2086
FAULTLINE_TOKEN= cli_fails "UNAVAILABLE" $tls agents  # plaintext to a TLS port
pass "plaintext to the TLS controller fails"
# Mutual TLS: the CLI has no client certificate, so even with the CA it is refused; an agent
# with a client certificate signed by the CA gets in.
# shellcheck disable=SC2086
FAULTLINE_TOKEN= cli_fails "UNAVAILABLE" $tls --tls-ca "$FL_STATE/ca.pem" agents
FAULTLINE_CONTROLLER=localhost:$tls_port start_agent_as tls board-tls "$(fl_agent_token board-tls)" \
  "tls_ca: $FL_STATE/ca.pem
tls_cert: $FL_STATE/client.pem
tls_key: $FL_STATE/client.key"
fl_wait_for "the mTLS agent to say hello" logged tls "event=hello_ok board=board-tls" \
  || fail "the agent with a client certificate could not say hello over mutual TLS"
# shellcheck disable=SC2086
FAULTLINE_TOKEN= "$FL_BIN_CLI" $tls --tls-ca "$FL_STATE/ca.pem" --tls-cert "$FL_STATE/client.pem" \
  --tls-key "$FL_STATE/client.key" agents | grep -q board-tls || fail "the CLI with a client certificate"
pass "mutual TLS: no client certificate -> refused; the agent and the CLI with one get in"
echo "PASS: auth e2e"
