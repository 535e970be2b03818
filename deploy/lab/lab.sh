#!/usr/bin/env bash
# The virtual board lab: Debian kernels under qemu (TCG), an initramfs with busybox, kexec
# and the faultline agent, a persistent virtio disk per board.
#
#   lab.sh repin [--dry-run]        rewrite kernels.manifest from the archive's current
#                                   Packages indexes (rules below)
#   lab.sh fetch [ARCH...]          download + sha256-verify every manifest entry (cached)
#   lab.sh initramfs ARCH LABEL OUT [--overlay DIR]... [--agent]   (= mkinitramfs.sh)
#   lab.sh disk ARCH FILE [--size 2G] [--force|--refresh-boot] [--agent] [--overlay DIR]...
#                                   a raw ext4 disk with boot/ holding both kernels and
#                                   their initramfs (for kexec inside the guest)
#   lab.sh boot ARCH LABEL [...]    (= boot.sh)
#   lab.sh kernel ARCH LABEL        print "release image-path" of a pinned kernel
#   lab.sh selftest ARCH            boots vanilla, checks net/disk/zram/cgroup, kexecs to
#                                   patched, checks again; prints the timings
# The running lab (fleet.sh, state in $FL_LAB_STATE/up):
#   lab.sh up [--arches x86_64,aarch64,riscv64] [--kernel [ARCH:]LABEL=IMAGE[,initrd=F]
#             [,modules=DIR][,release=R]]... [--mem MB] [--smp N] [--zram SIZE] [--prometheus]
#                                   PostgreSQL + controller + one board lab-ARCH per arch
#                                   under a host-side supervisor (supervise.sh); returns when
#                                   every board is online; prints the exports
#   lab.sh env | status | timings   exports; agents and pids; boot/switch seconds per board
#   lab.sh study SPEC.yaml          submit to the running lab, watch, report, timings
#   lab.sh clear-needs-check BOARD  power-cycles BOARD clearing its needs-check; waits for ok
#   lab.sh down                     ends supervisors, qemus, controller, PostgreSQL (by pid)
# Env: FL_LAB_ACCEL (tcg|kvm|auto; tcg), FL_LAB_BUNDLE_<arch> (cross-built agent bundle;
#   default build-cross/<arch>-linux-gnu/bundle), FL_BIN_* / FAULTLINE_BUILD_DIR (binaries)
# and see lib.sh (FL_LAB_CACHE, FL_LAB_STATE, FL_LAB_MANIFEST, FL_LAB_MIRROR, ...).
set -euo pipefail
FL_LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$FL_LAB_DIR/lib.sh"
# shellcheck source=fleet.sh
. "$FL_LAB_DIR/fleet.sh"

# Repin rules: kind|arch|label|suites|what. Suites: comma-separated, the highest version
# among them wins; "a,b;c": c only for packages missing from a and b.
# kernel: "what" is a regex on the package name (highest version wins).
# userland: "what" are root packages, pinned with their Depends closure.
REPIN_RULES='
kernel|x86_64|vanilla|bookworm,bookworm-security|^linux-image-6\.1\.0-[0-9]+-cloud-amd64$
kernel|x86_64|patched|bookworm-security|^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64$
userland|x86_64|userland|bookworm,bookworm-security|busybox-static kexec-tools
kernel|aarch64|vanilla|bookworm,bookworm-security|^linux-image-6\.1\.0-[0-9]+-cloud-arm64$
kernel|aarch64|patched|bookworm-security|^linux-image-6\.12\.[0-9]+\+deb12-cloud-arm64$
userland|aarch64|userland|bookworm,bookworm-security|busybox-static kexec-tools
kernel|riscv64|vanilla|trixie,trixie-security|^linux-image-6\.12\.[0-9]+\+deb13-riscv64$
kernel|riscv64|patched|trixie-backports|^linux-image-[0-9.]+\+deb13-riscv64$
userland|riscv64|userland|trixie,trixie-security;sid|busybox-static kexec-tools
'
# Never pinned as guest userland (maintainer-script machinery, not needed at run time).
REPIN_SKIP=' debconf debconf-2.0 dpkg perl-base install-info init-system-helpers libc-bin '

