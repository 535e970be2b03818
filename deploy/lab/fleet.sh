# shellcheck shell=bash
# The running lab of `lab.sh up`: a throwaway PostgreSQL and controller (deploy/local/stack.sh)
# and one qemu board per architecture under a host-side supervisor (supervise.sh).
# Sourced by lab.sh (needs lib.sh). Everything lives in $FL_LAB_STATE/up:
#   lab.env              the exports to reach the stack (lab.sh env prints them)
#   stack/               PostgreSQL, controller log, tokens (FL_STATE of stack.sh)
#   lab-ARCH/            a board: disk.img, boot/ (kernels, initrds, release-LABEL),
#                        console.log, board.env, agent.yaml, supervisor.pid, qemu.pid

LAB_UP=$FL_LAB_STATE/up
LAB_ARCHES_ALL="x86_64 aarch64 riscv64"

lab_bins() {
  local bin=${FAULTLINE_BUILD_DIR:-$FL_ROOT/build}
  export FL_BIN_CONTROLLER=${FL_BIN_CONTROLLER:-$bin/services/controller/faultline-controller}
  export FL_BIN_AGENT=${FL_BIN_AGENT:-$bin/agent/faultline-agent}
  export FL_BIN_WORKLOAD=${FL_BIN_WORKLOAD:-$bin/agent/workloads/faultline-workload}
  export FL_BIN_CLI=${FL_BIN_CLI:-$bin/services/cli/faultline}
}

# The cross-built agent bundle of ARCH (scripts/cross-build-agent.sh): a tree for the
# guest's root. FL_LAB_BUNDLE_<arch> overrides; x86_64 on an x86_64 host: "" (host build).
lab_bundle() {
  local arch=$1 var="FL_LAB_BUNDLE_$1"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  [ "$arch" = "$(uname -m)" ] && { echo ""; return; }
  echo "${FAULTLINE_CROSS_BUILD_DIR:-$FL_ROOT/build-cross}/$arch-linux-gnu/bundle"
}
lab_bundle_ok() {  # lab_bundle_ok DIR: the agent, the workload and a loader are there
  [ -x "$1/opt/faultline/bin/faultline-agent" ] && [ -x "$1/opt/faultline/bin/faultline-workload" ] &&
    compgen -G "$1/lib/ld-linux-*" >/dev/null
}

