#!/usr/bin/env bash
# Throughput of faultline-workload against the seed studies' own C reproducers, run with the
# same parameters on the same machine, in the same memory cgroup, alternating A B A B ... so
# that drift hits both. The reproducers are not part of faultline: they are cut out of the
# seed e-mails given with --seeds (DIR with the mails, as text), their #define parameters
# rewritten, and compiled with cc -O2. Needs root (memcg, zram swap, shmem THP setting).
#   tests/bench/seed-compare.sh --seeds DIR [--pairs 5] [--seconds 10] [--only REGEX] [WORKLOAD]
# Prints one Markdown row per workload: each side's median and CV, and faultline's change
# against the seed with the A/B statistics of `faultline compare` (Hodges-Lehmann, 95% CI,
# verdict at delta = 3%). WORKLOAD defaults to build/agent/workloads/faultline-workload,
# --cli to build/services/cli/faultline.
#
# What is compared (parameters scaled to a 2-core machine, as the -small presets are):
#   file-thrash   [PATCH v2 0/5]: 16 threads x 16M sparse file, MAP_SHARED read-only, one byte
#                 per page, munmap, repeat; memcg limit 96M, no swap. rounds/s.
#   swap-in       [PATCH v2 0/5]: 64M zeroed anonymous region, 2 MADV_PAGEOUT threads, 2
#                 readers, zram swap. reader rounds/s.
#   finish-fault  "map maximum pages possible in finish_fault": 2M memfd as one PMD folio,
#                 64K VMA, write its first 8 pages, MADV_DONTNEED; the timed touch loop (the seed
#                 prints its total ns) as loops per second, shmem THP on for both.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seeds="" pairs=5 seconds=10 only="" workload=$root/build/agent/workloads/faultline-workload
cli=$root/build/services/cli/faultline
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --cli) cli=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) workload=$1; shift ;;
  esac
done
die() { echo "seed-compare: $*" >&2; exit 2; }
[ -n "$seeds" ] && [ -d "$seeds" ] || die "--seeds DIR (the seed e-mails) is required"
[ -x "$workload" ] || die "$workload is not executable"
[ -x "$cli" ] || die "$cli (the faultline CLI, for its compare statistics) is not executable"
command -v jq >/dev/null || die "needs jq"
[ "$(id -u)" = 0 ] || die "needs root (memory cgroup, zram swap, shmem THP)"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs must be a positive integer"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "--seconds must be a positive integer"

