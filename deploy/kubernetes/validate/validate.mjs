// Validates deploy/kubernetes offline, with no cluster: every object against its schema (the
// Kubernetes API's, from the npm package kubernetes-models; ServiceMonitor's from
// @kubernetes-models/prometheus-operator), then what no schema knows: that the objects agree with
// one another (selectors, port names, probes, grace period, HPA target, the adapter's metrics).
//
//   node validate.mjs DIR       exit 0 when all is well; each problem printed, exit 1 otherwise
import { createRequire } from "node:module";
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, relative, dirname } from "node:path";
import { parseAllDocuments, parse } from "yaml";

const require = createRequire(import.meta.url);
const root = process.argv[2];
if (!root) {
  console.error("usage: node validate.mjs DIR");
  process.exit(2);
}
const problems = [];
const problem = (where, text) => problems.push(`${where}: ${text}`);

function yamlFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "validate" || name === "node_modules" ? [] : yamlFiles(path);
    return name.endsWith(".yaml") || name.endsWith(".yml") ? [path] : [];
  });
}

// The model class for an apiVersion and kind: kubernetes-models/<group>/<version>/<Kind>.
function modelClass(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  const path = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`
    : `kubernetes-models/${group ? group + "/" : ""}${version}/${kind}`;
  try {
    return require(path)[kind];
  } catch {
    return null;
  }
}

const objects = [];  // {file, doc}
const kustomizations = [];
for (const file of yamlFiles(root)) {
  const where = relative(root, file);
  for (const document of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (document.errors.length) {
      problem(where, `YAML: ${document.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const doc = document.toJS();
    if (doc == null) continue;
    if (doc.kind === "Kustomization") {
      kustomizations.push({ file, doc });
      continue;
    }
    const Model = doc.apiVersion && doc.kind ? modelClass(doc.apiVersion, doc.kind) : null;
    if (!Model) {
      problem(where, `no schema for apiVersion ${doc.apiVersion} kind ${doc.kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
      objects.push({ file: where, doc });
      console.log(`ok  ${doc.apiVersion} ${doc.kind}/${doc.metadata.name} (${where})`);
    } catch (error) {
      problem(where, `${doc.kind}/${doc.metadata?.name}: ${error.message}`);
    }
  }
}

// A kustomization's resources must exist.
for (const { file, doc } of kustomizations) {
  for (const resource of doc.resources ?? []) {
    if (!existsSync(join(dirname(file), resource))) problem(relative(root, file), `resource ${resource} does not exist`);
  }
}

const find = (kind) => objects.filter((o) => o.doc.kind === kind).map((o) => o.doc);
const matches = (selector, labels) => Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

// The cross-object checks, on the server's own manifests.
const [deployment] = find("Deployment");
if (!deployment) {
  problem("deployment", "no Deployment");
} else {
  const pod = deployment.spec.template;
  const container = pod.spec.containers.find((c) => c.name === "inferd");
  const portNames = new Set((container?.ports ?? []).map((p) => p.name));
  for (const name of ["http", "grpc", "metrics"]) {
    if (!portNames.has(name)) problem("Deployment", `no container port named ${name}`);
  }
  if (!matches(deployment.spec.selector.matchLabels, pod.metadata.labels)) {
    problem("Deployment", "its selector does not match its pod template's labels");
  }
  const probePath = (probe) => probe?.httpGet?.path;
  if (probePath(container.readinessProbe) !== "/v2/health/ready") problem("Deployment", "readiness must probe /v2/health/ready");
  if (probePath(container.livenessProbe) !== "/v2/health/live") problem("Deployment", "liveness must probe /v2/health/live");
  if (!container.startupProbe) problem("Deployment", "no startup probe: a slow model load would fail liveness");
  // The grace period must cover the preStop pause and the drain (--exit-timeout-secs).
  const flag = (name) => {
    const arg = (container.args ?? []).find((a) => a.startsWith(`--${name}=`));
    return arg ? arg.split("=")[1] : undefined;
  };
  const exitTimeout = Number(flag("exit-timeout-secs") ?? 30);
  const preStop = container.lifecycle?.preStop?.exec?.command ?? [];
  const pause = preStop[0] === "sleep" ? Number(preStop[1]) : 0;
  if (!container.lifecycle?.preStop) problem("Deployment", "no preStop hook");
  const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (grace < pause + exitTimeout) {
    problem("Deployment", `terminationGracePeriodSeconds ${grace} < preStop ${pause} s + --exit-timeout-secs ${exitTimeout}`);
  }
  for (const service of find("Service")) {
    if (!matches(service.spec.selector, pod.metadata.labels)) problem(`Service/${service.metadata.name}`, "selector matches no pod");
    for (const port of service.spec.ports) {
      if (typeof port.targetPort === "string" && !portNames.has(port.targetPort)) {
        problem(`Service/${service.metadata.name}`, `targetPort ${port.targetPort} is no container port`);
      }
      if (port.name === "grpc" && port.appProtocol !== "grpc") problem(`Service/${service.metadata.name}`, "grpc port without appProtocol: grpc");
    }
  }
  for (const kind of ["PodDisruptionBudget", "ServiceMonitor"]) {
    for (const object of find(kind)) {
      if (!matches(object.spec.selector.matchLabels, kind === "ServiceMonitor" ? find("Service")[0]?.metadata.labels : pod.metadata.labels)) {
        problem(`${kind}/${object.metadata.name}`, "selector matches nothing");
      }
    }
  }
  for (const monitor of find("ServiceMonitor")) {
    for (const endpoint of monitor.spec.endpoints) {
      if (!find("Service").some((s) => s.spec.ports.some((p) => p.name === endpoint.port))) {
        problem(`ServiceMonitor/${monitor.metadata.name}`, `port ${endpoint.port} is no Service port`);
      }
    }
  }
  for (const hpa of find("HorizontalPodAutoscaler")) {
    const target = hpa.spec.scaleTargetRef;
    if (target.kind !== "Deployment" || target.name !== deployment.metadata.name) {
      problem(`HorizontalPodAutoscaler/${hpa.metadata.name}`, "does not scale the Deployment");
    }
    if (!container.resources?.requests?.cpu) problem("Deployment", "no CPU request: the HPA's utilisation has no denominator");
    // What the API server's validation adds to the schema: a target carries the value its type names.
    for (const metric of hpa.spec.metrics ?? []) {
      const target = metric[metric.type.charAt(0).toLowerCase() + metric.type.slice(1)]?.target;
      const field = { Utilization: "averageUtilization", AverageValue: "averageValue", Value: "value" }[target?.type];
      if (!field || target[field] === undefined) {
        problem(`HorizontalPodAutoscaler/${hpa.metadata.name}`, `a ${metric.type} metric's target of type ${target?.type} has no ${field}`);
      }
    }
  }
}

// Every External metric an HPA asks for is one the adapter's rules serve.
const adapterMetrics = new Set();
for (const configMap of find("ConfigMap").filter((c) => c.data?.["config.yaml"])) {
  const config = parse(configMap.data["config.yaml"]);
  for (const rule of [...(config.rules ?? []), ...(config.externalRules ?? [])]) {
    for (const key of ["seriesQuery", "metricsQuery"]) {
      if (typeof rule[key] !== "string") problem(`ConfigMap/${configMap.metadata.name}`, `a rule without ${key}`);
    }
    if (rule.name?.as) adapterMetrics.add(rule.name.as);
  }
}
for (const hpa of find("HorizontalPodAutoscaler")) {
  for (const metric of hpa.spec.metrics.filter((m) => m.type === "External")) {
    if (!adapterMetrics.has(metric.external.metric.name)) {
      problem(`HorizontalPodAutoscaler/${hpa.metadata.name}`, `External metric ${metric.external.metric.name} is served by no adapter rule`);
    }
  }
}

if (problems.length) {
  for (const text of problems) console.error(`FAIL ${text}`);
  process.exit(1);
}
console.log(`all ${objects.length} objects valid`);
