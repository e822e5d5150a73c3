/**
 * Opaque random identifiers and secrets, and the hash under which enrollment tokens are stored.
 * @module
 */
import { base64url } from "jose";

export const ENROLLMENT_TOKEN_PREFIX = "jbe_";

export function randomId(prefix: string, bytes = 12): string {
  return prefix + base64url.encode(crypto.getRandomValues(new Uint8Array(bytes))).replaceAll("-", "A").replaceAll("_", "B");
}

export function newEnrollmentToken(): string {
  return ENROLLMENT_TOKEN_PREFIX + base64url.encode(crypto.getRandomValues(new Uint8Array(32)));
}

export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
