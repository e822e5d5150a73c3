/**
 * test/support/test-plan.mjs, the plan `npm test` and vitest.config.ts share: every e2e file runs
 * somewhere (on the primary etcd version at least, or as a step of its own), a step of its own
 * never also runs in a version's project, and each project needs the builds its files use.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { ETCD_MATRIX, PRIMARY_ETCD_VERSION } from "../support/etcd-matrix.mjs";
import { CONTRACT_FILES, e2eProjects, FILE_BUILDS, OWN_STEP_FILES, projectRuns, suiteOf } from "../support/test-plan.mjs";

const ROOT = join(import.meta.dirname, "../..");
const e2eFiles = readdirSync(join(ROOT, "test/e2e"))
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => `test/e2e/${f}`);

it("runs every e2e file: on the primary version, or as a step of its own, and never both", () => {
  const projects = e2eProjects({});
  const primary = projects.find((p) => p.name === `e2e-etcd-${PRIMARY_ETCD_VERSION}`)!;
  for (const file of e2eFiles) {
    const runs = projects.filter((p) => projectRuns(p, file)).map((p) => p.name);
    if (OWN_STEP_FILES.includes(file)) expect({ file, runs }).toEqual({ file, runs: [expect.stringMatching(/^e2e-(?!etcd-)/)] });
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
  expect(needs["e2e-k0s"]).toEqual(expect.arrayContaining(["kube", "k0s"]));
  // The newest version but the primary runs the broker on serve; with the primary alone, two
  // whole-cluster scenarios do, as a project of their own. Steps of their own need the primary.
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.5" }).map((p) => [p.name, p.env.JOIN_BROKER_E2E_RUNTIME])).toEqual([["e2e-etcd-3.5", "serve"]]);
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.6" }).map((p) => p.name)).toEqual(["e2e-etcd-3.6", "e2e-serve", "e2e-kubeadm", "e2e-k0s"]);
  // The k0s step runs the patched k0s's admission file too, after the k0s build (which makes the variants).
  expect(e2eProjects({}).find((p) => p.name === "e2e-k0s")).toMatchObject({
    include: ["test/e2e/lab-k0s.test.ts", "test/e2e/lab-k0s-admission.test.ts"],
    needs: expect.arrayContaining(["kube", "k0s"]),
  });
  expect(e2eProjects({ E2E_ETCD_VERSIONS: "3.4,3.7" }).find((p) => p.name === "e2e-etcd-3.7")!.env).toMatchObject({ JOIN_BROKER_E2E_RUNTIME: "serve" });
});
