#!/usr/bin/env bash
# Builds faultline's Debian packages and checks them with lintian:
#   scripts/build-packages.sh [--with-controller] [amd64] [arm64] [riscv64]   default: amd64
#   amd64             faultline-controller, faultline-agent, faultline (CLI), from the build
#                     tree (${FAULTLINE_BUILD_DIR:-build}; built first if needed)
#   arm64 / riscv64   faultline-agent and faultline, from the agent's cross build tree that
#                     scripts/cross-build-agent.sh made (build-cross/<triple>/agent), and with
#                     --with-controller faultline-controller too, from the whole tree that
#                     cross-build-agent.sh --with-controller made (build-cross/<triple>/full);
#                     their Depends come from that sysroot's library lists (bookworm for
#                     arm64, trixie for riscv64: bookworm has no riscv64; trixie's libpqxx
#                     is 7.x)
# Output: ${FAULTLINE_PACKAGE_DIR:-build/packages}/<name>_<version>_<arch>.deb
# Version: <project version>+git<commits on HEAD>.<short hash>[+dirty]-1 (+dirty when
# tracked files differ from HEAD); FAULTLINE_PACKAGE_VERSION overrides it (the packaging test builds a
# second, later version to upgrade to). lintian runs with --fail-on error,warning; each
# override is explained in deploy/debian/<component>/lintian-overrides.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FAULTLINE_BUILD_DIR:-$root/build}
out=${FAULTLINE_PACKAGE_DIR:-$build/packages}
cross=${FAULTLINE_CROSS_BUILD_DIR:-$root/build-cross}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

die() { echo "build-packages: $*" >&2; exit 1; }
log() { echo "== $*"; }

arches=() with_controller=""
for a in "$@"; do
  case $a in
    --with-controller) with_controller=1 ;;
    amd64|x86_64) arches+=(amd64) ;;
    arm64|aarch64) arches+=(arm64) ;;
    riscv64) arches+=(riscv64) ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown architecture '$a' (amd64, arm64 or riscv64)" ;;
  esac
