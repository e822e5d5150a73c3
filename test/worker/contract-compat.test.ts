/**
 * A fleet is never upgraded at once: agents and join APIs written against contract v1.0 keep
 * talking to a newer broker. These are their requests exactly as v1.0 sent them (paths, bodies,
 * headers, nothing newer), and the fields v1.0 reads from each answer. docs/compatibility.md is
 * the policy this checks. A renamed path or field, a new required request field, or a changed
 * status fails here.
 */
import { describe, expect, it } from "vitest";
import { ADMIN, call } from "./helpers.ts";

const C = "compat-v10";
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const TICKET_FIELDS_V10 = ["ticket", "cluster", "node", "peerURL", "state", "role"];

describe("contract v1.0 requests against this broker", () => {
  it("an admin, two agents and a join API, as v1.0 wrote them, get v1.0's answers", async () => {
    // Admin (v1.0 body: ttlSeconds, maxUses, description only).
    const created = await call("POST", `/v1/admin/clusters/${C}/enrollment-tokens`, {
      token: ADMIN,
      body: { ttlSeconds: 3600, maxUses: 3, description: "v1.0 admin" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual(
      expect.objectContaining({ id: expect.stringMatching(/^enr_/), token: expect.stringMatching(/^jbe_/), expiresAt: expect.stringMatching(RFC3339) }),
    );
    const enrollment: string = created.body.token;

    // Agent 1: the first ticket bootstraps, admitted at once.
    const boot = await call("POST", `/v1/clusters/${C}/tickets`, { token: enrollment, body: { node: "old-1", peerURL: "https://10.1.0.1:2380" } });
    expect(boot.status).toBe(201);
    for (const f of [...TICKET_FIELDS_V10, "admission", "leaseExpiresAt"]) expect(boot.body, f).toHaveProperty(f);
    expect(boot.body).toMatchObject({ state: "admitted", role: "bootstrap", leaseExpiresAt: expect.stringMatching(RFC3339) });

    // Agent 2 queues: 202, Retry-After, position and retryAfter.
    const queued = await call("POST", `/v1/clusters/${C}/tickets`, { token: enrollment, body: { node: "old-2", peerURL: "https://10.1.0.2:2380" } });
    expect(queued.status).toBe(202);
    expect(Number(queued.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(queued.body).toMatchObject({ state: "queued", role: "join", position: 1, retryAfter: expect.any(Number) });

    // Agent 1 heartbeats and completes with its admission token.
    expect((await call("POST", `/v1/clusters/${C}/tickets/${boot.body.ticket}/heartbeat`, { token: boot.body.admission })).status).toBe(200);
    const done = await call("POST", `/v1/clusters/${C}/tickets/${boot.body.ticket}/complete`, {
      token: boot.body.admission,
      body: { memberID: "10276657743932975437" },
    });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ ticket: boot.body.ticket, state: "joined" });

    // Agent 2's poll (v1.0: ?wait=S) now shows its admission.
    const admitted = await call("GET", `/v1/clusters/${C}/tickets/${queued.body.ticket}?wait=5`, { token: enrollment });
    expect(admitted.status).toBe(200);
    expect(admitted.body).toMatchObject({ state: "admitted", role: "join", admission: expect.any(String), leaseExpiresAt: expect.stringMatching(RFC3339) });
    const admission: string = admitted.body.admission;

    // The join API: keys, introspection, the revocation list, as v1.0 read them.
    const jwks = await call("GET", `/v1/clusters/${C}/jwks.json`);
    expect(jwks.status).toBe(200);
    expect(jwks.body.keys[0]).toMatchObject({ kty: "OKP", crv: "Ed25519", kid: expect.any(String), x: expect.any(String) });
    const active = await call("POST", `/v1/clusters/${C}/admissions/introspect`, { body: { token: admission } });
    expect(active.status).toBe(200);
    expect(active.body).toMatchObject({
      active: true,
      claims: { sub: "old-2", aud: `etcd-join:${C}`, cluster: C, ticket: queued.body.ticket, peer_url: "https://10.1.0.2:2380", role: "join" },
    });
    for (const claim of ["iss", "jti", "iat", "nbf", "exp"]) expect(active.body.claims, claim).toHaveProperty(claim);

    // An admin revokes it (v1.0 body: reason); the list and introspection say so.
    const revoked = await call("POST", `/v1/admin/clusters/${C}/admissions/${active.body.claims.jti}/revoke`, { token: ADMIN, body: { reason: "compat" } });
    expect(revoked.status).toBe(200);
    const list = await call("GET", `/v1/clusters/${C}/revocations`);
    expect(list.status).toBe(200);
    expect(list.headers.get("etag")).toBeTruthy();
    expect(list.body.revoked).toEqual(expect.arrayContaining([expect.objectContaining({ jti: active.body.claims.jti, exp: expect.any(Number) })]));
    expect((await call("POST", `/v1/clusters/${C}/admissions/introspect`, { body: { token: admission } })).body).toMatchObject({
      active: false,
      reason: "revoked",
    });

    // Agent 2 asks again: a new ticket at the back; then abandons it with its enrollment token.
    const again = await call("POST", `/v1/clusters/${C}/tickets`, { token: enrollment, body: { node: "old-2", peerURL: "https://10.1.0.2:2380" } });
    expect([200, 201, 202]).toContain(again.status);
    expect(again.body.ticket).not.toBe(queued.body.ticket);
    const abandoned = await call("DELETE", `/v1/clusters/${C}/tickets/${again.body.ticket}`, { token: enrollment });
    expect(abandoned.status).toBe(200);
    expect(abandoned.body).toMatchObject({ state: "abandoned" });

    // Admin reads: status, tickets, audit; pause, resume, policy, keys, as v1.0 sent them.
    const status = await call("GET", `/v1/admin/clusters/${C}`, { token: ADMIN });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      bootstrapped: true,
      paused: false,
      policy: { maxInFlight: expect.any(Number), leaseSeconds: expect.any(Number), admissionTtlSeconds: expect.any(Number), maxQueue: expect.any(Number) },
    });
    expect((await call("GET", `/v1/admin/clusters/${C}/tickets?state=joined`, { token: ADMIN })).status).toBe(200);
    expect((await call("POST", `/v1/admin/clusters/${C}/pause`, { token: ADMIN })).status).toBe(200);
    expect((await call("POST", `/v1/admin/clusters/${C}/resume`, { token: ADMIN })).status).toBe(200);
    const policy = await call("PUT", `/v1/admin/clusters/${C}/policy`, {
      token: ADMIN,
      body: { maxInFlight: 1, leaseSeconds: 120, admissionTtlSeconds: 900, maxQueue: 100 },
    });
    expect(policy.status).toBe(200);
    expect((await call("POST", `/v1/admin/clusters/${C}/keys/rotate`, { token: ADMIN })).status).toBe(200);
    const audit = await call("GET", `/v1/admin/clusters/${C}/audit?after=0&limit=100`, { token: ADMIN });
    expect(audit.status).toBe(200);
    expect(audit.body.entries[0]).toEqual(
      expect.objectContaining({
        seq: expect.any(Number),
        time: expect.any(String),
        actor: expect.any(String),
        action: expect.any(String),
        subject: expect.any(String),
        detail: expect.any(Object),
      }),
    );
  });

  it("answers v1.0's errors with the same status and code", async () => {
    const bad = await call("POST", `/v1/clusters/${C}/tickets`, { token: "jbe_wrong", body: { node: "x", peerURL: "https://10.1.0.9:2380" } });
    expect([bad.status, bad.headers.get("content-type"), typeof bad.body.code]).toEqual([401, "application/problem+json", "string"]);
    const unknownField = await call("POST", `/v1/admin/clusters/${C}/enrollment-tokens`, { token: ADMIN, body: { ttlSeconds: 3600, futureField: true } });
    expect([unknownField.status, unknownField.body.code]).toEqual([400, "invalid_request"]);
    const noCluster = await call("GET", `/v1/admin/clusters/compat-nowhere`, { token: ADMIN });
    expect([noCluster.status, noCluster.body.code]).toEqual([404, "unknown_cluster"]);
  });
});
