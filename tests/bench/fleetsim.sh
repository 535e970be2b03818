#!/usr/bin/env bash
# Drives faultline-fleetsim against a throwaway stack on this machine: a PostgreSQL cluster
# (scripts/pg-throwaway.sh) and the controller (deploy/local/stack.sh), agent tokens for
# every simulated board (fleetsim mint) and a user token (controller `tokens create`).
# While the boards are parked idle it samples the controller's CPU time and RSS
# (/proc/PID/stat, /proc/PID/status) and PostgreSQL's, and counts the database connections
# (pg_stat_activity); then the users submit the runs, once this script has created the go
# file after its samples (its forks must not share the CPUs with the dispatch measured). Afterwards it checks in the database
# that every run succeeded on its first attempt with exactly one result, and writes
# fleetsim's figures plus its own as one JSON. Everything it started is stopped by pid.
#
# Usage: fleetsim.sh [--boards N] [--runs R] [--run-seconds S] [--users U] [--readers K]
#                    [--idle-seconds W] [--deadline SEC] [--json FILE] [--keep]
#                    [--cli-bin PATH]   (also read the largest job's per-run report via the CLI)
#                    [--two-controllers] (a second controller on the same database: the
#                     boards park on it, the users submit to the first)
#                    [--controllers N] [--kill-at-results K] (N controllers on one database,
#                     the boards spread over them; once K results are stored, the controller
#                     holding the duty lease is killed with SIGKILL: every run must still
#                     complete exactly once, and the duties must move)
#                    [--controller-bin PATH] [--fleetsim-bin PATH] [--smoke] [-- FLEETSIM ARGS]
#   --smoke: 20 boards, 40 one-second runs, 2 users, 1 reader, must finish within 60 s
#            (the ctest fleetsim_smoke).
# Exit: 0 ok, 1 failed, 77 PostgreSQL (or psql, jq) missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${FAULTLINE_BUILD_DIR:-$ROOT/build}
BOARDS=100
RUNS=""
RUN_SECONDS=1
USERS=1
READERS=0
IDLE=10
DEADLINE=600
JSON=""
KEEP=0
CLI_BIN=""
TWO=0
CONTROLLERS=1
KILL_AT=0
KILLER_PID=""
MORE_PIDS=()
SMOKE=0
CONTROLLER_BIN=$BUILD/services/controller/faultline-controller
FLEETSIM_BIN=$BUILD/tests/bench/faultline-fleetsim
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --boards) BOARDS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --run-seconds) RUN_SECONDS=$2; shift 2 ;;
    --users) USERS=$2; shift 2 ;;
    --readers) READERS=$2; shift 2 ;;
    --idle-seconds) IDLE=$2; shift 2 ;;
    --deadline) DEADLINE=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --smoke) SMOKE=1; shift ;;
    --controller-bin) CONTROLLER_BIN=$2; shift 2 ;;
    --fleetsim-bin) FLEETSIM_BIN=$2; shift 2 ;;
    --cli-bin) CLI_BIN=$2; shift 2 ;;
    --two-controllers) TWO=1; shift ;;
    --controllers) CONTROLLERS=$2; shift 2 ;;
    --kill-at-results) KILL_AT=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "fleetsim.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then
  BOARDS=20 RUNS=40 RUN_SECONDS=1 USERS=2 READERS=1 IDLE=0 DEADLINE=60
fi
RUNS=${RUNS:-$BOARDS}

ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "SKIP: PostgreSQL server binaries not found"; exit 77; }
for tool in psql jq ss; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
for bin in "$CONTROLLER_BIN" "$FLEETSIM_BIN"; do
  [ -x "$bin" ] || { echo "fleetsim.sh: $bin not built (scripts/build.sh faultline-controller faultline-fleetsim)" >&2; exit 1; }
done

