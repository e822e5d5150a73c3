/**
 * Who may do what in a cluster's etcd, with its auth on (the bootstrap node turns it on,
 * etcd-auth.ts): the holders of the CA key are `root`, the only user with membership rights;
 * the API servers' client certificates are `kube-apiserver`, with read-write on every key but
 * this project's records; node certificates name no user at all, so etcd grants them nothing but
 * its member list and status.
 *
 * `root`'s password is derived from the CA key, so every holder of that key (the bootstrap node,
 * each join API) knows it without one more secret to copy, and knowing it yields nothing the key
 * does not: whoever has the key can sign a certificate for CN=root anyway.
 * @module
 */
import { createPrivateKey, hkdfSync } from "node:crypto";
import { API_SERVER_USER, generateKeyPair, issueCertificate, type CertificateAuthority } from "./x509.ts";

export const ROOT_USER = "root";
export { API_SERVER_USER };
/**
 * The etcd users with the API servers' role: this project's certificate, and the common names
 * of the client certificates kubeadm (`apiserver-etcd-client.crt`) and k0s give their API
 * servers, so that an API server keeps its installer's certificate on a cluster made with that
 * installer's CA. None can be a node's name (identifiers.ts).
 */
export const API_SERVER_USERS: readonly string[] = [API_SERVER_USER, "kube-apiserver-etcd-client", "apiserver-etcd-client"];
/** The keys the API servers' role does not reach: this project's records (learners, certificates, revocations). */
export const RECORDS_PREFIX = "/join-broker/";

/** `root`'s etcd password for the cluster whose CA key this is (PEM, any of its forms). */
export function etcdRootPassword(caKeyPem: string): string {
  const der = createPrivateKey(caKeyPem).export({ format: "der", type: "pkcs8" });
  return Buffer.from(hkdfSync("sha256", der, "etcd-join-broker", "etcd root password v1", 32)).toString("base64url");
}

/**
 * A client certificate without a common name, made in memory by a holder of the CA key for its
 * own etcd calls: etcd's JSON gateway, with auth on, refuses a certificate that names a user
 * and takes the user from the password sign-in instead. Two days, renewed by the caller.
 */
export async function anonymousClientCertificate(
  ca: CertificateAuthority,
  holder: string,
  now = Date.now(),
): Promise<{ cert: string; key: string; notAfter: number }> {
  const pair = await generateKeyPair();
  const cert = await issueCertificate(ca, pair.keys.publicKey, { node: holder, hosts: [] }, 2, now, { kind: "anonymous" });
  return { cert, key: pair.keyPem, notAfter: Math.min(now + 2 * 86_400_000, ca.cert.notAfter.getTime()) };
}
