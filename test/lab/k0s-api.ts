/**
 * k0s's join API (`k0s api`, port 9443 behind the lab's fixed API address) called from the test
 * process as a joining controller calls it, for the tests of the patched k0s
 * (integrations/k0s/<version>/broker/): k0s's join token as the bearer (`joinTokenBearer`, read
 * from a host's `/etc/k0s/controller-token` as k0s reads it), the admission in the
 * Join-Broker-Admission header, the answer as it came (status, content type, text).
 * @module
 */
import { request } from "node:https";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { checkServerIdentity } from "node:tls";
import { gunzipSync } from "node:zlib";
import { parse } from "yaml";
import { K0S_API_PORT, type K0sLab } from "./k0s-lab.ts";

/** The header the patched k0s carries the admission in (integrations/go/joincheck). */
export const ADMISSION_HEADER = "Join-Broker-Admission";

/**
 * The bootstrap token inside a k0s join token (base64 of a gzipped kubeconfig whose user has a
 * `token`): what k0s's join client sends as its bearer.
 */
export function joinTokenBearer(joinToken: string): string {
  const kubeconfig = parse(gunzipSync(Buffer.from(joinToken.trim(), "base64")).toString("utf8")) as { users?: { user?: { token?: string } }[] };
  const token = kubeconfig.users?.[0]?.user?.token;
  if (!token) throw new Error("the join token's kubeconfig has no user token");
  return token;
}

/** The controller join token the lab put on `host` (`/etc/k0s/controller-token`). */
export function hostJoinToken(k: K0sLab, host: string): string {
  return readFileSync(join(k.lab.host(host).mounts.get("/etc/k0s")!, "controller-token"), "utf8");
}

export interface K0sApiAnswer {
  status: number;
  contentType: string;
  text: string;
}

/** One request to k0s's join API through the fixed API address, its TLS checked against the cluster's CA for that address. */
export async function k0sApiCall(
  k: K0sLab,
  call: { method: "GET" | "POST"; path: string; bearer?: string; admission?: string; body?: unknown; accept?: string },
): Promise<K0sApiAnswer> {
  const url = new URL(call.path, await k.lab.reach(`https://${k.apiAddress}:${K0S_API_PORT}`)).href;
  const body = call.body === undefined ? undefined : JSON.stringify(call.body);
  const headers: Record<string, string> = {
    ...(call.bearer ? { authorization: `Bearer ${call.bearer}` } : {}),
    ...(call.admission ? { [ADMISSION_HEADER]: call.admission } : {}),
    ...(body ? { "content-type": "application/json" } : {}),
    accept: call.accept ?? "application/json",
  };
  return new Promise((ok, fail) => {
    const req = request(
      url,
      {
        method: call.method,
        headers,
        ca: readFileSync(join(k.pki, "ca.crt")),
        checkServerIdentity: (_host, cert) => checkServerIdentity(k.apiAddress, cert),
        timeout: 60_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => ok({ status: res.statusCode ?? 0, contentType: String(res.headers["content-type"] ?? ""), text }));
        res.on("error", fail);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${call.method} ${call.path}: no answer within 60 s`)));
    req.on("error", fail);
    req.end(body);
  });
}
