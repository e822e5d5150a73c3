/**
 * A live ticket belongs to the enrollment token that created it, and an enrollment token may be
 * scoped to node names and peer hosts.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { admin, auditActions, bootstrapped, call, enroll, peer, poll, ticket } from "./helpers.ts";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";

/** Moves the cluster object's clock forward (expiry by time, not by sleeping). */
const advance = (cluster: string, ms: number) =>
  runInDurableObject(env.JOIN_QUEUE.getByName(cluster) as DurableObjectStub<JoinQueue>, (q: JoinQueue) => q.clock.advance(ms));

async function state(cluster: string) {
  const audit = await admin("GET", `${cluster}/audit?limit=1000`);
  const tickets = await admin("GET", `${cluster}/tickets?limit=1000`);
  return { audit: audit.body.entries, tickets: tickets.body.tickets };
}

describe("a ticket belongs to the token that created it", () => {
  it("refuses another valid token with 409 ticket_held, audited, and hands out nothing", async () => {
    const C = "own-held";
    const { enrollment: first } = await bootstrapped(C);
    const second = await enroll(C);
    const mine = await ticket(C, first, "n1", peer(2));
    expect(mine.body.state).toBe("admitted");

    const before = await state(C);
    const other = await ticket(C, second, "n1", peer(2));
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 409, code: "ticket_held" });
    expect(other.headers.get("content-type")).toBe("application/problem+json");
    expect(JSON.stringify(other.body)).not.toContain(mine.body.ticket);
    expect(JSON.stringify(other.body)).not.toContain(mine.body.admission);
    // Another spelling of the peer URL, or another peer URL, is refused the same way (no peer URL disclosed).
    const elsewhere = await ticket(C, second, "n1", peer(9));
    expect({ status: elsewhere.status, code: elsewhere.body.code }).toEqual({ status: 409, code: "ticket_held" });
    expect(elsewhere.body.detail).not.toContain(peer(2));

    const after = await state(C);
    expect(after.tickets).toEqual(before.tickets);
    expect(after.audit.slice(before.audit.length).map((e: { action: string; detail: Record<string, unknown> }) => [e.action, e.detail.heldBy])).toEqual([
      ["ticket.held", expect.stringMatching(/^enr_/)],
      ["ticket.held", expect.stringMatching(/^enr_/)],
    ]);
    // The holder still reads it; the other token may not.
    expect((await poll(C, first, mine.body.ticket)).status).toBe(200);
    expect((await poll(C, second, mine.body.ticket)).body.code).toBe("forbidden");
  });

  it("lets the node take its ticket back with a new token once the creating token is revoked", async () => {
    const C = "own-reclaim";
    const { enrollment: first } = await bootstrapped(C);
    const mine = await ticket(C, first, "n1", peer(2));
    const tokens = await admin("GET", `${C}/enrollment-tokens`);
    const firstId = tokens.body.tokens[0].id;
    const second = await enroll(C);
    expect((await ticket(C, second, "n1", peer(2))).status).toBe(409);

    expect((await admin("DELETE", `${C}/enrollment-tokens/${firstId}`)).status).toBe(200);
    const back = await ticket(C, second, "n1", peer(2));
    expect({ status: back.status, ticket: back.body.ticket, state: back.body.state }).toEqual({ status: 200, ticket: mine.body.ticket, state: "admitted" });
    expect(back.body.admission).toBe(mine.body.admission);
    expect((await poll(C, second, mine.body.ticket)).status).toBe(200);
    expect(await auditActions(C)).toContain("ticket.reclaimed");
  });
});

describe("a ticket whose token expired", () => {
  it("is taken back by its node with a new token, in its place in the queue", async () => {
    const C = "own-expired";
    const { enrollment } = await bootstrapped(C, { leaseSeconds: 3600, admissionTtlSeconds: 3600 });
    await ticket(C, enrollment, "a", peer(2)); // holds the only slot
    const shortLived = await enroll(C, { ttlSeconds: 60 });
    const mine = await ticket(C, shortLived, "q", peer(3));
    expect(mine.body).toMatchObject({ state: "queued", position: 1 });
    const other = await enroll(C);
    expect((await ticket(C, other, "q", peer(3))).body.code).toBe("ticket_held");

    await advance(C, 61_000);
    const back = await ticket(C, other, "q", peer(3));
    expect({ status: back.status, ticket: back.body.ticket, position: back.body.position }).toEqual({ status: 202, ticket: mine.body.ticket, position: 1 });
    expect((await poll(C, other, mine.body.ticket)).status).toBe(202);
    expect(await auditActions(C)).toEqual(expect.arrayContaining(["ticket.held", "ticket.reclaimed"]));
  });
});

