#!/usr/bin/env bash
# Runs the .clang-tidy checks (a short list that finds real bugs) on every tracked C++ file
# the build compiles (build/compile_commands.json): the whole tree, on every core.
#   scripts/check-tidy.sh              exit 1 on any finding, 2 when it cannot run at all
#   scripts/check-tidy.sh --since REF  only the files a change since REF can affect: the .cc
#                                      files changed since REF (commits, working tree,
#                                      untracked) and those whose objects include a changed
#                                      header (ninja's dependency log); the whole tree when
#                                      .clang-tidy changed or REF is not in the history.
#                                      CI's gate passes the last commit whose whole tree was
#                                      checked clean (.ci/tidy-clean); tier lint_full checks
#                                      everything.
# A file is checked again only when what the compiler sees of it changed: each clean
# result is remembered under the sha256 of the file's preprocessed text (every header it
# includes, as included), its flags, .clang-tidy and clang-tidy's version, in
# ${FAULTLINE_TIDY_CACHE:-~/.cache/faultline-tidy} (the checkout's path left out, so every
# clone on the machine shares it), and in .ci/tidy-clean.keys ("FILE KEY", committed: the
# keys travel with the clone, so a fresh machine's gate checks only what changed since the
# last clean run that was committed, however old .ci/tidy-clean is). A clean run rewrites
# the lines of the files it covered. A cold run over the whole tree takes ~14 min on 2
# cores; FAULTLINE_TIDY_CACHE=off checks everything regardless.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${FAULTLINE_BUILD_DIR:-$root/build}
cache=${FAULTLINE_TIDY_CACHE:-$HOME/.cache/faultline-tidy}
command -v clang-tidy >/dev/null || { echo "check-tidy: clang-tidy not found (apt install clang-tidy)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json (build first)" >&2; exit 2; }
since=
if [ "${1:-}" = --since ]; then
  [ -n "${2:-}" ] || { echo "check-tidy: --since needs a commit" >&2; exit 2; }
  since=$2
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' |
  while read -r f; do grep -q "\"file\": \"$root/$f\"" "$build/compile_commands.json" && echo "$f"; done)
