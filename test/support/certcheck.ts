/**
 * The judge of every certificate the tests see signed: Go's crypto/x509, as etcd and every
 * Kubernetes component verify, through integrations/go/cmd/certcheck (built once per machine and
 * source version with the project's Go module and Go's build cache). Also its `make-ca`: a CA the
 * way Go tools (kubeadm, cfssl) write one.
 *
 *   certcheck verify --ca CA.pem [--intermediate FILE]... [--host NAME]... [--at TIME] [--usage both|server|client] LEAF.pem...
 *   certcheck make-ca --out DIR --key rsa2048|rsa4096|p256|p384|p521|ed25519 [--key-format pkcs1|sec1|pkcs8] [--subject …]
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { projectCacheDir } from "../../scripts/build-cache.mjs";
import { GO_MODULE, findGo } from "../../scripts/go-test.mjs";

const SOURCE_DIR = join(GO_MODULE, "cmd", "certcheck");
let built: string | null = null;

/** The certcheck binary, built first when this source has not been built on this machine. */
export function certcheckBinary(): string {
  if (built) return built;
  const go = findGo();
  if (!go) throw new Error("no 'go' found (PATH, $GO, /usr/local/go/bin): install Go 1.24 or newer");
  const hash = createHash("sha256");
  for (const f of readdirSync(SOURCE_DIR).sort()) hash.update(f).update(readFileSync(join(SOURCE_DIR, f)));
  const dir = join(projectCacheDir(), "go-tools");
  const bin = join(dir, `certcheck-${hash.digest("hex").slice(0, 16)}`);
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    const partial = `${bin}.${process.pid}.partial`;
    const r = spawnSync(go, ["build", "-o", partial, "./cmd/certcheck"], {
      cwd: GO_MODULE,
      encoding: "utf8",
      env: { ...process.env, GOFLAGS: "-mod=readonly" },
    });
    if (r.status !== 0) throw new Error(`go build ./cmd/certcheck failed: ${r.stderr}${r.stdout}`);
    renameSync(partial, bin); // atomic: a second builder's rename only replaces it with the same program
  }
  built = bin;
  return bin;
}

export interface CertcheckResult {
  ok: boolean;
  code: number | null;
  /** stdout and stderr. */
  output: string;
}

export function certcheck(args: string[]): CertcheckResult {
  const r = spawnSync(certcheckBinary(), args, { encoding: "utf8" });
  return { ok: r.status === 0, code: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

/** A file for a PEM given as text (written to a directory of its own), or the path as it is. */
function asFile(pemOrPath: string, dir: () => string, name: string): string {
  if (!pemOrPath.includes("-----BEGIN")) return pemOrPath;
  const file = join(dir(), name);
  writeFileSync(file, pemOrPath);
  return file;
}

/**
 * Go's verdict on `leaves` (PEM text or files) under `ca` (the only root): each must chain for TLS
 * servers and clients both (or `usage`'s), issuer and key identifiers as stored (see certcheck's doc comment).
 */
export function goVerify(
  ca: string,
  leaves: string[],
  options: { hosts?: string[]; intermediates?: string[]; at?: number; usage?: "both" | "server" | "client" } = {},
): CertcheckResult {
  let tmp: string | null = null;
  const dir = () => (tmp ??= mkdtempSync(join(tmpdir(), "join-broker-certcheck-")));
  try {
    const args = ["verify", "--ca", asFile(ca, dir, "ca.pem")];
    for (const [i, f] of (options.intermediates ?? []).entries()) args.push("--intermediate", asFile(f, dir, `intermediate-${i}.pem`));
    for (const h of options.hosts ?? []) args.push("--host", h);
    if (options.at !== undefined) args.push("--at", new Date(options.at).toISOString());
    if (options.usage) args.push("--usage", options.usage);
    args.push(...leaves.map((l, i) => asFile(l, dir, `leaf-${i}.pem`)));
    return certcheck(args);
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}
