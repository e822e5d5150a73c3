/**
 * The `join-broker` command's own conventions, as a user meets them: the version, and what it
 * says about a mistyped command. Runs the real bin; no broker is needed.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/broker.ts";
import { CONTRACT_VERSION } from "../../src/shared/protocol/wire.ts";

const BIN = join(ROOT, "bin/join-broker");
const run = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, JOIN_BROKER_URL: "", JOIN_BROKER_ADMIN_TOKEN: "" },
  });

describe("join-broker", () => {
  it("prints its version for --version, -v and version, and exits 0", () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    for (const flag of ["--version", "-v", "version"]) {
      const r = run(flag);
      expect({ flag, status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({
        flag,
        status: 0,
        stdout: `join-broker ${version} (protocol v${CONTRACT_VERSION})\n`,
        stderr: "",
      });
    }
  });

  it("suggests the closest command, subcommand or flag for a typo, and exits 2", () => {
    const cases: [string[], string][] = [
      [["admin", "stauts"], "unknown subcommand 'stauts'; did you mean 'status'?"],
      [["admin", "tokens", "list"], "unknown subcommand 'tokens list'; did you mean 'token list'?"],
      [["admin", "token", "crate"], "unknown subcommand 'token crate'; did you mean 'token create'?"],
      [["admin", "token"], "unknown subcommand 'token'; did you mean 'token create' or 'token list' or 'token revoke'?"],
      [["admin", "status", "--clster", "x"], "unknown flag '--clster'; did you mean '--cluster'?"],
      [["admn"], "unknown command 'admn'; did you mean 'admin'?"],
      [["stauts"], "unknown command 'stauts'; did you mean 'admin status'?"],
      [["join", "--clustr", "x"], "unknown flag '--clustr'; did you mean '--cluster'?"],
      [["controller", "--brokr", "x"], "unknown flag '--brokr'; did you mean '--broker'?"],
      [["serve", "--data-dri=x"], "unknown flag '--data-dri'; did you mean '--data-dir'?"],
      [["help", "jion"], "unknown command 'jion'; did you mean 'join'?"],
    ];
    for (const [args, message] of cases) {
      const r = run(...args);
      expect({ args, status: r.status, first: r.stderr.split("\n")[0] }).toEqual({ args, status: 2, first: expect.stringContaining(message) });
    }
  });

  it("help COMMAND prints that command's help, as COMMAND --help does", () => {
    for (const args of [["join"], ["controller"], ["serve"], ["admin"], ["admin", "status"]]) {
      const viaHelp = run("help", ...args);
      const viaFlag = run(...args, "--help");
      expect({ args, status: viaHelp.status, stdout: viaHelp.stdout }).toEqual({ args, status: 0, stdout: viaFlag.stdout });
      expect(viaHelp.stdout).toMatch(new RegExp(`^Usage: join-broker ${args.join(" ")}`));
    }
  });

  it("names the flag the user typed, with its value, when a value is out of range (nothing is sent)", () => {
    const on = ["--cluster", "c", "--broker", "http://127.0.0.1:1", "--admin-token", "t"];
    const cases: [string[], string][] = [
      [["token", "create", "--ttl", "30s"], "--ttl 30s: must be at least 60 s"],
      [["token", "create", "--max-uses", "0"], "--max-uses 0: must be at least 1"],
      [
        ["policy", "set", "--max-in-flight", "0", "--lease-seconds", "100000"],
        "--max-in-flight 0: must be at least 1; --lease-seconds 100000: must be at most 3600 s",
      ],
      [["tickets", "--limit", "0"], "--limit 0: must be at least 1"],
    ];
    for (const [args, message] of cases) {
      const r = run("admin", ...args, ...on);
      expect({ args, status: r.status, first: r.stderr.split("\n")[0] }).toEqual({ args, status: 2, first: `join-broker admin: ${message}` });
      expect(r.stderr).not.toMatch(/ttlSeconds|maxUses|maxInFlight|leaseSeconds/);
    }
  });

  it("controller --log-format json writes one JSON object per log line", async () => {
    const child = spawn(
      process.execPath,
      [
        BIN,
        "controller",
        "--etcd",
        "http://127.0.0.1:2",
        "--broker",
        "http://127.0.0.1:3",
        "--cluster",
        "c1",
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    await expect.poll(() => out, { timeout: 30_000 }).toMatch(/join API listening on http:\/\/127\.0\.0\.1:\d+/);
    await expect.poll(() => err, { timeout: 10_000 }).toContain("\n");
    const closed = new Promise((r) => child.on("close", r));
    child.kill("SIGTERM");
    expect(await closed).toBe(0);
    const lines = err
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const l of lines) expect(l).toEqual({ time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), cluster: "c1", msg: expect.any(String) });
    expect(lines.at(-1).msg).toBe("SIGTERM: shutting down");
    const bad = run("controller", "--etcd", "http://127.0.0.1:2", "--broker", "http://127.0.0.1:3", "--cluster", "c1", "--log-format", "xml");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--log-format must be text or json");
  });
});
