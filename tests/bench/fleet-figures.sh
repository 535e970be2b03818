#!/usr/bin/env bash
# The fleet-scale figures of #14, all from one run on one machine, with the code as built:
#   - fleetsim.sh at 1, 100, 1,000 and 5,000 boards (1-second runs): dispatch latency,
#     runs completed per second, ReportResult latency, "busy" answers, controller CPU/RSS
#     idle and in the work, PostgreSQL CPU and connections; each against PostgreSQL's own
#     single-row commit rate measured in the same step;
#   - result ingest: 1,000 boards whose runs report hour-long results (3,600 samples each,
#     the run itself shortened by --time-scale) against the COPY ceiling of the same step;
#   - /metrics with 1,000 boards x 2 kernels x 20 studies (metrics-scrape.sh);
#   - the agent idle (agent-idle.sh): CPU and RSS (anonymous, shared-library text, PSS).
# Writes DIR/figures.json (every step's JSON) and prints the table of docs/performance.md (markdown).
# Usage: tests/bench/fleet-figures.sh [--out DIR] [--build DIR] [--agent-seconds S]
# Takes ~6 minutes on 2 cores. Run it on a quiet machine: it measures the machine too.
# Exit: 0 ok, 1 a step failed, 77 PostgreSQL (or psql, jq, pgbench) missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
OUT=""
AGENT_SECONDS=60
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --agent-seconds) AGENT_SECONDS=$2; shift 2 ;;
    *) echo "fleet-figures.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in jq psql pgbench; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
OUT=${OUT:-$(mktemp -d /tmp/faultline-fleet-figures-XXXXXX)}
mkdir -p "$OUT"
CONTROLLER=$BUILD/services/controller/faultline-controller
FLEETSIM=$BUILD/tests/bench/faultline-fleetsim
for bin in "$CONTROLLER" "$FLEETSIM" "$BUILD/agent/faultline-agent"; do
  [ -x "$bin" ] || { echo "fleet-figures.sh: $bin not built" >&2; exit 1; }
done

step() {  # NAME ARGS...: one fleetsim.sh run, its JSON in $OUT/NAME.json, its output kept
  local name=$1; shift
  echo "== $name: fleetsim.sh $*" >&2
  "$ROOT/tests/bench/fleetsim.sh" --controller-bin "$CONTROLLER" --fleetsim-bin "$FLEETSIM" \
    --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>&1 || {
    tail -n 30 "$OUT/$name.txt" >&2; echo "fleet-figures.sh: step $name failed" >&2; exit 1; }
  grep -E "^(  dispatch to|  runs completed|  result ingest|ok:)" "$OUT/$name.txt" >&2 || true
}

step boards-1 --boards 1 --runs 20 --idle-seconds 10 -- --runs-per-job 1
step boards-100 --boards 100 --runs 200 --idle-seconds 10
step boards-1000 --boards 1000 --runs 2000 --idle-seconds 10
step boards-5000 --boards 5000 --runs 5000 --idle-seconds 10
step ingest-1000 --boards 1000 --runs 1000 --run-seconds 3600 --idle-seconds 3 -- --time-scale 0.001

echo "== metrics: metrics-scrape.sh --boards 1000 --studies 20" >&2
"$ROOT/tests/bench/metrics-scrape.sh" --controller-bin "$CONTROLLER" --boards 1000 --studies 20 \
  --json "$OUT/metrics.json" >"$OUT/metrics.txt" 2>&1 || {
  tail -n 30 "$OUT/metrics.txt" >&2; echo "fleet-figures.sh: metrics step failed" >&2; exit 1; }

echo "== agent idle: agent-idle.sh ($AGENT_SECONDS s)" >&2
"$ROOT/tests/bench/agent-idle.sh" "$BUILD" "$AGENT_SECONDS" >"$OUT/agent.txt" 2>&1 || {
  tail -n 30 "$OUT/agent.txt" >&2; echo "fleet-figures.sh: agent step failed" >&2; exit 1; }