lab_pid_alive() { local p; p=$(cat "$1" 2>/dev/null || true); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
lab_running() {  # true when a supervisor or the controller of $LAB_UP is alive
  local f
  for f in "$LAB_UP"/stack/controller.pid "$LAB_UP"/*/supervisor.pid; do
    [ -e "$f" ] && lab_pid_alive "$f" && return 0
  done
  return 1
}
lab_load_env() {
  [ -f "$LAB_UP/lab.env" ] || lab_die "no lab is up ($LAB_UP/lab.env missing): lab.sh up"
  # shellcheck source=/dev/null
  . "$LAB_UP/lab.env"
}
lab_boards() { local d; for d in "$LAB_UP"/*/board.env; do [ -f "$d" ] && basename "$(dirname "$d")"; done; }

# `faultline agents` row of BOARD (empty when unknown).
lab_agent_row() { "$FL_BIN_CLI" agents 2>/dev/null | awk -v b="$1" '$1 == b' || true; }
lab_board_online() { lab_agent_row "$1" | grep -q ' online '; }
lab_board_ok() { lab_agent_row "$1" | grep -Eq ' online .* ok *$'; }
lab_board_needs_check() { lab_agent_row "$1" | grep -q ' needs-check'; }

# Polls "$@" every second until it succeeds or SECONDS pass: lab_poll SECONDS WHAT CMD...
lab_poll() {
  local secs=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { lab_log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 1
  done
}

# Writes the agent.yaml of a board (kernels: vanilla/patched and any custom label).
# x86_64: patched by host-side power control (boot: command), a `broken` label (kexec
# into the vanilla image with a command line that cannot come up, release never seen).
lab_agent_yaml() {
  local arch=$1 board=$2 out=$3 zram=$4 boot=/var/lib/faultline/boot label rel img kargs="" console
  # Built kernels on aarch64: -a, kexec_file_load where the running kernel has it, else
  # kexec_load. From a built (tinyconfig) arm64 kernel kexec_load cannot work (no KEXEC: it
  # needs SUSPEND or HIBERNATION; and bookworm's kexec-tools 2.0.25 refuses its device tree:
  # no /proc/kcore or kallsyms, qemu's /chosen/kaslr-seed kept without RANDOMIZE_BASE) but
  # KEXEC_FILE does; Debian's cloud arm64 kernel has no kexec_file_load.
  local bkargs=""
  case $arch in aarch64) kargs=", kexec_args: [-i]"; bkargs=", kexec_args: [-a, -i]"; console=ttyAMA0 ;; *) console=ttyS0 ;; esac
  {
    echo "board: $board"
    echo "labels: {site: lab, lab_arch: $arch}"
    echo "work_dir: /var/lib/faultline/work"
    echo "state_dir: /var/lib/faultline/agent-state"
    echo "token_file: /etc/faultline/agent.token"
    echo "zram_swap: $zram"
    echo "switch_timeout: 5m"
    echo "kernels:"
    for label in $(cd "$LAB_BOARD_BOOT" && ls release-* | sed 's/^release-//'); do
      rel=$(cat "$LAB_BOARD_BOOT/release-$label")
      img=$boot/vmlinuz-$rel; [ -f "$LAB_BOARD_BOOT/vmlinux-$rel" ] && img=$boot/vmlinux-$rel
      if [ "$arch" = x86_64 ] && [ "$label" = patched ]; then
        echo "  - {label: $label, release: $rel, boot: command, command: [/opt/faultline/bin/lab-power, $label]}"
      else
        echo "  - {label: $label, release: $rel, boot: kexec, kernel: $img, initrd: $boot/initrd.img-$rel, cmdline: running, kexec_exec: systemctl$kargs}"
      fi
      if [ "$arch" = x86_64 ] && [ "$label" = vanilla ]; then
        echo "  - {label: broken, release: $rel-broken, boot: kexec, kernel: $img, initrd: $boot/initrd.img-$rel, cmdline: \"console=$console panic=1 rdinit=/nonexistent faultline.lab=broken\", kexec_exec: systemctl}"
      fi
    done
    # Kernels jobs bring (built by a builder, fetched from the controller): kexec'd with the
    # vanilla kernel's initramfs (a built kernel has what the board needs built in).
    rel=$(cat "$LAB_BOARD_BOOT/release-vanilla")
    echo "built_kernels: {dir: /var/lib/faultline/kernels, max_size: 512M, initrd: $boot/initrd.img-$rel, cmdline: running, kexec_exec: systemctl$bkargs}"
  } >"$out"
}

# Builds one board's disk (both kernels, initramfs with the agent, token, agent.yaml).
lab_prepare_board() {
  local arch=$1 dir=$2 board=$3 zram=$4 bundle ov=$2/overlay label
  rm -rf "$ov"; mkdir -p "$ov/etc/faultline"
  cp "$(fl_agent_token "$board")" "$ov/etc/faultline/agent.token"
  local disk_args=(--force --size "${FL_LAB_DISK_SIZE:-2G}")
  bundle=$(lab_bundle "$arch")
  if [ -z "$bundle" ]; then disk_args+=(--agent); else disk_args+=(--overlay "$bundle"); fi
  # The releases first (agent.yaml goes into the initramfs that lab.sh disk builds).
  LAB_BOARD_BOOT=$dir/releases; rm -rf "$LAB_BOARD_BOOT"; mkdir -p "$LAB_BOARD_BOOT"
  for label in $( { lab_manifest "$arch" "" | awk '$2 != "userland" { print $2 }'
                    [ -r "${FL_LAB_KERNELS_FILE:-}" ] && awk -v a="$arch" '$1 == a { print $2 }' "$FL_LAB_KERNELS_FILE"
                  } | sort -u); do
    lab_kernel "$arch" "$label"
    echo "$LAB_KREL" >"$LAB_BOARD_BOOT/release-$label"
    case $(basename "$LAB_KIMAGE") in vmlinux*) touch "$LAB_BOARD_BOOT/vmlinux-$LAB_KREL" ;; esac
  done
  lab_agent_yaml "$arch" "$board" "$ov/etc/faultline/agent.yaml" "$zram"
  cp "$ov/etc/faultline/agent.yaml" "$dir/agent.yaml"
  "$FL_LAB_DIR/lab.sh" disk "$arch" "$dir/disk.img" "${disk_args[@]}" --overlay "$ov" --keep-boot "$dir/boot"
}

