/**
 * The npm form: `npm pack` of this checkout (its `prepare` builds dist/cli, as publishing does),
 * installed with `npm install <tarball>` into an empty directory outside the project (from npm's
 * cache where it can), runs its `join-broker --version` and `--help` from the built CLI; the package
 * carries the sources the command falls back to, and none of the tests.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ROOT } from "../support/broker.ts";
import { VERSION } from "../support/single-executable.ts";
import { CONTRACT_VERSION } from "../../src/shared/protocol/wire.ts";

let dir: string;
let app: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "join-broker-npm-"));
  execFileSync("npm", ["pack", "--pack-destination", dir, "--silent"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"], timeout: 120_000 });
  const tarballs = readdirSync(dir).filter((f) => f.endsWith(".tgz"));
  expect(tarballs).toEqual([`etcd-join-broker-${VERSION}.tgz`]);
  app = join(dir, "app");
  mkdirSync(app);
  execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", join(dir, tarballs[0]!)], {
    cwd: app,
    stdio: ["ignore", "ignore", "inherit"],
    timeout: 300_000,
  });
}, 420_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: string[]) =>
  execFileSync(join(app, "node_modules/.bin/join-broker"), args, {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, JOIN_BROKER_LAUNCH: "explain" },
    stdio: ["ignore", "pipe", "pipe"],
  });

it("installs a join-broker command into an empty directory", () => {
  expect(existsSync(join(app, "node_modules/etcd-join-broker/package.json"))).toBe(true);
  expect(existsSync(join(app, "node_modules/etcd-join-broker/dist/cli/main.js"))).toBe(true);
  // Packaging output stays out of the package.
  expect(existsSync(join(app, "node_modules/etcd-join-broker/dist/release"))).toBe(false);
});

it("ships the sources the command runs from, and none of the tests", () => {
  const pkg = join(app, "node_modules/etcd-join-broker");
  const files = readdirSync(pkg, { recursive: true, encoding: "utf8" }).filter((f) => !f.startsWith("node_modules"));
  // bin/join-broker falls back to these when the build is stale; serve bundles src/broker.
  expect(files).toEqual(expect.arrayContaining(["src/node/cli/main.ts", "src/broker/index.ts", "src/shared/protocol/wire.ts"]));
  expect(files.filter((f) => /\.test\.ts$|-test-kit\.ts$|worker-configuration\.d\.ts$/.test(f))).toEqual([]);
});

it("prints its version and usage, from the built CLI", () => {
  expect(run(["--version"])).toBe(`join-broker ${VERSION} (protocol v${CONTRACT_VERSION})\n`);
  const help = run(["--help"]);
  for (const command of ["join", "controller", "admin", "serve"]) expect(help).toMatch(new RegExp(`^  ${command} `, "m"));
  const explained = execFileSync("sh", ["-c", `'${join(app, "node_modules/.bin/join-broker")}' --version 2>&1 >/dev/null`], {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, JOIN_BROKER_LAUNCH: "explain" },
  });
  expect(explained).toMatch(/running the built CLI/);
});
