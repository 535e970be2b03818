#!/usr/bin/env bash
# The Debian packages installed and run under a real systemd PID 1: a bookworm container
# (mmdebstrap, systemd-nspawn; tests/packaging/nspawn.sh) on this machine's network, with
# a throwaway PostgreSQL on the host. In order:
#   1. `apt install ./faultline*.deb` of an earlier version (the same build repacked with
#      a lower version, 0.1.0+gitN.H~prev-1); both units enabled; unconfigured, each fails
#      once with a journal line that says what to set, and installing still succeeds;
#   2. the controller configured as an operator does (controller.env, TLS files, a drop-in
#      for the ports): active, /readyz 200 from the host;
#   3. agent misconfigurations, each a failed unit (exit 2, not restarted) whose journal
#      says what to do: no token file, a state_dir the unit may not write, a cgroup v2
#      parent on this cgroup v1 board;
#   4. the agent configured (token, TLS CA, two labels of the running kernel): online; an
#      A/A study through the packaged CLI succeeds; a run OOM-killed in its memcg leaves the
#      unit active and unrestarted (OOMPolicy=continue); `systemctl stop` mid-run ends the
#      workload and removes its cgroup within TimeoutStopSec; `systemctl restart` comes
#      back online; a crash (SIGKILL) is restarted, a SIGTERM from outside is not;
#   5. upgrade to this build's version with the controller down and a result in the agent's
#      spool: the edited conffiles and the state directory (spool included) kept byte for
#      byte, the agent restarted on the new binary; the controller back, the spooled
#      result delivered (first attempt) and its job succeeded;
#   6. purge of the agent removes its state; remove of the controller keeps its config.
# Usage: systemd_test.sh REPO_ROOT
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
build=${FAULTLINE_BUILD_DIR:-$ROOT/build}
packages=${FAULTLINE_PACKAGE_DIR:-$build/packages}

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, systemd-nspawn, cgroups)"
for tool in mmdebstrap systemd-nspawn nsenter openssl bc; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/install-deps.sh)"
done
[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] || [ -e /sys/fs/cgroup/cgroup.controllers ] ||
  skip "no memory cgroup on this machine"

new_debs=()
for p in faultline-controller faultline-agent faultline; do
  f=$(ls -t "$packages/${p}_"*_amd64.deb 2>/dev/null | head -1)
  [ -n "$f" ] || { echo "FAIL: no $p package in $packages (packaging_build makes them)" >&2; exit 1; }
  new_debs+=("$f")
done
new_version=$(dpkg-deb -f "${new_debs[0]}" Version)
old_version="${new_version%-*}~prev-1"
dpkg --compare-versions "$old_version" lt "$new_version" || { echo "FAIL: version order" >&2; exit 1; }

state=$(mktemp -d /tmp/faultline-packaging-XXXXXX)
chmod 755 "$state"
export CT_STATE=$state/ct
source "$(dirname "$0")/nspawn.sh"
# shellcheck source=rootfs.sh
source "$(dirname "$0")/rootfs.sh"
CT=fl-pkg-$$
PG_DIR=$state/pg
cleanup() {
  if [ -n "${FL_PACKAGING_KEEP:-}" ]; then  # debugging: leave it all up
    echo "kept: CT_STATE=$CT_STATE container $CT (source tests/packaging/nspawn.sh; ct_stop $CT)" >&2
    return
  fi
  ct_stop "$CT" >/dev/null 2>&1 || true
  "$ROOT/scripts/pg-throwaway.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  if [ -f "$CT_STATE/$CT/leader" ]; then
    echo "--- journal (faultline units)" >&2
    ct_exec "$CT" journalctl -b --no-pager -n 60 -u faultline-controller -u faultline-agent >&2 || true
  fi
  exit 1
}
pass() { echo "ok: $*"; }
in_ct() { ct_exec "$CT" "$@"; }
# systemctl show -P for a unit
prop() { in_ct systemctl show -P "$2" "$1"; }
journal() { in_ct journalctl -b --no-pager -o cat -u "$1"; }
wait_until() {  # SECONDS CMD...: poll, no fixed sleeps
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}

