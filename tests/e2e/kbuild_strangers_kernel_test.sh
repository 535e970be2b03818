#!/usr/bin/env bash
# Issue #56 on a real kernel tree: strangers' series built by faultline-kbuild --untrusted in
# its sandbox (bubblewrap), on Debian's linux-source-6.12 (deploy/kernel/linux-tree.sh),
# x86_64, tinyconfig + deploy/kernel/board.config, the sandbox's default limits. Every
# hostile series adds scripts/fl-attack.sh and calls it from the tree's own programs:
#   kconfig+fork  mm/Kconfig's $(shell,...) (run by `make tinyconfig` and olddefconfig) and
#                 scripts/kconfig/merge_config.sh; the latter then starts 3,000 processes
#   flood         merge_config.sh prints 1 GiB
#   fill          merge_config.sh writes a 5 GiB file
#   make          mm/Makefile, read by make when it reaches mm/ (after prepare, init/,
#                 kernel/...), then stops the build with $(error)
#   traverse      a diff of ../../escape
# The attack reads the builder's token file and a secret in the builder's environment, lists
# /proc, writes into every directory it can find and into the state dir, the tree, the cache
# and the tree's .git/hooks, connects to a listener on the loopback and to 1.1.1.1, and
# leaves a process behind. Checks, after each: the build failed with the limit or the reason
# named, nothing read (the token and the secret in no log or error), no file written outside
# the build's slot (searched for by name all over the host's filesystems), no connection, no
# process left, no cgroup, no slot; then an honest series (deploy/kernel/series, untrusted)
# builds to its image, the builder unharmed. Label "lab" (tier nightly); cold ~25 min (the
# honest build compiles the whole kernel: the untrusted slot's ccache is read-only).
# Usage: kbuild_strangers_kernel_test.sh FAULTLINE_KBUILD
# Env: FL_LAB_KBUILD_CACHE (where the tree lives: /var/cache/faultline-kbuild), FL_KBUILD_JOBS
#      (make -j: the CPUs), FL_STRANGERS_HONEST=0 (skip the honest build), FL_TEST_KEEP=1
set -euo pipefail
kbuild=${1:?usage: kbuild_strangers_kernel_test.sh FAULTLINE_KBUILD}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cache_a=${FL_LAB_KBUILD_CACHE:-/var/cache/faultline-kbuild}
jobs=${FL_KBUILD_JOBS:-$(nproc)}
T0=$EPOCHREALTIME
secs() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN { printf "%.1f", b - a }'; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in git:git make:make gcc:gcc flex:flex bison:bison bc:bc bwrap:bubblewrap python3:python3; do
  command -v "${tool%%:*}" >/dev/null || { echo "SKIP: ${tool%%:*} not installed (apt-get install ${tool#*:})"; exit 77; }
done
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: builds x86_64 natively"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: the sandbox drops to its uid from root"; exit 77; }
bwrap --unshare-all --ro-bind / / true 2>/dev/null || { echo "SKIP: bubblewrap cannot make namespaces here"; exit 77; }

mkdir -p "$cache_a"
T=$EPOCHREALTIME
tree=$("$ROOT/deploy/kernel/linux-tree.sh" "$cache_a/linux-6.12") || fail "linux-tree.sh"
ref=$(git -C "$tree" describe --tags --exact-match HEAD) || fail "no tag in $tree"
pass "tree $tree at $ref ($(secs "$T") s)"

