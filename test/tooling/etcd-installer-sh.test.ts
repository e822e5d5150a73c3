/**
 * test/support/etcd-installer.sh reads the member ID out of `etcdctl member add`'s own words.
 * etcdctl prints it with `%16x` (printer_simple.go): an ID under 16 hex digits, one in sixteen of
 * etcd's random IDs, comes padded with spaces. The real etcdctl runs in single-executable.test.ts,
 * where the ID is random; here an etcdctl that prints a short ID stands in, so every run covers it.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect, it } from "vitest";

const installer = resolve(import.meta.dirname, "../support/etcd-installer.sh");
const dir = mkdtempSync(join(tmpdir(), "join-broker-installer-sh-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function executable(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

it.each([
  ["a 16-digit ID", "ced000fda4d05edf"],
  ["a 15-digit ID, padded to 16 with a space", " ed000fda4d05edf"],
])("join promotes the member the add named: %s", (_, printed) => {
  const calls = join(dir, `calls-${printed.trim()}`);
  // etcdctl as it prints an add and takes a promote; etcd that stays up until killed.
  const etcdctl = executable(
    `etcdctl-${printed.trim()}`,
    `echo "$*" >> ${calls}
case "$*" in
  *"member add"*) printf 'Member %s added to cluster 8c4281cc65c7b112\\n\\nETCD_NAME="n1"\\nETCD_INITIAL_CLUSTER="n0=http://127.0.0.1:1,n1=http://127.0.0.1:2"\\n' "${printed}" ;;
esac`,
  );
  const etcd = executable("etcd", "while :; do sleep 1; done");
  const run = spawnSync(
    "sh",
    [installer, "join", "n1", join(dir, `data-${printed.trim()}`), "http://127.0.0.1:2", "http://127.0.0.1:3", "http://127.0.0.1:4", etcd, etcdctl],
    { encoding: "utf8", timeout: 20_000 },
  );
  spawnSync("pkill", ["-f", `data-${printed.trim()}`]);
  expect(run.status, run.stderr).toBe(0);
  const promote = readFileSync(calls, "utf8")
    .split("\n")
    .find((l) => l.includes("member promote"));
  expect(promote?.split(" ").at(-1)).toBe(printed.trim());
});
