// `npm run demo -- --kubeadm [--without-broker]`: the unmodified kubeadm (built by
// scripts/kube.mjs) on five lab hosts (test/lab/, as root), one joiner's etcd started late as a
// slow image pull would make it.
//   --without-broker  first kubeadm alone: `kubeadm init` on cp-1, then four `kubeadm join
//                     --control-plane` at once, cp-2's etcd held back past kubeadm's etcd window
//                     (30 s here): which joins fail, with kubeadm's own error, and the learner left;
//                     then again with etcd's --max-learners 2 and no etcd held back: the joins'
//                     results, which etcd exited with "member count is unequal", the learners left.
//   then (always)     the same five hosts through the broker: each runs `join-broker join --exec`
//                     with docs/installers.md's kubeadm recipe, all at once; the first joiner's
//                     etcd held 20 s. Every node ends a voter.
// What kubeadm and the agents printed stays in test-results/lab-kubeadm/demo-*/.

const { eventually, labUnavailable } = await import("../test/lab/lab.ts");
const { kubeBinaries, kubeadmInit, kubeadmJoin } = await import("../test/lab/kubeadm.ts");
const { BrokeredKubeLab, KubeLab, NODES, holdFirstJoiner, startedVoters } = await import("../test/lab/kubeadm-lab.ts");

const t0 = Date.now();
const log = (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}`);
const errorLine = (output) => output.match(/^error: .*$/m)?.[0] ?? output.trim().split("\n").at(-1) ?? "";
const describeMember = (m) =>
  `${BigInt(m.ID).toString(16)} ${m.name || "(never started)"} ${m.isLearner ? "learner" : "voter"} ${(m.peerURLs ?? []).join(",")}`;

/** kubeadm alone: four concurrent control-plane joins, one joiner's etcd late. Returns what it saw. */
async function withoutBroker(bins) {
  const k = await KubeLab.create("demo-without-broker", bins);
  try {
    const [cp1, cp2, ...rest] = NODES.map((n) => k.add(n));
    log(`kubeadm init on ${cp1.host}…`);
    const init = await kubeadmInit(k.lab, bins, cp1);
    k.keep("kubeadm-init-cp-1", init);
    if (init.code !== 0) throw new Error(`kubeadm init failed: ${errorLine(init.output)}`);
    log(`kubeadm init done (${(init.ms / 1000).toFixed(1)} s); ${cp2.host}'s kubelet holds its etcd back (a slow image pull)`);
    const window = { etcdAPICall: "30s", args: ["-v=5"] };
    k.kubelets.get(cp2.host).hold(`etcd-${cp2.host}`);
    const joins = [kubeadmJoin(k.lab, bins, cp2, cp1.host, window)];
    await eventually("cp-2's learner", async () => ((await k.members(cp1.host))?.members.some((m) => m.isLearner) ? true : null), 120_000);
    log(`${cp2.host}'s learner is added; kubeadm join on ${rest.map((h) => h.host).join(", ")} at once (kubeadm's etcd window: 30 s)…`);
    joins.push(...rest.map((h) => kubeadmJoin(k.lab, bins, h, cp1.host, window)));
    const runs = await Promise.all(joins);
    const joiners = [cp2, ...rest];
    const results = runs.map((r, i) => {
      k.keep(`kubeadm-join-${joiners[i].host}`, r);
      const refused = (r.output.match(/too many learner members/g) ?? []).length;
      return { host: joiners[i].host, code: r.code, ms: r.ms, error: r.code === 0 ? "" : errorLine(r.output), refused };
    });
    for (const r of results)
      log(
        `${r.host}: kubeadm join exited ${r.code} after ${(r.ms / 1000).toFixed(1)} s${r.code ? `: ${r.error}` : ""}${r.refused ? ` (${r.refused} adds refused: too many learner members)` : ""}`,
      );
    const list = await k.members(cp1.host);
    const members = list?.members ?? [];
    log(`etcd's members now (${cp1.host}'s view): ${members.length}, learners left: ${members.filter((m) => m.isLearner).length}`);
    for (const m of members) log(`  ${describeMember(m)}`);
    return { failed: results.filter((r) => r.code !== 0).length, learners: members.filter((m) => m.isLearner).length, members: members.length };
  } finally {
    await k.close();
  }
}

