/**
 * Gate mode in the end-to-end harness: the command line of the test installer
 * (etcd-installer.mjs, kubeadm's etcd phase with the real etcdctl) as a node's `--exec` COMMAND,
 * on TLS runs with the node's PKI directory (the harness's CA pair, shared as kubeadm shares its
 * etcd CA), and a fast watcher of etcd's member list that records how many members were not voters at once.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { expect } from "vitest";
import { EtcdGateway } from "../../src/node/etcd/gateway.ts";
import { tlsFetch } from "../../src/node/etcd/tls-fetch.ts";
import type { AgentRun, ClusterHarness, NodeSpec } from "./cluster.ts";
import { ensureTool } from "./etcd.ts";

const INSTALLER = join(import.meta.dirname, "etcd-installer.mjs");

export interface InstallerOptions {
  /** Stay in the foreground with etcd as a child (a supervisor, like `k0s controller`). */
  foreground?: boolean;
  /** Exit 1 the first time, after this point (the learner stays behind). */
  failOnceAfter?: "add" | "start";
  /** With failOnceAfter: fail only once this file exists (the test creates it when it is ready), not after 2 s. */
  failOnceWhen?: string;
  /** A wrong recipe: always `init`, whatever JOIN_BROKER_ROLE says (a node that starts a cluster of its own). */
  alwaysInit?: boolean;
  /** This program as etcd instead of the version under test (one that exits at once leaves an unstarted learner). */
  etcdBin?: string;
  /** When a join fails, remove this directory before exiting with its status (the kubeadm recipe's `kubeadm reset -f`, which removes `/etc/kubernetes/pki`). */
  resetRemoves?: string;
  /** etcd 3.6+: `--max-learners` for the installer's etcd (as kubeadm's etcd.local.extraArgs would set it). */
  maxLearners?: number;
  /** Milliseconds between the learner's start and its first promote (a learner receiving a large snapshot). */
  catchUpMs?: number;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Where the installer keeps this node's etcd data (its pid and log files sit next to it). */
export function installerDataDir(node: NodeSpec): string {
  return join(node.stateDir, "installer-etcd");
}

/** The node's PKI directory, where an installer makes the node's certificates with openssl. */
export async function installerPkiDir(node: NodeSpec): Promise<string> {
  await ensureTool("openssl");
  return node.pkiDir;
}

/**
 * The COMMAND for `--exec`: the broker's role picks `init` or `join`, as a recipe does for
 * `kubeadm init` and `kubeadm join`. The installer itself never reads a JOIN_BROKER_ variable.
 */
export async function installerCommand(h: ClusterHarness, node: NodeSpec, options: InstallerOptions = {}): Promise<string> {
  // The etcdctl of the etcd under test when it was built beside it (scripts/etcd.mjs), else Debian's.
  const beside = join(dirname(h.etcdBin), "etcdctl");
  const etcdctl = existsSync(beside) ? beside : await ensureTool("etcdctl");
  const args = [
    process.execPath,
    INSTALLER,
    "--name",
    node.name,
    "--data-dir",
    installerDataDir(node),
    "--peer-url",
    node.peerURL,
    "--client-url",
    node.clientURL,
    "--endpoints",
    h.nodes.map((n) => n.clientURL).join(","),
    "--etcd-bin",
    options.etcdBin ?? h.etcdBin,
    "--etcdctl",
    etcdctl,
    "--token",
    h.cluster,
    ...(h.etcdClientTls ? ["--pki-dir", await installerPkiDir(node)] : []),
    ...(options.foreground ? ["--foreground"] : []),
    ...(options.maxLearners ? ["--max-learners", String(options.maxLearners)] : []),
    ...(options.catchUpMs ? ["--catch-up", String(options.catchUpMs)] : []),
    ...(options.failOnceAfter ? ["--fail-once-after", options.failOnceAfter, "--fail-once-file", join(node.stateDir, "installer-failed-once")] : []),
    ...(options.failOnceWhen ? ["--fail-once-when", options.failOnceWhen] : []),
  ].map(quote);
  const [node0, script, ...rest] = args;
  if (options.alwaysInit) return `exec ${node0} ${script} init ${rest.join(" ")}`;
  const joinCommand = options.resetRemoves
    ? `${node0} ${script} join ${rest.join(" ")} || { s=$?; rm -rf ${quote(options.resetRemoves)}; exit $s; }`
    : `exec ${node0} ${script} join ${rest.join(" ")}`;
  return `if [ "$JOIN_BROKER_ROLE" = bootstrap ]; then exec ${node0} ${script} init ${rest.join(" ")}; else ${joinCommand}; fi`;
}

