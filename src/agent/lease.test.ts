import { describe, expect, it } from "vitest";
import type { TicketView } from "./broker-client.ts";
import { AdmissionRevoked, LeaseLost, abortFor } from "./lease.ts";

const view = (state: TicketView["state"], reason?: string): TicketView => ({ ticket: "tkt_a", cluster: "c", node: "n", peerURL: "http://127.0.0.1:2380", state, role: "join", createdAt: "2026-01-01T00:00:00Z", reason });

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
