#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs unit, integration and end-to-end
# tests (real PostgreSQL, real cgroups, the real binaries). Run as root on Debian bookworm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "${FAULTLINE_BUILD_DIR:-$root/build}"
# Slow studies (label `study`: hours on emulated boards) and the packaging boards of
# foreign arches (label `boards`: TCG boots of aarch64 and riscv64) run on request:
# ctest -L study, ctest -L boards.
if [ $# -eq 0 ]; then set -- -LE '^(study|boards)$'; fi
ctest --output-on-failure --timeout 900 "$@"
