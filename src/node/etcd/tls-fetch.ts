/**
 * A `fetch` for etcd endpoints that want client certificates (kubeadm's, k0s's and k3s's etcd
 * all do): the same subset of `fetch` the gateway client uses, over node:https with a CA bundle
 * and a client certificate and key, as etcdctl's `--cacert`, `--cert` and `--key`.
 * @module
 */
import { X509Certificate, createPrivateKey } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { request as httpRequest } from "node:http";
import { Agent, request as httpsRequest } from "node:https";

export interface TlsFiles {
  ca?: string;
  cert?: string;
  key?: string;
  /**
   * The name etcd's server certificate is checked against (and sent as SNI) instead of the
   * endpoint's host: k0s's and k3s's etcd certificates name only localhost and 127.0.0.1, yet
   * are reached at the node's address. Not a file; it goes with them.
   */
  serverName?: string;
}

/**
 * A TLS handshake with etcd that failed over a certificate, in words that name the file: `theirs`,
 * this side could not verify the endpoint's certificate against the CA bundle (`--etcd-cacert`,
 * ca.crt); `ours`, the endpoint refused the client certificate presented (`--etcd-cert`,
 * server.crt). `expiry`: the reason is a certificate's validity period (a clock may be wrong),
 * not who signed it. Anything else (a refused connection, a reset) stays what it was.
 */
export class TlsHandshakeError extends Error {
  override readonly name = "TlsHandshakeError";
  constructor(
    readonly side: "theirs" | "ours",
    /** Node's code for it, e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE, ERR_SSL_TLSV1_ALERT_UNKNOWN_CA. */
    readonly code: string,
    readonly expiry: boolean,
    message: string,
  ) {
    super(message);
  }
}

/**
 * OpenSSL's verification failures, as Node names them (the endpoint's certificate, judged here);
 * those Node has no name for are UNSPECIFIED (a name constraint's "permitted subtree violation").
 */
const VERIFY_FAILURES =
  /^(UNSPECIFIED$|UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|INVALID_(CA|PURPOSE)|PATH_LENGTH_EXCEEDED|HOSTNAME_MISMATCH|ERR_TLS_CERT_ALTNAME_INVALID|ERROR_IN_CERT_|.*_SUBTREE_VIOLATION|SUBJECT_ISSUER_MISMATCH|AKID_)/;
/** The alerts an endpoint sends when it refuses the certificate presented to it. */
const CERTIFICATE_ALERTS =
  /^ERR_SSL_(SSLV3|TLSV1|TLSV13|SSL\/TLS)_ALERT_(BAD_CERTIFICATE|UNKNOWN_CA|CERTIFICATE_REQUIRED|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REVOKED|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED)$/;

/** The TLS failure `e` (from node:https) as a TlsHandshakeError, or null when it is none. */
export function tlsHandshakeError(e: unknown, host: string, files: TlsFiles): TlsHandshakeError | null {
  const err = e as { code?: unknown; reason?: unknown; message?: unknown };
  const code = typeof err?.code === "string" ? err.code : "";
  if (VERIFY_FAILURES.test(code)) {
    const expiry = code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID";
    const against = files.ca ? ` against ${files.ca}` : " against the system's CAs";
    // Node's advice about system CAs does not apply to etcd's own CA.
    const reason = String(err.message).replace(/; if the root CA is installed locally.*$/, "");
    return new TlsHandshakeError("theirs", code, expiry, `the certificate of ${host} does not verify${against}: ${reason} (${code})`);
  }
  if (CERTIFICATE_ALERTS.test(code)) {
    const alert = code
      .replace(/^.*_ALERT_/, "")
      .toLowerCase()
      .replace(/_/g, " ")
      .replace("unknown ca", "unknown CA");
    const presented = files.cert ? `the client certificate ${files.cert}` : "this client, which presented no certificate,";
    return new TlsHandshakeError("ours", code, code.endsWith("CERTIFICATE_EXPIRED"), `${host} refused ${presented} (TLS alert: ${alert})`);
  }
  return null;
}

export interface KeptCopy {
  /** A directory of the caller's own (created 0700) where the last working set of files is kept. */
  dir: string;
  /** Called once each time the copy starts standing in for files that are gone. */
  onStandIn?(missing: string): void;
}