# ------------------------------------------------------------------ the container ----
recipe="minbase systemd,systemd-sysv,dbus,libpam-systemd,ca-certificates,procps,curl $(ct_shim | sha256sum)"
key=$(echo "$recipe $DEBIAN_MIRROR" | sha256sum | cut -c1-16)
tarball=$ROOTFS_CACHE/rootfs-bookworm-$key.tar
ct_shim >"$state/ct-init"
rootfs_cached "$tarball" "$state/mmdebstrap.log" bookworm "$DEBIAN_MIRROR" --quiet --variant=minbase \
  --include=systemd,systemd-sysv,dbus,libpam-systemd,ca-certificates,procps,curl \
  --customize-hook="upload $state/ct-init /usr/local/sbin/ct-init" \
  --customize-hook='chmod 755 "$1/usr/local/sbin/ct-init"' \
  --customize-hook='echo faultline-pkg-test >"$1/etc/hostname"'
rootfs_extract "$tarball" "$state/rootfs"

# The earlier version: this build's packages with a lower version number.
mkdir -p "$state/debs/old" "$state/debs/new" "$state/repack"
old_debs=()
for f in "${new_debs[@]}"; do
  cp "$f" "$state/debs/new/"
  x=$state/repack/$(basename "$f")
  dpkg-deb -R "$f" "$x"
  sed -i "s/^Version: .*/Version: $old_version/" "$x/DEBIAN/control"
  out=$state/debs/old/$(basename "${f/$new_version/$old_version}")
  dpkg-deb --root-owner-group -b "$x" "$out" >/dev/null
  old_debs+=("/var/tmp/debs/old/$(basename "$out")")
done

url=$("$ROOT/scripts/pg-throwaway.sh" start "$PG_DIR")
grpc=$("$ROOT/scripts/free-port.sh"); http=$("$ROOT/scripts/free-port.sh")
while [ "$http" = "$grpc" ]; do http=$("$ROOT/scripts/free-port.sh"); done

mkdir -p "$state/tls" "$state/agent-cache" "$state/agent-state"
# The agent's directories on a real disk, as on a board: the container's /var is an
# overlay on tmpfs (--volatile=overlay), whose pages a run's memcg would be charged for
# and could not reclaim (the first runs here were all OOM-killed, shmem-rss 114 MB).
ct_start "$CT" "$state/rootfs" --bind-ro="$state/debs:/var/tmp/debs" --bind-ro="$state/tls:/var/tmp/tls" \
  --bind="$state/agent-cache:/var/cache/faultline-agent" --bind="$state/agent-state:/var/lib/faultline-agent"
ct_wait "$CT" 120 || fail "the container did not reach multi-user"
[ "$(in_ct cat /proc/1/comm)" = systemd ] || fail "PID 1 in the container is not systemd"
pass "bookworm booted with systemd as PID 1 in $(printf %.1f "$CT_BOOT_SECONDS") s (cgroup v1 board: $(in_ct sh -c 'test -w /sys/fs/cgroup/memory/cgroup.procs && echo memory writable'))"

# ------------------------------------------------ 1. install the earlier version ----
t0=$SECONDS
in_ct sh -c 'apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"' \
  sh "${old_debs[@]}" >"$state/apt-install.log" 2>&1 || { tail -20 "$state/apt-install.log" >&2; fail "apt install"; }
for u in faultline-controller faultline-agent; do
  [ "$(in_ct systemctl is-enabled $u)" = enabled ] || fail "$u is not enabled after install"
