/**
 * The baseline of (5): the best serial script a careful operator could run by hand against the
 * same etcd, with no broker, agent or join API. Node 0 starts a new cluster; then, one node at a
 * time: `member add --learner`, start its etcd with `--initial-cluster-state existing`, wait
 * until it serves, promote it (retrying while etcd says the learner is not in sync yet), wait
 * until it calls itself a voter, next. Every wait polls every 100 ms; every refusal etcd marks
 * as "not now" (one learner at a time, unhealthy cluster, learner not ready) is retried at once
 * after 100 ms.
 *
 * With CA_DIR (an operator's etcd CA, ca.crt and ca.key), etcd runs as the agents run it: TLS and
 * client-certificate auth on both ports. The script signs each node's peer and server
 * certificates itself before it adds the node (an operator with the CA at hand), and asks etcd
 * with node 0's server certificate as its client certificate.
 *
 * Run as its own process (like each agent) by cluster-join.ts:
 *   node --import tsx bench/serial-join.ts ETCD_BIN DIR NODES_JSON [CA_DIR]
 * It prints `all voters <ms since start>` the moment the last node is a voter, then checks the
 * membership, prints one JSON line with the details, and stops every etcd it started.
 * @module
 */
import { join } from "node:path";
import { EtcdGateway, isRetryableEtcdError, type EtcdMember } from "../src/node/etcd/gateway.ts";
import { startEtcd, type EtcdProcess } from "../src/node/etcd/etcd-process.ts";
import { tlsFetch } from "../src/node/etcd/tls-fetch.ts";
import { requestedIdentity } from "../src/node/pki/identity.ts";
import { certificateAuthority, etcdServingFiles, issueOwnCertificates, ownClientFiles } from "../src/node/pki/pki-dir.ts";

interface NodeAddress {
  name: string;
  peerURL: string;
  clientURL: string;
}

const POLL_MS = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function untilOk<T>(
  what: string,
  call: () => Promise<{ ok: true; value: T } | { ok: false; error: { kind: string; message: string } }>,
  deadline: number,
): Promise<{ value: T; retries: number }> {
  let retries = 0;
  for (;;) {
    const r = await call();
    if (r.ok) return { value: r.value, retries };
    if (!isRetryableEtcdError(r.error.kind as never) || Date.now() > deadline) throw new Error(`${what}: ${r.error.kind}: ${r.error.message}`);
    retries++;
    await sleep(POLL_MS);
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const [bin, dir, nodesJson, caDir] = process.argv.slice(2);
  const nodes = JSON.parse(nodesJson!) as NodeAddress[];
  const ca = caDir ? (await certificateAuthority(caDir)).ca : null;
  const pkiDir = (node: NodeAddress) => join(dir!, `${node.name}-pki`);
  /** Signs the node's certificates (TLS runs); returns etcd's `tls` files. */
  const certificates = async (node: NodeAddress) => {
    if (!ca) return {};
    await issueOwnCertificates(pkiDir(node), ca, requestedIdentity(node.name, node.peerURL, node.clientURL));
    return { tls: etcdServingFiles(pkiDir(node)) };
  };
  const client = () => (ca ? { fetch: tlsFetch(ownClientFiles(pkiDir(nodes[0]!))) } : {});
  const deadline = Date.now() + 300_000;
  const processes: EtcdProcess[] = [];
  const steps: {
    node: string;
    certMs: number;
    addRetries: number;
    promoteRetries: number;
    addMs: number;
    startMs: number;
    promoteMs: number;
    voterMs: number;
    totalMs: number;
  }[] = [];
  const since = (t: number) => Math.round(performance.now() - t);
  try {
    const first = nodes[0]!;
    const firstTls = await certificates(first);
    processes.push(
      await startEtcd({
        bin: bin!,
        ...first,
        ...firstTls,
        dataDir: join(dir!, first.name),
        initialCluster: [`${first.name}=${first.peerURL}`],
        initialClusterState: "new",
        initialClusterToken: `serial-${process.pid}`,
        logFile: join(dir!, `${first.name}.log`),
        waitFor: "healthy",
        startTimeoutMs: 60_000,
      }),
    );
    steps.push({
      node: first.name,
      certMs: 0,
      addRetries: 0,
      promoteRetries: 0,
      addMs: 0,
      startMs: since(started),
      promoteMs: 0,
      voterMs: 0,
      totalMs: since(started),
    });
    for (const node of nodes.slice(1)) {
      const tc = performance.now();
      const tls = await certificates(node);
      const t0 = performance.now();
      const gateway = new EtcdGateway(
        processes.map((p) => p.clientURL),
        { timeoutMs: 5_000, ...client() },
      );
      const added = await untilOk(`member add ${node.name}`, () => gateway.memberAdd([node.peerURL], { learner: true }), deadline);
      const initialCluster = [
        ...added.value.members.filter((m: EtcdMember) => m.name).flatMap((m: EtcdMember) => m.peerURLs.map((u) => `${m.name}=${u}`)),
        `${node.name}=${node.peerURL}`,
      ];
      const t1 = performance.now();
      const proc = await startEtcd({
        bin: bin!,
        ...node,
        ...tls,
        dataDir: join(dir!, node.name),
        initialCluster,
        initialClusterState: "existing",
        logFile: join(dir!, `${node.name}.log`),
        waitFor: "serving",
        startTimeoutMs: 60_000,
      });
      processes.push(proc);
      const t2 = performance.now();
      const promoted = await untilOk(`member promote ${node.name}`, () => gateway.memberPromote(added.value.member.id), deadline);
      const t3 = performance.now();
      const local = new EtcdGateway(node.clientURL, { timeoutMs: 2_000, ...client() });
      for (;;) {
        const s = await local.status(node.clientURL);
        if (s.ok && !s.value.isLearner) break;
        if (Date.now() > deadline) throw new Error(`${node.name} never became a voter`);
        await sleep(POLL_MS);
      }
      steps.push({
        node: node.name,
        certMs: Math.round(t0 - tc),
        addRetries: added.retries,
        promoteRetries: promoted.retries,
        addMs: Math.round(t1 - t0),
        startMs: Math.round(t2 - t1),
        promoteMs: Math.round(t3 - t2),
        voterMs: since(t3),
        totalMs: since(tc),
      });
    }
    process.stdout.write(`all voters ${Math.round(performance.now() - started)}\n`);

    const list = await new EtcdGateway(
      processes.map((p) => p.clientURL),
      client(),
    ).memberList();
    const members = list.ok ? list.value.members : [];
    const voters = members.filter((m) => !m.isLearner && m.started).length;
    let raftIndex = 0;
    for (const p of processes) {
      const status = await new EtcdGateway(p.clientURL, { timeoutMs: 5_000, ...client() }).status(p.clientURL);
      if (status.ok) raftIndex = Math.max(raftIndex, Number(status.value.raftIndex));
    }
    process.stdout.write(`${JSON.stringify({ members: members.length, voters, raftIndex, steps })}\n`);
  } finally {
    await Promise.all(processes.map((p) => p.stop(3_000)));
  }
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
