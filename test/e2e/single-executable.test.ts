/**
 * The single executable files (`npm run package`) as a controller uses them. The x64 file,
 * installed alone and checked against SHA256SUMS, runs where no `node` and no project tree is
 * visible (a private mount namespace): it says its version and usage, and joins real etcd
 * clusters through `join-broker serve`, as bootstrap and as joiner, in its own mode and in gate
 * mode (with an installer in POSIX sh, since nothing there runs Node, on TLS etcd). The arm64 file is an
 * AArch64 ELF file that, under qemu-aarch64-static, says its version and usage too.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AARCH64_SYSROOT, findTool } from "../../scripts/tools.mjs";
import { ROOT } from "../support/broker.ts";
import { ClusterHarness, type NodeSpec } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { ensureTool, etcdBinary } from "../support/etcd.ts";
import { expectClientCertificateRequired } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";
import { elfMachine, installX64, releaseFile, runWithoutNode, VERSION, withoutNode } from "../support/single-executable.ts";
import { CONTRACT_VERSION } from "../../src/shared/protocol/wire.ts";

const INSTALLER = join(ROOT, "test/support/etcd-installer.sh");
let home: string;
let bin: string;
let installer: string;

beforeAll(() => {
  // The node's own directory, outside the project: the file and the installer, nothing else.
  home = mkdtempSync(join(tmpdir(), "join-broker-sea-"));
  bin = installX64(home);
  installer = join(home, "bin", "etcd-installer.sh");
  execFileSync("cp", [INSTALLER, installer]);
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

it("sees no node and no project tree inside the namespace it runs in", () => {
  const probe = runWithoutNode(home, "/bin/sh", ["-c", `command -v node || echo "no node"; ls -A ${ROOT} | wc -l`]);
  expect(probe.stderr).toBe("");
  expect(probe.status).toBe(0);
  expect(probe.stdout).toBe("no node\n0\n");
  // Outside it, this very test runs on Node: the hiding is what makes the difference.
  expect(execFileSync("/bin/sh", ["-c", "command -v node"], { encoding: "utf8" }).trim()).not.toBe("");
});

it("prints its version and its usage without Node.js", () => {
  const version = runWithoutNode(home, bin, ["--version"]);
  expect(version.status).toBe(0);
  expect(version.stdout).toBe(`join-broker ${VERSION} (protocol v${CONTRACT_VERSION})\n`);
  const help = runWithoutNode(home, bin, ["--help"]);
  expect(help.status).toBe(0);
  for (const command of ["join", "controller", "admin"]) expect(help.stdout).toMatch(new RegExp(`^  ${command} `, "m"));
  expect(help.stdout).toMatch(/^ {2}serve +not in this single file: .*npm package/m);
  const joinHelp = runWithoutNode(home, bin, ["join", "--help"]);
  expect(joinHelp.status).toBe(0);
  expect(joinHelp.stdout).toMatch(/--exec/);
});

it("answers serve, which it does not carry, with a usage error that points to the npm package", () => {
  const serve = runWithoutNode(home, bin, ["serve", "--listen", "127.0.0.1:0"]);
  expect(serve.status).toBe(2);
  expect(serve.stderr).toMatch(/not part of the single executable file.*npm package/);
});

async function joinTwo(scenario: string, start: (h: ClusterHarness, node: NodeSpec) => void): Promise<ClusterHarness> {
  const names = [`${scenario}-0`, `${scenario}-1`];
  const h = await ClusterHarness.start({
    scenario,
    seed: e2eSeed(scenario),
    nodes: names,
    broker: { runtime: "serve" },
    agentCommand: (args) => withoutNode(home, bin, args),
  });
  try {
    for (const name of names) start(h, h.node(name));
    // Well inside the test's own timeout, so a stuck join fails with each agent's last step.
    await h.waitFor("both agents to report joined", () => names.every((n) => h.joined(n)), 150_000);
    const final = await expectOneHealthyCluster(h, names);
    const roles = names.map((n) => /^joined cluster \S+ as (bootstrap|join)$/m.exec(h.current(n)!.stdout)?.[1]).sort();
    expect(roles).toEqual(["bootstrap", "join"]);
    await expectEveryAdmissionAudited(h, names, final.ids);
    return h;
  } catch (e) {
    h.writeTimeline();
    await h.cleanup();
    throw e;
  }
}

describe("joins a real etcd cluster without Node.js, the broker on join-broker serve", () => {
  it("in its own mode: one node bootstraps, the other joins", { timeout: 240_000 }, async () => {
    const h = await joinTwo("sea-own", (h, node) => h.startAgent(node.name));
    // Its own mode keeps supervising etcd: both agents still run.
    expect(h.nodes.map((n) => h.current(n.name)!.exit)).toEqual([null, null]);
    h.writeTimeline();
    await h.cleanup();
  });

  it("in gate mode: each runs an installer, one init, one join, and exits 0", { timeout: 240_000 }, async () => {
    // The etcdctl of the etcd under test when it was built beside it (scripts/etcd.mjs), else Debian's.
    const beside = join(dirname(await etcdBinary()), "etcdctl");
    const etcdctl = existsSync(beside) ? beside : await ensureTool("etcdctl");
    await ensureTool("openssl");
    const h = await joinTwo("sea-gate", (h, node) => {
      // On TLS: the node's PKI directory with the cluster's CA pair, where the installer makes its certificates.
      const args = [
        node.name,
        join(node.stateDir, "installer-etcd"),
        node.peerURL,
        node.clientURL,
        h.nodes.map((n) => n.clientURL).join(","),
        h.etcdBin,
        etcdctl,
        node.pkiDir,
      ];
      const quoted = args.map((a) => `'${a}'`).join(" ");
      const command = `if [ "$JOIN_BROKER_ROLE" = bootstrap ]; then exec '${installer}' init ${quoted}; else exec '${installer}' join ${quoted}; fi`;
      h.startAgent(node.name, { args: h.gateAgentArgs(node, command) });
    });
    await h.waitFor("both agents to exit", () => h.nodes.every((n) => h.current(n.name)!.exit !== null), 20_000);
    expect(
      h.nodes.map((n) => h.current(n.name)!.exit!.code),
      h.describeAgents(),
    ).toEqual([0, 0]);
    for (const node of h.nodes) await expectClientCertificateRequired(h, node.clientURL);
    h.writeTimeline();
    await h.cleanup();
  });
});

describe("the arm64 file", () => {
  it("is an AArch64 ELF file (and the x64 one x86-64)", () => {
    expect(elfMachine(releaseFile("arm64"))).toBe(183);
    expect(elfMachine(releaseFile("x64"))).toBe(62);
  });

  // Under CI every check runs: scripts/test.mjs installs qemu-user-static and the arm64 libraries.
  const qemu = process.env.CI === "true" ? "required" : findTool("qemu-aarch64-static");
  it.skipIf(!qemu)("prints its version and usage under qemu-aarch64-static", () => {
    const emulator = findTool("qemu-aarch64-static");
    if (!emulator)
      throw new Error(
        "qemu-aarch64-static and the arm64 libraries are missing: apt-get install qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross",
      );
    const run = (args: string[]) =>
      execFileSync(emulator, ["-L", AARCH64_SYSROOT, releaseFile("arm64"), ...args], { cwd: home, encoding: "utf8", timeout: 120_000 });
    expect(run(["--version"])).toBe(`join-broker ${VERSION} (protocol v${CONTRACT_VERSION})\n`);
    expect(run(["--help"])).toMatch(/^ {2}join /m);
  });
});
