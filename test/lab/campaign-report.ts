/**
 * The campaign's record: `report.json` (every seed's schedule, outcome and violations with the
 * sample that shows each), `report.md` (a table a person reads) and, per failing seed, an SVG
 * timeline (hosts as rows, faults as bars, the agents' steps as marks along time).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BOUNDS, type Fault, type SeedResult } from "./campaign.ts";

export interface CampaignRun {
  startedAt: string;
  etcd: string;
  joiners: number;
  results: SeedResult[];
}

/** Writes report.json, report.md and the failing seeds' SVGs into `dir`; returns report.json's path. */
export function writeReport(dir: string, run: CampaignRun): string {
  mkdirSync(dir, { recursive: true });
  const failing = run.results.filter((r) => r.outcome === "fail");
  for (const r of failing) writeFileSync(join(dir, `seed-${r.seed}.svg`), svgTimeline(r));
  const json = {
    startedAt: run.startedAt,
    etcd: run.etcd,
    nodes: `1+${run.joiners}`,
    bounds: BOUNDS,
    seeds: run.results.length,
    passed: run.results.length - failing.length,
    failed: failing.length,
    faultMix: faultMix(run.results),
    results: run.results.map(({ timeline: _t, ...r }) => r),
  };
  const path = join(dir, "report.json");
  writeFileSync(path, `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(join(dir, "report.md"), markdown(run, failing));
  return path;
}

export function faultMix(results: SeedResult[]): Record<string, number> {
  const mix: Record<string, number> = {};
  for (const r of results) for (const f of r.schedule) mix[faultName(f)] = (mix[faultName(f)] ?? 0) + 1;
  return Object.fromEntries(Object.entries(mix).sort());
}

function faultName(f: Fault): string {
  if (f.kind === "partition") return f.oneWay ? "partition (one-way)" : "partition (two-way)";
  if (f.kind === "skew") return f.host === "join-api" ? "clock skew (join API)" : "clock skew (agent)";
  return f.kind === "kill" ? "SIGKILL" : f.kind === "pause" ? "SIGSTOP pause" : f.kind === "flap" ? "link flap" : "packet loss";
}

function describe(f: Fault): string {
  const at = `${(f.atMs / 1000).toFixed(1)} s`;
  switch (f.kind) {
    case "partition":
      return `${at} ${f.host} ${f.oneWay ? "→" : "↔"} ${f.from.join(",")} cut ${f.forMs} ms`;
    case "loss":
      return `${at} ${f.host} loses ${f.percent} % for ${f.forMs} ms`;
    case "skew":
      return `${at} ${f.host} clock ${f.seconds >= 0 ? "+" : ""}${f.seconds} s`;
    default:
      return `${at} ${f.host} ${f.kind} ${f.forMs} ms`;
  }
}

function markdown(run: CampaignRun, failing: SeedResult[]): string {
  const lines = [
    `# Fault campaign`,
    "",
    `${run.results.length} seeds, 1 + ${run.joiners} nodes, etcd ${run.etcd}, started ${run.startedAt}: **${run.results.length - failing.length} passed, ${failing.length} failed**.`,
    "",
    "| seed | outcome | faults | ends | violations |",
    "|---|---|---|---|---|",
    ...run.results.map(
      (r) =>
        `| ${r.seed} | ${r.outcome}${r.outcome === "fail" ? ` ([timeline](seed-${r.seed}.svg))` : ""} | ${r.schedule.map(describe).join("; ")} | ${Object.entries(r.ends).map(([n, e]) => `${n}: ${e}`).join("; ")} | ${r.violations.map((v) => `${v.invariant}: ${v.detail.split("\n")[0]!.replace(/\|/g, "\\|")}`).join("; ")} |`,
    ),
    "",
    "Fault mix: " + Object.entries(faultMix(run.results)).map(([k, n]) => `${k} ${n}`).join(", ") + ".",
    "",
    `Replay a seed with \`npm run campaign -- --seed S --nodes 1+${run.joiners} --etcd ${run.etcd}\`.`,
    "",
  ];
  return lines.join("\n");
}

const COLORS: Record<Fault["kind"], string> = { partition: "#d62728", loss: "#ff7f0e", flap: "#9467bd", pause: "#8c564b", kill: "#111111", skew: "#17becf" };
const MARKS: Record<string, string> = { admitted: "#1f77b4", "member-added": "#2ca02c", promoted: "#2ca02c", joined: "#2ca02c", "gave-up": "#d62728", refused: "#d62728", "agent-exit": "#7f7f7f", "agent-restart": "#111111" };

/** Hosts as rows, faults as bars, agent steps as marks; time along x. */
export function svgTimeline(r: SeedResult): string {
  const hosts = [...r.nodes, "join-api", "broker"];
  const end = Math.max(1, ...r.timeline.map((e) => e.t));
  const width = 1000;
  const left = 80;
  const rowH = 28;
  const x = (t: number) => left + (t / end) * (width - left - 10);
  const y = (host: string) => 30 + hosts.indexOf(host) * rowH;
  const parts: string[] = [];
  hosts.forEach((h) => parts.push(`<text x="4" y="${y(h) + 14}" font-size="12">${h}</text><line x1="${left}" x2="${width - 10}" y1="${y(h) + 10}" y2="${y(h) + 10}" stroke="#ddd"/>`));
  for (const e of r.timeline) {
    const m = /^fault-(\w+)$/.exec(e.kind);
    if (m && e.node && hosts.includes(e.node)) {
      const f = e.detail as unknown as Fault;
      const w = Math.max(3, x(e.t + (f.forMs || 0)) - x(e.t));
      parts.push(`<rect x="${x(e.t)}" y="${y(e.node) + 2}" width="${w}" height="16" fill="${COLORS[f.kind] ?? "#999"}" opacity="0.6"><title>${escape(describe(f))}</title></rect>`);
      if (f.kind === "partition") for (const o of f.from) if (hosts.includes(o)) parts.push(`<rect x="${x(e.t)}" y="${y(o) + 8}" width="${w}" height="4" fill="${COLORS.partition}" opacity="0.4"/>`);
    }
    if (e.node && MARKS[e.kind]) parts.push(`<circle cx="${x(e.t)}" cy="${y(e.node) + 10}" r="4" fill="${MARKS[e.kind]}"><title>${escape(`${(e.t / 1000).toFixed(1)} s ${e.kind} ${JSON.stringify(e.detail ?? {})}`)}</title></circle>`);
    if (e.kind === "healed" || e.kind === "invariant-violated") parts.push(`<line x1="${x(e.t)}" x2="${x(e.t)}" y1="20" y2="${30 + hosts.length * rowH}" stroke="${e.kind === "healed" ? "#2ca02c" : "#d62728"}" stroke-dasharray="4 2"><title>${escape(e.kind)}</title></line>`);
  }
  const h = 60 + hosts.length * rowH;
  const title = `seed ${r.seed}: ${r.violations.map((v) => v.invariant).join(", ") || "pass"} (${(end / 1000).toFixed(0)} s)`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${h}" font-family="sans-serif"><text x="4" y="14" font-size="13">${escape(title)}</text>${parts.join("")}</svg>\n`;
}

function escape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
