/**
 * HTTPS calls from the test process to a lab host's kube-apiserver (or etcd) with the client
 * certificate of a kubeconfig that kubeadm wrote on that host. The test process is outside the
 * lab's namespaces, so a call goes through `lab.reach()` (a loopback forward); the server's
 * certificate is still checked against the kubeconfig's CA and the address it names (kubeadm's
 * serving certificates do not name the loopback forward).
 */
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { checkServerIdentity } from "node:tls";
import { parse } from "yaml";
import type { Lab } from "./lab.ts";

/** What a call needs: where to, whom to trust, who we are. */
export interface KubeCredentials {
  /** `https://10.77.0.10:6443`: an address in the lab. */
  server: string;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export interface KubeAnswer {
  status: number;
  body: string;
}

interface Kubeconfig {
  clusters?: { cluster?: { server?: string; "certificate-authority-data"?: string } }[];
  users?: { user?: { "client-certificate-data"?: string; "client-key-data"?: string } }[];
}

/** The server, CA and client certificate of a kubeconfig with embedded data (what kubeadm writes). */
export function readKubeconfig(path: string): KubeCredentials {
  const kc = parse(readFileSync(path, "utf8")) as Kubeconfig;
  const cluster = kc.clusters?.[0]?.cluster;
  const user = kc.users?.[0]?.user;
  const server = cluster?.server;
  const ca = cluster?.["certificate-authority-data"];
  const cert = user?.["client-certificate-data"];
  const key = user?.["client-key-data"];
  if (!server || !ca || !cert || !key) throw new Error(`${path} has no server, CA or embedded client certificate`);
  const b = (s: string) => Buffer.from(s, "base64");
  return { server, ca: b(ca), cert: b(cert), key: b(key) };
}

/**
 * One HTTPS request to `creds.server` + `path` through the lab's forward. Resolves with any
 * status; rejects only when no answer came (refused, reset, timed out).
 */
export async function kubeRequest(lab: Lab, creds: KubeCredentials, method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<KubeAnswer> {
  const target = new URL(creds.server);
  const local = new URL(await lab.reach(creds.server));
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((ok, fail) => {
    const req = request(
      {
        host: local.hostname,
        port: local.port,
        method,
        path,
        ca: creds.ca,
        cert: creds.cert,
        key: creds.key,
        checkServerIdentity: (_host, cert) => checkServerIdentity(target.hostname, cert),
        headers: { accept: "application/json", ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}) },
        timeout: timeoutMs,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => ok({ status: res.statusCode ?? 0, body: text }));
        res.on("error", fail);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${creds.server}${path}: no answer within ${timeoutMs} ms`)));
    req.on("error", fail);
    req.end(payload);
  });
}
