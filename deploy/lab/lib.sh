# shellcheck shell=bash
# Shell library of the virtual board lab (sourced by lab.sh, mkinitramfs.sh, boot.sh).
# Env: FL_LAB_CACHE  downloaded .debs and unpacked trees (default /var/cache/faultline-lab)
#      FL_LAB_STATE  scratch: indexes, initramfs trees, disks, logs (default /var/tmp/faultline-lab)
#      FL_LAB_MANIFEST  the pinned packages (default deploy/lab/kernels.manifest)
#      FL_LAB_MIRROR / FL_LAB_SECURITY_MIRROR  archive base URLs
#        (default http://deb.debian.org/debian, http://security.debian.org/debian-security)

FL_LAB_DIR=${FL_LAB_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
FL_ROOT=${FL_ROOT:-$(cd "$FL_LAB_DIR/../.." && pwd)}
FL_LAB_CACHE=${FL_LAB_CACHE:-/var/cache/faultline-lab}
FL_LAB_STATE=${FL_LAB_STATE:-/var/tmp/faultline-lab}
FL_LAB_MANIFEST=${FL_LAB_MANIFEST:-$FL_LAB_DIR/kernels.manifest}
FL_LAB_MIRROR=${FL_LAB_MIRROR:-http://deb.debian.org/debian}
FL_LAB_SECURITY_MIRROR=${FL_LAB_SECURITY_MIRROR:-http://security.debian.org/debian-security}

lab_log() { echo "[faultline-lab] $*" >&2; }
lab_die() { echo "[faultline-lab] error: $*" >&2; exit 1; }

lab_need() {  # lab_need CMD PACKAGE...: fails with the apt package to install
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 || lab_die "'$cmd' not found: apt-get install $pkg"
}

# Debian architecture of a lab architecture.
lab_debarch() {
  case $1 in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    riscv64) echo riscv64 ;;
    *) lab_die "unknown architecture '$1' (x86_64, aarch64, riscv64)" ;;
  esac
}

# Archive base URL of a suite (security suites live on another host).
lab_suite_base() {
  case $1 in
    *-security) echo "$FL_LAB_SECURITY_MIRROR" ;;
    *) echo "$FL_LAB_MIRROR" ;;
  esac
}

# Prints the manifest lines (without comments) matching arch $1 and label $2 ("" = any):
# "arch label suite package version sha256 path".
lab_manifest() {
  [ -r "$FL_LAB_MANIFEST" ] || lab_die "no manifest at $FL_LAB_MANIFEST (run: lab.sh repin)"
  awk -v a="${1:-}" -v l="${2:-}" '!/^[[:space:]]*(#|$)/ && NF == 7 && (a == "" || $1 == a) && (l == "" || $2 == l)' \
    "$FL_LAB_MANIFEST"
}

# The cached .deb path of a pool path.
lab_deb_path() { echo "$FL_LAB_CACHE/debs/$(basename "$1")"; }

# Downloads and verifies one manifest entry (idempotent). Args: the 7 manifest fields.
lab_fetch_one() {
  local arch=$1 label=$2 suite=$3 pkg=$4 ver=$5 sha=$6 path=$7
  local deb url tmp code
  deb=$(lab_deb_path "$path")
  if [ -f "$deb" ] && echo "$sha  $deb" | sha256sum -c --status; then
    return 0
  fi
  mkdir -p "$(dirname "$deb")"
  url="$(lab_suite_base "$suite")/$path"
  tmp="$deb.part.$$"
  lab_log "fetching $pkg $ver ($arch $label) from $url"
  code=$(curl -sS -L -o "$tmp" -w '%{http_code}' "$url") || code=${code:-000}
  if [ "$code" != 200 ]; then
    rm -f "$tmp"
    if [ "$code" = 404 ]; then
      lab_die "$pkg version $ver ($arch $label, suite $suite) is gone from the archive (404 at $url).
  The archive keeps only current versions. Re-pin: run '$FL_LAB_DIR/lab.sh repin' (rewrites
  $FL_LAB_MANIFEST from the current Packages indexes), or edit that line by hand with the
  version, sha256 and Filename of '$pkg' in $(lab_suite_base "$suite")/dists/$suite/main/binary-$(lab_debarch "$arch")/Packages.xz"
    fi
    lab_die "download of $pkg $ver failed (HTTP $code) from $url"
  fi
  if ! echo "$sha  $tmp" | sha256sum -c --status; then
    local got; got=$(sha256sum "$tmp" | cut -d' ' -f1); rm -f "$tmp"
    lab_die "$pkg $ver: sha256 mismatch ($got, manifest says $sha) from $url"
  fi
  mv -f "$tmp" "$deb"
}

