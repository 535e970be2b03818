#!/usr/bin/env bash
# Cross-builds the FULL agent (faultline-agent: gRPC, protobuf, abseil, yaml-cpp, spdlog,
# CLI11), faultline-workload and the CLI, dynamically linked against a Debian sysroot, for
# boards and qemu-system guests, with the portable parts' and the agent's unit tests (and,
# for aarch64, faultline-workload-static linked from the same objects); runs the tests, the
# agent and the workloads under qemu-user and writes the agent's bundle, ready to copy into
# a guest's root:
#   scripts/cross-build-agent.sh [--with-controller] [aarch64|riscv64 ...]
#                                default: aarch64 riscv64 (triples such as
#                                aarch64-linux-gnu work too)
# --with-controller also builds the whole tree (the controller on libpqxx, prometheus-cpp,
# Boost.Beast; every unit test) in a second build directory, runs its unit tests under
# qemu-user and its store tests there against a throwaway PostgreSQL on the host. The whole
# trees cost up to ~15 min per arch on 2 cores when ccache misses: every CI run builds the
# agent's tree, the controller's on request (ctest -L boards, which packages and boots them).
#
# Sysroot: ${FL_LAB_CACHE:-/var/cache/faultline-lab}/sysroot-<cpu>/ holds
#   packages.lock  the pinned package set: name version arch sha256 file, one a line
#   debs/          the downloaded .debs        root/  them extracted (the sysroot)
# made from the Debian archive with mmdebstrap --variant=extract (no foreign -dev packages
# on the host): bookworm for arm64, trixie for riscv64 (bookworm has no riscv64). The first
# run pins whatever versions the archive has then; later runs reuse root/, re-extract
# from debs/, or download exactly the pinned versions again, and fail with the list of
# packages that are gone from the archive. FL_SYSROOT_REPIN=1 re-pins to the archive's
# current versions. FL_DEBIAN_MIRROR overrides http://deb.debian.org/debian.
#
# Toolchain: Debian bookworm's <triple>-g++ (gcc 12) with
# cmake/toolchains/linux-gnu-sysroot.cmake: --sysroot, and the sysroot's libc, libstdc++.so.6
# and libgcc_s are linked (trixie's libraries need their newer symbol versions). The host's
# protoc and grpc_cpp_plugin generate the code; the script checks they match the sysroot.
#
# Output in ${FAULTLINE_CROSS_BUILD_DIR:-build-cross}/<triple>/:
#   agent/                    the agent's build tree (-DFAULTLINE_AGENT_ONLY=ON)
#   full/                     the whole tree (--with-controller)
#   bundle/opt/faultline/bin  faultline-agent, faultline-workload (stripped, the workload
#                             keeping its symbol table; DT_RPATH $ORIGIN/../lib)
#   bundle/opt/faultline/lib  every shared library they need, named by SONAME
#   bundle/lib/ld-linux-*.so.1  the target's dynamic loader at its PT_INTERP path (it goes
#                             with bundle/opt/faultline/lib/libc.so.6: same glibc)
#   bundle/opt/faultline/LIBRARIES  soname, Debian package and version of each library
#   LIBRARIES                 the same for every packaged binary (agent, workload, CLI):
#                             scripts/build-packages.sh's Depends
#   LIBRARIES.controller      the same for the controller (--with-controller)
# Copy the bundle's tree into the guest's root (cp -a bundle/. "$initramfs_root"/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${FAULTLINE_CROSS_BUILD_DIR:-$root/build-cross}
cache=${FL_LAB_CACHE:-/var/cache/faultline-lab}
mirror=${FL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
jobs=${FAULTLINE_JOBS:-2}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout in ccache's keys (and the working directory left out): a
# fresh clone elsewhere (CI's) hits what another clone compiled. Debug info keeps the first
# clone's paths.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
toolchain=$root/cmake/toolchains/linux-gnu-sysroot.cmake

die() { echo "cross-build-agent: $*" >&2; exit 1; }
log() { echo "== $*"; }

cpus=() with_controller=""
for a in "$@"; do
  case $a in
    --with-controller) with_controller=1 ;;
    aarch64|aarch64-linux-gnu|arm64) cpus+=(aarch64) ;;
    riscv64|riscv64-linux-gnu) cpus+=(riscv64) ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown target '$a' (aarch64 or riscv64)" ;;
  esac