work=$(mktemp -d /var/tmp/faultline-kbuild-strangers-XXXXXX)
chmod 711 "$work"  # the sandbox's uid passes it on its way to the cache's slots
cache=$work/cache
state=$work/state          # what the builder owns besides its cache: its token, its config
mkdir -p "$state" "$work/mbox"
chmod 700 "$state"
token="fl-token-$RANDOM$RANDOM$RANDOM"
secret="fl-secret-$RANDOM$RANDOM$RANDOM"
echo "$token" >"$state/token" && chmod 600 "$state/token"
printf 'token_file: %s/token\nbuilder: {cache: %s}\n' "$state" "$cache" >"$state/agent.yaml"
listener=
cleanup() {
  [ -z "$listener" ] || kill "$listener" 2>/dev/null || true
  pkill -KILL -f 'sleep 606[34]' 2>/dev/null || true
  if [ "${FL_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; return; fi
  rm -rf "$work"
  git -C "$tree" worktree prune 2>/dev/null || true  # the cache's worktrees
}
trap cleanup EXIT

# A listener on the loopback: every connection it accepts is written down.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, a = s.accept(); open(sys.argv[2], "a").write("connected %s\n" % (a,)); c.close()
' "$work/port" "$work/connections" &
listener=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")

# --- the series ------------------------------------------------------------------------------
attack=$(cat <<EOF
#!/bin/sh
# A stranger's script, run by the tree's own build programs. The details go to stderr (the
# build's log); a one-line summary, last, to stdout (Kconfig's \$(shell) keeps it as a value).
mode=\$1
exec 3>&1 1>&2
echo "ATTACK \$mode: uid \$(id -u)"
leaks=""
cat $state/token >/dev/null 2>&1 && leaks="\$leaks,token"
cat $state/agent.yaml >/dev/null 2>&1 && leaks="\$leaks,agent.yaml"
env | grep -q $secret && leaks="\$leaks,environment"
grep -qs -e --untrusted /proc/[0-9]*/cmdline && leaks="\$leaks,builder-cmdline"
env | sed "s|^|ENV \$mode: |"
for d in \$(find / -maxdepth 3 -type d -writable -not -path '/proc*' -not -path '/sys*' 2>/dev/null) \\
    $state $tree $tree/.git $tree/.git/hooks $cache $work /var/tmp /tmp /root; do
  echo x >"\$d/fl-pwned-\$mode" 2>/dev/null && echo "WROTE \$mode: \$d"
done
hook=no
printf '#!/bin/sh\ntouch $work/hooked\n' >$tree/.git/hooks/post-checkout 2>/dev/null && hook=yes
net=""
for addr in 127.0.0.1:$port 1.1.1.1:53; do
  if python3 -c "import socket, sys; h, p = sys.argv[1].split(':'); socket.create_connection((h, int(p)), 2)" "\$addr" 2>/dev/null; then
    net="\$net,\$addr"
  fi
done
setsid sh -c 'sleep 6063 &' >/dev/null 2>&1 3>&- </dev/null
[ \$mode = kconfig ] || grep -s FL_PROBE .config
echo "SUMMARY \$mode uid=\$(id -u) leaks=\${leaks:-none} connected=\${net:-none} hook=\$hook" >&3
# Then the limits (dash exits when it cannot fork).
case \$mode in
  fork) i=0; while [ \$i -lt 3000 ]; do sleep 6064 & i=\$((i + 1)); done 2>/dev/null ;;
  flood) yes 'a stranger floods the log' | head -c 1073741824 ;;
  fill) head -c 5368709120 /dev/zero >fl-fill ;;
