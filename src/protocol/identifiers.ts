/**
 * Identifiers shared by the broker, the node agent and the join API (PROTOCOL.md, "Identifiers").
 * @module
 */

export const CLUSTER_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const NODE_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$/;

export function isClusterName(value: string): boolean {
  return CLUSTER_PATTERN.test(value);
}

export function isNodeName(value: string): boolean {
  return NODE_PATTERN.test(value);
}

/**
 * Why a peer URL is unacceptable, or null when it is fine: an absolute http(s) URL with host and
 * explicit port, and nothing else (no path but "/", no query, fragment or userinfo).
 */
export function peerUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "is not an absolute URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must use http or https";
  if (!url.hostname) return "must name a host";
  if (!hasExplicitPort(value, url)) return "must name a port";
  if (url.username || url.password) return "must not carry userinfo";
  if (url.pathname !== "/" && url.pathname !== "") return "must not have a path";
  if (url.search || value.includes("?")) return "must not have a query";
  if (url.hash || value.includes("#")) return "must not have a fragment";
  return null;
}

// new URL() drops a port equal to the scheme default, so look at the text as well.
function hasExplicitPort(text: string, url: URL): boolean {
  if (url.port) return true;
  const authority = text.slice(text.indexOf("//") + 2).split(/[/?#]/)[0] ?? "";
  return /:\d+$/.test(authority);
}

/** The canonical spelling of a peer URL: no trailing slash. */
export function canonicalPeerUrl(value: string): string {
  return value.endsWith("/") ? value.slice(0, -1) : value;
}
