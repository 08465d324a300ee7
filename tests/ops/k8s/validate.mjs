// Validates rendered Kubernetes manifests (a multi-document YAML file per argument) against the
// API schemas: Kubernetes' own (kubernetes-models, from the upstream OpenAPI), prometheus-operator's
// and KEDA's CRDs. Beyond the schemas' own checks (types, required fields, enums, formats) it
// rejects UNKNOWN fields, as `kubectl apply --validate=strict` would: the schemas here do not
// forbid additional properties, so a misspelled `readinesProbe` would otherwise pass. A field is
// known when giving it a value of the wrong type fails validation at its path (probe below).
// LeaderWorkerSet has no published model: its own fields are checked against the list in
// LWS_FIELDS and its leader/worker pod templates are validated as Pods.
//
//   node validate.mjs RENDERED.yaml...        exit 0: all valid; 1: errors listed on stderr
//   node validate.mjs --self-test             proves the checks catch what they should
import fs from "node:fs";
import YAML from "yaml";

const MODULES = {
  "v1": "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
  "keda.sh/v1alpha1": "@kubernetes-models/keda/keda.sh/v1alpha1",
};

async function modelFor(apiVersion, kind) {
  const mod = MODULES[apiVersion];
  if (!mod) return null;
  const m = await import(mod);
  return m[kind] ?? null;
}

function schemaErrors(Model, obj) {
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return (e.errors ?? [{ instancePath: "", message: e.message }]).map(
      (x) => `${x.instancePath || "/"} ${x.message}`);
  }
}

// Two probes of different types: a known field of any concrete type rejects at least one of them.
const PROBES = [1.5, "\u0000probe"];
function setAt(root, path, value) {
  const copy = structuredClone(root);
  let o = copy;
  for (let i = 0; i < path.length - 1; ++i) o = o[path[i]];
  o[path[path.length - 1]] = value;
  return copy;
}
function pointer(path) {
  return "/" + path.map((p) => String(p).replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
}
// Object keys whose value is free-form by schema: maps (labels, annotations, data, resources'
// quantities, selectors' matchLabels) accept any key, so their keys are not fields to check.
const MAP_PARENTS = new Set(["labels", "annotations", "data", "stringData", "matchLabels",
  "requests", "limits", "nodeSelector"]);

function unknownFields(Model, obj) {
  const out = [];
  const walk = (node, path, parentKey) => {
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...path, i], parentKey));
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const key of Object.keys(node)) {
      const p = [...path, key];
      if (!MAP_PARENTS.has(parentKey)) {
        const at = pointer(p);
        const known = PROBES.some((probe) =>
          schemaErrors(Model, setAt(obj, p, probe)).some((e) => e.startsWith(at + " ")));
        if (!known) {
          out.push(`${at}: unknown field "${key}"`);
          continue;  // nothing under an unknown field is known either
        }
      }
      walk(node[key], p, key);
    }
  };
  walk(obj, [], "");
  return out;
}

// LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), from its API reference.
const LWS_FIELDS = {
  spec: ["replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"],
  leaderWorkerTemplate: ["leaderTemplate", "workerTemplate", "size", "restartPolicy", "subGroupPolicy",
    "volumeClaimTemplates"],
  restartPolicy: ["None", "RecreateGroupOnPodRestart", "Default"],
  startupPolicy: ["LeaderCreated", "LeaderReady"],
};
async function validateLws(doc) {
  const errs = [];
  const spec = doc.spec ?? {};
  for (const k of Object.keys(spec))
    if (!LWS_FIELDS.spec.includes(k)) errs.push(`/spec: unknown field "${k}"`);
  if (spec.startupPolicy && !LWS_FIELDS.startupPolicy.includes(spec.startupPolicy))
    errs.push(`/spec/startupPolicy: bad value ${spec.startupPolicy}`);
  const t = spec.leaderWorkerTemplate;
  if (!t) return [...errs, "/spec/leaderWorkerTemplate: required"];
  for (const k of Object.keys(t))
    if (!LWS_FIELDS.leaderWorkerTemplate.includes(k)) errs.push(`/spec/leaderWorkerTemplate: unknown field "${k}"`);
  if (!Number.isInteger(t.size) || t.size < 1) errs.push("/spec/leaderWorkerTemplate/size: a positive integer");
  if (t.restartPolicy && !LWS_FIELDS.restartPolicy.includes(t.restartPolicy))
    errs.push(`/spec/leaderWorkerTemplate/restartPolicy: bad value ${t.restartPolicy}`);
  if (!t.workerTemplate) errs.push("/spec/leaderWorkerTemplate/workerTemplate: required");
  const Pod = await modelFor("v1", "Pod");
  for (const which of ["leaderTemplate", "workerTemplate"]) {
    const tpl = t[which];
    if (!tpl) continue;
    for (const k of Object.keys(tpl))
      if (!["metadata", "spec"].includes(k)) errs.push(`/spec/leaderWorkerTemplate/${which}: unknown field "${k}"`);
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "template", ...(tpl.metadata ?? {}) }, spec: tpl.spec };
    for (const e of [...schemaErrors(Pod, pod), ...unknownFields(Pod, pod)])
      errs.push(`/spec/leaderWorkerTemplate/${which} (as a Pod) ${e}`);
  }
  return errs;
}

