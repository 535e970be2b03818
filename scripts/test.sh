#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs one tier of the suite (real
# PostgreSQL, real cgroups and swap, the real binaries). Run as root on Debian bookworm.
#   scripts/test.sh                      tier gate: what every CI run (.ci/run) proves
#   scripts/test.sh --tier nightly       the slow tiers (cross, lab, packaging, fuzz, lint_full)
#   scripts/test.sh --tier weekly        boards and studies (hours on emulated boards)
#   scripts/test.sh --tier all           every test
#   scripts/test.sh CTEST_ARGS...        ctest's own selection (e.g. -L unit, -R e2e_lab)
# What a change touches of the slow tiers: scripts/test-affected.sh BASE. The tiers, their
# cadence and their figures: docs/testing.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tier=
if [ "${1:-}" = --tier ]; then
  tier=${2:?--tier needs gate, nightly, weekly or all}
  shift 2
elif [ $# -eq 0 ]; then
  tier=gate
fi
case "$tier" in
  gate) groups=(test) labels='^(unit|integration|e2e|lint)$' ;;
  nightly) groups=(test cross lab packaging fuzz) labels='^(cross|lab|packaging|fuzz|lint_full)$' ;;
  weekly) groups=(all) labels='^(boards|study)$' ;;
  all | '') groups=(all) labels= ;;
  *) echo "test.sh: unknown tier '$tier' (gate, nightly, weekly, all)" >&2; exit 2 ;;
esac
"$root/scripts/install-deps.sh" "${groups[@]}"
"$root/scripts/build.sh"
cd "${FAULTLINE_BUILD_DIR:-$root/build}"
# A tree configured without GoogleTest has no tests: that is a failed install, not a pass.
[ "$(ctest -N | sed -n 's/^Total Tests: //p')" -gt 0 ] ||
  { echo "test.sh: no tests in $(pwd) (GoogleTest missing? scripts/install-deps.sh test)" >&2; exit 1; }
select=()
[ -z "$labels" ] || select=(-L "$labels")
# Side by side on every core: tests that must be alone say so (RUN_SERIAL: the e2e tests,
# whose agents own the host's faultline cgroups) or share a RESOURCE_LOCK (memcg and zram).
# Every test sets its own TIMEOUT, at least twice its cold time (docs/testing.md).
ctest --output-on-failure -j "$(nproc)" "${select[@]}" "$@"
