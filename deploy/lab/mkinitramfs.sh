#!/usr/bin/env bash
# mkinitramfs.sh ARCH LABEL OUT [--overlay DIR]... [--agent] [--compress gzip|zstd|none]
#
# Builds the initramfs of a virtual board running the pinned kernel ARCH/LABEL
# (kernels.manifest): busybox-static, the kernel's modules for virtio (net, blk, pci),
# zram and its compressors (decompressed: busybox insmod reads plain .ko only), kexec with
# the shared libraries it needs (from the pinned userland .debs), guest/init as /init.
#   --overlay DIR   copy DIR's tree on top (e.g. etc/faultline/agent.yaml, agent.token,
#                   opt/faultline/bin/...); repeatable, later ones win
#   --agent         x86_64 only: the host's faultline-agent and faultline-workload
#                   (FL_BIN_AGENT, FL_BIN_WORKLOAD; default build/agent/...) into
#                   /opt/faultline/bin, with every library ldd lists and the loader
#   --compress      gzip (default: every Debian kernel unpacks it), zstd, none
# The tree is kept in $FL_LAB_STATE/initramfs/ARCH-LABEL for inspection.
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 3 ] || usage
ARCH=$1 LABEL=$2 OUT=$3; shift 3
OVERLAYS=() AGENT=0 COMPRESS=gzip
while [ $# -gt 0 ]; do
  case $1 in
    --overlay) [ -d "${2:-}" ] || lab_die "--overlay: '${2:-}' is not a directory"; OVERLAYS+=("$(cd "$2" && pwd)"); shift 2 ;;
    --agent) AGENT=1; shift ;;
    --compress) COMPRESS=$2; shift 2 ;;
    -h|--help) usage ;;
    *) lab_die "mkinitramfs: unknown option $1" ;;
  esac
done
lab_debarch "$ARCH" >/dev/null   # checks ARCH
lab_need cpio cpio; lab_need readelf binutils; lab_need dpkg-deb dpkg; lab_need xz xz-utils; lab_need zstd zstd

lab_kernel "$ARCH" "$LABEL"     # LAB_KREL, LAB_KDIR, LAB_KIMAGE
KMOD="$LAB_KMODROOT/$LAB_KREL"

ROOT="$FL_LAB_STATE/initramfs/$ARCH-$LABEL"
rm -rf "$ROOT"; mkdir -p "$ROOT"
# Merged /usr (trixie's libc6 ships only in /usr/lib; bookworm's in /lib): one layout.
mkdir -p "$ROOT"/usr/{bin,sbin,lib} "$ROOT"/{dev,proc,sys,run,tmp,etc,root,mnt,var/lib/faultline}
ln -s usr/bin "$ROOT/bin"; ln -s usr/sbin "$ROOT/sbin"; ln -s usr/lib "$ROOT/lib"
case $ARCH in x86_64) mkdir -p "$ROOT/usr/lib64"; ln -s usr/lib64 "$ROOT/lib64" ;; esac
chmod 1777 "$ROOT/tmp"

# tar a tree into the root, keeping the root's directory symlinks (lib -> usr/lib).
pour() { tar -C "$1" --exclude=./.done -cf - . | tar -C "$ROOT" --keep-directory-symlink -xf -; }

# --- userland: the pinned .debs, unpacked into one sysroot ------------------------
SYSROOT="$FL_LAB_CACHE/sysroot/$ARCH"
stamp=$(lab_manifest "$ARCH" userland | sha256sum | cut -c1-16)
if [ ! -f "$SYSROOT/.done-$stamp" ]; then
  rm -rf "$SYSROOT"; mkdir -p "$SYSROOT"/usr/{bin,sbin,lib}
  ln -s usr/bin "$SYSROOT/bin"; ln -s usr/sbin "$SYSROOT/sbin"; ln -s usr/lib "$SYSROOT/lib"
  [ "$ARCH" = x86_64 ] && { mkdir -p "$SYSROOT/usr/lib64"; ln -s usr/lib64 "$SYSROOT/lib64"; }
  while read -r _ _ suite pkg ver sha path; do
    lab_fetch_one "$ARCH" userland "$suite" "$pkg" "$ver" "$sha" "$path" ||
      lab_die "userland package $pkg missing (lab.sh fetch $ARCH)"
    d=$(lab_unpacked "$path")
    tar -C "$d" --exclude=./.done -cf - . | tar -C "$SYSROOT" --keep-directory-symlink -xf -
  done < <(lab_manifest "$ARCH" userland)
  touch "$SYSROOT/.done-$stamp"
fi
[ -x "$SYSROOT/bin/busybox" ] || lab_die "no busybox in $SYSROOT (busybox-static not pinned for $ARCH?)"

