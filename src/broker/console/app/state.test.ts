import { describe, expect, it } from "vitest";
import type { AdminTicket, AuditEntry } from "../../../shared/protocol/wire.ts";
import { AUDIT_KEEP, begin, initialState, keepRecent, parseKnown, queueRows, remember, stop } from "./state.ts";

const ticket = (ticketId: string, state: AdminTicket["state"]): AdminTicket => ({
  ticket: ticketId,
  cluster: "c",
  node: ticketId,
  peerURL: "https://10.0.0.1:2380",
  state,
  role: "join",
  seq: 1,
});
const entry = (seq: number): AuditEntry => ({ seq, actor: "admin", action: "x", subject: "s", detail: {} });

describe("the console's state", () => {
  it("opening a cluster ends the work for the one before: a newer generation, its requests aborted, its audit gone", () => {
    const s = initialState("token");
    const first = begin("a", s);
    s.audit = [entry(1)];
    s.next = 2;
    const second = begin("b", s);
    expect(first.abort.signal.aborted).toBe(true);
    expect(second.abort.signal.aborted).toBe(false);
    expect(second.generation).toBeGreaterThan(first.generation);
    expect(s).toMatchObject({ cluster: "b", audit: [], next: 0, generation: second.generation, abort: second.abort });
    stop(s);
    expect(second.abort.signal.aborted).toBe(true);
    expect(s.abort).toBeNull();
    expect(s.generation).toBe(second.generation + 1);
  });

  it("keeps the newest audit entries only", () => {
    const many = Array.from({ length: AUDIT_KEEP + 5 }, (_, i) => entry(i));
    const kept = keepRecent([entry(-1)], many);
    expect(kept).toHaveLength(AUDIT_KEEP);
    expect(kept[0].seq).toBe(5);
    expect(kept.at(-1)!.seq).toBe(AUDIT_KEEP + 4);
  });

  it("the queue: admitted tickets first ('▶'), then queued ones numbered, ended ones left out", () => {
    const rows = queueRows([ticket("q1", "queued"), ticket("j", "joined"), ticket("a1", "admitted"), ticket("q2", "queued"), ticket("r", "revoked")]);
    expect(rows.map((r) => [r.ticket.ticket, r.position])).toEqual([
      ["a1", "▶"],
      ["q1", "1"],
      ["q2", "2"],
    ]);
  });

  it("remembers the cluster just opened first, once, at most 20", () => {
    expect(remember("b", ["a", "b", "c"])).toEqual(["b", "a", "c"]);
    expect(
      remember(
        "new",
        Array.from({ length: 25 }, (_, i) => `c${i}`),
      ),
    ).toHaveLength(20);
  });

  it("reads remembered clusters from whatever was stored", () => {
    expect(parseKnown('["a", 1, null, "b"]')).toEqual(["a", "b"]);
    expect(parseKnown(null)).toEqual([]);
    expect(parseKnown("not json")).toEqual([]);
    expect(parseKnown('{"a":1}')).toEqual([]);
  });
});
