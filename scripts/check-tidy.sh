#!/usr/bin/env bash
# Runs the .clang-tidy checks (a short list that finds real bugs) on the C++ source files
# changed since BASE (default: the parent of HEAD), with build/compile_commands.json.
#   scripts/check-tidy.sh [BASE]        exit 1 on any finding
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base=${1:-HEAD~1}
build=${FAULTLINE_BUILD_DIR:-$root/build}
command -v clang-tidy >/dev/null || { echo "check-tidy: clang-tidy not found (apt install clang-tidy)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json (build first)" >&2; exit 2; }
git rev-parse --verify -q "$base^{commit}" >/dev/null || { echo "check-tidy: no commit $base" >&2; exit 0; }
mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" -- '*.cc' |
  while read -r f; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
if [ ${#files[@]} -eq 0 ]; then echo "check-tidy: no compiled C++ file changed since $base"; exit 0; fi
echo "check-tidy: ${#files[@]} file(s) changed since $base"
clang-tidy -p "$build" --quiet "${files[@]}"
echo "check-tidy: clean"