/**
 * kubeadm alone with etcd's --max-learners 2 (init.yaml's etcd.local.extraArgs): four concurrent
 * control-plane joins, no etcd held back. When two learners are added close together, the first
 * one's `--initial-cluster` lacks the second, and its etcd exits with "member count is unequal"
 * (kubernetes/kubeadm#2005). Returns what it saw; whether the adds land that close is a race.
 */
async function withoutBrokerMaxLearners(bins) {
  const k = await KubeLab.create("demo-without-broker-max-learners", bins);
  try {
    const [cp1, ...rest] = NODES.map((n) => k.add(n));
    log(`kubeadm init on ${cp1.host}, etcd with --max-learners 2…`);
    const init = await kubeadmInit(k.lab, bins, cp1, [], { etcdExtraArgs: { "max-learners": "2" } });
    k.keep("kubeadm-init-cp-1", init);
    if (init.code !== 0) throw new Error(`kubeadm init failed: ${errorLine(init.output)}`);
    log(`kubeadm init done (${(init.ms / 1000).toFixed(1)} s); kubeadm join on ${rest.map((h) => h.host).join(", ")} at once (kubeadm's etcd window: 30 s)…`);
    const runs = await Promise.all(rest.map((h) => kubeadmJoin(k.lab, bins, h, cp1.host, { etcdAPICall: "30s", args: ["-v=5"] })));
    const results = runs.map((r, i) => {
      k.keep(`kubeadm-join-${rest[i].host}`, r);
      return { host: rest[i].host, code: r.code, ms: r.ms, error: r.code === 0 ? "" : errorLine(r.output) };
    });
    for (const r of results) log(`${r.host}: kubeadm join exited ${r.code} after ${(r.ms / 1000).toFixed(1)} s${r.code ? `: ${r.error}` : ""}`);
    // Each etcd pod's output, kept by the kubelet stand-in: how often it exited on #2005.
    const unequal = rest
      .map((h) => ({ host: h.host, count: (k.podOutput(h.host, `etcd-${h.host}`).match(/member count is unequal/g) ?? []).length }))
      .filter((u) => u.count > 0);
    for (const u of unequal)
      log(`${u.host}: its etcd exited ${u.count} time(s) with "member count is unequal" (its --initial-cluster lacked a member added after it)`);
    const list = await k.members(cp1.host);
    const members = list?.members ?? [];
    log(`etcd's members now (${cp1.host}'s view): ${members.length}, learners left: ${members.filter((m) => m.isLearner).length}`);
    for (const m of members) log(`  ${describeMember(m)}`);
    return {
      failed: results.filter((r) => r.code !== 0).length,
      learners: members.filter((m) => m.isLearner).length,
      members: members.length,
      unequal: unequal.length,
    };
  } finally {
    await k.close();
  }
}

