/**
 * `join-broker etcd-cert`: an etcd client certificate for an operator, signed with the CA in
 * `--pki-dir`, short-lived. etcd's auth is on (the bootstrap node turned it on), so etcdctl needs
 * a user: `root` for membership changes (`etcdctl member remove`), `kube-apiserver` for an API
 * server run by hand. Only a holder of the CA key can make one, and it is root already.
 * @module
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Option } from "commander";
import { EXIT, UsageError } from "../exit-codes.ts";
import { PkiError, type CertificateAuthority } from "../pki/ca.ts";
import { API_SERVER_USER, ROOT_USER } from "../pki/etcd-identities.ts";
import { readCertificateAuthority } from "../pki/pki-dir.ts";
import { generateKeyPair, issueCertificate } from "../pki/x509.ts";
import { requireAll, unset, type CliCommand } from "./command.ts";
import { choice, number, path, value } from "./values.ts";

/** The etcd users this project sets up. */
const USERS = [ROOT_USER, API_SERVER_USER] as const;

const DESCRIPTION = `Signs an etcd client certificate with the cluster's CA (DIR/ca.crt, DIR/ca.key), for etcdctl or a kube-apiserver run by hand: etcd's auth is on (the bootstrap node turned it on), and etcd takes the certificate's common name as the user. Writes OUT/<user>.crt, OUT/<user>.key (0600) and OUT/ca.crt, and prints the etcdctl flags that use them.`;

const AFTER = `
Exit codes: 0 written, 2 bad usage (also a CA that cannot be read: the message says why).
`;

export function defineEtcdCert(cmd: CliCommand): CliCommand {
  cmd
    .description(DESCRIPTION)
    .usage("--pki-dir DIR --out DIR [--user root|kube-apiserver] [--days N]")
    .optionsGroup("Flags:")
    .addOption(value("--pki-dir <DIR>", "the cluster's etcd CA (ca.crt, ca.key), as the join API's --pki-dir holds it", path))
    .addOption(value("--out <DIR>", "where the certificate, its key and the CA certificate are written", path))
    .addOption(choice("--user <USER>", "root (every right: membership changes) or kube-apiserver (every key but /join-broker/)", USERS).default(ROOT_USER))
    .addOption(value("--days <N>", "how long it lasts", number({ min: 1, max: 9999, whole: true, unit: "days" })).default(1))
    .addHelpOption(new Option("-h, --help", "this help"))
    .addHelpText("after", AFTER);
  return cmd.runs((c) => runEtcdCert(c));
}

interface EtcdCertValues {
  pkiDir?: string;
  out?: string;
  user: string;
  days: number;
}

async function runEtcdCert(cmd: CliCommand): Promise<number> {
  requireAll(unset(cmd, "pkiDir", "out"));
  const { pkiDir, out, user, days } = cmd.opts<EtcdCertValues>();
  let ca: CertificateAuthority;
  try {
    ca = await readCertificateAuthority(pkiDir!);
  } catch (e) {
    throw e instanceof PkiError ? new UsageError(`--pki-dir: ${e.message}`) : e;
  }
  const pair = await generateKeyPair();
  const cert = await issueCertificate(ca, pair.keys.publicKey, { node: "operator", hosts: [] }, days, Date.now(), {
    kind: user === ROOT_USER ? "root" : "client",
  });
  const dir = out!;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = { ca: join(dir, "ca.crt"), cert: join(dir, `${user}.crt`), key: join(dir, `${user}.key`) };
  writeFileSync(files.key, pair.keyPem, { mode: 0o600 });
  chmodSync(files.key, 0o600);
  writeFileSync(files.cert, cert);
  writeFileSync(files.ca, ca.certPem);
  process.stdout.write(`--cacert=${files.ca} --cert=${files.cert} --key=${files.key}\n`);
  process.stderr.write(`wrote an etcd client certificate for user ${user} (${days} day${days === 1 ? "" : "s"}) to ${dir}: etcdctl takes the flags above\n`);
  return EXIT.ok;
}
