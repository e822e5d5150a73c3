/**
 * What a queued node learns while it waits: what the queue waits for when it is blocked (an
 * unfinished bootstrap, a pause), and a fresh position as soon as the queue moves ahead of it.
 */
import { describe, expect, it } from "vitest";
import { admin, complete, enroll, peer, poll, ticket } from "./helpers.ts";
import { pollsHeld } from "./object-seams.ts";

describe("a queued ticket's view", () => {
  it("says when joiners wait for the bootstrap node, and names it", async () => {
    const token = await enroll("qp-boot");
    const boot = await ticket("qp-boot", token, "ctrl-1", peer(1));
    expect(boot.body).toMatchObject({ role: "bootstrap", state: "admitted" });
    const join = await ticket("qp-boot", token, "ctrl-2", peer(2));
    expect(join.status).toBe(202);
    expect(join.body).toMatchObject({ state: "queued", position: 1, waitingFor: "bootstrap", bootstrapNode: "ctrl-1" });
    await complete("qp-boot", boot.body.admission, boot.body.ticket, "1001");
    const after = await poll("qp-boot", token, join.body.ticket);
    expect(after.body.state).toBe("admitted");
    expect(after.body.waitingFor).toBeUndefined();
  });

  it("says when admissions are paused, and not once they resume", async () => {
    const token = await enroll("qp-pause");
    const boot = await ticket("qp-pause", token, "ctrl-1", peer(1));
    await complete("qp-pause", boot.body.admission, boot.body.ticket, "1001");
    await admin("POST", "qp-pause/pause");
    const join = await ticket("qp-pause", token, "ctrl-2", peer(2));
    expect(join.body).toMatchObject({ state: "queued", position: 1, waitingFor: "paused" });
    await admin("POST", "qp-pause/resume");
    expect((await poll("qp-pause", token, join.body.ticket)).body).toMatchObject({ state: "admitted" });
  });

  it("answers a held poll near the head of the queue as soon as an admission moves it up", async () => {
    const token = await enroll("qp-move");
    const boot = await ticket("qp-move", token, "ctrl-1", peer(1));
    await complete("qp-move", boot.body.admission, boot.body.ticket, "1001");
    const two = await ticket("qp-move", token, "ctrl-2", peer(2));
    expect(two.body.state).toBe("admitted");
    await ticket("qp-move", token, "ctrl-3", peer(3));
    const four = await ticket("qp-move", token, "ctrl-4", peer(4));
    expect(four.body).toMatchObject({ state: "queued", position: 2 });
    expect(four.body.waitingFor).toBeUndefined();
    // ctrl-4 holds a 20 s poll; ctrl-2 completes, ctrl-3 is admitted, ctrl-4 is now first.
    const held = poll("qp-move", token, four.body.ticket, 20);
    await pollsHeld("qp-move");
    const started = Date.now();
    await complete("qp-move", two.body.admission, two.body.ticket, "1002");
    const moved = await held;
    expect(moved.body).toMatchObject({ state: "queued", position: 1 });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("answers an admission's new first in line at once, but leaves polls further back held", async () => {
    const token = await enroll("qp-back");
    const boot = await ticket("qp-back", token, "ctrl-1", peer(1));
    await complete("qp-back", boot.body.admission, boot.body.ticket, "1001");
    const two = await ticket("qp-back", token, "ctrl-2", peer(2));
    expect(two.body.state).toBe("admitted");
    const three = await ticket("qp-back", token, "ctrl-3", peer(3));
    await ticket("qp-back", token, "ctrl-4", peer(4));
    const five = await ticket("qp-back", token, "ctrl-5", peer(5));
    expect(five.body).toMatchObject({ state: "queued", position: 3 });
    let backSettled = false;
    const back = poll("qp-back", token, five.body.ticket, 8).then((r) => {
      backSettled = true;
      return r;
    });
    const head = poll("qp-back", token, three.body.ticket, 20);
    await pollsHeld("qp-back", 2);
    // ctrl-2 completes: ctrl-3 is admitted, ctrl-4 becomes first in line, ctrl-5 moves to 2.
    await complete("qp-back", two.body.admission, two.body.ticket, "1002");
    expect((await head).body.state).toBe("admitted");
    await new Promise((r) => setTimeout(r, 500));
    expect(backSettled).toBe(false);
    // Its own poll's end brings the new position.
    expect((await back).body).toMatchObject({ state: "queued", position: 2 });
  });
});