# Unpacks the .deb of a manifest entry once; prints the tree's directory.
lab_unpacked() {  # lab_unpacked POOL_PATH
  local deb dir
  deb=$(lab_deb_path "$1")
  dir="$FL_LAB_CACHE/unpacked/$(basename "$1" .deb)"
  [ -f "$deb" ] || lab_die "$(basename "$deb") is not in the cache: run lab.sh fetch"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    dpkg-deb -x "$deb" "$dir" || lab_die "cannot unpack $deb"
    touch "$dir/.done"
  fi
  echo "$dir"
}

# The unpacked tree of the kernel of ARCH LABEL; sets LAB_KREL (its release) and
# LAB_KIMAGE (the image qemu -kernel and kexec load), LAB_KDIR (the unpacked package),
# LAB_KMODROOT (its modules directory: $LAB_KMODROOT/$LAB_KREL) and LAB_KINITRD (a user's
# initrd to put in front of the lab's initramfs; custom kernels only). A custom kernel
# (lab.sh up --kernel) listed in $FL_LAB_KERNELS_FILE wins over the manifest.
# (Globals for the caller.)
# shellcheck disable=SC2034
lab_kernel() {
  local arch=$1 label=$2 lines line dir sub
  LAB_KINITRD=""
  if lab_custom_kernel "$arch" "$label"; then return 0; fi
  lines=$(lab_manifest "$arch" "$label")
  [ -n "$lines" ] || lab_die "no kernel '$label' for $arch in $FL_LAB_MANIFEST"
  while IFS= read -r line; do
    # shellcheck disable=SC2086
    lab_fetch_one $line
  done <<<"$lines"
  if [ "$(wc -l <<<"$lines")" = 1 ]; then
    dir=$(lab_unpacked "$(awk '{ print $7 }' <<<"$lines")")
  else
    # Newer Debian kernels are split (linux-image-X depends on linux-binary-X and
    # linux-modules-X): one merged tree.
    dir="$FL_LAB_CACHE/unpacked/kernel-$arch-$label-$(sha256sum <<<"$lines" | cut -c1-12)"
    if [ ! -f "$dir/.done" ]; then
      rm -rf "$dir"; mkdir -p "$dir"
      for sub in $(awk '{ print $7 }' <<<"$lines"); do
        sub=$(lab_unpacked "$sub")
        tar -C "$sub" --exclude=./.done -cf - . | tar -C "$dir" -xf -
      done
      touch "$dir/.done"
    fi
  fi
  # bookworm ships /lib/modules, trixie (merged /usr) /usr/lib/modules.
  if [ -d "$dir/lib/modules" ]; then LAB_KMODROOT=$dir/lib/modules; else LAB_KMODROOT=$dir/usr/lib/modules; fi
  LAB_KREL=$(ls "$LAB_KMODROOT" 2>/dev/null | head -n1 || true)
  [ -n "$LAB_KREL" ] || lab_die "no lib/modules or usr/lib/modules in $dir (a kernel split into several packages whose modules package is not pinned? lab.sh repin)"
  if [ -f "$dir/boot/vmlinuz-$LAB_KREL" ]; then
    LAB_KIMAGE=$dir/boot/vmlinuz-$LAB_KREL
  elif [ -f "$dir/boot/vmlinux-$LAB_KREL" ]; then
    LAB_KIMAGE=$dir/boot/vmlinux-$LAB_KREL
  elif [ -f "$LAB_KMODROOT/$LAB_KREL/vmlinuz" ]; then   # 7.x packaging
    LAB_KIMAGE=$LAB_KMODROOT/$LAB_KREL/vmlinuz
  else
    lab_die "no kernel image in $dir/boot or $LAB_KMODROOT/$LAB_KREL"
  fi
  LAB_KDIR=$dir
}

