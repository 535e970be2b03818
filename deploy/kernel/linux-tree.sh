#!/usr/bin/env bash
# A git tree of Debian's linux-source-6.12, for builders (and the lab's kernel tests):
#   deploy/kernel/linux-tree.sh [DIR]      prints DIR (default /var/cache/faultline-kbuild/linux-6.12)
# Installs linux-source-6.12 when missing (root, apt), unpacks it into DIR, commits it and
# tags the commit v<VERSION.PATCHLEVEL.SUBLEVEL> from its Makefile (e.g. v6.12.118). An
# existing DIR with that tag is left as it is. Debian's tarball is not a git checkout (its
# .gitignore ignores the top level), so everything is added with -f.
set -euo pipefail
dir=${1:-/var/cache/faultline-kbuild/linux-6.12}
tarball=/usr/src/linux-source-6.12.tar.xz
log() { echo "[linux-tree] $*" >&2; }
if [ -d "$dir/.git" ] && git -C "$dir" describe --tags --exact-match HEAD >/dev/null 2>&1; then
  echo "$dir"; exit 0
fi
if [ ! -f "$tarball" ]; then
  [ "$(id -u)" = 0 ] || { log "$tarball missing: apt-get install linux-source-6.12 (as root)"; exit 1; }
  log "installing linux-source-6.12"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-source-6.12 >&2
fi
for tool in flex bison bc; do
  command -v "$tool" >/dev/null || { log "$tool missing (scripts/install-deps.sh installs the kernel build tools)"; exit 1; }
done
rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
log "unpacking $tarball"
tar -xf "$tarball" -C "$dir.tmp" --strip-components=1
cd "$dir.tmp"
version=$(awk '$1 == "VERSION" {v=$3} $1 == "PATCHLEVEL" {p=$3} $1 == "SUBLEVEL" {s=$3} END {print v "." p "." s}' Makefile)
git init -q
git add -A -f .
git -c user.name=faultline -c user.email=faultline@localhost commit -q -m "Linux $version (Debian linux-source-6.12)"
git tag "v$version"
cd / && mv "$dir.tmp" "$dir"
log "$dir: v$version"
echo "$dir"
