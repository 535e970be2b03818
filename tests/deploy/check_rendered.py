#!/usr/bin/env python3
"""Checks the rendered kustomize base (RENDERED, from `kubectl kustomize ROOT/deploy/k8s`)
against the repository at ROOT: the custom resources against the vendored schemas in
deploy/k8s/schemas, the PrometheusRule against deploy/prometheus/faultline-rules.yml, the
dashboard ConfigMaps against dashboards/*.json, and how the objects fit together.
Prints one line per check ("ok - ..." / "FAIL - ..."); exits 1 when any failed.
Usage: check_rendered.py ROOT RENDERED [OBJECTS_JSON_OUT]
"""
import json
import pathlib
import sys

import jsonschema
import yaml

failures = 0


def report(ok, what, why=""):
    global failures
    print(f"ok - {what}" if ok else f"FAIL - {what}: {why}")
    failures += 0 if ok else 1


def main():
    root, rendered = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    objects = [d for d in yaml.safe_load_all(rendered.read_text()) if d]
    if len(sys.argv) > 3:
        pathlib.Path(sys.argv[3]).write_text(json.dumps(objects))
    by_kind = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)

    def one(kind, name):
        found = [o for o in by_kind.get(kind, []) if o["metadata"]["name"] == name]
        return found[0] if len(found) == 1 else None

    # Custom resources: the vendored schemas (unknown fields refused).
    schemas = {
        ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor",
        ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule",
        ("postgresql.cnpg.io/v1", "Cluster"): "cnpg-cluster",
    }
    for o in objects:
        key = (o["apiVersion"], o["kind"])
        if key not in schemas:
            continue
        schema = json.loads((root / f"deploy/k8s/schemas/{schemas[key]}.schema.json").read_text())
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(o), key=str)
        report(not errors, f"crd schema: {o['kind']}/{o['metadata']['name']}",
               "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:3]))
    for key in schemas:
        report(any((o["apiVersion"], o["kind"]) == key for o in objects), f"rendered: a {key[1]}",
               "none in the output")

    # The PrometheusRule carries exactly the groups of the one rules file.
    rules = yaml.safe_load((root / "deploy/prometheus/faultline-rules.yml").read_text())
    prs = by_kind.get("PrometheusRule", [])
    report(len(prs) == 1 and prs[0].get("spec", {}).get("groups") == rules["groups"],
           f"PrometheusRule groups == deploy/prometheus/faultline-rules.yml "
           f"({len(rules['groups'])} groups, {sum(len(g['rules']) for g in rules['groups'])} rules)",
           "they differ: run deploy/k8s/generate.py")

    # Every dashboard, unchanged, in a ConfigMap for Grafana's sidecar.
    sidecar = [c for c in by_kind.get("ConfigMap", [])
               if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    for src in sorted((root / "dashboards").glob("*.json")):
        holders = [c for c in sidecar if src.name in c.get("data", {})]
        same = len(holders) == 1 and json.loads(holders[0]["data"][src.name]) == json.loads(src.read_text())
        report(same, f"dashboard {src.name} in a ConfigMap labelled grafana_dashboard=1",
               f"{len(holders)} ConfigMaps hold it" if len(holders) != 1 else "its content differs")

    # The controller Deployment.
    dep = one("Deployment", "faultline-controller")
    report(dep is not None, "Deployment faultline-controller rendered", "missing")
    if dep is None:
        return
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    report(isinstance(spec.get("replicas"), int) and spec["replicas"] >= 2, "controller replicas >= 2",
           f"replicas {spec.get('replicas')!r}")
    sel = spec["selector"].get("matchLabels", {})
    report(sel and sel.items() <= pod_labels.items(), "Deployment selector matches its pods",
           f"{sel} vs {pod_labels}")
    containers = pod.get("containers", [])
    c = containers[0] if containers else {}
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    report(ports.get("grpc") == 50051 and ports.get("http") == 8080, "container ports grpc 50051, http 8080",
           f"{ports}")
    args = c.get("args", [])
    for flag, port in (("--grpc-listen=", 50051), ("--http-listen=", 8080)):
        report(any(a.startswith(flag) and a.endswith(f":{port}") for a in args),
               f"controller args {flag}...:{port}", f"args {args}")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        report(get.get("path") == path and get.get("port") in ("http", 8080), f"{probe} GET {path} on http",
               f"{c.get(probe)}")
    res = c.get("resources", {})
    report(bool(res.get("requests")) and "memory" in res.get("limits", {}), "resources: requests and a memory limit",
           f"{res}")
    sc = c.get("securityContext", {})
    report(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True
           and "ALL" in sc.get("capabilities", {}).get("drop", [])
           and pod.get("securityContext", {}).get("runAsNonRoot") is True,
           "securityContext: non-root, read-only root, no privilege escalation, capabilities dropped",
           f"{sc} / {pod.get('securityContext')}")
    env = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in c.get("env", [])}
    report(env.get("FAULTLINE_DATABASE_URL") == {"name": "faultline-db-app", "key": "uri"},
           "FAULTLINE_DATABASE_URL from Secret faultline-db-app key uri (CloudNativePG)",
           f"{env.get('FAULTLINE_DATABASE_URL')}")
    cluster = one("Cluster", "faultline-db")
    report(cluster is not None, "the CloudNativePG Cluster faultline-db (whose app Secret that is)",
           "missing")
    vols = {v["name"]: v.get("secret", {}).get("secretName") for v in pod.get("volumes", [])}
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    report(vols.get("tls") == "faultline-controller-tls" and mounts.get("tls") == "/etc/faultline/tls"
           and "--tls-cert=/etc/faultline/tls/tls.crt" in args and "--tls-key=/etc/faultline/tls/tls.key" in args,
           "TLS from Secret faultline-controller-tls mounted where --tls-cert/--tls-key point",
           f"volumes {vols}, mounts {mounts}")

    # Services, PDB and ServiceMonitor select the controller's pods and ports.
    services = {}
    for name, port in (("faultline-controller-grpc", "grpc"), ("faultline-controller-http", "http")):
        svc = one("Service", name)
        services[name] = svc
        ok = (svc is not None and svc["spec"].get("selector", {}).items() <= pod_labels.items()
              and bool(svc["spec"].get("selector"))
              and any(p.get("targetPort") in (port, ports.get(port)) and p.get("name") == port
                      for p in svc["spec"].get("ports", [])))
        report(ok, f"Service {name} selects the controller pods, port {port}", f"{svc and svc['spec']}")
    pdb = one("PodDisruptionBudget", "faultline-controller")
    ok = (pdb is not None and pdb["spec"].get("selector", {}).get("matchLabels", {}).items() <= pod_labels.items()
          and (pdb["spec"].get("minAvailable", 0) >= 1 or "maxUnavailable" in pdb["spec"])
          and pdb["spec"].get("minAvailable", 0) < spec["replicas"])
    report(ok, "PodDisruptionBudget covers the controller pods (1 <= minAvailable < replicas)",
           f"{pdb and pdb['spec']}")
    sm = one("ServiceMonitor", "faultline-controller")
    http = services.get("faultline-controller-http")
    ok = (sm is not None and http is not None
          and sm["spec"]["selector"].get("matchLabels", {}).items() <= http["metadata"].get("labels", {}).items()
          and not (sm["spec"]["selector"].get("matchLabels", {}).items()
                   <= services["faultline-controller-grpc"]["metadata"].get("labels", {}).items())
          and all(e.get("port") == "http" and e.get("path", "/metrics") == "/metrics"
                  for e in sm["spec"].get("endpoints", [])))
    report(ok, "ServiceMonitor scrapes /metrics on the HTTP Service only", f"{sm and sm['spec']}")


if __name__ == "__main__":
    main()
    sys.exit(1 if failures else 0)