# Custom kernels (lab.sh up --kernel LABEL=IMAGE,...): $FL_LAB_KERNELS_FILE has lines
# "arch label release image modroot initrd" ("-": none). Sets the lab_kernel globals.
# shellcheck disable=SC2034
lab_custom_kernel() {
  local f=${FL_LAB_KERNELS_FILE:-} line
  [ -n "$f" ] && [ -r "$f" ] || return 1
  line=$(awk -v a="$1" -v l="$2" '$1 == a && $2 == l' "$f" | tail -n1)
  [ -n "$line" ] || return 1
  read -r _ _ LAB_KREL LAB_KIMAGE LAB_KMODROOT LAB_KINITRD <<<"$line"
  [ "$LAB_KMODROOT" != - ] || LAB_KMODROOT=/nonexistent
  [ "$LAB_KINITRD" != - ] || LAB_KINITRD=""
  LAB_KDIR=$(dirname "$LAB_KIMAGE")
  [ -f "$LAB_KIMAGE" ] || lab_die "custom kernel $1/$2: no image $LAB_KIMAGE"
}

# The release a kernel image reports ("" if it cannot be read): x86 bzImage headers
# (file), "Linux version X" in the image, or in its gzip/zstd/xz payload.
lab_image_release() {
  local img=$1 r=""
  r=$(file -bL "$img" 2>/dev/null | sed -n 's/.*[, ]version \([^ ,]*\).*/\1/p' | head -n1)
  if [ -z "$r" ]; then
    r=$( { cat "$img"; } 2>/dev/null | strings -n 8 | sed -n 's/^.*Linux version \([^ ]*\) .*/\1/p' | head -n1)
  fi
  if [ -z "$r" ]; then
    local dec
    for dec in "gzip -dc" "zstd -qdc" "xz -dc"; do
      r=$($dec <"$img" 2>/dev/null | strings -n 8 | sed -n 's/^.*Linux version \([^ ]*\) .*/\1/p' | head -n1 || true)
      [ -z "$r" ] || break
    done
  fi
  echo "$r"
}

# The lab architecture of a kernel image, from file(1) ("" when unknown).
lab_image_arch() {
  case $(file -bL "$1" 2>/dev/null) in
    *"x86 boot"*|*x86-64*) echo x86_64 ;;
    *ARM64*|*aarch64*|*"ARM aarch64"*) echo aarch64 ;;
    *RISC-V*) echo riscv64 ;;
    *) echo "" ;;
  esac
}

# The qemu accelerator for ARCH: FL_LAB_ACCEL (tcg | kvm | auto; default tcg). kvm only
# for the host's own architecture with a usable /dev/kvm; auto picks it then.
lab_accel() {
  local want=${FL_LAB_ACCEL:-tcg}
  case $want in
    tcg) echo tcg ;;
    kvm|auto)
      if [ "$1" = "$(uname -m)" ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then echo kvm
      elif [ "$want" = kvm ]; then lab_die "FL_LAB_ACCEL=kvm: /dev/kvm is not usable or $1 is not this host's architecture"
      else echo tcg; fi ;;
    *) lab_die "FL_LAB_ACCEL: tcg, kvm or auto (got '$want')" ;;
  esac
}
