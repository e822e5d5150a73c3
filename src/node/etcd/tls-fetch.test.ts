import { copyFileSync, mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdGateway } from "./gateway.ts";
import { tlsFetch } from "./tls-fetch.ts";

const TLS = resolve(import.meta.dirname, "../../../test/fixtures/tls");
const file = (name: string) => join(TLS, name);
let server: Server;
let url: string;

beforeAll(async () => {
  // An https endpoint that, like etcd with --client-cert-auth, wants a client certificate from its CA.
  server = createServer({ key: await read("server.key"), cert: await read("server.crt"), ca: await read("ca.crt"), requestCert: true, rejectUnauthorized: true }, (req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ header: { cluster_id: "14841639068965178418", member_id: "10276657743932975437" }, members: [], echo: JSON.parse(body || "{}") }));
    });
  });
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
});
