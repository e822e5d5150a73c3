/**
 * The agent against a broker whose own code keeps failing (500): it reports each failure, backs
 * off longer each time, and gives up with a clear message (exit 4) instead of retrying forever.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAgent } from "./agent.ts";
import { collectProgress, testAgentOptions } from "./core/agent-test-kit.ts";
import { ServerFailures } from "./core/retry.ts";
import { BrokerSteps } from "./steps/broker-steps.ts";
import { TransportError } from "../../shared/client/exchange.ts";
import type { NodeSession } from "../../shared/client/node-session.ts";
import type { AdmittedTicket } from "../../shared/protocol/wire.ts";

/** Runs the agent (in this process) against the broker at `url`; its JSON progress lines, and its exit code. */
async function agentAgainst(url: string, dir: string, stop: AbortSignal, random: () => number): Promise<{ code: number; lines: string[] }> {
  const { reporter, lines } = collectProgress();
  const code = await runAgent(testAgentOptions(dir, { broker: url }), { reporter, print: () => {}, stop, random });
  return { code, lines };
}

describe("ServerFailures", () => {
  it("backs off longer after each 500 in a row, gives up at the limit, and starts over after another answer", () => {
    const f = new ServerFailures(4, 1_000, 60_000, () => 1);
    expect([f.failed(), f.failed(), f.failed(), f.failed()]).toEqual([1_000, 2_000, 4_000, null]);
    f.reset();
    expect(f.failed()).toBe(1_000);
  });
});

describe("the agent and a broker that answers 500", () => {
  let server: Server;
  let url = "";
  const arrivals: number[] = [];
  const dir = mkdtempSync(join(tmpdir(), "agent-500-"));

  beforeAll(async () => {
    server = createServer((req, res) => {
      arrivals.push(Date.now());
      req.resume();
      res.writeHead(500, { "content-type": "application/problem+json" });
      res.end(
        JSON.stringify({
          type: "about:blank",
          title: "Internal Server Error",
          status: 500,
          code: "internal_error",
          detail: "internal error",
          correlationId: "corr-1234",
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("reports each failure with its correlation id, waits longer each time, then gives up (exit 4)", async () => {
    const { code, lines } = await agentAgainst(url, dir, new AbortController().signal, () => 0);
    expect(code).toBe(4);
    expect(arrivals).toHaveLength(5);
    const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    // 0.5, 1, 2 and 4 s (random 0: the lower half of each step): never at full speed.
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual(500 * 2 ** i - 50);
    });
    const events = lines.map((l) => JSON.parse(l) as { step: string; msg: string });
    expect(events.filter((e) => e.step === "broker-error")).toHaveLength(4);
    expect(events.find((e) => e.step === "broker-error")!.msg).toContain("corr-1234");
    const last = events.at(-1)!;
    expect(last.msg).toMatch(/internal error 5 times in a row \(correlation id corr-1234\).*fault in the broker/);
  }, 30_000);
});

describe("the agent and a broker that answers 429", () => {
  let server: Server;
  let url = "";
  const arrivals: number[] = [];
  const dir = mkdtempSync(join(tmpdir(), "agent-429-"));
  const stop = new AbortController();

  beforeAll(async () => {
    server = createServer((req, res) => {
      arrivals.push(Date.now());
      req.resume();
      // Twice with the broker's own Retry-After, then with `Retry-After: 0`, as a proxy might say.
      res.writeHead(429, { "content-type": "application/problem+json", "retry-after": arrivals.length <= 2 ? "1" : "0" });
      res.end(
        JSON.stringify({
          type: "about:blank",
          title: "Too Many Requests",
          status: 429,
          code: "rate_limited",
          detail: "too many failed authentication attempts from this address",
        }),
      );
      if (arrivals.length === 5) stop.abort(new Error("test over"));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it("waits as for a 503: Retry-After honoured, a zero one backed off from longer each time, never refused", async () => {
    const { code, lines } = await agentAgainst(url, dir, stop.signal, () => 1);
    expect(arrivals).toHaveLength(5);
    expect(code).not.toBe(3); // "not now" is no refusal
    const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    // Retry-After 1 (plus jitter, here the full quarter): 1.25 s; then 0: the backoff's 2 s and 4 s.
    expect(gaps[0]).toBeGreaterThanOrEqual(1_200);
    expect(gaps[1]).toBeGreaterThanOrEqual(1_200);
    expect(gaps[2]).toBeGreaterThanOrEqual(1_950);
    expect(gaps[3]).toBeGreaterThanOrEqual(3_950);
    const events = lines.map((l) => JSON.parse(l) as { msg: string });
    expect(events.filter((e) => /HTTP 429 rate_limited/.test(e.msg)).length).toBeGreaterThanOrEqual(4);
  }, 30_000);
});

describe("reporting a member started to a broker out of reach", () => {
  const ticket = { ticket: "tkt_1", state: "admitted", role: "join", admission: "adm" } as AdmittedTicket;
  const steps = (session: Partial<NodeSession>) => {
    const { reporter, lines } = collectProgress();
    return { steps: new BrokerSteps(session as NodeSession, testAgentOptions(mkdtempSync(join(tmpdir(), "agent-started-"))), reporter, () => 0), lines };
  };

  it("is a report to send again at the next poll, not the end of the join (the broker closed the connection, say)", async () => {
    const { steps: s, lines } = steps({
      memberStarted: async () => Promise.reject(new TransportError("http://broker/started", "UND_ERR_SOCKET: other side closed")),
    });
    await expect(s.reportStarted({ ticket, signal: new AbortController().signal }, "42")).resolves.toBe(false);
    expect(lines.map((l) => JSON.parse(l).msg).join("\n")).toMatch(/reporting member 2a started: .*other side closed/);
  });

  it("still ends with the admission: an aborted signal's error goes through", async () => {
    const lost = new AbortController();
    lost.abort(new Error("lease lost"));
    const { steps: s } = steps({ memberStarted: async () => Promise.reject(new Error("aborted")) });
    await expect(s.reportStarted({ ticket, signal: lost.signal }, "42")).rejects.toThrow(/aborted/);
  });
});
