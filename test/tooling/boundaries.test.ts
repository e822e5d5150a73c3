/**
 * The dependency rules of .dependency-cruiser.cjs catch what they are for: a fixture tree that
 * breaks each rule once fails with each rule named, and the real src/ passes.
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const config = join(root, ".dependency-cruiser.cjs");
const depcruise = join(root, "node_modules/dependency-cruiser/bin/dependency-cruiser.mjs");

function cruise(cwd: string) {
  const r = spawnSync(process.execPath, [depcruise, "src", "--config", config, "--output-type", "err"], { cwd, encoding: "utf8" });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe("the dependency rules", () => {
  it("fail on each wrong import of the fixture tree, naming the rule and the import", () => {
    const { status, output } = cruise(join(root, "test/fixtures/boundaries"));
    expect(status).not.toBe(0);
    const violations = output
      .split("\n")
      .map((l) => /error ([\w-]+): (\S+) → ?(\S*)/.exec(l.trim()))
      .filter((m) => m !== null)
      .map((m) => `${m[1]} ${m[2]}${m[3] ? ` ${m[3]}` : ""}`)
      .sort();
    expect(violations).toEqual([
      "broker-no-node-builtins src/broker/uses-fs.ts fs",
      "broker-not-node src/broker/uses-node.ts src/node/agent.ts",
      "console-script-browser-only src/broker/console/app/main.ts src/broker/views.ts",
      "no-cycles src/shared/ids.ts",
      "no-folder-cycles src/broker",
      "no-folder-cycles src/node",
      "no-folder-cycles src/node/etcd",
      "no-folder-cycles src/node/pki",
      "node-not-broker src/node/agent.ts src/broker/views.ts",
      "only-cli-knows-flags src/node/serve/options.ts src/node/cli/flags.ts",
      "shared-imports-neither src/shared/wire.ts src/node/agent.ts",
      "shared-no-node-builtins src/shared/uses-path.ts path",
      "worker-not-console-script src/broker/console/routes.ts src/broker/console/app/main.ts",
    ]);
  }, 60_000);

  it("pass on the real tree", () => {
    const { status, output } = cruise(root);
    expect(output).toContain("no dependency violations found");
    expect(status).toBe(0);
  }, 60_000);
});
