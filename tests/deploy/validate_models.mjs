// Validates Kubernetes objects (a JSON array on stdin) offline against the schemas that
// kubernetes-models (from the Kubernetes OpenAPI) and @kubernetes-models/prometheus-operator
// (from prometheus-operator's CRDs) compile in: types, required fields, enums, formats.
// Unknown fields are not refused by these schemas; check_rendered.py covers the fields
// that matter. Prints one line per object; exits 1 when any object is invalid or of a kind
// no package describes.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const input = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const packages = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator/monitoring.coreos.com",
};
let failed = 0;
for (const obj of input) {
  const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
  const what = `${obj.kind}/${obj.metadata?.name} (${obj.apiVersion})`;
  const base = packages[group] ?? (group === "" ? "kubernetes-models" : `kubernetes-models/${group}`);
  if (group.endsWith(".cnpg.io")) continue;  // no package: the vendored schema covers it
  let Model;
  try {
    Model = (await import(`${base}/${version}/${obj.kind}`))[obj.kind];
  } catch (e) {
    console.log(`FAIL - schema: ${what}: no schema for this kind (${e.code ?? e.message})`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
    console.log(`ok - schema: ${what}`);
  } catch (e) {
    console.log(`FAIL - schema: ${what}: ${String(e.message).split("\n").slice(0, 4).join("; ")}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
