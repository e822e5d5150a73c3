/**
 * The fault campaign around real k0s (`npm run campaign -- --installer k0s`): per seed, four k0s
 * controllers (1 + 3) on lab hosts, each running docs/k0s.md's unit (gate mode: `join-broker join
 * … --exec 'k0s controller …'`, restarted 5 s after a failure as systemd's `Restart=on-failure`
 * does), started at once, under a seeded schedule of faults; then everything healed and a
 * bounded wait for one cluster of four started voters. Odd seeds run k0s 1.28, even seeds 1.36
 * (or one version for every seed).
 *
 * The faults are those of the campaign (test/lab/campaign.ts) on a k0s node's terms: partitions
 * one- and two-way and packet loss on a controller, the broker or the fixed API address's
 * balancer (`lb`); link flaps; a node frozen (SIGSTOP to every process of the host: agent, k0s,
 * etcd, kube-apiserver) or killed (SIGKILL to every process, the unit restarting it as systemd
 * would); an agent's clock skewed (k0s and etcd read the kernel's clock, not libfaketime's).
 * k0s itself gives up on a join that fails for seconds (1.28: its join request 20 times in 10 s;
 * both: its 2-minute etcd health check): that the node's unit exits and starts again is k0s's way,
 * not a violation, as long as the node joins in the end.
 *
 * Invariants, sampled every 2 s from every host's own etcd and checked at the end: one cluster
 * ID for the whole run; never more than one member that is not a started voter (the broker
 * admits one join at a time: a learner, or a voter added and not yet started, or one left
 * behind, is that one); within the bound after healing, every host's etcd lists exactly the four
 * hosts as started voters and every agent said its node joined; one bootstrap (one
 * `cluster.bootstrapped`, one node that joined as bootstrap); the broker never needed an
 * operator; agents exit only with their documented codes (3, 4) or by the campaign's SIGKILL;
 * the cluster accepts a write.
 */
import { execFileSync } from "node:child_process";
import { join, resolve } from "node:path";
import { K0S_VERSIONS } from "../../scripts/k0s.mjs";
import { EtcdGateway } from "../../src/node/etcd/gateway.ts";
import { tlsFetch } from "../../src/node/etcd/tls-fetch.ts";
import { hex } from "../support/cluster.ts";
import { faultSchedule, networkFault, seedSummary, seedTimeline, type Fault, type SeedResult, type Violation } from "./campaign.ts";
import { BrokeredK0sLab, K0S_HOSTS, k0sBinaries, type K0sBinaries } from "./k0s-lab.ts";

export const K0S_BOUNDS = {
  /** Faults start within this long after the units start (a k0s cluster of four forms in one to two minutes, up to four when a joiner's etcd fails). */
  faultWindowMs: 150_000,
  /** The longest partition (and loss). */
  maxPartitionMs: 30_000,
  maxFlapMs: 8_000,
  /** The longest freeze of a whole node. */
  maxPauseMs: 10_000,
  /** An agent's clock may be this far off. */
  maxAgentSkewSeconds: 300,
  /**
   * After healing, every node is a started voter within this: a k0s that gave up restarts 5 s
   * later and queues again; one whose etcd never came up exits after k0s's own 2-minute health
   * check; a member the agent must remove may take its --removal-timeout (120 s).
   */
  settleMs: 600_000,
  sampleMs: 2_000,
} as const;

/** The hosts a k0s seed runs on: the controllers, the broker and the fixed API address's balancer. */
export const K0S_OTHER_HOSTS = ["broker", "lb"];

export type K0sChoice = "1.28" | "1.36" | "both";

/** The k0s version a seed runs: with `both`, odd seeds 1.28, even seeds 1.36. */
export const k0sVersionOf = (seed: number, choice: K0sChoice): "1.28" | "1.36" => (choice === "both" ? (seed % 2 === 1 ? "1.28" : "1.36") : choice);

