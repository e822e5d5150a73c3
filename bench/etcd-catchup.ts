/**
 * (5e) etcd alone, no broker, agent or join API: how long a new member takes to publish itself
 * (and so to serve clients and be promoted) when the cluster's raft log is short, and when it is
 * past 100 entries. A one-member cluster takes some key writes (a few, or more than 100), then
 * `member add --learner` and the new member's etcd starts with `--initial-cluster-state existing`,
 * as every join does. What is read back is what etcd says: the raft index after the add (the
 * member's own publish is the next entry), whether the member was sent a snapshot and at which
 * index (its log: "received and saved database snapshot"), whether its publish timed out ("failed
 * to publish local member to cluster through raft") and how long it took from its start to
 * publishing itself.
 *
 * On etcd 3.6+ the leader takes an in-memory snapshot every 100 applied entries and compacts its
 * log behind it, so past 100 entries a member that starts empty is sent a snapshot made at the
 * leader's applied index. When the member's own publish was applied before that snapshot was
 * made, it is inside it: the member never applies that entry itself, the request waiting for it
 * times out after etcd's request timeout (5 s + 2 election timeouts: 7 s here), and the second
 * publish goes through. 3.4 and 3.5 compact only every 100 000 entries (`--snapshot-count`).
 * @module
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { catchUpFacts } from "../src/node/etcd/etcd-log.ts";
import { startEtcd, type EtcdProcess } from "../src/node/etcd/etcd-process.ts";
import { EtcdGateway } from "../src/node/etcd/gateway.ts";
import { freePorts } from "../scripts/ports.mjs";
import { scratchDir } from "./support/paths.ts";
import { log, median, round, sleep } from "./support/stats.ts";

export interface CatchUpSettings {
  versions: string[];
  /** Key writes before the add: below and above etcd 3.6's 100-entry snapshot interval. */
  writes: number[];
  trials: number;
}

export interface CatchUpTrial {
  etcd: string;
  writes: number;
  trial: number;
  /** The leader's raft index right after the add: the new member's publish is the entry after it. */
  indexAfterAdd: number;
  /** The index of the snapshot the member was sent, or null when it replayed the log. */
  snapshotIndex: number | null;
  failedPublishes: number;
  /** Its etcd's start to "published local member to cluster through raft". */
  publishMs: number | null;
}

export interface CatchUpRow {
  etcd: string;
  writes: number;
  trials: number;
  /** Members sent a snapshot. */
  snapshots: number;
  /** Of those, the snapshot already held the member's own publish (its index past the add's). */
  ownPublishInSnapshot: number;
  /** Members whose first publish timed out. */
  stalled: number;
  /** Stalled members whose snapshot held their own publish (the mechanism; equals `stalled` when it is the only one). */
  stalledWithOwnPublishInSnapshot: number;
  publishMsMedian: number;
  publishMsMax: number;
}

export interface CatchUpResult {
  settings: CatchUpSettings;
  trials: CatchUpTrial[];
  rows: CatchUpRow[];
}

/** The snapshot index the member's log names ("incoming-snapshot-index"), or null. */
function snapshotIndexOf(text: string): number | null {
  for (const line of text.split("\n")) {
    if (!line.includes("received and saved database snapshot")) continue;
    const m = /"incoming-snapshot-index":(\d+)/.exec(line);
    if (m) return Number(m[1]);
  }
  return null;
}

