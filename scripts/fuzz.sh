#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into ${FAULTLINE_FUZZ_BUILD_DIR:-build-fuzz}
# and runs each for --seconds (default 60) from a seed corpus (the example job specs, an
# agent config). A crash, a leak or a sanitizer report fails the script and leaves the
# reproducer in the build dir (crash-*).
#   scripts/fuzz.sh [--seconds N] [--jobs N]
# A longer campaign: scripts/fuzz.sh --seconds 3600 (the corpus persists in the build dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FAULTLINE_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=60
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
clangxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$clangxx" ] || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang-14)" >&2; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$clangxx" -DFAULTLINE_FUZZ=ON -DFAULTLINE_BUILD_TESTS=OFF >/dev/null
fi
ninja -C "$build" fuzz_job_spec fuzz_agent_messages

corpus=$build/corpus
mkdir -p "$corpus/job_spec" "$corpus/agent_messages"
for f in "$root"/deploy/examples/*.yaml; do  # mode byte 0: YAML
  { printf '\0'; cat "$f"; } >"$corpus/job_spec/seed-$(basename "$f")"
done
{ printf '\4'; printf 'board: b\nkernels:\n  - {label: v, release: running}\n  - {label: p, release: 6.9, boot: kexec, kernel: /boot/vmlinuz}\n'; } \
  >"$corpus/agent_messages/seed-config"
for target in job_spec agent_messages; do
  echo "fuzz.sh: fuzz_$target for ${seconds}s"
  (cd "$build" && "./tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 "$corpus/$target" 2>&1 | tail -n 15)
  # libFuzzer exits non-zero on a finding; pipefail carries it here.
done
echo "fuzz.sh: no crash, leak or sanitizer report"