/** The same hosts through the broker. Returns the voters etcd lists at the end. */
async function brokered(bins) {
  const b = await BrokeredKubeLab.create("demo-brokered", bins);
  try {
    const { h, k } = b;
    const held = holdFirstJoiner(b);
    h.onEvent((run, e) => {
      const n = run.node.name;
      if (e.step === "ticket" && e.role) log(`${n}: ticket, ${e.role}${held() === n ? ` (its kubelet will hold its etcd 20 s)` : ""}`);
      if (e.step === "exec") log(`${n}: admitted, running the recipe as ${e.role} (${e.role === "bootstrap" ? "kubeadm init" : "kubeadm join"})`);
      if (e.step === "joined") log(`${n}: ${e.msg}`);
      if (e.step === "exec-exit" && !/status 0/.test(e.msg)) log(`${n}: ${e.msg}`);
    });
    log(`five agents start at once (join-broker serve on host broker, a load balancer on host lb)…`);
    for (const n of NODES) b.startAgent(n);
    await h.waitFor(
      "a joiner's learner, its etcd held",
      async () => !!held() && (await b.anyMembers())?.members.some((m) => m.isLearner && !m.name) === true,
      240_000,
    );
    log(`${held()}'s learner is added, its etcd held: the broker admits nobody else meanwhile`);
    await new Promise((r) => setTimeout(r, 20_000));
    log(`${held()}'s kubelet starts its etcd`);
    k.kubelets.get(held()).release(`etcd-${held()}`);
    await h.waitFor("every agent to exit", () => NODES.every((n) => h.current(n)?.exit), 360_000);
    const list = await eventually(
      "five started voters",
      async () => {
        const l = await b.anyMembers();
        return l && l.members.length === NODES.length && startedVoters(l).length === NODES.length ? l : null;
      },
      120_000,
    ).catch(() => null);
    const members = list?.members ?? (await b.anyMembers())?.members ?? [];
    const refused = NODES.filter((n) => b.kubeadmOutput(n).includes("too many learner members"));
    log(
      `etcd's members now: ${members.length}, voters: ${members.filter((m) => !m.isLearner).length}, learners: ${members.filter((m) => m.isLearner).length}; kubeadm runs refused a learner: ${refused.length}`,
    );
    for (const m of members) log(`  ${describeMember(m)}`);
    const exits = NODES.map((n) => h.current(n)?.exit?.code);
    return { voters: startedVoters({ members }).length, learners: members.filter((m) => m.isLearner).length, exits, refused: refused.length };
  } finally {
    await b.close();
  }
}

export async function kubeadmDemo({ withoutBroker: compare }) {
  const why = await labUnavailable();
  if (why) {
    console.error(`--kubeadm runs kubeadm on the lab's hosts, which cannot run here: ${why}`);
    return 1;
  }
  const bins = kubeBinaries();
  if (typeof bins === "string") {
    console.error(`--kubeadm needs kubeadm and kube-apiserver: ${bins}`);
    return 1;
  }
  let naive = null;
  let naiveMax = null;
  if (compare) {
    console.log("1. Without the broker: kubeadm init on cp-1, then kubeadm join --control-plane on cp-2…cp-5 at once; cp-2's etcd starts late.\n");
    naive = await withoutBroker(bins);
    console.log(
      "\n2. Without the broker, etcd allowing 2 learners (--max-learners 2): kubeadm init on cp-1, then kubeadm join --control-plane on cp-2…cp-5 at once.\n",
    );
    naiveMax = await withoutBrokerMaxLearners(bins);
    console.log("\n3. With the broker: the same five hosts, each running join-broker join --exec with the kubeadm recipe.\n");
  } else {
    console.log("Five lab hosts through the broker, each running join-broker join --exec with the kubeadm recipe.\n");
  }
  const withBroker = await brokered(bins);
  console.log("");
  if (naive) console.log(`Without the broker: ${naive.failed} of 4 joins failed; ${naive.learners} learner left in etcd (${naive.members} members).`);
  if (naiveMax)
    console.log(
      `Without the broker, --max-learners 2: ${naiveMax.failed} of 4 joins failed; ${naiveMax.unequal} etcd exited with "member count is unequal"; ${naiveMax.learners} learner(s) left in etcd (${naiveMax.members} members).`,
    );
  const ok = withBroker.voters === NODES.length && withBroker.learners === 0 && withBroker.exits.every((c) => c === 0);
  console.log(
    ok
      ? `With the broker: all ${NODES.length} nodes started voters, no learner left, no kubeadm run refused a learner (${withBroker.refused}).`
      : `With the broker: NOT every node a voter (exits ${withBroker.exits.join(", ")}; see test-results/lab-kubeadm/demo-brokered/).`,
  );
  return ok ? 0 : 1;
}