done
[ "$(in_ct dpkg-query -W -f '${Version}' faultline-agent)" = "$old_version" ] || fail "version"
# A unit is failed, by a configuration error (exit 2) and not restarted; the journal line
# matching PATTERN says so.
expect_failure() {  # UNIT WHAT PATTERN
  local unit=$1 what=$2 pattern=$3 line
  wait_until 30 sh -c "[ \"\$(nsenter -t $(cat "$CT_STATE/$CT/leader") -a systemctl is-failed $unit)\" = failed ]" ||
    fail "$what: $unit is $(in_ct systemctl is-active $unit), not failed"
  [ "$(prop "$unit" ExecMainStatus)" = 2 ] || fail "$what: exit status $(prop "$unit" ExecMainStatus)"
  [ "$(prop "$unit" NRestarts)" = 0 ] || fail "$what: restarted $(prop "$unit" NRestarts) times"
  line=$(journal "$unit" | grep -E "$pattern" | tail -1) || fail "$what: no journal line matching '$pattern'"
  pass "$what: $unit failed (exit 2, not restarted); journal: ${line:0:230}"
}
restart() {  # UNIT
  in_ct systemctl reset-failed "$1" 2>/dev/null || true
  in_ct systemctl restart "$1" 2>/dev/null || true
}
pass "apt install of $old_version in $((SECONDS - t0)) s: both units enabled, the system user $(in_ct id faultline)"
expect_failure faultline-controller "controller, no database URL" "FAULTLINE_DATABASE_URL is required"
expect_failure faultline-agent "agent, no board name" "board \\(.*\\): is required"

# ------------------------------------------------ 2. the controller, configured ----
test_tls "$state/tls"
in_ct sh -c "sed -i 's|^#FAULTLINE_DATABASE_URL=.*|FAULTLINE_DATABASE_URL=$url|' /etc/faultline/controller/controller.env &&
  mkdir -p /etc/systemd/system/faultline-controller.service.d &&
  printf '[Service]\nExecStart=\nExecStart=/usr/bin/faultline-controller --grpc-listen 127.0.0.1:$grpc --http-listen 127.0.0.1:$http --tls-cert /etc/faultline/controller/server.pem --tls-key /etc/faultline/controller/server.key\n' \
    >/etc/systemd/system/faultline-controller.service.d/ports.conf && systemctl daemon-reload" ||
  fail "configuring the controller"
restart faultline-controller
expect_failure faultline-controller "controller, no TLS files" "event=tls_failed .*server.pem"
in_ct install -m 0640 -g faultline /var/tmp/tls/server.key /var/tmp/tls/server.pem /etc/faultline/controller/
restart faultline-controller
wait_until 60 curl -fsS "http://127.0.0.1:$http/readyz" || fail "/readyz of the configured controller"
[ "$(prop faultline-controller ActiveState)" = active ] || fail "controller not active"
ctl_user=$(in_ct sh -c 'ps -o user= -p "$(systemctl show -P MainPID faultline-controller)"')
[ "$ctl_user" = faultline ] || fail "the controller runs as $ctl_user"
pass "controller active as user $ctl_user (TLS files group faultline, 0640), /readyz 200 from the host"

ctl() { in_ct env FAULTLINE_DATABASE_URL="$url" faultline-controller "$@"; }
user_token=$(ctl tokens create --name pkg-user --role user) || fail "tokens create (user)"
agent_token=$(ctl tokens create --name pkg-agent --role agent --board pkg-board) || fail "tokens create (agent)"
cli() {
  in_ct env FAULTLINE_TOKEN="$user_token" faultline --controller "127.0.0.1:$grpc" \
    --tls-ca /var/tmp/tls/ca.pem --tls-server-name localhost "$@"
}

# ------------------------------------------------ 3. agent misconfigurations ----
agent_yaml() {  # extra lines appended to a working agent.yaml
  in_ct sh -c "cat >/etc/faultline/agent.yaml <<EOF
board: pkg-board
labels: {site: packaging-test}
work_dir: /var/cache/faultline-agent
state_dir: /var/lib/faultline-agent
cgroup_parent: delegated
token_file: /etc/faultline/agent.token
tls_ca: /etc/faultline/ca.pem
tls_server_name: localhost
switch_timeout: 10m
kernels:
  - {label: vanilla, release: running, boot: none}
  - {label: vanilla-again, release: running, boot: none}
$1
EOF"
}
in_ct sh -c "install -m 0644 /var/tmp/tls/ca.pem /etc/faultline/ca.pem &&
  echo FAULTLINE_CONTROLLER=127.0.0.1:$grpc >/etc/default/faultline-agent" || fail "agent files"
