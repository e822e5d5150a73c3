/**
 * The parallel join of 1 + 4 controllers against `join-broker serve`, with the broker killed
 * under it: workerd is SIGKILLed mid-queue (serve restarts it), and later serve and workerd
 * together (then started again on the same data directory). Agents ride it out on their retries;
 * the end is one cluster of five voters, every admission audited, exactly one bootstrap.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed } from "../support/seeded.ts";

const NODES = ["kill-0", "kill-1", "kill-2", "kill-3", "kill-4"];
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "serve-kill", seed: e2eSeed("serve-kill"), nodes: NODES, broker: { runtime: "serve" } });
});

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

// Waits for four joins one at a time (etcd's 5 s window each) and serve restarting workerd, then
// serve itself, while agents retry.
it("SIGKILL of workerd mid-queue, then of serve and workerd, and the queue still ends in one cluster of 5 voters", async () => {
  const work: Promise<unknown>[] = [];
  let workerdKilled = false;
  let serveKilled = false;
  let queuedWhenKilled = 0;
  h.onEvent((_run, e) => {
    const joined = NODES.filter((n) => h.joined(n)).length;
    if (e.step === "admitted" && e.role === "join" && !workerdKilled) {
      // A joiner was just admitted and others wait behind it: the queue is mid-way.
      workerdKilled = true;
      work.push(
        (async () => {
          queuedWhenKilled = (await h.client.admin(h.cluster).status()).body.queue.queued;
          h.timeline.add("workerd-kill");
          await h.broker.kill("workerd");
          h.timeline.add("workerd-restarted");
        })(),
      );
    }
    if (e.step === "joined" && joined >= 3 && !serveKilled) {
      serveKilled = true;
      work.push(
        (async () => {
          h.timeline.add("broker-kill");
          await h.broker.stop(true);
          await new Promise((r) => setTimeout(r, 1000));
          await h.broker.restart();
          h.timeline.add("broker-restarted");
        })(),
      );
    }
  });
  h.startSampling();
  for (const n of NODES) h.startAgent(n);
  await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 240_000);
  await Promise.all(work);
  h.stopSampling();

  expect(workerdKilled && serveKilled).toBe(true);
  const final = await expectOneHealthyCluster(h, NODES);
  const roles = NODES.map((n) => /as (bootstrap|join)$/m.exec(h.current(n)!.stdout)?.[1]);
  expect(roles.filter((r) => r === "bootstrap")).toHaveLength(1);
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  for (const n of NODES) expect(h.runs.get(n)).toHaveLength(1); // no agent needed a restart
  Object.assign(summary, { clusterId: final.clusterId, members: final.memberCount, queuedWhenKilled });
  const exits = await Promise.all(NODES.map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual(NODES.map(() => 0));
}, 300_000);
