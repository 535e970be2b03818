#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted as .clang-format says (the whole tree, so
# a check cannot pass because the last commit happened not to touch a bad line).
#   scripts/check-format.sh        exit 1 naming each file and line clang-format would change
# Fix: git ls-files '*.cc' '*.h' | xargs clang-format -i
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "check-format: clang-format not found (apt install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no C++ files tracked (not a checkout?)" >&2; exit 2; }
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  printf '%s\n' "$out" | grep -E '^[^ ].*: (error|warning):' | head -50
  echo "check-format: $(printf '%s\n' "$out" | grep -cE ': (error|warning):') place(s) not formatted (fix: git ls-files '*.cc' '*.h' | xargs clang-format -i)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
