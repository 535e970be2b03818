#!/usr/bin/env bash
# /metrics at fleet scale (#14): a throwaway PostgreSQL and a controller, a history written
# straight into the database (BOARDS boards x 2 kernels x STUDIES finished A/B studies,
# REPETITIONS runs per board and kernel, COUNTERS counters per result), then:
#   - how long the controller takes to summarize every study's comparisons (it does so once
#     per finished job, on its own thread);
#   - 5 scrapes of /metrics: time each, the series count and the body size.
# Faster than a fleetsim run of the same size (no simulated runs: rows are inserted), so it
# measures the scrape alone. The history goes through faultline_keep_job_series, the SQL the
# controller runs when a job finishes.
# Usage: tests/bench/metrics-scrape.sh [--boards N] [--studies S] [--repetitions R]
#                                      [--counters C] [--controller-bin PATH] [--json FILE]
# Checks what it measures: every series and comparison is in the body, the controller read
# its database, and promtool (when installed) accepts the format. The ctest
# metrics_scrape_smoke runs it small.
# Exit: 0 ok, 1 failed, 77 PostgreSQL (or psql, jq, curl) missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FL_BIN_CONTROLLER=$ROOT/build/services/controller/faultline-controller BOARDS=1000 STUDIES=20 REPETITIONS=3 COUNTERS=20 JSON=""
while [ $# -gt 0 ]; do
  case $1 in
    --boards) BOARDS=$2; shift 2 ;;
    --studies) STUDIES=$2; shift 2 ;;
    --repetitions) REPETITIONS=$2; shift 2 ;;
    --counters) COUNTERS=$2; shift 2 ;;
    --controller-bin) FL_BIN_CONTROLLER=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    *) echo "metrics-scrape.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "SKIP: PostgreSQL server binaries not found"; exit 77; }
for tool in psql jq curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[ -x "$FL_BIN_CONTROLLER" ] || { echo "metrics-scrape.sh: build faultline-controller first" >&2; exit 1; }
export FL_BIN_CONTROLLER
FL_STATE=$(mktemp -d "${TMPDIR:-/tmp}/faultline-metrics-XXXXXX")
chmod 755 "$FL_STATE"
export FL_STATE
# shellcheck source=../../deploy/local/stack.sh
source "$ROOT/deploy/local/stack.sh"
trap 'fl_stop_all; rm -rf "$FL_STATE"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$FL_STATE/controller.log" >&2 || true; exit 1; }
sql() { psql "$FL_DATABASE_URL" -v ON_ERROR_STOP=1 -Atqc "$1"; }
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

fl_start_postgres
fl_start_controller >/dev/null 2>&1 || fail "controller did not start"

t0=$(now)
sql "
INSERT INTO boards (name, arch, memory_bytes, kernel_labels, running_kernel_label, facts,
                    running_kernel_labels)
SELECT format('sim-%s', lpad(b::text, 5, '0')), (ARRAY['x86_64', 'aarch64', 'riscv64'])[1 + b % 3],
       8589934592, '[\"vanilla\", \"patched\"]', 'vanilla', '{}', '[\"vanilla\"]'
  FROM generate_series(0, $BOARDS - 1) b;
INSERT INTO jobs (name, benchmark, spec, matrix_keys, duration_seconds, memory_max, state,
                  created_at, finished_at)
SELECT format('study-%s', s), 'filemap-thrash',
       jsonb_build_object('name', format('study-%s', s), 'benchmark', 'filemap-thrash',
                          'kernels', jsonb_build_array('vanilla', 'patched')),
       '[]', 1, 268435456, 'succeeded', now() - make_interval(mins => $STUDIES + 1 - s),
       now() - make_interval(mins => $STUDIES - s)
  FROM generate_series(1, $STUDIES) s;
INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, state, board, attempt,
                  finished_at)
SELECT j.id, 0, '{}', '{}', k, b * $REPETITIONS + r, 'succeeded',
       format('sim-%s', lpad(b::text, 5, '0')), 1, j.finished_at
  FROM jobs j, unnest(ARRAY['vanilla', 'patched']) k, generate_series(0, $BOARDS - 1) b,
       generate_series(0, $REPETITIONS - 1) r;
-- Patched is 2% faster with 5% noise; counter i is about 1000 i per round on both kernels.
INSERT INTO results (run_id, attempt_id, board, throughput, rounds, duration_seconds,
                     warmup_seconds, counters, environment, created_at)