/** The seed's fault schedule over the k0s hosts (plus `broker` and `lb`): a kill is every process of the host, its unit restarts it. */
export function k0sSchedule(seed: number, nodes: string[]): Fault[] {
  return faultSchedule(seed, nodes, { bounds: K0S_BOUNDS, otherHosts: K0S_OTHER_HOSTS, killDownMs: null, joinApiSkewSeconds: null });
}

/** The binaries a seed needs, or why they are missing, for each version `choice` covers. */
export function k0sCampaignBinaries(choice: K0sChoice, variant: string | null = null): Record<string, K0sBinaries | string> {
  const versions = choice === "both" ? K0S_VERSIONS : [choice];
  return Object.fromEntries(versions.map((v) => [v, k0sBinaries(v, variant)]));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every process in the host's network namespace (its unit: agent, k0s, etcd, kube-apiserver). */
function hostPids(ns: string): number[] {
  try {
    return execFileSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
  }
}

export interface K0sCampaignOptions {
  /** Which k0s: 1.28, 1.36, or by the seed's parity. */
  k0s: K0sChoice;
  /** A patched variant (integrations/k0s/<version>/<variant>/), e.g. "broker"; default k0s as tagged. */
  variant?: string | null;
  /** Where each seed's k0s and agent logs go (a directory per seed). */
  outDir?: string;
  log?: (line: string) => void;
}

/** Runs one seed on real k0s in a lab of its own and checks every invariant. */
export async function runK0sSeed(seed: number, options: K0sCampaignOptions): Promise<SeedResult> {
  const version = k0sVersionOf(seed, options.k0s);
  const bins = k0sBinaries(version, options.variant ?? null);
  if (typeof bins === "string") throw new Error(`k0s ${version}${options.variant ? `+${options.variant}` : ""}: ${bins}`);
  const nodes = [...K0S_HOSTS];
  const plan = k0sSchedule(seed, nodes);
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const violations: Violation[] = [];
  const ends: Record<string, string> = {};
  const installer = `k0s ${bins.release}`;
  let b: BrokeredK0sLab | null = null;
  let timelinePath: string | undefined;
  let timeline: SeedResult["timeline"] = [];
  const violated = new Set<string>();
  try {
    b = await BrokeredK0sLab.create(`campaign-${seed}`, bins, nodes, { outDir: join(resolve(options.outDir ?? "test-results/campaign-k0s"), `seed-${seed}`) });
    const x = b;
    const { h, k, lab } = { h: x.h, k: x.k, lab: x.lab };
    h.timeline.add("schedule", undefined, { installer, faults: plan });
    const record = (v: Violation) => {
      if (violated.has(v.invariant)) return; // the first sample that shows it is the one to read
      violated.add(v.invariant);
      violations.push({ tMs: h.timeline.now(), ...v });
      h.timeline.add("invariant-violated", undefined, { ...v });
      log(`seed ${seed}: ${v.invariant}: ${v.detail.split("\n")[0]}`);
    };

    // Every host's own etcd, through a loopback forward (k0s's etcd certificate names 127.0.0.1).
    const tls = tlsFetch({ ca: join(k.pki, "etcd", "ca.crt"), cert: join(k.pki, "etcd-client.crt"), key: join(k.pki, "etcd-client.key") });
    const gateways = new Map<string, EtcdGateway>();
    for (const n of nodes) gateways.set(n, new EtcdGateway(await lab.reach(`https://${lab.host(n).ip}:2379`), { timeoutMs: 1_500, fetch: tls }));
    const peerOf = new Map(nodes.map((n) => [h.node(n).peerURL, n]));
    const clusterIds = new Set<string>();
    const sample = async () => {
      const lists = await Promise.all(nodes.map(async (n) => ({ n, list: await gateways.get(n)!.memberList() })));
      for (const { n, list } of lists) {
        if (!list.ok) continue;
        const id = hex(list.value.header.clusterId);
        if (!clusterIds.has(id)) {
          clusterIds.add(id);
          h.timeline.add("cluster-id", n, { clusterId: id });
        }
        if (clusterIds.size > 1)
          record({ invariant: "one-cluster-id", detail: `cluster IDs seen: ${[...clusterIds].join(", ")} (${n} serves ${id})`, sample: list.value });
        const pending = list.value.members.filter((m) => m.isLearner || !m.started);
        if (pending.length > 1) {
          record({
            invariant: "one-join-at-a-time",
            detail: `${n} lists ${pending.length} members that are not started voters: ${pending.map((m) => `${peerOf.get(m.peerURLs[0] ?? "") ?? m.peerURLs[0]} (${m.isLearner ? "learner" : "unstarted voter"})`).join(", ")}`,
            sample: list.value,
          });
        }
      }
      const first = lists.find((l) => l.list.ok)?.list;
      if (first?.ok) {
        const m = first.value.members;
        h.timeline.sample({
          members: m.length,
          voters: m.filter((x) => !x.isLearner).length,
          learners: m.filter((x) => x.isLearner).length,
          clusterId: hex(first.value.header.clusterId),
        });
      }
      return lists;
    };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        await sample().catch(() => undefined);
        await sleep(K0S_BOUNDS.sampleMs);
      }
    })();

    const paused = new Map<string, number[]>();
    const killedRuns = new Set<string>();
    const apply = async (f: Fault) => {
      await sleep(f.atMs);
      h.timeline.add(`fault-${f.kind}`, f.host, { ...f });
      try {
        if (!(await networkFault(lab, f)))
          switch (f.kind) {
            case "pause": {
              const pids = hostPids(lab.host(f.host).ns);
              paused.set(f.host, pids);
              signalAll(pids, "SIGSTOP");
              await sleep(f.forMs);
              signalAll(pids, "SIGCONT");
              paused.delete(f.host);
              break;
            }
            case "kill": {
              // The whole unit, as a machine that loses power; its unit starts it again 5 s later.
              const run = h.current(f.host);
              if (run && !run.exit) killedRuns.add(`${f.host}#${run.run}`);
              signalAll(hostPids(lab.host(f.host).ns), "SIGKILL");
              break;
            }
            case "skew":
              lab.skew(f.host, f.seconds);
              break;
          }
      } catch (e) {
        h.timeline.add("fault-failed", f.host, { kind: f.kind, error: (e as Error).message });
      }
      h.timeline.add(`fault-${f.kind}-end`, f.host);
    };

    for (const n of nodes) x.startService(n);
    log(
      `seed ${seed}: ${installer}, ${nodes.length} controllers through the broker; faults: ${plan.map((f) => `${f.kind} ${f.host} at ${Math.round(f.atMs / 1000)} s`).join(", ")}`,
    );
    await Promise.all(plan.map(apply));
    lab.heal();
    for (const host of lab.hosts.keys()) lab.skew(host, 0);
    for (const pids of paused.values()) signalAll(pids, "SIGCONT");
    h.timeline.add("healed");
    log(`seed ${seed}: healed after ${Math.round((Date.now() - started) / 1000)} s`);

    // Within the bound: every host's etcd lists the four hosts as started voters, one cluster, and every agent said its node joined.
    const want = nodes.map((n) => h.node(n).peerURL).sort();
    let problem = "";
    const deadline = Date.now() + K0S_BOUNDS.settleMs;
    for (;;) {
      const lists = await sample();
      problem = "";
      const notJoined = nodes.filter((n) => !h.current(n)?.events.some((e) => e.step === "joined"));
      if (notJoined.length) problem = `not joined: ${notJoined.join(", ")}`;
      for (const { n, list } of lists) {
        if (problem) break;
        if (!list.ok) problem = `${n}'s etcd does not answer: ${list.error.message}`;
        else {
          const peers = list.value.members.map((m) => m.peerURLs[0] ?? "").sort();
          if (JSON.stringify(peers) !== JSON.stringify(want)) problem = `${n} lists ${peers.map((p) => peerOf.get(p) ?? p).join(", ")}`;
          else if (list.value.members.some((m) => m.isLearner || !m.started)) problem = `${n} lists a learner or an unstarted member`;
        }
      }
      if (!problem || Date.now() > deadline) break;
      await sleep(K0S_BOUNDS.sampleMs);
    }
    sampling = false;
    await sampler;
    if (problem) record({ invariant: "settles-within-bound", detail: `${K0S_BOUNDS.settleMs / 1000} s after healing: ${problem}\n${h.describeAgents()}` });

    for (const n of nodes) {
      const runs = h.runs.get(n) ?? [];
      const role = runs.map((r) => /^joined cluster \S+ as (\w+)$/m.exec(r.stdout)?.[1]).find(Boolean);
      const restarts = runs.length - 1;
      ends[n] = `${role ? `joined as ${role}` : "not joined"}${restarts ? ` after ${restarts} restart${restarts === 1 ? "" : "s"}` : ""}`;
      for (const r of runs) {
        if (!r.exit || killedRuns.has(`${n}#${r.run}`)) continue;
        if (r.exit.signal || ![0, 3, 4].includes(r.exit.code ?? -1))
          record({
            invariant: "documented-exit-code",
            detail: `${n}'s agent (run ${r.run}) exited ${r.exit.code ?? r.exit.signal}: ${r.events.at(-1)?.msg ?? ""}`,
          });
      }
    }
    const bootstrapped = nodes.filter((n) => (h.runs.get(n) ?? []).some((r) => /as bootstrap$/m.test(r.stdout)));
    if (bootstrapped.length !== 1) record({ invariant: "one-bootstrap", detail: `nodes that joined as bootstrap: ${bootstrapped.join(", ") || "none"}` });
    const audit = await h.audit();
    const audited = audit.filter((a) => a.action === "cluster.bootstrapped");
    if (audited.length !== 1)
      record({ invariant: "one-bootstrap", detail: `${audited.length} cluster.bootstrapped entries in the broker's audit log`, sample: audited });
    const operator = audit.filter((a) => a.action === "cluster.needs_operator");
    if (operator.length)
      record({
        invariant: "no-operator-needed",
        detail: `the broker paused the cluster for an operator: ${JSON.stringify(operator[0]!.detail)}`,
        sample: operator,
      });
    const put = await new EtcdGateway(
      nodes.map((n) => gateways.get(n)!.endpoints[0]!),
      { timeoutMs: 5_000, fetch: tls },
    ).put("campaign/write", String(Date.now()));
    if (!put.ok) record({ invariant: "accepts-writes", detail: put.error.message });
  } catch (e) {
    violations.push({ invariant: "run-completed", detail: (e as Error).stack ?? String(e) });
  }
  if (b) {
    // Whatever runs on the k0s hosts now; anything of it still alive once the lab is closed is killed.
    const left = K0S_HOSTS.flatMap((n) => hostPids(b!.lab.host(n).ns));
    await b.close().catch((e: Error) => log(`seed ${seed}: closing the lab: ${e.message}`));
    signalAll(left, "SIGKILL");
    // After close (which writes the timeline too): this one carries the seed's summary.
    timelinePath = b.h.writeTimeline({ installer, ends, violations: violations.map((v) => v.invariant), lab: b.lab.events });
    timeline = seedTimeline(b.h);
  }
  const result: SeedResult = {
    seed,
    mode: "gate",
    installer,
    nodes,
    schedule: plan,
    outcome: violations.length ? "fail" : "pass",
    violations,
    ends,
    durationMs: Date.now() - started,
    timeline,
    ...(timelinePath ? { timelinePath } : {}),
  };
  log(seedSummary(result, installer));
  return result;
}
