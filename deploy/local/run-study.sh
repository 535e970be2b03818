#!/usr/bin/env bash
# The main job: a local faultline stack on this machine (throwaway PostgreSQL, controller,
# one agent), a real study, its report. Installs and builds what it needs. Run as root.
#   deploy/local/run-study.sh [SPEC.yaml] [--keep]
# --keep leaves the stack running (prints how to reach it); default: stop it at the end.
set -euo pipefail
FL_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
spec=$FL_ROOT/deploy/examples/filemap-thrash-small.yaml
keep=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    *) spec=$arg ;;
  esac
done

"$FL_ROOT/scripts/install-deps.sh"
"$FL_ROOT/scripts/build.sh" faultline-controller faultline-agent faultline-workload faultline
bin=${FAULTLINE_BUILD_DIR:-$FL_ROOT/build}
FL_BIN_CONTROLLER=$bin/services/controller/faultline-controller
FL_BIN_AGENT=$bin/agent/faultline-agent
FL_BIN_WORKLOAD=$bin/agent/workloads/faultline-workload
FL_BIN_CLI=$bin/services/cli/faultline
FL_STATE=${FL_STATE:-$(mktemp -d /tmp/faultline-local-XXXXXX)}
mkdir -p "$FL_STATE"
chmod 755 "$FL_STATE"
source "$FL_ROOT/deploy/local/stack.sh"
if [ "$keep" = 0 ]; then trap 'fl_stop_all; rm -rf "$FL_STATE"' EXIT; fi

fl_start_postgres
fl_start_controller
fl_start_agent "$(hostname -s)"
# The observability stack: alerts are delivered to a webhook URL of your choice
# (FL_ALERT_WEBHOOK); without one they are visible in Alertmanager's UI and API.
fl_start_alertmanager "${FL_ALERT_WEBHOOK:-http://127.0.0.1:9/unused}"
fl_start_prometheus

job=$("$FL_BIN_CLI" submit "$spec")
fl_log "job $job submitted ($spec)"
"$FL_BIN_CLI" watch "$job" || fl_log "job $job did not fully succeed"
"$FL_BIN_CLI" report "$job"

if [ "$keep" = 1 ]; then
  cat >&2 <<MSG
The stack keeps running (state in $FL_STATE):
  export FAULTLINE_CONTROLLER=$FAULTLINE_CONTROLLER
  export FAULTLINE_TOKEN=\$(cat $FL_STATE/user.token)   # the stack's user token
  $FL_BIN_CLI jobs
  Metrics:      http://127.0.0.1:$FL_HTTP_PORT/metrics
  Prometheus:   $FL_PROM_URL  (e.g. $FL_PROM_URL/graph?g0.expr=faultline_throughput_rounds_per_second)
  Alerts:       $FL_PROM_URL/alerts  and  http://127.0.0.1:$FL_AM_PORT/#/alerts
  psql '$FL_DATABASE_URL'
Stop it: kill $FL_PROM_PID $FL_AM_PID $FL_AGENT_PID $FL_CONTROLLER_PID; $FL_ROOT/scripts/pg-throwaway.sh stop $FL_STATE/pg
MSG
fi