work=$(mktemp -d /tmp/faultline-seedcmp.XXXXXX)
cgroup="" zram_made="" thp_saved=()
cleanup() {
  set +e
  if [ -n "$cgroup" ] && [ -d "$cgroup" ]; then
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done <"$cgroup/cgroup.procs"
    rmdir "$cgroup"
  fi
  if [ -n "$zram_made" ]; then swapoff "$zram_made"; echo 1 >"/sys/block/${zram_made#/dev/}/reset"; fi
  for saved in "${thp_saved[@]}"; do echo "${saved#*=}" >"${saved%%=*}"; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- cutting the reproducers out of the mails -------------------------------------------
# cut FIRST_LINE_REGEX PREFIX: from the first line matching, through the closing brace of
# main(), with PREFIX (the mail's indentation or quote marks) removed from each line.
cut_code() {
  local file=$1 first=$2 prefix=$3
  awk -v first="$first" -v prefix="$prefix" '
    !on && $0 ~ first { on = 1 }
    on {
      line = $0
      if (substr(line, 1, length(prefix)) == prefix) line = substr(line, length(prefix) + 1)
      print line
      if (line ~ /^int main/) in_main = 1
      if (in_main && line ~ /^}[[:space:]]*$/) exit
    }' "$file"
}
find_seed() { grep -l -- "$1" "$seeds"/* 2>/dev/null | head -1; }
headers='#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>'
# build NAME SOURCE_FILE SED_EXPR...: rewrite the #defines and compile.
build() {
  local name=$1 src=$2; shift 2
  sed "$@" "$src" >"$work/$name.c"
  cc -O2 -pthread -o "$work/$name" "$work/$name.c" 2>"$work/$name.cc.log" ||
    die "compiling the $name reproducer failed: $(head -5 "$work/$name.cc.log")"
}

# --- environment --------------------------------------------------------------------------
make_cgroup() {  # make_cgroup LIMIT SWAP(0|unlimited)
  if [ -d /sys/fs/cgroup/memory ]; then
    cgroup=/sys/fs/cgroup/memory/faultline-seedcmp-$$
    mkdir "$cgroup"
    echo "$1" >"$cgroup/memory.limit_in_bytes"
    if [ "$2" = 0 ] && [ -e "$cgroup/memory.memsw.limit_in_bytes" ]; then
      echo "$1" >"$cgroup/memory.memsw.limit_in_bytes"
    fi
  elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cgroup=/sys/fs/cgroup/faultline-seedcmp-$$
    mkdir "$cgroup"
    echo "$1" >"$cgroup/memory.max"
    [ "$2" != 0 ] || echo 0 >"$cgroup/memory.swap.max"
  else
    die "no memory cgroup controller"
  fi
}
drop_cgroup() { rmdir "$cgroup"; cgroup=""; }
in_cgroup() { (echo "$BASHPID" >"$cgroup/cgroup.procs" && exec "$@"); }
ensure_swap() {
  [ "$(swapon --noheadings --show=NAME | wc -l)" -eq 0 ] || return 0
  [ -e /sys/block/zram0 ] || modprobe zram 2>/dev/null || true
  [ -e /sys/block/zram0 ] || die "no swap and no zram device"
  echo 1G >/sys/block/zram0/disksize
  mkswap /dev/zram0 >/dev/null
  swapon /dev/zram0
  zram_made=/dev/zram0
}
json_number() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }

# run_pairs LABEL UNIT SEED_CMD FAULTLINE_CMD SEED_PARSER FAULTLINE_PARSER
# The commands are strings run in $work; each parser reads that side's stdout on stdin.
run_pairs() {
  local label=$1 unit=$2 seed_cmd=$3 fl_cmd=$4 seed_parse=$5 fl_parse=$6 s f
  local -a seed_values=() fl_values=()
  for i in $(seq "$pairs"); do
    if (( i % 2 )); then order="seed fl"; else order="fl seed"; fi
    for side in $order; do
      if [ "$side" = seed ]; then
        s=$(cd "$work" && eval "$seed_cmd" | eval "$seed_parse")
        [ -n "$s" ] || die "$label: the seed reproducer printed no result"
        seed_values+=("$s")
      else
        f=$(cd "$work" && eval "$fl_cmd" | eval "$fl_parse")
        [ -n "$f" ] || die "$label: faultline-workload printed no result"
        fl_values+=("$f")
      fi
    done
  done
  printf '%s\n' "${seed_values[@]}" >"$work/$label.seed.txt"
  printf '%s\n' "${fl_values[@]}" >"$work/$label.faultline.txt"
  # The same statistics as an A/B study: Hodges-Lehmann change faultline/seed, 95% CI, and
  # the verdict at delta = 3% (no-change: the CI lies inside +-3%).
  "$cli" compare --min-effect 0.03 --format json "$work/$label.seed.txt" "$work/$label.faultline.txt" |
    jq -r --arg name "$label" --arg unit "$unit" \
       --arg seed "$(cv "$work/$label.seed.txt")" --arg fl "$(cv "$work/$label.faultline.txt")" '
      .comparisons[0] as $c
      | def num: . * 100 | round / 100 | tostring;
      def pct: if type != "number" then "n/a" else (. - 1) * 100 | (if . >= 0 then "+" else "" end) + (. * 10 | round / 10 | tostring) + "%" end;
      "| \($name) | \($unit) | \($c.n_baseline) | \($c.baseline_median | num) (\($seed)) | \($c.candidate_median | num) (\($fl)) | \($c.ratio | pct) | [\($c.ci_low | pct), \($c.ci_high | pct)] | \($c.verdict) |"'
}
# cv FILE: "CV x%" of the numbers in FILE.
cv() {
  awk '{ x[NR] = $1; s += $1 } END { m = s / NR; for (i = 1; i <= NR; i++) v += (x[i] - m) ^ 2
         printf "CV %.1f%%", (NR > 1 && m > 0) ? 100 * sqrt(v / (NR - 1)) / m : 0 }' "$1"
}

echo "| workload | metric | runs each | seed reproducer: median | faultline-workload: median | change | 95% CI | verdict (delta 3%) |"
echo "|---|---|---|---|---|---|---|---|"

# --- [PATCH v2 0/5] file thrash -------------------------------------------------------------
if [ -z "$only" ] || [[ file-thrash =~ $only ]]; then
  seed=$(find_seed '#define THREADS 500') || true
  [ -n "$seed" ] || die "no seed with the file-thrash reproducer (#define THREADS 500) in $seeds"
  { echo "$headers"; cut_code "$seed" '^ #define THREADS 500' ' '; } >"$work/thrash.src"
  build thrash "$work/thrash.src" -e 's/^#define THREADS .*/#define THREADS 16/' \
    -e "s/^#define RUN_SECONDS .*/#define RUN_SECONDS $seconds/"
  make_cgroup 96M 0
  run_pairs file-thrash rounds/s \
    "in_cgroup ./thrash" \
    "in_cgroup $workload filemap-thrash --threads 16 --file_size 16M --file_fill sparse --warmup 0s --duration ${seconds}s --dir $work --inherit-cgroup" \
    "sed -n 's/^Throughput *: *\([0-9.]*\).*/\1/p'" \
    "json_number throughput_rounds_per_second"
  drop_cgroup
fi

# --- [PATCH v2 0/5] swap-in model -------------------------------------------------------------
if [ -z "$only" ] || [[ swap-in =~ $only ]]; then
  seed=$(find_seed '#define READER_THREADS 5') || true
  [ -n "$seed" ] || die "no seed with the swap-in reproducer (#define READER_THREADS 5) in $seeds"
  { echo "$headers"; cut_code "$seed" '^ #define SIZE \(100' ' '; } >"$work/swapin.src"
  build swapin "$work/swapin.src" -e 's/^#define SIZE .*/#define SIZE (64 * 1024 * 1024)/' \
    -e 's/^#define WRITER_THREADS .*/#define WRITER_THREADS 2/' \
    -e 's/^#define READER_THREADS .*/#define READER_THREADS 2/' \
    -e "s/^#define RUN_SECONDS .*/#define RUN_SECONDS $seconds/"
  ensure_swap
  make_cgroup 1G unlimited
  run_pairs swap-in rounds/s \
    "in_cgroup ./swapin" \
    "in_cgroup $workload swap-in --region_size 64M --readers 2 --pageout_threads 2 --fill zero --warmup 0s --duration ${seconds}s --inherit-cgroup" \
    "awk -v s=$seconds '/^Swap-in rounds/ { print \$NF / s }'" \
    "json_number throughput_rounds_per_second"
  drop_cgroup
fi

# --- finish_fault shmem folio ------------------------------------------------------------------
if [ -z "$only" ] || [[ finish-fault =~ $only ]]; then
  seed=$(find_seed 'willitscale-shmem') || true
  [ -n "$seed" ] || die "no seed with the finish_fault reproducer (willitscale-shmem) in $seeds"
  cut_code "$seed" '^> #define _GNU_SOURCE' '> ' >"$work/shmem.src"
  # A fixed iteration count in the seed: pick one that takes about --seconds here.
  build shmem "$work/shmem.src" -e "s/^#define ITERATIONS .*/#define ITERATIONS 100000/"
  # shmem THP on for PMD folios, at the top level too: the seed asserts its memfd mapping
  # is PMD-aligned, which the kernel does only when the top-level setting allows THP.
  thp=/sys/kernel/mm/transparent_hugepage
  for f in $thp/shmem_enabled $thp/hugepages-2048kB/shmem_enabled; do
    [ -e "$f" ] || continue
    thp_saved+=("$f=$(sed -n 's/.*\[\([a-z_]*\)\].*/\1/p' "$f")")
    echo always >"$f"
  done
  per_second=$("$workload" shmem-folio-fault --vma_size 64K --thp advise --duration 1s | json_number throughput_rounds_per_second)
  iterations=$(awk -v r="$per_second" -v s="$seconds" 'BEGIN { printf "%d", r * s }')
  build shmem "$work/shmem.src" -e "s/^#define ITERATIONS .*/#define ITERATIONS $iterations/"
  # thp=advise keeps the setting made above (force would set and restore it itself).
  # The seed asserts that its 64K mapping landed 64K-aligned, which is up to ASLR (1 in 16
  # here): start it again until it does; a start that fails costs a millisecond.
  run_pairs finish-fault touch-loops/s \
    "for try in \$(seq 500); do ./shmem && break; done 2>/dev/null" \
    "$workload shmem-folio-fault --vma_size 64K --shmem_size 2M --thp advise --access write --touch_pages 8 --fault_timing on --warmup 0s --duration ${seconds}s" \
    "awk -v n=$iterations '/Total time taken/ { printf \"%.1f\\n\", 1e9 * n / \$(NF - 1) }'" \
    "json_number fault_ns_per_iteration | awk '{ printf \"%.1f\\n\", 1e9 / \$1 }'"
fi
