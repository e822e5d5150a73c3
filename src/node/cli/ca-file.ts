/**
 * `--ca-file FILE` of the node-side commands (agent, join API, admin client): trust a private CA
 * for HTTPS to the broker, in addition to the system's CAs and NODE_EXTRA_CA_CERTS.
 * @module
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import { UsageError } from "../exit-codes.ts";
import { inSingleExecutable } from "../single-executable.ts";

/** Commands that talk HTTPS to the broker and accept --ca-file. */
export const CA_FILE_COMMANDS = new Set(["join", "controller", "admin"]);

/** Takes `--ca-file FILE` / `--ca-file=FILE` out of `argv`. */
export function extractCaFile(argv: string[]): { caFile: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let caFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    if (arg === "--ca-file") {
      caFile = argv[++i];
      if (caFile === undefined || caFile.startsWith("--")) throw new UsageError("--ca-file needs a FILE");
    } else if (arg.startsWith("--ca-file=")) {
      caFile = arg.slice("--ca-file=".length);
    } else {
      rest.push(arg);
    }
  }
  if (caFile === "") throw new UsageError("--ca-file needs a FILE");
  return { caFile, rest };
}

/** The certificates of a PEM file; a UsageError when it has none or cannot be read. */
export function readCaFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(`cannot read --ca-file ${file}: ${(e as Error).message}`);
  }
  const certs = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (!certs.length) throw new UsageError(`--ca-file ${file} holds no PEM certificate`);
  return certs.map((c) => `${c}\n`);
}

type TlsWithDefaults = typeof tls & {
  setDefaultCACertificates?: (certs: string[]) => void;
  getCACertificates?: (type: "default") => string[];
};

/**
 * Adds the file's CAs to the process's default trust store (Node >= 22.19, 24.5), which global
 * fetch uses. Returns false when this Node cannot, so that the caller re-runs the command with
 * NODE_EXTRA_CA_CERTS instead.
 */
export function trustCaFile(file: string): boolean {
  const certs = readCaFile(file);
  const t = tls as TlsWithDefaults;
  if (!t.setDefaultCACertificates || !t.getCACertificates) return false;
  t.setDefaultCACertificates([...t.getCACertificates("default"), ...certs]);
  return true;
}

/**
 * For an older Node: runs this same command again in a child with NODE_EXTRA_CA_CERTS naming the
 * CAs (joined with any NODE_EXTRA_CA_CERTS already set), forwarding signals; resolves with its exit code.
 */
export async function rerunWithExtraCa(file: string, argv: string[]): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "join-broker-ca-"));
  const bundle = join(dir, "ca.pem");
  const existing = process.env.NODE_EXTRA_CA_CERTS ? readCaFile(process.env.NODE_EXTRA_CA_CERTS) : [];
  writeFileSync(bundle, [...existing, ...readCaFile(file)].join(""));
  // The single executable file is its own script; Node running the package needs the script's path.
  const script = inSingleExecutable() ? [] : [process.argv[1]];
  const child = spawn(process.execPath, [...process.execArgv, ...script, ...argv], {
    stdio: "inherit",
    env: { ...process.env, NODE_EXTRA_CA_CERTS: bundle },
  });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  const handlers = (["SIGINT", "SIGTERM", "SIGHUP"] as const).map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  try {
    return await new Promise<number>((ok) => child.on("exit", (code, signal) => ok(code ?? 128 + (signal ? constants.signals[signal] : 0))));
  } finally {
    for (const [s, h] of handlers) process.off(s, h);
    rmSync(dir, { recursive: true, force: true });
  }
}
