/**
 * test/support/test-plan.mjs, the plan `npm test` and vitest.config.ts share: every e2e file runs
 * somewhere (on the primary etcd version at least, or as a step of its own), a step of its own
 * never also runs in a version's project, and each project needs the builds its files use.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { ETCD_MATRIX, PRIMARY_ETCD_VERSION } from "../support/etcd-matrix.mjs";
import { CONTRACT_FILES, e2eProjects, FILE_BUILDS, fileBuilds, k0sVersionsToRun, OWN_STEP_FILES, projectRuns, suiteOf } from "../support/test-plan.mjs";

const ROOT = join(import.meta.dirname, "../..");
const e2eFiles = readdirSync(join(ROOT, "test/e2e"))
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => `test/e2e/${f}`);

it("runs every e2e file: on the primary version, or as a step of its own, and never both", () => {
  const projects = e2eProjects({});
  const primary = projects.find((p) => p.name === `e2e-etcd-${PRIMARY_ETCD_VERSION}`)!;
  for (const file of e2eFiles) {
    const runs = projects.filter((p) => projectRuns(p, file)).map((p) => p.name);
    // A step's file may run in several steps (the k0s files, a step per release), never in a version's project.
    if (OWN_STEP_FILES.includes(file)) expect({ file, runs: runs.length > 0 && runs.every((r) => /^e2e-(?!etcd-)/.test(r)) }).toEqual({ file, runs: true });
    else expect({ file, runs: runs.includes(primary.name) }).toEqual({ file, runs: true });
  }
});

it("lists only files that exist, and gives each version the files of its list", () => {
  for (const [version, files] of Object.entries(ETCD_MATRIX)) {
    for (const f of files ?? []) expect(e2eFiles, `etcd ${version}'s list`).toContain(f);
    const project = e2eProjects({}).find((p) => p.name === `e2e-etcd-${version}`)!;
    expect(e2eFiles.filter((f) => projectRuns(project, f)).sort()).toEqual((files ?? e2eFiles.filter((f) => !OWN_STEP_FILES.includes(f))).sort());
  }
  for (const f of [...CONTRACT_FILES, ...Object.keys(FILE_BUILDS)]) expect(suiteOf(f), f).not.toBeNull();
});

it("needs each version's etcd, and 3.6 where a version holds one learner; only the versions asked for", () => {
  const needs = Object.fromEntries(e2eProjects({}).map((p) => [p.name, p.needs]));
  expect(needs["e2e-etcd-3.4"]).toEqual(["cli", "certcheck", "etcd-3.4", "etcd-3.6"]);
  expect(needs["e2e-etcd-3.7"]).toEqual(["cli", "certcheck", "etcd-3.7"]);
  expect(needs["e2e-kubeadm"]).toContain("kube");
  expect(needs["e2e-k0s-1.28"]).toEqual(expect.arrayContaining(["kube", "k0s-1.28"]));
  expect(needs["e2e-k0s-1.28"]).not.toContain("k0s-1.36");
  // The newest version but the primary runs the broker on serve; with the primary alone, two
  // whole-cluster scenarios do, as a project of their own. Steps of their own need the primary.
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.5" }).map((p) => [p.name, p.env.JOIN_BROKER_E2E_RUNTIME])).toEqual([["e2e-etcd-3.5", "serve"]]);
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.6" }).map((p) => p.name)).toEqual([
    "e2e-etcd-3.6",
    "e2e-serve",
    "e2e-kubeadm",
    "e2e-k0s-1.28",
    "e2e-k0s-1.36",
    "e2e-k0s-1.28-broker",
    "e2e-k0s-1.36-broker",
  ]);
  // A k0s step per release, one after the other in one lane, each on its release as tagged; the
  // patched k0s's admission file in steps of their own, each after its variant's build only.
  const k0sSteps = e2eProjects({}).filter((p) => p.name.startsWith("e2e-k0s"));
  expect(k0sSteps.map((p) => [p.name, p.env.E2E_K0S_VERSIONS, p.lane, p.include])).toEqual([
    ["e2e-k0s-1.28", "1.28", "e2e-k0s", ["test/e2e/lab-k0s.test.ts"]],
    ["e2e-k0s-1.36", "1.36", "e2e-k0s", ["test/e2e/lab-k0s.test.ts"]],
    ["e2e-k0s-1.28-broker", "1.28", "e2e-k0s-broker", ["test/e2e/lab-k0s-admission.test.ts"]],
    ["e2e-k0s-1.36-broker", "1.36", "e2e-k0s-broker", ["test/e2e/lab-k0s-admission.test.ts"]],
  ]);
  expect(needs["e2e-k0s-1.36"]).not.toContain("k0s-1.36+broker");
  expect(needs["e2e-k0s-1.36-broker"]).toEqual(expect.arrayContaining(["kube", "k0s-1.36+broker"]));
  expect(needs["e2e-k0s-1.36-broker"]).not.toContain("k0s-1.36");
  // `npm test -- test/e2e/lab-k0s.test.ts` builds both releases, the admission file both variants.
  expect(fileBuilds(["test/e2e/lab-k0s.test.ts"]).sort()).toEqual(["k0s-1.28", "k0s-1.36", "kube"]);
  expect(fileBuilds(["test/e2e/lab-k0s-admission.test.ts"]).sort()).toEqual(["k0s-1.28+broker", "k0s-1.36+broker", "kube"]);
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.4,3.7" }).find((p) => p.name === "e2e-etcd-3.7")!.env).toMatchObject({ JOIN_BROKER_E2E_RUNTIME: "serve" });
});

it("runs the k0s releases E2E_K0S_VERSIONS names, every pinned one without it, and refuses an unknown one", () => {
  expect(k0sVersionsToRun({})).toEqual(["1.28", "1.36"]);
  expect(k0sVersionsToRun({ E2E_K0S_VERSIONS: "1.36" })).toEqual(["1.36"]);
  expect(k0sVersionsToRun({ E2E_K0S_VERSIONS: "1.36,1.28" })).toEqual(["1.28", "1.36"]);
  expect(() => k0sVersionsToRun({ E2E_K0S_VERSIONS: "1.29" })).toThrow(/E2E_K0S_VERSIONS names 1\.29; the pinned k0s versions are 1\.28, 1\.36/);
});
