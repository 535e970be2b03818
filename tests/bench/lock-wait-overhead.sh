#!/usr/bin/env bash
# What --mmap-lock-waits costs (issue #27): throughput of faultline-workload presets with
# and without the tracing, in alternating pairs on this machine (the order flips every pair,
# so neither side always runs first), compared with `faultline compare` (Hodges-Lehmann,
# 95% CI). Needs root (memory cgroup, zram swap for swap-in, perf tracepoints).
#   tests/bench/lock-wait-overhead.sh [--pairs 10] [--seconds 10] [PRESET ...]
# PRESETs default to v2-file-thrash-small v2-swap-in-small v5-filemap-small. Prints one
# Markdown row per preset: medians off/on, the cost (1 - on/off) with its CI, the traced
# events per second (mmap_lock acquisitions plus contentions) and the records lost.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pairs=10 seconds=10 presets=()
workload=$root/build/agent/workloads/faultline-workload
cli=$root/build/services/cli/faultline
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --cli) cli=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) presets+=("$1"); shift ;;
  esac
done
[ ${#presets[@]} -gt 0 ] || presets=(v2-file-thrash-small v2-swap-in-small v5-filemap-small)
die() { echo "lock-wait-overhead: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (memory cgroup, zram swap, perf tracepoints)"
[ -x "$workload" ] || die "$workload is not executable"
[ -x "$cli" ] || die "$cli is not executable"
command -v jq >/dev/null || die "needs jq"
work=$(mktemp -d /tmp/lock-wait-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT

# run PRESET MODE OUT: one run, its throughput appended to OUT.MODE, events and lost to
# OUT.events.
run() {
  local preset=$1 mode=$2 out=$3 extra=() json
  [ "$mode" = on ] && extra=(--mmap-lock-waits)
  local swap=()
  case "$preset" in *swap*) swap=(--zram-swap 1G) ;; esac
  json=$("$workload" --preset "$preset" --duration "${seconds}s" --dir "$work" "${swap[@]}" \
    "${extra[@]}") || die "$preset ($mode) failed"
  jq -r '.throughput_rounds_per_second' <<<"$json" >>"$out.$mode"
  if [ "$mode" = on ]; then
    jq -r --arg s "$seconds" '.counters as $c
      | [(($c["mmap_lock_wait.read.count"] // 0) + ($c["mmap_lock_wait.write.count"] // 0)
          + ($c["mmap_lock_wait.read.failed"] // 0) + ($c["mmap_lock_wait.write.failed"] // 0)
          + ($c["mmap_lock_contention.read.count"] // 0)
          + ($c["mmap_lock_contention.write.count"] // 0)) / ($s | tonumber),
         ($c["mmap_lock_wait.lost_records"] // 0),
         (.environment["mmap_lock_wait.unsupported"] // "")] | @tsv' <<<"$json" >>"$out.events"
  fi
}

echo "| preset | pairs | rounds/s off | rounds/s on | cost (1 - on/off) | 95% CI | traced/s | lost |"
echo "|---|---|---|---|---|---|---|---|"
for preset in "${presets[@]}"; do
  out=$work/$preset
  : >"$out.off"; : >"$out.on"; : >"$out.events"
  for ((i = 0; i < pairs; i++)); do
    if ((i % 2 == 0)); then run "$preset" off "$out"; run "$preset" on "$out"
    else run "$preset" on "$out"; run "$preset" off "$out"; fi
  done
  unsupported=$(cut -f3 "$out.events" | sort -u | head -1)
  [ -z "$unsupported" ] || die "$preset: mmap_lock waits not traced: $unsupported"
  events=$(cut -f1 "$out.events" | sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] }')
  lost=$(cut -f2 "$out.events" | awk '{ s += $1 } END { printf "%d", s }')
  "$cli" compare --min-effect 0.02 --format json "$out.off" "$out.on" |
    jq -r --arg p "$preset" --arg n "$pairs" --arg ev "$events" --arg lost "$lost" '
      .comparisons[0] as $c
      | def num: . * 100 | round / 100 | tostring;
        def cost: if type != "number" then "n/a" else (1 - .) * 100 | (. * 10 | round / 10 | tostring) + "%" end;
      "| \($p) | \($n) | \($c.baseline_median | num) | \($c.candidate_median | num) | \($c.ratio | cost) | [\($c.ci_high | cost), \($c.ci_low | cost)] | \($ev) | \($lost) |"'
done
