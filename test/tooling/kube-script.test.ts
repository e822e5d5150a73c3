/**
 * scripts/kube.mjs without building anything: the wrapper module it generates from kubernetes'
 * go.mod, the version flags, the pins, and its command line's refusals.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseKubePins, stagingModules, versionLdflags, wrapperGoMod } from "../../scripts/kube.mjs";

const root = resolve(import.meta.dirname, "../..");

// The shape of k8s.io/kubernetes' go.mod, shortened: a replace block of staging directories, the
// two sample modules nobody publishes, and replaces of other kinds that the wrapper must not copy.
const KUBERNETES_GO_MOD = `// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace github.com/some/fork => github.com/some/fork v1.2.3

replace k8s.io/streaming => ./staging/src/k8s.io/streaming

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go v0.0.0 => ./staging/src/k8s.io/client-go // pinned to the tree
	k8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin
	k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
	k8s.io/utils => k8s.io/utils v0.0.0-20260108192941-914a6e750570
)
`;

const PIN = { release: "1.37.2", staging: "v0.37.2", etcd: "3.7" } as const;

describe("scripts/kube.mjs: the wrapper module", () => {
  it("replaces each staging module kubernetes' go.mod points into ./staging with its published version", () => {
    expect(stagingModules(KUBERNETES_GO_MOD)).toEqual(["k8s.io/streaming", "k8s.io/api", "k8s.io/client-go"]);
    const goMod = wrapperGoMod(KUBERNETES_GO_MOD, PIN);
    const replaces = goMod
      .split("\n")
      .filter((l) => l.includes("=>"))
      .map((l) => l.trim());
    expect(replaces).toEqual([
      "k8s.io/streaming => k8s.io/streaming v0.37.2",
      "k8s.io/api => k8s.io/api v0.37.2",
      "k8s.io/client-go => k8s.io/client-go v0.37.2",
    ]);
  });

  it("leaves out the sample modules and every replace that is not a staging directory", () => {
    const goMod = wrapperGoMod(KUBERNETES_GO_MOD, PIN);
    expect(goMod).not.toMatch(/sample-cli-plugin|sample-controller|some\/fork|k8s\.io\/utils/);
  });

  it("requires the pinned k8s.io/kubernetes and keeps kubernetes' go and godebug lines", () => {
    const lines = wrapperGoMod(KUBERNETES_GO_MOD, PIN).split("\n");
    expect(lines).toContain("require k8s.io/kubernetes v1.37.2");
    expect(lines).toContain("go 1.26.0");
    expect(lines).toContain("godebug default=go1.26");
    expect(lines.filter((l) => l.startsWith("module "))).toEqual(["module etcd-join-broker/kube-build"]);
  });

  it("refuses a go.mod with no staging replace rather than generate a wrapper that cannot build", () => {
    expect(() => wrapperGoMod("module k8s.io/kubernetes\n\ngo 1.26.0\n", PIN)).toThrow(/no module with \.\/staging/);
  });
});

describe("scripts/kube.mjs: version flags and pins", () => {
  it("sets Kubernetes' version variables so kubeadm does not call itself v0.0.0-master", () => {
    const flags = versionLdflags("1.37.2");
    for (const pkg of ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]) {
      expect(flags).toContain(`-X ${pkg}.gitVersion=v1.37.2`);
      expect(flags).toContain(`-X ${pkg}.gitMajor=1`);
      expect(flags).toContain(`-X ${pkg}.gitMinor=37`);
      expect(flags).toContain(`-X ${pkg}.gitTreeState=clean`);
    }
  });

  it("derives the staging version from the pinned release and checks the etcd minor", () => {
    expect(parseKubePins(readFileSync(join(root, "scripts/kube-versions.json"), "utf8"))).toEqual({ release: "1.37.2", staging: "v0.37.2", etcd: "3.7" });
    expect(parseKubePins('{"kubernetes":"1.36.3","etcd":"3.6"}')).toEqual({ release: "1.36.3", staging: "v0.36.3", etcd: "3.6" });
    for (const bad of ['{"kubernetes":"1.37","etcd":"3.7"}', '{"kubernetes":"v1.37.2","etcd":"3.7"}', '{"etcd":"3.7"}']) {
      expect(() => parseKubePins(bad), bad).toThrow(/1\.<minor>\.<patch>/);
    }
    expect(() => parseKubePins('{"kubernetes":"1.37.2","etcd":"3.3"}')).toThrow(/unknown etcd version/);
  });
});

describe("scripts/kube.mjs: command line", () => {
  // An empty cache: whatever these commands did, they would find nothing built.
  const cache = mkdtempSync(join(tmpdir(), "kube-cache-"));
  afterAll(() => rmSync(cache, { recursive: true, force: true }));
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, ["scripts/kube.mjs", ...args], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, JOIN_BROKER_KUBE_CACHE: cache },
      timeout: 30_000,
    });

  it("refuses a binary it does not build with exit 2 and the usage, building nothing", () => {
    const r = cli("path", "kubelet");
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 2, stdout: "" });
    expect(r.stderr).toMatch(/unknown binary 'kubelet'/);
    expect(r.stderr).toMatch(/usage: node scripts\/kube\.mjs path kubeadm\|kube-apiserver\|etcd/);
  });

  it("refuses an unknown command or a missing name with exit 2", () => {
    for (const args of [["build"], ["path"], [], ["list", "--fast"]]) {
      expect(cli(...args).status, args.join(" ")).toBe(2);
    }
  });

  it("exits 1 with the reason when the build fails, leaving no lock and no scratch directory behind", () => {
    const dir = mkdtempSync(join(tmpdir(), "kube-fail-"));
    try {
      // A Go that cannot reach the module proxy, and the scratch directory of a build killed earlier.
      const go = join(dir, "go");
      writeFileSync(go, "#!/bin/sh\necho 'go: proxy.golang.org unreachable' >&2\nexit 1\n", { mode: 0o755 });
      const failCache = join(dir, "cache");
      mkdirSync(join(failCache, ".build-1.37.2-999999"), { recursive: true });
      const r = spawnSync(process.execPath, ["scripts/kube.mjs", "path", "kubeadm"], {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, GO: go, JOIN_BROKER_KUBE_CACHE: failCache },
        timeout: 30_000,
      });
      expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: "" });
      expect(r.stderr).toMatch(/proxy\.golang\.org unreachable/);
      expect(r.stderr).toMatch(/^kube\.mjs: .*k8s\.io\/kubernetes@v1\.37\.2/m);
      expect(readdirSync(failCache)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("prints its usage on --help and lists what is not built without building", () => {
    const help = cli("--help");
    expect({ status: help.status, out: help.stdout }).toEqual({ status: 0, out: expect.stringMatching(/^usage: .*\n[\s\S]*JOIN_BROKER_KUBE_CACHE/) });
    const list = cli("list", "--no-build");
    expect(list.stdout.split("\n").slice(0, 2)).toEqual(["kubeadm\t1.37.2\tnot built", "kube-apiserver\t1.37.2\tnot built"]);
  });
});
