#!/usr/bin/env bash
# Run-to-run coefficient of variation of every -small preset on this machine: each matrix
# cell of each preset is run N times with faultline-workload --preset, and the mean
# throughput, its standard deviation and CV (sd/mean) are printed as a Markdown table.
# Swap presets get a zram swap device for each run (--zram-swap); needs root.
#   scripts/preset-cv.sh [--runs N] [--duration 10s] [--zram-swap 1G] [--only REGEX] [WORKLOAD]
# WORKLOAD defaults to build/agent/workloads/faultline-workload.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=5 duration="" zram=1G only="" workload=$root/build/agent/workloads/faultline-workload
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --zram-swap) zram=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) workload=$1; shift ;;
  esac
done
[ -x "$workload" ] || { echo "preset-cv: $workload is not executable" >&2; exit 2; }
[ "$runs" -ge 2 ] || { echo "preset-cv: --runs must be at least 2" >&2; exit 2; }

throughput() { sed -n 's/.*"throughput_rounds_per_second":\([0-9.eE+-]*\).*/\1/p'; }

echo "| preset | cell | runs | seconds | mean rounds/s | sd | CV |"
echo "|---|---|---|---|---|---|---|"
"$workload" --list-presets | while read -r name benchmark seconds size axes; do
  [ "$size" = small ] || continue
  [ -z "$only" ] || [[ "$name" =~ $only ]] || continue
  [ -n "$duration" ] && seconds=${duration%s}
  cells=("")
  if [ -n "${axes:-}" ]; then  # one axis per -small preset
    knob=${axes%%=*}; cells=()
    IFS=, read -ra values <<<"${axes#*=}"
    for v in "${values[@]}"; do cells+=("$knob=$v"); done
  fi
  for cell in "${cells[@]}"; do
    args=(--preset "$name" --duration "${seconds}s" --zram-swap "$zram")
    [ -z "$cell" ] || args+=("--${cell%%=*}" "${cell#*=}")
    values=()
    for _ in $(seq "$runs"); do
      values+=("$("$workload" "${args[@]}" </dev/null | throughput)")
    done
    printf '%s\n' "${values[@]}" | awk -v name="$name" -v cell="${cell:--}" -v s="$seconds" '
      { x[NR] = $1; sum += $1 }
      END {
        mean = sum / NR; for (i = 1; i <= NR; i++) ss += (x[i] - mean) ^ 2
        sd = sqrt(ss / (NR - 1))
        printf "| %s | %s | %d | %d | %.1f | %.1f | %.1f%% |\n", name, cell, NR, s, mean, sd, (mean > 0 ? 100 * sd / mean : 0)
      }'
  done
done
