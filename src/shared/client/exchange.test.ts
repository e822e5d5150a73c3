import { describe, expect, it } from "vitest";
import { describeAnswer, describeFetchError, parseRetryAfter } from "./exchange.ts";

describe("HTTP helpers", () => {
  it("reads Retry-After as seconds or as an HTTP date", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("7", now)).toBe(7);
    expect(parseRetryAfter(" 0 ", now)).toBe(0);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now)).toBe(30);
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeNull();
    expect(parseRetryAfter(null, now)).toBeNull();
  });

  it("describes problems and transport failures in one line", () => {
    const problem = { type: "about:blank", title: "Service Unavailable", status: 503, code: "learner_pending", detail: "one learner at a time" };
    expect(describeAnswer({ status: 503, body: null, problem, retryAfter: 5, etag: null, date: null })).toBe("HTTP 503 learner_pending: one learner at a time");
    expect(describeAnswer({ status: 500, body: null, problem: null, retryAfter: null, etag: null, date: null })).toBe("HTTP 500");
    const refused = new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }) });
    expect(describeFetchError(refused)).toBe("ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9");
  });
});
