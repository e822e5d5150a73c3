/**
 * "Did you mean …?" for mistyped commands, subcommands and flags: the known names closest to what
 * was typed (optimal string alignment distance, so a swapped pair of letters counts as one edit).
 * @module
 */

/** Edits (insert, delete, substitute, swap adjacent) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The known names within a typo's reach of `typed` (closest first), or none. */
export function closest(typed: string, known: readonly string[]): string[] {
  const reach = Math.max(1, Math.floor(typed.length / 3));
  const scored = known.map((k) => ({ k, d: editDistance(typed.toLowerCase(), k.toLowerCase()) })).filter((x) => x.d <= reach);
  const best = Math.min(...scored.map((x) => x.d));
  return scored.filter((x) => x.d === best).map((x) => x.k);
}

/** " Did you mean 'x'?" (or 'x' or 'y'), or "" when nothing is close. */
export function didYouMean(typed: string, known: readonly string[], quote = (s: string) => `'${s}'`): string {
  const near = closest(typed, known);
  return near.length ? `; did you mean ${near.map(quote).join(" or ")}?` : "";
}
