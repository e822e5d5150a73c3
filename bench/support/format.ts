/**
 * Number and table formatting for BENCHMARKS.md, shared by the report's sections.
 * @module
 */

export const n = (v: number | undefined | null, digits = 1) =>
  v === undefined || v === null || Number.isNaN(v) ? "–" : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
export const yes = (ok: boolean) => (ok ? "yes" : "**no**");

export function table(head: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}
