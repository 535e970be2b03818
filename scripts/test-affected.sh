#!/usr/bin/env bash
# Runs only the slow tests (tiers nightly and weekly) whose inputs changed since BASE: the
# files changed since BASE (its commits, the working tree staged or not, untracked files
# that are not ignored) matched against tests/affected.map (the format is described there).
#   scripts/test-affected.sh BASE [--list] [-- CTEST_ARGS...]
# Prints each selected test with the first files that chose it (on stderr). Then:
#   --list  prints the selected tests' names, one a line, sorted (nothing when none is
#           selected) and exits 0: no install, no build
#   else    when none is selected says so and exits 0; otherwise installs what they need
#           (scripts/install-deps.sh test and the groups cross, lab, packaging, fuzz that
#           they need), builds (scripts/build.sh, into ${FAULTLINE_BUILD_DIR:-build}) and
#           runs them: ctest --output-on-failure -R '^(t1|t2|...)$' CTEST_ARGS... (ctest adds
#           their fixtures' setup tests, such as cross_build_agent), exiting with its status
# Exit 2: BASE is not a commit, or a bad argument or map line.
# Env: FAULTLINE_AFFECTED_MAP  another map file (default: this checkout's tests/affected.map)
#      FAULTLINE_AFFECTED_REPO another repository whose changes are read (the self-test,
#                              tests/unit/test_affected_test.sh); install, build and ctest
#                              are always this checkout's
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=${FAULTLINE_AFFECTED_REPO:-$here}
map=${FAULTLINE_AFFECTED_MAP:-$here/tests/affected.map}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "test-affected: $*" >&2; exit 2; }

base="" list=0 ctest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --list) list=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h | --help) usage; exit 0 ;;
    -*) die "unknown option '$1' (ctest's arguments go after --)" ;;
    *) [ -z "$base" ] || die "one BASE only ('$base', then '$1'; ctest's arguments go after --)"
       base=$1; shift ;;
  esac
done
[ -n "$base" ] || { usage >&2; exit 2; }
git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || die "$repo is not a git repository"
git -C "$repo" rev-parse --quiet --verify "$base^{commit}" >/dev/null ||
  die "BASE '$base' is not a commit in $repo (a branch, tag or hash; fetch it first?)"
[ -f "$map" ] || die "no map file $map"

# A map glob as an anchored extended regular expression (the rules: tests/affected.map).
glob_re() {
  local g=$1 re="" c i=0 brace=0
  while [ "$i" -lt "${#g}" ]; do
    c=${g:i:1}
    case $c in
      '*')
        if [ "${g:i:3}" = '**/' ]; then re+='(.*/)?'; i=$((i + 3)); continue; fi
        if [ "${g:i:2}" = '**' ]; then re+='.*'; i=$((i + 2)); continue; fi
        re+='[^/]*' ;;
      '?') re+='[^/]' ;;
      '{') re+='('; brace=1 ;;
      '}') re+=')'; brace=0 ;;
      ',') if [ "$brace" = 1 ]; then re+='|'; else re+=','; fi ;;
      '.' | '+' | '^' | '$' | '|' | '(' | ')' | '[' | ']' | \\) re+="\\$c" ;;
      *) re+=$c ;;
    esac
    i=$((i + 1))
  done
  printf '^%s$' "$re"
}

# The rules: a regular expression and its tests (space-separated) each.
rule_re=() rule_tests=()
lineno=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  line=${line%%#*}
  read -r -a words <<<"$line"
  [ "${#words[@]}" -gt 0 ] || continue
  [ "${#words[@]}" -ge 2 ] || die "$map:$lineno: '${words[0]}' names no test"
  for t in "${words[@]:1}"; do
    [[ $t =~ ^[A-Za-z0-9_.-]+$ ]] || die "$map:$lineno: '$t' is not a test name"
  done
  rule_re+=("$(glob_re "${words[0]}")")
  rule_tests+=("${words[*]:1}")
done <"$map"

# Changed since BASE: its commits and the working tree (staged or not), a rename as its old
# and its new path; untracked files that are not ignored. Paths from the repository's root.
mapfile -d '' -t files < <(
  { git -C "$repo" diff -z --name-only --no-renames "$base" --
    git -C "$repo" ls-files -z --others --exclude-standard; } | sort -zu)

declare -A count=() why=() seen=()
unmatched=0
for f in "${files[@]}"; do
  hit=0
  for i in "${!rule_re[@]}"; do
    [[ $f =~ ${rule_re[i]} ]] || continue
    hit=1
    read -r -a tests <<<"${rule_tests[i]}"
    for t in "${tests[@]}"; do
      [ -z "${seen[$t/$f]:-}" ] || continue
      seen[$t/$f]=1
      count[$t]=$((${count[$t]:-0} + 1))
      [ "${count[$t]}" -gt 3 ] || why[$t]+="${why[$t]:+, }$f"
    done
  done
  [ "$hit" = 1 ] || unmatched=$((unmatched + 1))
done
selected=()
[ "${#count[@]}" -eq 0 ] || mapfile -t selected < <(printf '%s\n' "${!count[@]}" | sort)

{
  echo "test-affected: ${#files[@]} file(s) changed since $base ($unmatched feed no slow test): ${#selected[@]} slow test(s)"
  for t in "${selected[@]}"; do
    more=""
    [ "${count[$t]}" -le 3 ] || more=" and $((count[$t] - 3)) more"
    printf '  %-27s <- %s%s\n' "$t" "${why[$t]}" "$more"
  done
} >&2

if [ "$list" = 1 ]; then
  [ "${#selected[@]}" -eq 0 ] || printf '%s\n' "${selected[@]}"
  exit 0
fi
if [ "${#selected[@]}" -eq 0 ]; then
  echo "test-affected: no slow test's inputs changed since $base"
  exit 0
fi

groups=(test)
want() { local g; for g in "${groups[@]}"; do [ "$g" != "$1" ] || return 0; done; groups+=("$1"); }
for t in "${selected[@]}"; do
  case $t in
    cross_*) want cross ;;
    e2e_lab* | study_*) want lab ;;
    packaging_*) want packaging ;;
    fuzz_*) want fuzz ;;
  esac
done
"$here/scripts/install-deps.sh" "${groups[@]}"
"$here/scripts/build.sh"
build=${FAULTLINE_BUILD_DIR:-$here/build}
cd "$build"
build=$(pwd)
regex="^($(IFS='|'; echo "${selected[*]}"))\$"

# A test the build tree does not define would be silently not run (fuzz_smoke needs the
# clang that the fuzz group has just installed): configure again once, then give up.
missing() {
  local defined
  defined=$(ctest -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
  for t in "${selected[@]}"; do grep -qxF "$t" <<<"$defined" || echo "$t"; done
}
if [ -n "$(missing)" ]; then
  cmake -S "$here" -B "$build" >/dev/null
  absent=$(missing | paste -sd' ')
  [ -z "$absent" ] ||
    { echo "test-affected: $build defines no test $absent (tests/CMakeLists.txt says what each needs)" >&2; exit 1; }
fi
exec ctest --output-on-failure -R "$regex" "${ctest_args[@]}"
