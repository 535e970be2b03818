#!/usr/bin/env bash
# The controller's OCI image, for real: built by scripts/build-image.sh from the package
# in ${FAULTLINE_PACKAGE_DIR:-build/packages} (the packaging_build test made it) without
# pulling anything, then run with podman the way the Deployment runs it (non-root, read-only
# root file system, nothing pulled) against a throwaway PostgreSQL:
#   - /readyz answers 200 (the schema migrated by the container), the time it took;
#   - the process is uid 65532, a write to / fails, gRPC answers the packaged CLI with a
#     token made by the image's own binary;
#   - deploy/k8s/kustomization.yaml names a tag the build made (not latest);
#   - podman stop ends it with SIGTERM (exit 0) in well under its timeout.
# Storage, config and cgroups are private to the test and removed at the end.
# Usage: image_test.sh REPO_ROOT
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
build=${FAULTLINE_BUILD_DIR:-$ROOT/build}
packages=${FAULTLINE_PACKAGE_DIR:-$build/packages}

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, podman's storage)"
for tool in mmdebstrap buildah podman runc; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh)"
done
ls "$packages"/faultline-controller_*_amd64.deb >/dev/null 2>&1 ||
  { echo "FAIL: no package in $packages (the packaging_build test makes it)" >&2; exit 1; }

state=$(mktemp -d /tmp/faultline-image-test-XXXXXX)
chmod 755 "$state"  # PostgreSQL (user postgres) keeps its cluster below it
cgroup_parent=/faultline-image-test-$$
# podman's settings for this machine: runc (crun refuses a hybrid cgroup layout), cgroupfs
# and file events (no systemd PID 1 needed), limits a root without CAP_SYS_RESOURCE can
# set. tmp_dir must be set before podman's first use of a storage root.
cat >"$state/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$state/tmp"
EOF
cat >"$state/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
export CONTAINERS_CONF=$state/containers.conf CONTAINERS_STORAGE_CONF=$state/storage.conf

PG_DIR=$state/pg
cleanup() {
  podman rm -f --ignore controller >/dev/null 2>&1 || true
  buildah rm --all >/dev/null 2>&1 || true
  podman system reset -f >/dev/null 2>&1 || true
  local d
  for d in /sys/fs/cgroup/*"$cgroup_parent"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  "$ROOT/scripts/pg-throwaway.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$state/controller.log" ] && { echo "--- controller.log" >&2; tail -n 30 "$state/controller.log" >&2; }
  exit 1
}
pass() { echo "ok: $*"; }

# 1. The image.
start=$(date +%s.%N)
FAULTLINE_PACKAGE_DIR=$state/out "$ROOT/scripts/build-image.sh" \
  "$(ls -t "$packages"/faultline-controller_*_amd64.deb | head -1)" >"$state/build.log" 2>&1 ||
  { cat "$state/build.log" >&2; fail "build-image.sh"; }
build_seconds=$(echo "$(date +%s.%N) - $start" | bc)
tag=$(sed -n 's|^image faultline/controller:\([^ ]*\) .*|\1|p' "$state/build.log")
[ -n "$tag" ] || { cat "$state/build.log" >&2; fail "no tag in build-image.sh's output"; }
image=localhost/faultline/controller:$tag
size=$(podman image inspect --format '{{.Size}}' "$image") || fail "the image is not in storage"
archive=$(ls "$state/out"/*.oci.tar)
user=$(podman image inspect --format '{{.Config.User}}' "$image")
[ "$user" = 65532:65532 ] || fail "the image runs as '$user', not 65532:65532"
podman image inspect --format '{{.RepoTags}}' "$image" | grep -q "faultline/controller:$tag" ||
  fail "tag $tag missing"
pass "image $image built in $(printf %.0f "$build_seconds") s without a pull: $((size / 1048576)) MiB unpacked, OCI archive $(( $(stat -c %s "$archive") / 1048576 )) MiB; $(grep '^archive' "$state/build.log" | sed 's/.*manifest digest/manifest digest/')"

# 2. The Kubernetes base names a tag the build made.
k8s_name=$(sed -n 's/^ *newName: *//p' "$ROOT/deploy/k8s/kustomization.yaml")
k8s_tag=$(sed -n 's/^ *newTag: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' "$ROOT/deploy/k8s/kustomization.yaml")
[ "$k8s_tag" != latest ] || fail "deploy/k8s/kustomization.yaml still names :latest"
podman image inspect --format '{{.RepoTags}}' "$image" | grep -q "$k8s_name:$k8s_tag" ||
  fail "the Kubernetes base names $k8s_name:$k8s_tag, the build tagged $(podman image inspect --format '{{.RepoTags}}' "$image")"
pass "deploy/k8s names $k8s_name:$k8s_tag, a tag of this image"

# 3. Run it as the Deployment does, against a throwaway PostgreSQL (host network).
url=$("$ROOT/scripts/pg-throwaway.sh" start "$PG_DIR")
grpc=$("$ROOT/scripts/free-port.sh")
http=$("$ROOT/scripts/free-port.sh")
while [ "$http" = "$grpc" ]; do http=$("$ROOT/scripts/free-port.sh"); done
t0=$(date +%s.%N)
podman run -d --pull=never --network host --read-only --user 65532:65532 \
  --cgroup-parent="$cgroup_parent" --name controller -e FAULTLINE_DATABASE_URL="$url" \
  "$image" --grpc-listen "127.0.0.1:$grpc" --http-listen "127.0.0.1:$http" >/dev/null ||
  fail "podman run"
ready=""
for _ in $(seq 1 600); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/readyz")" = 200 ]; then
    ready=$(echo "$(date +%s.%N) - $t0" | bc); break
  fi
  [ "$(podman inspect --format '{{.State.Running}}' controller)" = true ] || break
  sleep 0.1
