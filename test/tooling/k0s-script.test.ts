/**
 * scripts/k0s.mjs without building anything: the pins, the versions it accepts, the version flags
 * from k0s's own Makefile.variables, the archive's checksum, the patched-variant hook and its
 * command line's refusals.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkedArchive, k0sLdflags, k0sPin, K0S_VERSIONS, makeVariables, parseK0sVersion } from "../../scripts/k0s.mjs";

const root = resolve(import.meta.dirname, "../..");

// The shape of k0s's embedded-bins/Makefile.variables: 1.28 pins containerd_version, 1.36 derives it from containerd_version_and_rev.
const VARIABLES_128 = `go_version = 1.22.7
runc_version = 1.1.14
containerd_version = 1.7.8
kubernetes_version = 1.28.14
kubernetes_build_go_flags = "-v"
kine_version = 0.10.3
kine_build_go_cgo_cflags = -DSQLITE_ENABLE_DBSTAT_VTAB=1 # a comment
kine_build_go_cgo_cflags += -D_LARGEFILE64_SOURCE
etcd_version = 3.5.10
konnectivity_version = 0.1.4
`;
const VARIABLES_136 = `# renovate: datasource=github-releases depName=opencontainers/runc
runc_version = 1.4.3
containerd_version_and_rev = 2.3.3@aad11006b869517fcd3009450b6f82da282e1a9b
containerd_version = $(word 1,$(subst @, ,$(containerd_version_and_rev)))
kubernetes_version = 1.36.3
kine_version = 0.16.3
etcd_version = 3.6.14
konnectivity_version = 0.36.0
`;

describe("scripts/k0s.mjs: pins and versions", () => {
  it("pins 1.28.14 (the seed's release) and 1.36.3, each with its archive's sha256 and the etcd it runs", () => {
    expect(K0S_VERSIONS).toEqual(["1.28", "1.36"]);
    expect(k0sPin("1.28")).toMatchObject({ release: "v1.28.14+k0s.0", archive: "k0s-v1.28.14+k0s.0.tar.gz", etcd: "3.5", cgo: true });
    expect(k0sPin("1.36")).toMatchObject({ release: "v1.36.3+k0s.2", archive: "k0s-v1.36.3+k0s.2.tar.gz", etcd: "3.6", cgo: false });
    for (const v of K0S_VERSIONS) expect(k0sPin(v).sha256).toMatch(/^[0-9a-f]{64}$/);
    // The three fixes 1.28 needs on the module proxy; 1.36 builds as tagged.
    expect(Object.keys(k0sPin("1.28").replace ?? {}).sort()).toEqual(["k8s.io/cri-api", "k8s.io/metrics", "k8s.io/mount-utils"]);
    expect(k0sPin("1.28")).toMatchObject({ goBindata: "v3.23.0+incompatible", emptyOffsets: true });
    expect(k0sPin("1.36").replace).toBeUndefined();
  });

  it("takes the minor version, the pinned release and a +variant, and refuses anything else with the choices", () => {
    expect(parseK0sVersion("1.28")).toEqual({ version: "1.28", variant: null });
    expect(parseK0sVersion("v1.36")).toEqual({ version: "1.36", variant: null });
    expect(parseK0sVersion("v1.28.14+k0s.0")).toEqual({ version: "1.28", variant: null });
    expect(parseK0sVersion("1.28+broker")).toEqual({ version: "1.28", variant: "broker" });
    expect(parseK0sVersion("v1.36.3+k0s.2+broker")).toEqual({ version: "1.36", variant: "broker" });
    for (const bad of ["1.27", "1.28.13+k0s.0", "v1.36.3+k0s.1", "latest", "", "1.28+Broker"]) {
      expect(() => parseK0sVersion(bad), bad).toThrow(/choose one of 1\.28 \(v1\.28\.14\+k0s\.0\), 1\.36 \(v1\.36\.3\+k0s\.2\)/);
    }
  });
});

describe("scripts/k0s.mjs: version flags", () => {
  it("reads k0s's component versions as its Makefile does, including 1.36's containerd version@revision", () => {
    expect(makeVariables(VARIABLES_128)).toMatchObject({
      runc_version: "1.1.14",
      kubernetes_build_go_flags: "-v",
      kine_build_go_cgo_cflags: "-DSQLITE_ENABLE_DBSTAT_VTAB=1",
    });
    const f128 = k0sLdflags("v1.28.14+k0s.0", makeVariables(VARIABLES_128), "2024-10-01T00:00:00Z");
    const f136 = k0sLdflags("v1.36.3+k0s.2", makeVariables(VARIABLES_136), "2026-01-01T00:00:00Z");
    expect(f128).toContain("-X github.com/k0sproject/k0s/pkg/build.Version=v1.28.14+k0s.0");
    expect(f128).toContain("-X github.com/k0sproject/k0s/pkg/build.ContainerdVersion=1.7.8");
    expect(f128).toContain("-X github.com/k0sproject/k0s/pkg/build.EtcdVersion=3.5.10");
    expect(f128).toContain("-X k8s.io/component-base/version.gitVersion=v1.28.14");
    expect(f128).toContain("-X k8s.io/component-base/version.gitMinor=28");
    expect(f128).toContain("-X k8s.io/component-base/version.buildDate=2024-10-01T00:00:00Z");
    expect(f136).toContain("-X github.com/k0sproject/k0s/pkg/build.ContainerdVersion=2.3.3");
    expect(f136).toContain("-X github.com/k0sproject/k0s/pkg/build.KubernetesVersion=1.36.3");
    expect(f136).toContain("-X k8s.io/component-base/version.gitMajor=1");
    expect(f136.split(" ").slice(0, 2)).toEqual(["-w", "-s"]);
  });
});

describe("scripts/k0s.mjs: the source archive and the command line", () => {
  const dir = mkdtempSync(join(tmpdir(), "k0s-script-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cli = (env: Record<string, string>, ...args: string[]) =>
    spawnSync(process.execPath, ["scripts/k0s.mjs", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, ...env }, timeout: 30_000 });

  it("refuses an archive whose sha256 is not the pinned one, naming both, and one that is missing", async () => {
    const source = join(dir, "source");
    mkdirSync(source);
    const pin = k0sPin("1.28");
    writeFileSync(join(source, pin.archive), "not k0s");
    process.env.JOIN_BROKER_K0S_SOURCE = source;
    try {
      await expect(checkedArchive(pin)).rejects.toThrow(new RegExp(`has sha256 [0-9a-f]{64}, not the pinned ${pin.sha256}`));
      await expect(checkedArchive(k0sPin("1.36"))).rejects.toThrow(/source archive is missing: .*k0s-v1\.36\.3\+k0s\.2\.tar\.gz/);
    } finally {
      delete process.env.JOIN_BROKER_K0S_SOURCE;
    }
  });

  it("exits 1 naming the checksum when the archive is not k0s as tagged, leaving no lock, scratch directory or build behind", () => {
    const source = join(dir, "bad-source");
    const cache = join(dir, "bad-cache");
    mkdirSync(source);
    writeFileSync(join(source, k0sPin("1.36").archive), "tampered");
    // The scratch directory of a build killed earlier is removed too.
    mkdirSync(join(cache, ".build-v1.36.3+k0s.2-999999"), { recursive: true });
    const r = cli({ JOIN_BROKER_K0S_SOURCE: source, JOIN_BROKER_K0S_CACHE: cache }, "path", "1.36");
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 1, stdout: "" });
    expect(r.stderr).toMatch(/^k0s\.mjs: .*k0s-v1\.36\.3\+k0s\.2\.tar\.gz has sha256 .*not k0s v1\.36\.3\+k0s\.2 as tagged/m);
    expect(readdirSync(cache)).toEqual([]);
  });

  it("refuses an unknown version, an unknown variant, a command or argument it does not know with exit 2 and the usage", () => {
    const cache = join(dir, "empty-cache");
    const version = cli({ JOIN_BROKER_K0S_CACHE: cache }, "path", "1.29");
    expect({ status: version.status, stdout: version.stdout }).toEqual({ status: 2, stdout: "" });
    expect(version.stderr).toMatch(/unknown k0s version '1\.29'/);
    expect(version.stderr).toMatch(/usage: node scripts\/k0s\.mjs path VERSION\[\+VARIANT\]/);
    const variant = cli({ JOIN_BROKER_K0S_CACHE: cache }, "path", "1.28+nosuch");
    expect(variant.status).toBe(2);
    expect(variant.stderr).toMatch(/k0s 1\.28 has no variant 'nosuch': it would be the patches of integrations\/k0s\/1\.28\/nosuch\//);
    const listed = cli({ JOIN_BROKER_K0S_CACHE: cache }, "list", "1.29", "--no-build");
    expect({ status: listed.status, stdout: listed.stdout }).toEqual({ status: 2, stdout: "" });
    expect(listed.stderr).toMatch(/unknown argument 1\.29 \(a version is one of 1\.28, 1\.36\)/);
    for (const args of [["build"], ["path"], [], ["list", "--fast"], ["path", "1.28", "1.36"]]) {
      expect(cli({ JOIN_BROKER_K0S_CACHE: cache }, ...args).status, args.join(" ")).toBe(2);
    }
  });

  it("prints its usage on --help and lists what is not built without building", () => {
    const cache = join(dir, "list-cache");
    const help = cli({ JOIN_BROKER_K0S_CACHE: cache }, "--help");
    expect({ status: help.status, out: help.stdout }).toEqual({
      status: 0,
      out: expect.stringMatching(/^usage: [\s\S]*integrations\/k0s\/VERSION\/V\/[\s\S]*JOIN_BROKER_K0S_CACHE/),
    });
    const list = cli({ JOIN_BROKER_K0S_CACHE: cache }, "list", "--no-build");
    // Each release, then its patched variants (integrations/k0s/<version>/<variant>/: `broker`).
    expect(list.stdout.trimEnd().split("\n")).toEqual([
      "1.28\tv1.28.14+k0s.0\tnot built",
      "1.28+broker\tv1.28.14+k0s.0\tnot built",
      "1.36\tv1.36.3+k0s.2\tnot built",
      "1.36+broker\tv1.36.3+k0s.2\tnot built",
    ]);
    // One release and its variants: what a k0s build job of `npm test` builds.
    expect(cli({ JOIN_BROKER_K0S_CACHE: cache }, "list", "1.36", "--no-build").stdout.trimEnd().split("\n")).toEqual([
      "1.36\tv1.36.3+k0s.2\tnot built",
      "1.36+broker\tv1.36.3+k0s.2\tnot built",
    ]);
  });
});
