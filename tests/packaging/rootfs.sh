# A Debian root file system for the packaging tests, made by mmdebstrap once per recipe and
# kept as a tarball (sourced; the caller defines fail and pass):
#   rootfs_cached TARBALL LOG SUITE MIRROR [mmdebstrap options...]
#       makes TARBALL unless it exists (written under a temporary name, renamed whole);
#       the caller names TARBALL PREFIX-KEY.tar, KEY a hash of everything that goes into
#       it; a new one replaces the PREFIX-*.tar of earlier recipes
#   rootfs_extract TARBALL DIR   unpacks it as root (owners, modes, xattrs kept)
# and the TLS files a packaged controller is configured with:
#   test_tls DIR   ca.pem, server.pem and server.key (localhost, 127.0.0.1) for a day
# Where the tarballs are kept, and the Debian mirror they come from:
ROOTFS_CACHE=${FL_PACKAGING_CACHE:-/var/cache/faultline-packaging}
DEBIAN_MIRROR=${FL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rootfs_cached() {
  local tarball=$1 log=$2 suite=$3 mirror=$4 t0=$SECONDS
  shift 4
  [ -f "$tarball" ] && return 0
  mkdir -p "$(dirname "$tarball")"
  mmdebstrap "$@" "$suite" "$tarball.part.tar" "$mirror" >"$log" 2>&1 ||
    { tail -20 "$log" >&2; rm -f "$tarball.part.tar"; fail "mmdebstrap ($log)"; }
  mv "$tarball.part.tar" "$tarball"
  local old
  for old in "${tarball%-*}"-*.tar; do
    case $old in "$tarball"|*.part.tar) ;; *) rm -f "$old" ;; esac
  done
  pass "root file system $(basename "$tarball") made in $((SECONDS - t0)) s ($(($(stat -c %s "$tarball") / 1048576)) MiB, cached)"
}

rootfs_extract() {
  mkdir -p "$2"
  tar --numeric-owner --xattrs --xattrs-include='*' -C "$2" -xf "$1"
}

test_tls() {
  mkdir -p "$1"
  (cd "$1"
   openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=faultline-pkg-ca" \
     -keyout ca.key -out ca.pem >/dev/null 2>&1
   openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr >/dev/null 2>&1
   printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
   openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
     -extfile server.ext -out server.pem >/dev/null 2>&1) || fail "TLS files"
}
