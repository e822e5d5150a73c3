/**
 * A cluster whose state came back from an earlier point (a point-in-time restore of its Durable
 * Object, a restored backup of a self-hosted data directory): if it looks never bootstrapped it
 * may exist all the same, so no node gets the bootstrap role until an admin decides.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { abandon, admin, auditActions, bootstrapped, complete, enroll, peer, poll, ticket } from "./helpers.ts";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";

const stub = (cluster: string) => env.JOIN_QUEUE.getByName(cluster) as DurableObjectStub<JoinQueue>;
const restored = (cluster: string) => admin("POST", `${cluster}/restored`, { reason: "point-in-time restore" });

describe("a restored cluster that looks never bootstrapped", () => {
  it("gives no node the bootstrap role (503 restored_awaiting_admin, Retry-After) until an admin allows it", async () => {
    const c = "rs-new";
    const enrollment = await enroll(c);
    expect((await restored(c)).body).toEqual({ awaitingAdmin: true });
    const status = (await admin("GET", c)).body;
    expect(status.restored.awaitingAdmin).toBe(true);
    expect(status.restored.at).toMatch(/^\d{4}-/);

    const asked = await ticket(c, enrollment, "n1", peer(1));
    expect(asked.status).toBe(503);
    expect(asked.body.code).toBe("restored_awaiting_admin");
    expect(Number(asked.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await admin("GET", `${c}/tickets`)).body.tickets, "nothing was created").toEqual([]);
    expect((await admin("GET", c)).body.bootstrapNode).toBeNull();

    const allowed = await admin("POST", `${c}/bootstrap/allow`, { reason: "the cluster never formed" });
    expect(allowed.body).toEqual({ changed: true });
    const again = await ticket(c, enrollment, "n1", peer(1));
    expect(again.body).toMatchObject({ role: "bootstrap", state: "admitted" });
    expect(await auditActions(c)).toEqual(expect.arrayContaining(["cluster.restored", "bootstrap.allowed"]));
  });

  it("does not give the bootstrap ticket back to its node, nor admit it, while queued joiners keep waiting; adopt ends it", async () => {
    const c = "rs-mid";
    const enrollment = await enroll(c);
    const boot = await ticket(c, enrollment, "b0", peer(1));
    expect(boot.body.role).toBe("bootstrap");
    const j1 = await ticket(c, enrollment, "j1", peer(2));
    expect(j1.body.state).toBe("queued");
    // The bootstrap node went away before it completed (in the state that came back).
    expect((await abandon(c, enrollment, boot.body.ticket)).status).toBe(200);
    await restored(c);

    const back = await ticket(c, enrollment, "b0", peer(1));
    expect([back.status, back.body.code]).toEqual([503, "restored_awaiting_admin"]);
    const other = await ticket(c, enrollment, "n9", peer(9));
    expect(other.body).toMatchObject({ role: "join", state: "queued", waitingFor: "bootstrap" });

    // The admin knows better: the cluster exists, with b0 and j1 in it.
    const adopted = await admin("POST", `${c}/adopt`, { members: [{ node: "b0", peerURL: peer(1) }] });
    expect(adopted.status, JSON.stringify(adopted.body)).toBe(200);
    const status = (await admin("GET", c)).body;
    expect(status).toMatchObject({ adopted: true, restored: { awaitingAdmin: false } });
    // Joiners are admitted now, and b0 is a member: it gets no bootstrap, ever.
    expect((await poll(c, enrollment, j1.body.ticket)).body.state).toBe("admitted");
    const b0 = await ticket(c, enrollment, "b0", peer(1));
    expect(b0.body).toMatchObject({ state: "joined", role: "join" });
  });

  it("ends an admitted bootstrap ticket the restored state still holds; adopt is accepted though it was out", async () => {
    const c = "rs-adopt";
    const enrollment = await enroll(c);
    const boot = await ticket(c, enrollment, "b0", peer(1));
    expect(boot.body.state).toBe("admitted");
    await restored(c);
    // The admission the restored state still calls active may be one the cluster outgrew: it ends.
    expect((await poll(c, enrollment, boot.body.ticket)).body.state).toBe("revoked");
    expect((await complete(c, boot.body.admission, boot.body.ticket, "5")).status).toBe(410);
    // A refused adopt changes nothing.
    const queued = await ticket(c, enrollment, "q1", peer(6));
    const refused = await admin("POST", `${c}/adopt`, { members: [{ node: "q1", peerURL: peer(6) }] });
    expect([refused.status, refused.body.code]).toEqual([409, "node_has_live_ticket"]);
    expect((await admin("GET", c)).body).toMatchObject({ adopted: false, restored: { awaitingAdmin: true } });
    expect((await abandon(c, enrollment, queued.body.ticket)).status).toBe(200);
    // (Unmarked, this adopt would be 409 bootstrap_in_progress: the bootstrap was under way.)
    const adopted = await admin("POST", `${c}/adopt`, { members: [{ node: "m1", peerURL: peer(5) }] });
    expect(adopted.status, JSON.stringify(adopted.body)).toBe(200);
    const ended = await admin("GET", `${c}/tickets?state=revoked`);
    expect(ended.body.tickets.map((t: { node: string }) => t.node)).toEqual(["b0"]);
    const b0 = await ticket(c, enrollment, "b0", peer(1));
    expect(b0.body.role).toBe("join");
  });

  it("adopt ends a queued bootstrap ticket, and an adopt refused changes nothing", async () => {
    const c = "rs-queued";
    const enrollment = await enroll(c);
    await admin("POST", `${c}/pause`);
    const boot = await ticket(c, enrollment, "b0", peer(1));
    expect(boot.body).toMatchObject({ role: "bootstrap", state: "queued" });
    const q1 = await ticket(c, enrollment, "q1", peer(2));
    await restored(c);
    const refused = await admin("POST", `${c}/adopt`, { members: [{ node: "q1", peerURL: peer(2) }] });
    expect([refused.status, refused.body.code]).toEqual([409, "node_has_live_ticket"]);
    expect((await poll(c, enrollment, boot.body.ticket)).body.state, "the refusal changed nothing").toBe("queued");
    expect((await abandon(c, enrollment, q1.body.ticket)).status).toBe(200);
    expect((await admin("POST", `${c}/adopt`, { members: [{ node: "m1", peerURL: peer(5) }] })).status).toBe(200);
    expect((await poll(c, enrollment, boot.body.ticket)).body.state).toBe("revoked");
    await admin("POST", `${c}/resume`);
    expect((await ticket(c, enrollment, "b0", peer(1))).body).toMatchObject({ role: "join", state: "admitted" });
  });

  it("changes nothing for a cluster that is bootstrapped; allowed, the bootstrap goes back to its node", async () => {
    const { enrollment } = await bootstrapped("rs-done");
    expect((await restored("rs-done")).body).toEqual({ awaitingAdmin: false });
    expect((await ticket("rs-done", enrollment, "n1", peer(2))).body).toMatchObject({ role: "join", state: "admitted" });
    expect((await admin("POST", "rs-done/bootstrap/allow", { reason: "x" })).body.code).toBe("already_bootstrapped");

    // Allowed, the bootstrap ticket goes back to the node that held it, and nobody else.
    const c = "rs-complete";
    const e = await enroll(c);
    const boot = await ticket(c, e, "b0", peer(1));
    await restored(c);
    expect((await ticket(c, e, "b1", peer(2))).body.role).toBe("join");
    await admin("POST", `${c}/bootstrap/allow`, { reason: "never formed" });
    const back = await ticket(c, e, "b0", peer(1));
    expect(back.body).toMatchObject({ ticket: boot.body.ticket, role: "bootstrap", state: "admitted" });
    expect((await complete(c, back.body.admission, back.body.ticket, "77")).status).toBe(200);
    expect((await admin("GET", c)).body).toMatchObject({ bootstrapped: true, restored: { awaitingAdmin: false } });
  });

  it("takes note of each self-hosted restore once: a cluster is marked by a new restore id, not again by the same", async () => {
    const c = "rs-serve";
    const enrollment = await enroll(c);
    const mark = (id: string) => runInDurableObject(stub(c), (q: JoinQueue) => q.noteRestore(id));
    expect(await mark("restore-1")).toBe(true);
    expect((await admin("POST", `${c}/bootstrap/allow`, { reason: "never formed" })).body.changed).toBe(true);
    expect(await mark("restore-1"), "the same restore, seen again at the next start").toBe(false);
    expect((await ticket(c, enrollment, "n1", peer(1))).body.role).toBe("bootstrap");
    const restores = (await auditActions(c)).filter((a) => a === "cluster.restored");
    expect(restores).toHaveLength(1);
  });
});
