#!/usr/bin/env bash
# Builds the controller's OCI image from the Debian package, pulling nothing:
#   scripts/build-image.sh [CONTROLLER_DEB]
# (default: the newest faultline-controller_*_amd64.deb in ${FAULTLINE_PACKAGE_DIR:-build/packages},
# made by scripts/build-packages.sh). Steps:
#   1. a Debian bookworm root file system from the Debian archive (mmdebstrap, variant
#      essential: dpkg, apt and libc, no shell tools beyond them), with the package installed
#      by apt, which brings its libraries; documentation, manual pages, locales and apt's
#      lists left out;
#   2. an image from scratch with that tree (buildah), running faultline-controller as
#      uid/gid 65532 (the Deployment's runAsUser) with no writable path: it keeps nothing
#      locally;
#   3. tagged faultline/controller:<package version> and :<project version> (the tag
#      deploy/k8s/kustomization.yaml names), and saved as an OCI archive beside the packages.
# Prints the image id and the archive's manifest digest. Storage: podman/buildah's, or
# FAULTLINE_CONTAINERS_DIR for a private one (the image test's; see tests/packaging).
# FL_DEBIAN_MIRROR overrides http://deb.debian.org/debian.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FAULTLINE_BUILD_DIR:-$root/build}
out=${FAULTLINE_PACKAGE_DIR:-$build/packages}
mirror=${FL_DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { echo "build-image: $*" >&2; exit 1; }
log() { echo "== $*"; }
for tool in mmdebstrap buildah podman; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps.sh installs it)"
done
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap and buildah's storage)"

deb=${1:-$(ls -t "$out"/faultline-controller_*_amd64.deb 2>/dev/null | head -1)}
[ -f "$deb" ] || die "no controller package: run scripts/build-packages.sh first"
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
version=$(dpkg-deb -f "$deb" Version)
project_version=$(sed -n 's/^project(faultline VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
# An OCI tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; Debian's '+' and '~' become '-'.
tag=$(echo "$version" | tr '+~:' '---')
image=faultline/controller

work=$(mktemp -d "${TMPDIR:-/tmp}/faultline-image-XXXXXX")
ctr=""
cleanup() {
  [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

log "root file system (bookworm, $(basename "$deb"))"
start=$(date +%s)
# The package's Depends come from the archive (apt); the .deb itself is copied in and
# installed with dpkg (dpkg runs chrooted and cannot see a path outside the tree).
depends=$(dpkg-deb -f "$deb" Depends | sed 's/ *([^)]*)//g; s/ //g')
mmdebstrap --quiet --variant=essential --include="$depends" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='copy-in "'"$deb"'" /tmp' \
  --customize-hook='chroot "$1" dpkg -i /tmp/'"$(basename "$deb")"' && rm "$1"/tmp/*.deb' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  bookworm "$work/rootfs" "$mirror" || die "mmdebstrap failed"
[ -x "$work/rootfs/usr/bin/faultline-controller" ] || die "the package did not install"
log "root file system: $(du -sm "$work/rootfs" | cut -f1) MB in $(( $(date +%s) - start )) s"

log "image $image:$tag"
ctr=$(buildah from scratch)
mnt=$(buildah mount "$ctr")
cp -a "$work/rootfs/." "$mnt/"
buildah umount "$ctr" >/dev/null
buildah config --user 65532:65532 --workingdir / \
  --entrypoint '["/usr/bin/faultline-controller"]' \
  --cmd '["--grpc-listen=0.0.0.0:50051","--http-listen=0.0.0.0:8080"]' \
  --port 50051/tcp --port 8080/tcp --stop-signal SIGTERM \
  --label org.opencontainers.image.title=faultline-controller \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --label org.opencontainers.image.description="faultline controller (Debian bookworm, package $version)" \
  "$ctr"
# --timestamp 0: the same tree makes the same image id.
id=$(buildah commit --quiet --format oci --timestamp 0 --rm "$ctr" "localhost/$image:$tag")
ctr=""
buildah tag "localhost/$image:$tag" "localhost/$image:$project_version"
mkdir -p "$out"
archive=$out/faultline-controller_${tag}.oci.tar
rm -f "$archive"
buildah push --quiet --digestfile "$work/digest" "localhost/$image:$tag" \
  "oci-archive:$archive:$image:$tag" >/dev/null
echo "image $image:$tag (also :$project_version)"
echo "id $id"
echo "archive $archive ($(stat -c %s "$archive") bytes), manifest digest $(cat "$work/digest")"
echo "size $(podman image inspect --format '{{.Size}}' "localhost/$image:$tag") bytes unpacked"