expect_agent_failure() {  # WHAT PATTERN
  restart faultline-agent
  expect_failure faultline-agent "$1" "$2"
}
agent_yaml ""
expect_agent_failure "no token file" "event=no_token .*fix="
in_ct sh -c "printf '%s\n' '$agent_token' >/etc/faultline/agent.token && chmod 600 /etc/faultline/agent.token"
agent_yaml "" && in_ct sed -i 's|^state_dir: .*|state_dir: /srv/faultline-state|' /etc/faultline/agent.yaml
expect_agent_failure "state_dir outside the unit's writable paths" "field=state_dir .*fix="
agent_yaml "" && in_ct sed -i 's|^cgroup_parent: .*|cgroup_parent: /sys/fs/cgroup/system.slice/faultline-agent.service|' /etc/faultline/agent.yaml
expect_agent_failure "a cgroup v2 parent on this v1 board" "this board has cgroup v1"

# ------------------------------------------------ 4. a study through the units ----
agent_yaml ""
in_ct systemctl reset-failed faultline-agent; in_ct systemctl restart faultline-agent
online() { cli agents 2>/dev/null | awk '$1 == "pkg-board" && /online/ { f = 1 } END { exit !f }'; }
wait_until 60 online || fail "the agent did not come online"
pass "agent active as a unit, online at the controller over TLS"

in_ct sh -c 'cat >/var/tmp/aa.yaml <<EOF
name: packaging-aa
benchmark: filemap-thrash
duration: 1s
repetitions: 3
kernels: [vanilla, vanilla-again]
min_effect: 0.5
memcg: {memory_max: 256M}
params: {file_size: 8M, threads: 2}
EOF'
t0=$SECONDS
job=$(cli submit /var/tmp/aa.yaml) || fail "submit"
cli watch "$job" >"$state/watch.log" 2>&1 || { cat "$state/watch.log" >&2; fail "study $job did not succeed"; }
cli report "$job" >"$state/report.txt" 2>&1 || fail "report"
grep -q "no-change\|inconclusive" "$state/report.txt" || { cat "$state/report.txt" >&2; fail "report has no verdict"; }
pass "A/A study $job through the packaged CLI, controller and agent: succeeded in $((SECONDS - t0)) s; $(grep -o 'no-change\|inconclusive' "$state/report.txt" | head -1)"

# OOM in a run's memcg: 32 threads' 2M memfds (64M of shmem, no swap) in a 16M memcg. The
# unit stays active, not restarted. thp: advise, as the container's /sys is read-only (the
# default, force, sets shmem_enabled where a kernel has the per-size file, as 6.18 does).
agent_pid=$(prop faultline-agent MainPID)
in_ct sh -c 'cat >/var/tmp/oom.yaml <<EOF
name: packaging-oom
benchmark: shmem-folio-fault
duration: 1s
repetitions: 1
kernels: [vanilla]
memcg: {memory_max: 16M, swap_max: 0}
params: {threads: 32, thp: advise}
EOF'
oomjob=$(cli submit /var/tmp/oom.yaml) || fail "submit oom"
cli watch "$oomjob" >"$state/oom.log" 2>&1 || true
reason=$(psql -XAtq "$url" -c "SELECT state || ': ' || coalesce(failure_reason, '') FROM runs WHERE job_id = $oomjob")
[ "$reason" = "failed: oom_killed" ] || { cat "$state/oom.log" >&2; fail "the OOM run is '$reason', not failed: oom_killed"; }
[ "$(prop faultline-agent ActiveState)" = active ] || fail "the agent unit is $(prop faultline-agent ActiveState) after an OOM kill"
[ "$(prop faultline-agent MainPID)" = "$agent_pid" ] || fail "the agent was restarted after an OOM kill"
pass "a run OOM-killed in its 16M memcg: failed: oom_killed; the unit stayed active, same main pid $agent_pid (OOMPolicy=$(prop faultline-agent OOMPolicy))"