FL_STATE=$(mktemp -d "${TMPDIR:-/tmp}/faultline-fleetsim-XXXXXX")
chmod 755 "$FL_STATE"
export FL_BIN_CONTROLLER=$CONTROLLER_BIN FL_STATE
# shellcheck source=../../deploy/local/stack.sh
source "$ROOT/deploy/local/stack.sh"
FLEETSIM_PID=""
cleanup() {
  set +e
  fl_stop_pid "$FLEETSIM_PID"
  fl_stop_pid "${FL_CONTROLLER_PID:-}"
  for p in "${MORE_PIDS[@]}"; do fl_stop_pid "$p"; done
  fl_stop_pid "${KILLER_PID:-}"
  [ "$KEEP" = 1 ] && cp "$FL_STATE/pg/server.log" "$FL_STATE/postgres.log" 2>/dev/null
  "$ROOT/scripts/pg-throwaway.sh" stop "$FL_STATE/pg" >/dev/null 2>&1
  if [ "$KEEP" = 1 ]; then echo "state kept in $FL_STATE" >&2; else rm -rf "$FL_STATE"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$FL_STATE"/controller*.log "$FL_STATE"/fleetsim.err; do
    [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 20 "$f" >&2; }
  done
  exit 1
}
sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }

T0=$EPOCHREALTIME
fl_start_postgres
fl_start_controller >/dev/null 2>&1 || fail "controller did not start"
CPID=$FL_CONTROLLER_PID
BOARD_CONTROLLER=$FAULTLINE_CONTROLLER
MORE_PIDS=()
ADDRESSES=$FAULTLINE_CONTROLLER
[ "$TWO" = 1 ] && [ "$CONTROLLERS" -lt 2 ] && CONTROLLERS=2
for i in $(seq 2 "$CONTROLLERS"); do  # more controllers on the same database
  "$CONTROLLER_BIN" --database-url "$FL_DATABASE_URL" --grpc-listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --port-file "$FL_STATE/controller$i.ports" \
    >>"$FL_STATE/controller$i.log" 2>&1 &
  MORE_PIDS+=($!)
  fl_wait_alive "controller $i to listen" "$!" test -s "$FL_STATE/controller$i.ports" ||
    fail "controller $i did not start"
  ADDRESSES="$ADDRESSES,127.0.0.1:$(sed -n 's/^grpc=//p' "$FL_STATE/controller$i.ports")"
  CPID=$!  # the figures sampled below are the last controller's
