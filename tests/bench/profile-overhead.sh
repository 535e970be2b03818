#!/usr/bin/env bash
# What a job's `profile:` costs (issue #46): throughput of a faultline-workload preset
# without sampling and with --profile-hz RATE, in alternating pairs on this machine (the
# order flips every pair, so neither side always runs first), compared with `faultline
# compare` (Hodges-Lehmann, 95% CI). Needs root (memory cgroup, perf_event_open).
#   tests/bench/profile-overhead.sh [--pairs 10] [--seconds 5] [--preset v5-filemap-small]
#                                   [RATE ...]
# RATEs default to 99 999 9999 (samples per second per thread). Prints one Markdown row per
# rate: medians off/on, the cost (1 - on/off) with its CI, the median run's samples per
# second (all threads) and the samples lost over all runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pairs=10 seconds=5 preset=v5-filemap-small rates=()
workload=$root/build/agent/workloads/faultline-workload
cli=$root/build/services/cli/faultline
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --cli) cli=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) rates+=("$1"); shift ;;
  esac
done
[ ${#rates[@]} -gt 0 ] || rates=(99 999 9999)
die() { echo "profile-overhead: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (memory cgroup, perf_event_open)"
[ -x "$workload" ] || die "$workload is not executable"
[ -x "$cli" ] || die "$cli is not executable"
command -v jq >/dev/null || die "needs jq"
work=$(mktemp -d /tmp/profile-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT

# run RATE OUT: one run (RATE 0: not sampled), its throughput appended to OUT.<off|on>,
# samples/s and lost to OUT.samples.
run() {
  local rate=$1 out=$2 extra=() json mode=off
  if [ "$rate" != 0 ]; then extra=(--profile-hz "$rate"); mode=on; fi
  json=$("$workload" --preset "$preset" --duration "${seconds}s" --dir "$work" "${extra[@]}") ||
    die "$preset at $rate Hz failed"
  jq -r '.throughput_rounds_per_second' <<<"$json" >>"$out.$mode"
  if [ "$mode" = on ]; then
    jq -r --arg s "$seconds" '[((.counters["profile.samples"] // 0) / ($s | tonumber)),
        (.counters["profile.lost"] // 0), (.environment["profile.unsupported"] // "")] | @tsv' \
      <<<"$json" >>"$out.samples"
  fi
}

echo "| rate (Hz/thread) | pairs | rounds/s off | rounds/s on | cost (1 - on/off) | 95% CI | samples/s | lost |"
echo "|---|---|---|---|---|---|---|---|"
for rate in "${rates[@]}"; do
  out=$work/$rate
  : >"$out.off"; : >"$out.on"; : >"$out.samples"
  for ((i = 0; i < pairs; i++)); do
    if ((i % 2 == 0)); then run 0 "$out"; run "$rate" "$out"
    else run "$rate" "$out"; run 0 "$out"; fi
  done
  unsupported=$(cut -f3 "$out.samples" | sort -u | head -1)
  [ -z "$unsupported" ] || die "not sampled at $rate Hz: $unsupported"
  samples=$(cut -f1 "$out.samples" | sort -n | awk '{ v[NR] = $1 } END { printf "%.0f", v[int((NR + 1) / 2)] }')
  lost=$(cut -f2 "$out.samples" | awk '{ s += $1 } END { printf "%d", s }')
  "$cli" compare --min-effect 0.02 --format json "$out.off" "$out.on" |
    jq -r --arg r "$rate" --arg n "$pairs" --arg sm "$samples" --arg lost "$lost" '
      .comparisons[0] as $c
      | def num: . * 100 | round / 100 | tostring;
        def cost: if type != "number" then "n/a" else (1 - .) * 100 | (. * 10 | round / 10 | tostring) + "%" end;
      "| \($r) | \($n) | \($c.baseline_median | num) | \($c.candidate_median | num) | \($c.ratio | cost) | [\($c.ci_high | cost), \($c.ci_low | cost)] | \($sm) | \($lost) |"'
done