export async function validateDoc(doc) {
  if (!doc || typeof doc !== "object") return ["not a mapping"];
  if (doc.apiVersion === "leaderworkerset.x-k8s.io/v1" && doc.kind === "LeaderWorkerSet")
    return validateLws(doc);
  // kustomize wraps a Secret's base64 at 70 columns; the API server's decoder skips the newlines
  // (Go's encoding/base64), the "byte" format check here does not: compare unwrapped.
  if (doc.kind === "Secret" && doc.data)
    for (const k of Object.keys(doc.data)) doc.data[k] = String(doc.data[k]).replace(/\s+/g, "");
  const Model = await modelFor(doc.apiVersion, doc.kind);
  if (!Model) return [`no schema for ${doc.apiVersion} ${doc.kind} (add it to MODULES)`];
  const errs = schemaErrors(Model, doc);
  return errs.length ? errs : unknownFields(Model, doc);
}

async function validateFile(file) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  let bad = 0, n = 0;
  for (const d of docs) {
    if (d.errors.length) { console.error(`${file}: YAML: ${d.errors[0].message}`); ++bad; continue; }
    const doc = d.toJS();
    if (doc === null) continue;
    ++n;
    const errs = await validateDoc(doc);
    for (const e of errs) console.error(`${file}: ${doc.kind}/${doc.metadata?.name}: ${e}`);
    if (errs.length) ++bad;
  }
  console.log(`${file}: ${n} objects, ${bad} invalid`);
  return bad === 0 && n > 0;
}

async function selfTest() {
  const good = {
    apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x", labels: { "a.b/c": "d" } },
    spec: { selector: { matchLabels: { a: "b" } }, template: { metadata: { labels: { a: "b" } },
      spec: { containers: [{ name: "c", image: "i", resources: { requests: { cpu: "1", "nvidia.com/gpu": "1" } },
        readinessProbe: { httpGet: { path: "/ready", port: "http" } } }] } } },
  };
  const cases = [
    ["a valid Deployment", good, 0],
    ["a misspelled field", setAt(good, ["spec", "template", "spec", "containers", 0, "readinesProbe"], {}), 1],
    ["a wrong type", setAt(good, ["spec", "replicas"], "two"), 1],
    ["a missing required field", setAt(good, ["spec", "template", "spec", "containers", 0, "name"], undefined), 1],
    ["a bad enum", setAt(good, ["spec", "strategy"], { type: "Sometimes" }), 1],
    ["an unknown kind", { apiVersion: "v1", kind: "Nonsense", metadata: { name: "x" } }, 1],
    ["an LWS with a misspelled pod field", { apiVersion: "leaderworkerset.x-k8s.io/v1", kind: "LeaderWorkerSet",
      metadata: { name: "x" }, spec: { leaderWorkerTemplate: { size: 2, workerTemplate: {
        spec: { containers: [{ name: "c", image: "i", comand: ["x"] }] } } } } }, 1],
  ];
  let failed = 0;
  for (const [what, doc, wantErrors] of cases) {
    const errs = await validateDoc(JSON.parse(JSON.stringify(doc)));
    const ok = wantErrors ? errs.length > 0 : errs.length === 0;
    console.log(`self-test ${ok ? "ok  " : "FAIL"} ${what}${errs.length ? ": " + errs[0] : ""}`);
    if (!ok) ++failed;
  }
  return failed === 0;
}

const args = process.argv.slice(2);
let ok = true;
if (args[0] === "--self-test") ok = await selfTest();
else if (!args.length) { console.error("usage: node validate.mjs RENDERED.yaml... | --self-test"); ok = false; }
else for (const f of args) ok = (await validateFile(f)) && ok;
process.exit(ok ? 0 : 1);