# Copies sysroot path $1 (absolute, inside the guest) into the root, following symlinks
# inside the sysroot (absolute targets are guest paths).
copy_from_sysroot() {
  local p=$1 src t
  while :; do
    src="$SYSROOT$p"
    [ -e "$src" ] || [ -L "$src" ] || return 1
    mkdir -p "$ROOT$(dirname "$p")"
    if [ -L "$src" ]; then
      t=$(readlink "$src")
      [ -e "$ROOT$p" ] || [ -L "$ROOT$p" ] || ln -s "$t" "$ROOT$p"
      case $t in /*) p=$t ;; *) p=$(dirname "$p")/$t ;; esac
    else
      [ -e "$ROOT$p" ] || cp "$src" "$ROOT$p"
      return 0
    fi
  done
}
# Library search directories of the guest (multiarch first).
LIBDIRS=$(cd "$SYSROOT" && { ls -d usr/lib/*-linux-gnu* lib/*-linux-gnu* usr/lib64 lib64 usr/lib lib 2>/dev/null || true; } | sed 's|^|/|' | tr '\n' ' ')
declare -A DONE_LIBS=()
# Copies an ELF file's interpreter and NEEDED libraries (recursively) from the sysroot.
copy_needed() {
  local f=$1 interp lib d found
  interp=$(readelf -l "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
  if [ -n "$interp" ] && [ -z "${DONE_LIBS[$interp]:-}" ]; then
    DONE_LIBS[$interp]=1
    copy_from_sysroot "$interp" || lab_die "interpreter $interp of $f not in the pinned userland"
  fi
  for lib in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [ -z "${DONE_LIBS[$lib]:-}" ] || continue
    DONE_LIBS[$lib]=1
    found=""
    for d in $LIBDIRS; do
      if [ -e "$SYSROOT$d/$lib" ]; then
        copy_from_sysroot "$d/$lib"; found=$(readlink -f "$SYSROOT$d/$lib"); break
      fi
    done
    [ -n "$found" ] || lab_die "$lib (needed by $(basename "$f")) not in the pinned userland of $ARCH: add its package to the userland rule (lab.sh REPIN_RULES) and repin"
    copy_needed "$found"
  done
}

cp "$SYSROOT/bin/busybox" "$ROOT/usr/bin/busybox"
GUEST_TOOLS="kexec"   # dynamically linked tools from the pinned userland
for tool in $GUEST_TOOLS; do
  src=""
  for d in /sbin /usr/sbin /bin /usr/bin; do [ -f "$SYSROOT$d/$tool" ] && { src=$SYSROOT$d/$tool; break; }; done
  [ -n "$src" ] || lab_die "$tool not in the pinned userland of $ARCH"
  cp "$src" "$ROOT/usr/sbin/$tool"
  copy_needed "$src"
done

# --- kernel modules ---------------------------------------------------------------
# Wanted (when modular): virtio transport, net, blk, zram with its allocator and the
# compressors zram may pick, and the crypto modules ext4 pulls in at mount.
WANT_MODULES="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_mmio
  failover net_failover virtio_net virtio_blk af_packet zsmalloc zram lzo lzo_rle lz4 lz4_compress
  lz4_decompress zstd crc32c_generic crc32c_intel libcrc32c crc16 mbcache jbd2 ext4 virtio_rng"
norm() { echo "${1//-/_}"; }
declare -A MODPATH=() MODDONE=()
while IFS= read -r rel; do
  base=$(basename "$rel"); base=${base%%.ko*}
  MODPATH[$(norm "$base")]=$rel
done < <(if [ -d "$KMOD/kernel" ]; then cd "$KMOD" && find kernel -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz'; fi)
# (A custom kernel without a modules directory: everything it needs is built in.)
LOAD_ORDER=()
mkdir -p "$ROOT/lib/modules/$LAB_KREL"
add_module() {  # add_module NAME: the module and its dependencies, dependencies first
  local name rel out deps dep
  name=$(norm "$1")
  [ -z "${MODDONE[$name]:-}" ] || return 0
  MODDONE[$name]=1
  rel=${MODPATH[$name]:-}
  [ -n "$rel" ] || return 0   # built in (or absent: checked by the guest at use)
  out="$ROOT/lib/modules/$LAB_KREL/${rel%%.ko*}.ko"
  mkdir -p "$(dirname "$out")"
  case $rel in
    *.ko.xz) xz -dc "$KMOD/$rel" >"$out" ;;
    *.ko.zst) zstd -qdc "$KMOD/$rel" >"$out" ;;
    *.ko.gz) gzip -dc "$KMOD/$rel" >"$out" ;;
    *) cp "$KMOD/$rel" "$out" ;;
  esac
  deps=$(readelf -p .modinfo "$out" 2>/dev/null | sed -n 's/^ *\[ *[0-9a-f]*\] *depends=//p' | tr ',' ' ')
  for dep in $deps; do add_module "$dep"; done
  LOAD_ORDER+=("${rel%%.ko*}.ko")
  MODDEPS[${rel%%.ko*}.ko]=$(for dep in $deps; do r=${MODPATH[$(norm "$dep")]:-}; [ -n "$r" ] && printf '%s ' "${r%%.ko*}.ko"; done)
}
declare -A MODDEPS=()
for m in $WANT_MODULES; do add_module "$m"; done
cp "$KMOD/modules.builtin" "$KMOD/modules.order" "$ROOT/lib/modules/$LAB_KREL/" 2>/dev/null || true
# load.list for /init (insmod in order) and a modules.dep for busybox modprobe.
[ ${#LOAD_ORDER[@]} -eq 0 ] || printf '%s\n' "${LOAD_ORDER[@]}" >"$ROOT/lib/modules/$LAB_KREL/load.list"
for m in "${LOAD_ORDER[@]}"; do echo "$m: ${MODDEPS[$m]}"; done | sed 's/ *$//' >"$ROOT/lib/modules/$LAB_KREL/modules.dep"

# --- agent (x86_64: the host build) -----------------------------------------------
if [ "$AGENT" = 1 ]; then
  [ "$ARCH" = "$(uname -m)" ] || lab_die "--agent copies host binaries: only for $(uname -m) (build the agent for $ARCH and use --overlay)"
  agent_bin=${FL_BIN_AGENT:-$FL_ROOT/build/agent/faultline-agent}
  workload_bin=${FL_BIN_WORKLOAD:-$FL_ROOT/build/agent/workloads/faultline-workload}
  mkdir -p "$ROOT/opt/faultline/bin"
  for b in "$agent_bin" "$workload_bin"; do
    [ -x "$b" ] || lab_die "--agent: $b does not exist (build it, or set FL_BIN_AGENT / FL_BIN_WORKLOAD)"
    cp "$b" "$ROOT/opt/faultline/bin/"
    # Every library ldd lists, at the path it resolves to, and the loader.
    while read -r lib; do
      [ -n "$lib" ] || continue
      mkdir -p "$ROOT$(dirname "$lib")"
      # The host's copy wins (the agent was linked against it); never write through a
      # symlink of the tree (an absolute one would point into the host).
      rm -f "$ROOT$lib"
      cp -L "$lib" "$ROOT$lib"
    done < <(ldd "$b" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }')
  done
fi

# --- init, config, overlays ---------------------------------------------------------
cp "$FL_LAB_DIR/guest/init" "$ROOT/init"; chmod 755 "$ROOT/init"
cp "$FL_LAB_DIR/guest/systemctl" "$ROOT/usr/bin/systemctl"; chmod 755 "$ROOT/usr/bin/systemctl"
mkdir -p "$ROOT/opt/faultline/bin"
cp "$FL_LAB_DIR/guest/lab-power" "$ROOT/opt/faultline/bin/lab-power"; chmod 755 "$ROOT/opt/faultline/bin/lab-power"
mkdir -p "$ROOT/etc/faultline"; cp "$FL_LAB_DIR/guest/udhcpc.script" "$ROOT/etc/faultline/udhcpc.script"
mkdir -p "$ROOT/etc/faultline"
cat >"$ROOT/etc/faultline/lab-build" <<EOF
arch=$ARCH
label=$LABEL
release=$LAB_KREL
EOF
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
for o in "${OVERLAYS[@]}"; do pour "$o"; done

# --- archive --------------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
tmp="$OUT.tmp.$$"
case $COMPRESS in
  gzip) (cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -6 -n) >"$tmp" ;;
  zstd) (cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | zstd -q -19 -T0) >"$tmp" ;;
  none) (cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$tmp" ;;
  *) rm -f "$tmp"; lab_die "--compress: gzip, zstd or none" ;;
esac
if [ -n "${LAB_KINITRD:-}" ]; then
  # A custom kernel's own initrd goes first (the kernel unpacks concatenated archives in
  # order; ours, later, wins for /init), padded to 4 bytes.
  [ -f "$LAB_KINITRD" ] || lab_die "initrd $LAB_KINITRD does not exist"
  { cat "$LAB_KINITRD"; pad=$(( (4 - $(stat -c %s "$LAB_KINITRD") % 4) % 4 )); head -c "$pad" /dev/zero; cat "$tmp"; } >"$tmp.cat"
  mv -f "$tmp.cat" "$tmp"
fi
mv -f "$tmp" "$OUT"
lab_log "initramfs $OUT ($ARCH $LABEL, $LAB_KREL): $(du -h "$OUT" | cut -f1), modules: ${#LOAD_ORDER[@]}"