lab_write_env() {
  {
    printf 'export FAULTLINE_CONTROLLER=%q\n' "$FAULTLINE_CONTROLLER"
    printf 'export FAULTLINE_TOKEN=%q\n' "$FAULTLINE_TOKEN"
    printf 'export FL_DATABASE_URL=%q\n' "$FL_DATABASE_URL"
    printf 'export FL_HTTP_PORT=%q FL_GRPC_PORT=%q\n' "$FL_HTTP_PORT" "$FL_GRPC_PORT"
    printf 'export FL_BIN_CLI=%q FL_BIN_CONTROLLER=%q\n' "$FL_BIN_CLI" "$FL_BIN_CONTROLLER"
    [ -z "${FL_PROM_URL:-}" ] || printf 'export FL_PROM_URL=%q\n' "$FL_PROM_URL"
  } >"$LAB_UP/lab.env"
}

cmd_up() {
  local arches=$LAB_ARCHES_ALL kernels=() mem=${FL_LAB_MEM:-1024} smp=${FL_LAB_SMP:-2} prom=0 builder=0
  local zram=${FL_LAB_ZRAM:-256M} timeout=${FL_LAB_UP_TIMEOUT:-900}
  while [ $# -gt 0 ]; do
    case $1 in
      --arches) arches=${2//,/ }; shift 2 ;;
      --kernel) kernels+=("$2"); shift 2 ;;
      --mem) mem=$2; shift 2 ;;
      --smp) smp=$2; shift 2 ;;
      --zram) zram=$2; shift 2 ;;
      --prometheus) prom=1; shift ;;
      --builder) builder=1; shift ;;
      --broken-kernel) shift ;;   # always there on x86_64
      --timeout) timeout=$2; shift 2 ;;
      *) lab_die "up: unknown option $1 (lab.sh help)" ;;
    esac
  done
  local T0=$EPOCHREALTIME arch
  for arch in $arches; do lab_debarch "$arch" >/dev/null; done
  lab_running && lab_die "a lab is already up in $LAB_UP (lab.sh status; lab.sh down)"
  lab_need debugfs e2fsprogs; lab_need psql postgresql-client; lab_need file file
  lab_bins
  local b bundle
  for b in "$FL_BIN_CONTROLLER" "$FL_BIN_CLI"; do [ -x "$b" ] || lab_die "$b missing: ./scripts/build.sh faultline-controller faultline"; done
  for arch in $arches; do
    bundle=$(lab_bundle "$arch")
    if [ -z "$bundle" ]; then
      for b in "$FL_BIN_AGENT" "$FL_BIN_WORKLOAD"; do [ -x "$b" ] || lab_die "$b missing: ./scripts/build.sh faultline-agent faultline-workload"; done
    else
      lab_bundle_ok "$bundle" || lab_die "no agent bundle for $arch in $bundle (scripts/cross-build-agent.sh $arch, or FL_LAB_BUNDLE_$arch=DIR)"
    fi
  done
  # A fresh lab: the previous one's state (stopped) goes.
  rm -rf "$LAB_UP"; mkdir -p "$LAB_UP/stack" "$LAB_UP/bin"; chmod 755 "$LAB_UP" "$LAB_UP/stack"
  # The lab runs copies: a rebuild in build/ while it is up does not pull binaries away.
  for b in FL_BIN_CONTROLLER FL_BIN_CLI FL_BIN_AGENT FL_BIN_WORKLOAD; do
    [ -x "${!b}" ] || continue
    cp "${!b}" "$LAB_UP/bin/" || lab_die "cannot copy ${!b}"
    export "$b=$LAB_UP/bin/$(basename "${!b}")"
  done

  # Custom kernels: [ARCH:]LABEL=IMAGE[,initrd=F][,modules=DIR][,release=R]
  export FL_LAB_KERNELS_FILE=$LAB_UP/kernels
  : >"$FL_LAB_KERNELS_FILE"
  local spec
  for spec in "${kernels[@]}"; do
    local head=${spec%%,*} opts="" karch="" klabel img krel="" kmods="-" kinitrd="-" o
    [ "$head" = "$spec" ] || opts=${spec#*,}
    klabel=${head%%=*}; img=${head#*=}
    case $klabel in *:*) karch=${klabel%%:*}; klabel=${klabel#*:} ;; esac
    [ -n "$klabel" ] && [ "$img" != "$head" ] && [ -f "$img" ] || lab_die "--kernel $spec: LABEL=IMAGE with an existing image"
    img=$(readlink -f "$img")
    local IFS_save=$IFS; IFS=,
    for o in $opts; do
      case $o in
        initrd=*) kinitrd=$(readlink -f "${o#initrd=}"); [ -f "$kinitrd" ] || lab_die "--kernel $spec: no initrd ${o#initrd=}" ;;
        modules=*) kmods=${o#modules=} ;;
        release=*) krel=${o#release=} ;;
        *) lab_die "--kernel $spec: unknown option '$o' (initrd=, modules=, release=)" ;;
      esac
    done
    IFS=$IFS_save
    [ -n "$karch" ] || karch=$(lab_image_arch "$img")
    if [ -z "$karch" ]; then
      [ "$(wc -w <<<"$arches")" = 1 ] && karch=$arches || lab_die "--kernel $spec: cannot tell the image's architecture: write ARCH:$klabel=..."
    fi
    case " $arches " in *" $karch "*) ;; *) lab_die "--kernel $spec: a $karch image, but no $karch board (--arches)" ;; esac
    if [ "$kmods" != - ]; then
      kmods=$(readlink -f "$kmods"); [ -d "$kmods" ] || lab_die "--kernel $spec: no modules directory"
      # DIR may be lib/modules/RELEASE, lib/modules or a root holding lib/modules.
      if [ -d "$kmods/kernel" ] || [ -f "$kmods/modules.order" ]; then
        [ -n "$krel" ] || krel=$(basename "$kmods"); kmods=$(dirname "$kmods")
      else
        [ -d "$kmods/lib/modules" ] && kmods=$kmods/lib/modules
        [ -d "$kmods/usr/lib/modules" ] && kmods=$kmods/usr/lib/modules
        if [ -z "$krel" ] && [ "$(ls "$kmods" | wc -l)" = 1 ]; then krel=$(ls "$kmods"); fi
      fi
    fi
    [ -n "$krel" ] || krel=$(lab_image_release "$img")
    [ -n "$krel" ] || lab_die "--kernel $spec: cannot read the release from the image: add ,release=RELEASE"
    [ "$kmods" = - ] || [ -d "$kmods/$krel" ] || lab_die "--kernel $spec: no $kmods/$krel"
    echo "$karch $klabel $krel $img $kmods $kinitrd" >>"$FL_LAB_KERNELS_FILE"
    lab_log "custom kernel $karch/$klabel: $krel ($img)"
  done

  for arch in $arches; do "$FL_LAB_DIR/lab.sh" fetch "$arch" >/dev/null; done

  # The stack (the guests reach the controller's gRPC port on the host's loopback as 10.0.2.2).
  FL_STATE=$LAB_UP/stack
  # shellcheck source=../local/stack.sh
  source "$FL_ROOT/deploy/local/stack.sh"
  fl_start_postgres
  fl_start_controller
  if [ "$prom" = 1 ]; then
    if command -v prometheus >/dev/null; then fl_start_prometheus && echo "$FL_PROM_PID" >"$FL_STATE/prometheus.pid"
    else lab_log "prometheus not installed: skipped"; fi
  fi
  lab_write_env
  # A builder on this host: builds the kernels jobs bring, for every arch of the lab.
  if [ "$builder" = 1 ]; then
    mkdir -p "$LAB_UP/builder"
    cat >"$LAB_UP/builder/agent.yaml" <<YAML
