/**
 * Bearer credentials (RFC 6750): the one parser of `Authorization: Bearer <token>` used by the
 * broker and the join API alike.
 * @module
 */

/** RFC 6750 `b64token`, after the scheme (case-insensitive) and its whitespace. */
const BEARER = /^Bearer\s+([A-Za-z0-9._~+/-]+=*)\s*$/i;
const B64TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

/** What a bearer token may be made of, for messages that refuse one. */
export const BEARER_TOKEN_CHARACTERS = "A-Z a-z 0-9 - . _ ~ + / (and = only at the end)";

/** Whether `token` can travel as `Authorization: Bearer <token>`: a secret that cannot is refused on every request. */
export function isBearerToken(token: string): boolean {
  return B64TOKEN.test(token);
}

/** The token of an `Authorization` header value, or null when there is none or it is not a bearer token. */
export function parseBearer(header: string | null | undefined): string | null {
  const match = header ? BEARER.exec(header) : null;
  return match ? match[1]! : null;
}
