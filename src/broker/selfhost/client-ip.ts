/**
 * Which address a failed authentication is counted against, self-hosted. On Cloudflare the edge
 * sets `cf-connecting-ip` and no client can forge it; workerd passes every header through, so
 * the self-hosted Worker drops the headers a client could forge (`cf-connecting-ip`,
 * `x-real-ip`) and, only when the operator names one (`--client-ip-header`, set by a trusted
 * reverse proxy in front), takes the client address from that header. Without one, all failed
 * authentications share one counter: guessing stays slow, and clients with valid tokens are not
 * affected (only failures count).
 * @module
 */

const FORGEABLE = ["cf-connecting-ip", "x-real-ip"];

/** The request as the app should see it: forgeable address headers removed, the trusted one mapped. */
export function withTrustedClientIp(request: Request, trustedHeader: string | undefined): Request {
  const trusted = trustedHeader ? request.headers.get(trustedHeader) : null;
  if (!FORGEABLE.some((h) => request.headers.has(h)) && !trusted) return request;
  const headers = new Headers(request.headers);
  for (const h of FORGEABLE) headers.delete(h);
  // X-Forwarded-For style lists: the proxy appends the address it saw, so the last entry is the one it vouches for.
  const address = trusted?.split(",").pop()?.trim();
  if (address) headers.set("cf-connecting-ip", address);
  return new Request(request, { headers });
}
