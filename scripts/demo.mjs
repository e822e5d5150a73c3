// `npm run demo`: the whole system on this machine. It starts the broker (wrangler dev, local
// Durable Objects), the reference join API and one node agent per controller, each with its own
// real etcd in a temporary directory, all at the same moment; shows each node's progress live;
// and ends with a summary: the cluster ID, its members, and how long it took. Everything it
// started is stopped on exit or Ctrl-C. Without a terminal it prints one line per event, and
// each fault it injects and each wait for etcd to settle is a line of its own.
//
//   npm run demo                       1 bootstrap node + 6 joiners
//   npm run demo -- --nodes 4          1 + 3
//   npm run demo -- --faults           the join API fails at first, two agents are killed mid-join
//   npm run demo -- --keep             leave the cluster running until Ctrl-C
//   npm run demo -- --without-broker   first the same controllers joining the way k0s v1.28 did
//                                      (no broker, a join API that adds voters at once), then the
//                                      brokered run on the same seeded faults, side by side
//   npm run demo -- --self-hosted      the broker under join-broker serve (workerd from npm, state on disk)
//   npm run demo -- --kubeadm [--without-broker]
//                                      the real kubeadm on five lab hosts (root; scripts/kube.mjs builds it),
//                                      one joiner's etcd late: through the broker (first without it)
//   npm run demo -- --k0s [1.28|1.36] [--without-broker]
//                                      real k0s on four lab hosts (root; scripts/k0s.mjs builds it), the
//                                      first joiner's etcd failing: through the broker (first without it)
import { parseArgs } from "node:util";
import { register } from "tsx/esm/api";

// `--k0s` takes an optional version: `--k0s`, `--k0s 1.36`, `--k0s=1.36`.
const argv = process.argv.slice(2);
const k0sAt = argv.findIndex((a) => a === "--k0s" || a.startsWith("--k0s="));
let k0sVersion = null;
if (k0sAt >= 0) {
  const [flag] = argv.splice(k0sAt, 1);
  if (flag.includes("=")) k0sVersion = flag.slice("--k0s=".length);
  else if (argv[k0sAt] && !argv[k0sAt].startsWith("-")) [k0sVersion] = argv.splice(k0sAt, 1);
  else k0sVersion = "1.28";
}

register();
const { ClusterHarness, hex } = await import("../test/support/cluster.ts");
const { seededRandom } = await import("../test/support/seeded.ts");
const { faultSchedule } = await import("../test/support/split-brain.ts");