done
podman logs controller >"$state/controller.log" 2>&1 || true
[ -n "$ready" ] || fail "/readyz never answered 200"
pass "the container answered /readyz 200 $(printf %.2f "$ready") s after podman run (schema migrated)"

pid=$(podman inspect --format '{{.State.Pid}}' controller)
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
[ "$uid" = 65532 ] || fail "the controller runs as uid $uid"
if podman exec controller /usr/bin/touch /probe 2>"$state/touch.err"; then
  fail "a write to / succeeded in the container"
fi
grep -q "Read-only file system" "$state/touch.err" || fail "touch /: $(cat "$state/touch.err")"
token=$(podman exec -e FAULTLINE_DATABASE_URL="$url" controller /usr/bin/faultline-controller \
  tokens create --name image-test --role user) || fail "tokens create in the container"
cli=$(ls "$build/services/cli/faultline")
FAULTLINE_CONTROLLER=127.0.0.1:$grpc FAULTLINE_TOKEN=$token "$cli" agents >"$state/agents.txt" 2>&1 ||
  fail "the CLI over gRPC: $(cat "$state/agents.txt")"
pass "uid $uid, / read-only (touch: Read-only file system), gRPC answers the CLI with a token the image's binary made"

# 4. Stop: SIGTERM, a clean exit.
t0=$(date +%s.%N)
podman stop -t 30 controller >/dev/null || fail "podman stop"
stopped=$(echo "$(date +%s.%N) - $t0" | bc)
code=$(podman inspect --format '{{.State.ExitCode}}' controller)
[ "$code" = 0 ] || fail "the controller exited with $code on SIGTERM"
awk -v t="$stopped" 'BEGIN { exit !(t < 25) }' || fail "podman stop took $stopped s (SIGKILL at 30 s?)"
pass "podman stop: exit 0 after SIGTERM in $(printf %.2f "$stopped") s"
echo "figures: image $((size / 1048576)) MiB unpacked, archive $(( $(stat -c %s "$archive") / 1048576 )) MiB, ready in $(printf %.2f "$ready") s, built in $(printf %.0f "$build_seconds") s"
