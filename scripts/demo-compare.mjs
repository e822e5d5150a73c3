// `npm run demo -- --without-broker [--faults] [--seed N]`: the failure the broker prevents,
// then the same nodes with the broker, on the same seed and fault schedule, side by side.
// (test/support/split-brain.ts does the work; this prints it and writes test-results/.)
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const { runNaive, runBrokered, sideBySide, faultSchedule } = await import("../test/support/split-brain.ts");

export async function compareRuns({ seed, names, faults }) {
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  process.env.WRANGLER_SEND_METRICS = "false";
  const schedule = faultSchedule(seed, names);
  console.log(
    `Seed ${seed}: 1 + ${names.length - 1} controllers on real etcd${faults ? `; faults: the join API fails for the first ${schedule.joinApiFailMs / 1000} s, ${schedule.kills.map((k) => `${k.node} is killed at ${k.step}`).join(", ")}` : ""}.`,
  );
  console.log(`\n1. Without the broker: each joiner asks a join API that adds it as a voter at once and answers 500 on any error;`);
  console.log(`   it gives up after 10 s and restarts, and a restarted controller that finds its certificates starts etcd as if it had joined.\n`);
  const naive = await runNaive({ seed, names, faults, log: (l) => console.log(l) });
  console.log(`\n2. With the broker: the same nodes, seed and faults; node agents, the broker and the reference join API (learners first).\n`);
  let brokered;
  try {
    brokered = await runBrokered({ seed, names, faults, log: (l) => console.log(l) });
  } catch (e) {
    console.error(`\nThe brokered run failed: ${e instanceof Error ? e.message : e}`);
    return 1;
  }
  console.log(`\nSide by side (seed ${seed}${faults ? ", --faults" : ""}):\n`);
  console.log(sideBySide(naive, brokered));
  const split = naive.clusterIds.length > 1 || naive.quorumLosses > 0 || !naive.quorumAtEnd;
  const clean = brokered.clusterIds.length === 1 && brokered.members?.total === names.length && brokered.members.voters === names.length;
  console.log(
    `\n${split ? `Without the broker: ${naive.clusterIds.length} clusters${naive.quorumLosses ? `, quorum lost ${naive.quorumLosses}×` : ""}; ${naive.inOtherCluster.length} of ${names.length} nodes ended outside the first cluster.` : "Without the broker this seed happened to end in one cluster."}` +
      `\n${clean ? `With the broker: one cluster, all ${names.length} nodes voters.` : "With the broker: NOT one cluster of voters (see above)."}`,
  );
  console.log(
    "\nWhy the brokered run takes longer: it adds one node at a time, as a learner, and waits until that node's etcd" +
      "\nruns and is promoted before the next (etcd takes a new member only once its leader has heard from every voter" +
      "\nfor 5 s). The run without the broker adds everyone at once, which is faster only until quorum is lost. On" +
      "\netcd 3.6+ the broker admits several learners at once: npm run demo -- --etcd 3.7 --max-in-flight 6.",
  );
  const dir = resolve(fileURLToPath(new URL("../test-results", import.meta.url)));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `demo-without-broker-${seed}.json`);
  writeFileSync(file, `${JSON.stringify({ seed, faults, schedule, naive, brokered }, null, 2)}\n`);
  console.log(`Details: ${file}`);
  return clean ? 0 : 1;
}