const { values } = parseArgs({
  args: argv,
  options: {
    nodes: { type: "string", default: "7" },
    faults: { type: "boolean", default: false },
    seed: { type: "string" },
    keep: { type: "boolean", default: false },
    "without-broker": { type: "boolean", default: false },
    "self-hosted": { type: "boolean", default: false },
    kubeadm: { type: "boolean", default: false },
    etcd: { type: "string" },
    "max-in-flight": { type: "string", default: "1" },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log(
    "Usage: npm run demo -- [--nodes N (2-12, default 7)] [--faults] [--seed N] [--keep] [--without-broker] [--self-hosted] [--etcd 3.4|3.5|3.6|3.7] [--max-in-flight N] [--kubeadm] [--k0s [1.28|1.36]]",
  );
  console.log("  --etcd VERSION     the etcd release to run (default: Debian's 3.4; 3.5-3.7 are built once from their Go modules)");
  console.log("  --max-in-flight N  admit N nodes at once (learners in parallel; etcd 3.6+), e.g. --etcd 3.7 --max-in-flight 6");
  console.log("  --without-broker  run the nodes the way k0s v1.28 joined (no broker), then with the broker, on the same seed and faults, and compare");
  console.log("  --self-hosted     the broker under join-broker serve (workerd from npm, state on local disk) instead of wrangler dev");
  console.log("  --kubeadm         the real kubeadm on five lab hosts (as root; node scripts/kube.mjs list builds it), one joiner's etcd late,");
  console.log("                    through the broker; with --without-broker first four concurrent kubeadm joins without it");
  console.log("  --k0s [1.28|1.36] real k0s on four lab hosts (as root; node scripts/k0s.mjs list builds it), the first joiner's etcd failing,");
  console.log("                    through the broker; with --without-broker first k0s alone (1.28: two clusters, k0s issue #5149)");
  process.exit(0);
}
if (k0sVersion !== null) {
  if (!["1.28", "1.36"].includes(k0sVersion)) {
    console.error(`--k0s takes 1.28 or 1.36, not ${k0sVersion}`);
    process.exit(2);
  }
  const { k0sDemo } = await import("./demo-k0s.mjs");
  process.exit(await k0sDemo({ version: k0sVersion, withoutBroker: values["without-broker"] }));
}
if (values.kubeadm) {
  const { kubeadmDemo } = await import("./demo-kubeadm.mjs");
  process.exit(await kubeadmDemo({ withoutBroker: values["without-broker"] }));
}
const { ETCD_MINORS } = await import("./etcd.mjs");
if (values.etcd !== undefined && !ETCD_MINORS.includes(values.etcd)) {
  console.error(`--etcd must be one of ${ETCD_MINORS.join(", ")}, not ${values.etcd}`);
  process.exit(2);
}
const maxInFlight = Number(values["max-in-flight"]);
if (!Number.isInteger(maxInFlight) || maxInFlight < 1 || maxInFlight > 12) {
  console.error("--max-in-flight must be a whole number from 1 to 12");
  process.exit(2);
}
if (maxInFlight > 1 && !["3.6", "3.7"].includes(values.etcd ?? "3.4")) {
  console.error(`--max-in-flight ${maxInFlight} needs etcd 3.6 or newer (3.4 and 3.5 hold one learner at a time): add --etcd 3.7`);
  process.exit(2);
}
if (values.etcd) process.env.E2E_ETCD_VERSION = values.etcd;
const count = Number(values.nodes);
if (!Number.isInteger(count) || count < 2 || count > 12) {
  console.error("--nodes must be a whole number from 2 to 12");
  process.exit(2);
}
const seed = values.seed ? Number(values.seed) >>> 0 : Math.floor(Math.random() * 2 ** 32);
const names = Array.from({ length: count }, (_, i) => `ctrl-${i}`);
if (values["without-broker"]) {
  const { compareRuns } = await import("./demo-compare.mjs");
  process.exit(await compareRuns({ seed, names, faults: values.faults }));
}
const schedule = faultSchedule(seed, names);
const tty = process.stdout.isTTY;
const t0 = Date.now();
const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;

process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

const runtime = values["self-hosted"] ? "serve" : "wrangler";
const { etcdUnderTest } = await import("../test/support/etcd.ts");
const etcd = await etcdUnderTest();
console.log(
  `Starting the broker (${runtime === "serve" ? "join-broker serve on workerd" : "wrangler dev"}), the join API and ${count} node agents with real etcd ${etcd.version}` +
    `${maxInFlight > 1 ? `, ${maxInFlight} admitted at once` : ", one admitted at a time"}${values.faults ? ", with faults" : ""} (seed ${seed})…`,
);
let h;
let cleaning = null;
const cleanup = async () => {
  cleaning ??= (async () => {
    if (tty) process.stdout.write("\x1b[?25h");
    await h?.cleanup();
  })();
  return cleaning;
};
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, async () => {
    console.log(`\n${signal}: stopping everything…`);
    await cleanup();
    process.exit(130);
  });
}

