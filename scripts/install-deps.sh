#!/usr/bin/env bash
# Installs what faultline needs on Debian bookworm (as root), by group. Idempotent:
# re-running it only installs what is missing.
#   scripts/install-deps.sh [GROUP...]      (default: main)
# Groups:
#   main       build and run the local stack (deploy/local/run-study.sh): compilers, gRPC,
#              libpqxx, PostgreSQL 15, Prometheus and Alertmanager
#   test       main + what the default suite (scripts/test.sh, tier "gate") uses: GoogleTest,
#              clang-format/-tidy, Chromium, radosgw, the deploy checks' kubectl and npm
#   cross      the aarch64/riscv64 cross-builds (compilers, qemu-user, mmdebstrap)
#   lab        the virtual board lab and kernels from source (qemu-system, linux-source-6.12)
#   packaging  Debian packages, systemd containers, podman/buildah (implies cross)
#   fuzz       clang-14 for the libFuzzer build
#   all        every group
set -euo pipefail
deploy_tests=$(cd "$(dirname "$0")/../tests/deploy" && pwd)

main=(
  build-essential cmake ninja-build ccache mold pkg-config git ca-certificates
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev libpqxx-dev libpq-dev prometheus-cpp-dev libboost-dev
  libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  postgresql-15 postgresql-client-15
  # a builder's sandbox for strangers' kernels (kbuild/sandbox.cc); mail read by GMime
  bubblewrap libgmime-3.0-dev
  util-linux procps iproute2 curl openssl libssl-dev libcrypt-dev
  prometheus prometheus-alertmanager jq
)
test=(
  libgtest-dev libgmock-dev libbenchmark-dev clang-format clang-tidy python3
  # the HTML report's test (tests/e2e/report_html_test.sh)
  chromium
  # a real S3-compatible object store for the kernel-image tests (tests/support/radosgw.sh)
  radosgw ceph-mon ceph-osd ceph-common
  # the stand-in kernel tree of the kbuild e2e tests (kbuild/, tests/e2e/kbuild_fixture.sh)
  flex bison bc libelf-dev kmod xz-utils zstd
  # deploy/ checks (tests/deploy/check_deploy.sh): Python YAML and jsonschema
  python3-yaml python3-jsonschema
  # the series robot's archives (robot/public_inbox_test.cc, tests/e2e/robot_test.sh):
  # public-inbox-init, -mda, -httpd; b4 reads a thread back
  public-inbox b4
)
cross=(g++-aarch64-linux-gnu g++-riscv64-linux-gnu qemu-user-static mmdebstrap file binutils)
lab=(
  qemu-system-x86 qemu-system-arm qemu-system-misc busybox-static cpio zstd xz-utils
  e2fsprogs binutils flex bison bc libelf-dev kmod linux-source-6.12
)
# runc, not crun: crun refuses a hybrid cgroup layout; arch-test: mmdebstrap's foreign
# root file systems for the packaging boards
packaging=(
  lintian help2man systemd-container buildah podman runc uidmap fuse-overlayfs slirp4netns
  arch-test mmdebstrap qemu-system-x86 qemu-system-arm qemu-system-misc cpio zstd
)
fuzz=(clang-14)

[ $# -gt 0 ] || set -- main
want=("${main[@]}")
deploy=0
for group in "$@"; do
  case "$group" in
    main) ;;
    test) want+=("${test[@]}"); deploy=1 ;;
    cross) want+=("${cross[@]}") ;;
    lab) want+=("${lab[@]}" "${cross[@]}") ;;
    packaging) want+=("${packaging[@]}" "${cross[@]}") ;;
    fuzz) want+=("${fuzz[@]}") ;;
    all) want+=("${test[@]}" "${cross[@]}" "${lab[@]}" "${packaging[@]}" "${fuzz[@]}"); deploy=1 ;;
    *) echo "install-deps: unknown group '$group' (main test cross lab packaging fuzz all)" >&2
       exit 2 ;;
  esac
done

apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
apt_install "${want[@]}"
# The Debian postgresql package starts a default cluster on 5432; faultline never uses it
# (tests and the local stack run throwaway clusters), so leave it alone.

if [ "$deploy" = 1 ]; then
  # kubectl for kustomize and the Kubernetes object models from npm. Debian's
  # kubernetes-client conflicts with other kubectl packages: only when no kubectl is there.
  extra=()
  command -v kubectl >/dev/null || extra+=(kubernetes-client)
  command -v node >/dev/null || extra+=(nodejs)
  command -v npm >/dev/null || extra+=(npm)
  [ ${#extra[@]} -eq 0 ] || apt_install "${extra[@]}"
  if [ ! -d "$deploy_tests/node_modules/kubernetes-models" ]; then
    # Without the npm registry the deploy check reports itself skipped (not passed); the
    # rest of faultline does not need it.
    (cd "$deploy_tests" && npm ci --no-audit --no-fund --silent) ||
      echo "install-deps: npm ci in tests/deploy failed: deploy_check will be skipped" >&2
  fi
fi
