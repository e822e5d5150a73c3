// What `npm test` runs: the vitest projects of the end-to-end files (one per etcd version, and
// the steps that wait for a long build of their own), which builds each of them needs, and which
// suite a test file belongs to. scripts/test.mjs schedules from it and vitest.config.ts defines
// the projects from it; test/support/etcd-matrix.mjs decides which e2e file runs on which etcd
// version.
import { K0S_VERSIONS, k0sPin } from "../../scripts/k0s.mjs";
import { ETCD_MATRIX, PRIMARY_ETCD_VERSION, etcdVersionsToRun } from "./etcd-matrix.mjs";

/** The unmodified kubeadm on lab hosts: a step of its own, once kubeadm and kube-apiserver are built. */
export const KUBEADM_FILE = "test/e2e/lab-kubeadm.test.ts";

/** Real k0s on lab hosts: a step of its own, once k0s (and kube-apiserver) are built. */
export const K0S_FILE = "test/e2e/lab-k0s.test.ts";

/** The patched k0s (`+broker`, integrations/k0s/) whose join API checks the admission: a step of its own per release. */
export const K0S_ADMISSION_FILE = "test/e2e/lab-k0s-admission.test.ts";

/** The provisioning job that builds k0s `version` as tagged ("k0s-1.28"), or a patched variant of it ("k0s-1.28+broker"). */
export const k0sJob = (version, variant = null) => `k0s-${version}${variant ? `+${variant}` : ""}`;

/**
 * The k0s releases the k0s files run: $E2E_K0S_VERSIONS (comma-separated, as the k0s steps set
 * it), else every pinned one (scripts/k0s-versions.json).
 * @param {Record<string, string | undefined>} env
 */
export function k0sVersionsToRun(env = process.env) {
  const asked = (env.E2E_K0S_VERSIONS ?? "").split(",").filter(Boolean);
  const unknown = asked.filter((v) => !K0S_VERSIONS.includes(v));
  if (unknown.length) throw new Error(`E2E_K0S_VERSIONS names ${unknown.join(", ")}; the pinned k0s versions are ${K0S_VERSIONS.join(", ")}`);
  return asked.length ? K0S_VERSIONS.filter((v) => asked.includes(v)) : K0S_VERSIONS;
}

/**
 * e2e files that are steps of their own: each step waits for a long build (a provisioning job
 * of scripts/test.mjs), and runs its files on the primary etcd version as project `project`,
 * beside the rest; steps of one `lane` run one after the other, in this order.
 */
export const OWN_STEPS = [
  {
    project: "e2e-kubeadm",
    // kubeadm on lab hosts, kubeadm's etcd CA directory under the agent and the join API, and the
    // real kube-apiserver on the agent's etcd (auth on).
    files: [KUBEADM_FILE, "test/e2e/kubeadm-ca.test.ts", "test/e2e/apiserver-etcd.test.ts"],
    builds: ["kube"],
    env: {},
    lane: "e2e-kubeadm",
    title: "kubeadm on lab hosts, its etcd CA directory under the agent and the join API, and kube-apiserver on the agent's etcd",
  },
  // Real k0s controllers on lab hosts (the seed's split brain without the broker, none through it),
  // a step per release: each starts once its own build is done, so 1.28's tests run while 1.36
  // still builds. One lane: never two releases' seed runs (two labs of four hosts each) at once.
  ...K0S_VERSIONS.map((version) => ({
    project: `e2e-k0s-${version}`,
    files: [K0S_FILE],
    builds: ["kube", k0sJob(version)],
    env: { E2E_K0S_VERSIONS: version },
    lane: "e2e-k0s",
    title: `k0s ${k0sPin(version).release} on lab hosts (built from source)`,
  })),
  // The patched k0s (`+broker`) whose join API checks the admission: a step per release once that
  // variant is built, in a lane of its own, so the release's step above need not wait for the
  // variant's build. Beside it, as when both files shared a step: one lab of three hosts.
  ...K0S_VERSIONS.map((version) => ({
    project: `e2e-k0s-${version}-broker`,
    files: [K0S_ADMISSION_FILE],
    builds: ["kube", k0sJob(version, "broker")],
    env: { E2E_K0S_VERSIONS: version },
    lane: "e2e-k0s-broker",
    title: `k0s ${k0sPin(version).release} +broker on lab hosts (its join API checks the admission)`,
  })),
];

/** The Worker tests that run once more over loopback against `join-broker serve` (project contract-serve). */
export const CONTRACT_FILES = ["auth", "bad-input", "idempotency", "openapi", "tokens", "verifier", "contract-compat"].map((f) => `test/worker/${f}.test.ts`);

/**
 * Builds an e2e file needs beyond the CLI (dist/cli), certcheck and etcd (names of
 * scripts/test.mjs's provisioning jobs): the single executable files, Kubernetes.
 */
