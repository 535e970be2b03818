#!/usr/bin/env bash
# Builds the Debian packages (scripts/build-packages.sh amd64 arm64 riscv64: lintian must
# pass) and checks what they hold: the files and where, the units naming /usr/bin, the
# conffiles, the maintainer scripts, the version from git, the cross packages' (agent,
# CLI; with --with-controller the controller too) architecture and ELF machine, and that
# their Depends, fetched from Debian for their arch, are all the binaries need (run under
# qemu-user: the CLI renders a saved report as its golden file has it; the controller
# migrates a throwaway PostgreSQL, answers /readyz and the CLI over gRPC). Then a package
# with its copyright file removed must fail lintian (the check can fail). Leaves the
# packages in ${FAULTLINE_BUILD_DIR:-build}/packages for packaging_systemd, packaging_image
# and (with the cross controllers) the foreign boards.
# Usage: build_test.sh REPO_ROOT [--with-controller]
#   --with-controller  the arm64 and riscv64 controllers as well (from the whole trees that
#                      scripts/cross-build-agent.sh --with-controller made; ctest
#                      packaging_build_cross, label boards)
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
with_controller=""
[ "${2:-}" != --with-controller ] || with_controller=1
build=${FAULTLINE_BUILD_DIR:-$ROOT/build}
out=$build/packages

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
for tool in lintian help2man dpkg-deb cpack file mmdebstrap qemu-aarch64-static qemu-riscv64-static; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh)"
done
cross=${FAULTLINE_CROSS_BUILD_DIR:-$ROOT/build-cross}
arches=(amd64)
[ -f "$cross/aarch64-linux-gnu/agent/build.ninja" ] && arches+=(arm64)
[ -f "$cross/riscv64-linux-gnu/agent/build.ninja" ] && arches+=(riscv64)
[ ${#arches[@]} = 3 ] || fail "no cross build of the agent for ${arches[*]/#/not }: cross_build_agent makes them"
if [ -n "$with_controller" ]; then
  for t in aarch64-linux-gnu riscv64-linux-gnu; do
    [ -f "$cross/$t/full/build.ninja" ] ||
      fail "no cross build of the controller in $cross/$t/full: cross_build_controllers (scripts/cross-build-agent.sh --with-controller) makes them"
  done
fi

rm -rf "$out"
t0=$SECONDS
FAULTLINE_PACKAGE_DIR=$out "$ROOT/scripts/build-packages.sh" ${with_controller:+--with-controller} "${arches[@]}" >"$build/packaging-build.log" 2>&1 ||
  { grep -v '^N:' "$build/packaging-build.log" | tail -30 >&2; fail "build-packages.sh (or lintian)"; }
pass "packages for ${arches[*]} built and lintian-clean (--pedantic, warnings fail) in $((SECONDS - t0)) s"

hash=$(git -C "$ROOT" rev-parse --short=7 HEAD)
deb() { ls "$out/${1}_"*"_$2.deb" 2>/dev/null | head -1 || true; }  # none: empty
has() {  # DEB PATH...
  local f=$1; shift
  local list; list=$(dpkg-deb -c "$f" | awk '{ print $6 }')
  local p
  for p in "$@"; do echo "$list" | grep -qx "./$p" || fail "$(basename "$f") lacks /$p"; done
}
for p in faultline-controller faultline-agent faultline; do
  f=$(deb "$p" amd64)
  [ -n "$f" ] || fail "no $p amd64 package"
  v=$(dpkg-deb -f "$f" Version)
  case $v in *"$hash"*-1) ;; *) fail "$p version $v does not name commit $hash" ;; esac
  has "$f" "usr/share/doc/$p/copyright" "usr/share/doc/$p/changelog.Debian.gz"
done
c=$(deb faultline-controller amd64); a=$(deb faultline-agent amd64); l=$(deb faultline amd64)
has "$c" usr/bin/faultline-controller lib/systemd/system/faultline-controller.service \
  etc/faultline/controller/controller.env usr/share/man/man1/faultline-controller.1.gz
has "$a" usr/bin/faultline-agent usr/bin/faultline-workload lib/systemd/system/faultline-agent.service \
  etc/faultline/agent.yaml etc/default/faultline-agent usr/share/man/man1/faultline-agent.1.gz
