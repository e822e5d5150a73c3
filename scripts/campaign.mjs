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
//   npm run campaign -- --installer k0s --seeds 100    gate mode around real k0s (1 + 3): odd seeds k0s 1.28, even 1.36
//   npm run campaign -- --installer k0s --k0s 1.36 --k0s-variant broker --seed 4
//                                                      one version, the patched k0s whose join API checks the admission
//   … --lock /tmp/jb-lab.lock                          hold this flock(1) lock while each seed runs (a shared machine)
//   … --resume                                         keep the seeds DIR/report.json has already, run the others
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
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
    installer: { type: "string", default: "test" },
    k0s: { type: "string", default: "both" },
    "k0s-variant": { type: "string" },
    lock: { type: "string" },
    resume: { type: "boolean", default: false },
    help: { type: "boolean", short: "h" },
  },
});
const usage =
  "Usage: npm run campaign -- [--seeds N [--first-seed S | --random] | --seed S] [--nodes 1+N] [--etcd 3.4|3.5|3.6|3.7] [--mode join-api|gate|alternate] [--parallel K] [--out DIR] [--record] [--lock FILE] [--resume]\n" +
  "       npm run campaign -- --installer k0s [--k0s 1.28|1.36|both] [--k0s-variant NAME] [--seeds N … | --seed S] [--out DIR] [--record] [--lock FILE] [--resume]";
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
if (!["test", "k0s"].includes(values.installer))
  fail("--installer is test (the test installer: kubeadm's etcd phase with etcdctl) or k0s (real k0s controllers)");
const k0s = values.installer === "k0s";
if (k0s) {
  if (values.nodes !== "1+3") fail("--installer k0s runs 1 + 3 controllers: --nodes 1+3");
  if (values.mode !== "join-api" && values.mode !== "gate") fail("--installer k0s is gate mode: leave --mode out");
  if (!["1.28", "1.36", "both"].includes(values.k0s)) fail("--k0s is 1.28, 1.36 or both (odd seeds 1.28, even seeds 1.36)");
  if (values.out === "test-results/campaign") values.out = "test-results/campaign-k0s";
} else if (values["k0s-variant"] || values.k0s !== "both") fail("--k0s and --k0s-variant go with --installer k0s");
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
const { runK0sSeed, k0sCampaignBinaries } = await import("../test/lab/campaign-k0s.ts");
const { writeReport, reliabilityMarkdown, reliabilityK0sSection, withK0sSection, k0sSectionOf } = await import("../test/lab/campaign-report.ts");
if (k0s) {
  // Built already (npm test's background step, or `node scripts/k0s.mjs list`): the campaign never builds k0s.
  const missing = Object.entries(k0sCampaignBinaries(values.k0s, values["k0s-variant"] ?? null)).filter(([, b]) => typeof b === "string");
  if (missing.length) {
    console.error(`the k0s campaign cannot run: ${missing.map(([v, why]) => `k0s ${v}: ${why}`).join("; ")}`);
    process.exit(2);
  }
}

const what = k0s
  ? `k0s ${values.k0s === "both" ? "1.28 (odd seeds) and 1.36 (even seeds)" : values.k0s}${values["k0s-variant"] ? ` +${values["k0s-variant"]}` : ""}, 1+3 controllers in gate mode`
  : `1+${joiners} nodes, etcd ${values.etcd}`;
console.log(`campaign: ${seeds.length} seed(s) (${seeds.join(", ")}), ${what}`);
const startedAt = new Date().toISOString();
const results = [];
if (values.resume && existsSync(`${values.out}/report.json`)) {
  const kept = JSON.parse(readFileSync(`${values.out}/report.json`, "utf8")).results.filter((r) => seeds.includes(r.seed));
  results.push(...kept.map((r) => ({ timeline: [], ...r })));
  console.log(`campaign: resuming: ${kept.length} seed(s) kept from ${values.out}/report.json (${kept.map((r) => r.seed).join(", ") || "none"})`);
}
const queue = seeds.filter((s) => !results.some((r) => r.seed === s));

/** Holds a flock(1) lock until the returned function is called (a `flock FILE cat` child that ends with its stdin). */
async function holdLock(file) {
  const child = spawn("flock", [file, "sh", "-c", "echo held; exec cat"], { stdio: ["pipe", "pipe", "inherit"] });
  const waiting = setTimeout(() => console.log(`campaign: waiting for the lock ${file} (another run holds it)`), 2_000);
  await new Promise((ok, fail) => {
    child.stdout.once("data", ok);
    child.once("exit", (code) => fail(new Error(`flock ${file} exited with ${code}`)));
  });
  clearTimeout(waiting);
  return () => new Promise((ok) => (child.once("exit", ok), child.stdin.end()));
}

// Each seed runs in a lab of its own (its own namespaces, bridge and addresses), so several can
// run at once; results are kept in seed order.
const worker = async () => {
  for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
    const release = values.lock ? await holdLock(values.lock) : async () => undefined;
    try {
      const log = (line) => console.log(line);
      results.push(
        k0s
          ? await runK0sSeed(seed, { k0s: values.k0s, variant: values["k0s-variant"] ?? null, outDir: values.out, log })
          : await runSeed(seed, { joiners: Number(joiners), mode: values.mode, log }),
      );
    } finally {
      await release();
    }
    results.sort((a, b) => seeds.indexOf(a.seed) - seeds.indexOf(b.seed));
    // Written after every seed: a campaign stopped half-way still leaves its record.
    const run = { startedAt, etcd: values.etcd, joiners: Number(joiners), results };
    writeReport(values.out, run);
    if (values.record) {
      const file = new URL("../RELIABILITY.md", import.meta.url);
      const existing = existsSync(file) ? readFileSync(file, "utf8") : "";
      const command = `npm run campaign -- ${process.argv.slice(2).join(" ")}`;
      // The k0s campaign owns its section of the record; the main campaign the rest.
      const kept = k0sSectionOf(existing);
      const text = k0s
        ? withK0sSection(existing, reliabilityK0sSection(run, command))
        : kept
          ? withK0sSection(reliabilityMarkdown(run, command), kept)
          : reliabilityMarkdown(run, command);
      writeFileSync(file, text.endsWith("\n") ? text : `${text}\n`);
    }
  }
};
await Promise.all(Array.from({ length: Math.min(parallel, seeds.length) }, worker));
const failed = results.filter((r) => r.outcome === "fail");

console.log(`\ncampaign: ${results.length - failed.length} passed, ${failed.length} failed; report: ${values.out}/report.json`);
for (const r of failed)
  console.log(
    `  seed ${r.seed}: ${r.violations.map((v) => v.invariant).join(", ")} (replay: ${k0s ? `npm run campaign -- --installer k0s --seed ${r.seed}${values.k0s !== "both" ? ` --k0s ${values.k0s}` : ""}${values["k0s-variant"] ? ` --k0s-variant ${values["k0s-variant"]}` : ""}` : `npm run campaign -- --seed ${r.seed} --nodes 1+${joiners} --etcd ${values.etcd} --mode ${r.mode}`})`,
  );
process.exit(failed.length ? 1 : 0);
