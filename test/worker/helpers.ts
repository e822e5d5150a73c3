/** Calls the Worker inside workerd, as a client over HTTP would. */
import { exports } from "cloudflare:workers";

export const ADMIN = "test-admin-token-0123456789";
export const ISSUER = "https://broker.test";
export const BASE = "https://broker.test";
/** True when these tests run over loopback against `join-broker serve` (no access to Durable Object internals). */
export const OVER_HTTP = (exports as unknown as { overHttp?: boolean }).overHttp === true;

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

export async function call(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Uint8Array | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await exports.default.fetch(`${BASE}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export const admin = (method: string, path: string, body?: unknown) => call(method, `/v1/admin/clusters/${path}`, { token: ADMIN, body });

/** Creates the cluster (by its first enrollment token) and returns that token. */
export async function enroll(cluster: string, options: Record<string, unknown> = {}): Promise<string> {
  const r = await admin("POST", `${cluster}/enrollment-tokens`, options);
  if (r.status !== 201) throw new Error(`enrollment failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token;
}

export const peer = (n: number) => `https://10.0.0.${n}:2380`;

export function ticket(cluster: string, token: string, node: string, peerURL: string) {
  return call("POST", `/v1/clusters/${cluster}/tickets`, { token, body: { node, peerURL } });
}

export function poll(cluster: string, token: string, id: string, wait = 0, headers: Record<string, string> = {}) {
  return call("GET", `/v1/clusters/${cluster}/tickets/${id}${wait ? `?wait=${wait}` : ""}`, { token, headers });
}

export function complete(cluster: string, admission: string, id: string, memberID: string) {
  return call("POST", `/v1/clusters/${cluster}/tickets/${id}/complete`, { token: admission, body: { memberID } });
}

export function heartbeat(cluster: string, admission: string, id: string) {
  return call("POST", `/v1/clusters/${cluster}/tickets/${id}/heartbeat`, { token: admission });
}

export function abandon(cluster: string, token: string, id: string) {
  return call("DELETE", `/v1/clusters/${cluster}/tickets/${id}`, { token });
}

/** A bootstrapped cluster: node b0 bootstrapped and completed. */
export async function bootstrapped(cluster: string, policy?: Record<string, number>) {
  const enrollment = await enroll(cluster);
  if (policy) await admin("PUT", `${cluster}/policy`, policy);
  const boot = await ticket(cluster, enrollment, "b0", peer(1));
  if (boot.body.role !== "bootstrap" || boot.body.state !== "admitted") throw new Error(`unexpected bootstrap ${JSON.stringify(boot.body)}`);
  const done = await complete(cluster, boot.body.admission, boot.body.ticket, "1001");
  if (done.status !== 200) throw new Error(`bootstrap complete failed ${JSON.stringify(done.body)}`);
  return { enrollment, bootstrapTicket: boot.body.ticket as string };
}

export async function auditActions(cluster: string): Promise<string[]> {
  const r = await admin("GET", `${cluster}/audit?limit=1000`);
  return r.body.entries.map((e: { action: string }) => e.action);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