/**
 * That an installer's etcd runs on TLS with client-certificate auth: it answers the harness's
 * client certificate (signed by the shared CA) and refuses a client without one, and plain http.
 */
export async function expectClientCertificateRequired(h: ClusterHarness, clientURL: string): Promise<void> {
  expect(clientURL).toMatch(/^https:\/\//);
  expect((await h.etcd(clientURL, 3_000).memberList()).ok, "with the harness's client certificate").toBe(true);
  const withoutCertificate = new EtcdGateway(clientURL, { timeoutMs: 3_000, fetch: tlsFetch({ ca: h.etcdClientTls!.ca! }) });
  expect((await withoutCertificate.memberList()).ok, "without a client certificate").toBe(false);
  expect((await new EtcdGateway(clientURL.replace(/^https:/, "http:"), { timeoutMs: 3_000 }).memberList()).ok, "over plain http").toBe(false);
}

/** Samples the member list every 200 ms: the most members that were learners or not started at once. */
export class NonVoterWatch {
  maxNonVoters = 0;
  maxLearners = 0;
  samples = 0;
  #timer: NodeJS.Timeout | null = null;
  #busy = false;

  constructor(readonly h: ClusterHarness) {}

  start(): void {
    this.#timer = setInterval(() => {
      if (this.#busy) return;
      this.#busy = true;
      this.#sample().finally(() => (this.#busy = false));
    }, 200);
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }

  async #sample(): Promise<void> {
    for (const n of this.h.nodes) {
      const list = await this.h.etcd(n.clientURL, 500).memberList();
      if (!list.ok) continue;
      const members = list.value.members;
      this.samples++;
      this.maxLearners = Math.max(this.maxLearners, members.filter((m) => m.isLearner).length);
      this.maxNonVoters = Math.max(this.maxNonVoters, members.filter((m) => m.isLearner || !m.started).length);
      return;
    }
  }
}

/** Each run's join attempts: from its `exec` event to COMMAND's exit or the ticket's `complete`, whichever comes first. */
export function execWindows(h: ClusterHarness): { node: string; run: number; from: number; to: number }[] {
  const out: { node: string; run: number; from: number; to: number }[] = [];
  for (const run of [...h.runs.values()].flat() as AgentRun[]) {
    // A killed agent's COMMAND runs on until the node's next agent stops it, first thing.
    const next = h.runs.get(run.node.name)?.[run.run]?.events[0];
    const end = next ? Date.parse(next.time) : Number.POSITIVE_INFINITY;
    let from: number | null = null;
    let joined = false;
    for (const e of run.events) {
      const t = Date.parse(e.time);
      // After `joined`, an `exec` is --service starting a supervisor on a node that is a voter already: no join.
      if (e.step === "joined") joined = true;
      if (e.step === "exec" && !joined) from = t;
      if (from !== null && (e.step === "exec-exit" || e.step === "complete" || e.step === "refused" || e.step === "gave-up")) {
        out.push({ node: run.node.name, run: run.run, from, to: t });
        from = null;
      }
    }
    if (from !== null) out.push({ node: run.node.name, run: run.run, from, to: end });
  }
  return out;
}

/** Pairs of COMMAND windows of different nodes that overlap in time. */
export function overlappingWindows(h: ClusterHarness): string[] {
  const w = execWindows(h).sort((a, b) => a.from - b.from);
  const out: string[] = [];
  for (let i = 0; i < w.length; i++) {
    for (let j = i + 1; j < w.length; j++) {
      if (w[j]!.from >= w[i]!.to) break;
      if (w[j]!.node !== w[i]!.node) out.push(`${w[i]!.node}#${w[i]!.run} and ${w[j]!.node}#${w[j]!.run}`);
    }
  }
  return out;
}
