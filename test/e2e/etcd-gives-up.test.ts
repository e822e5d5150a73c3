/**
 * A node whose etcd keeps failing gives up (exit 4) and frees its slot at once: it abandons its
 * ticket as it exits instead of holding the admission until the lease ends, and its last line
 * carries etcd's own error. Here another process holds the joiner's client port, so its etcd
 * exits with "bind: address already in use" at every start. Once the port is free, the same
 * command joins.
 */
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { e2eSeed } from "../support/seeded.ts";

const seed = e2eSeed("etcd-gives-up");
let h: ClusterHarness;
let squatter: Server | null = null;

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "etcd-gives-up", seed, nodes: ["ctrl-0", "ctrl-1"] });
});

afterAll(async () => {
  squatter?.close();
  h?.writeTimeline();
  await h?.cleanup();
});

function listenOn(url: string): Promise<Server> {
  const { hostname, port } = new URL(url);
  return new Promise((ok, fail) => {
    const server = createServer((socket) => socket.destroy());
    server.once("error", fail);
    server.listen(Number(port), hostname, () => ok(server));
  });
}

it("a joiner whose etcd cannot bind its port gives up with etcd's error, and its ticket is abandoned as it exits", { timeout: 240_000 }, async () => {
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);

  squatter = await listenOn(h.node("ctrl-1").clientURL);
  const run = h.startAgent("ctrl-1");
  const exit = await run.exited;
  expect(exit.code, h.describeAgents()).toBe(4);
  const last = run.events[run.events.length - 1]!;
  expect(last.step).toBe("gave-up");
  const lastLine = last.msg.trimEnd().split("\n").pop()!;
  // The reason, in etcd's words, on the line that says why (not only somewhere in a log excerpt).
  expect(lastLine).toMatch(/^etcd keeps failing: .*bind: address already in use/);
  expect(lastLine).toContain("abandoned");
  expect(run.events.some((e) => e.step === "etcd-start")).toBe(true);

  // Right as it exits, not when the lease ends: the slot is free.
  const tickets = await h.client.admin(h.cluster).tickets();
  const mine = (tickets.body.tickets as { node: string; state: string }[]).filter((t) => t.node === "ctrl-1");
  expect(mine.map((t) => t.state)).toEqual(["abandoned"]);
  const status = await h.client.admin(h.cluster).status();
  expect(status.body.inFlight, JSON.stringify(status.body)).toEqual([]);

  squatter.close();
  squatter = null;
  h.startAgent("ctrl-1");
  await h.waitFor("ctrl-1 to join once its port is free", () => h.joined("ctrl-1"), 120_000);
});