export const FILE_BUILDS = {
  "test/e2e/single-executable.test.ts": ["package"],
  "test/e2e/agent-units.test.ts": ["package"],
  // A file of several steps (the k0s files, one step per release) needs every one's builds.
  ...Object.fromEntries(
    [...new Set(OWN_STEPS.flatMap((s) => s.files))].map((f) => [f, [...new Set(OWN_STEPS.filter((s) => s.files.includes(f)).flatMap((s) => s.builds))]]),
  ),
};

/** e2e files that are a step of their own (they wait for a long build), not part of an etcd version's project. */
export const OWN_STEP_FILES = [...new Set(OWN_STEPS.flatMap((s) => s.files))];

/** Versions whose etcd holds one learner: files needing several start etcd 3.6 (MULTI_LEARNER_VERSION in test/support/etcd.ts). */
const ONE_LEARNER = ["3.4", "3.5"];

/** The provisioning job that makes etcd `version` available ("etcd-3.6"; 3.4 is Debian's package). */
export const etcdJob = (version) => `etcd-${version}`;

/**
 * The e2e projects of one `npm test`, in the order of the versions: `{ name, title, include,
 * exclude, env, needs }`. `env` is the project's environment (E2E_ETCD_VERSION, and how the broker
 * and the CLI run); `needs` the provisioning jobs its files use (some only for some files:
 * `needsFor(files)` narrows that).
 * @param {Record<string, string | undefined>} env
 */
export function e2eProjects(env = process.env) {
  const versions = etcdVersionsToRun(env);
  // One version's project runs with the broker under join-broker serve (workerd from npm, state on
  // local disk) instead of wrangler dev: the newest other than the primary. Without one, the
  // parallel-join and fault scenarios run on serve as a project of their own.
  const serveVersion = versions.filter((v) => v !== PRIMARY_ETCD_VERSION).at(-1) ?? null;
  const etcdNeeds = (v) => [...new Set([etcdJob(v), ...(ONE_LEARNER.includes(v) ? [etcdJob("3.6")] : [])])];
  const projects = versions.map((v) => ({
    name: `e2e-etcd-${v}`,
    title: `end-to-end tests on etcd ${v}${ETCD_MATRIX[v] ? "" : " (every file but the kubeadm and k0s tests)"}${v === serveVersion ? ", broker on join-broker serve" : ""}${v === "3.4" ? ", the CLI from its TypeScript sources" : ""}`,
    include: ETCD_MATRIX[v] ?? ["test/e2e/**/*.test.ts"],
    exclude: ETCD_MATRIX[v] ? [] : OWN_STEP_FILES,
    // One version's processes run the TypeScript sources (as a checkout with edits does), the
    // others the build (as an installed package does).
    env: { E2E_ETCD_VERSION: v, ...(v === "3.4" ? { JOIN_BROKER_LAUNCH: "source" } : {}), ...(v === serveVersion ? { JOIN_BROKER_E2E_RUNTIME: "serve" } : {}) },
    needs: ["cli", "certcheck", ...etcdNeeds(v)],
  }));
  if (!serveVersion) {
    const v = versions.includes(PRIMARY_ETCD_VERSION) ? PRIMARY_ETCD_VERSION : versions[versions.length - 1];
    projects.push({
      name: "e2e-serve",
      title: `end-to-end scenarios on join-broker serve (etcd ${v})`,
      include: ["test/e2e/cluster-parallel.test.ts", "test/e2e/cluster-faults.test.ts"],
      exclude: [],
      env: { JOIN_BROKER_E2E_RUNTIME: "serve", E2E_ETCD_VERSION: v },
      needs: ["cli", "certcheck", ...etcdNeeds(v)],
    });
  }
  if (versions.includes(PRIMARY_ETCD_VERSION)) {
    for (const step of OWN_STEPS) {
      projects.push({
        name: step.project,
        title: step.title,
        include: step.files,
        exclude: [],
        env: { E2E_ETCD_VERSION: PRIMARY_ETCD_VERSION, ...step.env },
        lane: step.lane,
        needs: ["cli", "certcheck", etcdJob(PRIMARY_ETCD_VERSION), ...step.builds],
      });
    }
  }
  return projects;
}

/** Which suite a test file (a path relative to the repository) belongs to: unit, worker, e2e, or null. */
export function suiteOf(file) {
  if (/^src\/.*\.test\.ts$/.test(file) || /^test\/tooling\/.*\.test\.ts$/.test(file)) return "unit";
  if (/^test\/worker\/.*\.test\.ts$/.test(file)) return "worker";
  if (/^test\/e2e\/.*\.test\.ts$/.test(file)) return "e2e";
  return null;
}

/** The provisioning jobs the e2e files `files` use on top of their projects' own needs. */
export function fileBuilds(files) {
  return [...new Set(files.flatMap((f) => FILE_BUILDS[f] ?? []))];
}

/** Whether `project` (one of `e2eProjects()`) runs `file`. */
export function projectRuns(project, file) {
  if (project.exclude.includes(file)) return false;
  return project.include.some((p) => p === file || (p === "test/e2e/**/*.test.ts" && suiteOf(file) === "e2e"));
}
