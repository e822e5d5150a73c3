/**
 * `join-broker serve` over HTTPS with a certificate from a private CA: the admin client, the
 * join API and the agents trust it through --ca-file (or NODE_EXTRA_CA_CERTS), refuse it
 * without, and a bootstrap node and two joiners form one etcd cluster through it.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, ROOT } from "../support/broker.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { makePrivateCa, type PrivateCa } from "../support/private-ca.ts";
import { e2eSeed } from "../support/seeded.ts";

const BIN = join(ROOT, "bin/join-broker");
const NODES = ["tls-0", "tls-1", "tls-2"];
let dir: string;
let ca: PrivateCa;
let h: ClusterHarness;

function admin(args: string[], env: Record<string, string> = {}, node = process.execPath) {
  return spawnSync(node, [BIN, "admin", ...args], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: ADMIN_TOKEN, ...env },
    timeout: 60_000,
  });
}

/** The machine's own Node, when it is one that cannot add CAs to its trust store at run time (before 22.19). */
function olderNode(): string | null {
  const node = ["/usr/bin/node", "/usr/local/bin/node"].find(existsSync);
  if (!node) return null;
  const [major, minor] = spawnSync(node, ["-p", "process.versions.node"], { encoding: "utf8" }).stdout.trim().split(".").map(Number);
  return major < 22 || (major === 22 && minor < 19) ? node : null;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "serve-tls-"));
  ca = makePrivateCa(dir);
  // This test process (the harness's own admin calls) trusts the CA too.
  const t = tls as typeof tls & { setDefaultCACertificates(c: string[]): void; getCACertificates(k: string): string[] };
  t.setDefaultCACertificates([...t.getCACertificates("default"), readFileSync(ca.ca, "utf8")]);
  h = await ClusterHarness.start({
    scenario: "tls",
    seed: e2eSeed("tls"),
    nodes: NODES,
    broker: { runtime: "serve", tls: { cert: ca.cert, key: ca.key } },
    caFile: ca.ca,
  });
});

afterAll(async () => {
  await h?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("HTTPS from workerd with a private CA", () => {
  it("the admin client trusts it with --ca-file or NODE_EXTRA_CA_CERTS, and refuses it otherwise", () => {
    expect(h.broker.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const base = ["status", "--cluster", h.cluster, "--broker", h.broker.url, "--json"];
    const refused = admin(base);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/certificate|self[- ]signed|UNABLE_TO_VERIFY|unable to verify/i);
    const withFlag = admin([...base, "--ca-file", ca.ca]);
    expect(withFlag.stderr).toBe("");
    expect(withFlag.status).toBe(0);
    expect(JSON.parse(withFlag.stdout).cluster).toBe(h.cluster);
    const withEnv = admin(base, { NODE_EXTRA_CA_CERTS: ca.ca });
    expect(withEnv.status).toBe(0);
    const notPem = admin([...base, "--ca-file", ca.key]);
    expect(notPem.status).toBe(2);
    expect(notPem.stderr).toContain("holds no PEM certificate");
  });

  it.runIf(olderNode())("on a Node that cannot add CAs at run time, --ca-file runs the command again with NODE_EXTRA_CA_CERTS", () => {
    const node = olderNode()!;
    const base = ["status", "--cluster", h.cluster, "--broker", h.broker.url, "--json"];
    expect(admin(base, {}, node).status).toBe(1);
    const withFlag = admin([...base, "--ca-file", ca.ca], {}, node);
    expect({ status: withFlag.status, stderr: withFlag.stderr }).toEqual({ status: 0, stderr: "" });
    expect(JSON.parse(withFlag.stdout).cluster).toBe(h.cluster);
  });

  it("a bootstrap node and two joiners, and the join API, all over HTTPS, form one cluster", async () => {
    for (const n of NODES) h.startAgent(n);
    await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 150_000);
    const final = await expectOneHealthyCluster(h, NODES);
    await expectEveryAdmissionAudited(h, NODES, final.ids);
    const exits = await Promise.all(NODES.map((n) => h.stop(n)));
    expect(exits.map((x) => x.code)).toEqual(NODES.map(() => 0));
  }, 200_000);
});
