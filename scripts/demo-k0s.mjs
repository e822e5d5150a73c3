// `npm run demo -- --k0s [1.28|1.36] [--without-broker]`: real k0s (built by scripts/k0s.mjs) on
// four lab hosts (test/lab/k0s-lab.ts, as root): a leader and three joiners started at once, the
// first joiner's etcd failing every start of its first k0s process, its unit restarted as systemd
// would (5 s later).
//   --without-broker  first k0s alone, as its documentation runs it: each host's cluster ID in the
//                     end (k0s 1.28: the restarted joiner starts a cluster of its own, k0s issue
//                     #5149; 1.36: its learner stays and blocks every other joiner)
//   then (always)     the same four hosts through the broker, each running docs/k0s.md's unit:
//                     one cluster ID, four started voters, no member left behind.
// The version defaults to 1.28. What k0s and the agents printed stays in test-results/lab-k0s/.

const { labUnavailable } = await import("../test/lab/lab.ts");
const { k0sBinaries, seedThroughBroker, seedWithoutBroker } = await import("../test/lab/k0s-lab.ts");

export async function k0sDemo({ version, withoutBroker }) {
  const why = await labUnavailable();
  if (why) {
    console.error(`--k0s runs k0s on the lab's hosts, which cannot run here: ${why}`);
    return 1;
  }
  const bins = k0sBinaries(version);
  if (typeof bins === "string") {
    console.error(`--k0s ${version} needs k0s, its etcd and kube-apiserver: ${bins}`);
    return 1;
  }
  const t0 = Date.now();
  const log = (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  let naive = null;
  if (withoutBroker) {
    console.log(`1. Without the broker: k0s ${bins.release} as its documentation runs it, four controllers at once.\n`);
    naive = await seedWithoutBroker(bins, { name: `demo-without-broker-${version}`, log });
    console.log(`\n2. With the broker: the same four hosts, each running docs/k0s.md's unit.\n`);
  } else {
    console.log(`Four lab hosts running k0s ${bins.release} through the broker, each with docs/k0s.md's unit.\n`);
  }
  const brokered = await seedThroughBroker(bins, { name: `demo-through-broker-${version}`, log });
  console.log("");
  if (naive) {
    console.log(
      `Without the broker: ${naive.clusters.length} etcd cluster ID(s) (${naive.clusters.join(", ")})` +
        (naive.clusters.length > 1
          ? `: ${naive.faulted}, restarted, started a cluster of its own (split brain).`
          : `; ${naive.faulted}'s learner blocks every other joiner.`),
    );
  }
  const voters = Object.values(brokered.views).every((v) => v && v.members.length === 4 && v.members.every((m) => m.name && !m.isLearner));
  const ok = brokered.clusters.length === 1 && voters;
  console.log(
    ok
      ? `With the broker: one cluster ID (${brokered.clusters[0]}), four started voters, no member left behind, in ${brokered.seconds} s.`
      : "With the broker: NOT one cluster of four voters (see test-results/lab-k0s/).",
  );
  return ok ? 0 : 1;
}