[ ${#files[@]} -gt 0 ] || { echo "check-tidy: no compiled C++ file in $build (build first)" >&2; exit 2; }
if [ -n "$since" ]; then
  if ! git rev-parse -q --verify "$since^{commit}" >/dev/null; then
    echo "check-tidy: $since is not in this history: checking the whole tree"
  elif ! git diff --quiet "$since" -- .clang-tidy; then
    echo "check-tidy: .clang-tidy changed since $since: checking the whole tree"
  else
    changed=$( (git diff --name-only "$since"; git ls-files --others --exclude-standard) | sort -u)
    # Objects whose recorded inputs (ninja -t deps: the source and every header it included)
    # contain a changed file; then the sources of those objects.
    mapfile -t files < <(ninja -C "$build" -t deps 2>/dev/null | python3 -c '
import json, os, shlex, sys
root, db = sys.argv[1], json.load(open(sys.argv[2]))
changed = {os.path.join(root, l.strip()) for l in open(sys.argv[3]) if l.strip()}
build = os.path.dirname(os.path.abspath(sys.argv[2]))
source_of = {}
for e in db:
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    out = e.get("output") or (args[args.index("-o") + 1] if "-o" in args else "")
    source_of[os.path.normpath(os.path.join(e["directory"], out))] = e["file"]
hit, obj = set(), None
for line in sys.stdin:
    if not line.startswith((" ", "\t")):
        obj = os.path.normpath(os.path.join(build, line.split(":", 1)[0])) if line.strip() else None
        continue
    dep = os.path.normpath(os.path.join(build, line.strip()))
    if obj in source_of and dep in changed:
        hit.add(source_of[obj])
for f in sorted(hit | {c for c in changed if c.endswith(".cc")}):
    rel = os.path.relpath(f, root)
    if any(e["file"] == f for e in db):
        print(rel)
' "$root" "$build/compile_commands.json" <(printf '%s\n' "$changed"))
    echo "check-tidy: ${#files[@]} compiled file(s) can be affected by what changed since $since"
    [ ${#files[@]} -gt 0 ] || { echo "check-tidy: nothing to check"; exit 0; }
  fi
fi
start=$(date +%s)

# "FILE KEY" per file: the key of what clang-tidy would see (see above); "FILE -" when the
# preprocessor fails (then the file is simply checked).
keys=$(python3 - "$build/compile_commands.json" "$root" "$(clang-tidy --version | tr '\n' ' ')" \
  "$(sha256sum .clang-tidy | cut -d' ' -f1)" "${files[@]}" <<'PY'
import concurrent.futures, hashlib, json, os, shlex, subprocess, sys
db, root, version, config, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
entries = {e["file"]: e for e in json.load(open(db))}
def key(f):
    e = entries[os.path.join(root, f)]
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MT", "-MF"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    # The checkout's own path (in -I flags and __FILE__) is not part of what is checked: a
    # clone elsewhere (CI's) finds the same keys.
    h = hashlib.sha256("\0".join([version, config] + [a.replace(root, "@ROOT@") for a in out]).encode())
    try:
        pre = subprocess.run(out + ["-E", "-P"], cwd=e["directory"], capture_output=True, check=True)
    except subprocess.CalledProcessError:
        return f, "-"
    h.update(pre.stdout.replace(root.encode(), b"@ROOT@"))
    return f, h.hexdigest()
with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for f, k in pool.map(key, files):
        print(f, k)
PY
)
todo=()
declare -A key_of=() committed=()
keys_file=$root/.ci/tidy-clean.keys
if [ "$cache" != off ] && [ -f "$keys_file" ]; then
  while read -r f k; do [ -z "$k" ] || committed[$f]=$k; done <"$keys_file"
fi
while read -r f k; do
  key_of[$f]=$k
  if [ "$cache" = off ] || [ "$k" = - ]; then
    todo+=("$f")
  elif [ ! -e "$cache/$k" ] && [ "${committed[$f]:-}" != "$k" ]; then
    todo+=("$f")
  fi
done <<<"$keys"
echo "check-tidy: ${#files[@]} files, $(( ${#files[@]} - ${#todo[@]} )) unchanged since a clean check, ${#todo[@]} to check"
[ "$cache" = off ] || mkdir -p "$cache"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
if [ ${#todo[@]} -gt 0 ]; then
  # One clang-tidy per file, as many at once as there are cores; a clean file's key is kept.
  printf '%s\n' "${todo[@]}" | while read -r f; do echo "$f ${key_of[$f]}"; done |
    xargs -P "$(nproc)" -L 1 sh -c '
      build=$1 cache=$2 log=$3 file=$4 key=$5
      out=$(clang-tidy -p "$build" --quiet "$file" 2>&1); rc=$?
      if [ $rc -eq 0 ]; then
        [ "$cache" = off ] || [ "$key" = - ] || : >"$cache/$key"
      else
        printf "%s\n" "$out" >>"$log"
      fi
      exit $rc' _ "$build" "$cache" "$log" || status=$?
fi
if [ "$status" -ne 0 ]; then
  grep -E 'error:|warning:' "$log" | sort -u | head -50
  echo "check-tidy: findings above" >&2
  exit 1
fi
# Clean: the covered files' keys into the committed list (files gone from the tree dropped).
for f in "${!key_of[@]}"; do
  [ "${key_of[$f]}" = - ] || committed[$f]=${key_of[$f]}
done
for f in "${!committed[@]}"; do
  if [ -e "$f" ]; then printf '%s %s\n' "$f" "${committed[$f]}"; fi
done | LC_ALL=C sort >"$keys_file.tmp" && mv "$keys_file.tmp" "$keys_file"
echo "check-tidy: ${#files[@]} files clean ($(( $(date +%s) - start )) s; keys in .ci/tidy-clean.keys)"
