/**
 * Scenario 2: the parallel join of 1 + 6 controllers under faults, the situation of k0s issue
 * #5149. For its first seconds the join API answers 500 or drops connections; agents are killed
 * with SIGKILL at random protocol steps (alone, leaving their etcd running, or with their etcd)
 * and started again; the broker process is restarted mid-run. The end state must be the same
 * as without faults: one cluster, seven voters, and an audit log that shows every admission.
 * All choices come from one printed seed (E2E_SEED replays it).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness, type AgentRun } from "../support/cluster.ts";
import { expectJoinedOnceDespiteFaults } from "../support/cluster-assertions.ts";
import { between, e2eSeed, pick, seededRandom } from "../support/seeded.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4", "ctrl-5", "ctrl-6"];
/** Steps an agent can be killed at. */
const KILL_STEPS = ["ticket", "queued", "admitted", "member-add", "member-added", "etcd-start", "etcd-ready", "promote", "promoted", "complete"];
/** The steps of the bootstrap node (which never queues nor is a learner); who bootstraps is only known at run time. */
const BOOTSTRAP_STEPS = ["ticket", "admitted", "bootstrap", "etcd-start", "etcd-ready", "complete"];

interface PlannedKill {
  node: string;
  run: number;
  step: string;
  /** Used instead of `step` when the victim turns out to be the bootstrap node and `step` is not one of its steps. */
  bootstrapStep: string;
  mode: "agent" | "group";
  restartAfterMs: number;
  done: boolean;
}

const seed = e2eSeed("faults");
const random = seededRandom(seed);
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "faults", seed, nodes: NODES, faultProxy: true, random });
});

afterAll(async () => {
  // Written whatever the outcome: a failed run's timeline is the one worth reading.
  h?.writeTimeline(summary);
  await h?.cleanup();
});

function planKills(): PlannedKill[] {
  const victims = [...NODES].sort(() => random() - 0.5).slice(0, 3);
  const kill = (node: string, run: number): PlannedKill => ({
    node,
    run,
    step: pick(random, KILL_STEPS),
    bootstrapStep: pick(random, BOOTSTRAP_STEPS.slice(2)),
    mode: pick(random, ["agent", "group"] as const),
    restartAfterMs: between(random, 200, 1500),
    done: false,
  });
  const plan = victims.map((node) => kill(node, 1));
  // One of them crashes a second time, after its restart.
  plan.push(kill(pick(random, victims), 2));
  return plan;
}

// Waits for six joins one at a time (each learner is promoted once etcd's leader has seen every
// voter for 5 s), the agents' backoff after the join API's 500s, the killed agents' restarts and
// the broker's restart.
it("1 + 6 controllers under join API faults, SIGKILLs and a broker restart still form one cluster of 7 voters", async () => {
  const kills = planKills();
  const faultMs = between(random, 6_000, 12_000);
  const restartBrokerAfterJoins = between(random, 2, 4);
  console.log(
    `[faults] join API fails for ${faultMs} ms; broker restarts after ${restartBrokerAfterJoins} joins; kills: ${kills.map((k) => `${k.node}@${k.step}#${k.run}(${k.mode})`).join(", ")}`,
  );
  h.timeline.add("plan", undefined, { faultMs, restartBrokerAfterJoins, kills: kills.map(({ done: _d, ...k }) => k) });

  const work: Promise<unknown>[] = [];
  let brokerRestarted = false;
  h.onEvent((run: AgentRun, e) => {
    if (e.step === "admitted" && e.role === "bootstrap") {
      for (const k of kills) {
        if (k.done || k.node !== run.node.name || k.run !== run.run || BOOTSTRAP_STEPS.includes(k.step)) continue;
        h.timeline.add("kill-retargeted", k.node, { from: k.step, to: k.bootstrapStep });
        k.step = k.bootstrapStep;
      }
    }
    const kill = kills.find((k) => !k.done && k.node === run.node.name && k.run === run.run && k.step === e.step);
    if (kill) {
      kill.done = true;
      work.push(
        (async () => {
          await h.kill(kill.node, kill.mode);
          await new Promise((r) => setTimeout(r, kill.restartAfterMs));
          h.startAgent(kill.node);
        })(),
      );
    }
    if (e.step === "joined" && !brokerRestarted && NODES.filter((n) => h.joined(n)).length >= restartBrokerAfterJoins) {
      brokerRestarted = true;
      work.push(h.restartBroker());
    }
  });

  h.startSampling();
  // The window opens with the first join API call, however long the bootstrap takes (a bootstrap
  // node killed and restarted on a slow machine may take longer than the window itself).
  h.proxy!.failFor(faultMs, 0.5, { fromFirstRequest: true });
  h.timeline.add("join-api-faults", undefined, { forMs: faultMs, from: "the first join API call" });
  const started = Date.now();
  for (const n of NODES) h.startAgent(n);
  await h.waitFor(
    "every agent to report joined",
    () => NODES.every((n) => h.joined(n)) && kills.every((k) => !k.done || h.current(k.node)!.run > k.run),
    280_000,
  );
  await Promise.all(work);
  const took = Date.now() - started;
  h.stopSampling();

  // The end state, read from every node's own etcd.
  const final = await expectJoinedOnceDespiteFaults(h, NODES);

  // Every admission an agent saw is in the audit log.
  const audit = await h.audit();
  const auditedJtis = new Set(audit.filter((a) => a.action === "ticket.admitted").map((a) => a.detail.jti));
  const seenJtis = [...h.runs.values()].flat().flatMap((r) => r.events.filter((e) => e.step === "admitted").map((e) => e.jti));
  expect(seenJtis.length).toBeGreaterThanOrEqual(NODES.length);
  for (const jti of seenJtis) expect(auditedJtis.has(jti), `admission ${jti} audited`).toBe(true);

  // The faults really happened, and only our kills ended an agent early.
  const executed = kills.filter((k) => k.done);
  expect(executed.length, "at least one agent was killed mid-join").toBeGreaterThanOrEqual(1);
  expect(h.proxy!.stats.answered500 + h.proxy!.stats.dropped, "the join API failed some requests").toBeGreaterThan(0);
  expect(brokerRestarted).toBe(true);
  for (const n of NODES) {
    const runs = h.runs.get(n)!;
    for (const r of runs.slice(0, -1)) expect(r.exit?.signal, `${n} run ${r.run} ended by our SIGKILL`).toBe("SIGKILL");
    expect(runs[runs.length - 1]!.exit, `${n}'s last agent still runs`).toBeNull();
  }

  Object.assign(summary, {
    tookMs: took,
    clusterId: final.clusterId,
    members: final.memberCount,
    kills: executed.map(({ done: _d, ...k }) => k),
    skippedKills: kills.filter((k) => !k.done).map(({ done: _d, ...k }) => k),
    proxy: h.proxy!.stats,
  });
  const exits = await Promise.all(NODES.map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual(NODES.map(() => 0));
}, 360_000);
