/**
 * `--ca-file FILE` of the commands that talk HTTPS to the broker (agent, join API, admin
 * client): trust a private CA besides the system's CAs and NODE_EXTRA_CA_CERTS.
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import type { Option } from "commander";
import type { CliCommand } from "./command.ts";
import { inSingleExecutable } from "../single-executable.ts";
import { onSignals, signalExitCode } from "./signals.ts";
import { pemBlocks, value } from "./values.ts";

/** The option; its reader checks that the file holds PEM certificates. */
export function caFileOption(): Option {
  return value(
    "--ca-file <FILE>",
    "PEM file of CA certificates to trust for HTTPS to the broker (a private CA), besides the system's; NODE_EXTRA_CA_CERTS works too",
    (file, flag) => (pemBlocks(flag, file, "certificate"), file),
  );
}

type TlsWithDefaults = typeof tls & {
  setDefaultCACertificates?: (certs: string[]) => void;
  getCACertificates?: (type: "default") => string[];
};

/**
 * Runs `work` trusting the CAs of `--ca-file` (when given) for every HTTPS request this process
 * makes. On a Node that can add CAs to the default trust store (>= 22.19, 24.5: global fetch uses
 * it) that is done here; on an older one the same command line runs again in a child with
 * NODE_EXTRA_CA_CERTS naming them, and its exit code is the command's.
 */
export async function withCaFile(cmd: CliCommand, work: () => Promise<number>): Promise<number> {
  const file = cmd.optsWithGlobals<{ caFile?: string }>().caFile;
  if (file === undefined) return work();
  const certs = pemBlocks("--ca-file", file, "certificate");
  const t = tls as TlsWithDefaults;
  if (t.setDefaultCACertificates && t.getCACertificates) {
    t.setDefaultCACertificates([...t.getCACertificates("default"), ...certs]);
    return work();
  }
  // NODE_EXTRA_CA_CERTS is read when Node starts: in the child run below it holds them already.
  const extra = extraCaCertificates();
  if (certs.every((c) => extra.includes(c))) return work();
  return rerunWithExtraCa(certs, cmd.commandLine());
}

function extraCaCertificates(): string[] {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  return file && existsSync(file) ? pemBlocks("NODE_EXTRA_CA_CERTS", file, "certificate") : [];
}

/**
 * This command line again in a child whose NODE_EXTRA_CA_CERTS holds `certs` (and those of any
 * NODE_EXTRA_CA_CERTS already set), passing signals on; resolves with its exit code.
 */
async function rerunWithExtraCa(certs: string[], argv: string[]): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "join-broker-ca-"));
  const bundle = join(dir, "ca.pem");
  writeFileSync(bundle, [...extraCaCertificates(), ...certs].join(""));
  // The single executable file is its own script; Node running the package needs the script's path.
  const script = inSingleExecutable() ? [] : [process.argv[1]];
  const child = spawn(process.execPath, [...process.execArgv, ...script, ...argv], {
    stdio: "inherit",
    env: { ...process.env, NODE_EXTRA_CA_CERTS: bundle },
  });
  const release = onSignals(["SIGINT", "SIGTERM", "SIGHUP"], (signal) => child.kill(signal));
  try {
    return await new Promise<number>((ok) => child.on("exit", (code, signal) => ok(code ?? (signal ? signalExitCode(signal) : 1))));
  } finally {
    release();
    rmSync(dir, { recursive: true, force: true });
  }
}
