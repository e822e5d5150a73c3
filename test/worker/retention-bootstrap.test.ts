/**
 * Retention never deletes what a cluster still needs: the bootstrap ticket of a cluster that was
 * never bootstrapped. Time moves by the object's clock and only the alarm settles state.
 */
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { admin, enroll, peer, poll, ticket } from "./helpers.ts";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";

const stub = (cluster: string) => env.JOIN_QUEUE.getByName(cluster) as DurableObjectStub<JoinQueue>;
const DAY = 86_400_000;

describe("retention and a cluster that never formed", () => {
  it("the bootstrap node gets its bootstrap ticket back after the window, though the enrollment token has no use left", async () => {
    const c = "ret-boot";
    const enrollment = await enroll(c, { maxUses: 3 });
    const boot = await ticket(c, enrollment, "b0", peer(1));
    expect(boot.body).toMatchObject({ role: "bootstrap", state: "admitted" });
    const j1 = await ticket(c, enrollment, "j1", peer(2));
    const j2 = await ticket(c, enrollment, "j2", peer(3));
    expect([j1.body.role, j2.body.role]).toEqual(["join", "join"]);
    // Only the alarm may end the lease or delete history: reads below observe, never settle.
    await runInDurableObject(stub(c), (q: JoinQueue) => {
      q.settleLazily = false;
      q.clock.advance(120_000);
    });
    expect((await poll(c, enrollment, boot.body.ticket)).body.state, "a read does not end the lease").toBe("admitted");
    expect(await runDurableObjectAlarm(stub(c))).toBe(true);
    expect((await poll(c, enrollment, boot.body.ticket)).body.state, "the alarm ended the lease").toBe("expired");
    // The bootstrap ticket ended long ago; the joiners still wait for a cluster to exist.
    await runInDurableObject(stub(c), (q: JoinQueue) => q.clock.advance(8 * DAY));
    expect(await runDurableObjectAlarm(stub(c))).toBe(true);
    const swept = (await admin("GET", c)).body;
    expect(swept.retention.lastSweptAt, "the sweep ran").not.toBeNull();
    expect(swept.bootstrapped).toBe(false);

    const again = await ticket(c, enrollment, "b0", peer(1));
    expect(again.status, JSON.stringify(again.body)).toBeLessThan(300);
    expect(again.body).toMatchObject({ ticket: boot.body.ticket, role: "bootstrap" });
    // And another node still cannot take the role: it is the same one cluster.
    const other = await ticket(c, enrollment, "x", peer(9));
    expect(other.body.role ?? other.body.code).not.toBe("bootstrap");
  });
});