# The index of SUITE for DEBARCH as TSV "package version sha256 filename depends" (cached
# for the duration of one repin run in $FL_LAB_STATE/indexes).
repin_index() {
  local suite=$1 debarch=$2 dir="$FL_LAB_STATE/indexes" xz tsv url
  xz="$dir/${suite}_$debarch.Packages.xz"; tsv="$dir/${suite}_$debarch.tsv"
  mkdir -p "$dir"
  if ! [ "$tsv" -nt "$REPIN_STAMP" ]; then
    url="$(lab_suite_base "$suite")/dists/$suite/main/binary-$debarch/Packages.xz"
    lab_log "index: $url"
    curl -fsS -o "$xz.part" "$url" || lab_die "cannot download $url"
    mv -f "$xz.part" "$xz"
    xzcat "$xz" | awk -F': ' '
      /^Package: / { p = $2 } /^Version: / { v = $2 } /^SHA256: / { s = $2 } /^Filename: / { f = $2 }
      /^Depends: / { d = $2 } /^Pre-Depends: / { pd = $2 }
      /^$/ { if (p != "") { dd = d; if (pd != "") dd = pd (d != "" ? ", " d : "");
                            printf "%s\t%s\t%s\t%s\t%s\n", p, v, s, f, dd }
             p = v = s = f = d = pd = "" }' >"$tsv"
  fi
  echo "$tsv"
}

# Picks the highest version among TSV lines on stdin (with a leading suite column).
repin_highest() {
  local best="" bv="" line v
  while IFS= read -r line; do
    v=$(cut -f3 <<<"$line")
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$bv"; then best=$line; bv=$v; fi
  done
  [ -n "$best" ] && echo "$best"
}

