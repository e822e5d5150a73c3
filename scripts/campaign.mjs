// `npm run campaign`: the fault campaign in the lab (test/lab/, docs/lab.md). Per seed, a 1 + N
// join on hosts of their own under a seeded schedule of faults, healed, then checked; writes
// DIR/report.json, DIR/report.md and an SVG timeline per failing seed. Exits 0 when every
// invariant held on every seed. Needs root (network namespaces, nftables).
//
//   npm run campaign -- --seeds 20                    seeds 1..20
//   npm run campaign -- --seed 7                      replay one seed
//   npm run campaign -- --seeds 5 --random            5 seeds drawn at random (printed for replay)
//   npm run campaign -- --nodes 1+3 --etcd 3.6 --out test-results/campaign
//   npm run campaign -- --seeds 100 --record           and write RELIABILITY.md from the run
//   npm run campaign -- --seeds 10 --mode alternate    odd seeds through the join API, even seeds in gate mode
//   npm run campaign -- --seeds 100 --parallel 2       two seeds at a time, each in a lab of its own
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { register } from "tsx/esm/api";

const { values } = parseArgs({
  options: {
    seeds: { type: "string" },
    seed: { type: "string" },
    "first-seed": { type: "string", default: "1" },
    random: { type: "boolean", default: false },
    nodes: { type: "string", default: "1+3" },
    mode: { type: "string", default: "join-api" },
    etcd: { type: "string", default: "3.6" },
    out: { type: "string", default: "test-results/campaign" },
    record: { type: "boolean", default: false },
    parallel: { type: "string", default: "1" },
    help: { type: "boolean", short: "h" },
  },
});
const usage = "Usage: npm run campaign -- [--seeds N [--first-seed S | --random] | --seed S] [--nodes 1+N] [--etcd 3.4|3.5|3.6|3.7] [--mode join-api|gate|alternate] [--parallel K] [--out DIR] [--record]";
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const fail = (message) => {
  console.error(`${message}\n${usage}`);
  process.exit(2);
};
const joiners = /^1\+(\d+)$/.exec(values.nodes)?.[1];
if (!joiners || Number(joiners) < 1 || Number(joiners) > 8) fail("--nodes is 1+N with N from 1 to 8");
const { ETCD_MINORS, ensureEtcd } = await import("./etcd.mjs");
if (!ETCD_MINORS.includes(values.etcd)) fail(`--etcd must be one of ${ETCD_MINORS.join(", ")}`);
if (!["join-api", "gate", "alternate"].includes(values.mode)) fail("--mode is join-api, gate or alternate");
const parallel = Number(values.parallel);
if (!/^\d+$/.test(values.parallel) || parallel < 1 || parallel > 4) fail("--parallel is 1 to 4 (seeds at a time, a lab each)");
let seeds;
if (values.seed !== undefined) {
  if (!/^\d+$/.test(values.seed)) fail("--seed is a whole number");
  seeds = [Number(values.seed) >>> 0];
} else {
  const count = Number(values.seeds ?? "1");
  if (!Number.isInteger(count) || count < 1) fail("--seeds is a whole number of at least 1");
  const first = Number(values["first-seed"]);
  seeds = Array.from({ length: count }, (_, i) => (values.random ? Math.floor(Math.random() * 2 ** 32) : first + i));
}

register();
const { labUnavailable } = await import("../test/lab/lab.ts");
const unavailable = await labUnavailable();
if (unavailable) {
  console.error(`the campaign cannot run here: ${unavailable}`);
  process.exit(2);
}
process.env.E2E_ETCD_VERSION = values.etcd;
await ensureEtcd(values.etcd);
const { runSeed } = await import("../test/lab/campaign.ts");
const { writeReport, reliabilityMarkdown } = await import("../test/lab/campaign-report.ts");

console.log(`campaign: ${seeds.length} seed(s) (${seeds.join(", ")}), 1+${joiners} nodes, etcd ${values.etcd}`);
const startedAt = new Date().toISOString();
const results = [];
const queue = [...seeds];
// Each seed runs in a lab of its own (its own namespaces, bridge and addresses), so several can
// run at once; results are kept in seed order.
const worker = async () => {
  for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
    results.push(await runSeed(seed, { joiners: Number(joiners), mode: values.mode, log: (line) => console.log(line) }));
    results.sort((a, b) => seeds.indexOf(a.seed) - seeds.indexOf(b.seed));
    // Written after every seed: a campaign stopped half-way still leaves its record.
    const run = { startedAt, etcd: values.etcd, joiners: Number(joiners), results };
    writeReport(values.out, run);
    if (values.record) writeFileSync(new URL("../RELIABILITY.md", import.meta.url), reliabilityMarkdown(run, `npm run campaign -- ${process.argv.slice(2).join(" ")}`));
  }
};
await Promise.all(Array.from({ length: Math.min(parallel, seeds.length) }, worker));
const failed = results.filter((r) => r.outcome === "fail");

console.log(`\ncampaign: ${results.length - failed.length} passed, ${failed.length} failed; report: ${values.out}/report.json`);
for (const r of failed) console.log(`  seed ${r.seed}: ${r.violations.map((v) => v.invariant).join(", ")} (replay: npm run campaign -- --seed ${r.seed} --nodes 1+${joiners} --etcd ${values.etcd} --mode ${r.mode})`);
process.exit(failed.length ? 1 : 0);
