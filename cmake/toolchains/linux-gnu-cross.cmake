# Cross toolchain for Debian's <triple>-g++ packages, statically linked, tests run under
# qemu-user. Use with -DFAULTLINE_CROSS_TRIPLE=aarch64-linux-gnu (or riscv64-linux-gnu):
#   cmake -S . -B build-cross/aarch64 -G Ninja -DFAULTLINE_PORTABLE_ONLY=ON \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/linux-gnu-cross.cmake \
#     -DFAULTLINE_CROSS_TRIPLE=aarch64-linux-gnu
# scripts/cross-build.sh does this (and builds GoogleTest for the target first).
set(FAULTLINE_CROSS_TRIPLE "" CACHE STRING "target triple, e.g. aarch64-linux-gnu")
if(NOT FAULTLINE_CROSS_TRIPLE)
  message(FATAL_ERROR "set FAULTLINE_CROSS_TRIPLE (aarch64-linux-gnu or riscv64-linux-gnu)")
endif()
# try_compile projects re-read this file: pass the triple on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FAULTLINE_CROSS_TRIPLE)

string(REGEX REPLACE "-.*" "" _faultline_cpu "${FAULTLINE_CROSS_TRIPLE}")
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${_faultline_cpu})
set(CMAKE_C_COMPILER ${FAULTLINE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FAULTLINE_CROSS_TRIPLE}-g++)

# Debian's multiarch sysroot for the target.
set(CMAKE_FIND_ROOT_PATH /usr/${FAULTLINE_CROSS_TRIPLE} /usr/lib/${FAULTLINE_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Packages: the target's GoogleTest comes in via GTest_DIR; header-only packages
# (nlohmann_json) are architecture-independent and may come from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# Static binaries run on any board (and under qemu-user without a target sysroot).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(_faultline_qemu qemu-${_faultline_cpu}-static)
if(_faultline_qemu)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${_faultline_qemu})
endif()
