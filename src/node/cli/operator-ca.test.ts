/**
 * A CA in --pki-dir that cannot sign what etcd accepts is refused when the command starts, naming
 * the file and the reason: the agent exits 3 before it asks the broker for anything (no etcd, no
 * ticket), `controller` exits 2 before it listens. The CAs are made by openssl.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeOperatorCa } from "../../../test/support/operator-cas.ts";
import { EXIT } from "../exit-codes.ts";
import { cli } from "./cli-test-kit.ts";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "join-broker-operator-ca-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const openssl = (dir: string, ...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });

/** Each way a CA can be unusable, made in `dir`, and the words its refusal must have. */
const BROKEN: { name: string; make(dir: string): void; words: (dir: string) => string }[] = [
  {
    name: "an unreadable key",
    make: (dir) => {
      makeOperatorCa("openssl-p256-sec1", dir);
      writeFileSync(join(dir, "ca.key"), "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n");
    },
    words: (dir) => `${join(dir, "ca.key")} is not a PEM private key (PKCS#1, SEC1 or PKCS#8)`,
  },
  {
    name: "a key that is not the certificate's",
    make: (dir) => {
      makeOperatorCa("openssl-rsa2048-pkcs1", dir);
      openssl(dir, "genrsa", "-traditional", "-out", "ca.key", "2048");
    },
    words: (dir) => `${join(dir, "ca.key")} is not the key of ${join(dir, "ca.crt")} (C=DE, O=Acme etcd, OU=ops, CN=etcd-ca)`,
  },
  {
    name: "a certificate that is not a CA",
    make: (dir) => caWith(dir, ["basicConstraints = critical,CA:FALSE"]),
    words: (dir) => `${join(dir, "ca.crt")} (CN=not a CA) is not a CA certificate (basic constraints CA:FALSE)`,
  },
  {
    name: "a key usage without keyCertSign",
    make: (dir) => caWith(dir, ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,digitalSignature"]),
    words: (dir) => `${join(dir, "ca.crt")} (CN=not a CA) may not sign certificates: its key usage (digitalSignature) lacks keyCertSign`,
  },
  {
    name: "an expired CA",
    // openssl signs a certificate for any past dates given with -not_before/-not_after (OpenSSL 3.4+);
    // with 3.0, `x509 -days -1` ends it yesterday.
    make: (dir) => {
      caWith(dir, ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign"]);
      openssl(dir, "x509", "-in", "ca.crt", "-signkey", "ca.key", "-days", "-1", "-out", "ca.crt");
    },
    words: (dir) => `${join(dir, "ca.crt")} (CN=not a CA) expired on `,
  },
  {
    name: "an unsupported key",
    make: (dir) =>
      caWith(dir, ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign"], ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"]),
    words: (dir) => `${join(dir, "ca.key")} holds an ECDSA key on curve secp521r1; an etcd CA key here is RSA 2048–4096 bits, ECDSA P-256 or P-384, or Ed25519`,
  },
];

function caWith(dir: string, extensions: string[], keyArgs = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]): void {
  writeFileSync(join(dir, "ca.cnf"), ["[req]", "distinguished_name = dn", "x509_extensions = ext", "[dn]", "[ext]", ...extensions, ""].join("\n"));
  openssl(dir, "req", "-x509", ...keyArgs, "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=not a CA", "-config", "ca.cnf");
}

/** `join` with --pki-dir DIR, JSON logs, and a broker and join API nobody listens on. */
const joinArgv = (stateDir: string, pkiDir: string) => [
  "join",
  "--broker",
  "http://127.0.0.1:9",
  "--cluster",
  "c1",
  "--token",
  "t",
  "--node",
  "ctrl-1",
  "--peer-url",
  "https://127.0.0.1:2380",
  "--join-api",
  "http://127.0.0.1:9",
  "--state-dir",
  stateDir,
  "--pki-dir",
  pkiDir,
  "--log-format",
  "json",
];

describe("join-broker join --pki-dir with a CA it cannot sign with", () => {
  for (const broken of BROKEN) {
    it(`exits 3 at once for ${broken.name}, naming the file and what is wrong`, { timeout: 30_000 }, async () => {
      const state = tempDir();
      const pki = tempDir();
      broken.make(pki);
      // Nothing listens on the broker's port: the refusal comes before any request.
      const r = await cli(...joinArgv(state, pki), "--etcd-bin", "/bin/false");
      const lines = r.stderr
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { step: string; msg: string });
      expect(r.code, r.stderr).toBe(EXIT.refused);
      const refused = lines.find((l) => l.step === "refused");
      expect(refused?.msg).toContain(broken.words(pki));
      expect(refused?.msg).toMatch(/\(--pki-dir\)$/);
      // Nothing was asked, nothing started, nothing made in the directory.
      expect(lines.map((l) => l.step)).toEqual(["start", "refused"]);
      expect(existsSync(join(pki, "peer.crt"))).toBe(false);
      expect(existsSync(join(state, "etcd.pid"))).toBe(false);
    });
  }

  it("refuses half a pair too", { timeout: 30_000 }, async () => {
    const pki = tempDir();
    makeOperatorCa("openssl-p384-sec1", pki);
    rmSync(join(pki, "ca.crt"));
    const r = await cli(...joinArgv(tempDir(), pki));
    expect(r.code).toBe(EXIT.refused);
    expect(r.stderr).toContain(`${join(pki, "ca.crt")} missing: the etcd CA is a pair of PEM files, ca.crt and ca.key (--pki-dir)`);
  });
});

describe("join-broker controller --pki-dir with a CA it cannot sign with", () => {
  for (const broken of BROKEN) {
    it(`exits 2 before it listens for ${broken.name}, naming the file and what is wrong`, { timeout: 30_000 }, async () => {
      const pki = tempDir();
      broken.make(pki);
      const r = await cli(
        "controller",
        "--etcd",
        "https://127.0.0.1:9",
        "--broker",
        "http://127.0.0.1:9",
        "--cluster",
        "c1",
        "--listen",
        "127.0.0.1:0",
        "--pki-dir",
        pki,
      );
      expect(r.code, r.stderr).toBe(EXIT.usage);
      expect(r.stderr).toContain(`--pki-dir: ${broken.words(pki)}`);
      expect(r.stdout).not.toContain("listening");
    });
  }

  it("signs with a good one, and says which", { timeout: 30_000 }, async () => {
    const pki = tempDir();
    makeOperatorCa("openssl-rsa2048-pkcs1", pki);
    expect(readFileSync(join(pki, "ca.key"), "utf8")).toMatch(/^-----BEGIN RSA PRIVATE KEY-----/);
    const { startJoinApi } = await import("../join-api/server.ts");
    const logged: string[] = [];
    const api = await startJoinApi({
      etcd: "https://127.0.0.1:9",
      broker: "http://127.0.0.1:9",
      cluster: "c1",
      host: "127.0.0.1",
      port: 0,
      pkiDir: pki,
      log: (l) => logged.push(l),
    });
    await api.close();
    expect(logged).toContain(
      `signing joiners' etcd certificates with the CA in ${pki}: C=DE, O=Acme etcd, OU=ops, CN=etcd-ca (RSA 2048, signs with sha256WithRSAEncryption, valid until ${new Date(Date.parse(readCaEnd(pki))).toISOString()})`,
    );
  });
});

function readCaEnd(dir: string): string {
  return execFileSync("openssl", ["x509", "-in", join(dir, "ca.crt"), "-noout", "-enddate"], { encoding: "utf8" })
    .trim()
    .replace(/^notAfter=/, "");
}