board: lab-builder
labels: {site: lab, role: builder}
work_dir: $LAB_UP/builder/work
state_dir: $LAB_UP/builder/state
token_file: $(fl_agent_token lab-builder)
kernels: [{label: builder-host, release: running}]
builder: {arches: [${arches// /, }], cache: ${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}}
YAML
    "$FL_BIN_AGENT" --controller "$FAULTLINE_CONTROLLER" --config "$LAB_UP/builder/agent.yaml" \
      --workload-binary "$FL_BIN_WORKLOAD" >>"$LAB_UP/builder/agent.log" 2>&1 </dev/null &
    echo $! >"$LAB_UP/builder/agent.pid"
    lab_log "builder lab-builder (pid $!, arches: $arches, cache ${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}; log $LAB_UP/builder/agent.log)"
  fi

  # The boards' disks, concurrently.
  local accel pids=() archs_started=() board dir
  lab_log "building the boards' disks ($arches): logs in $LAB_UP/lab-*/prepare.log"
  local TD=$EPOCHREALTIME
  for arch in $arches; do
    board=lab-$arch dir=$LAB_UP/lab-$arch
    mkdir -p "$dir"
    ( lab_prepare_board "$arch" "$dir" "$board" "$zram" ) >"$dir/prepare.log" 2>&1 &
    pids+=($!); archs_started+=("$arch")
  done
  local i failed=""
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed="$failed ${archs_started[$i]}"
  done
  if [ -n "$failed" ]; then
    for arch in $failed; do lab_log "--- $arch: $LAB_UP/lab-$arch/prepare.log"; tail -n 15 "$LAB_UP/lab-$arch/prepare.log" >&2; done
    cmd_down >/dev/null 2>&1 || true
    lab_die "building the disk failed for:$failed"
  fi
  lab_log "disks ready in $(lab_secs "$TD") s"

  # Supervisors: power on.
  for arch in $arches; do
    board=lab-$arch dir=$LAB_UP/lab-$arch
    accel=$(lab_accel "$arch")
    {
      printf 'ARCH=%q\nBOARD=%q\nDEFAULT_LABEL=vanilla\nMEM=%q\nSMP=%q\nACCEL=%q\n' "$arch" "$board" "$mem" "$smp" "$accel"
      printf 'APPEND=%q\n' " faultline.board=$board faultline.controller=10.0.2.2:$FL_GRPC_PORT faultline.virt_accel=$accel"
    } >"$dir/board.env"
    rm -f "$dir/stop"
    setsid "$FL_LAB_DIR/supervise.sh" "$dir" </dev/null >>"$dir/supervisor.log" 2>&1 &
    echo $! >"$dir/supervisor.pid"
  done
  local pending=$arches t_on=$EPOCHREALTIME deadline=$(( $(date +%s) + timeout ))
  while [ -n "$pending" ]; do
    local still=""
    for arch in $pending; do
      if lab_board_online "lab-$arch"; then
        lab_log "board lab-$arch online $(lab_secs "$t_on") s after power-on"
      else
        lab_pid_alive "$LAB_UP/lab-$arch/supervisor.pid" || { cmd_down >/dev/null 2>&1 || true; lab_die "the supervisor of lab-$arch died ($LAB_UP/lab-$arch/supervisor.log)"; }
        still="$still $arch"
      fi
    done
    pending=$still
    [ -z "$pending" ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for arch in $pending; do lab_log "--- lab-$arch console (tail)"; tail -n 25 "$LAB_UP/lab-$arch/console.log" >&2 || true; done
      lab_die "boards not online after ${timeout}s:$pending (the lab is left up: lab.sh status / lab.sh down)"
    fi
    sleep 1
  done
  "$FL_BIN_CLI" agents >&2
  lab_log "lab up in $(lab_secs "$T0") s; state in $LAB_UP; stop it with: lab.sh down"
  cat "$LAB_UP/lab.env"
}

lab_secs() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

cmd_env() { lab_load_env; cat "$LAB_UP/lab.env"; }

cmd_status() {
  lab_load_env
  "$FL_BIN_CLI" agents || true
  local board dir
  for board in $(lab_boards); do
    dir=$LAB_UP/$board
    printf '%-14s supervisor %-8s qemu %-8s last: %s\n' "$board" \
      "$(lab_pid_alive "$dir/supervisor.pid" && cat "$dir/supervisor.pid" || echo down)" \
      "$(lab_pid_alive "$dir/qemu.pid" && cat "$dir/qemu.pid" || echo -)" \
      "$(grep -a ' FLLAB-HOST \(launch\|exit\)' "$dir/console.log" 2>/dev/null | tail -n1 | cut -d' ' -f3- || true)"
  done
  printf '%-14s %s\n' controller "$(lab_pid_alive "$LAB_UP/stack/controller.pid" && cat "$LAB_UP/stack/controller.pid" || echo down)"
  [ ! -f "$LAB_UP/stack/prometheus.pid" ] ||
    printf '%-14s %s %s\n' prometheus "$(lab_pid_alive "$LAB_UP/stack/prometheus.pid" && cat "$LAB_UP/stack/prometheus.pid" || echo down)" "${FL_PROM_URL:-}"
}

cmd_down() {
  [ -d "$LAB_UP" ] || { lab_log "no lab in $LAB_UP"; return 0; }
  local dir p
  for dir in "$LAB_UP"/lab-*/; do
    [ -d "$dir" ] || continue
    touch "$dir/stop"
    p=$(cat "$dir/supervisor.pid" 2>/dev/null || true)
    [ -z "$p" ] || kill -TERM "$p" 2>/dev/null || true
  done
  for dir in "$LAB_UP"/lab-*/; do
    [ -d "$dir" ] || continue
    for _ in $(seq 1 100); do lab_pid_alive "$dir/supervisor.pid" || break; sleep 0.1; done
    for p in "$dir/supervisor.pid" "$dir/qemu.pid"; do
      lab_pid_alive "$p" && { kill -KILL "$(cat "$p")" 2>/dev/null || true; }
    done
  done
  if lab_pid_alive "$LAB_UP/builder/agent.pid"; then
    p=$(cat "$LAB_UP/builder/agent.pid"); kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  fi
  FL_STATE=$LAB_UP/stack
  if [ -d "$FL_STATE" ]; then
    # shellcheck source=../local/stack.sh
    source "$FL_ROOT/deploy/local/stack.sh"
    FL_PROM_PID=$(cat "$FL_STATE/prometheus.pid" 2>/dev/null || true)
    FL_CONTROLLER_PID=$(cat "$FL_STATE/controller.pid" 2>/dev/null || true)
    fl_stop_pid "$FL_PROM_PID"
    fl_stop_pid "$FL_CONTROLLER_PID"
    [ ! -d "$FL_STATE/pg" ] || "$FL_ROOT/scripts/pg-throwaway.sh" stop "$FL_STATE/pg" || true
  fi
  lab_log "lab down (state kept in $LAB_UP)"
}

cmd_study() {
  local spec=${1:?usage: lab.sh study SPEC.yaml}
  [ -f "$spec" ] || lab_die "no spec $spec"
  lab_load_env
  local t0=$EPOCHREALTIME job rc=0
  job=$("$FL_BIN_CLI" submit "$spec") || lab_die "submit failed"
  lab_log "job $job submitted"
  timeout "${FL_LAB_TIMEOUT:-3600}" "$FL_BIN_CLI" watch "$job" || rc=$?
  lab_log "job $job: $(lab_secs "$t0") s (watch exit $rc)"
  "$FL_BIN_CLI" agents
  "$FL_BIN_CLI" report "$job" || true
  lab_timings
  return "$rc"
}

# lab.sh clear-needs-check BOARD: the operator has looked at the board. Powers it off and
# on (the supervisor passes faultline.clear_needs_check, guest/init runs
# faultline-agent --clear-needs-check on the board's disk), waits until it is back ok.
cmd_clear_needs_check() {
  local board=${1:?usage: lab.sh clear-needs-check BOARD} dir q t0=$EPOCHREALTIME
  lab_load_env
  dir=$LAB_UP/$board
  [ -f "$dir/board.env" ] || lab_die "no board $board in $LAB_UP ($(lab_boards | tr '\n' ' '))"
  lab_pid_alive "$dir/supervisor.pid" || lab_die "$board: its supervisor is not running"
  date +%s%N >"$dir/clear-request"
  q=$(cat "$dir/qemu.pid" 2>/dev/null || true)
  [ -z "$q" ] || kill -TERM "$q" 2>/dev/null || true
  lab_log "$board: power-cycling with faultline.clear_needs_check"
  lab_poll "${FL_LAB_CLEAR_TIMEOUT:-600}" "$board to come back ok" lab_board_ok "$board" ||
    { lab_agent_row "$board" >&2; lab_die "$board is not back ok"; }
  lab_log "$board: ok again after $(lab_secs "$t0") s"
}

# Per board, from its console (every line has the host's time): each power-on (supervisor
# launch -> agent start) and each kernel switch (the agent's kernel_switch_ordered -> the
# new boot's kernel_switch_verified or needs_check), with the method seen on the console
# (FLLAB systemctl-kexec: kexec in the guest; FLLAB power-cycle: host-side power control).
# Lines: "BOARD boot REASON - SECONDS RELEASE ok" and
#        "BOARD switch METHOD LABEL SECONDS RELEASE ok|needs-check|fallback".
lab_timings() {
  local board
  for board in $(lab_boards); do
    awk -v b="$board" '
      function val(key,   i) { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) return substr($i, length(key) + 2); return "" }
      / FLLAB-HOST launch / { tl = $1; reason = val("reason"); if (to) fell = (method == "kexec"); else boot = 1 }
      / event=kernel_switch_ordered / { to = $1; label = val("label"); method = "?"; fell = 0 }
      / FLLAB systemctl-kexec / { if (to) method = "kexec" }
      / FLLAB power-cycle / { if (to) method = "power-cycle" }
      / FLLAB init-start / { rel = val("release") }
      / FLLAB agent-start / { if (boot) { printf "%s boot %s - %.1f %s ok\n", b, reason, $1 - tl, rel; boot = 0 } }
      / event=kernel_switch_verified / { if (to) printf "%s switch %s %s %.1f %s ok\n", b, method, label, $1 - to, rel; to = 0 }
      / event=needs_check / { if (to) printf "%s switch %s %s %.1f %s needs-check%s\n", b, method, label, $1 - to, rel, (fell ? "(fallback)" : ""); to = 0 }
    ' "$LAB_UP/$board/console.log"
  done
}
cmd_timings() { lab_timings; }
