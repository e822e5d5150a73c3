/**
 * Opaque random identifiers and secrets, and the hash under which enrollment tokens are stored.
 * @module
 */
import { base64url } from "jose";

export const ENROLLMENT_TOKEN_PREFIX = "jbe_";
/** Read-only admin credentials. */
export const READ_ONLY_TOKEN_PREFIX = "jbr_";

export function randomId(prefix: string, bytes = 12): string {
  return (
    prefix +
    base64url
      .encode(crypto.getRandomValues(new Uint8Array(bytes)))
      .replaceAll("-", "A")
      .replaceAll("_", "B")
  );
}

export function newEnrollmentToken(): string {
  return ENROLLMENT_TOKEN_PREFIX + base64url.encode(crypto.getRandomValues(new Uint8Array(32)));
}

export function newReadOnlyToken(): string {
  return READ_ONLY_TOKEN_PREFIX + base64url.encode(crypto.getRandomValues(new Uint8Array(32)));
}

const utf8 = new TextEncoder();
const HEX_BYTES = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", utf8.encode(text)));
  let hex = "";
  for (const b of digest) hex += HEX_BYTES[b];
  return hex;
}
