# Cross toolchain for Debian's <triple>-g++ (gcc 12, bookworm) against a Debian sysroot made
# of extracted target .debs (scripts/cross-build-agent.sh makes them: bookworm for arm64,
# trixie for riscv64). Dynamically linked, for the full agent (gRPC, protobuf, abseil,
# yaml-cpp, spdlog); use linux-gnu-cross.cmake for the static portable parts.
#   cmake -S . -B build-cross/aarch64-linux-gnu/agent -G Ninja -DFAULTLINE_AGENT_ONLY=ON \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/linux-gnu-sysroot.cmake \
#     -DFAULTLINE_CROSS_TRIPLE=aarch64-linux-gnu \
#     -DFAULTLINE_SYSROOT=/var/cache/faultline-lab/sysroot-aarch64/root
#
# Headers: gcc 12's own libstdc++ headers, then glibc/library headers (the toolchain's
# glibc headers come first; they are never newer than the sysroot's).
# Libraries: the sysroot's libc, libm, libstdc++.so.6 and libgcc_s.so.1 are linked, not the
# cross toolchain's. That matters for trixie (riscv64): its libraries were built by gcc 14
# against glibc 2.41 and need GLIBCXX_3.4.3x / GLIBC_2.38+ symbol versions that bookworm's
# gcc 12 runtime lacks. libstdc++ is backward compatible, so code compiled with gcc 12's
# headers runs on the newer libstdc++.so.6. The sysroot script puts libstdc++.so and
# libgcc_s.so symlinks into <sysroot>/usr/lib/faultline-link, searched first.
set(FAULTLINE_CROSS_TRIPLE "" CACHE STRING "target triple, e.g. aarch64-linux-gnu")
set(FAULTLINE_SYSROOT "" CACHE PATH "target sysroot (extracted Debian packages)")
if(NOT FAULTLINE_CROSS_TRIPLE OR NOT FAULTLINE_SYSROOT)
  message(FATAL_ERROR "set FAULTLINE_CROSS_TRIPLE and FAULTLINE_SYSROOT "
                      "(scripts/cross-build-agent.sh does)")
endif()
if(NOT EXISTS "${FAULTLINE_SYSROOT}/usr/lib/faultline-link")
  message(FATAL_ERROR "${FAULTLINE_SYSROOT} is not a sysroot made by scripts/cross-build-agent.sh")
endif()
# try_compile projects re-read this file: pass the settings on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FAULTLINE_CROSS_TRIPLE FAULTLINE_SYSROOT)

string(REGEX REPLACE "-.*" "" _faultline_cpu "${FAULTLINE_CROSS_TRIPLE}")
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${_faultline_cpu})
set(CMAKE_C_COMPILER ${FAULTLINE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FAULTLINE_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${FAULTLINE_CROSS_TRIPLE})

set(CMAKE_SYSROOT ${FAULTLINE_SYSROOT})
set(CMAKE_FIND_ROOT_PATH ${FAULTLINE_SYSROOT})
# Programs (protoc, grpc_cpp_plugin) are the host's: same versions as the sysroot's libraries
# (the script checks). Everything else comes only from the sysroot. gRPC's CMake config
# names <sysroot>/usr/bin/grpc_*_plugin: the script links those to the host's plugins.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${FAULTLINE_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${FAULTLINE_SYSROOT}/usr/lib/${FAULTLINE_CROSS_TRIPLE}/pkgconfig:${FAULTLINE_SYSROOT}/usr/share/pkgconfig")

set(_faultline_libdirs
    ${FAULTLINE_SYSROOT}/lib/${FAULTLINE_CROSS_TRIPLE} ${FAULTLINE_SYSROOT}/usr/lib/${FAULTLINE_CROSS_TRIPLE})
set(_faultline_link "-L${FAULTLINE_SYSROOT}/usr/lib/faultline-link")
foreach(_d IN LISTS _faultline_libdirs)
  string(APPEND _faultline_link " -L${_d} -Wl,-rpath-link,${_d}")
endforeach()
# DT_RPATH, not DT_RUNPATH: an executable's RPATH ($ORIGIN/../lib, set by the script) also
# finds the libraries' own dependencies (libgrpc++ -> libgpr -> libabsl_*).
string(APPEND _faultline_link " -Wl,--disable-new-dtags")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_faultline_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_faultline_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_faultline_link}")

# ctest runs the target's tests under qemu-user with the sysroot as the target's root.
find_program(_faultline_qemu qemu-${_faultline_cpu}-static)
if(_faultline_qemu)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${_faultline_qemu} -L ${FAULTLINE_SYSROOT})
endif()

# riscv64: bookworm's GNU ld pads .rela.dyn with R_RISCV_NONE at offset 0 and so marks PIE
# executables DT_TEXTREL; glibc then makes the text segment writable at start, which
# systemd's MemoryDenyWriteExecute=yes (the controller's unit) refuses. Each executable's
# link ends with scripts/elf-drop-none-textrel.py, which drops the flag when every
# relocation in a read-only segment is R_RISCV_NONE and fails the link otherwise.
if(_faultline_cpu STREQUAL "riscv64")
  get_filename_component(_faultline_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
  set(CMAKE_CXX_LINK_EXECUTABLE
      "<CMAKE_CXX_COMPILER> <FLAGS> <CMAKE_CXX_LINK_FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> <LINK_LIBRARIES> && python3 ${_faultline_root}/scripts/elf-drop-none-textrel.py <TARGET>")
endif()
