import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { P256_NEW_KEY, opensslP256Ca } from "../../../test/support/operator-cas.ts";
import { EtcdGateway } from "./gateway.ts";
import { nodeFetch, tlsFetch, tlsHandshakeError } from "./tls-fetch.ts";

const TLS = resolve(import.meta.dirname, "../../../test/fixtures/tls");
const file = (name: string) => join(TLS, name);
let server: Server;
let url: string;

beforeAll(async () => {
  // An https endpoint that, like etcd with --client-cert-auth, wants a client certificate from its CA.
  server = createServer(
    { key: await read("server.key"), cert: await read("server.crt"), ca: await read("ca.crt"), requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({ header: { cluster_id: "14841639068965178418", member_id: "10276657743932975437" }, members: [], echo: JSON.parse(body || "{}") }),
        );
      });
    },
  );
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

async function read(name: string): Promise<Buffer> {
  const { readFile } = await import("node:fs/promises");
  return readFile(file(name));
}

describe("tlsFetch", () => {
  it("presents the client certificate and trusts the given CA, as etcdctl's --cacert/--cert/--key", async () => {
    const gateway = new EtcdGateway(url, { fetch: tlsFetch({ ca: file("ca.crt"), cert: file("client.crt"), key: file("client.key") }) });
    const list = await gateway.memberList();
    expect(list.ok && list.value.header.clusterId).toBe("14841639068965178418");
  });

  it("answers as fetch does where the callers rely on it: status, headers, a clone read beside the original", async () => {
    const fetch = tlsFetch({ ca: file("ca.crt"), cert: file("client.crt"), key: file("client.key") });
    const res = await fetch(`${url}/v3/cluster/member/list`, { method: "POST", body: JSON.stringify({ asked: 1 }) });
    expect([res.status, res.ok, res.headers.get("Content-Type")]).toEqual([200, true, "application/json"]);
    expect(JSON.parse(await res.clone().text())).toMatchObject({ echo: { asked: 1 } });
    expect(await res.json()).toMatchObject({ echo: { asked: 1 } });
  });

  it("without a client certificate the endpoint refuses, and the gateway calls it unreachable", async () => {
    const list = await new EtcdGateway(url, { timeoutMs: 3_000, fetch: tlsFetch({ ca: file("ca.crt") }) }).memberList();
    expect(list.ok).toBe(false);
    expect(!list.ok && list.error.kind).toBe("unavailable");
  });

  it("reads the files on every request: certificates written later are used once they exist", async () => {
    const dir = mkdtempSync(join(tmpdir(), "jb-tls-"));
    const files = { ca: join(dir, "ca.crt"), cert: join(dir, "client.crt"), key: join(dir, "client.key") };
    const gateway = new EtcdGateway(url, { timeoutMs: 3_000, fetch: tlsFetch(files) });
    const before = await gateway.memberList();
    expect(!before.ok && before.error.message).toMatch(/cannot read etcd's TLS files/);
    for (const name of ["ca.crt", "client.crt", "client.key"]) copyFileSync(file(name), join(dir, name));
    expect((await gateway.memberList()).ok).toBe(true);
  });

  it("words a certificate refused on either side with the file it came from, never as a bare code", async () => {
    // Another CA, made by openssl.
    const dir = mkdtempSync(join(tmpdir(), "jb-tls-other-"));
    opensslP256Ca(dir, { subject: "/CN=another CA", days: 2, cert: "other-ca.crt", key: "other-ca.key" });
    const host = new URL(url).host;

    // The endpoint refuses the client certificate: etcd (Go's crypto/tls) says so with an alert,
    // which Node reports by its code (a Node server would only hang up; e2e tests meet etcd's).
    const alert = Object.assign(new Error("error:0A000418:SSL routines::tlsv1 alert unknown ca"), { code: "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA" });
    expect(tlsHandshakeError(alert, "127.0.0.1:2379", { ca: "/pki/ca.crt", cert: "/pki/server.crt" })).toMatchObject({
      side: "ours",
      expiry: false,
      message: "127.0.0.1:2379 refused the client certificate /pki/server.crt (TLS alert: unknown CA)",
    });
    expect(tlsHandshakeError(Object.assign(new Error("x"), { code: "ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED" }), "h:1", {})?.expiry).toBe(true);
    // OpenSSL 3 names TLS 1.2 alerts "ssl/tls alert …" (etcd 3.4).
    expect(tlsHandshakeError(Object.assign(new Error("x"), { code: "ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE" }), "h:1", { cert: "/c.crt" })?.message).toBe(
      "h:1 refused the client certificate /c.crt (TLS alert: bad certificate)",
    );
    expect(tlsHandshakeError(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }), "h:1", {})).toBeNull();
    // A verification failure Node has no name for (a CA's name constraints).
    expect(tlsHandshakeError(Object.assign(new Error("permitted subtree violation"), { code: "UNSPECIFIED" }), "h:1", { ca: "/ca.crt" })?.message).toBe(
      "the certificate of h:1 does not verify against /ca.crt: permitted subtree violation (UNSPECIFIED)",
    );

    // This side cannot verify the endpoint's certificate against another CA.
    const theirs = { ca: join(dir, "other-ca.crt"), cert: file("client.crt"), key: file("client.key") };
    const unverified = await tlsFetch(theirs)(`${url}/v3/cluster/member/list`, { method: "POST", body: "{}" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(unverified).toMatchObject({
      side: "theirs",
      code: expect.stringMatching(/VERIFY|ISSUER|SELF_SIGNED/),
      message: expect.stringContaining(`the certificate of ${host} does not verify against ${join(dir, "other-ca.crt")}: `),
    });

    // The gateway passes the words on (the join API's 503 detail, the agent's waiting line).
    const list = await new EtcdGateway(url, { timeoutMs: 3_000, fetch: tlsFetch(theirs) }).memberList();
    expect(!list.ok && list.error.message).toContain(`${url}: the certificate of ${host} does not verify against ${join(dir, "other-ca.crt")}`);
  });
});

describe("tlsFetch with a server name", () => {
  // Like k0s's etcd: a server certificate that names only localhost (and 127.0.0.1's owner by name),
  // reached at an address it does not name. Made with openssl here, as an operator's would be.
  let named: Server;
  let namedUrl: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "jb-tls-name-"));
    const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
    opensslP256Ca(dir, { days: 2 });
    openssl("req", "-new", ...P256_NEW_KEY, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=etcd-server");
    writeFileSync(join(dir, "server.ext"), "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n");
    openssl(
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "2",
      "-out",
      "server.crt",
      "-extfile",
      "server.ext",
    );
    named = createServer({ key: readFileSync(join(dir, "server.key")), cert: readFileSync(join(dir, "server.crt")) }, (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ header: { cluster_id: "1", member_id: "2" }, members: [] }));
    });
    await new Promise<void>((ok) => named.listen(0, "127.0.0.1", ok));
    namedUrl = `https://127.0.0.1:${(named.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise<void>((ok) => named.close(() => ok())));

  it("checks the certificate against the server name, not the endpoint's address", async () => {
    const ask = (serverName?: string) =>
      new EtcdGateway(namedUrl, { timeoutMs: 3_000, fetch: tlsFetch({ ca: join(dir, "ca.crt"), ...(serverName ? { serverName } : {}) }) }).memberList();
    const byAddress = await ask();
    expect(!byAddress.ok && byAddress.error.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
    expect((await ask("localhost")).ok).toBe(true);
    const wrong = await ask("etcd.example");
    expect(!wrong.ok && wrong.error.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
  });
});

describe("nodeFetch", () => {
  it("sends the headers given in each form fetch takes (a record, pairs, a Headers), whatever their case, and one Content-Length of the body", async () => {
    // Plain HTTP on loopback that answers with the raw headers it got (names as sent, in order).
    const seen: string[][] = [];
    const plain = createHttpServer((req: IncomingMessage, res) => {
      seen.push(req.rawHeaders);
      req.resume();
      req.on("end", () => res.end("{}"));
    });
    await new Promise<void>((ok) => plain.listen(0, "127.0.0.1", ok));
    try {
      const at = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/v3/kv/range`;
      const fetch = nodeFetch();
      const body = JSON.stringify({ key: "ä" });
      const forms: RequestInit["headers"][] = [
        { Authorization: "token-1", "Content-Type": "application/json", "CONTENT-LENGTH": "1" },
        [
          ["Authorization", "token-1"],
          ["content-type", "application/json"],
        ],
        new Headers({ AUTHORIZATION: "token-1", "Content-Type": "application/json" }),
      ];
      for (const headers of forms) expect((await fetch(at, { method: "POST", headers, body })).status).toBe(200);
      const received = seen.map((raw) => {
        const pairs: [string, string][] = [];
        for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i].toLowerCase(), raw[i + 1]]);
        return pairs.filter(([name]) => ["authorization", "content-type", "content-length"].includes(name)).sort();
      });
      const expected = [
        ["authorization", "token-1"],
        ["content-length", String(Buffer.byteLength(body))],
        ["content-type", "application/json"],
      ];
      expect(received).toEqual([expected, expected, expected]);
    } finally {
      await new Promise<void>((ok) => plain.close(() => ok()));
    }
  });
});