/**
 * A fetch that presents these files to https endpoints (and speaks plain http to http ones).
 * The files are read on every request, so that certificates an installer writes while it joins
 * (or rotates later) are used as soon as they exist; until then a request fails like an
 * unreachable endpoint.
 *
 * With `keep`, every set read whose certificate and key belong together is also copied into
 * `keep.dir`, and the copy is used while a file is missing: an installer's clean-up (`kubeadm
 * reset -f` removes `/etc/kubernetes/pki`) must not take away what the agent needs to remove
 * the member that installer left behind.
 */
export function tlsFetch(files: TlsFiles, keep?: KeptCopy): typeof fetch {
  let agentFor = "";
  let agent: Agent | null = null;
  let standingIn = false;
  /** The set last copied (or found unfit to keep): each set read is checked and copied once. */
  let keptFor = "";
  const currentAgent = (): Agent => {
    let read: { ca?: Buffer; cert?: Buffer; key?: Buffer };
    try {
      read = readTlsFiles(files);
      const readId = idOf(read);
      if (keep && readId !== keptFor) {
        keepCopy(keep.dir, read);
        keptFor = readId;
      }
      standingIn = false;
    } catch (e) {
      const kept = keep && (e as NodeJS.ErrnoException).code === "ENOENT" ? readKeptCopy(keep.dir, files) : null;
      if (!kept) throw e;
      if (!standingIn) keep!.onStandIn?.((e as NodeJS.ErrnoException).path ?? "a TLS file");
      standingIn = true;
      read = kept;
    }
    const { ca, cert, key } = read;
    const id = idOf(read);
    if (!agent || id !== agentFor) {
      agent?.destroy();
      agent = new Agent({ keepAlive: true, ca, cert, key });
      agentFor = id;
    }
    return agent;
  };
  return nodeFetch(
    () => currentAgent(),
    (e, host) => tlsHandshakeError(e, host, files),
    files.serverName,
  );
}

/**
 * A fetch that presents these in-memory PEMs (asked for on every request, so that a caller can
 * renew them): a client whose certificate is made in memory and never written to disk.
 */
export function tlsFetchFromMemory(
  material: () => { ca?: string; cert?: string; key?: string },
  names: TlsFiles = { ca: "the CA certificate", cert: "the client certificate made in memory" },
): typeof fetch {
  let agentFor = "";
  let agent: Agent | null = null;
  return nodeFetch(
    () => {
      const m = material();
      const id = [m.ca, m.cert, m.key].join("\0");
      if (!agent || id !== agentFor) {
        agent?.destroy();
        agent = new Agent({ keepAlive: true, ca: m.ca, cert: m.cert, key: m.key });
        agentFor = id;
      }
      return agent;
    },
    (e, host) => tlsHandshakeError(e, host, names),
    names.serverName,
  );
}

/**
 * `fetch` over node:http and node:https: the subset the project's clients use (method, headers,
 * a string body, a signal, `redirect: "error"`; an answer's status, headers, text and JSON),
 * without loading the global fetch's implementation (undici, also behind the global `Response`
 * and `Headers`), which costs a starting process about 100 ms of CPU: the node agent starts once
 * per controller, all at once. `agent` gives the https agent for each request (client
 * certificates); by default Node's global one. `failure` may word a request's error better.
 * `serverName`: etcd's certificate is checked against it, not the endpoint's address.
 */