async function trial(bin: string, etcd: string, writes: number, n: number): Promise<CatchUpTrial> {
  const dir = mkdtempSync(join(scratchDir(), `catchup-${etcd}-${writes}-`));
  const [c0, p0, c1, p1] = await freePorts(4);
  const first = { name: "m0", clientURL: `http://127.0.0.1:${c0}`, peerURL: `http://127.0.0.1:${p0}` };
  const second = { name: "m1", clientURL: `http://127.0.0.1:${c1}`, peerURL: `http://127.0.0.1:${p1}` };
  const procs: EtcdProcess[] = [];
  try {
    procs.push(
      await startEtcd({
        bin,
        ...first,
        dataDir: join(dir, first.name),
        initialCluster: [`${first.name}=${first.peerURL}`],
        initialClusterState: "new",
        initialClusterToken: `catchup-${process.pid}-${n}`,
        logFile: join(dir, `${first.name}.log`),
        waitFor: "healthy",
        startTimeoutMs: 60_000,
      }),
    );
    const gateway = new EtcdGateway(first.clientURL, { timeoutMs: 10_000 });
    for (let i = 0; i < writes; i++) {
      const put = await gateway.put(`/bench/catchup/${i}`, "x");
      if (!put.ok) throw new Error(`write ${i}: ${put.error.message}`);
    }
    const added = await gateway.memberAdd([second.peerURL], { learner: true });
    if (!added.ok) throw new Error(`member add: ${added.error.message}`);
    const status = await gateway.status();
    if (!status.ok) throw new Error(`status: ${status.error.message}`);
    const logFile = join(dir, `${second.name}.log`);
    procs.push(
      await startEtcd({
        bin,
        ...second,
        dataDir: join(dir, second.name),
        initialCluster: [`${first.name}=${first.peerURL}`, `${second.name}=${second.peerURL}`],
        initialClusterState: "existing",
        logFile,
        waitFor: "serving",
        startTimeoutMs: 60_000,
      }),
    );
    // The log file is written as etcd prints: give its last lines a moment.
    let text = "";
    for (let i = 0; i < 20; i++) {
      text = readFileSync(logFile, "utf8");
      if (catchUpFacts(text).publishMs !== null) break;
      await sleep(50);
    }
    const facts = catchUpFacts(text);
    return {
      etcd,
      writes,
      trial: n,
      indexAfterAdd: Number(status.value.raftIndex),
      snapshotIndex: snapshotIndexOf(text),
      failedPublishes: facts.failedPublishes,
      publishMs: facts.publishMs,
    };
  } finally {
    await Promise.all(procs.map((p) => p.stop(3_000)));
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function etcdCatchUp(settings: CatchUpSettings, etcdPath: (version: string) => Promise<{ bin: string }>): Promise<CatchUpResult> {
  const trials: CatchUpTrial[] = [];
  for (const etcd of settings.versions) {
    const { bin } = await etcdPath(etcd);
    for (let n = 0; n < settings.trials; n++) {
      // Interleaved, so that load from elsewhere falls on both lengths alike.
      for (const writes of settings.writes) {
        const t = await trial(bin, etcd, writes, n);
        trials.push(t);
        log(
          `catch-up etcd ${etcd}, ${writes} writes, trial ${n + 1}/${settings.trials}: index after add ${t.indexAfterAdd}, snapshot ${t.snapshotIndex ?? "none"}, ${t.failedPublishes} publish timeout(s), published after ${t.publishMs ?? "?"} ms`,
        );
      }
    }
  }
  const rows: CatchUpRow[] = [];
  for (const etcd of settings.versions) {
    for (const writes of settings.writes) {
      const mine = trials.filter((t) => t.etcd === etcd && t.writes === writes);
      const own = (t: CatchUpTrial) => t.snapshotIndex !== null && t.snapshotIndex > t.indexAfterAdd;
      const publishes = mine.map((t) => t.publishMs ?? NaN);
      rows.push({
        etcd,
        writes,
        trials: mine.length,
        snapshots: mine.filter((t) => t.snapshotIndex !== null).length,
        ownPublishInSnapshot: mine.filter(own).length,
        stalled: mine.filter((t) => t.failedPublishes > 0).length,
        stalledWithOwnPublishInSnapshot: mine.filter((t) => t.failedPublishes > 0 && own(t)).length,
        publishMsMedian: round(median(publishes), 0),
        publishMsMax: round(Math.max(...publishes), 0),
      });
    }
  }
  return { settings, trials, rows };
}
