/**
 * contrib/join-broker.service: systemd accepts it without a warning (`systemd-analyze verify`),
 * rates its hardening OK (`systemd-analyze security --offline`), and its ExecStart is a command
 * line `join-broker serve` accepts.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseServe } from "../../src/node/cli/serve.ts";
import { ROOT } from "../support/broker.ts";
import { makePrivateCa } from "../support/private-ca.ts";

const ANALYZE = process.env.SYSTEMD_ANALYZE_BIN || "systemd-analyze";
const UNIT = readFileSync(join(ROOT, "contrib/join-broker.service"), "utf8");
let dir: string;
let unitFile: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "systemd-unit-"));
  // verify checks that ExecStart's program exists: point it at this checkout's.
  unitFile = join(dir, "join-broker.service");
  writeFileSync(unitFile, UNIT.replace("/opt/join-broker/bin/join-broker", join(ROOT, "bin/join-broker")));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("passes systemd-analyze verify without a warning", () => {
  const r = spawnSync(ANALYZE, ["verify", unitFile], { encoding: "utf8" });
  expect(r.error).toBeUndefined();
  expect(r.stderr.trim()).toBe("");
  expect(r.status).toBe(0);
});

it("is hardened: a dynamic user, its own state directory, a read-only system, exposure rated OK", () => {
  for (const line of [
    "DynamicUser=yes",
    "StateDirectory=join-broker",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "SystemCallFilter=@system-service",
  ]) {
    expect(UNIT).toMatch(new RegExp(`^${line}$`, "m"));
  }
  const r = spawnSync(ANALYZE, ["security", "--offline=true", "--no-pager", unitFile], { encoding: "utf8" });
  expect(r.status).toBe(0);
  const level = /Overall exposure level for join-broker\.service: ([\d.]+) (\w+)/.exec(r.stdout);
  expect(level, r.stdout + r.stderr).not.toBeNull();
  expect(Number(level![1])).toBeLessThanOrEqual(2.0);
});

it("starts serve with a command line serve accepts (TLS on all addresses, secrets from credentials)", () => {
  const execStart = /^ExecStart=(.+)$/m.exec(UNIT)![1];
  const ca = makePrivateCa(dir);
  writeFileSync(join(dir, "admin-token"), "unit-admin-token-0123456789\n");
  const creds = mkdtempSync(join(dir, "creds-"));
  writeFileSync(join(creds, "tls.crt"), readFileSync(ca.cert));
  writeFileSync(join(creds, "tls.key"), readFileSync(ca.key));
  writeFileSync(join(creds, "admin-token"), "unit-admin-token-0123456789\n");
  const env: Record<string, string> = { STATE_DIRECTORY: join(dir, "state"), CREDENTIALS_DIRECTORY: creds };
  const argv = execStart.split(/\s+/).map((a) => a.replace(/\$\{(\w+)\}/g, (_, name: string) => env[name]));
  expect(argv.slice(0, 2)).toEqual(["/opt/join-broker/bin/join-broker", "serve"]);
  expect(parseServe(argv.slice(2), {})).toMatchObject({
    host: "0.0.0.0",
    port: 8443,
    dataDir: env.STATE_DIRECTORY,
    adminToken: "unit-admin-token-0123456789",
    tls: { cert: join(creds, "tls.crt") },
  });
});