export function nodeFetch(agent?: () => Agent, failure?: (e: Error, host: string) => Error | null, serverName?: string): typeof fetch {
  const fetchOverNode = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise((resolve, reject) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      const secure = url.protocol === "https:";
      let chosen: Agent | undefined;
      try {
        chosen = secure && agent ? agent() : undefined;
      } catch (e) {
        reject(new Error(`cannot read etcd's TLS files: ${(e as Error).message}`));
        return;
      }
      const headers = headerRecord(init.headers);
      const body = typeof init.body === "string" ? init.body : undefined;
      if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
      const tls = secure ? { ...(chosen ? { agent: chosen } : {}), ...(serverName ? { servername: serverName } : {}) } : {};
      const req = (secure ? httpsRequest : httpRequest)(url.href, { method: init.method ?? "GET", headers, ...tls }, (res) => {
        const status = res.statusCode ?? 502;
        if (init.redirect === "error" && status >= 300 && status < 400) {
          res.resume();
          reject(new TypeError(`fetch failed: redirect (HTTP ${status}) to ${res.headers.location ?? "?"} refused`));
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () =>
          resolve(new NodeResponse(status, res.headers, status === 204 || status === 304 ? Buffer.alloc(0) : Buffer.concat(chunks)) as unknown as Response),
        );
      });
      const signal = init.signal;
      const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e) => reject(failure?.(e, url.host) ?? Object.assign(new Error(e.message), { cause: e })));
      req.on("close", () => signal?.removeEventListener("abort", onAbort));
      req.end(body);
    });
  return fetchOverNode as typeof fetch;
}

/** A request's headers as plain name → value (lower-case names), from any form `fetch` takes. */
function headerRecord(init: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  if (Array.isArray(init)) {
    for (const [name, value] of init as [string, string][]) out[name.toLowerCase()] = value;
  } else if (typeof (init as Headers).forEach === "function") {
    // A Headers object: its maker loaded undici already.
    (init as Headers).forEach((value, name) => {
      out[name.toLowerCase()] = value;
    });
  } else {
    for (const [name, value] of Object.entries(init as Record<string, string>)) out[name.toLowerCase()] = value;
  }
  return out;
}

/** What the clients read of an answer: status, ok, headers.get, text(), json(). */
class NodeResponse {
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null; has(name: string): boolean };
  constructor(
    readonly status: number,
    raw: Record<string, string | string[] | undefined>,
    readonly body: Buffer,
  ) {
    this.ok = status >= 200 && status < 300;
    const get = (name: string) => {
      const v = raw[name.toLowerCase()];
      return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
    };
    this.headers = { get, has: (name) => get(name) !== null };
  }
  async text(): Promise<string> {
    return this.body.toString("utf8");
  }
  async json(): Promise<unknown> {
    return JSON.parse(this.body.toString("utf8"));
  }
  async arrayBuffer(): Promise<ArrayBuffer> {
    return this.body.buffer.slice(this.body.byteOffset, this.body.byteOffset + this.body.byteLength) as ArrayBuffer;
  }
  /** The body is read whole already: a clone shares it (the join API reads a refusal's text before passing it on). */
  clone(): NodeResponse {
    return this;
  }
}

function idOf(read: { ca?: Buffer; cert?: Buffer; key?: Buffer }): string {
  return [read.ca, read.cert, read.key].map((b) => b?.toString("base64") ?? "").join(".");
}

function readTlsFiles(files: TlsFiles): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  return {
    ca: files.ca ? readFileSync(files.ca) : undefined,
    cert: files.cert ? readFileSync(files.cert) : undefined,
    key: files.key ? readFileSync(files.key) : undefined,
  };
}

const KEPT = { ca: "ca.crt", cert: "client.crt", key: "client.key" } as const;

/** Copies a set whose certificate and key belong together (a half-written pair is not kept), when it differs from the copy. */
function keepCopy(dir: string, read: { ca?: Buffer; cert?: Buffer; key?: Buffer }): void {
  try {
    if (read.cert && read.key && !new X509Certificate(read.cert).checkPrivateKey(createPrivateKey(read.key))) return;
  } catch {
    return;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const field of ["ca", "cert", "key"] as const) {
    const content = read[field];
    if (!content) continue;
    const path = join(dir, KEPT[field]);
    if (existsSync(path) && readFileSync(path).equals(content)) continue;
    writeFileSync(`${path}.tmp`, content, { mode: 0o600 });
    renameSync(`${path}.tmp`, path);
  }
}

/** The kept copy of every file `files` names, or null when any is missing from it. */
function readKeptCopy(dir: string, files: TlsFiles): { ca?: Buffer; cert?: Buffer; key?: Buffer } | null {
  const out: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  for (const field of ["ca", "cert", "key"] as const) {
    if (!files[field]) continue;
    const path = join(dir, KEPT[field]);
    if (!existsSync(path)) return null;
    out[field] = readFileSync(path);
  }
  return out;
}