try {
  h = await ClusterHarness.start({
    scenario: "demo",
    seed,
    nodes: names,
    cluster: "demo",
    faultProxy: values.faults,
    ...(maxInFlight > 1 ? { policy: { maxInFlight } } : {}),
    random: seededRandom(seed ^ 0x5eed),
    broker: { runtime },
  });
} catch (e) {
  console.error(`Could not start: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
}

// Faults on request, from the seed: the join API fails for its first seconds, two agents die
// mid-join with their etcd (the schedule `--without-broker` applies to both of its runs).
const kills = [];
// The kills in the order they happened (the schedule lists them by node): the summary follows it.
const killedInOrder = [];
// Faults and pauses worth explaining: a line each without a terminal; the latest under the live view.
let notice = "";
const announce = (text) => {
  notice = text;
  if (!tty && !finished) console.log(`[${secs(Date.now() - t0).padStart(7)}] ${text}`);
};
let finished = false;
if (values.faults) {
  h.proxy.failFor(schedule.joinApiFailMs, schedule.dropShare);
  announce(`FAULT: for ${Math.round(schedule.joinApiFailMs / 1000)} s the join API answers 500 or drops the connection; agents retry`);
  kills.push(...schedule.kills.map((k) => ({ ...k, done: false })));
  h.onEvent((run, e) => {
    const k = kills.find((x) => !x.done && x.node === run.node.name && run.run === 1 && x.step === e.step);
    if (!k) return;
    k.done = true;
    killedInOrder.push(k);
    void (async () => {
      announce(`FAULT: killing ${k.node}'s agent and its etcd at ${k.step}`);
      await h.kill(k.node, "group");
      await new Promise((r) => setTimeout(r, k.restartAfterMs));
      announce(`FAULT: restarting ${k.node}'s agent: it resumes from its state files`);
      h.startAgent(k.node);
    })();
  });
}

const joinedAt = new Map();
// etcd accepts a membership change only once its leader has been in touch with every voter for
// 5 s: from the third node on, each add waits for the voter that joined just before.
const ETCD_SETTLE = "etcd takes a new member only once its leader has heard from every voter for 5 s, the newest too";
const settleTimers = new Map();
const settling = () => (h.timeline.members.at(-1)?.voters ?? 0) >= 2;
let settleExplained = false;
h.onEvent((run, e) => {
  if (e.step === "member-add") {
    clearTimeout(settleTimers.get(run.node.name));
    settleTimers.set(
      run.node.name,
      setTimeout(() => {
        // With a single voter there is nothing to settle: a wait then has another cause (a fault).
        if ((settleExplained && tty) || !settling()) return;
        settleExplained = true;
        announce(`${run.node.name} waits at member-add: ${ETCD_SETTLE}`);
      }, 1_500),
    );
  } else if (e.step !== "retry") clearTimeout(settleTimers.get(run.node.name));
  if (e.step === "joined" && !joinedAt.has(run.node.name)) joinedAt.set(run.node.name, Date.now() - t0);
  if (!tty && !finished && e.step !== "retry")
    console.log(`[${secs(Date.now() - t0).padStart(7)}] ${run.node.name}${run.run > 1 ? ` (run ${run.run})` : ""} ${e.step}: ${e.msg}`);
});