esac
EOF
)
# new_file PATH CONTENT: a git diff creating PATH.
new_file() {
  local n
  n=$(printf '%s\n' "$2" | wc -l)
  printf 'diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%s @@\n' "$1" "$1" "$1" "$n"
  printf '%s\n' "$2" | sed 's/^/+/'
}
# changed PATH SED: a git diff of the tree's PATH edited by the sed program.
changed() {
  git -C "$tree" show "HEAD:$1" >"$work/old"
  sed "$2" "$work/old" >"$work/new"
  printf 'diff --git a/%s b/%s\n' "$1" "$1"
  diff -u --label "a/$1" --label "b/$1" "$work/old" "$work/new" || true
}
# mbox NAME SUBJECT DIFF...: one patch mail.
mbox() {
  local name=$1 subject=$2
  shift 2
  {
    printf 'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
    printf 'From: Stranger <s@example.org>\nDate: Mon, 7 Dec 2026 10:00:00 +0000\n'
    printf 'Subject: [PATCH] %s\n\nA change.\n---\n' "$subject"
    printf '%s\n' "$@"
    printf -- '-- \n2.39.5\n'
  } >"$work/mbox/$name.mbox"
}
script=$(new_file scripts/fl-attack.sh "$attack")
merge_calls() { changed scripts/kconfig/merge_config.sh "1a sh \"\$(dirname \"\$0\")/../fl-attack.sh\" $1 >\&2; exit 1"; }  # (kbuild sends a silent cmd's stdout to /dev/null)
kconfig=$(changed mm/Kconfig "\$a\\
\\
config FL_PROBE\\
\\tstring\\
\\tdefault \"\$(shell,sh \$(srctree)/scripts/fl-attack.sh kconfig 2>/dev/null)\"")
mbox fork "mm: probe the config" "$script" "$kconfig" "$(merge_calls fork)"
mbox flood "mm: a chatty merge" "$script" "$(merge_calls flood)"
mbox fill "mm: a large merge" "$script" "$(merge_calls fill)"
mbox make "mm: tidy the build" "$script" "$(changed mm/Makefile "1a \$(info \$(shell sh \$(srctree)/scripts/fl-attack.sh make))\\
\$(error fl-attack stopped the build in mm)")"
mbox traverse "mm: add a file" "$(new_file ../../fl-escape "owned")"
grep -q 'default "$(shell,sh $(srctree)/scripts/fl-attack.sh kconfig 2>/dev/null)"' "$work/mbox/fork.mbox" ||
  fail "the Kconfig attack was not written: $(grep -A3 FL_PROBE "$work/mbox/fork.mbox")"

