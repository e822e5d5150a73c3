/**
 * The single executable files (`npm run package`, scripts/package.mjs) as a node uses them: the
 * x64 file installed alone into a directory outside the project, checked against SHA256SUMS, and
 * run in a mount namespace where no `node` and no project tree (so no node_modules) is visible.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { projectVersion, RELEASE_DIR, releaseFileName } from "../../scripts/package.mjs";
import { ROOT } from "./broker.ts";
import type { AgentCommand } from "./cluster.ts";

export const VERSION = projectVersion(ROOT);

/** dist/release's file for `arch`; throws with advice when `npm run package` has not made it. */
export function releaseFile(arch: "x64" | "arm64"): string {
  const file = join(ROOT, RELEASE_DIR, releaseFileName(VERSION, arch));
  if (!existsSync(file)) throw new Error(`${file} is missing: run 'npm run package' first (npm test does)`);
  return file;
}

/**
 * Installs the x64 file as an operator would: `sha256sum -c` against SHA256SUMS, then a copy at
 * `dir/bin/join-broker`, mode 0755. Returns its path.
 */
export function installX64(dir: string): string {
  const name = releaseFileName(VERSION, "x64");
  releaseFile("x64");
  const sums = readFileSync(join(ROOT, RELEASE_DIR, "SHA256SUMS"), "utf8")
    .split("\n")
    .filter((l) => l.endsWith(`  ${name}`));
  if (sums.length !== 1) throw new Error(`SHA256SUMS has no line for ${name}`);
  execFileSync("sha256sum", ["--check", "--strict", "-"], { cwd: join(ROOT, RELEASE_DIR), input: `${sums[0]}\n`, stdio: ["pipe", "ignore", "inherit"] });
  const bin = join(dir, "bin", "join-broker");
  mkdirSync(join(dir, "bin"), { recursive: true });
  copyFileSync(join(ROOT, RELEASE_DIR, name), bin);
  chmodSync(bin, 0o755);
  return bin;
}

/** Exit code of the wrapper when `node` is still visible inside it, and when the project tree is. */
export const NODE_VISIBLE = 97;
export const PROJECT_VISIBLE = 98;

// Inside a private mount namespace: /dev/null over every `node` on PATH and in the usual places
// (a character device is no command), an empty tmpfs over the project tree; then check both, and
// run the command. unshare execs, so the command keeps the spawned process's pid and group.
const HIDE_NODE = `
root=$1; shift
for n in $(which -a node 2>/dev/null) /usr/bin/node /usr/local/bin/node; do
  if [ -f "$n" ]; then mount --bind /dev/null "$n"; fi
done
mount -t tmpfs -o ro,size=1m none "$root"
if command -v node >/dev/null 2>&1; then echo "node is visible: $(command -v node)" >&2; exit ${NODE_VISIBLE}; fi
if [ -e "$root/package.json" ] || [ -e "$root/node_modules" ]; then echo "the project is visible" >&2; exit ${PROJECT_VISIBLE}; fi
exec "$@"
`;

/** `program args…` run where no Node.js is visible, with `cwd` (outside the project) as its directory. */
export function withoutNode(cwd: string, program: string, args: string[]): AgentCommand {
  return { command: "unshare", args: ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", HIDE_NODE, "sh", ROOT, program, ...args], cwd };
}

/** Runs `program args…` without Node.js visible; its exit status and output. */
export function runWithoutNode(
  cwd: string,
  program: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { status: number | null; stdout: string; stderr: string } {
  const how = withoutNode(cwd, program, args);
  try {
    const stdout = execFileSync(how.command, how.args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
    return { status: 0, stdout, stderr: "" };
  } catch (e) {
    const x = e as { status: number | null; stdout: string; stderr: string };
    return { status: x.status, stdout: x.stdout ?? "", stderr: x.stderr ?? "" };
  }
}

/** The ELF e_machine of a file (62 x86-64, 183 AArch64), read from its header's bytes 18–19. */
export function elfMachine(file: string): number {
  const head = Buffer.alloc(20);
  const fd = openSync(file, "r");
  try {
    readSync(fd, head, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  if (head.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file} is not an ELF file`);
  if (head[5] !== 1) throw new Error(`${file} is not little-endian`);
  return head.readUInt16LE(18);
}