// The live view: one line per node, redrawn in place.
let drawn = 0;
const draw = () => {
  const m = h.timeline.members.at(-1);
  const etcd = m ? `etcd: ${m.voters} voter${m.voters === 1 ? "" : "s"}${m.learners ? `, ${m.learners} learner` : ""}` : "etcd: not started";
  const width = Math.max(60, (process.stdout.columns ?? 100) - 1);
  const lines = [`join-broker demo · cluster ${h.cluster} · ${secs(Date.now() - t0)} · ${etcd}`];
  for (const n of names) {
    const run = h.current(n);
    const events = run?.events ?? [];
    const last = [...events].reverse().find((e) => e.step !== "retry" && e.step !== "running");
    const retry = events.at(-1)?.step === "retry" ? ` (${events.at(-1).msg})` : "";
    const again = run && run.run > 1 ? ` [run ${run.run}]` : "";
    const settles = last?.step === "member-add" && Date.now() - Date.parse(last.time) > 1_500 && settling();
    const message = settles ? "waiting for etcd to settle: it takes a member 5 s after the last voter joined" : (last?.msg ?? "");
    const text = `  ${n.padEnd(8)}${(last?.step ?? "starting").padEnd(13)}${message}${retry}${again}`;
    lines.push(text.length > width ? `${text.slice(0, width - 1)}…` : text);
  }
  if (notice) lines.push(`  ${notice.length > width - 2 ? `${notice.slice(0, width - 3)}…` : notice}`);
  process.stdout.write(`${drawn ? `\x1b[${drawn}A` : "\x1b[?25l"}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n`);
  drawn = lines.length;
};

h.startSampling();
for (const n of names) h.startAgent(n);
const timer = tty ? setInterval(draw, 250) : null;

let ok = true;
try {
  await h.waitFor("every node to join", () => names.every((n) => h.joined(n)), 600_000);
} catch (e) {
  ok = false;
  if (timer) clearInterval(timer);
  if (tty) draw();
  console.error(`\n${e instanceof Error ? e.message : e}`);
}
if (timer) clearInterval(timer);
const took = Date.now() - t0;
await h.sampleNow().catch(() => undefined);
if (tty) draw();
finished = true;
h.stopSampling();

if (ok) {
  const gateway = h.etcd(h.nodes.map((n) => n.clientURL));
  const list = await gateway.memberList();
  const audit = await h.audit();
  const order = audit.filter((a) => a.action === "ticket.admitted").map((a) => a.detail.node);
  const bootstrap = names.find((n) => /as bootstrap$/m.test(h.current(n).stdout));
  console.log("");
  console.log(`Summary`);
  console.log(`  cluster ID   ${list.ok ? hex(list.value.header.clusterId) : "?"} (every node reports the same one)`);
  console.log(`  bootstrap    ${bootstrap}: the broker's one bootstrap ticket; every other node joined as a learner, then was promoted`);
  console.log(`  admissions   ${order.join(" → ")}`);
  if (list.ok) {
    console.log(
      `  members      ${list.value.members.length}, ${list.value.members.filter((m) => !m.isLearner).length} voters, ${list.value.members.filter((m) => m.isLearner).length} learners`,
    );
    for (const m of [...list.value.members].sort((a, b) => (joinedAt.get(a.name) ?? 0) - (joinedAt.get(b.name) ?? 0))) {
      console.log(
        `    ${m.name.padEnd(8)} ${hex(m.id).padEnd(17)} ${m.isLearner ? "learner" : "voter  "} ${m.peerURLs.join(",")}   joined after ${secs(joinedAt.get(m.name) ?? took)}`,
      );
    }
  }
  if (values.faults) {
    const s = h.proxy.stats;
    console.log(
      `  faults       join API: ${s.answered500} × 500, ${s.dropped} dropped connections; killed: ${killedInOrder.map((k) => `${k.node} at ${k.step}`).join(", ") || "none"}`,
    );
  }
  console.log(`  time         ${secs(took)} from start to the last join (etcd ${etcd.version}, maxInFlight ${maxInFlight})`);
  if (maxInFlight === 1 && count > 2)
    console.log(
      `               one at a time, each add waits for etcd to settle; with etcd 3.6+, --etcd 3.7 --max-in-flight ${count - 1} admits the joiners together`,
    );
  h.writeTimeline({ tookMs: took, members: list.ok ? list.value.members.length : null });
}

if (ok && values.keep) {
  console.log(`\nThe cluster keeps running. etcd client URLs: ${h.nodes.map((n) => n.clientURL).join(",")}`);
  if (h.etcdClientTls)
    console.log(`etcd wants a client certificate: etcdctl --cacert ${h.etcdClientTls.ca} --cert ${h.etcdClientTls.cert} --key ${h.etcdClientTls.key}`);
  console.log(`Broker ${h.broker.url} (admin token ${h.broker.adminToken}); Ctrl-C stops everything.`);
  await new Promise(() => {});
}
await cleanup();
process.exit(ok ? 0 : 1);
