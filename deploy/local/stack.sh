# Shell library for a one-machine faultline stack (sourced by run-study.sh and the e2e
# test): a throwaway PostgreSQL, the controller and one agent, all ended by their pid.
# Needs: FL_BIN_CONTROLLER, FL_BIN_AGENT, FL_BIN_WORKLOAD, FL_BIN_CLI, FL_STATE (a directory).
# Optional: FL_ZRAM_SWAP (e.g. 512M): the agent sets up a zram swap device of that size for
# each run that needs swap (swap-in, mmap-writer-pressure) and removes it afterwards.

FL_ROOT=${FL_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

fl_log() { echo "[faultline-stack] $*" >&2; }

# Waits until "$@" succeeds, polling, for at most $FL_WAIT_SECONDS (default 60).
fl_wait_for() {
  local what=$1; shift
  local deadline=$(( $(date +%s) + ${FL_WAIT_SECONDS:-60} ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then fl_log "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
}

fl_free_port() { "$FL_ROOT/scripts/free-port.sh"; }

# fl_wait_alive WHAT PID CMD...: as fl_wait_for, but gives up as soon as PID has exited.
fl_wait_alive() {
  local what=$1 pid=$2; shift 2
  local deadline=$(( $(date +%s) + ${FL_WAIT_SECONDS:-60} ))
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then fl_log "$what exited"; return 1; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then fl_log "timed out waiting for $what"; return 1; fi
    sleep 0.2
  done
}

fl_start_postgres() {
  FL_DATABASE_URL=$("$FL_ROOT/scripts/pg-throwaway.sh" start "$FL_STATE/pg")
  export FL_DATABASE_URL
  fl_log "PostgreSQL: $FL_DATABASE_URL"
}

# API tokens (the controller requires them): one user token for the CLI, exported as
# FAULTLINE_TOKEN, and one agent token per board, in $FL_STATE/BOARD.token.
fl_user_token() {
  if [ ! -s "$FL_STATE/user.token" ]; then
    "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens create --name local-user --role user \
      >"$FL_STATE/user.token" || return 1
  fi
  FAULTLINE_TOKEN=$(cat "$FL_STATE/user.token")
  export FAULTLINE_TOKEN
}
fl_agent_token() {  # prints the token file of board $1
  local board=$1
  if [ ! -s "$FL_STATE/$board.token" ]; then
    "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens create --name "agent-$board" \
      --role agent --board "$board" >"$FL_STATE/$board.token" || return 1
    chmod 600 "$FL_STATE/$board.token"
  fi
  echo "$FL_STATE/$board.token"
}

fl_start_controller() {
  fl_user_token || return 1
  rm -f "$FL_STATE/controller.ports"
  # FL_GRPC_HOST: where gRPC listens (default 127.0.0.1); FL_CONTROLLER_ARGS: extra flags.
  # shellcheck disable=SC2086
  "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" \
    --grpc-listen "${FL_GRPC_HOST:-127.0.0.1}:${FL_GRPC_PORT:-0}" --http-listen "127.0.0.1:${FL_HTTP_PORT:-0}" \
    --port-file "$FL_STATE/controller.ports" ${FL_CONTROLLER_ARGS:-} >>"$FL_STATE/controller.log" 2>&1 &
  FL_CONTROLLER_PID=$!
  echo "$FL_CONTROLLER_PID" >"$FL_STATE/controller.pid"
  fl_wait_for "the controller to listen" test -s "$FL_STATE/controller.ports" || {
    cat "$FL_STATE/controller.log" >&2; return 1; }
  FL_GRPC_PORT=$(sed -n 's/^grpc=//p' "$FL_STATE/controller.ports")
  FL_HTTP_PORT=$(sed -n 's/^http=//p' "$FL_STATE/controller.ports")
  export FAULTLINE_CONTROLLER="127.0.0.1:$FL_GRPC_PORT"
  fl_log "controller: gRPC $FAULTLINE_CONTROLLER, HTTP http://127.0.0.1:$FL_HTTP_PORT/healthz (pid $FL_CONTROLLER_PID)"
}

fl_start_agent() {
  local board=${1:-local}
  mkdir -p "$FL_STATE/work"
  cat >"$FL_STATE/agent.yaml" <<YAML
board: $board
labels: {site: local}
work_dir: $FL_STATE/work
state_dir: $FL_STATE/agent-state
token_file: $(fl_agent_token "$board")
zram_swap: ${FL_ZRAM_SWAP:-0}
kernels:
YAML
  # FL_KERNEL_LABELS: labels for the running kernel (two labels make an A/A study possible).
  local label
  for label in ${FL_KERNEL_LABELS:-vanilla}; do
    echo "  - {label: $label, release: running, boot: none}" >>"$FL_STATE/agent.yaml"
  done
  "$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" --config "$FL_STATE/agent.yaml" \
    --workload-binary "$FL_BIN_WORKLOAD" >>"$FL_STATE/agent.log" 2>&1 &
  FL_AGENT_PID=$!
  echo "$FL_AGENT_PID" >"$FL_STATE/agent.pid"
  fl_wait_for "agent '$board' to register" fl_agent_online "$board" || {
    cat "$FL_STATE/agent.log" >&2; return 1; }
  fl_log "agent: board $board online (pid $FL_AGENT_PID)"
}

fl_agent_online() {
  "$FL_BIN_CLI" agents 2>/dev/null | awk -v b="$1" '$1 == b && /online/ { found = 1 } END { exit !found }'
}

fl_stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# Alertmanager with the repo's routing; $1: the webhook URL alerts go to.
fl_start_alertmanager() {
  sed "s|http://127.0.0.1:9095/alerts|$1|" "$FL_ROOT/deploy/alertmanager/alertmanager.yml" \
    >"$FL_STATE/alertmanager.yml"
  # The port is picked before the server binds it: when another listener took it meanwhile,
  # the server exits ("address already in use") and another port is tried.
  local attempt
  for attempt in 1 2 3; do
    FL_AM_PORT=$(fl_free_port)
    prometheus-alertmanager --config.file="$FL_STATE/alertmanager.yml" --storage.path="$FL_STATE/am" \
      --web.listen-address="127.0.0.1:$FL_AM_PORT" --cluster.listen-address= \
      >"$FL_STATE/alertmanager.log" 2>&1 &
    FL_AM_PID=$!
    if fl_wait_alive "Alertmanager" "$FL_AM_PID" curl -fsS "http://127.0.0.1:$FL_AM_PORT/-/ready"; then
      fl_log "Alertmanager: http://127.0.0.1:$FL_AM_PORT (pid $FL_AM_PID)"
      return 0
    fi
    fl_stop_pid "$FL_AM_PID"
    grep -q "address already in use" "$FL_STATE/alertmanager.log" || return 1
  done
  return 1
}

# Prometheus with the repo's alert rules, scraping the controller every second.
fl_start_prometheus() {
  FL_PROM_PORT=$(fl_free_port)
  cat >"$FL_STATE/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$FL_ROOT/deploy/prometheus/faultline-rules.yml"]
alerting:
  alertmanagers: [{static_configs: [{targets: ["127.0.0.1:${FL_AM_PORT:-9093}"]}]}]
scrape_configs:
  - job_name: faultline-controller
    static_configs: [{targets: ["127.0.0.1:$FL_HTTP_PORT"]}]
YAML
  local attempt
  for attempt in 1 2 3; do  # another port when the picked one was taken before the bind
    prometheus --config.file="$FL_STATE/prometheus.yml" --storage.tsdb.path="$FL_STATE/prom" \
      --web.listen-address="127.0.0.1:$FL_PROM_PORT" >"$FL_STATE/prometheus.log" 2>&1 &
    FL_PROM_PID=$!
    FL_PROM_URL="http://127.0.0.1:$FL_PROM_PORT"
    if fl_wait_alive "Prometheus" "$FL_PROM_PID" curl -fsS "$FL_PROM_URL/-/ready"; then
      fl_log "Prometheus: $FL_PROM_URL (pid $FL_PROM_PID)"
      return 0
    fi
    fl_stop_pid "$FL_PROM_PID"
    grep -q "address already in use" "$FL_STATE/prometheus.log" || return 1
    FL_PROM_PORT=$(fl_free_port)
  done
  return 1
}

fl_stop_all() {
  fl_stop_pid "${FL_PROM_PID:-}"
  fl_stop_pid "${FL_AM_PID:-}"
  fl_stop_pid "${FL_AGENT_PID:-}"
  fl_stop_pid "${FL_CONTROLLER_PID:-}"
  "$FL_ROOT/scripts/pg-throwaway.sh" stop "$FL_STATE/pg" || true
}
