import { describe, expect, it } from "vitest";
import { abandon, admin, bootstrapped, complete, enroll, peer, poll, ticket } from "./helpers.ts";

describe("idempotent ticket requests", () => {
  it("gives the same node the same ticket when it asks again", async () => {
    const { enrollment } = await bootstrapped("idem-same");
    const first = await ticket("idem-same", enrollment, "a", peer(2));
    const again = await ticket("idem-same", enrollment, "a", peer(2));
    expect(again.status).toBe(200);
    expect(again.body.ticket).toBe(first.body.ticket);
    expect(again.body.admission).toBe(first.body.admission);
    const queued = await ticket("idem-same", enrollment, "b", peer(3));
    const queuedAgain = await ticket("idem-same", enrollment, "b", peer(3) + "/");
    expect(queuedAgain.status).toBe(202);
    expect(queuedAgain.body).toMatchObject({ ticket: queued.body.ticket, position: 1 });
  });

  it("refuses the same node with another peerURL while its ticket is live (409 peer_url_conflict)", async () => {
    const { enrollment } = await bootstrapped("idem-conflict");
    await ticket("idem-conflict", enrollment, "a", peer(2));
    const r = await ticket("idem-conflict", enrollment, "a", peer(9));
    expect(r.status).toBe(409);
    expect(r.headers.get("content-type")).toBe("application/problem+json");
    expect(r.body).toMatchObject({ status: 409, code: "peer_url_conflict" });
  });

  it("answers joined after completion: never a new ticket, never a bootstrap", async () => {
    const token = await enroll("idem-joined");
    const boot = await ticket("idem-joined", token, "b0", peer(1));
    await complete("idem-joined", boot.body.admission, boot.body.ticket, "77");
    const again = await ticket("idem-joined", token, "b0", peer(1));
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ ticket: boot.body.ticket, state: "joined", role: "bootstrap", memberID: "77" });
    const a = await ticket("idem-joined", token, "a", peer(2));
    await complete("idem-joined", a.body.admission, a.body.ticket, "78");
    const aAgain = await ticket("idem-joined", token, "a", peer(2));
    expect(aAgain.body).toMatchObject({ ticket: a.body.ticket, state: "joined", role: "join" });
    // A retried complete is answered again, and the same admission cannot complete twice differently.
    expect((await complete("idem-joined", a.body.admission, a.body.ticket, "78")).status).toBe(200);
    expect((await complete("idem-joined", a.body.admission, a.body.ticket, "79")).body.code).toBe("member_id_conflict");
    const tickets = await admin("GET", "idem-joined/tickets");
    expect(tickets.body.tickets).toHaveLength(2);
  });

  it("gives a node whose ticket ended a new ticket at the back of the queue", async () => {
    const { enrollment } = await bootstrapped("idem-ended");
    const a = await ticket("idem-ended", enrollment, "a", peer(2));
    await ticket("idem-ended", enrollment, "b", peer(3));
    await abandon("idem-ended", enrollment, a.body.ticket);
    const back = await ticket("idem-ended", enrollment, "a", peer(2));
    expect(back.status).toBe(202);
    expect(back.body.ticket).not.toBe(a.body.ticket);
    expect(back.body).toMatchObject({ state: "queued", position: 1, role: "join" });
  });

  it("never issues a second bootstrap ticket: the vanished bootstrap node gets its own back, joiners wait", async () => {
    const token = await enroll("idem-boot");
    await admin("PUT", "idem-boot/policy", { leaseSeconds: 1 });
    const boot = await ticket("idem-boot", token, "b0", peer(1));
    const joiner = await ticket("idem-boot", token, "j1", peer(2));
    expect(joiner.body).toMatchObject({ role: "join", state: "queued" });
    // The bootstrap node vanishes: its lease expires, yet the joiner is not made the bootstrap node.
    const waited = await poll("idem-boot", token, joiner.body.ticket, 3);
    expect(waited.body).toMatchObject({ role: "join", state: "queued" });
    expect((await poll("idem-boot", token, boot.body.ticket)).body.state).toBe("expired");
    const another = await ticket("idem-boot", token, "j2", peer(3));
    expect(another.body.role).toBe("join");
    // It comes back: the same bootstrap ticket, admitted again with a fresh token.
    const back = await ticket("idem-boot", token, "b0", peer(1));
    expect(back.body).toMatchObject({ ticket: boot.body.ticket, role: "bootstrap", state: "admitted" });
    expect(back.body.admission).not.toBe(boot.body.admission);
    const tickets = await admin("GET", "idem-boot/tickets");
    expect(tickets.body.tickets.filter((t: { role: string }) => t.role === "bootstrap")).toHaveLength(1);
  });

  it("hands bootstrap to another node only by an explicit admin act", async () => {
    const token = await enroll("idem-reassign");
    const boot = await ticket("idem-reassign", token, "b0", peer(1));
    const j1 = await ticket("idem-reassign", token, "j1", peer(2));
    const r = await admin("POST", "idem-reassign/bootstrap", { node: "j1", reason: "b0 lost its disk" });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ bootstrapNode: "j1", revoked: boot.body.jti });
    expect((await poll("idem-reassign", token, boot.body.ticket)).body.state).toBe("revoked");
    expect((await poll("idem-reassign", token, j1.body.ticket)).body).toMatchObject({ role: "bootstrap", state: "admitted" });
  });

  it("issues no bootstrap ticket to an adopted cluster", async () => {
    const token = await enroll("idem-adopt");
    const adopted = await admin("POST", "idem-adopt/adopt", { members: [{ node: "old-1", peerURL: peer(1) }] });
    expect(adopted.status).toBe(200);
    const first = await ticket("idem-adopt", token, "new-1", peer(2));
    expect(first.body).toMatchObject({ role: "join", state: "admitted" });
    const member = await ticket("idem-adopt", token, "old-1", peer(1));
    expect(member.body).toMatchObject({ state: "joined" });
  });

  it("adopts a cluster once its bootstrap ticket was abandoned (a node that found the cluster already there), and that node then joins", async () => {
    const token = await enroll("idem-adopt-late");
    const boot = await ticket("idem-adopt-late", token, "late-0", peer(3));
    expect(boot.body).toMatchObject({ role: "bootstrap", state: "admitted" });
    const members = { members: [{ node: "old-1", peerURL: peer(1) }] };
    expect((await admin("POST", "idem-adopt-late/adopt", members)).body).toMatchObject({ code: "bootstrap_in_progress" });
    expect((await abandon("idem-adopt-late", token, boot.body.ticket)).status).toBe(200);
    const adopted = await admin("POST", "idem-adopt-late/adopt", members);
    expect(adopted.status, JSON.stringify(adopted.body)).toBe(200);
    const again = await ticket("idem-adopt-late", token, "late-0", peer(3));
    expect(again.body).toMatchObject({ role: "join", state: "admitted" });
    expect(again.body.ticket).not.toBe(boot.body.ticket);
  });

  it("lets a forgotten member join again", async () => {
    const { enrollment } = await bootstrapped("idem-forget");
    const a = await ticket("idem-forget", enrollment, "a", peer(2));
    await complete("idem-forget", a.body.admission, a.body.ticket, "5");
    expect((await admin("DELETE", "idem-forget/members/a")).status).toBe(200);
    const again = await ticket("idem-forget", enrollment, "a", peer(2));
    expect(again.body).toMatchObject({ state: "admitted", role: "join" });
    expect(again.body.ticket).not.toBe(a.body.ticket);
    expect((await admin("DELETE", "idem-forget/members/nobody")).body.code).toBe("member_not_found");
  });
});

describe("the bootstrap ticket", () => {
  it("does not come back to its node under another peerURL", async () => {
    const token = await enroll("idem-boot-peer");
    await admin("PUT", "idem-boot-peer/policy", { leaseSeconds: 1 });
    const boot = await ticket("idem-boot-peer", token, "b0", peer(1));
    await abandon("idem-boot-peer", boot.body.admission, boot.body.ticket);
    const moved = await ticket("idem-boot-peer", token, "b0", peer(7));
    expect(moved.status).toBe(409);
    expect(moved.body.code).toBe("peer_url_conflict");
    const tickets = await admin("GET", "idem-boot-peer/tickets");
    expect(tickets.body.tickets).toHaveLength(1);
  });
});