# Finds package $1 (exact name, or regex when $3=regex) in the suite groups $2 for $4.
repin_find() {
  local name=$1 groups=$2 mode=$3 debarch=$4 group suite tsv found
  local IFS_save=$IFS
  IFS=';'
  for group in $groups; do
    IFS=$IFS_save
    found=$(for suite in ${group//,/ }; do
              tsv=$(repin_index "$suite" "$debarch")
              if [ "$mode" = regex ]; then
                awk -F'\t' -v re="$name" -v s="$suite" '$1 ~ re { print s "\t" $0 }' "$tsv"
              else
                awk -F'\t' -v n="$name" -v s="$suite" '$1 == n { print s "\t" $0 }' "$tsv"
              fi
            done | repin_highest || true)
    if [ -n "$found" ]; then echo "$found"; return 0; fi
    IFS=';'
  done
  IFS=$IFS_save
  return 1
}

cmd_repin() {
  local dry=0; [ "${1:-}" = --dry-run ] && dry=1
  lab_need dpkg dpkg; lab_need xzcat xz-utils; lab_need curl curl
  mkdir -p "$FL_LAB_STATE/indexes"
  REPIN_STAMP="$FL_LAB_STATE/indexes/.repin-start"
  touch "$REPIN_STAMP"; sleep 1  # indexes newer than this were fetched by this run
  local out; out=$(mktemp)
  {
    echo "# Pinned Debian packages of the virtual board lab (deploy/lab). Regenerate: lab.sh repin"
    echo "# Generated $(date -u +%Y-%m-%dT%H:%MZ) from the archive's Packages indexes."
    echo "# arch label suite package version sha256 pool-path"
  } >"$out"
  local kind arch label suites what debarch line
  while IFS='|' read -r kind arch label suites what; do
    [ -n "$kind" ] || continue
    debarch=$(lab_debarch "$arch")
    if [ "$kind" = kernel ]; then
      line=$(repin_find "$what" "$suites" regex "$debarch") ||
        lab_die "no package matching $what in $suites ($debarch)"
      awk -F'\t' -v a="$arch" -v l="$label" '{ print a, l, $1, $2, $3, $4, $5 }' <<<"$line" >>"$out"
      # Split kernels (7.x): the image and the modules are packages of their own.
      local dep kver
      kver=$(cut -f3 <<<"$line")
      for dep in $(cut -f6 <<<"$line" | tr ',|' '\n\n' | sed -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -E '^linux-(binary|modules)-' || true); do
        local dline
        dline=$(repin_find "$dep" "$suites" exact "$debarch") || lab_die "$dep (of the $arch $label kernel) not in $suites"
        [ "$(cut -f3 <<<"$dline")" = "$kver" ] || lab_die "$dep: version $(cut -f3 <<<"$dline") != $kver"
        awk -F'\t' -v a="$arch" -v l="$label" '{ print a, l, $1, $2, $3, $4, $5 }' <<<"$dline" >>"$out"
      done
    else
      local -A seen=()
      local queue pkg deps dep
      read -r -a queue <<<"$what"
      while [ ${#queue[@]} -gt 0 ]; do
        pkg=${queue[0]}; queue=("${queue[@]:1}")
        [ -z "${seen[$pkg]:-}" ] || continue
        seen[$pkg]=1
        case $REPIN_SKIP in *" $pkg "*) continue ;; esac
        if ! line=$(repin_find "$pkg" "$suites" exact "$debarch"); then
          lab_log "warning: $pkg ($debarch) not in $suites (virtual or missing): skipped"
          continue
        fi
        awk -F'\t' -v a="$arch" -v l="$label" '{ print a, l, $1, $2, $3, $4, $5 }' <<<"$line" >>"$out"
        deps=$(cut -f6 <<<"$line")
        # First alternative of each dependency, without version or arch qualifier.
        for dep in $(tr ',' '\n' <<<"$deps" | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:[a-z0-9]*//' -e 's/[[:space:]]//g'); do
          [ -n "$dep" ] && queue+=("$dep")
        done
      done
      unset seen
    fi
  done <<<"$REPIN_RULES"
  if [ "$dry" = 1 ]; then cat "$out"; rm -f "$out"; return 0; fi
  if [ -f "$FL_LAB_MANIFEST" ] && diff -q <(grep -v '^#' "$FL_LAB_MANIFEST") <(grep -v '^#' "$out") >/dev/null; then
    lab_log "manifest unchanged"; rm -f "$out"; return 0
  fi
  [ -f "$FL_LAB_MANIFEST" ] && diff <(grep -v '^#' "$FL_LAB_MANIFEST") <(grep -v '^#' "$out") >&2 || true
  mv -f "$out" "$FL_LAB_MANIFEST"; chmod 644 "$FL_LAB_MANIFEST"
  lab_log "wrote $FL_LAB_MANIFEST"
}

cmd_fetch() {
  lab_need curl curl; lab_need sha256sum coreutils
  local arches=("$@") arch line n=0
  [ ${#arches[@]} -gt 0 ] || arches=("")
  for arch in "${arches[@]}"; do
    while IFS= read -r line; do
      # shellcheck disable=SC2086
      lab_fetch_one $line
      n=$((n + 1))
    done < <(lab_manifest "$arch" "")
  done
  lab_log "fetch: $n packages verified in $FL_LAB_CACHE/debs"
}

cmd_kernel() {
  [ $# -eq 2 ] || lab_die "usage: lab.sh kernel ARCH LABEL"
  lab_kernel "$1" "$2"
  echo "$LAB_KREL $LAB_KIMAGE"
}

# A raw disk with an ext4 file system whose boot/ holds every pinned kernel of ARCH and
# an initramfs for it: what kexec in the guest loads. Kept when it exists (it is the
# board's persistent state) unless --force; --refresh-boot rewrites boot/ in place.
cmd_disk() {
  local arch=${1:?usage: lab.sh disk ARCH FILE [--size 2G] [--force|--refresh-boot] [--overlay DIR]...}
  local file=${2:?usage: lab.sh disk ARCH FILE}
  shift 2
  local size=2G force=0 refresh=0 initrd_args=() keep_boot=""
  while [ $# -gt 0 ]; do
    case $1 in
      --size) size=$2; shift 2 ;;
      --force) force=1; shift ;;
      --refresh-boot) refresh=1; shift ;;
      --overlay|--append-cmdline) initrd_args+=("$1" "$2"); shift 2 ;;
      --agent) initrd_args+=("$1"); shift ;;
      --keep-boot) keep_boot=$2; shift 2 ;;
      *) lab_die "disk: unknown option $1" ;;
    esac
  done
  lab_need mke2fs e2fsprogs; lab_need debugfs e2fsprogs
  if [ -f "$file" ] && [ "$force" = 0 ] && [ "$refresh" = 0 ]; then
    lab_log "disk $file exists (kept; --force recreates, --refresh-boot rewrites boot/)"; return 0
  fi
  local stage="$FL_LAB_STATE/disk-stage.$arch.$$" label
  rm -rf "$stage"; mkdir -p "$stage/boot" "$stage/work"
  # The manifest's kernels and the custom ones (lab.sh up --kernel, FL_LAB_KERNELS_FILE).
  for label in $( { lab_manifest "$arch" "" | awk '$2 != "userland" { print $2 }'
                    [ -r "${FL_LAB_KERNELS_FILE:-}" ] && awk -v a="$arch" '$1 == a { print $2 }' "$FL_LAB_KERNELS_FILE"
                  } | sort -u); do
    lab_kernel "$arch" "$label"
    # boot/vmlinuz-RELEASE (vmlinux-RELEASE for an uncompressed image), whatever its name.
    case $(basename "$LAB_KIMAGE") in
      vmlinux*) cp "$LAB_KIMAGE" "$stage/boot/vmlinux-$LAB_KREL" ;;
      *) cp "$LAB_KIMAGE" "$stage/boot/vmlinuz-$LAB_KREL" ;;
    esac
    "$FL_LAB_DIR/mkinitramfs.sh" "$arch" "$label" "$stage/boot/initrd.img-$LAB_KREL" "${initrd_args[@]}"
    echo "$LAB_KREL" >"$stage/boot/release-$label"
  done
  if [ "$refresh" = 1 ] && [ -f "$file" ]; then
    local f
    debugfs -w -R "mkdir boot" "$file" >/dev/null 2>&1 || true
    for f in "$stage"/boot/*; do
      debugfs -w -f - "$file" >/dev/null 2>&1 <<EOF
rm boot/$(basename "$f")
write $f boot/$(basename "$f")
EOF
    done
    lab_log "disk $file: boot/ refreshed"
  else
    rm -f "$file"
    truncate -s "$size" "$file"
    mke2fs -q -t ext4 -L faultline -d "$stage" "$file"
    lab_log "disk $file: ext4 $size with boot/: $(ls "$stage/boot" | tr '\n' ' ')"
  fi
  if [ -n "$keep_boot" ]; then rm -rf "$keep_boot"; mkdir -p "$keep_boot"; cp -a "$stage/boot/." "$keep_boot/"; fi
  rm -rf "$stage"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  repin) cmd_repin "$@" ;;
  fetch) cmd_fetch "$@" ;;
  kernel) cmd_kernel "$@" ;;
  initramfs) exec "$FL_LAB_DIR/mkinitramfs.sh" "$@" ;;
  disk) cmd_disk "$@" ;;
  boot) exec "$FL_LAB_DIR/boot.sh" "$@" ;;
  selftest) exec "$FL_LAB_DIR/selftest.sh" "$@" ;;
  study) cmd_study "$@" ;;
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  env) cmd_env "$@" ;;
  timings) cmd_timings "$@" ;;
  clear-needs-check) cmd_clear_needs_check "$@" ;;
  *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