done
[ ${#cpus[@]} -gt 0 ] || cpus=(aarch64 riscv64)

for tool in mmdebstrap dpkg-deb protoc grpc_cpp_plugin cmake ninja readelf sha256sum xz curl; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install mmdebstrap protobuf-compiler protobuf-compiler-grpc ...)"
done

# The target's packages: the -dev packages the agent's and the controller's CMake (and
# gRPC's config) need. Their dependencies (runtime libraries, libc6, ...) are resolved by
# apt. trixie's libpqxx is 7.x (bookworm's 6.4): the store compiles against both.
packages_for() { # suite
  local stdcxx=libstdc++-12-dev
  [ "$1" = bookworm ] || stdcxx=libstdc++-14-dev
  echo libc6-dev $stdcxx libgrpc++-dev libprotobuf-dev libabsl-dev libyaml-cpp-dev \
    libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev \
    zlib1g-dev libc-ares-dev libre2-dev \
    libpqxx-dev libpq-dev prometheus-cpp-dev libboost-dev libcrypt-dev libgmime-3.0-dev
}

# Upstream version of a Debian version: 1:3.21.12-3+b1 -> 3.21.12
upstream() { local v=${1#*:}; echo "${v%-*}"; }

# Names the pinned packages (lock lines) that the archive no longer has.
report_gone() { # lock suite debarch
  local lock=$1 suite=$2 debarch=$3 idx gone=()
  idx=$(mktemp)
  for a in "$debarch" all; do
    curl -fsSL "$mirror/dists/$suite/main/binary-$a/Packages.xz" | xz -dc >>"$idx" || true
  done
  local name version
  while read -r name version _; do
    awk -v p="$name" -v v="$version" '
      /^Package: /{pk=$2} /^Version: /{ if (pk==p && $2==v) f=1 } END{exit !f}' "$idx" ||
      gone+=("$name=$version")
  done < <(grep -v '^#' "$lock")
  rm -f "$idx"
  if [ ${#gone[@]} -gt 0 ]; then
    echo "cross-build-agent: pinned packages gone from $mirror $suite/$debarch:" >&2
    printf '  %s\n' "${gone[@]}" >&2
  fi
  echo "cross-build-agent: rerun with FL_SYSROOT_REPIN=1 to pin the archive's current versions" >&2
}

# Extracts the locked .debs into a fresh root, then makes it usable as a sysroot.
extract_sysroot() { # dir triple
  local dir=$1 triple=$2 new=$1/root.new f
  rm -rf "$new" "$dir/contents"; mkdir -p "$new" "$dir/contents"
  while read -r name version _ _ f; do
    dpkg-deb -X "$dir/debs/$f" "$new" | sed 's|^\./|/|' >"$dir/contents/$name"
  done < <(grep -v '^#' "$dir/packages.lock")
  # trixie's packages install below /usr only (merged /usr): give it the symlinks a merged
  # system has, so /lib/ld-linux-*.so.1 (PT_INTERP) and the libc.so scripts resolve.
  for d in bin sbin lib; do
    [ -e "$new/$d" ] || [ ! -d "$new/usr/$d" ] || ln -s "usr/$d" "$new/$d"
  done
  # Absolute links (bookworm's libz.so -> /lib/<triple>/libz.so.1.2.13) would resolve on
  # the host, not here: made relative, so the linker finds the sysroot's shared libz (not
  # libz.a, which a binary would then embed).
  local l t
  while IFS= read -r -d '' l; do
    t=$(readlink "$l")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$new$t")" "$l"
  done < <(find "$new" -type l -lname '/*' -print0)
  # gRPC's CMake config names its plugins in <prefix>/bin: point them at the host's.
  local p d
  for p in $(grep -ho '{_IMPORT_PREFIX}/bin/[A-Za-z0-9_]*' "$new"/usr/lib/"$triple"/cmake/grpc/gRPCTargets-*.cmake | sort -u); do
    p=${p##*/}
    mkdir -p "$new/usr/bin"; rm -f "$new/usr/bin/$p"
    if [ -x "/usr/bin/$p" ]; then ln -s "/usr/bin/$p" "$new/usr/bin/$p"; else ln -s /bin/false "$new/usr/bin/$p"; fi
  done
  # The sysroot's libstdc++ and libgcc_s are the ones linked (toolchain file).
  mkdir -p "$new/usr/lib/faultline-link"
  for p in libstdc++.so.6 libgcc_s.so.1; do
    f=
    for d in usr/lib lib; do [ -e "$new/$d/$triple/$p" ] && { f=$d/$triple/$p; break; }; done
    [ -n "$f" ] || die "$p missing from the sysroot"
    ln -s "../../../$f" "$new/usr/lib/faultline-link/${p%.*}"
  done
  rm -rf "$dir/root"; mv "$new" "$dir/root"
}

make_sysroot() { # cpu debarch suite triple
  local cpu=$1 debarch=$2 suite=$3 triple=$4
  local dir=$cache/sysroot-$cpu lock=$cache/sysroot-$cpu/packages.lock
  local want key stamp
  want=$(packages_for "$suite")
  key="suite=$suite arch=$debarch mirror=$mirror packages=$want"
  mkdir -p "$dir/debs"
  if [ "${FL_SYSROOT_REPIN:-0}" = 1 ] || [ ! -f "$lock" ] || [ "$(sed -n 's/^# key: //p' "$lock")" != "$key" ]; then
    log "$cpu: pinning $suite/$debarch packages from $mirror"
    local tmp=$dir/mmdebstrap.tmp
    rm -rf "$tmp" && mkdir -p "$tmp/debs"
    # shellcheck disable=SC2086
    mmdebstrap --variant=extract --architectures="$debarch" --skip=check/empty \
      --include="$(echo $want | tr ' ' ,)" --extract-hook="sync-out /var/cache/apt/archives $tmp/debs" \
      "$suite" "$tmp/root" "$mirror" >"$dir/mmdebstrap.log" 2>&1 ||
      die "mmdebstrap failed for $suite/$debarch (a package gone or renamed?), see $dir/mmdebstrap.log: $(grep -E '^E:' "$dir/mmdebstrap.log" | head -3)"
    { echo "# key: $key"
      echo "# pinned $(date -u +%FT%TZ) from $mirror $suite/$debarch: name version arch sha256 file"
      for f in "$tmp"/debs/*.deb; do
        echo "$(dpkg-deb -f "$f" Package Version Architecture | awk '{printf "%s ", $2}')$(sha256sum <"$f" | cut -d' ' -f1) ${f##*/}"
      done | sort; } >"$lock.new"
    mv -f "$tmp"/debs/*.deb "$dir/debs/"
    rm -rf "$tmp"; mv -f "$lock.new" "$lock"
    rm -f "$dir/root/.faultline-sysroot"
  fi
  # The lock and how extract_sysroot makes the root (a change there re-extracts).
  stamp=$( (cat "$lock"; echo "extract: merged-usr links, relative links, host plugins") | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$dir/root/.faultline-sysroot" 2>/dev/null)" = "$stamp" ]; then
    log "$cpu: sysroot $dir/root (cached)"; return
  fi
  # Re-download whatever pinned .deb the cache lacks (or has corrupted): exact versions.
  local missing=() name version arch sum f
  while read -r name version arch sum f; do
    [ -f "$dir/debs/$f" ] && [ "$(sha256sum <"$dir/debs/$f" | cut -d' ' -f1)" = "$sum" ] ||
      missing+=("$name:$arch=$version")
  done < <(grep -v '^#' "$lock")
  if [ ${#missing[@]} -gt 0 ]; then
    log "$cpu: downloading ${#missing[@]} pinned packages"
    local tmp=$dir/mmdebstrap.tmp
    rm -rf "$tmp" && mkdir -p "$tmp/debs"
    if ! mmdebstrap --variant=extract --architectures="$debarch" --skip=check/empty \
        --include="$(IFS=,; echo "${missing[*]}")" --extract-hook="sync-out /var/cache/apt/archives $tmp/debs" \
        "$suite" "$tmp/root" "$mirror" >"$dir/mmdebstrap.log" 2>&1; then
      report_gone "$lock" "$suite" "$debarch"
      die "could not download the pinned packages (see $dir/mmdebstrap.log)"
    fi
    mv -f "$tmp"/debs/*.deb "$dir/debs/"; rm -rf "$tmp"
    while read -r name version arch sum f; do
      [ "$(sha256sum <"$dir/debs/$f" | cut -d' ' -f1)" = "$sum" ] || die "$f: checksum differs from packages.lock"
    done < <(grep -v '^#' "$lock")
  fi
  log "$cpu: extracting $(grep -vc '^#' "$lock") packages into $dir/root"
  extract_sysroot "$dir" "$triple"
  echo "$stamp" >"$dir/root/.faultline-sysroot"
}

# protoc/grpc_cpp_plugin run on the host: their versions must be the sysroot's.
check_generators() { # lock
  local lock=$1 pb grpc host_grpc
  pb=$(awk '$1=="libprotobuf-dev"{print $2}' "$lock")
  grpc=$(awk '$1=="libgrpc++-dev"{print $2}' "$lock")
  [ "$(protoc --version | awk '{print $2}')" = "$(upstream "$pb")" ] ||
    die "host $(protoc --version) but the sysroot has libprotobuf-dev $pb"
  host_grpc=$(dpkg-query -W -f '${Version}' protobuf-compiler-grpc 2>/dev/null || true)
  [ "$(upstream "$host_grpc")" = "$(upstream "$grpc")" ] ||
    die "host grpc_cpp_plugin (protobuf-compiler-grpc ${host_grpc:-?}) but the sysroot has libgrpc++-dev $grpc"
}

# Resolves the DT_NEEDED closure of the given ELF files in the sysroot: prints soname<TAB>path.
needed_libs() { # sysroot triple files...
  local sysroot=$1 triple=$2; shift 2
  local -A seen=()
  local queue=("$@") f so d p
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    for so in $(readelf -dW "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -z "${seen[$so]:-}" ] || continue
      p=
      for d in usr/lib/"$triple" lib/"$triple" usr/lib lib; do
        [ -e "$sysroot/$d/$so" ] && { p=$sysroot/$d/$so; break; }
      done
      [ -n "$p" ] || die "$so (needed by ${f##*/}) is not in the sysroot"
      seen[$so]=$p; queue+=("$p"); printf '%s\t%s\n' "$so" "$p"
    done
  done
}

# The libraries in the DT_NEEDED closure of FILES, one a line: soname, Debian package and
# version (from the sysroot's packages.lock), and the library's path in the sysroot.
library_lines() { # sysroot triple dir files...
  local sysroot=$1 triple=$2 dir=$3; shift 3
  local so path real rel pkg
  while IFS=$'\t' read -r so path; do
    real=$(realpath "$path"); rel=/${real#"$(realpath "$sysroot")"/}
    pkg=$(grep -lxF -e "$rel" -e "/usr$rel" -e "${rel#/usr}" "$dir"/contents/* 2>/dev/null | head -1)
    pkg=${pkg##*/}
    echo "$so ${pkg:-?} $(awk -v p="$pkg" '$1==p{print $2}' "$dir/packages.lock") $path"
  done < <(needed_libs "$sysroot" "$triple" "$@")
}

# The first line of every LIBRARIES list: what its columns are and where they come from.
libraries_header() { # sysroot dir
  echo "# soname package version (sysroot $1, $(sed -n 's/^# pinned .* from //p' "$2/packages.lock"))"
}

make_bundle() { # build triple sysroot dir
  local build=$1 triple=$2 sysroot=$3 dir=$4 bundle=$out/$2/bundle
  local interp so pkg version path
  rm -rf "$bundle"; mkdir -p "$bundle/opt/faultline/bin" "$bundle/opt/faultline/lib"
  "$triple-strip" -o "$bundle/opt/faultline/bin/faultline-agent" "$build/agent/faultline-agent"
  # The workload keeps its symbol table (not its debug info): a profile names its own frames
  # (faultline-workload:ReadLoop, agent/sys/user_symbols.h).
  "$triple-strip" --strip-debug -o "$bundle/opt/faultline/bin/faultline-workload" \
    "$build/agent/workloads/faultline-workload"
  interp=$(readelf -lW "$build/agent/faultline-agent" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  [ -n "$interp" ] || die "faultline-agent has no PT_INTERP"
  mkdir -p "$bundle$(dirname "$interp")"
  cp -L "$sysroot$interp" "$bundle$interp"
  { libraries_header "$sysroot" "$dir"
    while read -r so pkg version path; do
      cp -L "$path" "$bundle/opt/faultline/lib/$so"
      echo "$so $pkg $version"
    done < <(library_lines "$sysroot" "$triple" "$dir" "$bundle"/opt/faultline/bin/*); } >"$bundle/opt/faultline/LIBRARIES"
  # The packages' list (scripts/build-packages.sh makes their Depends from it): every
  # library the packaged binaries need, the CLI's too.
  { libraries_header "$sysroot" "$dir"
    library_lines "$sysroot" "$triple" "$dir" "$build/agent/faultline-agent" \
      "$build/agent/workloads/faultline-workload" "$build/services/cli/faultline" | cut -d' ' -f1-3
  } >"$out/$triple/LIBRARIES"
  # The loader is also libc's: keep its name in the list.
  echo "${interp##*/} (dynamic loader at $interp)" >>"$bundle/opt/faultline/LIBRARIES"
  # Self-contained: qemu-user with the bundle as the target's root (a library missing from
  # it would fall back to the host's, which the target's loader cannot use).
  "qemu-${triple%%-*}-static" -L "$bundle" "$bundle/opt/faultline/bin/faultline-agent" --help >/dev/null ||
    die "faultline-agent does not run from the bundle"
  log "$triple: bundle $bundle ($(du -sh "$bundle" | cut -f1), $(grep -vc '^#' "$bundle/opt/faultline/LIBRARIES") files in LIBRARIES)"
}

build_tree() {  # BUILD_DIR CMAKE_OPTION...: configure (this arch's toolchain) and build all
  local build=$1; shift
  mkdir -p "$build"
  log "$triple: configure $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DFAULTLINE_CROSS_TRIPLE="$triple" -DFAULTLINE_SYSROOT="$sysroot" \
    -DGTest_DIR="$gtest_prefix/lib/cmake/GTest" -DCMAKE_BUILD_RPATH='$ORIGIN/../lib' >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log" >&2; die "configure failed (full log: $build/configure.log)"; }
  log "$triple: build $build"
  ninja -C "$build" -j "$jobs"
}

# --with-controller: the whole tree beside the agent's; under qemu-user the unit tests the
# agent's tree did not run, and the store's tests.
full_tree() {
  local build=$out/$triple/full ran
  build_tree "$build"
  ran=$(cd "$out/$triple/agent" && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: //p' | paste -sd'|')
  log "$triple: the whole tree's other unit tests under ${qemu[*]}"
  (cd "$build" && GTEST_FILTER=-RunBootCommand.PassesTheSwitchEnvironmentAndReportsTheExitStatus \
    ctest -L unit -E "^(bisect_test|$ran)\$" --output-on-failure)
  # The controller's store on this arch's libpqxx (bookworm 6.4, trixie 7.x): its tests
  # under qemu-user against a throwaway PostgreSQL that the tests start on the host.
  "${qemu[@]}" "$build/services/controller/faultline-controller" --help >"$build/controller-help.txt" ||
    { cat "$build/controller-help.txt" >&2; die "faultline-controller --help failed under qemu"; }
  (cd "$build" && ctest -R '^store_(integration|contract)_test$' --output-on-failure) \
    >"$build/store-tests.log" 2>&1 || { tail -40 "$build/store-tests.log" >&2; die "the store tests failed on $triple"; }
  # Skipped (no PostgreSQL on the host) is not passed: this is the store's only check here.
  ! grep -q 'Skipped\|Not Run' "$build/store-tests.log" ||
    { grep -i skip "$build/store-tests.log" >&2; die "the store tests did not run on $triple (PostgreSQL: scripts/install-deps.sh)"; }
  grep 'tests passed' "$build/store-tests.log"

  { libraries_header "$sysroot" "$dir"
    library_lines "$sysroot" "$triple" "$dir" "$build/services/controller/faultline-controller" | cut -d' ' -f1-3
  } >"$out/$triple/LIBRARIES.controller"
}

for cpu in "${cpus[@]}"; do
  case $cpu in
    aarch64) triple=aarch64-linux-gnu debarch=arm64 suite=bookworm static=ON ;;
    # bookworm's riscv64 ld segfaults linking trixie's libc.a and libstdc++.a statically:
    # the static riscv64 workload comes from scripts/cross-build.sh (ctest
    # cross_build_static_riscv64), against the cross toolchain's own libc.
    riscv64) triple=riscv64-linux-gnu debarch=riscv64 suite=trixie static=OFF ;;
  esac
  for tool in "$triple-g++" "$triple-strip" "qemu-$cpu-static"; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/install-deps.sh)"
  done
  start=$SECONDS
  make_sysroot "$cpu" "$debarch" "$suite" "$triple"
  dir=$cache/sysroot-$cpu sysroot=$cache/sysroot-$cpu/root
  check_generators "$dir/packages.lock"

  # GoogleTest for the tests, from the host's /usr/src/googletest (as cross-build.sh does):
  # trixie's libgtest.a (gcc 14 objects) makes bookworm's riscv64 ld 2.40 segfault.
  gtest_prefix=$out/$triple/agent-googletest
  if [ ! -f "$gtest_prefix/lib/cmake/GTest/GTestConfig.cmake" ]; then
    log "$triple: GoogleTest from /usr/src/googletest"
    cmake -S /usr/src/googletest -B "$out/$triple/agent-googletest-build" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
      -DFAULTLINE_CROSS_TRIPLE="$triple" -DFAULTLINE_SYSROOT="$sysroot" \
      -DCMAKE_INSTALL_PREFIX="$gtest_prefix" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_GMOCK=OFF \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache >/dev/null
    ninja -C "$out/$triple/agent-googletest-build" -j "$jobs" install >/dev/null
  fi
  build=$out/$triple/agent
  # Everything the agent-only tree has: the agent, the workload(s), the CLI, their unit
  # tests. For aarch64 the portable parts are compiled only here (the static workload links
  # them too).
  build_tree "$build" -DFAULTLINE_AGENT_ONLY=ON -DFAULTLINE_STATIC_WORKLOAD=$static

  qemu=("qemu-$cpu-static" -L "$sysroot")
  log "$triple: smoke tests under ${qemu[*]}"
  "${qemu[@]}" "$build/agent/faultline-agent" --help >"$build/agent-help.txt" ||
    { cat "$build/agent-help.txt" >&2; die "faultline-agent --help failed under qemu"; }
  head -3 "$build/agent-help.txt"
  "${qemu[@]}" "$build/agent/workloads/faultline-workload" filemap-thrash --threads 1 \
    --file-size 1M --duration 1s --dir "${TMPDIR:-/tmp}" >"$build/workload-smoke.json" &&
    grep -q '"throughput_rounds_per_second"' "$build/workload-smoke.json" ||
    die "faultline-workload did not run under qemu-$cpu-static (output: $build/workload-smoke.json)"
  echo "faultline-workload filemap-thrash: ok"
  if [ "$static" = ON ]; then
    # A dynamically linked executable names its loader in a PT_INTERP header.
    ! readelf -lW "$build/agent/workloads/faultline-workload-static" | grep -q INTERP ||
      die "faultline-workload-static is not statically linked"
    "qemu-$cpu-static" "$build/agent/workloads/faultline-workload-static" filemap-thrash --threads 1 \
      --file-size 1M --duration 1s --dir "${TMPDIR:-/tmp}" | grep -q '"throughput_rounds_per_second"' ||
      die "faultline-workload-static did not run under qemu-$cpu-static (no sysroot)"
    echo "faultline-workload-static filemap-thrash (no sysroot): ok"
  fi
  # Unit tests only: the integration tests need real cgroups and swap, which qemu-user (it
  # runs on the host kernel) would only report about the host.
  # qemu-user runs posix_spawn's CLONE_VFORK child as a plain fork, so a failed exec comes
  # back as exit status 127 instead of an error: that one check holds only on a real kernel.
  # bisect_test (simulated bisections, plain arithmetic) takes ~4 min under qemu-user: it
  # runs on the host only.
  (cd "$build" && GTEST_FILTER=-RunBootCommand.PassesTheSwitchEnvironmentAndReportsTheExitStatus \
    ctest -L unit -E '^bisect_test$' --output-on-failure)
  make_bundle "$build" "$triple" "$sysroot" "$dir"
  [ -z "$with_controller" ] || full_tree
  log "$triple: done in $((SECONDS - start)) s"
done
echo "cross-build-agent: ok (${cpus[*]})"