has "$l" usr/bin/faultline usr/share/man/man1/faultline.1.gz
for f in "$c" "$a"; do
  unit=$(dpkg-deb --fsys-tarfile "$f" | tar -xO --wildcards './lib/systemd/system/*.service')
  echo "$unit" | grep -q '^ExecStart=.*/usr/bin/faultline-' || fail "$(basename "$f"): the unit does not start /usr/bin/..."
  echo "$unit" | grep -v '^#' | grep -q '/usr/local/bin' && fail "$(basename "$f"): the unit names /usr/local/bin"
done
ctl=$(mktemp -d)
cleanup() {
  [ -z "${FL_CONTROLLER_PID:-}" ] || fl_stop_pid "$FL_CONTROLLER_PID"
  [ ! -d "$ctl/pg" ] || "$ROOT/scripts/pg-throwaway.sh" stop "$ctl/pg" >/dev/null 2>&1 || true
  rm -rf "$ctl"
}
trap cleanup EXIT
dpkg-deb -e "$c" "$ctl/c"; dpkg-deb -e "$a" "$ctl/a"
[ "$(cat "$ctl/c/conffiles")" = /etc/faultline/controller/controller.env ] || fail "controller conffiles: $(cat "$ctl/c/conffiles")"
[ "$(sort "$ctl/a/conffiles" | tr '\n' ' ')" = "/etc/default/faultline-agent /etc/faultline/agent.yaml " ] ||
  fail "agent conffiles: $(cat "$ctl/a/conffiles")"
grep -q "adduser --system --group" "$ctl/c/postinst" || fail "the controller's postinst makes no system user"
grep -q "deb-systemd-helper enable 'faultline-agent.service'" "$ctl/a/postinst" || fail "agent postinst"
grep -q "rm -rf \"\$d\"" "$ctl/a/postrm" && grep -q "/var/lib/faultline-agent" "$ctl/a/postrm" ||
  fail "the agent's postrm does not purge its state"
dpkg-deb -f "$c" Depends | grep -q "libpqxx-6.4" || fail "controller Depends: $(dpkg-deb -f "$c" Depends)"
pass "amd64: files, units on /usr/bin, conffiles, postinst (adduser, enable), postrm (purge), Depends; version $(dpkg-deb -f "$c" Version)"

# The cross controllers run against a throwaway PostgreSQL here (deploy/local/stack.sh's
# functions, with the binaries under qemu-user).
FL_STATE=$ctl FL_WAIT_SECONDS=180  # qemu-user: a slow start
chmod 755 "$ctl"  # PostgreSQL's user makes its cluster below it
source "$ROOT/deploy/local/stack.sh"
if [ -n "$with_controller" ]; then
  fl_start_postgres 2>>"$ctl/stack.log" && [ -n "$FL_DATABASE_URL" ] ||
    fail "a throwaway PostgreSQL for the cross controllers: $(tail -5 "$ctl/stack.log")"