# systemctl stop mid-run: the workload ends and its cgroup goes.
in_ct sh -c 'sed -e "s/^name: .*/name: packaging-long/; s/^duration: .*/duration: 60s/; s/^repetitions: .*/repetitions: 1/" /var/tmp/aa.yaml >/var/tmp/long.yaml'
longjob=$(cli submit /var/tmp/long.yaml) || fail "submit long"
running() { in_ct pgrep -f /usr/bin/faultline-workload >/dev/null; }
wait_until 60 running || fail "no workload started for job $longjob"
t0=$(date +%s.%N)
in_ct systemctl stop faultline-agent || fail "systemctl stop"
took=$(echo "$(date +%s.%N) - $t0" | bc)
in_ct pgrep -f /usr/bin/faultline-workload >/dev/null && fail "a workload survived systemctl stop"
left=$(in_ct sh -c 'ls -d /sys/fs/cgroup/memory/faultline/run-* 2>/dev/null | wc -l')
[ "$left" = 0 ] || fail "$left run cgroups left after systemctl stop"
# TimeoutStopSec=60s: a stop that needed SIGKILL would take that long.
awk -v t="$took" 'BEGIN { exit !(t < 55) }' || fail "stop took $took s (TimeoutStopSec is 60 s)"
pass "systemctl stop mid-run: inactive in $(printf %.1f "$took") s, no workload and no run cgroup left"
in_ct systemctl start faultline-agent
wait_until 60 online || fail "the agent did not come back after start"
in_ct systemctl restart faultline-agent
wait_until 60 online || fail "the agent did not come back after restart"
cli cancel "$longjob" >/dev/null 2>&1 || true
pass "systemctl start and restart: online again"

# Restart=on-failure as the unit documents it: a crash (SIGKILL) is restarted after
# RestartSec=10s; a SIGTERM that is not systemd's own stop (a board's boot command taking
# the board down, as a shutdown would) ends the agent cleanly and is not restarted, so the
# next life is the one after the reboot.
restarts=$(prop faultline-agent NRestarts)
in_ct systemctl kill --kill-whom=main --signal=SIGKILL faultline-agent
restarted() { [ "$(prop faultline-agent NRestarts)" -gt "$restarts" ] && [ "$(prop faultline-agent ActiveState)" = active ]; }
wait_until 40 restarted || fail "the agent was not restarted after SIGKILL (NRestarts $(prop faultline-agent NRestarts))"
wait_until 60 online || fail "the agent did not come back online after a crash"
restarts=$(prop faultline-agent NRestarts)
in_ct systemctl kill --kill-whom=main --signal=SIGTERM faultline-agent
ended() { [ "$(prop faultline-agent ActiveState)" = inactive ]; }
wait_until 60 ended || fail "the agent is $(prop faultline-agent ActiveState) after SIGTERM"
[ "$(prop faultline-agent ExecMainStatus)" = 0 ] || fail "SIGTERM: exit status $(prop faultline-agent ExecMainStatus)"
[ "$(prop faultline-agent NRestarts)" = "$restarts" ] || fail "the agent was restarted after a clean SIGTERM"
in_ct systemctl start faultline-agent
wait_until 60 online || fail "the agent did not come back after start"
pass "Restart=on-failure: SIGKILL restarted after RestartSec and back online; a SIGTERM from outside systemd's stop: exit 0, inactive, not restarted"

