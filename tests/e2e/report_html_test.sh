#!/usr/bin/env bash
# End to end: a report page people look at (#29, `faultline report JOB --format html`),
# opened in a real browser (Debian's headless Chromium). The job is an A/A study (two
# labels of the running kernel, alternating) whose board drifts: after half of its runs the
# agent, and so every later run, gets a quarter of a CPU (a cpu cgroup's quota; two busy
# loops where there is no cpu controller) and every later run is slower whatever else the
# machine is doing (busy loops alone did not show on a machine already loaded). The table's paired
# verdict does not move (each pair sees the same board); the page's run-order plot shows
# the drop. Checks: the page loads without a console message, its inline check finds every
# plot holding the points it declares, the run plot has one point per run and shows the
# drift, the median runs are drawn second by second, the runs' call stacks are drawn as two
# flame graphs with the fault path in them (#46), and a screenshot is kept
# (artifacts/report-html.png beside the test's build dir).
# Usage: report_html_test.sh CONTROLLER_DIR AGENT_DIR WORKLOAD_DIR CLI_DIR
set -euo pipefail

source "$(dirname "$0")/lib.sh" report-html "$@"
hogs=()
cpu_cg=""
cleanup() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  fl_stop_all
  # Its processes ended: the cgroup is empty (a straggler goes back to the root first).
  if [ -n "$cpu_cg" ] && [ -d "$cpu_cg" ]; then
    while read -r pid; do echo "$pid" >"${cpu_cg%/*}/cgroup.procs" 2>/dev/null || true; done <"$cpu_cg/cgroup.procs"
    rmdir "$cpu_cg" 2>/dev/null || true
  fi
  rm -rf "$FL_STATE"
}
# Slows the board from now on: the agent (its later workloads inherit it) into a cpu cgroup
# of a quarter CPU; busy loops where no cpu controller is mounted.
slow_the_board() {
  local root="" agent
  agent=$(cat "$FL_STATE/agent.pid")
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    root=/sys/fs/cgroup/cpu
  elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
       grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    root=/sys/fs/cgroup
  fi
  if [ -n "$root" ]; then
    cpu_cg=$root/faultline-e2e-html-$$
    mkdir "$cpu_cg"
    if [ -f "$cpu_cg/cpu.cfs_quota_us" ]; then
      echo 100000 >"$cpu_cg/cpu.cfs_period_us"
      echo 25000 >"$cpu_cg/cpu.cfs_quota_us"
    else
      echo "25000 100000" >"$cpu_cg/cpu.max"
    fi
    echo "$agent" >"$cpu_cg/cgroup.procs"
    echo "  the agent (pid $agent) capped at 0.25 CPU in $cpu_cg"
    return
  fi
  for _ in 1 2; do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  echo "  no cpu controller: two busy loops"
}
trap cleanup EXIT
sql() { psql "$FL_DATABASE_URL" -Atqc "$1"; }
e2e_diagnose() {
  sql "SELECT u.sequence, u.kernel, round(r.throughput) FROM results r JOIN runs u ON u.id = r.run_id ORDER BY r.created_at" >&2 || true
}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "SKIP: no chromium (apt install chromium)"; exit 77; }
if [ ! -d /sys/fs/cgroup/memory ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo "SKIP: no memory cgroup controller on this machine"; exit 77
fi

fl_start_postgres
fl_start_controller
FL_KERNEL_LABELS="vanilla vanilla-aa" fl_start_agent html-board
cat >"$FL_STATE/drift.yaml" <<'YAML'
name: html-drift
benchmark: filemap-thrash
duration: 1s
repetitions: 12
block_size: 1
kernels: [vanilla, vanilla-aa]
min_effect: 0.25
memcg: {memory_max: 256M}
params: {file_size: 8M, threads: 2}
run_options: {profile: {frequency_hz: 199}}
YAML
job=$("$FL_BIN_CLI" submit "$FL_STATE/drift.yaml") || fail "submit"
half_done() { [ "$(sql "SELECT count(*) FROM results r JOIN runs u ON u.id = r.run_id WHERE u.job_id = $job")" -ge 12 ]; }
FL_WAIT_SECONDS=120 fl_wait_for "half of the runs" half_done || fail "the first half did not run"
slow_the_board
"$FL_BIN_CLI" watch "$job" >/dev/null 2>&1 || fail "job $job did not succeed"
for pid in "${hogs[@]}"; do kill "$pid"; done
hogs=()
pass "an A/A study of 24 runs, the board slowed after the 12th"

"$FL_BIN_CLI" report "$job" --format json >"$FL_STATE/report.json" || fail "report"
verdict=$(jq -r '.comparisons[0].verdict' "$FL_STATE/report.json")
case "$verdict" in
  no-change|inconclusive) ;;
  *) fail "the A/A table's verdict moved with the drift: $verdict" ;;
