import { describe, expect, it } from "vitest";
import { ADMIN, call, enroll, peer, ticket, type Reply } from "./helpers.ts";

describe("authentication", () => {
  it("rate-limits failed authentications per client IP with 429 and Retry-After, then refuses even a right token from it", async () => {
    const from = (ip: string) => ({ "cf-connecting-ip": ip });
    const statuses: number[] = [];
    let limited: Reply | undefined;
    // 20 failures a minute are allowed; a window that ends during the loop only starts the count again.
    for (let i = 0; i < 45 && !limited; i++) {
      const r = await call("GET", "/v1/admin/clusters/auth-rl", { token: `guess-${i}`, headers: from("203.0.113.7") });
      statuses.push(r.status);
      if (r.status === 429) limited = r;
    }
    expect(limited).toBeDefined();
    expect(statuses.indexOf(429)).toBeGreaterThanOrEqual(20);
    expect(statuses.filter((s) => s !== 401 && s !== 429)).toEqual([]);
    expect(limited!.body.code).toBe("rate_limited");
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(limited!.headers.get("retry-after"))).toBeLessThanOrEqual(60);

    // A right guess from the throttled address is refused before any comparison: the admin token,
    // and an enrollment token, which is not even counted as used.
    const enrollment = await call("POST", "/v1/admin/clusters/auth-rl/enrollment-tokens", { token: ADMIN, body: {}, headers: from("203.0.113.8") });
    expect(enrollment.status).toBe(201);
    for (const r of [
      await call("POST", "/v1/admin/clusters/auth-rl/enrollment-tokens", { token: ADMIN, body: {}, headers: from("203.0.113.7") }),
      await call("GET", "/v1/admin/clusters", { token: ADMIN, headers: from("203.0.113.7") }),
      await call("POST", "/v1/clusters/auth-rl/tickets", { token: enrollment.body.token, body: { node: "n", peerURL: peer(1) }, headers: from("203.0.113.7") }),
      await call("GET", "/v1/clusters/auth-rl/tickets/tkt_x", { token: enrollment.body.token, headers: from("203.0.113.7") }),
    ]) {
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 429, code: "rate_limited" });
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number(r.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    }
    const tokens = await call("GET", "/v1/admin/clusters/auth-rl/enrollment-tokens", { token: ADMIN, headers: from("203.0.113.8") });
    expect(tokens.body.tokens.map((t: { uses: number }) => t.uses)).toEqual([0]);

    // Another address is not affected, whether it fails or authenticates.
    expect((await call("GET", "/v1/admin/clusters/auth-rl", { token: "guess", headers: from("203.0.113.9") })).status).toBe(401);
    expect(
      (
        await call("POST", "/v1/clusters/auth-rl/tickets", {
          token: enrollment.body.token,
          body: { node: "n", peerURL: peer(1) },
          headers: from("203.0.113.9"),
        })
      ).status,
    ).toBe(201);
    // Requests that need no credential are not refused either.
    expect((await call("GET", "/v1/clusters/auth-rl/jwks.json", { headers: from("203.0.113.7") })).status).toBe(200);
  });

  it("counts unknown enrollment tokens as failed authentications too", async () => {
    await enroll("auth-enr");
    let sawLimit = false;
    for (let i = 0; i < 30 && !sawLimit; i++) {
      const r = await call("POST", "/v1/clusters/auth-enr/tickets", {
        token: `jbe_guess${i}`,
        body: { node: "n", peerURL: peer(1) },
        headers: { "cf-connecting-ip": "203.0.113.10" },
      });
      sawLimit = r.status === 429;
    }
    expect(sawLimit).toBe(true);
  });

  it("never throttles a fleet that authenticates, even behind one address", async () => {
    const token = await enroll("auth-fleet");
    const statuses = new Set<number>();
    for (let i = 0; i < 40; i++) {
      const r = await call("POST", "/v1/clusters/auth-fleet/tickets", {
        token,
        body: { node: `n${i}`, peerURL: peer(i + 1) },
        headers: { "cf-connecting-ip": "198.51.100.1" },
      });
      statuses.add(r.status);
    }
    expect([...statuses].sort()).toEqual([201, 202]);
  });

  it("refuses revoked, expired and exhausted enrollment tokens", async () => {
    const created = await call("POST", "/v1/admin/clusters/auth-limits/enrollment-tokens", { token: ADMIN, body: { maxUses: 1, description: "one node" } });
    const once = created.body.token;
    expect((await ticket("auth-limits", once, "a", peer(1))).status).toBe(201);
    expect((await ticket("auth-limits", once, "a", peer(1))).status).toBe(200); // asking again is no new use
    const exhausted = await ticket("auth-limits", once, "b", peer(2));
    expect(exhausted.status).toBe(403);
    expect(exhausted.body.code).toBe("enrollment_token_exhausted");

    const other = await call("POST", "/v1/admin/clusters/auth-limits/enrollment-tokens", { token: ADMIN, body: {} });
    expect((await call("DELETE", `/v1/admin/clusters/auth-limits/enrollment-tokens/${other.body.id}`, { token: ADMIN })).body.state).toBe("revoked");
    const revoked = await ticket("auth-limits", other.body.token, "c", peer(3));
    expect(revoked.status).toBe(401);
    const list = await call("GET", "/v1/admin/clusters/auth-limits/enrollment-tokens", { token: ADMIN });
    expect(list.body.tokens.map((t: { state: string }) => t.state)).toEqual(["exhausted", "revoked"]);
    expect(JSON.stringify(list.body)).not.toContain(once);
  });

  it("counts one use per new ticket, not per request, and stops at maxUses", async () => {
    const limited = await call("POST", "/v1/admin/clusters/auth-uses/enrollment-tokens", { token: ADMIN, body: { maxUses: 3 } });
    const unlimited = await call("POST", "/v1/admin/clusters/auth-uses/enrollment-tokens", { token: ADMIN, body: {} });
    const uses = async () => {
      const list = await call("GET", "/v1/admin/clusters/auth-uses/enrollment-tokens", { token: ADMIN });
      return list.body.tokens.map((t: { uses: number; state: string }) => `${t.uses} ${t.state}`);
    };
    for (const node of ["a", "b", "c"]) expect([201, 202]).toContain((await ticket("auth-uses", limited.body.token, node, peer(node.charCodeAt(0)))).status);
    expect((await ticket("auth-uses", limited.body.token, "c", peer("c".charCodeAt(0)))).status).toBe(202); // the same ticket again
    expect(await uses()).toEqual(["3 exhausted", "0 active"]);
    expect((await ticket("auth-uses", limited.body.token, "d", peer(4))).body.code).toBe("enrollment_token_exhausted");
    for (const node of ["d", "e"]) expect((await ticket("auth-uses", unlimited.body.token, node, peer(node.charCodeAt(0)))).status).toBe(202);
    expect(await uses()).toEqual(["3 exhausted", "2 active"]);
  });
});
