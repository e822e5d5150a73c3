import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN, admin, auditActions, bootstrapped, call, enroll, OVER_HTTP, peer, ticket } from "./helpers.ts";

const CRED = "/v1/admin/credentials";
const as = (token: string) => (method: string, path: string, body?: unknown) =>
  call(method, path, { token, body, headers: { "cf-connecting-ip": "198.51.100.40" } });

async function createCredential(body: Record<string, unknown>) {
  const r = await call("POST", CRED, { token: ADMIN, body });
  if (r.status !== 201) throw new Error(`credential not created: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as { id: string; token: string; cluster: string | null };
}

/** Everything an admin can see of the broker and of one cluster, read with the admin token. */
async function snapshot(cluster: string) {
  const get = async (path: string) => {
    const r = await call("GET", path, { token: ADMIN });
    return { status: r.status, body: r.body };
  };
  const base = `/v1/admin/clusters/${cluster}`;
  return {
    clusters: await get("/v1/admin/clusters"),
    credentials: await get(CRED),
    status: await get(base),
    tickets: await get(`${base}/tickets?limit=1000`),
    tokens: await get(`${base}/enrollment-tokens`),
    audit: await get(`${base}/audit?limit=1000`),
    jwks: await get(`/v1/clusters/${cluster}/jwks.json`),
    ghosts: [await get("/v1/admin/clusters/ro-never"), await get("/v1/admin/clusters/ro-never-2")],
  };
}

describe("read-only admin credentials", () => {
  const cluster = "ro-main";
  let reader: { id: string; token: string };
  let enrollmentId: string;
  let jti: string;

  beforeAll(async () => {
    const { enrollment } = await bootstrapped(cluster);
    const admitted = await ticket(cluster, enrollment, "n2", peer(2));
    jti = admitted.body.jti ?? (await admin("GET", `${cluster}/tickets?state=admitted`)).body.tickets[0].jti;
    enrollmentId = (await admin("GET", `${cluster}/enrollment-tokens`)).body.tokens[0].id;
    reader = await createCredential({ readOnly: true, description: "prometheus" });
    expect(reader.token).toMatch(/^jbr_/);
  });

  const writes = (): [string, string, unknown?][] => [
    ["POST", `/v1/admin/clusters/${cluster}/enrollment-tokens`, {}],
    ["POST", "/v1/admin/clusters/ro-never/enrollment-tokens", {}],
    ["DELETE", `/v1/admin/clusters/${cluster}/enrollment-tokens/${enrollmentId}`],
    ["POST", `/v1/admin/clusters/${cluster}/admissions/${jti}/revoke`, { reason: "x" }],
    ["POST", `/v1/admin/clusters/${cluster}/pause`],
    ["POST", `/v1/admin/clusters/${cluster}/resume`],
    ["PUT", `/v1/admin/clusters/${cluster}/policy`, { maxQueue: 7 }],
    ["POST", `/v1/admin/clusters/${cluster}/keys/rotate`],
    ["POST", "/v1/admin/clusters/ro-never-2/adopt", { members: [{ node: "m1", peerURL: peer(9) }] }],
    ["DELETE", `/v1/admin/clusters/${cluster}/members/b0`],
    ["POST", `/v1/admin/clusters/${cluster}/bootstrap`, { node: "n2", reason: "x" }],
    ["POST", CRED, { readOnly: true }],
    ["POST", CRED, { readOnly: true, cluster }],
    ["DELETE", `${CRED}/${reader.id}`],
  ];

  it("is refused every write with 403 forbidden, and nothing changes", async () => {
    for (const [method, path, body] of writes()) {
      const before = await snapshot(cluster);
      const r = await as(reader.token)(method, path, body);
      expect({ method, path, status: r.status, code: r.body?.code }).toEqual({ method, path, status: 403, code: "forbidden" });
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(await snapshot(cluster)).toEqual(before);
    }
  });

  it("reads status, tickets, tokens, policy, audit, metrics and the cluster list", async () => {
    const read = as(reader.token);
    for (const path of ["", "/tickets", "/enrollment-tokens", "/policy", "/audit", "/metrics"]) {
      const r = await read("GET", `/v1/admin/clusters/${cluster}${path}`);
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
    }
    expect(String((await read("GET", `/v1/admin/clusters/${cluster}/metrics`)).body)).toContain("join_broker_tickets");
    expect((await read("GET", "/v1/admin/clusters")).body.clusters.map((c: { name: string }) => c.name)).toContain(cluster);
    expect((await read("GET", "/v1/admin/whoami")).body).toEqual({ readOnly: true, id: reader.id, cluster: null });
    expect((await call("GET", "/v1/admin/whoami", { token: ADMIN })).body).toEqual({ readOnly: false, cluster: null });
    // Listing credentials is the admin's alone.
    expect((await read("GET", CRED)).status).toBe(403);
  });

  it("limited to one cluster reads only that one", async () => {
    await enroll("ro-other");
    const scoped = await createCredential({ readOnly: true, cluster });
    const read = as(scoped.token);
    expect((await read("GET", `/v1/admin/clusters/${cluster}`)).status).toBe(200);
    for (const path of [
      "/v1/admin/clusters/ro-other",
      "/v1/admin/clusters/ro-other/audit",
      "/v1/admin/clusters/ro-other/metrics",
      "/v1/admin/clusters/ro-never",
    ]) {
      const r = await read("GET", path);
      expect({ path, status: r.status, code: r.body.code }).toEqual({ path, status: 403, code: "forbidden" });
    }
    expect((await read("GET", "/v1/admin/clusters")).body.clusters.map((c: { name: string }) => c.name)).toEqual([cluster]);
    expect((await read("GET", "/v1/admin/whoami")).body).toEqual({ readOnly: true, id: scoped.id, cluster });
  });

  it("is made and revoked by the admin, in the cluster's audit log; revoked, it is 401", async () => {
    const scoped = await createCredential({ readOnly: true, cluster, description: "on call" });
    const listed = (await call("GET", CRED, { token: ADMIN })).body.credentials.find((c: { id: string }) => c.id === scoped.id);
    expect(listed).toMatchObject({ id: scoped.id, readOnly: true, cluster, description: "on call", state: "active" });
    expect(JSON.stringify(listed)).not.toContain(scoped.token);
    const revoked = await call("DELETE", `${CRED}/${scoped.id}`, { token: ADMIN });
    expect(revoked.body).toMatchObject({ id: scoped.id, state: "revoked", changed: true });
    expect((await call("DELETE", `${CRED}/${scoped.id}`, { token: ADMIN })).body).toMatchObject({ changed: false });
    const r = await as(scoped.token)("GET", `/v1/admin/clusters/${cluster}`);
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 401, code: "unauthorized" });
    const entries = (await admin("GET", `${cluster}/audit?limit=1000`)).body.entries.filter((e: { subject: string }) => e.subject === scoped.id);
    expect(entries.map((e: { action: string }) => e.action)).toEqual(["admin_credential.created", "admin_credential.revoked"]);
    expect((await call("DELETE", `${CRED}/jbc_nothing`, { token: ADMIN })).status).toBe(404);
  });

  it("for a cluster that does not exist is refused, and nothing is stored", async () => {
    const before = (await call("GET", CRED, { token: ADMIN })).body;
    const r = await call("POST", CRED, { token: ADMIN, body: { readOnly: true, cluster: "ro-typo" } });
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 404, code: "unknown_cluster" });
    expect((await call("GET", CRED, { token: ADMIN })).body).toEqual(before);
    expect((await admin("GET", "ro-typo")).status).toBe(404);
    for (const body of [{}, { readOnly: false }, { readOnly: true, extra: 1 }]) expect((await call("POST", CRED, { token: ADMIN, body })).status).toBe(400);
  });

  it("an unknown jbr_ bearer is 401 like any wrong credential", async () => {
    const r = await as("jbr_notarealcredential")("GET", "/v1/admin/clusters");
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 401, code: "unauthorized" });
  });

  it("wrong jbr_ bearers count against the failed-authentication limit, then even a right one is refused", async () => {
    const from = { "cf-connecting-ip": "198.51.100.77" };
    let limited = false;
    for (let i = 0; i < 45 && !limited; i++) {
      const r = await call("GET", "/v1/admin/clusters", { token: `jbr_guess${i}`, headers: from });
      expect([401, 429]).toContain(r.status);
      limited = r.status === 429;
    }
    expect(limited).toBe(true);
    const right = await call("GET", "/v1/admin/clusters", { token: reader.token, headers: from });
    expect({ status: right.status, code: right.body.code }).toEqual({ status: 429, code: "rate_limited" });
  });

  // Reads the index's storage itself, which only the in-workerd run can reach (not over HTTP).
  it.skipIf(OVER_HTTP)("stores the hash of the secret, never the secret", async () => {
    const { env } = await import("cloudflare:workers");
    const { runInDurableObject } = await import("cloudflare:test");
    const { sha256Hex } = await import("../../src/broker/tokens/secrets.ts");
    const fresh = await createCredential({ readOnly: true, cluster });
    const dump = await runInDurableObject(env.JOIN_QUEUE.getByName("~clusters"), (_instance, state) => {
      const tables = state.storage.sql.exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`).toArray();
      return tables.map((t) => state.storage.sql.exec(`SELECT * FROM "${t.name}"`).toArray());
    });
    const text = JSON.stringify(dump);
    expect(text).not.toContain(fresh.token);
    expect(text).not.toContain(fresh.token.slice(4));
    expect(text).toContain(await sha256Hex(fresh.token));
    const clusterDump = await runInDurableObject(env.JOIN_QUEUE.getByName(cluster), (_instance, state) => {
      const tables = state.storage.sql
        .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'`)
        .toArray();
      return tables.map((t) => state.storage.sql.exec(`SELECT * FROM "${t.name}"`).toArray());
    });
    expect(JSON.stringify(clusterDump)).not.toContain(fresh.token.slice(4));
    expect(await auditActions(cluster)).toContain("admin_credential.created");
  });
});
