#!/usr/bin/env bash
# fetch.sh [ARCH...]: lab.sh fetch (downloads and sha256-verifies the pinned packages of
# kernels.manifest into $FL_LAB_CACHE, default /var/cache/faultline-lab).
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lab.sh" fetch "$@"
