// validate_manifests.mjs: offline schema validation of Kubernetes manifests
// (docs/kubernetes.md). Run by scripts/validate_manifests.sh.
//
//   node scripts/validate_manifests.mjs NODE_MODULES_DIR FILE.yaml...
//
// Every YAML document of every file is checked against the schema of its
// apiVersion and kind:
//   - Kubernetes' own kinds: the OpenAPI schemas of Kubernetes v1.36.0 as
//     compiled by the npm package kubernetes-models 5.1.0 (types, required
//     fields, enums, formats, int-or-string);
//   - monitoring.coreos.com/v1 (ServiceMonitor, ...): the Prometheus
//     Operator's CRD schemas, npm package @kubernetes-models/prometheus-operator
//     6.0.0;
//   - serving.kserve.io (ClusterServingRuntime v1alpha1, InferenceService
//     v1beta1): scripts/manifests/kserve.schema.json, derived by hand from
//     KServe v0.20.0's CRDs; their containers against Kubernetes' Container.
// A document of any other kind is an error, as is YAML that does not parse.
// The Kubernetes schemas leave unknown fields alone (as the API server does
// without strict field validation); every object must also carry a name.
// Prints one line per document ("ok  FILE#N Kind/name") and one per
// problem; exits 1 when any document is invalid, 2 on a usage error.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [modules, ...files] = process.argv.slice(2);
if (!modules || files.length === 0) {
  console.error("usage: validate_manifests.mjs NODE_MODULES_DIR FILE.yaml...");
  process.exit(2);
}
const load = (path) => import(pathToFileURL(join(modules, path)).href);
const YAML = await load("yaml/dist/index.js");
const Ajv = (await load("ajv/dist/2020.js")).default;
const here = dirname(fileURLToPath(import.meta.url));
const kserveSchema = JSON.parse(readFileSync(join(here, "manifests", "kserve.schema.json"), "utf8"));
const ajv = new Ajv({ allErrors: true, strict: true });
ajv.addSchema(kserveSchema, "kserve");
const { validate: validateContainer } = await load("kubernetes-models/_schemas/IoK8sApiCoreV1Container.js");

// "apps/v1" -> "apps/v1", "v1" -> "v1"; the package's directories.
async function builtinModel(apiVersion, kind) {
  if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion) || !/^[A-Z][A-Za-z]+$/.test(kind)) return null;
  const pkg = apiVersion.startsWith("monitoring.coreos.com/")
    ? "@kubernetes-models/prometheus-operator"
    : "kubernetes-models";
  try {
    return (await load(`${pkg}/${apiVersion}/${kind}.js`))[kind];
  } catch (e) {
    if (e.code === "ERR_MODULE_NOT_FOUND") return null;
    throw e;
  }
}

// Precompiled validators carry no messages: worded here as ajv words them.
function describe(e) {
  if (e.message) return e.message;
  const p = e.params || {};
  switch (e.keyword) {
    case "type": return `must be ${p.type}`;
    case "required": return `must have required property ${p.missingProperty}`;
    case "enum": return "must be equal to one of the allowed values";
    default: return `${e.keyword} ${JSON.stringify(p)}`;
  }
}

function ajvErrors(errors, prefix = "") {
  return (errors || []).map((e) => `${prefix}${e.instancePath || "/"} ${describe(e)}` +
    (e.params && e.params.additionalProperty ? ` ('${e.params.additionalProperty}')` : ""));
}

async function check(doc) {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc))
    return ["not a mapping"];
  const { apiVersion, kind } = doc;
  if (typeof apiVersion !== "string" || typeof kind !== "string")
    return ["no apiVersion or kind"];
  if (!doc.metadata || typeof doc.metadata.name !== "string" || doc.metadata.name === "")
    return ["no metadata.name"];
  if (apiVersion.startsWith("serving.kserve.io/")) {
    const v = ajv.getSchema(`kserve#/$defs/${kind}`);
    if (!v) return [`unknown kind ${apiVersion} ${kind}`];
    if (!v(doc)) return ajvErrors(v.errors);
    const containers = (doc.spec && doc.spec.containers) || [];
    const problems = [];
    containers.forEach((c, i) => {
      if (!validateContainer(c)) problems.push(...ajvErrors(validateContainer.errors, `/spec/containers/${i}`));
    });
    return problems;
  }
  const Model = await builtinModel(apiVersion, kind);
  if (!Model) return [`unknown kind ${apiVersion} ${kind} (no schema)`];
  try {
    new Model(doc).validate();
  } catch (e) {
    return (e.errors ? ajvErrors(e.errors) : [e.message]);
  }
  return [];
}

let bad = 0;
for (const file of files) {
  let docs;
  try {
    docs = YAML.parseAllDocuments(readFileSync(file, "utf8"));
  } catch (e) {
    console.log(`FAIL ${file}: ${e.message}`);
    bad++;
    continue;
  }
  let n = 0;
  for (const d of docs) {
    n++;
    const where = `${file}#${n}`;
    if (d.errors.length) {
      console.log(`FAIL ${where}: YAML: ${d.errors[0].message}`);
      bad++;
      continue;
    }
    const obj = d.toJS();
    if (obj === null) continue; // an empty document (a comment, a trailing ---)
    const problems = await check(obj);
    const name = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    if (problems.length) {
      bad++;
      for (const p of problems) console.log(`FAIL ${where} ${name}: ${p}`);
    } else {
      console.log(`ok   ${where} ${name}`);
    }
  }
}
console.log(bad ? `${bad} invalid document(s)` : "all documents valid");
process.exit(bad ? 1 : 0);