describe("many tokens asking for one node at once", () => {
  it("leave exactly one ticket, held by one token; every other answer is the same ticket (its holder) or 409 ticket_held", async () => {
    for (let round = 0; round < 10; round++) {
      const C = `own-race-${round}`;
      await bootstrapped(C);
      const tokens = await Promise.all([0, 1, 2, 3, 4].map(() => enroll(C)));
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => ticket(C, tokens[i % tokens.length], "n1", peer(2)).then((r) => ({ r, token: i % tokens.length }))),
      );
      const ids = new Set(answers.filter((a) => a.r.status < 300).map((a) => a.r.body.ticket));
      expect(ids.size).toBe(1);
      const winners = new Set(answers.filter((a) => a.r.status < 300).map((a) => a.token));
      expect(winners.size).toBe(1);
      for (const a of answers.filter((x) => x.r.status >= 300))
        expect({ status: a.r.status, code: a.r.body.code }).toEqual({ status: 409, code: "ticket_held" });
      const list = (await admin("GET", `${C}/tickets?limit=1000`)).body.tickets.filter((t: { node: string }) => t.node === "n1");
      expect(list).toHaveLength(1);
      const actions = await auditActions(C);
      expect(actions.filter((x) => x === "ticket.created")).toHaveLength(2); // b0 and n1
      expect(actions.filter((x) => x === "ticket.held")).toHaveLength(answers.filter((a) => a.r.status === 409).length);
      expect(actions).not.toContain("ticket.reclaimed");
    }
  });
});

describe("scoped enrollment tokens", () => {
  it("are created with their scopes and list them", async () => {
    const C = "scope-list";
    const r = await admin("POST", `${C}/enrollment-tokens`, { nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24", "ctrl.example"] });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24", "ctrl.example"] });
    expect((await admin("GET", `${C}/enrollment-tokens`)).body.tokens[0]).toMatchObject({ nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24", "ctrl.example"] });
  });

  it("refuse a node or a peer host outside the scope with 403 outside_token_scope, changing nothing", async () => {
    const C = "scope-check";
    await bootstrapped(C);
    const scoped = (await admin("POST", `${C}/enrollment-tokens`, { nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24"] })).body.token as string;
    const before = await state(C);
    for (const [node, peerURL] of [
      ["worker-1", peer(5)],
      ["ctrl-1", "https://10.0.1.5:2380"],
      ["ctrl-1", "https://ctrl-1.example:2380"],
    ]) {
      const r = await ticket(C, scoped, node, peerURL);
      expect({ node, peerURL, status: r.status, code: r.body.code }).toEqual({ node, peerURL, status: 403, code: "outside_token_scope" });
      expect(r.headers.get("content-type")).toBe("application/problem+json");
    }
    expect(await state(C)).toEqual(before);
    const inside = await ticket(C, scoped, "ctrl-1", peer(5));
    expect(inside.status).toBe(201);
  });

  it.each([
    [{ nodes: [] }],
    [{ nodes: ["bad name"] }],
    [{ peerHosts: ["10.0.0.0/33"] }],
    [{ peerHosts: ["http://10.0.0.1:2380"] }],
    [{ peerHosts: ["0177.0.0.1"] }],
    [{ peerHosts: "10.0.0.0/24" }],
  ])("refuse an invalid scope %j with 400 and create nothing", async (body) => {
    const r = await call("POST", "/v1/admin/clusters/scope-invalid/enrollment-tokens", { token: (await import("./helpers.ts")).ADMIN, body });
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 400, code: "invalid_request" });
    expect((await admin("GET", "scope-invalid")).status).toBe(404);
  });
});
