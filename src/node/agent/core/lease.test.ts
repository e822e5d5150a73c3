import { describe, expect, it } from "vitest";
import { problem } from "../../../shared/protocol/problem.ts";
import type { NodeSession } from "../../../shared/client/node-session.ts";
import type { TicketView } from "../../../shared/protocol/wire.ts";
import type { HttpResult } from "../../../shared/client/exchange.ts";
import { AdmissionRevoked, LeaseKeeper, LeaseLost, abortFor, type LeaseClock } from "./lease.ts";

const view = (state: TicketView["state"], reason?: string): TicketView =>
  ({
    ticket: "tkt_a",
    cluster: "c",
    node: "n",
    peerURL: "http://127.0.0.1:2380",
    state,
    role: "join",
    createdAt: "2026-01-01T00:00:00Z",
    reason,
  }) as TicketView;

function reasonFor(v: TicketView | null): unknown {
  const c = new AbortController();
  abortFor(c, v, "HTTP 410 admission_inactive");
  return c.signal.aborted ? c.signal.reason : null;
}

describe("why an admission ended", () => {
  it("a revoked ticket refuses, naming the admin's reason", () => {
    const r = reasonFor(view("revoked", "revoked: wrong rack"));
    expect(r).toBeInstanceOf(AdmissionRevoked);
    expect((r as Error).message).toContain("wrong rack");
  });

  it("an expired, abandoned, superseded or unknown admission sends the node back to the queue", () => {
    for (const v of [view("expired", "lease expired"), view("abandoned"), view("admitted"), view("queued"), null]) {
      expect(reasonFor(v)).toBeInstanceOf(LeaseLost);
    }
    expect((reasonFor(view("expired", "lease expired")) as LeaseLost).state).toBe("expired");
  });

  it("a joined ticket stops nothing: the node completed meanwhile", () => {
    expect(reasonFor(view("joined"))).toBeNull();
  });
});

describe("the lease keeper, on a clock that tests move", () => {
  /** Sleeping moves this clock instead of waiting. */
  function manualClock(start: number): LeaseClock & { t: number } {
    const c = {
      t: start,
      now: () => c.t,
      sleep: async (ms: number, signal?: AbortSignal) => {
        if (signal?.aborted) throw signal.reason;
        c.t += Math.max(0, ms);
        await Promise.resolve();
      },
    };
    return c;
  }

  /** The broker's answers to the keeper, sent at `date` (its clock). */
  const answer = (status: number, date: number, fields: Partial<HttpResult<TicketView>>) =>
    ({ status, body: null, problem: null, retryAfter: null, etag: null, date, ...fields }) as HttpResult<TicketView>;
  const leaseEnded = (date: number) =>
    answer(410, date, { problem: problem(410, "admission_inactive", "the admission is no longer active", { reason: "expired" }) });
  const leaseExtended = (expiresAt: number, date: number) =>
    answer(200, date, { body: { ...view("admitted"), leaseExpiresAt: new Date(expiresAt).toISOString() } as TicketView });
  const ticketExpired = (date: number) => answer(200, date, { body: view("expired", "lease expired") });

  it("heartbeats at a third of what is left of the lease, and stops the join once the broker says the lease expired", async () => {
    const clock = manualClock(Date.parse("2026-01-01T00:00:00Z"));
    const beats: number[] = [];
    const LEASE_MS = 30_000;
    let expiresAt = clock.t + LEASE_MS;
    // The broker's side: its lease is extended by each heartbeat until the fourth, which comes after it ended.
    const broker = {
      heartbeat: async (): Promise<HttpResult<TicketView>> => {
        beats.push(clock.t);
        if (beats.length >= 4) clock.t = expiresAt + 1; // the node stalled past its lease
        if (clock.t >= expiresAt) return leaseEnded(clock.t);
        expiresAt = clock.t + LEASE_MS;
        return leaseExtended(expiresAt, clock.t);
      },
      getTicket: async (): Promise<HttpResult<TicketView>> => ticketExpired(clock.t),
    } as unknown as NodeSession;
    const keeper = new LeaseKeeper(broker, "tkt_a", "adm", new Date(expiresAt).toISOString(), () => 0.5, {}, clock);
    const started = clock.t;
    keeper.start();
    await new Promise<void>((resolve) => keeper.signal.addEventListener("abort", () => resolve(), { once: true }));
    await keeper.stop();
    expect(beats[0]! - started).toBe(1_000);
    // Then every third of the 30 s lease that is left (jitter 0.5: exactly a third).
    expect(beats.slice(1, 3).map((t, i) => t - beats[i]!)).toEqual([10_000, 10_000]);
    const reason = keeper.signal.reason as LeaseLost;
    expect(reason).toBeInstanceOf(LeaseLost);
    expect(reason.state).toBe("expired");
  });

  it("keeps a lease alive by the broker's clock when the node's clock is minutes off", async () => {
    const LEASE_MS = 30_000;
    // The broker's clock runs `skew` ahead of the node's (behind when negative).
    for (const skew of [10 * 60_000, -10 * 60_000]) {
      const clock = manualClock(Date.parse("2026-01-01T00:00:00Z"));
      const brokerNow = () => clock.t + skew;
      let expiresAt = brokerNow() + LEASE_MS;
      const beats: number[] = [];
      let lapsed = false;
      let sixBeats!: () => void;
      const done = new Promise<void>((resolve) => (sixBeats = resolve));
      // HTTP's Date header has whole seconds.
      const date = () => Math.floor(brokerNow() / 1000) * 1000;
      const broker = {
        heartbeat: async (): Promise<HttpResult<TicketView>> => {
          beats.push(clock.t);
          if (beats.length === 6) sixBeats();
          if (brokerNow() >= expiresAt) {
            lapsed = true;
            return leaseEnded(date());
          }
          expiresAt = brokerNow() + LEASE_MS;
          return leaseExtended(expiresAt, date());
        },
        getTicket: async (): Promise<HttpResult<TicketView>> => ticketExpired(date()),
      } as unknown as NodeSession;
      // The admission's lease end, as the broker wrote it: on the broker's clock.
      const keeper = new LeaseKeeper(broker, "tkt_a", "adm", new Date(expiresAt).toISOString(), () => 0.5, {}, clock);
      keeper.start();
      // Six heartbeats, or the keeper gives up on a lost lease.
      keeper.signal.addEventListener("abort", () => sixBeats(), { once: true });
      await done;
      await keeper.stop();
      expect(lapsed, `skew ${skew} ms`).toBe(false);
      expect(keeper.signal.aborted).toBe(false);
      // After the first, a heartbeat every third of the 30 s lease, give or take the Date header's second.
      for (const [i, t] of beats.slice(1, 6).entries()) {
        expect(t - beats[i]!, `skew ${skew} ms, heartbeat ${i + 2}`).toBeGreaterThanOrEqual(9_000);
        expect(t - beats[i]!, `skew ${skew} ms, heartbeat ${i + 2}`).toBeLessThanOrEqual(11_000);
      }
    }
  });
});
