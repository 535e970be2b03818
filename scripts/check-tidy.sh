#!/usr/bin/env bash
# Runs the .clang-tidy checks (a short list that finds real bugs) on every tracked C++ file
# the build compiles (build/compile_commands.json), the whole tree, on every core.
#   scripts/check-tidy.sh          exit 1 on any finding, 2 when it cannot run at all
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${FAULTLINE_BUILD_DIR:-$root/build}
command -v clang-tidy >/dev/null || { echo "check-tidy: clang-tidy not found (apt install clang-tidy)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json (build first)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' |
  while read -r f; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
[ ${#files[@]} -gt 0 ] || { echo "check-tidy: no compiled C++ file in $build (build first)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# One clang-tidy per file, as many at once as there are cores; any finding fails the run.
if ! printf '%s\n' "${files[@]}" |
    xargs -P "$(nproc)" -I{} sh -c 'clang-tidy -p "$1" --quiet "$2" >"$3.$$" 2>&1; rc=$?; cat "$3.$$" >>"$3"; rm -f "$3.$$"; exit $rc' _ "$build" {} "$log"; then
  grep -E 'error:|warning:' "$log" | sort -u | head -50
  echo "check-tidy: findings above (in ${#files[@]} files)" >&2
  exit 1
fi
echo "check-tidy: ${#files[@]} files clean ($(( $(date +%s) - start )) s)"
