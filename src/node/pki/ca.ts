/**
 * The cluster's etcd CA as the operator has it: a certificate and its key in the PEM forms that
 * kubeadm, k0s (cfssl), openssl and Go tools write. Keys: RSA 2048 to 4096 bits (PKCS#1 `BEGIN RSA
 * PRIVATE KEY` or PKCS#8), ECDSA P-256 or P-384 (SEC1 `BEGIN EC PRIVATE KEY` or PKCS#8), Ed25519
 * (PKCS#8); unencrypted. Whatever it signs is signed with the algorithm its key calls for:
 * sha256WithRSAEncryption (PKCS#1 v1.5, what Go and etcd take from RSA), ecdsa-with-SHA256 on
 * P-256, ecdsa-with-SHA384 on P-384, Ed25519.
 *
 * A pair that etcd would not accept as the root of its certificates is refused when it is loaded,
 * with the file and the reason: a key that is not the certificate's, a certificate that is no CA
 * or may not sign certificates (basic constraints, key usage, an extended key usage without TLS
 * server and client), one outside its validity, a key of another kind.
 * @module
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs the Reflect metadata API.
import * as x509 from "@peculiar/x509";
import { X509Certificate as NodeCertificate, createPrivateKey, createPublicKey, type KeyObject, type webcrypto } from "node:crypto";
import { certificateParts } from "./der.ts";

const subtle = crypto.subtle;
type CryptoKey = Awaited<ReturnType<typeof subtle.importKey>>;
x509.cryptoProvider.set(crypto);

/** Why a PKI directory or its CA cannot be used; `code` is stable. */
export class PkiError extends Error {
  override readonly name = "PkiError";
  constructor(
    readonly code:
      | "ca_incomplete"
      | "ca_unreadable"
      | "ca_key_unsupported"
      | "ca_key_mismatch"
      | "ca_not_a_ca"
      | "ca_cannot_sign"
      | "ca_not_valid_now"
      | "certificate_mismatch",
    message: string,
  ) {
    super(message);
  }
}

/** How a CA key signs: for @peculiar/x509 (WebCrypto) and for node:crypto. */
interface Signing {
  /** e.g. "RSA 2048", "ECDSA P-384", "Ed25519". */
  key: string;
  /** The X.509 name of the signature algorithm, for messages. */
  algorithm: string;
  importAlgorithm: webcrypto.RsaHashedImportParams | webcrypto.EcKeyImportParams | webcrypto.Algorithm;
  signingAlgorithm: webcrypto.RsaHashedImportParams | webcrypto.EcdsaParams | webcrypto.Algorithm;
  /** node:crypto's digest name for `sign`; null for Ed25519, which hashes by itself. */
  hash: string | null;
}

const CURVES: Record<string, { name: "P-256" | "P-384"; hash: "SHA-256" | "SHA-384"; algorithm: string }> = {
  prime256v1: { name: "P-256", hash: "SHA-256", algorithm: "ecdsa-with-SHA256" },
  secp384r1: { name: "P-384", hash: "SHA-384", algorithm: "ecdsa-with-SHA384" },
};

/** The kinds of CA key accepted, as the refusal of another one words them. */
export const ACCEPTED_CA_KEYS = "RSA 2048–4096 bits, ECDSA P-256 or P-384, or Ed25519";

/** How this key signs, or why it cannot be a CA key here. */
function signingFor(key: KeyObject): Signing | string {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case "rsa": {
      const bits = details.modulusLength ?? 0;
      if (bits < 2048 || bits > 4096) return `an RSA ${bits} key`;
      const rsa = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
      return { key: `RSA ${bits}`, algorithm: "sha256WithRSAEncryption", importAlgorithm: rsa, signingAlgorithm: rsa, hash: "sha256" };
    }
    case "ec": {
      const curve = CURVES[details.namedCurve ?? ""];
      if (!curve) return `an ECDSA key on curve ${details.namedCurve ?? "?"}`;
      return {
        key: `ECDSA ${curve.name}`,
        algorithm: curve.algorithm,
        importAlgorithm: { name: "ECDSA", namedCurve: curve.name },
        signingAlgorithm: { name: "ECDSA", hash: curve.hash },
        hash: curve.hash.replace("-", "").toLowerCase(),
      };
    }
    case "ed25519":
      return { key: "Ed25519", algorithm: "Ed25519", importAlgorithm: { name: "Ed25519" }, signingAlgorithm: { name: "Ed25519" }, hash: null };
    case "rsa-pss":
      return "an RSA-PSS key (etcd's and Go's RSA CAs sign with PKCS#1 v1.5: use an rsaEncryption key)";
    default:
      return `a${/^[aeiou]/i.test(key.asymmetricKeyType ?? "") ? "n" : ""} ${(key.asymmetricKeyType ?? "unknown").toUpperCase()} key`;
  }
}

export interface CertificateAuthority {
  certPem: string;
  cert: x509.X509Certificate;
  /** The key for @peculiar/x509 (WebCrypto). */
  signingKey: CryptoKey;
  /** The same key for node:crypto. */
  privateKey: KeyObject;
  signing: Signing;
  /** The subject exactly as encoded in the certificate: the issuer of everything it signs. */
  subject: Uint8Array;
  /** Its subject key identifier (hex) when it has one: the authority key identifier of everything it signs. */
  subjectKeyId: string | null;
}

