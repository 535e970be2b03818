#!/usr/bin/env bash
# Checks that the C++ lines changed since BASE (default: the parent of HEAD) are formatted
# as .clang-format says. Only changed lines: the tree is not reformatted wholesale.
#   scripts/check-format.sh [BASE]      exit 1 with the diff clang-format wants
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base=${1:-HEAD~1}
command -v git-clang-format >/dev/null || { echo "check-format: git-clang-format not found (apt install clang-format)" >&2; exit 2; }
git rev-parse --verify -q "$base^{commit}" >/dev/null || { echo "check-format: no commit $base: nothing to compare" >&2; exit 0; }
diff=$(git clang-format --quiet --diff --extensions cc,h "$base" -- 2>&1 || true)
if [ -n "$diff" ] && ! grep -q "^no modified files to format" <<<"$diff" && ! grep -q "^clang-format did not modify any files" <<<"$diff"; then
  echo "$diff"
  echo "check-format: the lines above changed since $base are not formatted (fix: git clang-format --force $base)" >&2
  exit 1
fi
echo "check-format: changed lines since $base are formatted"
