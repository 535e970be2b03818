#!/usr/bin/env bash
# scripts/test-affected.sh's choice of slow tests, on throwaway git repositories (no build,
# no install: --list only):
#   1. a small map of its own (FAULTLINE_AFFECTED_MAP): what counts as changed since BASE
#      (commits, staged, unstaged, untracked, renames; not ignored files) and the globs
#      (`*` stays in one directory, `**` crosses them, `{a,b}`);
#   2. the real tests/affected.map: kbuild/ selects e2e_lab_kernels, docs/ and README.md
#      nothing, tests/packaging/board_test.sh the boards, an untracked file in deploy/lab
#      e2e_lab; every name in the map is a slow test and every slow test is in the map;
#   3. a BASE that is not a commit exits 2 naming it.
# Exit 1 naming each failed check (what it expected, what it got), 0 when all pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
script=$here/scripts/test-affected.sh
real_map=$here/tests/affected.map
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
g() { git -C "$repo" -c user.name=test -c user.email=test@example.invalid -c commit.gpgsign=false "$@"; }
# A fresh repository $repo with FILES committed (each holding its own name); $base is it.
new_repo() {
  repo=$tmp/repo-$1; shift
  git -c init.defaultBranch=main init -q "$repo"
  local f
  for f in "$@"; do mkdir -p "$repo/$(dirname "$f")"; echo "$f" >"$repo/$f"; done
  g add -A && g commit -qm base
  base=$(g rev-parse HEAD)
}
change() { local f; for f in "$@"; do mkdir -p "$repo/$(dirname "$f")"; echo changed >>"$repo/$f"; done; }
# affected MAP BASE: runs the --list; $got is its output (one line, space-separated), $rc
# its status, $tmp/stderr the table.
affected() {
  rc=0
  FAULTLINE_AFFECTED_REPO=$repo FAULTLINE_AFFECTED_MAP=$1 "$script" "$2" --list \
    >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  got=$(paste -sd' ' "$tmp/stdout")
}
# expect_list WHAT MAP BASE EXPECTED: the whole sorted list.
expect_list() {
  affected "$2" "$3"
  if [ "$rc" = 0 ] && [ "$got" = "$4" ]; then pass "$1: [$got]"
  else fail "$1: expected [$4] (exit 0), got [$got] (exit $rc); stderr: $(cat "$tmp/stderr")"; fi
}
# expect_has WHAT MAP BASE 'T1 T2' ['U1 U2']: the list has every T, none of the U.
expect_has() {
  local t bad=""
  affected "$2" "$3"
  for t in $4; do [[ " $got " == *" $t "* ]] || bad+=" missing $t"; done
  for t in ${5:-}; do [[ " $got " != *" $t "* ]] || bad+=" unwanted $t"; done
  if [ "$rc" = 0 ] && [ -z "$bad" ]; then pass "$1: has $4${5:+, not $5}"
  else fail "$1: expected [$4]${5:+ and none of [$5]} (exit 0), got [$got] (exit $rc):$bad"; fi
}

# --- 1. A small map: what changed, and the globs.
small=$tmp/small.map
cat >"$small" <<'EOF'
# comment line, then a blank one

src/**         t_src       # every file below src/
src/*.h        t_hdr
lib/x.{cc,h}   t_y t_x
top.txt        t_top
**/CMakeLists.txt  t_cmake
gone/*         t_gone
EOF
new_repo small src/a/b.cc src/top.h lib/x.cc lib/x.h lib/z.cc gone/old.txt CMakeLists.txt keep.txt
echo '*.log' >"$repo/.gitignore"; g add .gitignore; g commit -qm ignore-logs
expect_list "nothing changed" "$small" HEAD ""
expect_list "a file no rule matches" "$small" "$base" ""
change src/a/b.cc; g commit -qam one
expect_list "committed src/a/b.cc (** crosses /, * does not)" "$small" "$base" "t_src"
change src/top.h; g add src/top.h
expect_list "+ staged src/top.h" "$small" "$base" "t_hdr t_src"
change lib/x.h
expect_list "+ unstaged lib/x.h ({cc,h})" "$small" "$base" "t_hdr t_src t_x t_y"
change top.txt debug.log
expect_list "+ untracked top.txt (ignored debug.log not)" "$small" "$base" "t_hdr t_src t_top t_x t_y"
g mv gone/old.txt moved.txt
expect_list "+ renamed gone/old.txt (its old path counts)" "$small" "$base" \
  "t_gone t_hdr t_src t_top t_x t_y"
change CMakeLists.txt
expect_list "+ the root CMakeLists.txt (**/ matches no directory)" "$small" "$base" \
  "t_cmake t_gone t_hdr t_src t_top t_x t_y"
