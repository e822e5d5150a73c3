/**
 * A `fetch` for etcd endpoints that want client certificates (kubeadm's, k0s's and k3s's etcd
 * all do): the same subset of `fetch` the gateway client uses, over node:https with a CA bundle
 * and a client certificate and key, as etcdctl's `--cacert`, `--cert` and `--key`.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { UsageError } from "../exit-codes.ts";
import { request as httpRequest } from "node:http";
import { Agent, request as httpsRequest } from "node:https";

export interface TlsFiles {
  ca?: string;
  cert?: string;
  key?: string;
}

/**
 * `--etcd-cacert`, `--etcd-cert` and `--etcd-key` as files (absolute paths), cert and key
 * together; null when none is given. `mustExist` checks them now; without it they are read when
 * etcd is asked (a joining installer may write them only while it joins).
 */
export function tlsFilesFromFlags(flag: (name: "etcd-cacert" | "etcd-cert" | "etcd-key") => string | undefined, options: { mustExist: boolean }): TlsFiles | null {
  const files: TlsFiles = {};
  for (const [name, field] of [["etcd-cacert", "ca"], ["etcd-cert", "cert"], ["etcd-key", "key"]] as const) {
    const path = flag(name);
    if (!path) continue;
    if (options.mustExist && !existsSync(path)) throw new UsageError(`--${name} ${path}: no such file`);
    files[field] = resolve(path);
  }
  if (!files.cert !== !files.key) throw new UsageError("--etcd-cert and --etcd-key go together");
  return Object.keys(files).length ? files : null;
}

/**
 * A fetch that presents these files to https endpoints (and speaks plain http to http ones).
 * The files are read on every request, so that certificates an installer writes while it joins
 * (or rotates later) are used as soon as they exist; until then a request fails like an
 * unreachable endpoint.
 */
export function tlsFetch(files: TlsFiles): typeof fetch {
  let agentFor = "";
  let agent: Agent | null = null;
  const currentAgent = (): Agent => {
    const ca = files.ca ? readFileSync(files.ca) : undefined;
    const cert = files.cert ? readFileSync(files.cert) : undefined;
    const key = files.key ? readFileSync(files.key) : undefined;
    const id = [ca, cert, key].map((b) => b?.toString("base64") ?? "").join(".");
    if (!agent || id !== agentFor) {
      agent?.destroy();
      agent = new Agent({ keepAlive: true, ca, cert, key });
      agentFor = id;
    }
    return agent;
  };
  const fetchWithTls = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise((resolve, reject) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      const secure = url.protocol === "https:";
      let agent: Agent | undefined;
      try {
        agent = secure ? currentAgent() : undefined;
      } catch (e) {
        reject(new Error(`cannot read etcd's TLS files: ${(e as Error).message}`));
        return;
      }
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, name) => (headers[name] = value));
      const body = typeof init.body === "string" ? init.body : undefined;
      if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
      const req = (secure ? httpsRequest : httpRequest)(url.href, { method: init.method ?? "GET", headers, ...(secure ? { agent } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const out = new Headers();
          for (const [name, value] of Object.entries(res.headers)) if (typeof value === "string") out.set(name, value);
          const status = res.statusCode ?? 502;
          resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers: out }));
        });
      });
      const signal = init.signal;
      const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => reject(Object.assign(new Error(e.message), { cause: e })));
      req.on("close", () => signal?.removeEventListener("abort", onAbort));
      req.end(body);
    });
  return fetchWithTls as typeof fetch;
}
