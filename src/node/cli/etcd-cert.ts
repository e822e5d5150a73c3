/**
 * `join-broker etcd-cert`: an etcd client certificate for an operator, signed with the CA in
 * `--pki-dir`, short-lived. etcd's auth is on (the bootstrap node turned it on), so etcdctl needs
 * a user: `root` for membership changes (`etcdctl member remove`), `kube-apiserver` for an API
 * server run by hand. Only a holder of the CA key can make one, and it is root already.
 * @module
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { EXIT, UsageError } from "../exit-codes.ts";
import { PkiError } from "../pki/ca.ts";
import { readCertificateAuthority } from "../pki/pki-dir.ts";
import { API_SERVER_USER, generateKeyPair, issueCertificate } from "../pki/x509.ts";
import { ROOT_USER } from "../pki/etcd-identities.ts";
import { defineCommand, parseCommand, type FlagSpec } from "./flags.ts";

export const ETCD_CERT_USAGE = `Usage: join-broker etcd-cert --pki-dir DIR --out DIR [--user root|kube-apiserver] [--days N]

Signs an etcd client certificate with the cluster's CA (DIR/ca.crt, DIR/ca.key), for etcdctl or
a kube-apiserver run by hand: etcd's auth is on (the bootstrap node turned it on), and etcd takes
the certificate's common name as the user. Writes OUT/<user>.crt, OUT/<user>.key (0600) and
OUT/ca.crt, and prints the etcdctl flags that use them.

Flags:
  --pki-dir DIR    the cluster's etcd CA (ca.crt, ca.key), as the join API's --pki-dir holds it
  --out DIR        where the certificate, its key and the CA certificate are written
  --user USER      root (every right: membership changes) or kube-apiserver (every key but
                   /join-broker/); default root
  --days N         how long it lasts (default 1)
  -h, --help       this text

Exit codes: 0 written, 2 bad usage (also a CA that cannot be read: the message says why).
`;

export const ETCD_CERT_FLAGS = {
  "pki-dir": "DIR",
  out: "DIR",
  user: "USER",
  days: "N",
  help: { switch: true, short: "h" },
} as const satisfies Record<string, FlagSpec>;

export async function run(argv: string[]): Promise<number> {
  const { values, help } = parseCommand(defineCommand("etcd-cert", ETCD_CERT_FLAGS), argv);
  if (help || values.help) {
    process.stdout.write(ETCD_CERT_USAGE);
    return EXIT.ok;
  }
  const pkiDir = values["pki-dir"] as string | undefined;
  const out = values.out as string | undefined;
  if (!pkiDir) throw new UsageError("--pki-dir DIR is required: the directory that holds the cluster's etcd CA (ca.crt, ca.key)");
  if (!out) throw new UsageError("--out DIR is required: where the certificate and its key are written");
  const user = (values.user as string | undefined) ?? ROOT_USER;
  if (user !== ROOT_USER && user !== API_SERVER_USER) throw new UsageError(`--user ${user}: the users this project sets up are ${ROOT_USER} and ${API_SERVER_USER}`);
  const daysText = (values.days as string | undefined) ?? "1";
  if (!/^[1-9][0-9]{0,3}$/.test(daysText)) throw new UsageError(`--days ${daysText}: a whole number of days, 1 to 9999`);
  let ca;
  try {
    ca = await readCertificateAuthority(pkiDir);
  } catch (e) {
    throw e instanceof PkiError ? new UsageError(`--pki-dir: ${e.message}`) : e;
  }
  const pair = await generateKeyPair();
  const cert = await issueCertificate(ca, pair.keys.publicKey, { node: "operator", hosts: [] }, Number(daysText), Date.now(), { kind: user === ROOT_USER ? "root" : "client" });
  const dir = resolve(out);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = { ca: join(dir, "ca.crt"), cert: join(dir, `${user}.crt`), key: join(dir, `${user}.key`) };
  writeFileSync(files.key, pair.keyPem, { mode: 0o600 });
  chmodSync(files.key, 0o600);
  writeFileSync(files.cert, cert);
  writeFileSync(files.ca, ca.certPem);
  process.stdout.write(`--cacert=${files.ca} --cert=${files.cert} --key=${files.key}\n`);
  process.stderr.write(`wrote an etcd client certificate for user ${user} (${daysText} day${daysText === "1" ? "" : "s"}) to ${dir}: etcdctl takes the flags above\n`);
  return EXIT.ok;
}
