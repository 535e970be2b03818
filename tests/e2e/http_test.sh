#!/usr/bin/env bash
# End to end: the controller's HTTP endpoint (/healthz, /readyz, /metrics) against slow,
# hostile and busy clients. Real PostgreSQL and the real controller (default limits: 10 s
# per request, 8 KiB of header, 64 KiB of body). The clients are tests/e2e/http_clients.py:
#   1. 200 half-open connections and a one-byte-a-second client: /healthz answers every
#      probe within 1 s (a few ms is typical; a probe held up by a stalled peer would wait
#      for the 10 s deadline), and the server cuts all of them off at that deadline;
#   2. 200 concurrent scrapes of /metrics all succeed (and three on one kept-alive connection);
#   3. a 64 KiB header -> 431, a declared 10 GB body -> 413 without reading it, BREW /metrics
#      -> 405 with Allow, an unknown path -> 404, HEAD /metrics; /metrics counts all of it;
#   4. PostgreSQL hung (SIGSTOP): /readyz is 503 within ~2 s, /healthz still answers at once
#      while a /metrics scrape waits on the database; after SIGCONT /readyz is 200 again;
#   5. --http-config (the exporter-toolkit's web config): a second controller with TLS and
#      basic auth (bcrypt) on /metrics; curl and a real Prometheus scrape it with the right
#      credentials and are refused without; stalled TLS handshakes are cut off at the
#      deadline while /healthz over TLS answers; an unsupported key refuses to start.
# Usage: http_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" http "$@"
CLIENTS="$(dirname "$0")/http_clients.py"
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }

PIDS=()
STOPPED_PG=()
cleanup() {
  [ ${#STOPPED_PG[@]} -eq 0 ] || kill -CONT "${STOPPED_PG[@]}" 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  fl_stop_all
  rm -rf "$FL_STATE"
}
trap cleanup EXIT
ulimit -n 4096 2>/dev/null || true  # the clients hold ~400 sockets at once

fl_start_postgres
fl_start_controller
port=$FL_HTTP_PORT
pass "controller up, HTTP on port $port"

python3 "$CLIENTS" hostile "$port" 10 || fail "hostile clients"
python3 "$CLIENTS" scrapes "$port" 200 || fail "concurrent scrapes"
python3 "$CLIENTS" limits "$port" || fail "limits and methods"
# The endpoint counts what it ended and refused, in its own /metrics.
curl -fsS "http://127.0.0.1:$port/metrics" >"$FL_STATE/metrics.txt" || fail "/metrics"
metric() { sed -n "s/^$1 //p" "$FL_STATE/metrics.txt" | cut -d. -f1; }
timeouts=$(metric 'faultline_http_connections_ended_total{reason="timeout"}')
refused_413=$(metric 'faultline_http_requests_refused_total{code="413"}')
refused_431=$(metric 'faultline_http_requests_refused_total{code="431"}')
[ "${timeouts:-0}" -ge 201 ] && [ "${refused_413:-0}" -ge 1 ] && [ "${refused_431:-0}" -ge 1 ] \
  || fail "/metrics counts: timeouts '$timeouts', 413 '$refused_413', 431 '$refused_431'"
if command -v promtool >/dev/null; then
  promtool check metrics <"$FL_STATE/metrics.txt" || fail "promtool check metrics complains"
fi
pass "/metrics counts $timeouts connections cut off at the deadline, $refused_413 refused with 413, $refused_431 with 431"

# PostgreSQL hangs: every process of the cluster stopped (the postmaster and its backends).
pg_ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; }
fl_wait_for "/readyz" pg_ready || fail "/readyz is not 200 before the outage"
postmaster=$(head -n 1 "$FL_STATE/pg/data/postmaster.pid")
mapfile -t backends < <(pgrep -P "$postmaster")
STOPPED_PG=("$postmaster" "${backends[@]}")
kill -STOP "${STOPPED_PG[@]}"
curl -s -o "$FL_STATE/metrics-hung.txt" -w '%{http_code} %{time_total}\n' --max-time 60 \
  "http://127.0.0.1:$port/metrics" >"$FL_STATE/metrics-hung.out" 2>/dev/null &
PIDS+=($!)
metrics_pid=$!
read -r code took < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 10 \
  "http://127.0.0.1:$port/readyz")
[ "$code" = 503 ] || fail "/readyz with PostgreSQL stopped: $code after $took s"
# /readyz gives up on the database after 2 s; 5 s leaves room for a loaded machine and is
# still half of what a /readyz that waited on the stopped database would take (curl's 10 s).
awk -v t="$took" 'BEGIN { exit !(t < 5.0) }' || fail "/readyz took $took s with PostgreSQL stopped"
python3 "$CLIENTS" probe "$port" 20 || fail "/healthz while PostgreSQL is stopped"
pass "PostgreSQL stopped: /readyz 503 in ${took} s; /healthz unaffected (above) while a scrape waits"
kill -CONT "${STOPPED_PG[@]}"
STOPPED_PG=()
fl_wait_for "/readyz after the outage" pg_ready || fail "/readyz did not recover"
wait "$metrics_pid" || true
read -r mcode mtook <"$FL_STATE/metrics-hung.out"
# The scrape that waited on the stopped database: answered once it was back (200), or 503
# by the 10 s handler deadline if the database stayed away longer; never left hanging.
case "$mcode" in 200|503) ;; *) fail "the scrape during the outage ended with '$mcode'" ;; esac
pass "PostgreSQL continued: /readyz 200 again; the scrape that waited got $mcode after ${mtook} s"
# ------------------------------------------------- 5. TLS and basic auth (--http-config) ----
mkdir -p "$FL_STATE/web"
cd "$FL_STATE/web"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=faultline-test-ca" \
  -keyout ca.key -out ca.pem >/dev/null 2>&1 || fail "CA"
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr \
  >/dev/null 2>&1 || fail "server key"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
  -extfile server.ext -out server.pem >/dev/null 2>&1 || fail "server certificate"
