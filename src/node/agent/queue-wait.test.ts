/**
 * How the agent spaces its long polls while queued. A poll that comes back early (the ticket's
 * position moved) delays the next one to Retry-After, so a long queue costs the broker few
 * requests; but the node next in line polls again at once, so that its own admission finds a
 * poll held at the broker instead of a node asleep. A scripted broker on loopback answers, so
 * the test decides what each poll sees.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TicketView } from "../../shared/protocol/wire.ts";
import { runAgent } from "./agent.ts";
import { collectProgress, testAgentOptions } from "./core/agent-test-kit.ts";

/** What the scripted broker does with the n-th long poll: hold it, then answer with this view. */
interface PollAnswer {
  holdMs: number;
  view: Partial<TicketView>;
}

interface Arrival {
  at: number;
  answeredAt: number;
  method: string;
  path: string;
}

const BASE: TicketView = {
  ticket: "tkt_q",
  cluster: "c1",
  node: "n1",
  peerURL: "https://127.0.0.1:2380",
  state: "queued",
  role: "join",
  createdAt: new Date().toISOString(),
};

let server: Server | undefined;
let dir = "";

afterEach(async () => {
  vi.restoreAllMocks();
  if (server) await new Promise((r) => server!.close(r));
  server = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs the agent against a broker that queues the ticket, then answers each poll as scripted; the last answer ends the run (revoked: exit 3). */
async function runQueued(
  first: Partial<TicketView>,
  polls: PollAnswer[],
  onPoll?: (n: number) => void,
): Promise<{ code: number; arrivals: Arrival[]; posts: number; events: { step: string; msg: string }[] }> {
  const arrivals: Arrival[] = [];
  let poll = 0;
  server = createServer((req: IncomingMessage, res) => {
    req.resume();
    // On the monotonic clock: a test may set the wall clock back.
    const arrival: Arrival = { at: performance.now(), answeredAt: 0, method: req.method ?? "", path: req.url ?? "" };
    arrivals.push(arrival);
    const answer = (status: number, view: Partial<TicketView>) => {
      arrival.answeredAt = performance.now();
      const body = { ...BASE, ...view };
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (body.state === "queued" && body.retryAfter) headers["retry-after"] = String(body.retryAfter);
      res.writeHead(status, headers);
      res.end(JSON.stringify(body));
    };
    if (req.method === "POST") return answer(202, first);
    onPoll?.(poll);
    const next = polls[Math.min(poll++, polls.length - 1)]!;
    setTimeout(() => answer(200, next.view), next.holdMs);
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), "agent-queue-"));
  const progress = collectProgress();
  const code = await runAgent(testAgentOptions(dir, { broker: url, peerURL: BASE.peerURL }), {
    reporter: progress.reporter,
    print: () => {},
    stop: new AbortController().signal,
    random: () => 0,
  });
  return { code, arrivals: arrivals.filter((a) => a.method === "GET"), posts: arrivals.filter((a) => a.method === "POST").length, events: progress.events() };
}

/** Milliseconds between poll i's answer and poll i + 1's arrival. */
const gapAfter = (arrivals: Arrival[], i: number) => arrivals[i + 1]!.at - arrivals[i]!.answeredAt;

describe("the agent's long polls while queued", () => {
  it("waits out Retry-After after a poll came back early further back in the queue", async () => {
    const { code, arrivals } = await runQueued({ position: 3, retryAfter: 2 }, [
      { holdMs: 200, view: { position: 2, retryAfter: 2 } },
      { holdMs: 0, view: { state: "revoked", reason: "test over" } },
    ]);
    expect(code).toBe(3);
    expect(arrivals).toHaveLength(2);
    expect(gapAfter(arrivals, 0)).toBeGreaterThanOrEqual(1_500);
  }, 20_000);

  it("polls again at once when the early answer makes it next in line", async () => {
    // Retry-After 30: an agent that waited it out would ask again only about 30 s later.
    const { code, arrivals } = await runQueued({ position: 2, retryAfter: 30 }, [
      { holdMs: 200, view: { position: 1, retryAfter: 30 } },
      { holdMs: 0, view: { state: "revoked", reason: "test over" } },
    ]);
    expect(code).toBe(3);
    expect(arrivals).toHaveLength(2);
    expect(gapAfter(arrivals, 0)).toBeLessThan(5_000);
    expect(arrivals[1]!.path).toMatch(/\?wait=\d+$/);
  }, 20_000);

  it("measures how long a poll was held on the monotonic clock: a wall clock set back meanwhile does not stretch the wait", async () => {
    // A node whose clock is put 5 minutes back (NTP, a VM resumed) while its poll is held.
    const wall = Date.now;
    const { code, arrivals } = await runQueued(
      { position: 3, retryAfter: 2 },
      [
        { holdMs: 200, view: { position: 2, retryAfter: 2 } },
        { holdMs: 0, view: { state: "revoked", reason: "test over" } },
      ],
      (n) => n === 0 && vi.spyOn(Date, "now").mockImplementation(() => wall() - 300_000),
    );
    expect(code).toBe(3);
    expect(arrivals).toHaveLength(2);
    // Retry-After, not Retry-After plus the 300 s the clock went back.
    expect(gapAfter(arrivals, 0)).toBeGreaterThanOrEqual(1_500);
    expect(gapAfter(arrivals, 0)).toBeLessThan(5_000);
  }, 20_000);

  it("still waits when a poll as next in line was answered at once (a broker that does not hold polls)", async () => {
    const { code, arrivals } = await runQueued({ position: 1, retryAfter: 2 }, [
      { holdMs: 0, view: { position: 1, retryAfter: 2 } },
      { holdMs: 0, view: { state: "revoked", reason: "test over" } },
    ]);
    expect(code).toBe(3);
    expect(arrivals).toHaveLength(2);
    expect(gapAfter(arrivals, 0)).toBeGreaterThanOrEqual(1_500);
  }, 20_000);
});

describe("a ticket view from the wire", () => {
  it("that says admitted without its admission token is no admission: the agent asks for a new ticket, as when a lease is lost", async () => {
    const { code, posts, events } = await runQueued({ position: 1, retryAfter: 1 }, [
      { holdMs: 0, view: { state: "admitted" } },
      { holdMs: 0, view: { state: "revoked", reason: "test over" } },
    ]);
    expect(code).toBe(3);
    expect(posts).toBe(2);
    expect(events.find((e) => e.step === "lease")?.msg).toBe("the broker sent an admitted ticket without its admission token; asking for a ticket again");
    expect(events.some((e) => e.step === "admitted")).toBe(false);
  }, 20_000);
});
