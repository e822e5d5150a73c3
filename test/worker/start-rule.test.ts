/**
 * The start rule (gate mode, maxInFlight > 1): a ticket asked for with `exclusiveUntilStarted`
 * has nobody admitted beside it until its node reports its member started, and is itself
 * admitted only once every admitted member started. Tickets without it keep plain slots.
 */
import { describe, expect, it } from "vitest";
import { auditActions, bootstrapped, call, complete, peer, poll } from "./helpers.ts";

const gateTicket = (cluster: string, token: string, node: string, peerURL: string) =>
  call("POST", `/v1/clusters/${cluster}/tickets`, { token, body: { node, peerURL, exclusiveUntilStarted: true } });
const plainTicket = (cluster: string, token: string, node: string, peerURL: string) =>
  call("POST", `/v1/clusters/${cluster}/tickets`, { token, body: { node, peerURL } });
const started = (cluster: string, admission: string, id: string, memberID: string) =>
  call("POST", `/v1/clusters/${cluster}/tickets/${id}/started`, { token: admission, body: { memberID } });

describe("the start rule", () => {
  it("admits the next gate ticket only once the previous one's member started, while slots overlap", async () => {
    const { enrollment } = await bootstrapped("start-rule", { maxInFlight: 3 });
    const a = (await gateTicket("start-rule", enrollment, "a", peer(2))).body;
    const b = (await gateTicket("start-rule", enrollment, "b", peer(3))).body;
    const c = (await gateTicket("start-rule", enrollment, "c", peer(4))).body;
    expect([a.state, b.state, c.state], "three slots, but a's member has not started").toEqual(["admitted", "queued", "queued"]);
    expect(a.exclusiveUntilStarted).toBe(true);

    const reported = await started("start-rule", a.admission, a.ticket, "2002");
    expect(reported.status).toBe(200);
    expect(reported.body.memberStartedAt).toMatch(/Z$/);
    expect(reported.body.memberID).toBe("2002");
    const bNow = (await poll("start-rule", enrollment, b.ticket)).body;
    expect(bNow.state, "a started: b is admitted beside it").toBe("admitted");
    expect((await poll("start-rule", enrollment, c.ticket)).body.state, "b has not started: c waits").toBe("queued");

    // A repeat is answered as it is; another member ID for the same start is a conflict.
    expect((await started("start-rule", a.admission, a.ticket, "2002")).status).toBe(200);
    const conflict = await started("start-rule", a.admission, a.ticket, "9999");
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe("member_id_conflict");

    expect((await started("start-rule", bNow.admission, bNow.ticket, "3003")).status).toBe(200);
    expect((await poll("start-rule", enrollment, c.ticket)).body.state, "a and b started: c is admitted, the third slot").toBe("admitted");
    expect(await auditActions("start-rule")).toContain("ticket.member_started");
  });

  it("keeps a gate ticket out while a plain ticket's member may be unstarted, and plain tickets out while a gate ticket's is", async () => {
    const { enrollment } = await bootstrapped("start-mixed", { maxInFlight: 3 });
    const plain = (await plainTicket("start-mixed", enrollment, "p", peer(2))).body;
    const gate = (await gateTicket("start-mixed", enrollment, "g", peer(3))).body;
    expect([plain.state, gate.state]).toEqual(["admitted", "queued"]);
    expect((await started("start-mixed", plain.admission, plain.ticket, "2002")).status).toBe(200);
    const gateNow = (await poll("start-mixed", enrollment, gate.ticket)).body;
    expect(gateNow.state).toBe("admitted");
    const later = (await plainTicket("start-mixed", enrollment, "q", peer(4))).body;
    expect(later.state, "the gate ticket's member has not started").toBe("queued");
    // Completing frees the way as well as starting does.
    expect((await complete("start-mixed", gateNow.admission, gateNow.ticket, "3003")).status).toBe(200);
    expect((await poll("start-mixed", enrollment, later.ticket)).body.state).toBe("admitted");
  });

  it("changes nothing for plain tickets", async () => {
    const { enrollment } = await bootstrapped("start-plain", { maxInFlight: 2 });
    const views = [];
    for (const n of ["a", "b", "c"]) views.push((await plainTicket("start-plain", enrollment, n, peer(views.length + 2))).body);
    expect(views.map((v) => v.state)).toEqual(["admitted", "admitted", "queued"]);
    expect(views[0].exclusiveUntilStarted).toBeUndefined();
  });

  it("takes the rule on a live ticket asked for again with it, and refuses a start report from a queued ticket's enrollment token", async () => {
    const { enrollment } = await bootstrapped("start-again", { maxInFlight: 2 });
    const a = (await plainTicket("start-again", enrollment, "a", peer(2))).body;
    const again = (await gateTicket("start-again", enrollment, "a", peer(2))).body;
    expect(again.ticket).toBe(a.ticket);
    expect(again.exclusiveUntilStarted).toBe(true);
    expect((await plainTicket("start-again", enrollment, "b", peer(3))).body.state, "a is now under the rule").toBe("queued");
    const wrong = await started("start-again", enrollment, a.ticket, "2002");
    expect(wrong.status).toBe(403);
    expect(wrong.body.code).toBe("wrong_token_kind");
  });

  it("rejects a start report without a member ID (400, nothing changes)", async () => {
    const { enrollment } = await bootstrapped("start-bad", { maxInFlight: 2 });
    const a = (await gateTicket("start-bad", enrollment, "a", peer(2))).body;
    const bad = await call("POST", `/v1/clusters/start-bad/tickets/${a.ticket}/started`, { token: a.admission, body: { memberID: "not-hex!" } });
    expect(bad.status).toBe(400);
    expect((await poll("start-bad", enrollment, a.ticket)).body.memberStartedAt).toBeUndefined();
  });
});