agent_field() { awk -v k="$1" '$0 ~ "^agent idle: " k { print $(NF - 1); exit }' "$OUT/agent.txt"; }
agent_json=$(jq -n \
  --argjson cpu "$(sed -n 's/^agent idle: \([0-9.]*\)% of one core.*/\1/p' "$OUT/agent.txt")" \
  --argjson rss "$(agent_field 'VmRSS:')" --argjson anon "$(agent_field 'Anonymous:')" \
  --argjson pss "$(agent_field 'Pss:')" --argjson clean "$(agent_field 'Shared_Clean:')" \
  '{cpu_percent: $cpu, rss_kib: $rss, anonymous_kib: $anon, pss_kib: $pss, shared_clean_kib: $clean}')

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -r)"
jq -n --arg machine "$machine" --arg commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --slurpfile b1 "$OUT/boards-1.json" --slurpfile b100 "$OUT/boards-100.json" \
  --slurpfile b1000 "$OUT/boards-1000.json" --slurpfile b5000 "$OUT/boards-5000.json" \
  --slurpfile ingest "$OUT/ingest-1000.json" --slurpfile metrics "$OUT/metrics.json" \
  --argjson agent "$agent_json" \
  '{machine: $machine, commit: $commit, boards_1: $b1[0], boards_100: $b100[0],
    boards_1000: $b1000[0], boards_5000: $b5000[0], ingest_1000: $ingest[0],
    metrics: $metrics[0], agent_idle: $agent}' >"$OUT/figures.json"

# The table of docs/performance.md.
jq -r '
  def r(x): (x * 10 | round) / 10;
  def ms(x): if x >= 1000 then "\(r(x / 1000)) s" else "\(x | round) ms" end;
  def mb(k): "\((k / 1024) | round) MB";
  def row(s): "| \(s.config.boards) | \(s.runs.submitted) | \(ms(s.dispatch_idle_ms.p50)) | \(ms(s.dispatch_idle_ms.p99)) | \(s.throughput.runs_completed_per_second | round)/s (\(r(100 * s.throughput.runs_completed_per_second / s.baseline.postgres_single_row_commits_per_second))% of \(s.baseline.postgres_single_row_commits_per_second) commits/s) | \(ms(s.rpc.ReportResult.latency_ms.p50)) / \(ms(s.rpc.ReportResult.latency_ms.p99)) | \(s.rpc.ReportResult.errors.UNAVAILABLE // 0) | \(s.controller_idle.controller_cpu_percent)%, \(mb(s.controller_idle.controller_rss_kib)) | \(s.controller_work.controller_cpu_percent)%, \(mb(s.controller_work.controller_peak_rss_kib)) | \(s.controller_work.postgres_cpu_percent)%, \(s.controller_work.postgres_connections_max) |";
  "Machine: \(.machine); commit \(.commit).\n",
  "| boards | runs | dispatch p50 | dispatch p99 | runs done end to end | ReportResult p50 / p99 | busy answers (retried) | idle: controller CPU, RSS | work: controller CPU, peak RSS | work: PostgreSQL CPU, connections |",
  "|---|---|---|---|---|---|---|---|---|---|",
  row(.boards_1), row(.boards_100), row(.boards_1000), row(.boards_5000),
  "",
  "Result ingest, 1,000 boards, 1,000 results of 3,600 samples: \(.ingest_1000.ingest.samples_per_second | round) samples/s = \(r(100 * .ingest_1000.ingest.samples_per_second / .ingest_1000.baseline.postgres_copy_rows_per_second))% of COPY (\(.ingest_1000.baseline.postgres_copy_rows_per_second) rows/s, same step); ReportResult p50 \(ms(.ingest_1000.rpc.ReportResult.latency_ms.p50)).",
  "/metrics, \(.metrics.series) series (\(.metrics.bytes / 1048576 | . * 10 | round / 10) MB): median \(ms((.metrics.scrape_seconds | sort | .[length / 2 | floor]) * 1000)) of \(.metrics.scrape_seconds | length) scrapes; summarizing its \(.metrics.comparisons) comparisons took \(r(.metrics.summarize_seconds)) s.",
  "Agent idle: \(.agent_idle.cpu_percent)% of one core; RSS \(r(.agent_idle.rss_kib / 1024)) MiB = \(r(.agent_idle.anonymous_kib / 1024)) MiB anonymous + shared-library text; PSS \(r(.agent_idle.pss_kib / 1024)) MiB."
' "$OUT/figures.json"
echo "figures: $OUT/figures.json" >&2
