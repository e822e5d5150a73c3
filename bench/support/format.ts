/**
 * Number and table formatting for BENCHMARKS.md, shared by the report's sections.
 * @module
 */
import { median } from "./stats.ts";

export const n = (v: number | undefined | null, digits = 1) =>
  v === undefined || v === null || Number.isNaN(v) ? "–" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
export const yes = (ok: boolean) => (ok ? "yes" : "**no**");

/** A summary row's median, its ratio to the baseline, the target (≤) and whether it was met; "–" where there is no target. */
export function ratioCells(median: number | null | undefined, ratio: number | null | undefined, target: number | null): string[] {
  return [
    n(median, 2),
    n(ratio, 2),
    target === null ? "–" : `≤ ${target}`,
    target === null || ratio === null || ratio === undefined ? "–" : yes(ratio <= target),
  ];
}

export function table(head: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}

/** What the report knows of a lab section (kubeadm, k0s): its figures, an error, a skip, and which merged run measured it. */
interface LabSectionRun {
  errors: Record<string, string | undefined>;
  skipped?: Record<string, string | undefined>;
  merged?: {
    sections: string[];
    date: string;
    mode: string;
    durationSeconds: number;
    machine: Record<string, string | number>;
    loadAverage: { start: number[]; end: number[] };
  }[];
}

/**
 * A lab section's opening: `{ text }` when there is nothing to show (the benchmark failed, was
 * skipped, or never ran: `notYet` says how to run it), else `{ by }`, the line naming the separate
 * run that measured it (empty when the run of the report did).
 */
export function labSectionHead(
  r: LabSectionRun,
  section: "kubeadm" | "k0s",
  title: string,
  measured: boolean,
  notYet: string,
): { text: string } | { by: string } {
  const error = r.errors[section];
  if (error) return { text: `${title}\n\n**Not measured** — the benchmark failed: \`${error.split("\n")[0]}\`\n` };
  if (!measured) return { text: `${title}\n\n${r.skipped?.[section] ? `Skipped: ${r.skipped[section]}.` : notYet}\n` };
  const run = [...(r.merged ?? [])].reverse().find((m) => m.sections.includes(section));
  return {
    by: run ? separateRunLine(run) : "",
  };
}

/** The line naming the separate run (merged into the report's) that measured a section. */
export function separateRunLine(run: {
  date: string;
  mode: string;
  sections: readonly string[];
  durationSeconds: number;
  machine: { commit?: string };
  loadAverage: { start: number[]; end: number[] };
}): string {
  return `Measured on ${run.date.slice(0, 16).replace("T", " ")} UTC by a separate run (\`npm run bench -- --only ${run.sections.join(",")} --merge${run.mode === "quick" ? " --quick" : ""}\`, ${run.durationSeconds} s, commit ${run.machine.commit}; load average ${run.loadAverage.start.join(" / ")} at its start, ${run.loadAverage.end.join(" / ")} at its end), not by the run above.\n\n`;
}

/** A round's two node cells: the bootstrap node's `node start → end`, and the joiners' in the order they started. */
export function nodeSpans<T extends { node: string; role: string; startS: number }>(
  nodes: T[],
  end: (y: T) => number | undefined,
  note: (y: T) => string = () => "",
): [string, string] {
  const s = (v: number | undefined) => n(v, 1);
  const span = (y: T) => `${y.node} ${note(y)}${s(y.startS)} → ${s(end(y))}`;
  return [
    nodes
      .filter((y) => y.role === "bootstrap")
      .map(span)
      .join(""),
    nodes
      .filter((y) => y.role !== "bootstrap")
      .sort((a, b) => a.startS - b.startS)
      .map(span)
      .join("; "),
  ];
}

/** An arm's passed rounds, read for where their time went: a median over them, each round's bootstrap node, its joiners in the order they started. */
export function passedRounds<R extends { ok: boolean; nodes: { role: string; startS: number }[] }>(runs: R[]) {
  type Node = R["nodes"][number];
  const ok = runs.filter((x) => x.ok);
  return {
    med: (f: (x: R) => number) => median(ok.map(f).filter((v) => !Number.isNaN(v))),
    boot: (x: R) => x.nodes.find((y) => y.role === "bootstrap") as Node | undefined,
    joiners: (x: R) => x.nodes.filter((y) => y.role === "join").sort((a, b) => a.startS - b.startS) as Node[],
  };
}
