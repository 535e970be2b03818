#!/usr/bin/env bash
# Offline check of deploy/: the kustomize base (rendered with `kubectl kustomize`, every
# object validated against schemas, the generated files in step with their sources, the
# objects fitting together) and the systemd units (`systemd-analyze verify`, where any
# warning fails). One line per check; exit 0 when all passed, 1 when any failed, 77 (skip)
# when a tool is missing. Then a self-test: broken copies of the tree must be rejected.
#   tests/deploy/check_deploy.sh              # check the repository, then the self-test
#   tests/deploy/check_deploy.sh --root DIR   # check a copy at DIR only (the self-test's)
# Tools: kubectl (any of 1.20..1.32: Debian's kubernetes-client or another), systemd-analyze,
# python3 with PyYAML and jsonschema, node with `npm ci` run in tests/deploy.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SELFTEST=1
if [[ ${1:-} == --root ]]; then ROOT=$(cd "$2" && pwd); SELFTEST=0; fi
KUBECTL=${KUBECTL:-kubectl}

missing=()
command -v "$KUBECTL" >/dev/null || missing+=("kubectl (apt-get install kubernetes-client)")
command -v systemd-analyze >/dev/null || missing+=("systemd-analyze (apt-get install systemd)")
PYTHON=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import yaml, jsonschema' 2>/dev/null; then PYTHON=$p; break; fi
done
[[ -n $PYTHON ]] || missing+=("python3 with yaml and jsonschema (apt-get install python3-yaml python3-jsonschema)")
command -v node >/dev/null || missing+=("node (apt-get install nodejs)")
[[ -d $HERE/node_modules/kubernetes-models ]] || missing+=("kubernetes-models (npm ci --prefix tests/deploy)")
if ((${#missing[@]})); then
  printf 'SKIP - missing: %s\n' "${missing[@]}"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
line() { if [[ $1 == 0 ]]; then echo "ok - $2"; else echo "FAIL - $2"; failed=1; fi; }

# 1. The generated files of the base equal what their sources give.
if out=$("$PYTHON" "$ROOT/deploy/k8s/generate.py" --check 2>&1); then
  line 0 "deploy/k8s/generated is what deploy/k8s/generate.py makes from its sources"
else
  line 1 "deploy/k8s/generated is what deploy/k8s/generate.py makes from its sources: $(echo "$out" | tr '\n' ' ')"
fi

# 2. Render.
kversion=$("$KUBECTL" version --client 2>/dev/null | grep -o 'v1\.[0-9]*\.[0-9]*' | head -1)
if "$KUBECTL" kustomize "$ROOT/deploy/k8s" >"$tmp/rendered.yaml" 2>"$tmp/render.err"; then
  line 0 "kubectl ($kversion) kustomize deploy/k8s: $(grep -c '^kind:' "$tmp/rendered.yaml") objects"
  # 3. Custom resources, rules, dashboards, wiring (python); 4. every object's schema (node).
  "$PYTHON" "$HERE/check_rendered.py" "$ROOT" "$tmp/rendered.yaml" "$tmp/objects.json" || failed=1
  (cd "$HERE" && node validate_models.mjs <"$tmp/objects.json") || failed=1
else
  line 1 "kubectl kustomize deploy/k8s: $(tr '\n' ' ' <"$tmp/render.err")"
fi

# 5. The units, as committed, with only the binaries' directory pointed at stand-ins
# (verify wants ExecStart= executables to exist). Verify exits 0 on unknown keys and bad
# values, only printing them, so any output at all fails.
mkdir -p "$tmp/bin" "$tmp/units"
for b in faultline-agent faultline-controller; do printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/$b"; chmod 755 "$tmp/bin/$b"; done
for unit in faultline-agent.service faultline-controller.service; do
  sed "s#/usr/local/bin/#$tmp/bin/#g" "$ROOT/deploy/systemd/$unit" >"$tmp/units/$unit"
  out=$(cd "$tmp/units" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "./$unit" 2>&1)
  rc=$?
  if [[ $rc == 0 && -z $out ]]; then
    line 0 "systemd-analyze verify deploy/systemd/$unit"
  else
    line 1 "systemd-analyze verify deploy/systemd/$unit (exit $rc): $(echo "$out" | tr '\n' ' ')"
  fi
done

# 6. Self-test: each broken copy must fail the check.
if [[ $SELFTEST == 1 ]]; then
  mutate() {  # NAME FILE PYTHON-EXPRESSION-ON-s
    local copy=$tmp/mut-$1
    mkdir -p "$copy/deploy" "$copy/tests"
    cp -r "$ROOT/deploy/k8s" "$ROOT/deploy/prometheus" "$ROOT/deploy/systemd" "$copy/deploy/"
    cp -r "$ROOT/dashboards" "$copy/"
    "$PYTHON" - "$copy/$2" "$3" <<'PY'
import sys
path, expr = sys.argv[1], sys.argv[2]
s = open(path).read()
t = eval(expr)
assert t != s, "the mutation changed nothing"
open(path, "w").write(t)
PY
    if "$0" --root "$copy" >"$tmp/mut-$1.log" 2>&1; then
      line 1 "self-test: $1 is rejected (the check passed the broken copy)"
    else
      line 0 "self-test: $1 is rejected ($(grep -m1 '^FAIL' "$tmp/mut-$1.log" | cut -c1-110))"
    fi
  }
  mutate "typo in a unit directive" deploy/systemd/faultline-agent.service 's.replace("OOMPolicy=continue", "OOMPolicy=contineu")'
  mutate "unknown unit key" deploy/systemd/faultline-controller.service 's.replace("ProtectHome=yes", "ProtectHomes=yes")'
  mutate "misspelt readinessProbe" deploy/k8s/controller-deployment.yaml 's.replace("readinessProbe:", "readinesProbe:")'
  mutate "replicas as a string" deploy/k8s/controller-deployment.yaml 's.replace("replicas: 2", "replicas: \"2\"")'
  mutate "unknown ServiceMonitor field" deploy/k8s/servicemonitor.yaml 's.replace("interval: 30s", "intervall: 30s")'
  mutate "rules edited, not regenerated" deploy/prometheus/faultline-rules.yml 's.replace("for: 1m", "for: 2m", 1)'
  mutate "generated rules edited by hand" deploy/k8s/generated/prometheusrule.yaml 's.replace("for: 1m", "for: 3m", 1)'
  mutate "a dashboard not regenerated" dashboards/fleet.json 's.replace("\"title\"", "\"title\" ", 1)'
  mutate "CNPG Cluster typo" deploy/k8s/postgres-cluster.yaml 's.replace("instances: 3", "instance: 3")'
fi

exit $failed
