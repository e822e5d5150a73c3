import { describe, expect, it } from "vitest";
import { ApiError, base, explain, isAbort } from "./api.ts";

describe("the console's API errors", () => {
  it("takes the problem's code and detail, or says the status", () => {
    expect(new ApiError(409, { code: "conflict", detail: "busy" })).toMatchObject({ status: 409, code: "conflict", message: "busy" });
    expect(new ApiError(502, null)).toMatchObject({ status: 502, code: "http_502", message: "HTTP 502" });
  });

  it("explains a failure by status and code, never by its text", () => {
    expect(explain(new ApiError(401, { code: "unauthorized", detail: "no" }), "c").title).toBe("Wrong admin token");
    expect(explain(new ApiError(403, { code: "forbidden", detail: "no" }), "c").title).toBe("Not allowed (403)");
    expect(explain(new ApiError(429, { code: "rate_limited" }), "c").title).toBe("Too many failed attempts");
    expect(explain(new ApiError(404, { code: "unknown_cluster", detail: "Unauthorized" }), "prod-eu")).toEqual({
      title: "Unknown cluster",
      detail: 'This broker has no cluster named "prod-eu". A cluster exists once it has an enrollment token or was adopted.',
    });
    expect(explain(new ApiError(0, { code: "network", detail: "the broker did not answer" }), "c")).toEqual({
      title: "Broker unreachable",
      detail: "the broker did not answer",
    });
    expect(explain(new ApiError(400, { code: "bad_request", detail: "bad" }), "c")).toEqual({ title: "Request failed (400 bad_request)", detail: "bad" });
    expect(explain(new TypeError("boom"), "c")).toEqual({ title: "Unexpected error", detail: "boom" });
  });

  it("an aborted request is told apart from a failed one", () => {
    const abort = new AbortController();
    abort.abort();
    expect(isAbort(abort.signal.reason)).toBe(true);
    expect(isAbort(new ApiError(0, null))).toBe(false);
    expect(isAbort(null)).toBe(false);
  });

  it("a cluster's admin path, its name percent-encoded", () => {
    expect(base("prod-eu")).toBe("/v1/admin/clusters/prod-eu");
    expect(base("a/b?c")).toBe("/v1/admin/clusters/a%2Fb%3Fc");
  });
});