export interface CaFiles {
  /** Where the certificate and the key were read, for messages. */
  certFile?: string;
  keyFile?: string;
}

const EKU_SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const EKU_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const EKU_ANY = "2.5.29.37.0";

/**
 * A CA from its PEM files' contents, checked as usable to sign etcd's certificates at `now`;
 * throws PkiError naming the file and the reason.
 */
export async function loadCertificateAuthority(certPem: string, keyPem: string, options: CaFiles & { now?: number } = {}): Promise<CertificateAuthority> {
  const certFile = options.certFile ?? "the CA certificate";
  const keyFile = options.keyFile ?? "the CA key";
  const now = options.now ?? Date.now();
  let cert: x509.X509Certificate;
  let certKey: KeyObject;
  let subject: Uint8Array;
  try {
    cert = new x509.X509Certificate(certPem);
    certKey = new NodeCertificate(certPem).publicKey;
    subject = certificateParts(new Uint8Array(cert.rawData)).subject;
  } catch (e) {
    throw new PkiError("ca_unreadable", `${certFile} is not a PEM certificate: ${(e as Error).message}`);
  }
  const named = `${certFile} (${cert.subject})`;
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(keyPem);
  } catch (e) {
    const encrypted = /ENCRYPTED/.test(keyPem) || /passphrase/i.test((e as Error).message);
    throw new PkiError(
      "ca_unreadable",
      encrypted
        ? `${keyFile} is encrypted: the CA key must be readable without a passphrase (openssl pkey -in ${keyFile} -out ca.key writes it decrypted)`
        : `${keyFile} is not a PEM private key (PKCS#1, SEC1 or PKCS#8): ${(e as Error).message}`,
    );
  }
  const signing = signingFor(privateKey);
  if (typeof signing === "string") throw new PkiError("ca_key_unsupported", `${keyFile} holds ${signing}; an etcd CA key here is ${ACCEPTED_CA_KEYS}`);
  const spki = (k: KeyObject) => k.export({ type: "spki", format: "der" });
  if (!spki(createPublicKey(privateKey)).equals(spki(certKey))) {
    throw new PkiError("ca_key_mismatch", `${keyFile} is not the key of ${named}: the certificate's public key is another one`);
  }
  const basic = cert.getExtension(x509.BasicConstraintsExtension);
  if (!basic?.ca) {
    throw new PkiError(
      "ca_not_a_ca",
      `${named} is not a CA certificate (${basic ? "basic constraints CA:FALSE" : "no basic constraints extension"}): etcd would refuse every certificate signed with it`,
    );
  }
  const usage = cert.getExtension(x509.KeyUsagesExtension);
  if (usage && !(usage.usages & x509.KeyUsageFlags.keyCertSign)) {
    throw new PkiError("ca_cannot_sign", `${named} may not sign certificates: its key usage (${keyUsageNames(usage.usages)}) lacks keyCertSign`);
  }
  const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
  const ekus = eku?.usages.map(String) ?? [];
  if (eku && !ekus.includes(EKU_ANY) && !(ekus.includes(EKU_SERVER_AUTH) && ekus.includes(EKU_CLIENT_AUTH))) {
    throw new PkiError(
      "ca_cannot_sign",
      `${named} limits what it signs to the extended key usage ${ekus.map(ekuName).join(", ")}: etcd uses each certificate as a TLS server and a TLS client, so it needs serverAuth and clientAuth (or none)`,
    );
  }
  if (now < cert.notBefore.getTime())
    throw new PkiError(
      "ca_not_valid_now",
      `${named} is not valid before ${cert.notBefore.toISOString()} (this machine's clock says ${new Date(now).toISOString()})`,
    );
  if (now >= cert.notAfter.getTime()) throw new PkiError("ca_not_valid_now", `${named} expired on ${cert.notAfter.toISOString()}`);
  const pkcs8 = privateKey.export({ type: "pkcs8", format: "der" });
  const signingKey = await subtle.importKey("pkcs8", pkcs8, signing.importAlgorithm, false, ["sign"]);
  const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension);
  return { cert, certPem: `${cert.toString("pem")}\n`, signingKey, privateKey, signing, subject, subjectKeyId: ski?.keyId ?? null };
}

function keyUsageNames(flags: number): string {
  const names = Object.entries(x509.KeyUsageFlags).filter(([name, bit]) => typeof bit === "number" && Number.isNaN(Number(name)) && flags & bit);
  return names.map(([name]) => name).join(", ") || "none";
}

function ekuName(oid: string): string {
  const known: Record<string, string> = {
    [EKU_SERVER_AUTH]: "serverAuth",
    [EKU_CLIENT_AUTH]: "clientAuth",
    "1.3.6.1.5.5.7.3.3": "codeSigning",
    "1.3.6.1.5.5.7.3.4": "emailProtection",
    "1.3.6.1.5.5.7.3.8": "timeStamping",
    "1.3.6.1.5.5.7.3.9": "OCSPSigning",
  };
  return known[oid] ?? oid;
}
