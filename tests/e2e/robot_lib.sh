#!/usr/bin/env bash
# The series robot's e2e stage (sourced after kbuild_fixture.sh by robot_test.sh and
# robot_strangers_test.sh): the list's archive (public-inbox, fed by public-inbox-mda as a
# list server does), helper servers from tests/support, the study every series runs, and
# robot.yaml. Defines:
#   pi, pi_env CMD..., pi_deliver FILE      the archive and a mail delivered to it
#   start_server SCRIPT ARGS...             tests/support/SCRIPT in the background ($port;
#                                           its pid in servers[], which the caller stops)
#   robot_config [REPLY_LINES]              $FL_STATE/study.yaml and robot.yaml (SMTP at
#                                           $smtp_port; more `replies:` lines as given)
pi=$FL_STATE/pi
mkdir -p "$pi"
export PI_CONFIG=$pi/config
pi_env() { HOME=$pi PI_CONFIG=$pi/config ORIGINAL_RECIPIENT=linux-mm@kvack.org "$@"; }
pi_env public-inbox-init -V2 -L basic mm "$pi/mm" http://localhost/mm linux-mm@kvack.org
git config -f "$pi/config" publicinboxmda.spamcheck none
pi_deliver() { pi_env public-inbox-mda --no-precheck <"$1"; }

start_server() {
  local port_file=$FL_STATE/${1%.py}.port
  python3 -W ignore "$FL_ROOT/tests/support/$1" --port-file "$port_file" "${@:2}" \
    >>"$FL_STATE/${1%.py}.log" 2>&1 &
  servers+=($!)
  fl_wait_for "$1 to listen" test -s "$port_file" || fail "$1 did not start"
  port=$(cat "$port_file")
}

robot_config() {
cat >"$FL_STATE/study.yaml" <<YAML
name: thrash
benchmark: filemap-thrash
duration: 1s
repetitions: 2
block_size: 1
boards: [sim-board]
memcg: {memory_max: 256M}
params: {file_size: 4M}
matrix: {threads: [2]}
YAML
cat >"$FL_STATE/robot.yaml" <<YAML
archive: pi/mm
tree: $tree
branch: v6.12
studies: [study.yaml]
config_base: tinyconfig
fragments: [lab.config]
poll_seconds: 1
replies:
  from: "faultline robot <robot@faultline.example>"
  smtp: 127.0.0.1:$smtp_port
${1:-}
YAML
}
