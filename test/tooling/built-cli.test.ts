/**
 * The built CLI (scripts/build-cli.mjs) and how bin/join-broker chooses between it and the
 * TypeScript sources (bin/built-cli.mjs): a build runs the same commands as the sources, and a
 * build whose sources changed, went missing or that is incomplete is never run. What the npm
 * package holds: the sources the command runs from, and none of the tests.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BUILD_DIR, fileHash, freshBuild } from "../../bin/built-cli.mjs";
import { buildCli, ROOT } from "../../scripts/build-cli.mjs";

const BIN = join(ROOT, "bin/join-broker");
const TEST_BUILD = `dist/cli-test-${process.pid}`;

afterAll(() => rmSync(join(ROOT, TEST_BUILD), { recursive: true, force: true }));

/** Runs a command of the CLI from a build directory (what bin/join-broker does with a fresh build). */
function runBuilt(dir: string, argv: string[]): { status: number | null; stdout: string } {
  const script = `const { main } = await import(${JSON.stringify(join(ROOT, dir, "main.js"))}); process.exitCode = await main(${JSON.stringify(argv)});`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
  return { status: r.status, stdout: r.stdout };
}

describe("the built CLI", () => {
  it("is built from the project's sources and answers as the sources do", async () => {
    const manifest = await buildCli({ dir: TEST_BUILD });
    expect(Object.keys(manifest.sources)).toContain("src/node/cli/main.ts");
    expect(Object.keys(manifest.sources).every((f) => f.startsWith("src/"))).toBe(true);
    expect(freshBuild(ROOT, TEST_BUILD).entry).toBe(join(ROOT, TEST_BUILD, "main.js"));
    const source = (argv: string[]) =>
      execFileSync(process.execPath, [BIN, ...argv], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1", JOIN_BROKER_LAUNCH: "source" } });
    for (const argv of [["--version"], ["join", "--help"], ["controller", "--help"], ["admin", "--help"], ["serve", "--help"]]) {
      const built = runBuilt(TEST_BUILD, argv);
      expect(built.status, argv.join(" ")).toBe(0);
      expect(built.stdout, argv.join(" ")).toBe(source(argv));
    }
  }, 60_000);
});

describe("choosing the build or the sources", () => {
  const root = mkdtempSync(join(tmpdir(), "built-cli-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(join(root, file, ".."), { recursive: true });
    writeFileSync(join(root, file), text);
  };
  const manifest = (sources: Record<string, string>) => write(`${BUILD_DIR}/manifest.json`, JSON.stringify({ entry: "main.js", sources }));

  it("runs a build whose listed sources are all unchanged", () => {
    write("src/a.ts", "export const a = 1;\n");
    write(`${BUILD_DIR}/main.js`, "export async function main() { return 0; }\n");
    manifest({ "src/a.ts": fileHash(join(root, "src/a.ts")) });
    expect(freshBuild(root)).toEqual({ entry: join(root, BUILD_DIR, "main.js"), why: "built from 1 unchanged sources" });
  });

  it("never runs a build whose source changed, went missing, or that is incomplete", () => {
    write("src/a.ts", "export const a = 1;\n");
    write(`${BUILD_DIR}/main.js`, "export async function main() { return 0; }\n");
    manifest({ "src/a.ts": fileHash(join(root, "src/a.ts")) });
    write("src/a.ts", "export const a = 2;\n");
    expect(freshBuild(root)).toEqual({ entry: null, why: "src/a.ts changed since the build" });
    manifest({ "src/a.ts": fileHash(join(root, "src/a.ts")), "src/b.ts": "0" });
    expect(freshBuild(root)).toEqual({ entry: null, why: "src/b.ts is gone since the build" });
    write(`${BUILD_DIR}/manifest.json`, "{not json");
    expect(freshBuild(root).entry).toBeNull();
    rmSync(join(root, BUILD_DIR, "manifest.json"));
    expect(freshBuild(root)).toEqual({ entry: null, why: `no build in ${BUILD_DIR}` });
  });

  it("bin/join-broker runs what freshBuild chooses, and the sources when told to", () => {
    const explain = (launch: string) =>
      spawnSync(process.execPath, [BIN, "--version"], { encoding: "utf8", env: { ...process.env, JOIN_BROKER_LAUNCH: launch } }).stderr.trim();
    const fresh = freshBuild(ROOT);
    expect(explain("explain")).toBe(`join-broker: running ${fresh.entry ? "the built CLI" : "the TypeScript sources"} (${fresh.why})`);
    expect(explain("source,explain")).toBe("join-broker: running the TypeScript sources (JOIN_BROKER_LAUNCH=source)");
  });
});

describe("the npm package", () => {
  it("lists the sources the command runs from and no test, test kit, test support or benchmark (npm pack --dry-run)", () => {
    // --ignore-scripts: the list is package.json's `files` and .npmignore, not what `prepare` builds.
    const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    const files = (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining(["bin/join-broker", "src/node/cli/main.ts", "src/broker/index.ts", "src/shared/protocol/wire.ts", "README.md"]),
    );
    expect(files.filter((f) => /\.test\.ts$|-test-kit\.ts$|^test\/|^bench\/|worker-configuration\.d\.ts$/.test(f))).toEqual([]);
  });
});
