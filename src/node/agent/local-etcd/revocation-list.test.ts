import { createServer, type Server } from "node:http";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pkiFiles } from "../../pki/pki-dir.ts";
import { createCertificateAuthority, createRevocationList, readRevocationList, type CertificateAuthority } from "../../pki/x509.ts";
import { collectProgress } from "../core/agent-test-kit.ts";
import { RevocationListKeeper } from "./revocation-list.ts";

// A join API stand-in on loopback that serves one list and counts the requests for it.
let server: Server;
let url: string;
let served: Uint8Array;
let requests = 0;
let ca: CertificateAuthority;
let other: CertificateAuthority;
const dirs: string[] = [];

beforeAll(async () => {
  ca = (await createCertificateAuthority("revocation list test CA", 1)).ca;
  other = (await createCertificateAuthority("another CA", 1)).ca;
  served = (await createRevocationList(ca, [{ serial: "0a1b", revokedAt: Date.now() }], 7n)).der;
  server = createServer((req, res) => {
    requests++;
    if (req.url !== "/v1beta1/etcd/crl") return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/pkix-crl" }).end(Buffer.from(served));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function pkiDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "revocation-list-"));
  dirs.push(dir);
  return dir;
}

describe("a joiner's revocation list, asked for beside its add", () => {
  it("is checked against the CA the add brought and written before etcd starts, without asking again", async () => {
    const dir = pkiDir();
    const keeper = new RevocationListKeeper(dir, url, collectProgress().reporter);
    // No CA yet (a first join): the answer waits for the add.
    expect(await keeper.refresh()).toBe("no CA certificate yet to check the list against");
    const pending = keeper.fetchList();
    await pending; // answered; counted from here on: asking again would show
    requests = 0;
    writeFileSync(pkiFiles(dir).ca, ca.certPem); // what the add's answer writes
    await keeper.ensureBeforeStart(new AbortController().signal, pending);
    expect(requests).toBe(0);
    const written = await readRevocationList(new Uint8Array(readFileSync(pkiFiles(dir).crl)), ca.certPem);
    expect(written.number).toBe(7n);
    expect(written.serials).toEqual(["0a1b"]);
  });

  it("is refused when the cluster's CA did not sign it, and a failed request is said as such", async () => {
    const dir = pkiDir();
    writeFileSync(pkiFiles(dir).ca, other.certPem);
    const keeper = new RevocationListKeeper(dir, url, collectProgress().reporter);
    expect(await keeper.refresh(undefined, keeper.fetchList())).toMatch(/^the join API's revocation list is refused: /);
    expect(existsSync(pkiFiles(dir).crl)).toBe(false);

    const nowhere = new RevocationListKeeper(dir, `${url}/elsewhere`, collectProgress().reporter);
    expect(await nowhere.refresh(undefined, nowhere.fetchList())).toBe("the join API's revocation list: HTTP 404 (a join API without this path)");
  });
});