done
[ ${#arches[@]} -gt 0 ] || arches=(amd64)
for tool in cpack dpkg-deb help2man lintian gzip; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
done

project_version=$(sed -n 's/^project(faultline VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
if [ -n "${FAULTLINE_PACKAGE_VERSION:-}" ]; then
  version=$FAULTLINE_PACKAGE_VERSION
else
  version="$project_version+git$(git -C "$root" rev-list --count HEAD).$(git -C "$root" rev-parse --short=7 HEAD)"
  git -C "$root" diff --quiet HEAD -- || version+="+dirty"
  version+="-1"  # the Debian revision: packaging of an upstream version, not a native package
fi
git_desc=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
# The commit's date, not now: the same commit makes the same changelog.
date=$(git -C "$root" log -1 --format=%aD 2>/dev/null || date -R)
mkdir -p "$out"

# changelog.Debian.gz and manual pages into <tree>/packaging/<component>/usr/share/...,
# where cmake/packaging.cmake's install rules take them from.
gen_docs() {  # TREE COMPONENT PACKAGE BINARY...
  local tree=$1 c=$2 pkg=$3; shift 3
  local dir=$tree/packaging/$c/usr/share
  rm -rf "$dir" && mkdir -p "$dir/doc/$pkg" "$dir/man/man1"
  sed -e "s|@PKG@|$pkg|; s|@VERSION@|$version|; s|@GIT@|$git_desc|; s|@DATE@|$date|" \
    -e "s|@MAINTAINER@|$(sed -n 's/^FAULTLINE_MAINTAINER:STRING=//p' "$tree/CMakeCache.txt")|" \
    "$root/deploy/debian/changelog.in" | gzip -9n >"$dir/doc/$pkg/changelog.Debian.gz"
  local bin
  for bin in "$@"; do
    cp "$out/man/$bin.1.gz" "$dir/man/man1/"
  done
}

# Manual pages from the native binaries' --help (the text is the same on every arch).
make_man_pages() {
  mkdir -p "$out/man"
  local bin path name
  for spec in \
      "faultline-controller:services/controller/faultline-controller:schedules faultline's kernel A/B studies" \
      "faultline-agent:agent/faultline-agent:runs faultline's page-fault benchmarks on a board" \
      "faultline-workload:agent/workloads/faultline-workload:one page-fault benchmark run (started by faultline-agent)" \
      "faultline:services/cli/faultline:submit, watch and report faultline studies"; do
    bin=${spec%%:*}; path=${spec#*:}; path=${path%%:*}; name=${spec##*:}
    [ -x "$build/$path" ] || die "$build/$path is missing"
    help2man --no-info --no-discard-stderr --version-string="$version" --name="$name" \
      "$build/$path" | gzip -9n >"$out/man/$bin.1.gz"
  done
}

check_lintian() {  # DEB...
  # --pedantic: the stricter checks as well; every tag that is not overridden fails.
  lintian --info --pedantic --fail-on error,warning "$@"
}

native() {
  log "building the amd64 packages ($version)"
  "$root/scripts/build.sh" faultline-controller faultline-agent faultline-workload faultline >/dev/null
  cmake "$build" >/dev/null
  make_man_pages
  gen_docs "$build" controller faultline-controller faultline-controller
  gen_docs "$build" agent faultline-agent faultline-agent faultline-workload
  gen_docs "$build" cli faultline faultline
  (cd "$build" && cpack -G DEB -D CPACK_PACKAGE_VERSION="$version" -B "$out/cpack" >"$out/cpack-amd64.log" 2>&1) ||
    { cat "$out/cpack-amd64.log" >&2; die "cpack failed"; }
  local f
  for f in "$out"/cpack/*.deb; do mv "$f" "$out/"; done
}

# Depends of a cross-built binary: the packages of the libraries it links (the sysroot's
# LIBRARIES list: soname package version), at least the versions it was built against.
# Without SONAMEs: every library of the list (the agent's bundle is made from exactly the
# agent's); with them: those libraries' packages, each SONAME found in the list or fail.
cross_depends() {  # LIBRARIES [SONAME...]
  local libs=$1; shift
  if [ $# -gt 0 ]; then
    local so
    for so in "$@"; do
      awk -v so="$so" '$1 == so { f = 1 } END { exit !f }' "$libs" ||
        die "$so is not in $libs: the cross build's list lacks a library a binary needs"
    done
  fi
  awk -v want="$*" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
    !/^#/ && NF >= 3 && $2 !~ /^\(/ && (n == 0 || $1 in keep) && !seen[$2]++ {
      printf "%s%s (>= %s)", sep, $2, $3; sep=", " }' "$libs"
}

cross_arch() {  # arm64|riscv64
  local arch=$1 triple
  case $arch in arm64) triple=aarch64-linux-gnu ;; riscv64) triple=riscv64-linux-gnu ;; esac
  local tree=$cross/$triple/agent bundle_libs=$cross/$triple/bundle/opt/faultline/LIBRARIES
  local libs=$cross/$triple/LIBRARIES full=$cross/$triple/full
  [ -f "$tree/build.ninja" ] && [ -f "$bundle_libs" ] && [ -f "$libs" ] ||
    die "no cross build for $arch in $cross/$triple: run scripts/cross-build-agent.sh ${triple%%-*} first"
  [ -z "$with_controller" ] || { [ -f "$full/build.ninja" ] && [ -f "$libs.controller" ]; } ||
    die "no cross build of the controller for $arch in $full: run scripts/cross-build-agent.sh --with-controller ${triple%%-*} first"
  log "building the $arch agent and CLI${with_controller:+ and controller} packages ($version)"
  [ -f "$out/man/faultline-agent.1.gz" ] || make_man_pages
  cmake "$tree" >/dev/null
  ninja -C "$tree" faultline-agent faultline-workload faultline >/dev/null
  gen_docs "$tree" agent faultline-agent faultline-agent faultline-workload
  gen_docs "$tree" cli faultline faultline
  local depends cli_depends
  depends=$(cross_depends "$bundle_libs")
  # The CLI's and the controller's own libraries (NEEDED); apt brings what those need.
  needed() { readelf -dW "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
  cli_depends=$(cross_depends "$libs" $(needed "$tree/services/cli/faultline"))
  (cd "$tree" && cpack -G DEB -D CPACK_PACKAGE_VERSION="$version" -D "CPACK_COMPONENTS_ALL=agent;cli" \
    -D CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS="$depends" -D CPACK_DEBIAN_CLI_PACKAGE_DEPENDS="$cli_depends" \
    -B "$out/cpack-$arch" \
    >"$out/cpack-$arch.log" 2>&1) || { cat "$out/cpack-$arch.log" >&2; die "cpack ($arch) failed"; }
  if [ -n "$with_controller" ]; then
    cmake "$full" >/dev/null
    ninja -C "$full" faultline-controller >/dev/null
    gen_docs "$full" controller faultline-controller faultline-controller
    local controller_depends
    controller_depends="adduser, $(cross_depends "$libs.controller" $(needed "$full/services/controller/faultline-controller"))"
    (cd "$full" && cpack -G DEB -D CPACK_PACKAGE_VERSION="$version" -D CPACK_COMPONENTS_ALL=controller \
      -D CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS="$controller_depends" -B "$out/cpack-$arch-controller" \
      >"$out/cpack-$arch-controller.log" 2>&1) ||
      { cat "$out/cpack-$arch-controller.log" >&2; die "cpack ($arch controller) failed"; }
  fi
  local f
  for f in "$out/cpack-$arch"*/*.deb; do mv "$f" "$out/"; done
}

built=()
for arch in "${arches[@]}"; do
  case $arch in
    amd64) native ;;
    *) cross_arch "$arch" ;;
  esac
  built+=("$out"/*_"$version"_"$arch".deb)
done
log "lintian"
check_lintian "${built[@]}"
for f in "${built[@]}"; do
  printf '%s  %s bytes (installed %s KiB)\n' "$(basename "$f")" "$(stat -c %s "$f")" \
    "$(dpkg-deb -f "$f" Installed-Size)"
done
