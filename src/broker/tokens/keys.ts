/**
 * Per-cluster EdDSA signing keys: generation, the public JWKS and signing, all through jose.
 * @module
 */
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import { ADMISSION_ALG, ADMISSION_TYP, type AdmissionClaims } from "../../shared/protocol/claims.ts";

export interface SigningKeyMaterial {
  kid: string;
  privateJwk: JWK;
  publicJwk: JWK;
}

export async function generateSigningKey(): Promise<SigningKeyMaterial> {
  const { publicKey, privateKey } = await generateKeyPair(ADMISSION_ALG, { crv: "Ed25519", extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk); // RFC 7638
  const privateJwk = await exportJWK(privateKey);
  return { kid, privateJwk: { ...privateJwk, kid }, publicJwk: publicJwkEntry(publicJwk, kid) };
}

export function publicJwkEntry(publicJwk: JWK, kid: string): JWK {
  return { kty: publicJwk.kty, crv: publicJwk.crv, x: publicJwk.x, kid, alg: ADMISSION_ALG, use: "sig" };
}

export async function importPrivateKey(privateJwk: JWK): Promise<CryptoKey> {
  return (await importJWK(privateJwk, ADMISSION_ALG)) as CryptoKey;
}

export async function signAdmission(claims: AdmissionClaims, kid: string, key: CryptoKey): Promise<string> {
  return new SignJWT({ ...claims }).setProtectedHeader({ alg: ADMISSION_ALG, kid, typ: ADMISSION_TYP }).sign(key);
}