cd - >/dev/null
hash=$(echo 's3cret pass' | "$FL_BIN_CONTROLLER" http-hash-password) || fail "http-hash-password"
# Relative file names: taken from the config file's directory, as the exporter-toolkit does.
cat >"$FL_STATE/web/web.yml" <<YAML
tls_server_config:
  cert_file: server.pem
  key_file: server.key
basic_auth_users:
  prometheus: '$hash'
YAML
"$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
  --http-listen 127.0.0.1:0 --port-file "$FL_STATE/tls.ports" --http-config "$FL_STATE/web/web.yml" \
  >>"$FL_STATE/tls-controller.log" 2>&1 &
PIDS+=($!)
fl_wait_for "the TLS controller" test -s "$FL_STATE/tls.ports" || fail "TLS controller did not start"
tport=$(sed -n 's/^http=//p' "$FL_STATE/tls.ports")
turl="https://localhost:$tport"
tcurl() { curl -s --cacert "$FL_STATE/web/ca.pem" "$@"; }
[ "$(tcurl "$turl/healthz")" = ok ] || fail "/healthz over TLS"
tcurl -D "$FL_STATE/401.headers" -o /dev/null "$turl/metrics"
grep -q "^HTTP/1.1 401" "$FL_STATE/401.headers" && grep -qi '^WWW-Authenticate: Basic realm="faultline"' \
  "$FL_STATE/401.headers" || fail "/metrics without credentials: $(cat "$FL_STATE/401.headers")"
[ "$(tcurl -o /dev/null -w '%{http_code}' -u prometheus:wrong "$turl/metrics")" = 401 ] \
  || fail "/metrics with a wrong password"
[ "$(tcurl -o /dev/null -w '%{http_code}' -u nobody:x "$turl/metrics")" = 401 ] \
  || fail "/metrics as an unknown user"
read -r code first < <(tcurl -o "$FL_STATE/tls-metrics.txt" -w '%{http_code} %{time_total}\n' \
  -u 'prometheus:s3cret pass' "$turl/metrics")
[ "$code" = 200 ] && grep -q '^faultline_database_up 1' "$FL_STATE/tls-metrics.txt" \
  || fail "/metrics with the right password: $code"
read -r code again < <(tcurl -o /dev/null -w '%{http_code} %{time_total}\n' \
  -u 'prometheus:s3cret pass' "$turl/metrics")
[ "$code" = 200 ] || fail "/metrics with the right password, again: $code"
plain=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$tport/healthz" || true)
[ "$plain" = 000 ] || fail "plaintext HTTP to the TLS port was answered: $plain"
pass "TLS + basic auth: /healthz open; /metrics 401 (with WWW-Authenticate) without credentials, with a wrong password or user; 200 with the right one (first ${first} s: bcrypt, then ${again} s: remembered); plaintext refused"

# A real Prometheus scrapes it the Prometheus way (scheme https, tls_config, basic_auth);
# a second job with a wrong password must see the target down.
if command -v prometheus >/dev/null; then
  prom_port=$(fl_free_port)
  cat >"$FL_STATE/prom-tls.yml" <<YAML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: right
    scheme: https
    tls_config: {ca_file: $FL_STATE/web/ca.pem, server_name: localhost}
    basic_auth: {username: prometheus, password: 's3cret pass'}
    static_configs: [{targets: ["127.0.0.1:$tport"]}]
  - job_name: wrong
    scheme: https
    tls_config: {ca_file: $FL_STATE/web/ca.pem, server_name: localhost}
    basic_auth: {username: prometheus, password: nope}
    static_configs: [{targets: ["127.0.0.1:$tport"]}]
YAML
  prometheus --config.file="$FL_STATE/prom-tls.yml" --storage.tsdb.path="$FL_STATE/prom-tls" \
    --web.listen-address="127.0.0.1:$prom_port" >"$FL_STATE/prometheus-tls.log" 2>&1 &
  PIDS+=($!)
  up_is() {  # up_is JOB VALUE
    curl -fsS "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=up{job=\"$1\"}" |
      grep -q "\"value\":\[[0-9.]*,\"$2\"\]"
  }
  fl_wait_for "Prometheus to scrape with the right password" up_is right 1 || fail "Prometheus: up{job=right} != 1"
  fl_wait_for "Prometheus to fail with the wrong password" up_is wrong 0 || fail "Prometheus: up{job=wrong} != 0"
  pass "Prometheus scrapes over TLS with basic_auth: up 1 with the right password, 0 with a wrong one"
fi

python3 "$CLIENTS" tls "$tport" "$FL_STATE/web/ca.pem" 10 || fail "stalled TLS handshakes"

printf 'tls_server_config: {cert_file: a, key_file: b}\nhttp_server_config: {http2: false}\n' \
  >"$FL_STATE/web/unsupported.yml"
if timeout 30 "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
     --http-listen 127.0.0.1:0 --http-config "$FL_STATE/web/unsupported.yml" \
     >"$FL_STATE/unsupported.log" 2>&1; then
  fail "a controller with an unsupported --http-config key started"
fi
grep -q "'http_server_config' is not supported" "$FL_STATE/unsupported.log" \
  || fail "unsupported key: $(cat "$FL_STATE/unsupported.log")"
pass "an --http-config key faultline does not serve (http_server_config) refuses to start, naming it"
echo "PASS: http e2e"
