/**
 * The command line as a whole, in process: typo suggestions and exit 2, every documented flag in
 * each command's --help and option table, and environment fallbacks.
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { packageRoot } from "../package-root.ts";
import { EXIT } from "../exit-codes.ts";
import type { Command } from "commander";
import { defineAdmin } from "./admin.ts";
import { cli } from "./cli-test-kit.ts";
import { CliCommand } from "./command.ts";
import { defineController } from "./controller.ts";
import { defineEtcdCert } from "./etcd-cert.ts";
import { defineJoin } from "./join.ts";
import { defineServe, parseRestore } from "./serve.ts";

afterEach(() => vi.restoreAllMocks());

describe("a mistyped command, subcommand or flag", () => {
  it("is answered with the closest known ones and exit 2", async () => {
    const cases: [string[], string][] = [
      [["jion"], "join-broker: unknown command 'jion'; did you mean 'join'?"],
      [["pasue"], "join-broker: unknown command 'pasue'; did you mean 'admin pause'?"],
      [["--verison"], "join-broker: unknown flag '--verison'; did you mean '--version'?"],
      [["-v", "--jsn"], "join-broker: unknown flag '--jsn'"],
      [["admin", "tiskets"], "join-broker admin: unknown subcommand 'tiskets'; did you mean 'tickets'?"],
      [["serve", "restore", "--form", "/backup"], "join-broker serve: unknown flag '--form'; did you mean '--from'?"],
      [["join", "--peer-ulr", "https://10.0.0.4:2380"], "join-broker join: unknown flag '--peer-ulr'; did you mean '--peer-url'?"],
      [["controller", "--clock-tolerence=5"], "join-broker controller: unknown flag '--clock-tolerence'; did you mean '--clock-tolerance'?"],
      [["admin", "status", "--brokr", "http://x"], "join-broker admin: unknown flag '--brokr'; did you mean '--broker'?"],
      [["serve", "--listne", "127.0.0.1:1"], "join-broker serve: unknown flag '--listne'; did you mean '--listen'?"],
      [["etcd-crt"], "join-broker: unknown command 'etcd-crt'; did you mean 'etcd-cert'?"],
      [["etcd-cert", "--usr", "root"], "join-broker etcd-cert: unknown flag '--usr'; did you mean '--user'?"],
    ];
    for (const [argv, first] of cases) {
      const r = await cli(...argv);
      expect({ argv, code: r.code, first: r.stderr.split("\n")[0] }).toEqual({ argv, code: EXIT.usage, first });
      expect(r.stdout).toBe("");
    }
  });

  it("keeps what follows `--` an argument, as typed", async () => {
    const r = await cli("join", "--", "--cluster");
    expect({ code: r.code, first: r.stderr.split("\n")[0] }).toEqual({
      code: EXIT.usage,
      first: `join-broker join: 'join' takes no arguments, not "--cluster"`,
    });
  });

  it("is bad usage (exit 2) for a missing value or a stray argument too", async () => {
    for (const argv of [
      ["join", "--cluster"],
      ["controller", "stray"],
      ["serve", "--listen", "127.0.0.1:1", "extra"],
    ]) {
      expect((await cli(...argv)).code, argv.join(" ")).toBe(EXIT.usage);
    }
  });
});

/** The flags a table in the docs names in its first column (a backslash-escaped '|' is part of a cell). */
function documentedFlags(doc: string, section: string): string[] {
  const text = readFileSync(join(packageRoot(), doc), "utf8");
  const start = text.indexOf(`\n${section}\n`);
  expect(start, `${doc}: ${section}`).toBeGreaterThan(-1);
  const body = text.slice(start + section.length + 2);
  const end = body.search(/\n#{1,3} /);
  const rows = (end === -1 ? body : body.slice(0, end)).split("\n").filter((l) => l.startsWith("| `"));
  return [...new Set(rows.flatMap((row) => row.split(/(?<!\\)\|/)[1].match(/--[a-z][a-z0-9-]*/g) ?? []))];
}

/** The command `define` makes under `join-broker`, and the one `words` name below it. */
function command(define: (cmd: CliCommand) => CliCommand, name: string, ...words: string[]): Command {
  let cmd: Command = define(new CliCommand("join-broker").command(name) as CliCommand);
  for (const word of words) cmd = cmd.commands.find((c) => c.name() === word)!;
  return cmd;
}

/** Every flag a command (and the subcommands below it) takes, visible in its help or not. */
function flagsOf(cmd: Command, { hidden = true } = {}): string[] {
  const own = cmd.options.filter((o) => hidden || !o.hidden).flatMap((o) => (o.long ? [o.long] : []));
  return [...new Set([...own, "--help", ...cmd.commands.flatMap((c) => (c.name() === "restore" ? [] : flagsOf(c, { hidden })))])];
}

const COMMANDS = [
  { argv: ["join"], cmd: command(defineJoin, "join"), docs: documentedFlags("docs/agent.md", "## Command line") },
  { argv: ["controller"], cmd: command(defineController, "controller"), docs: documentedFlags("docs/join-api.md", "## Running it") },
  { argv: ["serve"], cmd: command(defineServe, "serve"), docs: documentedFlags("docs/self-hosting.md", "## Flags") },
  { argv: ["serve", "restore"], cmd: command(defineServe, "serve", "restore"), docs: ["--data-dir", "--from"] },
  // docs/protocol.md's additions give its synopsis (no table of its own).
  { argv: ["etcd-cert"], cmd: command(defineEtcdCert, "etcd-cert"), docs: ["--pki-dir", "--out", "--user", "--days"] },
  {
    argv: ["admin"],
    cmd: command(defineAdmin, "admin"),
    docs: [...documentedFlags("docs/operations.md", "## The admin CLI"), "--cluster", "--broker", "--admin-token", "--admin-token-file", "--json"],
  },
];

describe("--help", () => {
  it("is read from the docs: each table names flags (so that a test of nothing cannot pass)", () => {
    expect(COMMANDS.find((c) => c.argv[0] === "join")!.docs).toEqual(expect.arrayContaining(["--broker", "--etcd-arg", "--pki-dir", "--service", "--verbose"]));
    expect(COMMANDS.find((c) => c.argv[0] === "controller")!.docs).toEqual(expect.arrayContaining(["--etcd", "--hold", "--cert-days", "--etcd-key"]));
    expect(COMMANDS.find((c) => c.argv[0] === "serve")!.docs).toEqual(expect.arrayContaining(["--listen", "--tls-key", "--client-ip-header"]));
    expect(COMMANDS.find((c) => c.argv[0] === "admin")!.docs).toEqual(expect.arrayContaining(["--ttl", "--member", "--follow", "--read-only", "--max-queue"]));
  });

  for (const { argv, cmd, docs } of COMMANDS) {
    it(`of ${argv.join(" ")} lists every documented flag, and the command takes each one`, async () => {
      const r = await cli(...argv, "--help");
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toMatch(new RegExp(`^Usage: join-broker ${argv.join(" ")}`));
      const taken = flagsOf(cmd);
      for (const flag of docs) {
        expect(r.stdout, `${flag} in ${argv.join(" ")} --help`).toMatch(new RegExp(`${flag}(?![a-z0-9-])`));
        expect(taken, `${argv.join(" ")} takes ${flag}`).toContain(flag);
      }
    });

    it(`of ${argv.join(" ")} explains every flag the command takes`, async () => {
      const { stdout } = await cli(...argv, "--help");
      // serve knows --admin-token only to refuse it with the reason: hidden.
      for (const flag of flagsOf(cmd, { hidden: false })) expect(stdout, `${flag} in ${argv.join(" ")} --help`).toMatch(new RegExp(`${flag}(?![a-z0-9-])`));
    });
  }
});

describe("etcd-cert", () => {
  it("refuses, with exit 2, what would make no certificate", async () => {
    const first = async (...argv: string[]) => {
      const r = await cli("etcd-cert", ...argv);
      return { code: r.code, first: r.stderr.split("\n")[0] };
    };
    expect(await first()).toEqual({ code: EXIT.usage, first: "join-broker etcd-cert: --pki-dir DIR and --out DIR are required" });
    expect(await first("--pki-dir", "/nowhere", "--out", "/tmp/x", "--user", "admin")).toEqual({
      code: EXIT.usage,
      first: 'join-broker etcd-cert: --user must be root or kube-apiserver, not "admin"',
    });
    for (const days of ["0", "1.5", "10000"]) {
      expect(await first("--pki-dir", "/nowhere", "--out", "/tmp/x", "--days", days)).toEqual({
        code: EXIT.usage,
        first: `join-broker etcd-cert: --days must be a whole number of days from 1 to 9999, not "${days}"`,
      });
    }
    const noCa = await first("--pki-dir", "/nowhere", "--out", "/tmp/x");
    expect(noCa.code).toBe(EXIT.usage);
    expect(noCa.first).toMatch(/^join-broker etcd-cert: --pki-dir: /);
  });
});

describe("environment fallbacks", () => {
  /** A loopback HTTP server that records each request and answers 404 unknown_cluster. */
  async function recorder() {
    const seen: { url: string; authorization?: string; body: string }[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        seen.push({ url: req.url ?? "", authorization: req.headers.authorization, body });
        res
          .writeHead(404, { "content-type": "application/problem+json" })
          .end(JSON.stringify({ type: "about:blank", title: "Not Found", status: 404, code: "unknown_cluster", detail: "no such cluster" }));
      });
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return { url, seen, close: () => new Promise((ok) => server.close(ok)) };
  }
  afterEach(() => vi.unstubAllEnvs());

  it("admin: the broker, the admin token and the cluster from JOIN_BROKER_*, a flag winning over each", async () => {
    const broker = await recorder();
    try {
      vi.stubEnv("JOIN_BROKER_URL", broker.url);
      vi.stubEnv("JOIN_BROKER_ADMIN_TOKEN", "from-the-environment");
      vi.stubEnv("JOIN_BROKER_CLUSTER", "env-cluster");
      await cli("admin", "status");
      expect(broker.seen.at(-1)).toMatchObject({ url: "/v1/admin/clusters/env-cluster", authorization: "Bearer from-the-environment" });
      await cli("admin", "status", "--cluster", "flag-cluster", "--admin-token", "from-the-flag");
      expect(broker.seen.at(-1)).toMatchObject({ url: "/v1/admin/clusters/flag-cluster", authorization: "Bearer from-the-flag" });
      // Only the flag scopes a credential to a cluster: JOIN_BROKER_CLUSTER does not.
      await cli("admin", "credentials", "create", "--read-only");
      expect(JSON.parse(broker.seen.at(-1)!.body)).toEqual({ readOnly: true });
    } finally {
      await broker.close();
    }
  });

  it("serve restore: the data directory from STATE_DIRECTORY (the first of several), the flag winning", () => {
    expect(parseRestore([], { STATE_DIRECTORY: "/var/lib/a:/var/lib/b" })).toEqual({ dataDir: "/var/lib/a", from: null });
    expect(parseRestore(["--data-dir", "/d"], { STATE_DIRECTORY: "/var/lib/a" })).toEqual({ dataDir: "/d", from: null });
  });
});
