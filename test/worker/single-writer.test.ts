/**
 * The single writer under time and concurrency: expiry by moving the object's clock (never by
 * sleeping), the alarm on its own, token lifecycle, key retirement, retention, and races in the
 * style of a conformance suite (many requests at once; each round asserts the invariant over the
 * final state and the audit log).
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { abandon, admin, bootstrapped, call, complete, enroll, heartbeat, ISSUER, peer, poll, ticket } from "./helpers.ts";
import { advance, advanceTo, stub } from "./object-seams.ts";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";
import { admissionClaims } from "../../src/shared/protocol/claims.ts";
import { importPrivateKey, signAdmission } from "../../src/broker/tokens/keys.ts";
import { classifyError, OVERLOADED_RETRY_AFTER_SECONDS, TRANSIENT_RETRY_AFTER_SECONDS } from "../../src/broker/app.ts";

const introspect = (cluster: string, token: string) => call("POST", `/v1/clusters/${cluster}/admissions/introspect`, { body: { token } });
const audit = async (cluster: string) =>
  (await admin("GET", `${cluster}/audit?limit=1000`)).body.entries as { action: string; subject: string; detail: Record<string, unknown> }[];
const states = async (cluster: string) => {
  const r = await admin("GET", `${cluster}/tickets?limit=1000`);
  return Object.fromEntries(r.body.tickets.map((t: { node: string; state: string }) => [t.node, t.state])) as Record<string, string>;
};

describe("time, by the object's clock", () => {
  it("ends an unheartbeated lease once the clock passes it: the token is refused 410 expired and the next node is admitted", async () => {
    const { enrollment } = await bootstrapped("sw-lease");
    const a = await ticket("sw-lease", enrollment, "a", peer(2));
    const b = await ticket("sw-lease", enrollment, "b", peer(3));
    expect([a.body.state, b.body.state]).toEqual(["admitted", "queued"]);
    const beat = await heartbeat("sw-lease", a.body.admission, a.body.ticket);
    expect(beat.status).toBe(200);
    const leaseEnd = Date.parse(beat.body.leaseExpiresAt);
    await advanceTo("sw-lease", leaseEnd - 1_000);
    expect((await poll("sw-lease", enrollment, a.body.ticket)).body.state, "inside the lease").toBe("admitted");
    await advanceTo("sw-lease", leaseEnd + 1_000);
    const hb = await heartbeat("sw-lease", a.body.admission, a.body.ticket);
    expect(hb.status).toBe(410);
    expect(hb.body).toMatchObject({ code: "admission_inactive", reason: "expired" });
    expect(await states("sw-lease")).toMatchObject({ a: "expired", b: "admitted" });
  });

  it("with lazy settling disabled, only the alarm ends a lease", async () => {
    const { enrollment } = await bootstrapped("sw-alarm");
    const a = await ticket("sw-alarm", enrollment, "a", peer(2));
    await ticket("sw-alarm", enrollment, "b", peer(3));
    await runInDurableObject(stub("sw-alarm"), (q: JoinQueue) => {
      q.settleLazily = false;
      q.clock.advance(120_000);
    });
    // Reads and writes after the lease end do not end it: nothing but the alarm may.
    expect((await poll("sw-alarm", enrollment, a.body.ticket)).body.state).toBe("admitted");
    expect((await admin("GET", "sw-alarm")).body.queue).toEqual({ queued: 1, admitted: 1 });
    expect((await introspect("sw-alarm", a.body.admission)).body.active).toBe(true);
    expect(await runDurableObjectAlarm(stub("sw-alarm"))).toBe(true);
    expect(await states("sw-alarm")).toMatchObject({ a: "expired", b: "admitted" });
    expect((await introspect("sw-alarm", a.body.admission)).body).toEqual({ active: false, reason: "expired" });
    expect((await audit("sw-alarm")).filter((e) => e.action === "lease.expired").map((e) => e.subject)).toEqual([a.body.ticket]);
  });

  it("refuses an enrollment token once its TTL has passed, for new tickets and for reading its own", async () => {
    const token = await enroll("sw-enr", { ttlSeconds: 60 });
    const boot = await ticket("sw-enr", token, "b0", peer(1));
    expect(boot.status).toBe(201);
    await advance("sw-enr", 61_000);
    const late = await ticket("sw-enr", token, "n1", peer(2));
    expect(late.status).toBe(401);
    expect((await poll("sw-enr", token, boot.body.ticket)).status).toBe(401);
    expect((await admin("GET", "sw-enr/enrollment-tokens")).body.tokens[0].state).toBe("expired");
  });
});

describe("admission tokens act only while current and active", () => {
  it("answers reads, heartbeats, completes and abandons with an ended admission 410 with the reason", async () => {
    const { enrollment } = await bootstrapped("sw-410");
    const a = await ticket("sw-410", enrollment, "a", peer(2));
    const revoked = await admin("POST", `sw-410/admissions/${a.body.jti}/revoke`, { reason: "test" });
    expect(revoked.body.changed).toBe(true);
    for (const r of [
      await poll("sw-410", a.body.admission, a.body.ticket),
      await heartbeat("sw-410", a.body.admission, a.body.ticket),
      await complete("sw-410", a.body.admission, a.body.ticket, "77"),
      await abandon("sw-410", a.body.admission, a.body.ticket),
    ]) {
      expect(r.status, JSON.stringify(r.body)).toBe(410);
      expect(r.body).toMatchObject({ code: "admission_inactive", reason: "revoked" });
      expect(r.headers.get("content-type")).toMatch(/problem\+json/);
    }
    // The enrollment token that holds the ticket still reads it (and learns why it ended).
    expect((await poll("sw-410", enrollment, a.body.ticket)).body).toMatchObject({ state: "revoked" });
  });

  it("does not let an old, revoked bootstrap token read the bootstrap ticket returned to its node", async () => {
    const token = await enroll("sw-boot");
    const first = await ticket("sw-boot", token, "b0", peer(1));
    await admin("POST", `sw-boot/admissions/${first.body.jti}/revoke`, { reason: "test" });
    const again = await ticket("sw-boot", token, "b0", peer(1));
    expect(again.body).toMatchObject({ ticket: first.body.ticket, state: "admitted", role: "bootstrap" });
    expect(again.body.admission).not.toBe(first.body.admission);
    const old = await poll("sw-boot", first.body.admission, first.body.ticket);
    expect(old.status).toBe(410);
    expect(old.body.admission).toBeUndefined();
    expect(JSON.stringify(old.body)).not.toContain(again.body.admission);
    expect((await poll("sw-boot", again.body.admission, again.body.ticket)).status).toBe(200);
  });

  it("introspects `unknown` for an authentic token the broker never issued, and `superseded` for one its ticket no longer holds", async () => {
    const { enrollment } = await bootstrapped("sw-reasons");
    const a = await ticket("sw-reasons", enrollment, "a", peer(2));
    // Signed with the cluster's own key, inside the object: authentic, but no admission row.
    const forged = await runInDurableObject(stub("sw-reasons"), async (_q: JoinQueue, state) => {
      const key = state.storage.sql.exec<{ kid: string; private_jwk: string }>(`SELECT kid, private_jwk FROM signing_keys WHERE retired_at IS NULL`).one();
      const claims = admissionClaims({
        issuer: ISSUER,
        cluster: "sw-reasons",
        node: "a",
        ticket: a.body.ticket,
        peerURL: peer(2),
        role: "join",
        jti: "adm_never_issued_xx",
        nowMs: Date.now(),
        ttlSeconds: 300,
      });
      return signAdmission(claims, key.kid, await importPrivateKey(JSON.parse(key.private_jwk)));
    });
    expect((await introspect("sw-reasons", forged)).body).toEqual({ active: false, reason: "unknown" });
    expect((await poll("sw-reasons", forged, a.body.ticket)).body).toMatchObject({ status: 410, reason: "unknown" });
    // A ticket pointing at another admission (what a lost write would leave) makes this one superseded.
    await runInDurableObject(stub("sw-reasons"), (_q: JoinQueue, state) => {
      state.storage.sql.exec(`UPDATE tickets SET jti = 'adm_other' WHERE id = ?`, a.body.ticket);
    });
    expect((await introspect("sw-reasons", a.body.admission)).body).toEqual({ active: false, reason: "superseded" });
    expect((await heartbeat("sw-reasons", a.body.admission, a.body.ticket)).body).toMatchObject({ status: 410, reason: "superseded" });
  });
});

describe("signing keys", () => {
  it("keeps a retired key that signed tokens in the JWKS until the last of them expires, then deletes it", async () => {
    const { enrollment } = await bootstrapped("sw-keys", { leaseSeconds: 30, admissionTtlSeconds: 60 });
    const a = await ticket("sw-keys", enrollment, "a", peer(2));
    const oldKid = decodeProtectedHeader(a.body.admission).kid;
    const rotated = await admin("POST", "sw-keys/keys/rotate");
    expect(rotated.body.retired).toBe(oldKid);
    const kids = async () => (await call("GET", "/v1/clusters/sw-keys/jwks.json")).body.keys.map((k: { kid: string }) => k.kid);
    expect(await kids()).toContain(oldKid);
    // The retired key still verifies the token it signed, which is still active.
    const jwks = createLocalJWKSet((await call("GET", "/v1/clusters/sw-keys/jwks.json")).body);
    await expect(jwtVerify(a.body.admission, jwks, { audience: "etcd-join:sw-keys" })).resolves.toBeTruthy();
    expect((await heartbeat("sw-keys", a.body.admission, a.body.ticket)).status).toBe(200);
    const exp = Date.parse(a.body.admissionExpiresAt);
    await advanceTo("sw-keys", exp - 1_000);
    expect(await kids(), "before the last token's exp").toContain(oldKid);
    await advanceTo("sw-keys", exp + 1_000);
    expect(await kids(), "after the last token's exp").toEqual([rotated.body.kid]);
    await advance("sw-keys", 3_600_000);
    await runDurableObjectAlarm(stub("sw-keys"));
    const stored = await runInDurableObject(stub("sw-keys"), (_q: JoinQueue, state) =>
      state.storage.sql
        .exec<{ kid: string }>(`SELECT kid FROM signing_keys`)
        .toArray()
        .map((r) => r.kid),
    );
    expect(stored, "the retention sweep deleted the retired key").toEqual([rotated.body.kid]);
  });
});

describe("retention", () => {
  it("the alarm deletes ended tickets, ended admissions, expired enrollment tokens and old audit rows; memberships and counters stay", async () => {
    const { enrollment } = await bootstrapped("sw-retain");
    const shortLived = await enroll("sw-retain", { ttlSeconds: 60 });
    for (let i = 0; i < 5; i++) {
      const t = await ticket("sw-retain", enrollment, `n${i}`, peer(10 + i));
      expect((await heartbeat("sw-retain", t.body.admission, t.body.ticket)).status).toBe(200);
      expect((await complete("sw-retain", t.body.admission, t.body.ticket, String(100 + i))).status).toBe(200);
    }
    const q = await ticket("sw-retain", enrollment, "gone", peer(30));
    await abandon("sw-retain", enrollment, q.body.ticket);
    const live = await ticket("sw-retain", shortLived, "live", peer(31));
    expect(live.body.state).toBe("admitted");
    const actions = (await audit("sw-retain")).map((e) => e.action);
    expect(actions, "heartbeats write no audit rows").not.toContain("lease.extended");
    const metricsBefore = (await admin("GET", "sw-retain/metrics")).body as string;

    const rows = () =>
      runInDurableObject(stub("sw-retain"), (_q: JoinQueue, state) => {
        const n = (table: string) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table}`).one().n;
        return {
          tickets: n("tickets"),
          admissions: n("admissions"),
          enrollment_tokens: n("enrollment_tokens"),
          audit_log: n("audit_log"),
          members: n("members"),
        };
      });
    // Inside every window nothing goes.
    await advance("sw-retain", 6 * 86_400_000);
    expect(await runDurableObjectAlarm(stub("sw-retain"))).toBe(true);
    expect(await rows()).toMatchObject({ tickets: 8, admissions: 8, enrollment_tokens: 2, members: 6 });
    // The live ticket keeps its place; the rest of the history passes its 7-day window.
    await runInDurableObject(stub("sw-retain"), (q: JoinQueue) => {
      q.settleLazily = false; // keep "live" admitted: this test is about history, not leases
      q.clock.advance(2 * 86_400_000);
    });
    await runDurableObjectAlarm(stub("sw-retain"));
    const after = await rows();
    expect(after, "ended tickets, ended admissions and the expired token are gone").toMatchObject({
      tickets: 1,
      admissions: 1,
      enrollment_tokens: 1,
      members: 6,
    });
    expect((await admin("GET", "sw-retain")).body.members).toHaveLength(6);
    // Audit rows go after 30 days, but the newest stays so that seq keeps increasing.
    await advance("sw-retain", 30 * 86_400_000);
    await runDurableObjectAlarm(stub("sw-retain"));
    expect((await rows()).audit_log).toBe(1);
    const metricsAfter = (await admin("GET", "sw-retain/metrics")).body as string;
    const joins = (m: string) => /join_broker_joins_total\{[^}]*\} (\d+)/.exec(m)?.[1];
    expect(joins(metricsAfter), "counters survive the history they counted").toBe(joins(metricsBefore));
    expect(joins(metricsAfter)).toBe("6");
    expect(metricsAfter).toMatch(/join_broker_database_bytes\{cluster="sw-retain"\} \d+/);
    expect((await admin("GET", "sw-retain")).body.databaseSizeBytes).toBeGreaterThan(0);
    const next = await admin("POST", "sw-retain/pause");
    expect(next.status).toBe(200);
    const entries = await audit("sw-retain");
    expect(entries.at(-1)!.action).toBe("cluster.paused");
  });
});

describe("errors that mean what they say", () => {
  it("answers an exception from the object's own code 500 with a correlation id, never 503", async () => {
    await bootstrapped("sw-500");
    await runInDurableObject(stub("sw-500"), (_q: JoinQueue, state) => {
      state.storage.sql.exec(`DROP TABLE counters`);
    });
    const r = await admin("GET", "sw-500/metrics");
    expect(r.status).toBe(500);
    expect(r.headers.get("retry-after")).toBeNull();
    expect(r.body).toMatchObject({ code: "internal_error" });
    expect(r.body.correlationId).toBe(r.headers.get("x-request-id") ?? r.body.correlationId);
    expect(r.body.correlationId).toMatch(/\S{8,}/);
  });

  it("decides transient and overloaded runtime errors by their properties, not their text", () => {
    expect(classifyError(Object.assign(new Error("x"), { remote: true }))).toBe("internal");
    expect(classifyError(Object.assign(new Error("x"), { retryable: true }))).toBe("transient");
    expect(classifyError(Object.assign(new Error("x"), { retryable: true, overloaded: true }))).toBe("overloaded");
    expect(classifyError(new Error("Durable Object is overloaded. retryable"))).toBe("internal");
    expect(OVERLOADED_RETRY_AFTER_SECONDS).toBeGreaterThan(TRANSIENT_RETRY_AFTER_SECONDS);
  });
});

describe("races (each round asserts the invariant over the final state and the audit log)", () => {
  const ROUNDS = 100;

  it("50 requests at once for one node make one ticket", async () => {
    const { enrollment } = await bootstrapped("sw-herd", { maxQueue: 1000 });
    for (let round = 0; round < ROUNDS; round++) {
      const node = `n${round}`;
      const answers = await Promise.all(Array.from({ length: 50 }, () => ticket("sw-herd", enrollment, node, peer(round % 250))));
      expect(
        answers.every((r) => r.status >= 200 && r.status < 300),
        JSON.stringify(answers.find((r) => r.status >= 300)?.body),
      ).toBe(true);
      expect(new Set(answers.map((r) => r.body.ticket)).size, `round ${round}`).toBe(1);
    }
    const created = (await audit("sw-herd")).filter((e) => e.action === "ticket.created");
    expect(new Set(created.map((e) => e.detail.node)).size).toBe(ROUNDS + 1);
    expect(created, "one creation per node").toHaveLength(ROUNDS + 1);
    expect(Object.keys(await states("sw-herd"))).toHaveLength(ROUNDS + 1);
  });

  it("complete racing an admin revoke: exactly one wins, and the member exists exactly when the ticket joined", async () => {
    const { enrollment } = await bootstrapped("sw-race-cr");
    let joined = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const node = `n${round}`;
      const t = await ticket("sw-race-cr", enrollment, node, peer(round % 250));
      expect(t.body.state).toBe("admitted");
      const [done, revoked] = await Promise.all([
        complete("sw-race-cr", t.body.admission, t.body.ticket, String(1000 + round)),
        admin("POST", `sw-race-cr/admissions/${t.body.jti}/revoke`, { reason: "race" }),
      ]);
      const final = (await poll("sw-race-cr", enrollment, t.body.ticket)).body.state;
      if (done.status === 200) {
        joined++;
        expect([final, revoked.body.changed, revoked.body.status], `round ${round}`).toEqual(["joined", false, "completed"]);
      } else {
        expect([done.status, done.body.reason, final, revoked.body.changed], `round ${round}`).toEqual([410, "revoked", "revoked", true]);
      }
    }
    const status = (await admin("GET", "sw-race-cr")).body;
    const entries = await audit("sw-race-cr");
    const joinedTickets = new Set(entries.filter((e) => e.action === "ticket.joined").map((e) => e.subject));
    const revokedJtis = entries.filter((e) => e.action === "admission.revoked");
    expect(status.members).toHaveLength(joined + 1);
    expect(joinedTickets.size).toBe(joined + 1);
    expect(revokedJtis).toHaveLength(ROUNDS - joined);
    expect(status.queue.admitted).toBe(0);
  });

  it("rotateKeys racing an admission never issues a token under a key that leaves the JWKS", async () => {
    const { enrollment } = await bootstrapped("sw-race-rot");
    let current = await ticket("sw-race-rot", enrollment, "n0", peer(2));
    const next = await ticket("sw-race-rot", enrollment, "n1", peer(3));
    expect(next.body.state).toBe("queued");
    for (let round = 1; round <= ROUNDS; round++) {
      const waiting = round < ROUNDS ? await ticket("sw-race-rot", enrollment, `n${round + 1}`, peer(round % 250)) : null;
      const [, rotated] = await Promise.all([
        complete("sw-race-rot", current.body.admission, current.body.ticket, String(round)),
        admin("POST", "sw-race-rot/keys/rotate"),
      ]);
      expect(rotated.status).toBe(200);
      const admitted = (await admin("GET", "sw-race-rot")).body.inFlight;
      expect(admitted, `round ${round}`).toHaveLength(1);
      current = await poll("sw-race-rot", enrollment, admitted[0].ticket);
      const kid = decodeProtectedHeader(current.body.admission).kid;
      // Its key stays published, so that a join API accepts the token; after one more rotation too.
      await admin("POST", "sw-race-rot/keys/rotate");
      const keys = (await call("GET", "/v1/clusters/sw-race-rot/jwks.json")).body;
      expect(
        keys.keys.map((k: { kid: string }) => k.kid),
        `round ${round}`,
      ).toContain(kid);
      await expect(jwtVerify(current.body.admission, createLocalJWKSet(keys), { audience: "etcd-join:sw-race-rot" })).resolves.toBeTruthy();
      expect((await introspect("sw-race-rot", current.body.admission)).body.active, `round ${round}`).toBe(true);
      void waiting;
    }
    const rotations = (await audit("sw-race-rot")).filter((e) => e.action === "keys.rotated");
    expect(rotations).toHaveLength(2 * ROUNDS);
  });

  it("heartbeat racing lease expiry: the ticket is expired exactly when the heartbeat was refused", async () => {
    const { enrollment } = await bootstrapped("sw-race-hb", { leaseSeconds: 10 });
    let extended = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const t = await ticket("sw-race-hb", enrollment, `n${round}`, peer(round % 250));
      expect(t.body.state).toBe("admitted");
      // Right at the lease end: the alarm and the heartbeat race for it.
      await runInDurableObject(stub("sw-race-hb"), (q: JoinQueue) => {
        q.settleLazily = false;
        q.clock.advance(Date.parse(t.body.leaseExpiresAt) - q.clock.now() + (round % 2));
      });
      const [hb] = await Promise.all([heartbeat("sw-race-hb", t.body.admission, t.body.ticket), runDurableObjectAlarm(stub("sw-race-hb"))]);
      const after = (await poll("sw-race-hb", enrollment, t.body.ticket)).body;
      if (hb.status === 200) {
        extended++;
        expect(after.state, `round ${round}`).toBe("admitted");
        expect(Date.parse(after.leaseExpiresAt)).toBeGreaterThan(Date.parse(t.body.leaseExpiresAt));
        await complete("sw-race-hb", t.body.admission, t.body.ticket, String(round));
      } else {
        expect([hb.status, hb.body.reason, after.state], `round ${round}`).toEqual([410, "expired", "expired"]);
      }
      await runInDurableObject(stub("sw-race-hb"), (q: JoinQueue) => {
        q.settleLazily = true;
      });
    }
    const entries = await audit("sw-race-hb");
    expect(entries.filter((e) => e.action === "lease.expired")).toHaveLength(ROUNDS - extended);
    expect(entries.filter((e) => e.action === "ticket.joined")).toHaveLength(extended + 1);
  });
});