fi
for arch in arm64 riscv64; do
  f=$(deb faultline-agent "$arch"); fc=$(deb faultline "$arch"); fd=$(deb faultline-controller "$arch")
  [ -n "$f" ] || fail "no $arch agent package"
  [ -n "$fc" ] || fail "no $arch CLI package"
  if [ -n "$with_controller" ]; then
    [ -n "$fd" ] || fail "no $arch controller package"
  else
    [ -z "$fd" ] || fail "an $arch controller package was built without --with-controller: $fd"
  fi
  for p in "$f" "$fc" $fd; do
    [ "$(dpkg-deb -f "$p" Architecture)" = "$arch" ] || fail "$(basename "$p"): Architecture $(dpkg-deb -f "$p" Architecture)"
  done
  machine=$(dpkg-deb --fsys-tarfile "$f" | tar -xO ./usr/bin/faultline-agent | file -b -)
  case $arch:$machine in arm64:*aarch64*|riscv64:*RISC-V*) ;; *) fail "$arch agent is: $machine" ;; esac
  cmachine=$(dpkg-deb --fsys-tarfile "$fc" | tar -xO ./usr/bin/faultline | file -b -)
  [ "$(echo "$cmachine" | cut -d, -f1-2)" = "$(echo "$machine" | cut -d, -f1-2)" ] || fail "$arch CLI is: $cmachine"
  dpkg-deb -f "$f" Depends | grep -q "libgrpc++1.51" || fail "$arch Depends: $(dpkg-deb -f "$f" Depends)"
  dpkg-deb -f "$fc" Depends | grep -q "libgrpc++1.51" || fail "$arch CLI Depends: $(dpkg-deb -f "$fc" Depends)"
  if [ -n "$fd" ]; then
    dmachine=$(dpkg-deb --fsys-tarfile "$fd" | tar -xO ./usr/bin/faultline-controller | file -b -)
    [ "$(echo "$dmachine" | cut -d, -f1-2)" = "$(echo "$machine" | cut -d, -f1-2)" ] || fail "$arch controller is: $dmachine"
    # bookworm's libpqxx is 6.4, trixie's 7.10: the package names the one it was built with.
    dpkg-deb -f "$fd" Depends | grep -q "adduser, .*libpqxx-[67]\.[0-9]*.*libpq5" ||
      fail "$arch controller Depends: $(dpkg-deb -f "$fd" Depends)"
  fi
  # Their Depends from the Debian archive of its arch (names; the versions are the sysroot's,
  # which the archive has or newer), the packages on top, the binaries run by qemu-user
  # with only those libraries.
  case $arch in arm64) suite=bookworm cpu=aarch64 ;; riscv64) suite=trixie cpu=riscv64 ;; esac
  root=$ctl/root-$arch
  mmdebstrap --quiet --variant=extract --arch="$arch" \
    --include="$( (dpkg-deb -f "$f" Depends; echo ,; dpkg-deb -f "$fc" Depends; [ -z "$fd" ] || { echo ,; dpkg-deb -f "$fd" Depends; }) | tr -d '\n' | sed 's/ *([^)]*)//g; s/ //g')" \
    "$suite" "$root" \
    >"$ctl/mmdebstrap-$arch.log" 2>&1 || { tail -5 "$ctl/mmdebstrap-$arch.log" >&2; fail "$arch: its Depends from $suite"; }
  for d in bin sbin lib; do  # a merged /usr, as an installed system has (trixie's are below /usr)
    if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
      mkdir -p "$root/usr/$d"; cp -a "$root/$d/." "$root/usr/$d/"; rm -rf "${root:?}/$d"
    fi
    [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"
  done
  for p in "$f" "$fc" $fd; do
    dpkg-deb --fsys-tarfile "$p" | tar -x --keep-directory-symlink -C "$root"  # /lib stays a link
  done
  # No text relocations: glibc would make the text writable at start, which the
  # controller's unit (MemoryDenyWriteExecute=yes) refuses (riscv64's ld marked every PIE
  # DT_TEXTREL until scripts/elf-drop-none-textrel.py; qemu-user alone does not see it).
  for bin in "$root"/usr/bin/faultline*; do
    ! readelf -dW "$bin" | grep -q TEXTREL || fail "$arch ${bin##*/} has text relocations (DT_TEXTREL)"
  done
  for bin in faultline-agent faultline-workload; do
    "qemu-$cpu-static" -L "$root" "$root/usr/bin/$bin" --help >"$ctl/help.txt" 2>&1 ||
      { cat "$ctl/help.txt" >&2; fail "$arch $bin does not run with its Depends from $suite"; }
    grep -q "faultline-workload\|runs faultline benchmarks" "$ctl/help.txt" || fail "$arch $bin --help: $(head -2 "$ctl/help.txt")"
  done
  # The CLI renders a saved report (statistics and the mail format on this arch) as the
  # build host does: the golden file of the same report.
  "qemu-$cpu-static" -L "$root" "$root/usr/bin/faultline" report --from "$ROOT/report/testdata/ab-report.json" \
    --format mail >"$ctl/mail-$arch.txt" 2>"$ctl/cli-$arch.err" ||
    { cat "$ctl/cli-$arch.err" >&2; fail "$arch faultline does not run with its Depends from $suite"; }
  diff -u "$ROOT/report/testdata/ab-report.mail" "$ctl/mail-$arch.txt" >&2 ||
    fail "$arch faultline renders the saved report differently from the golden file"
  if [ -z "$fd" ]; then
    rm -rf "$root"
    pass "$arch agent and CLI: $(echo "$machine" | cut -d, -f1-2); $(dpkg-deb -f "$f" Depends | tr ',' '\n' | wc -l) and $(dpkg-deb -f "$fc" Depends | tr ',' '\n' | wc -l) Depends from Debian $suite $arch; the binaries run with them (qemu-$cpu-static), the CLI's mail report equals the golden file (the controller: --with-controller)"
    continue
  fi
  # The controller with its Depends: a token made by its own binary, the schema migrated on
  # this arch's libpqxx (/readyz), the CLI of the same arch answered over gRPC, SIGTERM.
  for b in controller cli; do
    bin=faultline-controller; [ $b = controller ] || bin=faultline
    printf '#!/bin/sh\nexec qemu-%s-static -L %s %s/usr/bin/%s "$@"\n' "$cpu" "$root" "$root" "$bin" >"$ctl/$arch-$b"
    chmod +x "$ctl/$arch-$b"
  done
  FL_BIN_CONTROLLER=$ctl/$arch-controller FL_BIN_CLI=$ctl/$arch-cli
  rm -f "$ctl/controller.log"
  "$FL_BIN_CONTROLLER" --database-url "$FL_DATABASE_URL" tokens create --name "cross-$arch" --role user \
    >"$ctl/user.token" 2>"$ctl/token.err" || fail "tokens create by the $arch controller: $(cat "$ctl/token.err")"
  FL_GRPC_PORT=0 FL_HTTP_PORT=0  # the controller picks them (its --port-file)
  fl_start_controller 2>>"$ctl/stack.log" ||
    fail "the $arch controller did not start: $(tail -5 "$ctl/stack.log" "$ctl/controller.log" 2>&1)"
  fl_wait_alive "the $arch controller's /readyz" "$FL_CONTROLLER_PID" \
    curl -fsS "http://127.0.0.1:$FL_HTTP_PORT/readyz" 2>>"$ctl/stack.log" ||
    fail "the $arch controller never answered /readyz 200: $(tail -5 "$ctl/controller.log" 2>&1)"
  "$FL_BIN_CLI" agents >"$ctl/agents-$arch.txt" 2>&1 ||
    fail "the $arch CLI over gRPC to the $arch controller: $(cat "$ctl/agents-$arch.txt")"
  kill -TERM "$FL_CONTROLLER_PID"
  code=0; wait "$FL_CONTROLLER_PID" || code=$?
  FL_CONTROLLER_PID=
  [ "$code" = 0 ] || fail "the $arch controller exited with $code on SIGTERM: $(tail -5 "$ctl/controller.log" 2>&1)"
  rm -rf "$root"
  pass "$arch agent, CLI and controller: $(echo "$machine" | cut -d, -f1-2); $(dpkg-deb -f "$f" Depends | tr ',' '\n' | wc -l), $(dpkg-deb -f "$fc" Depends | tr ',' '\n' | wc -l) and $(dpkg-deb -f "$fd" Depends | tr ',' '\n' | wc -l) Depends from Debian $suite $arch; the binaries run with them (qemu-$cpu-static), the CLI's mail report equals the golden file, the controller ($(dpkg-deb -f "$fd" Depends | grep -o 'libpqxx-[0-9.]*')) migrated a database, answered /readyz and the CLI over gRPC, and exited 0 on SIGTERM"
done

# The check can fail: a copy without its copyright file.
dpkg-deb -R "$l" "$ctl/broken"
rm "$ctl/broken/usr/share/doc/faultline/copyright"
dpkg-deb --root-owner-group -b "$ctl/broken" "$ctl/broken.deb" >/dev/null
if lintian --fail-on error,warning "$ctl/broken.deb" >"$ctl/lintian.txt" 2>&1; then
  fail "lintian passed a package without its copyright file"
fi
grep -q "no-copyright-file" "$ctl/lintian.txt" || fail "lintian: $(cat "$ctl/lintian.txt")"
pass "a package without its copyright file fails lintian (no-copyright-file)"

for f in "$out"/*.deb; do
  echo "figure: $(basename "$f") $(( $(stat -c %s "$f") / 1024 )) KiB, installed $(dpkg-deb -f "$f" Installed-Size) KiB"
done
