/**
 * scripts/claims.mjs: a name another live process claimed is not this process's to take, one a
 * dead process left is taken over, and two processes racing for the same names never both get
 * one. What keeps test files running at once from picking the same port or lab subnet.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { CLAIMS_DIR, claim, release, withMachineLock } from "../../scripts/claims.mjs";

const MODULE = join(import.meta.dirname, "../../scripts/claims.mjs");
const KIND = `claims-test-${process.pid}`;
const spawned: ChildProcess[] = [];
afterAll(() => {
  for (const c of spawned) c.kill("SIGKILL");
  rmSync(join(CLAIMS_DIR, KIND), { recursive: true, force: true });
});

/** A node process running `body` with `claim` and `release` in scope; resolves with what it printed. */
function child(body: string): { lines: string[]; exited: Promise<number | null>; kill(): void; line(n: number): Promise<string> } {
  const script = `import { claim, release } from ${JSON.stringify(MODULE)};\n${body}`;
  const proc = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  spawned.push(proc);
  const lines: string[] = [];
  let waiters: (() => void)[] = [];
  let pending = "";
  proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
    pending += d;
    const parts = pending.split("\n");
    pending = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters) w();
    waiters = [];
  });
  return {
    lines,
    exited: new Promise((r) => proc.once("close", (code) => r(code))),
    kill: () => proc.kill("SIGKILL"),
    line: async (n) => {
      while (lines.length <= n) await new Promise<void>((r) => waiters.push(r));
      return lines[n]!;
    },
  };
}

it("keeps a name another live process holds, and takes it over once that process is gone", async () => {
  const holder = child(`console.log(claim(${JSON.stringify(KIND)}, "a")); setInterval(() => {}, 1000);`);
  expect(await holder.line(0)).toBe("true");
  expect(claim(KIND, "a")).toBe(false);
  expect(readFileSync(join(CLAIMS_DIR, KIND, "a"), "utf8")).not.toBe(String(process.pid));
  holder.kill();
  await holder.exited;
  expect(claim(KIND, "a")).toBe(true);
  expect(claim(KIND, "a"), "a claim this process holds is still its own").toBe(true);
  expect(readFileSync(join(CLAIMS_DIR, KIND, "a"), "utf8")).toBe(String(process.pid));
  release(KIND, "a");
  expect(() => readFileSync(join(CLAIMS_DIR, KIND, "a"))).toThrow();
});

it("releases what a process claimed when it exits", async () => {
  const done = child(`console.log(claim(${JSON.stringify(KIND)}, "b"));`);
  expect(await done.line(0)).toBe("true");
  expect(await done.exited).toBe(0);
  expect(() => readFileSync(join(CLAIMS_DIR, KIND, "b"))).toThrow();
});

it("takes over a claim whose holder is gone, even when its pid is this process's own (reused)", () => {
  mkdirSync(join(CLAIMS_DIR, KIND), { recursive: true });
  writeFileSync(join(CLAIMS_DIR, KIND, "c"), "4194305"); // above pid_max's default: no such process
  writeFileSync(join(CLAIMS_DIR, KIND, "d"), String(process.pid));
  expect(claim(KIND, "c")).toBe(true);
  expect(claim(KIND, "d")).toBe(true);
  release(KIND, "c");
  release(KIND, "d");
});

it("gives each name to one of several processes claiming the same names at once", async () => {
  const names = Array.from({ length: 40 }, (_, i) => `n${i}`);
  // Every name starts as a dead process's claim, so that each is also taken over at once.
  mkdirSync(join(CLAIMS_DIR, KIND), { recursive: true });
  for (const n of names.filter((_, i) => i % 2 === 0)) writeFileSync(join(CLAIMS_DIR, KIND, n), "4194305");
  const body = `const got = ${JSON.stringify(names)}.filter((n) => claim(${JSON.stringify(KIND)}, n)); console.log(JSON.stringify(got)); setInterval(() => {}, 1000);`;
  const racers = Array.from({ length: 4 }, () => child(body));
  const got = (await Promise.all(racers.map((r) => r.line(0)))).map((l) => JSON.parse(l) as string[]);
  for (const r of racers) r.kill();
  await Promise.all(racers.map((r) => r.exited));
  expect(got.flat().sort()).toEqual([...names].sort());
});

it("runs one critical section at a time under a machine-wide lock", async () => {
  const lockName = `${KIND}-lock`;
  const left = join(CLAIMS_DIR, KIND, "left-the-section");
  mkdirSync(join(CLAIMS_DIR, KIND), { recursive: true });
  const holder = child(
    `import { writeFileSync } from "node:fs"; import { withMachineLock } from ${JSON.stringify(MODULE)};\n` +
      `withMachineLock(${JSON.stringify(lockName)}, () => { console.log("in"); const t = Date.now(); while (Date.now() - t < 1500); writeFileSync(${JSON.stringify(left)}, ""); });`,
  );
  expect(await holder.line(0)).toBe("in");
  // Only once the holder has left its section (it writes the file last, inside it).
  const inside = withMachineLock(lockName, () => readFileSync(left, "utf8"));
  expect(inside).toBe("");
  expect(await holder.exited).toBe(0);
});