# build NAME [ARGS...]: faultline-kbuild --untrusted in the cache; its exit code in NAME.rc, its
# key=value lines in NAME.out, its progress and error in NAME.err.
build() {
  local name=$1 t=$EPOCHREALTIME rc=0
  shift
  AWS_SECRET_ACCESS_KEY=$secret "$kbuild" --tree "$tree" --ref "$ref" --arch x86_64 --base tinyconfig \
    --fragment "$ROOT/deploy/kernel/board.config" --cache "$cache" -j "$jobs" --untrusted \
    --sandbox required "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "$rc" >"$work/$name.rc"
  secs "$t" >"$work/$name.secs"
}
# The builder's view after a hostile build: nothing of it read, written, reached or left.
unharmed() {
  local name=$1 logs=$cache/logs found
  if grep -rqF "$token" "$logs" "$work/$name.err" 2>/dev/null; then fail "$name: the token reached a log or the error"; fi
  if grep -rqF "$secret" "$logs" "$work/$name.err" 2>/dev/null; then fail "$name: the builder's environment reached a log or the error"; fi
  # Everywhere the sandbox maps a host path, and the places an escape would write first.
  found=$( (find / -maxdepth 2 -name 'fl-pwned-*' -o -name fl-fill
    find "$work" "$tree" "$(dirname "$tree")" /tmp /var/tmp /root /run /dev/shm /etc /usr \
      \( -name 'fl-pwned-*' -o -name fl-fill -o -name fl-escape \) -print) 2>/dev/null | head -n 5)
  [ -z "$found" ] || fail "$name: written outside its slot: $found"
  [ ! -e "$tree/.git/hooks/post-checkout" ] || fail "$name: a git hook was planted"
  [ ! -e "$work/hooked" ] || fail "$name: a planted hook ran"
  [ -z "$(git -C "$tree" status --porcelain)" ] || fail "$name: the tree changed: $(git -C "$tree" status --porcelain | head -n 5)"
  [ ! -s "$work/connections" ] || fail "$name: a connection reached the loopback: $(cat "$work/connections")"
  ! pgrep -f 'sleep 606[34]' >/dev/null || fail "$name: $(pgrep -f 'sleep 606[34]' | wc -l) processes outlived the build"
  ! ls -d /sys/fs/cgroup/*/faultline/build-* /sys/fs/cgroup/faultline/build-* 2>/dev/null | grep -q . ||
    fail "$name: build cgroups left"
  [ -z "$(ls -A "$cache/slots" 2>/dev/null)" ] || fail "$name: slots left: $(ls "$cache/slots")"
}
# refused NAME PATTERN: the build failed and its error says PATTERN.
refused() {
  [ "$(cat "$work/$1.rc")" != 0 ] || fail "$1: built ($(cat "$work/$1.out"))"
  grep -qE "$2" "$work/$1.err" || fail "$1: the error does not say /$2/: $(tail -n 12 "$work/$1.err")"
}
log_of() { ls -t "$cache"/logs/* 2>/dev/null | head -n 1; }
# ran NAME MODE: the attack ran inside (its summary in the error or the newest log) as the
# sandbox's uid, and found nothing: no token, no agent.yaml, no secret in its environment, no
# builder's command line, no connection, no hook.
ran() {
  local line
  line=$(cat "$work/$1.err" "$(log_of)" 2>/dev/null | grep -a -m 1 -o "SUMMARY $2 [^\"]*") ||
    fail "$1: no summary of the $2 attack: $(tail -n 12 "$work/$1.err")"
  [ "$line" = "SUMMARY $2 uid=61183 leaks=none connected=none hook=no" ] || fail "$1: $line"
}

build fork --series "$work/mbox/fork.mbox"
refused fork "stopped by the sandbox: the process limit"
ran fork kconfig  # Kconfig's $(shell) made the summary CONFIG_FL_PROBE's value in .config
ran fork fork
unharmed fork
pass "fork: mm/Kconfig's \$(shell) and merge_config.sh ran as the sandbox's uid (no token, no agent.yaml, no secret, no builder's command line, no loopback, no network, no hook, nothing written outside); 3,000 processes stopped by the process limit in $(cat "$work/fork.secs") s"

build flood --series "$work/mbox/flood.mbox"
refused flood "stopped by the sandbox: the log limit"
unharmed flood
size=$(stat -c %s "$(log_of)")
[ "$size" -le $((65 << 20)) ] || fail "flood: its log is $size bytes"
pass "flood: 1 GiB of output stopped by the log limit in $(cat "$work/flood.secs") s (log $size bytes)"

build fill --series "$work/mbox/fill.mbox"
refused fill "stopped by the sandbox: the file size limit"
unharmed fill
pass "fill: a 5 GiB file stopped by the file size limit in $(cat "$work/fill.secs") s; the slot removed"

build traverse --series "$work/mbox/traverse.mbox"
refused traverse "fl-escape.*outside the tree"
unharmed traverse
pass "traverse: refused before git, named with its reason"

build make --series "$work/mbox/make.mbox"
refused make "fl-attack stopped the build in mm"
ran make make
unharmed make
pass "make: mm/Makefile ran as the sandbox when make reached mm/ ($(cat "$work/make.secs") s), stopped with its own error; nothing read, written or reached"

if [ "${FL_STRANGERS_HONEST:-1}" = 1 ]; then
  build honest --series "$ROOT/deploy/kernel/series/ci-x86-faults-take-mmap-lock.mbox" --include 'arch/x86/*'
  [ "$(cat "$work/honest.rc")" = 0 ] || fail "honest: $(tail -n 20 "$work/honest.err")"
  image=$(sed -n 's/^image=//p' "$work/honest.out")
  [ -s "$image" ] || fail "honest: no image at $image"
  unharmed honest
  pass "honest: the next honest series built untrusted to $(sed -n 's/^release=//p' "$work/honest.out") ($(stat -c %s "$image") bytes) in $(cat "$work/honest.secs") s"
fi
echo "total $(secs "$T0") s"
