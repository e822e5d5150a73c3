import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AuditEntry } from "../../../shared/protocol/wire.ts";
import { auditLine, clock, clusterFromHash, clusterHash, duration, memberHex, ms, niceTicks, tokenRequest, when } from "./format.ts";

describe("duration", () => {
  it("reads in the largest two units, seconds to days", () => {
    expect(duration(0)).toBe("0 s");
    expect(duration(59_999)).toBe("59 s");
    expect(duration(61_000)).toBe("1 min 01 s");
    expect(duration(3_600_000 + 5 * 60_000)).toBe("1 h 05 min");
    expect(duration(2 * 86_400_000 + 3 * 3_600_000)).toBe("2 d 3 h");
  });

  it("counts a negative or unknown span as none", () => {
    expect(duration(-5)).toBe("0 s");
    expect(duration(Number.NaN)).toBe("0 s");
  });
});

describe("clock and when", () => {
  it("a time of day as HH:MM:SS in the browser's zone", () => {
    expect(clock(new Date(2026, 0, 2, 3, 4, 5).getTime())).toBe("03:04:05");
  });

  it("the time of day within the last day, the UTC date and minute before that, a dash for none", () => {
    const now = Date.parse("2026-12-03T12:00:00Z");
    expect(when("2026-12-03T11:59:58Z", now)).toBe(clock(Date.parse("2026-12-03T11:59:58Z")));
    expect(when("2026-11-30T08:15:30Z", now)).toBe("2026-11-30 08:15");
    expect(when(undefined, now)).toBe("—");
    expect(when("", now)).toBe("—");
  });

  it("ms: no time is null", () => {
    expect(ms("1970-01-01T00:00:01Z")).toBe(1000);
    expect(ms(undefined)).toBeNull();
    expect(ms("")).toBeNull();
  });
});

describe("memberHex", () => {
  it("shows a decimal member ID in hex, as etcdctl prints it", () => {
    expect(memberHex("10501334649042878790")).toBe("91bc3c398fb3c146");
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (n) => memberHex(String(n)) === n.toString(16)));
  });

  it("keeps a hex ID (in lower case) and shows a dash for none", () => {
    expect(memberHex("8E9E05C52164694D")).toBe("8e9e05c52164694d");
    expect(memberHex(undefined)).toBe("—");
    expect(memberHex("")).toBe("—");
  });
});

describe("niceTicks", () => {
  it("round steps inside the span, at most about `count` of them", () => {
    expect(niceTicks(0, 10_000, 5)).toEqual([0, 2000, 4000, 6000, 8000, 10_000]);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2e12 }), fc.integer({ min: 1000, max: 30 * 86_400_000 }), fc.integer({ min: 2, max: 20 }), (start, span, count) => {
        const ticks = niceTicks(start, start + span, count);
        return ticks.every((t) => t >= start && t <= start + span && t % 1000 === 0) && (span > 86_400_000 * count || ticks.length <= count + 1);
      }),
    );
  });
});

describe("auditLine", () => {
  const entry = (detail: Record<string, unknown>, subject = "tkt_1"): AuditEntry => ({ seq: 1, actor: "admin", action: "x", subject, detail });

  it("node, subject, role, member (hex), reason, previous state, actor", () => {
    expect(auditLine(entry({ node: "ctrl-1", role: "join", memberID: "10501334649042878790", reason: "why", previousState: "admitted" }))).toBe(
      'ctrl-1 · tkt_1 · join · member 91bc3c398fb3c146 · "why" · was admitted · by admin',
    );
  });

  it("leaves out the node when it is the subject, and any part missing", () => {
    expect(auditLine(entry({ node: "ctrl-1" }, "ctrl-1"))).toBe("ctrl-1 · by admin");
    expect(auditLine({ ...entry({}), detail: undefined as unknown as Record<string, unknown> })).toBe("tkt_1 · by admin");
  });

  it("keeps markup as it is: the line is text, escaped by the DOM when shown", () => {
    expect(auditLine(entry({ reason: "<img src=x onerror=alert(1)>" }))).toContain('"<img src=x onerror=alert(1)>"');
  });
});

describe("clusterFromHash", () => {
  it("the cluster a link names, '' when none, null when it is not valid percent-encoding", () => {
    expect(clusterFromHash("#cluster=prod-eu")).toBe("prod-eu");
    expect(clusterFromHash("#x=1&cluster=prod-eu&y=2")).toBe("prod-eu");
    expect(clusterFromHash("")).toBe("");
    expect(clusterFromHash("#other=1")).toBe("");
    expect(clusterFromHash("#cluster=")).toBe("");
    expect(clusterFromHash("#cluster=%")).toBeNull();
    expect(clusterFromHash("#cluster=%E0%A4%A")).toBeNull();
    expect(clusterFromHash("#cluster=%3Cimg%20src%3Dx%3E")).toBe("<img src=x>");
  });

  it("reads back what clusterHash writes, whatever the name", () => {
    fc.assert(fc.property(fc.string(), (name) => clusterFromHash(clusterHash(name)) === name));
  });
});

describe("tokenRequest", () => {
  it("24 h unless changed, unlimited uses unless given", () => {
    expect(tokenRequest({ description: "", forever: false, hours: "", uses: "" })).toEqual({
      body: { ttlSeconds: 86_400 },
      summary: "valid for 24 h, unlimited uses",
    });
  });

  it("a token that never expires is asked for, and sends no ttlSeconds", () => {
    expect(tokenRequest({ description: " wave 2 ", forever: true, hours: "5", uses: "3" })).toEqual({
      body: { description: "wave 2", maxUses: 3 },
      summary: '"wave 2", never expires, 3 use(s)',
    });
  });

  it("hours in seconds, rounded", () => {
    expect(tokenRequest({ description: "", forever: false, hours: "1.5", uses: "" }).body).toEqual({ ttlSeconds: 5400 });
  });
});
