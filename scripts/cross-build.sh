#!/usr/bin/env bash
# Cross-builds the portable parts (faultline-workload, agent/sys, agent/runner and their
# unit tests) statically for aarch64 and riscv64 with Debian's cross toolchains, and runs
# the unit tests under qemu-user. GoogleTest is built for each target from
# /usr/src/googletest first. Needs: g++-aarch64-linux-gnu g++-riscv64-linux-gnu
# qemu-user-static (scripts/install-deps.sh installs them).
#   scripts/cross-build.sh [TRIPLE ...]     default: aarch64-linux-gnu riscv64-linux-gnu
# Build trees: ${FAULTLINE_CROSS_BUILD_DIR:-build-cross}/<triple>. ccache is used when
# present (CCACHE_DISABLE=1 measures a cold build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${FAULTLINE_CROSS_BUILD_DIR:-$root/build-cross}
triples=("$@")
[ ${#triples[@]} -gt 0 ] || triples=(aarch64-linux-gnu riscv64-linux-gnu)
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout in ccache's keys (and the working directory left out): a
# fresh clone elsewhere (CI's) hits what another clone compiled. Debug info keeps the first
# clone's paths.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
toolchain=$root/cmake/toolchains/linux-gnu-cross.cmake
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

for triple in "${triples[@]}"; do
  cpu=${triple%%-*}
  for tool in "$triple-g++" "qemu-$cpu-static"; do
    command -v "$tool" >/dev/null || { echo "cross-build: $tool not found (run scripts/install-deps.sh)" >&2; exit 2; }
  done
  echo "== $triple"
  gtest_build=$out/$triple/googletest-build
  gtest_prefix=$out/$triple/googletest
  if [ ! -f "$gtest_prefix/lib/cmake/GTest/GTestConfig.cmake" ]; then
    cmake -S /usr/src/googletest -B "$gtest_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DFAULTLINE_CROSS_TRIPLE="$triple" \
      -DCMAKE_INSTALL_PREFIX="$gtest_prefix" -DBUILD_GMOCK=OFF "${launcher[@]}" >/dev/null
    ninja -C "$gtest_build" install >/dev/null
  fi
  build=$out/$triple/faultline
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFAULTLINE_PORTABLE_ONLY=ON -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DFAULTLINE_CROSS_TRIPLE="$triple" -DGTest_DIR="$gtest_prefix/lib/cmake/GTest" >/dev/null
  ninja -C "$build"
  # A dynamically linked executable names its loader in a PT_INTERP header.
  if readelf -lW "$build/agent/workloads/faultline-workload" | grep -q INTERP; then
    echo "cross-build: faultline-workload is not statically linked" >&2; exit 1
  fi
  # Unit tests only: the integration tests need real cgroups and swap, which qemu-user
  # (it runs on the host kernel) would only report about the host.
  (cd "$build" && ctest -L unit --output-on-failure)
  # And one real (short) benchmark run of the binary under qemu-user.
  "qemu-$cpu-static" "$build/agent/workloads/faultline-workload" filemap-thrash --threads 1 \
    --file-size 1M --duration 1s --dir "${TMPDIR:-/tmp}" | grep -q '"throughput_rounds_per_second"' \
    || { echo "cross-build: faultline-workload did not run under qemu-$cpu-static" >&2; exit 1; }
done
echo "cross-build: ok (${triples[*]})"
