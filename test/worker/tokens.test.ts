import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { describe, expect, it } from "vitest";
import { admin, bootstrapped, call, complete, enroll, ISSUER, peer, ticket } from "./helpers.ts";

async function jwks(cluster: string) {
  const r = await call("GET", `/v1/clusters/${cluster}/jwks.json`);
  expect(r.status).toBe(200);
  return r;
}

async function verifyWithJwks(cluster: string, token: string) {
  const { body } = await jwks(cluster);
  return jwtVerify(token, createLocalJWKSet(body), { issuer: ISSUER, audience: `etcd-join:${cluster}`, algorithms: ["EdDSA"], typ: "admission+jwt" });
}

const introspect = (cluster: string, token: string) => call("POST", `/v1/clusters/${cluster}/admissions/introspect`, { body: { token } });

describe("admission tokens", () => {
  it("verify with jose against the cluster's JWKS and carry every claim of the protocol", async () => {
    const token = await enroll("tok-verify");
    const boot = await ticket("tok-verify", token, "b0", peer(1));
    const { payload, protectedHeader } = await verifyWithJwks("tok-verify", boot.body.admission);
    expect(protectedHeader).toMatchObject({ alg: "EdDSA", typ: "admission+jwt" });
    expect(payload).toMatchObject({
      iss: ISSUER,
      aud: "etcd-join:tok-verify",
      sub: "b0",
      cluster: "tok-verify",
      ticket: boot.body.ticket,
      peer_url: peer(1),
      role: "bootstrap",
    } satisfies Partial<JWTPayload>);
    expect(payload.jti).toBe(boot.body.jti);
    expect(payload.exp! - payload.iat!).toBe(900);
    expect(payload.nbf).toBe(payload.iat);
    const keys = (await jwks("tok-verify")).body.keys;
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig", kid: protectedHeader.kid });
    expect(keys[0].d).toBeUndefined();
    expect((await jwks("tok-verify")).headers.get("cache-control")).toMatch(/max-age=\d+/);
  });

  it("are active at introspection while their ticket is admitted, and completed after", async () => {
    const token = await enroll("tok-active");
    const boot = await ticket("tok-active", token, "b0", peer(1));
    const active = await introspect("tok-active", boot.body.admission);
    expect(active.body).toMatchObject({ active: true, claims: { sub: "b0", jti: boot.body.jti } });
    await complete("tok-active", boot.body.admission, boot.body.ticket, "9");
    expect((await introspect("tok-active", boot.body.admission)).body).toEqual({ active: false, reason: "completed" });
    const list = await call("GET", "/v1/clusters/tok-active/revocations");
    expect(list.body.revoked).toEqual([{ jti: boot.body.jti, exp: expect.any(Number), reason: "completed" }]);
  });

  it("still verify after a key rotation, while new tokens carry the new kid", async () => {
    const { enrollment } = await bootstrapped("tok-rotate");
    const before = await ticket("tok-rotate", enrollment, "a", peer(2));
    const oldKid = decodeProtectedHeader(before.body.admission).kid;
    const rotated = await admin("POST", "tok-rotate/keys/rotate");
    expect(rotated.status).toBe(200);
    expect(rotated.body.retired).toBe(oldKid);
    expect(rotated.body.kid).not.toBe(oldKid);
    expect(rotated.body.keys).toEqual(expect.arrayContaining([oldKid, rotated.body.kid]));
    await verifyWithJwks("tok-rotate", before.body.admission);
    expect((await introspect("tok-rotate", before.body.admission)).body.active).toBe(true);
    await complete("tok-rotate", before.body.admission, before.body.ticket, "2");
    const after = await ticket("tok-rotate", enrollment, "b", peer(3));
    expect(decodeProtectedHeader(after.body.admission).kid).toBe(rotated.body.kid);
    await verifyWithJwks("tok-rotate", after.body.admission);
  });

  it("drop a retired key from the JWKS once every token it signed has expired", async () => {
    await enroll("tok-retire"); // no token signed yet: the old key may go at once
    const first = (await jwks("tok-retire")).body.keys[0].kid;
    const rotated = await admin("POST", "tok-retire/keys/rotate");
    expect(rotated.body.retired).toBe(first);
    const kids = (await jwks("tok-retire")).body.keys.map((k: { kid: string }) => k.kid);
    expect(kids).toEqual([rotated.body.kid]);
  });

  it("stop being active at once when revoked, and appear in the revocation list", async () => {
    const { enrollment } = await bootstrapped("tok-revoke");
    const a = await ticket("tok-revoke", enrollment, "a", peer(2));
    const b = await ticket("tok-revoke", enrollment, "b", peer(3));
    const before = await call("GET", "/v1/clusters/tok-revoke/revocations");
    const r = await admin("POST", `tok-revoke/admissions/${a.body.jti}/revoke`, { reason: "stolen laptop" });
    expect(r.body).toMatchObject({ jti: a.body.jti, status: "revoked", changed: true, node: "a" });
    expect((await introspect("tok-revoke", a.body.admission)).body).toEqual({ active: false, reason: "revoked" });
    const after = await call("GET", "/v1/clusters/tok-revoke/revocations");
    expect(after.body.revoked).toContainEqual({ jti: a.body.jti, exp: expect.any(Number), reason: "revoked" });
    expect(after.headers.get("etag")).not.toBe(before.headers.get("etag"));
    const cached = await call("GET", "/v1/clusters/tok-revoke/revocations", { headers: { "if-none-match": after.headers.get("etag")! } });
    expect(cached.status).toBe(304);
    // The ticket is revoked, the slot went to the next node, and the token is refused by the broker too.
    expect((await call("GET", `/v1/clusters/tok-revoke/tickets/${a.body.ticket}`, { token: enrollment })).body.state).toBe("revoked");
    expect((await call("GET", `/v1/clusters/tok-revoke/tickets/${b.body.ticket}`, { token: enrollment })).body.state).toBe("admitted");
    const hb = await call("POST", `/v1/clusters/tok-revoke/tickets/${a.body.ticket}/heartbeat`, { token: a.body.admission });
    expect(hb.status).toBe(410);
    expect(hb.body.code).toBe("admission_inactive");
    // Revoking again changes nothing; an unknown jti is a 404.
    expect((await admin("POST", `tok-revoke/admissions/${a.body.jti}/revoke`, { reason: "again" })).body.changed).toBe(false);
    expect((await admin("POST", "tok-revoke/admissions/adm_nope/revoke", { reason: "x" })).body.code).toBe("admission_not_found");
  });

  it("of cluster A are inactive for cluster B", async () => {
    const tokenA = await enroll("tok-a");
    await enroll("tok-b");
    const boot = await ticket("tok-a", tokenA, "b0", peer(1));
    expect((await introspect("tok-b", boot.body.admission)).body).toEqual({ active: false, reason: "invalid" });
    expect((await introspect("tok-nowhere", boot.body.admission)).body).toEqual({ active: false, reason: "unknown_cluster" });
    await expect(verifyWithJwks("tok-b", boot.body.admission)).rejects.toThrow();
    // Nor do they authenticate anything at cluster B's broker endpoints.
    const hb = await call("POST", `/v1/clusters/tok-b/tickets/${boot.body.ticket}/heartbeat`, { token: boot.body.admission });
    expect(hb.status).toBe(401);
  });

  it("are refused where an enrollment token is required, and vice versa", async () => {
    const token = await enroll("tok-kind");
    const boot = await ticket("tok-kind", token, "b0", peer(1));
    const wrong = await call("POST", "/v1/clusters/tok-kind/tickets", { token: boot.body.admission, body: { node: "x", peerURL: peer(5) } });
    expect(wrong.status).toBe(403);
    expect(wrong.body.code).toBe("wrong_token_kind");
    const hb = await call("POST", `/v1/clusters/tok-kind/tickets/${boot.body.ticket}/heartbeat`, { token });
    expect(hb.status).toBe(403);
    expect(hb.body.code).toBe("wrong_token_kind");
  });
});