if grep -q '^  t_src  *<- src/a/b.cc, src/top.h$' "$tmp/stderr"; then pass "the table: t_src <- src/a/b.cc, src/top.h"
else fail "the table: expected a line 't_src <- src/a/b.cc, src/top.h', got: $(cat "$tmp/stderr")"; fi
expect_list "BASE is HEAD: the working tree only" "$small" HEAD \
  "t_cmake t_gone t_hdr t_src t_top t_x t_y"
if grep -q '^  t_src  *<- src/top.h$' "$tmp/stderr"; then pass "BASE is HEAD: t_src <- src/top.h only (not the commit's src/a/b.cc)"
else fail "BASE is HEAD: expected a line 't_src <- src/top.h', got: $(cat "$tmp/stderr")"; fi
printf 'src/**  t_src\nlib/**\n' >"$tmp/bad.map"
affected "$tmp/bad.map" "$base"
if [ "$rc" = 2 ] && grep -q 'bad.map:2' "$tmp/stderr"; then pass "a map line without a test: exit 2, $(cat "$tmp/stderr")"
else fail "a map line without a test: expected exit 2 naming bad.map:2, got exit $rc: $(cat "$tmp/stderr")"; fi

# --- 2. The real map, on a repository with some of the real tree's paths.
files=(kbuild/builder.cc docs/testing.md README.md tests/packaging/board_test.sh
  deploy/lab/lab.sh agent/main.cc tests/unit/test_affected_test.sh)
boards="cross_build_controllers packaging_build_cross packaging_board_aarch64 packaging_board_riscv64"
new_repo real "${files[@]}"
reset() { g reset -q --hard "$base"; g clean -qfd; }
change kbuild/builder.cc; g commit -qam kbuild
expect_has "kbuild/ (committed)" "$real_map" "$base" "e2e_lab_kernels cross_build_agent" "fuzz_smoke"
reset
change docs/testing.md README.md; g add -A
expect_list "docs/ and README.md only" "$real_map" "$base" ""
reset
change tests/unit/test_affected_test.sh
expect_list "this self-test (gate only)" "$real_map" "$base" ""
reset
change tests/packaging/board_test.sh
expect_has "tests/packaging/board_test.sh (unstaged)" "$real_map" "$base" \
  "packaging_board_aarch64 packaging_board_riscv64 packaging_board" "e2e_lab packaging_build"
reset
change deploy/lab/new-helper.sh
expect_has "untracked deploy/lab/new-helper.sh" "$real_map" "$base" "e2e_lab" "fuzz_smoke"
reset
change agent/main.cc
expect_has "agent/ (the boards' agent package)" "$real_map" "$base" "$boards e2e_lab packaging_build" \
  "packaging_image cross_build_static_riscv64"

# The map's test names against the slow tests (tests/CMakeLists.txt, tests/cross,
# tests/packaging: tiers nightly and weekly).
slow=(cross_build_agent cross_build_static_riscv64 cross_build_controllers e2e_lab e2e_lab_kernels
  study_seed_v5 study_bisect study_robot_seeds packaging_build packaging_systemd packaging_board
  packaging_image
  packaging_build_cross packaging_board_aarch64 packaging_board_riscv64 fuzz_smoke
  house_rules_full kbuild_reproducible kbuild_strangers_kernel)
mapfile -t named < <(sed 's/#.*//' "$real_map" | awk 'NF >= 2 { for (i = 2; i <= NF; i++) print $i }' | sort -u)
names_ok=1
for t in "${named[@]}"; do
  [[ " ${slow[*]} " == *" $t "* ]] || { fail "tests/affected.map names '$t', which is not a slow test"; names_ok=0; }
done
for t in "${slow[@]}"; do
  [[ " ${named[*]} " == *" $t "* ]] || { fail "tests/affected.map never selects the slow test '$t'"; names_ok=0; }
done
[ "$names_ok" = 0 ] || pass "tests/affected.map names the ${#slow[@]} slow tests and nothing else"

# --- 3. A bad BASE.
out=$(FAULTLINE_AFFECTED_REPO=$repo "$script" no-such-commit --list 2>&1) && rc=0 || rc=$?
if [ "$rc" = 2 ] && [[ $out == *no-such-commit* ]]; then pass "a bad BASE: exit 2, '$out'"
else fail "a bad BASE: expected exit 2 and a message naming no-such-commit, got exit $rc: '$out'"; fi

if [ "$failures" -gt 0 ]; then echo "test_affected_test: $failures check(s) failed" >&2; exit 1; fi
echo "test_affected_test: all checks passed"
