/**
 * contrib/join-broker-agent.service (own mode) and contrib/join-broker-gate.service (gate mode):
 * systemd accepts each without a warning (`systemd-analyze verify`, with ExecStart's program the
 * single executable file `npm run package` made), and each ExecStart, with the settings of
 * contrib/join-broker-agent.env, is a command line `join-broker join` accepts in that mode.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseJoin } from "../../src/node/cli/join.ts";
import { ROOT } from "../support/broker.ts";
import { releaseFile } from "../support/single-executable.ts";

const ANALYZE = process.env.SYSTEMD_ANALYZE_BIN || "systemd-analyze";
const INSTALLED = "/usr/local/bin/join-broker";
const unit = (name: string) => readFileSync(join(ROOT, "contrib", name), "utf8");
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "agent-units-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** systemd's EnvironmentFile: KEY=value lines, # comments. */
function envFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/** ExecStart's words, with ${VAR} replaced (systemd splits on blanks; these lines quote nothing). */
function execStart(text: string, env: Record<string, string>): string[] {
  const line = /^ExecStart=(.+)$/m.exec(text)![1]!;
  expect(line).not.toMatch(/["']/);
  return line.split(/\s+/).map((w) =>
    w.replace(/\$\{(\w+)\}/g, (_, name: string) => {
      if (!(name in env)) throw new Error(`ExecStart uses \${${name}}, which nothing sets`);
      return env[name]!;
    }),
  );
}

for (const [name, mode] of [
  ["join-broker-agent.service", "own"],
  ["join-broker-gate.service", "gate"],
] as const) {
  it(`${name} passes systemd-analyze verify without a warning`, () => {
    const file = join(dir, name);
    // verify checks that ExecStart's program exists: point it at the packaged file.
    writeFileSync(file, unit(name).replaceAll(INSTALLED, releaseFile("x64")));
    const r = spawnSync(ANALYZE, ["verify", file], { encoding: "utf8" });
    expect(r.error).toBeUndefined();
    expect(r.stderr.trim()).toBe("");
    expect(r.status).toBe(0);
  });

  it(`${name} runs the installed file with a command line join accepts in ${mode} mode`, () => {
    const text = unit(name);
    expect(text).toMatch(/^EnvironmentFile=\/etc\/join-broker\/agent\.env$/m);
    expect(text).toMatch(/^LoadCredential=enrollment-token:\/etc\/join-broker\/enrollment-token$/m);
    const creds = mkdtempSync(join(dir, "creds-"));
    writeFileSync(join(creds, "enrollment-token"), "enroll-0123456789abcdef\n");
    const env: Record<string, string> = { ...envFile(unit("join-broker-agent.env")), STATE_DIRECTORY: join(dir, "state"), CREDENTIALS_DIRECTORY: creds };
    const argv = execStart(text, env);
    expect(argv.slice(0, 2)).toEqual([INSTALLED, "join"]);
    const options = parseJoin(argv.slice(2), {});
    expect(options).not.toBeNull();
    expect(options).toMatchObject({ cluster: env.CLUSTER, node: env.NODE, peerURL: env.PEER_URL, stateDir: env.STATE_DIRECTORY });
    if (mode === "own")
      expect(options).toMatchObject({ etcdBin: "/usr/local/bin/etcd", exec: null, pkiDir: join(env.STATE_DIRECTORY!, "pki"), clientURL: env.CLIENT_URL });
    else expect(options).toMatchObject({ etcdBin: null, exec: "/etc/join-broker/install", etcdEndpoints: env.ETCD_ENDPOINTS!.split(",") });
  });
}