done
if [ "$TWO" = 1 ]; then
  # The boards on the second controller, the users on the first.
  BOARD_CONTROLLER=${ADDRESSES#*,}
  EXTRA=(--user-controller "$FAULTLINE_CONTROLLER" "${EXTRA[@]}")
  echo "two controllers: users on $FAULTLINE_CONTROLLER, boards on $BOARD_CONTROLLER" >&2
elif [ "$CONTROLLERS" -gt 1 ]; then
  # Each board connection gets the list rotated (spread; fail over to the next).
  BOARD_CONTROLLER=$ADDRESSES
  echo "$CONTROLLERS controllers: $ADDRESSES (boards spread over them, users on the first)" >&2
fi
if [ "$KILL_AT" -gt 0 ]; then
  [ "$CONTROLLERS" -gt 1 ] || fail "--kill-at-results needs --controllers N (N >= 2)"
  EXTRA=(--allow-retries "${EXTRA[@]}")
fi
PG_PID=$(head -n 1 "$FL_STATE/pg/data/postmaster.pid")

# Baseline, same database and settings, before the fleet: PostgreSQL's own single-row
# commit rate (pgbench, 1 client, 5 s) and COPY rate (1,000,000 rows shaped like samples,
# into a table without indexes or keys: the ceiling; best of 3).
# Every figure below can be read against these. Skipped in --smoke.
baseline_json='{}'
if [ "$SMOKE" != 1 ] && command -v pgbench >/dev/null; then
  sql "CREATE TABLE fl_baseline_commit (v int); CREATE TABLE fl_baseline_copy
         (run_id bigint, second integer, rounds bigint, pages bigint)"
  echo "INSERT INTO fl_baseline_commit VALUES (1);" >"$FL_STATE/commit.sql"
  commits=$(pgbench -n -c 1 -j 1 -T 5 -f "$FL_STATE/commit.sql" "$FL_DATABASE_URL" 2>/dev/null |
    awk '/^tps = / { printf "%.0f", $3 }')
  awk 'BEGIN { for (i = 1; i <= 1000000; i++) printf "%d\t%d\t%d\t%d\n", i % 5000, i % 600 + 1, 300 + i % 97, 4096 + i % 13 }' \
    >"$FL_STATE/copy.tsv"
  # The best of 3 (one COPY's rate moved 1.4-2.2M rows/s between runs on this VM).
  copy_rate=0
  for _ in 1 2 3; do
    c1=$EPOCHREALTIME
    psql "$FL_DATABASE_URL" -qc "\\copy fl_baseline_copy FROM '$FL_STATE/copy.tsv'" >/dev/null
    copy_rate=$(awk -v a="$c1" -v b="$EPOCHREALTIME" -v best="$copy_rate" \
      'BEGIN { r = 1000000 / (b - a); printf "%.0f", (r > best ? r : best) }')
    sql "TRUNCATE fl_baseline_copy"
  done
  sql "DROP TABLE fl_baseline_commit; DROP TABLE fl_baseline_copy"
  rm -f "$FL_STATE/copy.tsv"
  baseline_json=$(jq -n --argjson commits "${commits:-0}" --argjson copy "$copy_rate" \
    '{postgres_single_row_commits_per_second: $commits, postgres_copy_rows_per_second: $copy}')
  echo "PostgreSQL baseline: $(echo "$baseline_json" | jq -c .)" >&2
fi
"$FLEETSIM_BIN" mint --database-url "$FL_DATABASE_URL" --boards "$BOARDS" --out "$FL_STATE/boards.tokens" \
  || fail "minting $BOARDS agent tokens"
chmod 600 "$FL_STATE/boards.tokens"

ticks=$(getconf CLK_TCK)
# CPU seconds (user + system) of pid $1, or of pid $1 and its children with "tree".
cpu_of() {
  local pids=$1
  [ "${2:-}" = tree ] && pids="$1 $(ps -o pid= --ppid "$1" | tr '\n' ' ')"
  local total=0 p
  for p in $pids; do
    [ -r "/proc/$p/stat" ] || continue
    # Fields after the ") " that ends comm: utime is the 12th, stime the 13th.
    total=$(( total + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }') ))
  done
  awk -v t="$total" -v hz="$ticks" 'BEGIN { printf "%.2f", t / hz }'
}
status_kb() { awk -v k="$2:" '$1 == k { v = $2 } END { print v + 0 }' "/proc/$1/status" 2>/dev/null || echo 0; }
pg_transactions() {
  sql "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
}
pg_connections() {
  sql "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
}
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
rate() { awk -v c="$1" -v t="$2" 'BEGIN { printf "%.1f", (t > 0 ? 100 * c / t : 0) }'; }

# fleetsim: connects the boards, holds them parked for the idle window (we sample), then the
# users submit the runs.
SETTLE=2
[ "$IDLE" != 0 ] && SETTLE=3
"$FLEETSIM_BIN" --controller "$BOARD_CONTROLLER" --token-file "$FL_STATE/boards.tokens" \
  --user-token-file "$FL_STATE/user.token" --boards "$BOARDS" --runs "$RUNS" \
  --run-seconds "$RUN_SECONDS" --users "$USERS" --readers "$READERS" --settle "$SETTLE" \
  --idle-seconds "$IDLE" --ready-file "$FL_STATE/ready" --go-file "$FL_STATE/go" --deadline "$DEADLINE" \
  --json "$FL_STATE/fleetsim.json" "${EXTRA[@]}" >"$FL_STATE/fleetsim.out" 2>"$FL_STATE/fleetsim.err" &
FLEETSIM_PID=$!
if [ "$KILL_AT" -gt 0 ]; then
  # Once K results are in: SIGKILL the duty-lease holder (its pid is in the holder name,
  # host:pid:random), then time until another controller holds the lease.
  (
    until [ "$(sql "SELECT count(*) FROM results" 2>/dev/null || echo 0)" -ge "$KILL_AT" ]; do
      kill -0 "$FLEETSIM_PID" 2>/dev/null || exit 0
      sleep 0.2
    done
    holder=$(sql "SELECT holder FROM duty_leases")
    victim=$(echo "$holder" | cut -d: -f2)
    t_kill=$EPOCHREALTIME
    kill -KILL "$victim"
    echo "killed controller pid $victim (duty lease holder) at $(sql "SELECT count(*) FROM results") results" >&2
    give_up=$(( $(date +%s) + 60 ))
    until new=$(sql "SELECT holder FROM duty_leases" 2>/dev/null) && [ -n "$new" ] && [ "$new" != "$holder" ]; do
      [ "$(date +%s)" -lt "$give_up" ] || exit 0
      sleep 0.2
    done
    echo "{\"killed_pid\": $victim, \"duties_moved_after_seconds\": $(elapsed "$t_kill" "$EPOCHREALTIME")}" \
      >"$FL_STATE/kill.json"
  ) 2>>"$FL_STATE/fleetsim.err" &
  KILLER_PID=$!
fi

# Idle window: from "every board parked" to just before the users submit.
until [ -e "$FL_STATE/ready" ]; do
  kill -0 "$FLEETSIM_PID" 2>/dev/null || break
  sleep 0.1
done
[ -e "$FL_STATE/ready" ] || { wait "$FLEETSIM_PID" || true; cat "$FL_STATE/fleetsim.out"; fail "fleetsim ended before every board parked"; }
idle_json='{}'
if [ "$IDLE" != 0 ]; then
  window=$(awk -v w="$IDLE" 'BEGIN { printf "%.1f", (w > 2 ? w - 1 : w / 2) }')
  t1=$(now); c1=$(cpu_of "$CPID"); p1=$(cpu_of "$PG_PID" tree); x1=$(pg_transactions)
  sleep "$window"
  t2=$(now); c2=$(cpu_of "$CPID"); p2=$(cpu_of "$PG_PID" tree); x2=$(pg_transactions)
  dt=$(elapsed "$t1" "$t2")
  idle_json=$(jq -n --argjson boards "$BOARDS" --argjson window "$dt" \
    --argjson cpu "$(rate "$(awk -v a="$c1" -v b="$c2" 'BEGIN { print b - a }')" "$dt")" \
    --argjson pgcpu "$(rate "$(awk -v a="$p1" -v b="$p2" 'BEGIN { print b - a }')" "$dt")" \
    --argjson rss "$(status_kb "$CPID" VmRSS)" --argjson threads "$(status_kb "$CPID" Threads)" \
    --argjson conns "$(pg_connections)" \
    --argjson tps "$(awk -v a="$x1" -v b="$x2" -v t="$dt" 'BEGIN { printf "%.0f", (b - a) / t }')" \
    '{boards: $boards, window_seconds: $window, controller_cpu_percent: $cpu,
      controller_rss_kib: $rss, controller_threads: $threads,
      postgres_cpu_percent: $pgcpu, postgres_connections: $conns,
      postgres_transactions_per_second: $tps}')
  echo "controller while idle: $(echo "$idle_json" | jq -c .)" >&2
fi

# Work: until fleetsim ends by itself (it has its own deadline; ours is a backstop). The
# users submit only once the go file exists, after the samples above and the first below:
# the processes this script forks to sample must not compete with the dispatch measured.
tw1=$(now); cw1=$(cpu_of "$CPID"); pw1=$(cpu_of "$PG_PID" tree)
max_conns=$(pg_connections 2>/dev/null || echo 0)
touch "$FL_STATE/go"
backstop=$(( $(date +%s) + ${DEADLINE%.*} + 30 ))
while kill -0 "$FLEETSIM_PID" 2>/dev/null; do
  sleep 1
  c=$(pg_connections 2>/dev/null || echo 0)
  [ "$c" -gt "$max_conns" ] && max_conns=$c
  [ "$(date +%s)" -lt "$backstop" ] || { fl_stop_pid "$FLEETSIM_PID"; break; }
done
rc=0
wait "$FLEETSIM_PID" || rc=$?
FLEETSIM_PID=""
tw2=$(now); cw2=$(cpu_of "$CPID"); pw2=$(cpu_of "$PG_PID" tree)
dtw=$(elapsed "$tw1" "$tw2")
cat "$FL_STATE/fleetsim.out"
[ -s "$FL_STATE/fleetsim.json" ] || fail "fleetsim wrote no figures (exit $rc)"

# With --cli-bin: the user's view of the largest job through the real CLI, a per-run table
# with two counter columns (a report of thousands of runs is larger than gRPC's default 4 MB).
cli_json='{}'
if [ -n "$CLI_BIN" ]; then
  big=$(sql "SELECT job_id FROM runs GROUP BY job_id ORDER BY count(*) DESC, job_id LIMIT 1")
  big_runs=$(sql "SELECT count(*) FROM runs WHERE job_id = $big")
  c1=$(now)
  FAULTLINE_TOKEN=$(cat "$FL_STATE/user.token") "$CLI_BIN" --controller "$ADDRESSES" \
    report --format csv --columns 'Faults=vmstat.pgfault,Major/Round=vmstat.pgmajfault/rounds' \
    "$big" >"$FL_STATE/report.csv" 2>"$FL_STATE/report.err" ||
    fail "faultline report --columns of job $big ($big_runs runs): $(cat "$FL_STATE/report.err")"
  c2=$(now)
  cli_json=$(jq -n --argjson job "$big" --argjson runs "$big_runs" \
    --argjson bytes "$(wc -c <"$FL_STATE/report.csv")" --argjson seconds "$(elapsed "$c1" "$c2")" \
    '{job: $job, job_runs: $runs, report_bytes: $bytes, seconds: $seconds}')
  echo "faultline report --columns: $(echo "$cli_json" | jq -c .)"
fi

# /metrics after the work, as Prometheus would scrape it (the first controller): time of 5
# scrapes and the number of series (lines that are not comments).
scrape_json='{}'
if [ "$SMOKE" != 1 ] && [ -n "${FL_HTTP_PORT:-}" ]; then
  times=()
  for _ in 1 2 3 4 5; do
    # -1: no answer within the endpoint's 10 s handler deadline (503) or another failure
    t=$(curl -fsS -o "$FL_STATE/metrics.txt" -w '%{time_total}' "http://127.0.0.1:$FL_HTTP_PORT/metrics") || t=-1
    times+=("$t")
  done
  series=$(grep -vc '^#' "$FL_STATE/metrics.txt" 2>/dev/null || true)
  scrape_json=$(printf '%s\n' "${times[@]}" | jq -s --argjson series "${series:-0}" \
    --argjson bytes "$(wc -c <"$FL_STATE/metrics.txt" 2>/dev/null || echo 0)" \
    '{series: $series, bytes: $bytes, seconds: ., median_seconds: (sort | .[2])}')
  echo "/metrics: $(echo "$scrape_json" | jq -c .)"
fi

# The database's record: every run succeeded on its first attempt, with one result and one
# sample per second.
runs=$(sql "SELECT count(*) FROM runs")
bad=$(sql "SELECT count(*) FROM runs WHERE state <> 'succeeded' OR attempt <> 1")
results=$(sql "SELECT count(*) FROM results")
result_runs=$(sql "SELECT count(DISTINCT run_id) FROM results")
samples=$(sql "SELECT count(*) FROM samples")
# A job whose runs have all ended must have ended too (a watcher waits for exactly that).
stuck=$(sql "SELECT count(*) FROM jobs j WHERE j.state IN ('queued', 'running')
              AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.id
                                 AND r.state IN ('queued', 'assigned', 'running'))")
# Why runs needed more than one attempt (the controller's log events and the runs' reasons).
events=$(cat "$FL_STATE"/controller*.log | grep -o 'event=[a-z_]*' | sort | uniq -c | sort -rn |
  awk '{ printf "%s%s: %s", (NR > 1 ? ", " : ""), substr($2, 7), $1 }')
echo "controller log events: $events"
if [ "$bad" != 0 ]; then
  echo "runs not succeeded on their first attempt (state, attempts, reason):"
  sql "SELECT state, attempt, coalesce(failure_reason, '-'), count(*) FROM runs
        WHERE state <> 'succeeded' OR attempt <> 1 GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10" | sed 's/^/  /'
  first=$(sql "SELECT id FROM runs WHERE state <> 'succeeded' OR attempt <> 1 ORDER BY id LIMIT 1")
  echo "the controller's log of run $first:"
  cat "$FL_STATE"/controller*.log | grep "run=$first " | head -n 12 | sed 's/^/  /'
fi
work_json=$(jq -n --argjson window "$dtw" \
  --argjson cpu "$(rate "$(awk -v a="$cw1" -v b="$cw2" 'BEGIN { print b - a }')" "$dtw")" \
  --argjson pgcpu "$(rate "$(awk -v a="$pw1" -v b="$pw2" 'BEGIN { print b - a }')" "$dtw")" \
  --argjson hwm "$(status_kb "$CPID" VmHWM)" --argjson rss "$(status_kb "$CPID" VmRSS)" \
  --argjson conns "$max_conns" \
  '{window_seconds: $window, controller_cpu_percent: $cpu, controller_rss_kib: $rss,
    controller_peak_rss_kib: $hwm, postgres_cpu_percent: $pgcpu, postgres_connections_max: $conns}')
db_json=$(jq -n --argjson runs "$runs" --argjson bad "$bad" --argjson results "$results" \
  --argjson result_runs "$result_runs" --argjson samples "$samples" --argjson stuck "$stuck" \
  '{runs: $runs, not_succeeded_first_attempt: $bad, results: $results,
    runs_with_results: $result_runs, samples: $samples, jobs_unfinished_without_open_runs: $stuck}')
kill_json='{}'
if [ "$KILL_AT" -gt 0 ]; then
  wait "$KILLER_PID" 2>/dev/null || true
  KILLER_PID=""
  [ -s "$FL_STATE/kill.json" ] || fail "no controller was killed, or the duties never moved (60 s)"
  kill_json=$(jq -c --argjson retried "$bad" '. + {runs_retried: $retried}' "$FL_STATE/kill.json")
  echo "controller killed: $kill_json"
  moved=$(jq .duties_moved_after_seconds <<<"$kill_json")
  awk -v t="$moved" 'BEGIN { exit !(t <= 30) }' || fail "the duties moved after $moved s (goal 30 s)"
fi
jq --argjson idle "$idle_json" --argjson work "$work_json" --argjson db "$db_json" \
  --argjson cli "$cli_json" --argjson kill "$kill_json" --argjson baseline "$baseline_json" --argjson scrape "$scrape_json" \
  --arg host "$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)" \
  --arg events "$events" \
  '. + {controller_idle: $idle, controller_work: $work, database: $db, machine: $host, cli_report: $cli, controller_kill: $kill, baseline: $baseline, metrics_scrape: $scrape,
        controller_log_events: $events}' \
  "$FL_STATE/fleetsim.json" >"$FL_STATE/combined.json"
echo "controller during work: $(echo "$work_json" | jq -c .)"
echo "database: $(echo "$db_json" | jq -c .)"
if [ "$baseline_json" != '{}' ]; then
  jq -r '"against PostgreSQL alone: ingest \(.ingest.samples_per_second | floor) samples/s = \(100 * .ingest.samples_per_second / .baseline.postgres_copy_rows_per_second | . * 100 | floor / 100)% of COPY (\(.baseline.postgres_copy_rows_per_second) rows/s); runs \(.throughput.runs_completed_per_second | floor)/s = \(100 * .throughput.runs_completed_per_second / .baseline.postgres_single_row_commits_per_second | . * 100 | floor / 100)% of single-row commits (\(.baseline.postgres_single_row_commits_per_second)/s)"' \
    "$FL_STATE/combined.json"
fi
[ -n "$JSON" ] && cp "$FL_STATE/combined.json" "$JSON"

[ "$stuck" = 0 ] || fail "$stuck job(s) still queued or running although none of their runs is"
[ "$rc" = 0 ] || fail "fleetsim exited $rc"
submitted=$(jq .runs.submitted "$FL_STATE/fleetsim.json")
[ "$runs" = "$submitted" ] || fail "$runs runs in the database, fleetsim submitted $submitted"
[ "$bad" = 0 ] || fail "$bad runs did not succeed on their first attempt"
[ "$results" = "$runs" ] && [ "$result_runs" = "$runs" ] || fail "$results results for $runs runs ($result_runs runs with one)"
[ "$samples" = $(( runs * RUN_SECONDS )) ] || fail "$samples samples for $runs runs of $RUN_SECONDS s"
took=$(elapsed "$T0" "$(now)")
if [ "$SMOKE" = 1 ]; then
  awk -v t="$took" 'BEGIN { exit !(t < 60) }' || fail "the smoke run took $took s (limit 60 s)"
fi
echo "ok: $runs runs of $BOARDS boards, each completed exactly once, in $took s"