esac
"$FL_BIN_CLI" report "$job" --format html >"$FL_STATE/report.html" || fail "report --format html"
grep -q 'data-plot="runs" data-points="24"' "$FL_STATE/report.html" || fail "no run plot of 24 points"
grep -q 'data-plot="samples"' "$FL_STATE/report.html" || fail "no plot of the runs' seconds"

"$browser" --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
  --dump-dom "file://$FL_STATE/report.html" >"$FL_STATE/dom.html" 2>"$FL_STATE/browser.log" ||
  fail "chromium could not open the page"
if grep ':CONSOLE' "$FL_STATE/browser.log"; then fail "the page logged to the console"; fi
checked=$(grep -o 'data-checked="[^"]*"' "$FL_STATE/dom.html" || true)
[ "$checked" = 'data-checked="6 plots"' ] || fail "the page's own check: '$checked' (want 6 plots)"
# The profiles (#46): both flame graphs drawn by the page, the fault path among their frames.
flames=$(python3 - "$FL_STATE/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
out = []
for side in ("b", "a"):
    g = re.search(r'<svg[^>]*id="flame-%s-0".*?</svg>' % side, dom, re.S)
    if not g:
        print("missing flame-%s-0" % side); sys.exit(0)
    frames = re.findall(r'<rect class="pt"[^>]*data-frame="([^"]*)"', g.group(0))
    out.append("%d:%d" % (len(frames), "handle_mm_fault" in frames))
print(" ".join(out))
PY
)
read -r flame_b flame_a <<<"$flames"
for f in "$flame_b" "$flame_a"; do
  case $f in *:1) [ "${f%%:*}" -ge 5 ] || fail "a flame graph of ${f%%:*} frames" ;; *) fail "flame graphs: $flames" ;; esac
done
pass "the profiles drawn as two flame graphs (B: ${flame_b%%:*} frames, A: ${flame_a%%:*}), handle_mm_fault in both"
# The drift, read back from what the browser holds: the last six runs against the first six.
drift=$(python3 - "$FL_STATE/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
plot = re.search(r'<svg[^>]*id="runs-0".*?</svg>', dom, re.S).group(0)
pts = sorted((int(o), float(y)) for o, y in re.findall(r'data-order="(\d+)" data-y="([0-9.e+-]+)"', plot))
first = sum(y for _, y in pts[:6]) / 6
last = sum(y for _, y in pts[-6:]) / 6
print(f"{len(pts)} {last / first:.3f}")
PY
)
read -r points ratio <<<"$drift"
[ "$points" = 24 ] || fail "the browser's run plot holds $points points"
awk -v r="$ratio" 'BEGIN { exit !(r < 0.8) }' || fail "the run plot shows no drift: last/first $ratio"
artifacts=$(pwd)/artifacts
mkdir -p "$artifacts"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=900,1800 \
  --screenshot="$artifacts/report-html.png" "file://$FL_STATE/report.html" >/dev/null 2>&1 ||
  fail "no screenshot"
[ -s "$artifacts/report-html.png" ] || fail "the screenshot is empty"
pass "the page in Chromium: no console message, 6 plots checked, the drift visible (last/first $ratio) while the table says $verdict; screenshot $artifacts/report-html.png"

echo "e2e: all checks passed"
