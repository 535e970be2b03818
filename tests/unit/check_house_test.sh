#!/usr/bin/env bash
# scripts/check-house.sh can fail: on throwaway repositories, each house rule broken once
# is named (and exit 1), the same rule kept passes (exit 0):
#   a source file of 601 lines (600 passes); a function of 151 lines (150 passes, and so
#   does one of 146 holding a lambda and an if block); OpenSSL's SHA-256 outside
#   common/sha256.cc; a Render* definition in services/cli (a call passes); a controller
#   link line without the report library; a folder with C++ that .clang-tidy's
#   HeaderFilterRegex leaves out; literal comparisons of an API verdict, build state or
#   bisection mark (either side; in proto/faultline/v1/ or a comment they pass), in
#   bisect/ too; a bisection origin read by hand; a build's apply error parsed back; a run
#   option read in its older spelling (RunOptionsOf and options.events() pass).
# Exit 1 naming each failed check, 0 when all pass.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
script=$here/scripts/check-house.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# lines N: N lines of a statement each.
lines() { local i; for ((i = 0; i < $1; i++)); do echo "  x += $i;"; done; }
# A repository that keeps every rule: one folder per kind, a clean .clang-tidy, a build
# dir whose controller links the report library.
new_repo() {
  repo=$tmp/$1
  mkdir -p "$repo/common" "$repo/services/cli" "$repo/build"
  git -c init.defaultBranch=main init -q "$repo"
  printf "HeaderFilterRegex: '/(common|services)/'\n" >"$repo/.clang-tidy"
  { echo "int F() {"; echo "  int x = 0;"; lines 148; echo "  return x;"; echo "}"; } >"$repo/common/long.cc"
  { lines 600; } >"$repo/common/big.h"
  { echo "void G() {"; echo "  auto f = [&](int y) {"; lines 100; echo "  };"
    echo "  if (ok) {"; lines 40; echo "  }"; echo "}"; } >"$repo/common/blocks.cc"
  echo 'std::string Sha() { return Sha256Hex("x"); }' >"$repo/common/uses.cc"
  echo 'void P() { std::cout << report::RenderReport(r, f); }' >"$repo/services/cli/print.cc"
  printf 'build services/controller/faultline-controller: CXX_EXECUTABLE_LINKER main.o\n  LINK_LIBRARIES = report/libfaultline_report.a stats/libfaultline_stats.a\n' \
    >"$repo/build/build.ninja"
  echo build/ >"$repo/.gitignore"
}
# expect NAME EXIT_CODE [TEXT]: the check over $repo exits so (and prints TEXT).
expect() {
  local name=$1 want=$2 text=${3:-} out rc=0
  out=$(FAULTLINE_BUILD_DIR=$repo/build "$script" "$repo" 2>&1) || rc=$?
  if [ "$rc" != "$want" ]; then fail "$name: exit $rc, expected $want: $out"; return; fi
  if [ -n "$text" ] && ! grep -qF -- "$text" <<<"$out"; then fail "$name: no '$text' in: $out"; return; fi
  pass "$name"
}

new_repo clean
expect "every rule kept" 0 "product sources within the house rules"

new_repo file
lines 601 >"$repo/common/big.h"
expect "a file of 601 lines" 1 "common/big.h: 601 lines, over the 600-line limit"

new_repo function
{ echo "int F() {"; echo "  int x = 0;"; lines 149; echo "  return x;"; echo "}"; } >"$repo/common/long.cc"
expect "a function of 151 lines" 1 "common/long.cc:1: F is 151 lines, over the 150-line limit"

new_repo member
{ echo "class C {"; echo " public:"; echo "  C(int a,"; echo "    int b)"; echo "      : a_(a) {"
  lines 151; echo "  }"; echo "};"; } >"$repo/common/member.h"
expect "a constructor of 151 lines in a class" 1 "common/member.h:5: C is 151 lines"

new_repo sha
echo 'void H() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }' >"$repo/common/digest.cc"
expect "SHA-256 outside common/sha256.cc" 1 "common/digest.cc:1: calls OpenSSL's SHA-256"
new_repo sha_home
echo 'void H() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }' >"$repo/common/sha256.cc"
expect "SHA-256 in common/sha256.cc" 0

new_repo render
printf 'std::string RenderTable(const Table& t) {\n  return "";\n}\n' >"$repo/services/cli/table.cc"
expect "a renderer in the CLI" 1 "services/cli/table.cc:1: defines RenderTable"

new_repo link
printf 'build services/controller/faultline-controller: CXX_EXECUTABLE_LINKER main.o\n  LINK_LIBRARIES = stats/libfaultline_stats.a\n' \
  >"$repo/build/build.ninja"
expect "a controller without the report library" 1 "does not link the report library"

new_repo tidy
mkdir -p "$repo/report" && echo "int R();" >"$repo/report/r.h"
expect "a folder .clang-tidy leaves out" 1 ".clang-tidy: HeaderFilterRegex leaves out headers in report/"

new_repo verdict
echo 'bool S(const v1::Comparison& c) { return c.verdict() == "regression"; }' >"$repo/common/v.cc"
expect "a verdict compared with a literal" 1 "common/v.cc:1: compares an API state or verdict with a literal"
new_repo state
echo 'if ("done" != b->state()) return;' >"$repo/services/cli/b.cc"
expect "a literal compared with a build state" 1 "services/cli/b.cc:1: compares an API state"
new_repo mark
echo 'int n = b.marks(i) == "bad";' >"$repo/common/m.cc"
expect "a bisection mark compared with a literal" 1 "common/m.cc:1: compares an API state"
new_repo origin
echo 'if (r.origin().rfind("change point", 0) == 0) return;' >"$repo/services/robot.cc"
expect "a bisection origin parsed by hand" 1 "services/robot.cc:1: reads a bisection's origin by hand"
new_repo apply
echo 'auto f = kbuild::ParseApplyFailure(build.error);' >"$repo/services/outbox.cc"
expect "a build's apply error parsed back" 1 "services/outbox.cc:1: parses a build's apply error"
new_repo runopts
echo 'for (const auto& e : r.spec().events()) count(e);' >"$repo/services/report.cc"
expect "a run option read in its older spelling" 1 "services/report.cc:1: reads a run option in its older spelling"
new_repo engine
mkdir -p "$repo/bisect" && echo 'if (s.outcome() == "bad") return;' >"$repo/bisect/engine.cc"
expect "the bisection's words in bisect/ (no file is let off)" 1 "bisect/engine.cc:1: compares an API state"
new_repo typed
mkdir -p "$repo/proto/faultline/v1"
printf "HeaderFilterRegex: '/(common|services|proto)/'\n" >"$repo/.clang-tidy"
echo 'inline bool Done(const Build& b) { return b.state() == "done"; }' >"$repo/proto/faultline/v1/values.h"
printf '// was: c.verdict() == "regression"
bool S(const v1::Comparison& c) { return v1::SaysSlower(v1::VerdictOf(c)); }
' >"$repo/common/v.cc"
echo 'if (e.sqlstate() == "57P01") retry();' >"$repo/common/pg.cc"
echo 'if (v1::ChangePointOf(r) == id) return; r.set_origin("job 7");' >"$repo/common/o.cc"
echo 'auto o = v1::RunOptionsOf(r.spec()); n = o.events().size() + options.profile().pmu();' >"$repo/common/r.cc"
expect "the words in their type, a comment, the typed call, another accessor" 0

[ "$failures" -eq 0 ] || { echo "check_house_test: $failures check(s) failed" >&2; exit 1; }
echo "check_house_test: every check passed"
