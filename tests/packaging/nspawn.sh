# A Debian container with systemd as PID 1, for the packaging test (sourced):
#   ct_rootfs TAR            a bookworm rootfs tarball (mmdebstrap), cached by its recipe
#   ct_start NAME ROOTFS [nspawn args...]   boot it (systemd-nspawn, host network,
#                            --volatile=overlay: the rootfs is never written)
#   ct_wait NAME [SECONDS]   until `systemctl is-system-running` says running or degraded
#   ct_exec NAME CMD...      run in the container's namespaces (stays in the test's cgroup)
#   ct_stop NAME             poweroff (SIGRTMIN+3 to its PID 1), SIGKILL after 30 s, then
#                            remove the container's cgroups
# Works where PID 1 is not systemd (no machined, no D-Bus on the host) and on cgroup v1:
#   - nspawn mounts the v1 hierarchies read-only; the container's PID 1 is a shim that
#     remounts them writable (in the container's mount namespace) and execs systemd, so
#     units get real v1 memory cgroups;
#   - each container gets its own cgroup ct-NAME below the caller's in every hierarchy, or
#     nspawn --keep-unit leaves /payload and /supervisor at the hierarchy roots and the
#     container's systemd writes its slices into the host's;
#   - a SIGKILLed nspawn orphans the container's systemd: it counts as alive while its
#     cgroup is populated.
CT_STATE=${CT_STATE:?CT_STATE: a directory for the logs and pids of the containers}

ct_shim() {  # the PID 1 shim, installed into the rootfs as /usr/local/sbin/ct-init
  cat <<'EOF'
#!/bin/sh
# PID 1 of a faultline packaging-test container: make the v1 cgroup hierarchies writable
# (nspawn mounts them read-only), then become systemd (still PID 1).
for c in /sys/fs/cgroup/*/; do
  case "$c" in */unified/|*/systemd/) continue;; esac
  mount -o remount,bind,rw "$c" 2>/dev/null
done
exec /lib/systemd/systemd "$@"
EOF
}

ct_cgdirs() {  # NAME: one directory per mounted hierarchy, <mount><caller's cgroup>/ct-NAME
  local id ctl path mnt
  while IFS=: read -r id ctl path; do
    if [ -z "$ctl" ]; then mnt=/sys/fs/cgroup/unified; else mnt=/sys/fs/cgroup/${ctl#name=}; fi
    [ -d "$mnt" ] && echo "${mnt}${path%/}/ct-$1"
  done </proc/self/cgroup
}

ct_start() {  # NAME ROOTFS [nspawn args...]
  local name=$1 root=$2; shift 2
  local d=$CT_STATE/$name c
  mkdir -p "$d"; : >"$d/log"; rm -f "$d/rc" "$d/leader" "$d/nspawn.pid"
  ct_cgdirs "$name" >"$d/cgdirs"
  while read -r c; do
    mkdir -p "$c"
    case $c in /sys/fs/cgroup/cpuset/*)
      cat "$c/../cpuset.cpus" >"$c/cpuset.cpus"; cat "$c/../cpuset.mems" >"$c/cpuset.mems" ;;
    esac
  done <"$d/cgdirs"
  date +%s.%N >"$d/t0"
  ( while read -r c; do echo $BASHPID >"$c/cgroup.procs"; done <"$d/cgdirs"
    setsid systemd-nspawn --quiet --register=no --keep-unit --console=read-only \
      --machine="$name" --directory="$root" --volatile=overlay --kill-signal=SIGRTMIN+3 \
      "$@" /usr/local/sbin/ct-init </dev/null >>"$d/log" 2>&1 &
    echo $! >"$d/nspawn.pid"; wait $!; echo $? >"$d/rc"
  ) &
  while [ ! -s "$d/nspawn.pid" ]; do sleep 0.01; done
}

ct_leader() {  # NAME: the host pid of the container's systemd
  local np c
  np=$(cat "$CT_STATE/$1/nspawn.pid")
  for c in $(pgrep -P "$np"); do
    if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] &&
       [ "$(readlink "/proc/$c/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]; then
      echo "$c"; return 0
    fi
  done
  return 1
}

ct_wait() {  # NAME [SECONDS]
  local name=$1 d=$CT_STATE/$1 leader st end=$((SECONDS + ${2:-120}))
  while [ $SECONDS -lt $end ]; do
    kill -0 "$(cat "$d/nspawn.pid")" 2>/dev/null || { cat "$d/log" >&2; return 1; }
    if leader=$(ct_leader "$name"); then
      echo "$leader" >"$d/leader"
      st=$(timeout 30 nsenter -t "$leader" -a systemctl is-system-running --wait 2>/dev/null) || true
      case $st in running|degraded)
        CT_BOOT_SECONDS=$(echo "$(date +%s.%N) - $(cat "$d/t0")" | bc); return 0 ;;
      esac
    fi
    sleep 0.1
  done
  return 1
}

ct_exec() {  # NAME CMD...
  local leader; leader=$(cat "$CT_STATE/$1/leader"); shift
  nsenter -t "$leader" -a -- "$@"
}

ct_stop() {  # NAME
  local d=$CT_STATE/$1 np leader ucg c end=$((SECONDS + 30))
  [ -f "$d/nspawn.pid" ] || return 0
  np=$(cat "$d/nspawn.pid"); leader=$(cat "$d/leader" 2>/dev/null || true)
  ucg=$(grep /unified/ "$d/cgdirs" || true)
  ct_alive() { kill -0 "$np" 2>/dev/null || grep -qs 'populated 1' "$ucg/cgroup.events"; }
  if ct_alive; then
    if [ -n "$leader" ]; then kill -RTMIN+3 "$leader" 2>/dev/null || kill -TERM "$np"; else kill -TERM "$np"; fi
    while ct_alive && [ $SECONDS -lt $end ]; do sleep 0.1; done
    if ct_alive; then
      kill -KILL "$np" 2>/dev/null || true
      [ -f "$ucg/payload/cgroup.kill" ] && echo 1 >"$ucg/payload/cgroup.kill"
      sleep 1
    fi
  fi
  end=$((SECONDS + 10))
  while [ ! -e "$d/rc" ] && [ $SECONDS -lt $end ]; do sleep 0.05; done
  while read -r c; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done <"$d/cgdirs"
  rm -f "$d/nspawn.pid"
}
