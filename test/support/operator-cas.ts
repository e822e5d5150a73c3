/**
 * etcd CAs as operators already have them, made by the tools that make them: openssl (the usual
 * one-liners, its default UTF8String subjects and, with `string_mask = nombstr`, PrintableString
 * ones; keys as PKCS#1, SEC1 and PKCS#8) and Go's crypto/x509 (as kubeadm and cfssl, which k0s
 * uses, write them: PKCS#1 RSA, PrintableString subjects). Each kind writes DIR/ca.crt and
 * DIR/ca.key. kubeadm's own CA is made by kubeadm itself (test/e2e/kubeadm-ca.test.ts).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { certcheck } from "./certcheck.ts";

export interface OperatorCaKind {
  name: string;
  /** What it is, for test names. */
  description: string;
  /** The key's PEM label: which form the loader has to read. */
  keyLabel: string;
  make(dir: string): void;
}

const MULTI_ATTRIBUTE = "/C=DE/O=Acme etcd/OU=ops/CN=etcd-ca";

function openssl(dir: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** openssl's flags for a new P-256 key, unencrypted (`req -x509` for a CA, `req -new` for a request). */
export const P256_NEW_KEY: readonly string[] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/**
 * `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes`: the CA one-liner most
 * guides give (a PKCS#8 key, openssl's default CA extensions, or those of `extra`'s -config),
 * writing `cert` and `key` (default ca.crt, ca.key) in `dir`.
 */
export function opensslP256Ca(dir: string, options: { subject?: string; days?: number; cert?: string; key?: string; extra?: string[] } = {}): void {
  const { subject = "/CN=etcd-ca", days = 30, cert = "ca.crt", key = "ca.key", extra = [] } = options;
  openssl(dir, "req", "-x509", ...P256_NEW_KEY, "-keyout", key, "-out", cert, "-days", String(days), "-subj", subject, ...extra);
}

/** `openssl req -x509` over an existing ca.key, with openssl's default CA extensions (basic constraints, key identifiers). */
function selfSign(dir: string, subject: string, extra: string[] = []): void {
  openssl(dir, "req", "-x509", "-key", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", subject, ...extra);
}

/** An openssl configuration whose names are PrintableString where they can be (`string_mask = nombstr`). */
function printableConfig(dir: string): string {
  const file = join(dir, "printable.cnf");
  writeFileSync(
    file,
    [
      "[req]",
      "distinguished_name = dn",
      "string_mask = nombstr",
      "x509_extensions = v3_ca",
      "[dn]",
      "[v3_ca]",
      "basicConstraints = critical,CA:TRUE",
      "keyUsage = critical,keyCertSign,cRLSign",
      "subjectKeyIdentifier = hash",
      "",
    ].join("\n"),
  );
  return file;
}

function goMakeCa(dir: string, args: string[]): void {
  const r = certcheck(["make-ca", "--out", dir, ...args]);
  if (!r.ok) throw new Error(`certcheck make-ca ${args.join(" ")}: ${r.output}`);
}

export const OPERATOR_CA_KINDS: readonly OperatorCaKind[] = [
  {
    name: "openssl-p256-pkcs8",
    description: "openssl req -x509 -newkey ec P-256 (PKCS#8 key, UTF8String CN): the one-liner most guides give",
    keyLabel: "PRIVATE KEY",
    make: (dir) => opensslP256Ca(dir),
  },
  {
    name: "openssl-rsa2048-pkcs1",
    description: "openssl genrsa -traditional 2048 (PKCS#1 key), UTF8String C/O/OU/CN subject",
    keyLabel: "RSA PRIVATE KEY",
    make: (dir) => {
      openssl(dir, "genrsa", "-traditional", "-out", "ca.key", "2048");
      selfSign(dir, MULTI_ATTRIBUTE);
    },
  },
  {
    name: "openssl-rsa4096-pkcs8",
    description: "openssl req -x509 -newkey rsa:4096 (PKCS#8 key), PrintableString C/O/CN subject",
    keyLabel: "PRIVATE KEY",
    make: (dir) =>
      openssl(
        dir,
        "req",
        "-x509",
        "-newkey",
        "rsa:4096",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "30",
        "-config",
        printableConfig(dir),
        "-subj",
        "/C=DE/O=Acme etcd/CN=etcd-ca",
      ),
  },
  {
    name: "openssl-p256-sec1",
    description: "openssl ecparam -genkey prime256v1 (SEC1 key), UTF8String C/O/OU/CN subject",
    keyLabel: "EC PRIVATE KEY",
    make: (dir) => {
      openssl(dir, "ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "ca.key");
      selfSign(dir, MULTI_ATTRIBUTE);
    },
  },
  {
    name: "openssl-p384-sec1",
    description: "openssl ecparam -genkey secp384r1 (SEC1 key), UTF8String C/O/OU/CN subject",
    keyLabel: "EC PRIVATE KEY",
    make: (dir) => {
      openssl(dir, "ecparam", "-genkey", "-name", "secp384r1", "-noout", "-out", "ca.key");
      selfSign(dir, MULTI_ATTRIBUTE);
    },
  },
  {
    name: "openssl-p384-pkcs8",
    description: "openssl genpkey EC P-384 (PKCS#8 key), PrintableString subject",
    keyLabel: "PRIVATE KEY",
    make: (dir) => {
      openssl(dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "ca.key");
      selfSign(dir, "/C=DE/O=Acme etcd/CN=etcd-ca", ["-config", printableConfig(dir)]);
    },
  },
  {
    name: "openssl-ed25519",
    description: "openssl genpkey ed25519 (PKCS#8 key), UTF8String subject",
    keyLabel: "PRIVATE KEY",
    make: (dir) => {
      openssl(dir, "genpkey", "-algorithm", "ed25519", "-out", "ca.key");
      selfSign(dir, "/O=Acme etcd/CN=etcd-ca");
    },
  },
  {
    name: "go-rsa2048-pkcs1",
    description: "Go crypto/x509, RSA 2048 PKCS#1 (as cfssl writes k0s's etcd CA), PrintableString CN",
    keyLabel: "RSA PRIVATE KEY",
    make: (dir) => goMakeCa(dir, ["--key", "rsa2048", "--subject", "CN=etcd-ca"]),
  },
  {
    name: "go-p256-sec1-no-ski",
    description: "Go crypto/x509, P-256 SEC1, no subject key identifier (as older tools wrote CAs)",
    keyLabel: "EC PRIVATE KEY",
    make: (dir) => goMakeCa(dir, ["--key", "p256", "--subject", "O=Acme etcd,CN=etcd-ca", "--no-subject-key-id"]),
  },
  {
    name: "go-ed25519",
    description: "Go crypto/x509, Ed25519 PKCS#8, PrintableString O/CN subject",
    keyLabel: "PRIVATE KEY",
    make: (dir) => goMakeCa(dir, ["--key", "ed25519", "--subject", "O=Acme etcd,CN=etcd-ca"]),
  },
];

/** Makes the CA of this kind in `dir` (created); returns its two files. */
export function makeOperatorCa(kind: OperatorCaKind | string, dir: string): { cert: string; key: string; kind: OperatorCaKind } {
  const k = typeof kind === "string" ? OPERATOR_CA_KINDS.find((x) => x.name === kind) : kind;
  if (!k) throw new Error(`no CA kind ${String(kind)}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  k.make(dir);
  return { cert: join(dir, "ca.crt"), key: join(dir, "ca.key"), kind: k };
}
