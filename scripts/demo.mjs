// `npm run demo`: the whole system on this machine. It starts the broker (wrangler dev, local
// Durable Objects), the reference join API and one node agent per controller, each with its own
// real etcd in a temporary directory, all at the same moment; shows each node's progress live;
// and ends with a summary: the cluster ID, its members, and how long it took. Everything it
// started is stopped on exit or Ctrl-C.
//
//   npm run demo                       1 bootstrap node + 6 joiners
//   npm run demo -- --nodes 4          1 + 3
//   npm run demo -- --faults           the join API fails at first, two agents are killed mid-join
//   npm run demo -- --keep             leave the cluster running until Ctrl-C
//   npm run demo -- --self-hosted      the broker under join-broker serve (workerd from npm, state on disk)
import { parseArgs } from "node:util";
import { register } from "tsx/esm/api";

register();
const { ClusterHarness, hex } = await import("../test/support/cluster.ts");
const { seededRandom, pick, between } = await import("../test/support/seeded.ts");
const { EtcdGateway } = await import("../src/etcd/gateway.ts");

const { values } = parseArgs({
  options: {
    nodes: { type: "string", default: "7" },
    faults: { type: "boolean", default: false },
    seed: { type: "string" },
    keep: { type: "boolean", default: false },
    "self-hosted": { type: "boolean", default: false },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log("Usage: npm run demo -- [--nodes N (2-12, default 7)] [--faults] [--seed N] [--keep] [--self-hosted]");
  process.exit(0);
}
const count = Number(values.nodes);
if (!Number.isInteger(count) || count < 2 || count > 12) {
  console.error("--nodes must be a whole number from 2 to 12");
  process.exit(2);
}
const seed = values.seed ? Number(values.seed) >>> 0 : Math.floor(Math.random() * 2 ** 32);
const random = seededRandom(seed);
const names = Array.from({ length: count }, (_, i) => `ctrl-${i}`);
const tty = process.stdout.isTTY;
const t0 = Date.now();
const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;

process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

const runtime = values["self-hosted"] ? "serve" : "wrangler";
console.log(`Starting the broker (${runtime === "serve" ? "join-broker serve on workerd" : "wrangler dev"}), the join API and ${count} node agents with real etcd${values.faults ? ", with faults" : ""} (seed ${seed})…`);
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
  h = await ClusterHarness.start({ scenario: "demo", seed, nodes: names, cluster: "demo", faultProxy: values.faults, random, broker: { runtime } });
} catch (e) {
  console.error(`Could not start: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
}

// Faults on request: the join API fails for its first seconds, two agents die mid-join.
const kills = [];
if (values.faults) {
  h.proxy.failFor(8_000);
  for (const node of [...names.slice(1)].sort(() => random() - 0.5).slice(0, 2)) {
    kills.push({ node, step: pick(random, ["queued", "admitted", "member-added", "etcd-start", "promote"]), done: false });
  }
  h.onEvent((run, e) => {
    const k = kills.find((x) => !x.done && x.node === run.node.name && run.run === 1 && x.step === e.step);
    if (!k) return;
    k.done = true;
    void (async () => {
      await h.kill(k.node, pick(random, ["agent", "group"]));
      await new Promise((r) => setTimeout(r, between(random, 300, 1200)));
      h.startAgent(k.node);
    })();
  });
}

const joinedAt = new Map();
let finished = false;
h.onEvent((run, e) => {
  if (e.step === "joined" && !joinedAt.has(run.node.name)) joinedAt.set(run.node.name, Date.now() - t0);
  if (!tty && !finished && e.step !== "retry") console.log(`[${secs(Date.now() - t0).padStart(7)}] ${run.node.name}${run.run > 1 ? ` (run ${run.run})` : ""} ${e.step}: ${e.msg}`);
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
    const text = `  ${n.padEnd(8)}${(last?.step ?? "starting").padEnd(13)}${last?.msg ?? ""}${retry}${again}`;
    lines.push(text.length > width ? `${text.slice(0, width - 1)}…` : text);
  }
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
  const gateway = new EtcdGateway(h.nodes.map((n) => n.clientURL));
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
    console.log(`  members      ${list.value.members.length}, ${list.value.members.filter((m) => !m.isLearner).length} voters, ${list.value.members.filter((m) => m.isLearner).length} learners`);
    for (const m of [...list.value.members].sort((a, b) => (joinedAt.get(a.name) ?? 0) - (joinedAt.get(b.name) ?? 0))) {
      console.log(`    ${m.name.padEnd(8)} ${hex(m.id).padEnd(17)} ${m.isLearner ? "learner" : "voter  "} ${m.peerURLs.join(",")}   joined after ${secs(joinedAt.get(m.name) ?? took)}`);
    }
  }
  if (values.faults) {
    const s = h.proxy.stats;
    console.log(`  faults       join API: ${s.answered500} × 500, ${s.dropped} dropped connections; killed: ${kills.filter((k) => k.done).map((k) => `${k.node} at ${k.step}`).join(", ") || "none"}`);
  }
  console.log(`  time         ${secs(took)} from start to the last join`);
  h.writeTimeline({ tookMs: took, members: list.ok ? list.value.members.length : null });
}

if (ok && values.keep) {
  console.log(`\nThe cluster keeps running. etcd client URLs: ${h.nodes.map((n) => n.clientURL).join(",")}`);
  console.log(`Broker ${h.broker.url} (admin token ${h.broker.adminToken}); Ctrl-C stops everything.`);
  await new Promise(() => {});
}
await cleanup();
process.exit(ok ? 0 : 1);
