/**
 * Seeded randomness for the end-to-end scenarios: every random choice (which agent dies, at
 * which step, how a fault looks) comes from one printed seed, so a failing run can be replayed
 * with `E2E_SEED=<seed>`.
 */

/** mulberry32: small, fast and good enough to pick test faults. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed from `E2E_SEED`, or a fresh one; printed either way. */
export function e2eSeed(label: string): number {
  const fromEnv = process.env.E2E_SEED;
  const seed = fromEnv && /^\d+$/.test(fromEnv) ? Number(fromEnv) >>> 0 : Math.floor(Math.random() * 2 ** 32);
  console.log(`[${label}] seed ${seed} (replay with E2E_SEED=${seed})`);
  return seed;
}

export function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

export function between(random: () => number, min: number, max: number): number {
  return Math.round(min + (max - min) * random());
}
