#!/usr/bin/env bash
# Issue #43, the build part, on a real kernel: one key is one image, and a hit costs no make.
# Debian's linux-source-6.12 as a git tree (deploy/kernel/linux-tree.sh), x86_64,
# tinyconfig + deploy/kernel/board.config (the lab's kernel), built by faultline-kbuild in
# two caches:
#   A  the lab's kernel cache (FL_LAB_KBUILD_CACHE, kept and shared with e2e_lab_kernels):
#      vanilla, a hit when e2e_lab_kernels built it, else a build (ccache as configured);
#   B  a fresh cache (removed at the end), with a cold ccache (the sandbox's, in the cache;
#      CCACHE_DISABLE=1 when the build runs unsandboxed): every object compiled here, under
#      other source and object paths. vanilla must be A's image byte
#      for byte; then the CI series (patched, linked in B's object directory), vanilla
#      evicted and built again (its third link there: `#3` before KBUILD_BUILD_VERSION was
#      set), which must be the same image again;
#   the same request again in B and in A: hits without the config step or make (the
#   progress says so), timed.
# Prints the images' sha256 and version strings (the bzImage header's), each step's time,
# and where B's paths appear in the images when they differ.
# Usage: kbuild_reproducible_test.sh FAULTLINE_KBUILD (the faultline-kbuild binary)
# Env: FL_LAB_KBUILD_CACHE (cache A: /var/cache/faultline-kbuild), FL_KBUILD_JOBS (make -j:
#      the CPUs), FL_TEST_KEEP=1 (keep cache B and the outputs)
set -euo pipefail
kbuild=${1:?usage: kbuild_reproducible_test.sh FAULTLINE_KBUILD}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cache_a=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
jobs=${FL_KBUILD_JOBS:-$(nproc)}
T0=$EPOCHREALTIME
secs() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }'; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in git:git make:make gcc:gcc flex:flex bison:bison bc:bc strings:binutils; do
  command -v "${tool%%:*}" >/dev/null || { echo "SKIP: ${tool%%:*} not installed (apt-get install ${tool#*:})"; exit 77; }
done
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: builds x86_64 natively"; exit 77; }
if [ ! -f /usr/src/linux-source-6.12.tar.xz ] && [ ! -d "$cache_a/linux-6.12/.git" ] && [ "$(id -u)" != 0 ]; then
  echo "SKIP: no linux-source-6.12 (apt-get install linux-source-6.12, as root)"; exit 77
fi

mkdir -p "$cache_a"
T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$cache_a/linux-6.12") || fail "linux-tree.sh"
ref=$(git -C "$tree" describe --tags --exact-match HEAD) || fail "no tag in $tree"
pass "tree $tree at $ref ($(secs "$T") s)"

work=$(mktemp -d /var/tmp/faultline-kbuild-repro-XXXXXX)
chmod 711 "$work"  # the builder's sandbox uid passes it on its way to cache B's slots
cache_b=$work/cache-b
cleanup() {
  if [ "${FL_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; return; fi
  rm -rf "$work"
  git -C "$tree" worktree prune 2>/dev/null || true  # cache B's worktree
}
trap cleanup EXIT

# build NAME CACHE [ARGS...]: faultline-kbuild's key=value lines in NAME.out, its progress in
# NAME.err, its wall time in NAME.secs.
build() {
  local name=$1 cache=$2 t=$EPOCHREALTIME
  shift 2
  if ! "$kbuild" --tree "$tree" --ref "$ref" --arch x86_64 --base tinyconfig \
      --fragment "$ROOT/deploy/kernel/board.config" --cache "$cache" -j "$jobs" "$@" \
      >"$work/$name.out" 2>"$work/$name.err"; then
    tail -n 30 "$work/$name.err" >&2
    fail "$name: faultline-kbuild failed"
  fi
  secs "$t" >"$work/$name.secs"
}
val() { sed -n "s/^$2=//p" "$work/$1.out" | head -n 1; }
banner() { strings -n 20 "$(val "$1" image)" | grep -m 1 -F '(faultline@faultline)' || true; }
series=(--series "$ROOT/deploy/kernel/series/ci-x86-faults-take-mmap-lock.mbox" --include 'arch/x86/*')

build a "$cache_a"
pass "A: vanilla $(val a release) in $(cat "$work/a.secs") s (cached=$(val a cached)), sha256 $(val a image_sha256)"

CCACHE_DISABLE=1 build b "$cache_b"
[ "$(val b cached)" = no ] || fail "B is a fresh cache, yet it found the kernel"
[ "$(val b key)" = "$(val a key)" ] || fail "B's key $(val b key) is not A's $(val a key)"
if [ "$(val b image_sha256)" != "$(val a image_sha256)" ]; then
  echo "A: $(banner a)" >&2
  echo "B: $(banner b)" >&2
  for obj in "$cache_b"/obj/*/arch/x86/boot/compressed/vmlinux.bin; do
    echo "B's paths in $obj: $(strings -n 8 "$obj" | grep -c -F "$cache_b" || true)" >&2
  done
  fail "one key, two images: A $(val a image_sha256), B $(val b image_sha256)"
fi
pass "B (ccache off): the same image, sha256 $(val b image_sha256), compiled in $(val b build_seconds) s ($(cat "$work/b.secs") s in all): $(banner b)"

CCACHE_DISABLE=1 build patched "$cache_b" "${series[@]}"
[ "$(val patched cached)" = no ] && [ "$(val patched key)" != "$(val b key)" ] || fail "patched: $(cat "$work/patched.out")"
pass "B: patched $(val patched release) linked in the same object directory in $(val patched build_seconds) s: $(banner patched)"

rm -rf "$(dirname "$(val b image)")"
CCACHE_DISABLE=1 build again "$cache_b"
[ "$(val again cached)" = no ] || fail "vanilla was evicted, yet found"
[ "$(val again image_sha256)" = "$(val a image_sha256)" ] ||
  fail "vanilla built again in the object directory: sha256 $(val again image_sha256) ($(banner again)), was $(val a image_sha256) ($(banner a))"
pass "B: vanilla evicted and built again after patched (a third link): the same image in $(val again build_seconds) s: $(banner again)"

# Hits: no config step, no make.
for cache in b a; do
  dir=$cache_b
  [ $cache = a ] && dir=$cache_a
  build "hit-$cache" "$dir"
  [ "$(val "hit-$cache" cached)" = yes ] || fail "hit-$cache: not a hit"
  [ "$(val "hit-$cache" image_sha256)" = "$(val a image_sha256)" ] || fail "hit-$cache: another image"
  if grep -E '^kbuild: (config|make) ' "$work/hit-$cache.err"; then fail "hit-$cache ran the config step or make"; fi
  grep -q 'remembered, no make' "$work/hit-$cache.err" || fail "hit-$cache: $(cat "$work/hit-$cache.err")"
  pass "a hit in ${cache^^} in $(cat "$work/hit-$cache.secs") s, without make: $(tail -n 1 "$work/hit-$cache.err")"
done
echo "total $(secs "$T0") s"
