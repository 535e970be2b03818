#!/usr/bin/env bash
# Configures and builds faultline with ninja and ccache into ${FAULTLINE_BUILD_DIR:-build}
# (FAULTLINE_WERROR=ON: warnings are errors, as CI builds; unset: as the tree was configured).
# Extra arguments are ninja targets (default: everything).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FAULTLINE_BUILD_DIR:-$root/build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout in ccache's keys (and the working directory left out): a
# fresh clone elsewhere (CI's) hits what another clone compiled. Debug info keeps the first
# clone's paths.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
# Configured every time (a few seconds; ninja rebuilds nothing that did not change), so a
# tree first built without the test tools (the local stack's install) gets its tests once
# they are installed.
# FAULTLINE_WERROR=ON (CI's .ci/run): warnings are errors; OFF (the default) for users. Unset
# on a tree already configured: the tree keeps its setting (flipping it changes every
# compile line, so ccache misses and the whole tree is built again).
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DFAULTLINE_WERROR=${FAULTLINE_WERROR:-OFF}" >/dev/null
elif [ -n "${FAULTLINE_WERROR:-}" ]; then
  cmake "$build" "-DFAULTLINE_WERROR=$FAULTLINE_WERROR" >/dev/null
else
  cmake "$build" >/dev/null
fi
ninja -C "$build" "$@"