# ------------------------------------------------ 5. upgrade ----
# A result the agent could not deliver waits in its spool through the upgrade: the
# controller stops while a run is under way and stays down (masked for this boot, so the
# upgrade's postinst cannot start it) until the upgrade is done.
in_ct sh -c 'sed -e "s/^name: .*/name: packaging-spool/; s/^duration: .*/duration: 3s/; s/^repetitions: .*/repetitions: 1/" /var/tmp/aa.yaml >/var/tmp/spool.yaml'
spooljob=$(cli submit /var/tmp/spool.yaml) || fail "submit spool"
wait_until 60 running || fail "no workload started for job $spooljob"
in_ct systemctl stop faultline-controller
in_ct systemctl mask --runtime faultline-controller >/dev/null 2>&1
spooled() { in_ct sh -c 'ls /var/lib/faultline-agent/spool/ 2>/dev/null | grep -q .'; }
wait_until 60 spooled || fail "no result in the agent's spool while the controller is down"
spool_files=$(in_ct sh -c 'ls /var/lib/faultline-agent/spool | wc -l')
in_ct sh -c 'echo kept >/var/lib/faultline-agent/upgrade-marker'
before_cfg=$(in_ct sha256sum /etc/faultline/agent.yaml /etc/default/faultline-agent /etc/faultline/controller/controller.env)
before_state=$(in_ct sh -c 'cd /var/lib/faultline-agent && find . -type f | sort | xargs sha256sum')
ctl_pid=$(prop faultline-controller MainPID); agent_pid=$(prop faultline-agent MainPID)
new_in_ct=()
for f in "${new_debs[@]}"; do new_in_ct+=("/var/tmp/debs/new/$(basename "$f")"); done
t0=$SECONDS
in_ct sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" </dev/null' sh "${new_in_ct[@]}" \
  >"$state/apt-upgrade.log" 2>&1 || { tail -20 "$state/apt-upgrade.log" >&2; fail "apt upgrade"; }
for p in faultline-controller faultline-agent faultline; do
  [ "$(in_ct dpkg-query -W -f '${Version}' $p)" = "$new_version" ] || fail "$p not upgraded"
done
[ "$(in_ct sha256sum /etc/faultline/agent.yaml /etc/default/faultline-agent /etc/faultline/controller/controller.env)" = "$before_cfg" ] ||
  fail "the upgrade changed an edited conffile"
[ "$(in_ct sh -c 'cd /var/lib/faultline-agent && find . -type f | sort | xargs sha256sum')" = "$before_state" ] ||
  fail "the upgrade changed the agent's state directory"
[ "$(prop faultline-agent MainPID)" != "$agent_pid" ] || fail "the agent was not restarted"
[ "$(prop faultline-agent ActiveState)" = active ] || fail "the agent is not active after the upgrade"
pass "upgrade $old_version -> $new_version in $((SECONDS - t0)) s: conffiles and $(echo "$before_state" | wc -l) state files ($spool_files spooled result(s) among them) kept byte for byte; the agent restarted on the new binary"
in_ct systemctl unmask --runtime faultline-controller >/dev/null 2>&1
in_ct systemctl start faultline-controller
wait_until 60 curl -fsS "http://127.0.0.1:$http/readyz" || fail "/readyz after the upgrade"
[ "$(prop faultline-controller MainPID)" != "$ctl_pid" ] || fail "the controller was not restarted"
wait_until 60 online || fail "the agent is not online after the upgrade"
cli watch "$spooljob" >"$state/spool-watch.log" 2>&1 || { cat "$state/spool-watch.log" >&2; fail "job $spooljob did not succeed after the upgrade"; }
spooled && fail "the spool still holds results after the controller came back"
attempts=$(psql -XAtq "$url" -c "SELECT string_agg(attempt::text, ',' ORDER BY id) FROM runs WHERE job_id = $spooljob")
pass "controller back on the new binary: job $spooljob succeeded, the spool delivered and emptied (run attempts: $attempts)"

# ------------------------------------------------ 6. remove and purge ----
in_ct sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq faultline-agent </dev/null' >"$state/purge.log" 2>&1 || { cat "$state/purge.log" >&2; fail "purge"; }
# (the test's /var/lib/faultline-agent is a mount point: purge empties it)
in_ct sh -c '[ -z "$(ls -A /var/lib/faultline-agent 2>/dev/null)" ]' || fail "purge left files in /var/lib/faultline-agent"
in_ct test ! -e /etc/faultline/agent.yaml || fail "purge left agent.yaml"
in_ct sh -c 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq faultline-controller </dev/null' >/dev/null 2>&1 || fail "remove"
in_ct test -f /etc/faultline/controller/controller.env || fail "remove deleted controller.env"
[ "$(in_ct systemctl is-active faultline-controller)" != active ] || fail "the controller still runs after remove"
pass "purge of the agent removed its state and config; remove of the controller stopped it and kept controller.env"
