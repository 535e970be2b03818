#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into ${FAULTLINE_FUZZ_BUILD_DIR:-build-fuzz}
# and runs each for --seconds (default 60), or for --runs inputs, from a seed corpus (the example job specs, an
# agent config, a few HTTP requests). A crash, a leak or a sanitizer report fails the script and leaves the
# reproducer in the build dir (crash-*).
#   scripts/fuzz.sh [--seconds N | --runs N | --runs TARGET=N,...] [--seed N] [--no-yaml]
# --runs: a bound by inputs, not by time, for every target or per target (CI:
# job_spec=100000,agent_messages=150000,http_request=15000 --seed 1, about what 30 s each
# gave on an idle machine, so the smoke does the same work on a slow or a busy one and is
# repeatable here).
# --seed: libFuzzer's seed.
# --no-yaml: job specs as protobuf only, not as YAML text (yaml-cpp 0.7 has pathological
# inputs of its own; see tests/fuzz/fuzz_job_spec.cc). CI fuzzes both.
# A longer campaign: scripts/fuzz.sh --seconds 3600 (the corpus persists in the build dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FAULTLINE_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=60
runs=
seed_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --no-yaml) export FAULTLINE_FUZZ_YAML=0; shift ;;
    --seed) seed_args=(-seed="$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
clangxx=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$clangxx" ] || { echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs clang-14)" >&2; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout in ccache's keys (and the working directory left out): a
# fresh clone elsewhere (CI's) hits what another clone compiled. Debug info keeps the first
# clone's paths.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
if [ ! -f "$build/build.ninja" ]; then
  # -O1 with line tables only: sanitizer builds of the generated protobuf code at -O2 -g
  # take several times longer on 2 cores, for no better fuzzing.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=FuzzBuild \
    -DCMAKE_CXX_FLAGS_FUZZBUILD="-O1 -gline-tables-only" \
    -DCMAKE_CXX_COMPILER="$clangxx" -DFAULTLINE_FUZZ=ON -DFAULTLINE_BUILD_TESTS=OFF >/dev/null
fi
ninja -C "$build" fuzz_job_spec fuzz_agent_messages fuzz_http_request fuzz_mail

corpus=$build/corpus
mkdir -p "$corpus/job_spec" "$corpus/agent_messages" "$corpus/http_request" "$corpus/mail"
for f in "$root"/deploy/examples/*.yaml; do  # mode byte 0: YAML
  { printf '\0'; cat "$f"; } >"$corpus/job_spec/seed-$(basename "$f")"
done
# mode byte 1: protobuf. A JobSpec with benchmark "filemap-thrash", duration "2s",
# repetitions 2, kernels [vanilla] (fields 1, 2, 3, 4).
printf '\1\n\x0efilemap-thrash\x12\x022s\x18\x02\x22\x07vanilla' >"$corpus/job_spec/seed-proto"
{ printf '\4'; printf 'board: b\nkernels:\n  - {label: v, release: running}\n  - {label: p, release: 6.9, boot: kexec, kernel: /boot/vmlinuz}\n'; } \
  >"$corpus/agent_messages/seed-config"
# Raw requests into the HTTP server: plain, pipelined, HEAD, a body, chunked, a bad method,
# credentials.
crlf() { printf '%b' "$1" >"$corpus/http_request/$2"; }
crlf 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' seed-get
crlf 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nHEAD /readyz HTTP/1.0\r\n\r\nGET /nope?x=1 HTTP/1.1\r\n\r\n' seed-pipelined
crlf 'POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello' seed-body
crlf 'POST /alerts HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' seed-chunked
crlf 'BREW /metrics HTTP/1.1\r\nConnection: close\r\n\r\n' seed-brew
crlf 'GET /private HTTP/1.1\r\nAuthorization: Basic b2s6b2s=\r\n\r\n' seed-auth
# Real list mail: the seeds' threads (robot/testdata), and the lab's posts, each a seed; one
# seed a whole thread (mails joined by "\n\x01\n", as the target splits them).
for f in "$root"/robot/testdata/*.eml "$root"/tests/e2e/lab_posts/*.eml; do
  [ -f "$f" ] && cp "$f" "$corpus/mail/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done
{ for f in "$root"/robot/testdata/v4-*.eml; do cat "$f"; printf '\n\001\n'; done; } \
  >"$corpus/mail/seed-thread-v4"
# And every input it found a bug with (the gate replays them too: fuzz_mail_replay).
for f in "$root"/tests/fuzz/regressions/mail/*; do
  [ -f "$f" ] && cp "$f" "$corpus/mail/regression-$(basename "$f")"
done
declare -A runs_of=()
if [[ "$runs" == *=* ]]; then
  IFS=, read -ra pairs <<<"$runs"
  for p in "${pairs[@]}"; do runs_of[${p%%=*}]=${p#*=}; done
elif [ -n "$runs" ]; then
  for target in job_spec agent_messages http_request mail; do runs_of[$target]=$runs; done
fi
for target in job_spec agent_messages http_request mail; do
  bound=(-max_total_time="$seconds")
  [ -z "${runs_of[$target]:-}" ] || bound=(-runs="${runs_of[$target]}")
  echo "fuzz.sh: fuzz_$target for ${runs_of[$target]:+${runs_of[$target]} inputs}${runs_of[$target]:-${seconds}s}"
  # The whole log is kept: a finding's message and stack trace come well before the final
  # stats (the last 15 lines alone once cut a crash's trace away).
  log=$build/fuzz_$target.log
  if (cd "$build" && "./tests/fuzz/fuzz_$target" "${bound[@]}" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "${seed_args[@]}" "$corpus/$target" >"$log" 2>&1); then
    tail -n 15 "$log"
  else
    echo "fuzz.sh: fuzz_$target found something (full log: $log):"
    grep -v '^#[0-9]*[[:space:]]*\(NEW\|REDUCE\|pulse\|INITED\|RELOAD\)' "$log" | tail -n 120
    exit 1
  fi
done
echo "fuzz.sh: no crash, leak or sanitizer report"
