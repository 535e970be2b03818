#!/usr/bin/env bash
# Link launcher (CMake RULE_LAUNCH_LINK) for the agent: runs the link command it is given
# with every library named as a shared object (/dir/libX.so or /dir/libX.so.N, or -lX
# found in a -L directory) that has a static archive beside it (/dir/libX.a) linked from
# the archive instead, all archives in one group with the archives of the names given
# before "--" (what the shared objects pulled in by themselves: ssl, crypto). libc and
# libstdc++ stay shared.
#   link-static-deps.sh ssl crypto -- /usr/bin/c++ ... -o faultline-agent ...
# Why: an idle agent's resident memory was 16 of its 18 MiB in pages of shared libraries'
# text (libgrpc alone 5.2 MiB), pages a static link does not map at all when the agent
# never calls into them (docs/performance.md, "The agent, idle").
set -euo pipefail
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  names+=("$1")
  shift
done
shift  # --
args=()
archives=()
libdirs=()
for a in "$@"; do
  case $a in
    -L*) libdirs+=("${a#-L}") ;;
    /*/lib*.so | /*/lib*.so.[0-9]*) libdirs+=("$(dirname "$a")") ;;
  esac
done
for a in "$@"; do
  case $a in
    /*/lib*.so | /*/lib*.so.[0-9]*)
      archive="${a%%.so*}.a"
      if [ -f "$archive" ]; then
        archives+=("$archive")
        continue
      fi
      ;;
    -l*)
      found=""
      for dir in "${libdirs[@]}"; do
        if [ -f "$dir/lib${a#-l}.a" ]; then found="$dir/lib${a#-l}.a"; break; fi
      done
      case ${a#-l} in c | m | dl | rt | pthread | stdc++ | gcc_s) found="" ;; esac
      if [ -n "$found" ]; then
        archives+=("$found")
        continue
      fi
      ;;
  esac
  args+=("$a")
done
extra=()
for name in "${names[@]}"; do
  found="-l$name"  # no archive: the shared library, as the shared objects had it
  for dir in "${libdirs[@]}"; do
    if [ -f "$dir/lib$name.a" ]; then found="$dir/lib$name.a"; break; fi
  done
  extra+=("$found")
done
exec "${args[@]}" -Wl,--start-group "${archives[@]}" "${extra[@]}" -Wl,--end-group -ldl -pthread
