#!/usr/bin/env bash
# Installs everything faultline needs to build, test and run on Debian bookworm (as root).
# Idempotent: re-running it only installs what is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev libpqxx-dev libpq-dev prometheus-cpp-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev libspdlog-dev libfmt-dev
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  postgresql-15 postgresql-client-15
  util-linux procps iproute2 curl openssl libssl-dev libcrypt-dev clang-14
  prometheus prometheus-alertmanager jq
  g++-aarch64-linux-gnu g++-riscv64-linux-gnu qemu-user-static
  clang-format clang-tidy
  # the virtual board lab (deploy/lab) and the full-agent cross-builds
  qemu-system-x86 qemu-system-arm qemu-system-misc busybox-static cpio zstd xz-utils
  e2fsprogs binutils mmdebstrap file
  # kernels from source (kbuild, deploy/kernel/linux-tree.sh)
  flex bison bc libelf-dev kmod linux-source-6.12
  # a real S3-compatible object store for the kernel-image tests (tests/support/radosgw.sh)
  radosgw ceph-mon ceph-osd ceph-common
  # a real browser for the HTML report's test (tests/e2e/report_html_test.sh)
  chromium
  # Debian packages, a systemd PID 1 to install them under, the controller's OCI image
  # (scripts/build-packages.sh, scripts/build-image.sh, tests/packaging); runc, not crun:
  # crun refuses a hybrid cgroup layout
  lintian help2man systemd-container buildah podman runc uidmap fuse-overlayfs slirp4netns
  # arm64/riscv64 root file systems for the packaging boards (mmdebstrap needs it)
  arch-test
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Debian postgresql package starts a default cluster on 5432; faultline never uses it
# (tests and the local stack run throwaway clusters), so leave it alone.

# deploy/ checks (tests/deploy/check_deploy.sh): kubectl for kustomize, Python YAML and
# jsonschema, the Kubernetes object models from npm. Debian's kubernetes-client conflicts
# with other kubectl packages: install it only when no kubectl is there.
deploy_missing=()
for p in python3-yaml python3-jsonschema; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || deploy_missing+=("$p")
done
command -v kubectl >/dev/null || deploy_missing+=(kubernetes-client)
command -v node >/dev/null || deploy_missing+=(nodejs)
command -v npm >/dev/null || deploy_missing+=(npm)
if [ ${#deploy_missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${deploy_missing[@]}"
fi
deploy_tests=$(cd "$(dirname "$0")/../tests/deploy" && pwd)
if [ ! -d "$deploy_tests/node_modules/kubernetes-models" ]; then
  # Without the npm registry the deploy check reports itself skipped (not passed); the
  # rest of faultline does not need it.
  (cd "$deploy_tests" && npm ci --no-audit --no-fund --silent) ||
    echo "install-deps: npm ci in tests/deploy failed: deploy_check will be skipped" >&2
fi