SELECT r.id, gen_random_uuid(), r.board,
       1000 * (CASE WHEN r.kernel = 'patched' THEN 1.02 ELSE 1 END) * (1 + 0.05 * random()),
       1000, 1, 0,
       (SELECT jsonb_object_agg('vmstat.counter_' || i,
                                round(1000000 * i * (1 + 0.05 * random())) + 0 * r.id)
          FROM generate_series(1, $COUNTERS) i),
       '{}', r.finished_at
  FROM runs r;
SELECT count(*) FROM (SELECT faultline_keep_job_series(id) FROM jobs ORDER BY id) kept;
" >/dev/null || fail "writing the history"
inserted=$(now)
runs=$(sql "SELECT count(*) FROM results")
echo "history: $BOARDS boards, $STUDIES studies, $runs results in $(elapsed "$t0" "$inserted") s" >&2

summarized() { [ "$(sql "SELECT count(*) FROM job_comparisons")" -ge "$STUDIES" ]; }
FL_WAIT_SECONDS=900 fl_wait_for "every study's comparisons" summarized || fail "comparisons not summarized"
summarize_s=$(elapsed "$inserted" "$(now)")
echo "summarized $STUDIES studies in $summarize_s s" >&2

# Timed scrapes read into /dev/null (as Prometheus reads into memory); one more is kept.
# Also the time to the first byte: the controller's own work (reading the database, the
# parts that change) before the body streams out.
times=()
first_bytes=()
for _ in 1 2 3 4 5; do
  t=$(curl -fsS -o /dev/null -w '%{time_total} %{time_starttransfer}' --max-time 60 \
    "http://127.0.0.1:$FL_HTTP_PORT/metrics") || t="-1 -1"
  times+=("${t% *}")
  first_bytes+=("${t#* }")
done
curl -fsS -o "$FL_STATE/metrics.txt" --max-time 60 "http://127.0.0.1:$FL_HTTP_PORT/metrics" \
  || fail "the last scrape"
series=$(grep -vc '^#' "$FL_STATE/metrics.txt" || true)
if command -v promtool >/dev/null; then  # the format, as Prometheus reads it
  promtool check metrics <"$FL_STATE/metrics.txt" >"$FL_STATE/promtool.out" 2>&1 \
    || fail "promtool check metrics: $(head -n 5 "$FL_STATE/promtool.out")"
fi
grep -q '^faultline_database_up 1' "$FL_STATE/metrics.txt" || fail "the scrape could not read the database"
throughput_series=$(grep -c '^faultline_throughput_rounds_per_second{' "$FL_STATE/metrics.txt" || true)
comparisons=$(grep -c '^faultline_comparison_ratio{' "$FL_STATE/metrics.txt" || true)
[ "$throughput_series" = $((BOARDS * 2 * STUDIES)) ] \
  || fail "$throughput_series throughput series, expected $((BOARDS * 2 * STUDIES))"
[ "$comparisons" = $((BOARDS * STUDIES)) ] || fail "$comparisons comparisons, expected $((BOARDS * STUDIES))"
# Runs by state come from the counts finished jobs keep (every run here succeeded).
succeeded=$(sed -n 's/^faultline_runs{state="succeeded"} //p' "$FL_STATE/metrics.txt")
[ "$succeeded" = "$(sql "SELECT count(*) FROM runs WHERE state = 'succeeded'")" ] \
  || fail "faultline_runs{state=\"succeeded\"} is '$succeeded'"
out=$(printf '%s\n' "${times[@]}" | jq -s \
  --argjson boards "$BOARDS" --argjson studies "$STUDIES" --argjson results "$runs" \
  --argjson summarize "$summarize_s" --argjson series "$series" \
  --argjson throughput "$throughput_series" --argjson comparisons "$comparisons" \
  --argjson bytes "$(wc -c <"$FL_STATE/metrics.txt")" \
  --argjson first_byte "$(printf '%s\n' "${first_bytes[@]}" | jq -s -c .)" \
  --argjson rss_kb "$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$FL_CONTROLLER_PID/status")" \
  '{boards: $boards, studies: $studies, results: $results,
    summarize_seconds: $summarize, scrape_seconds: ., first_byte_seconds: $first_byte,
    series: $series,
    throughput_series: $throughput, comparisons: $comparisons, bytes: $bytes,
    controller_rss_kb: $rss_kb}')
echo "$out"
[ -z "$JSON" ] || echo "$out" >"$JSON"
