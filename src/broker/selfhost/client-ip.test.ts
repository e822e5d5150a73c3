import { describe, expect, it } from "vitest";
import { withTrustedClientIp } from "./client-ip.ts";

const req = (headers: Record<string, string>) => new Request("http://broker/v1/x", { headers });

describe("the client address of a self-hosted broker", () => {
  it("drops the address headers a client could forge", () => {
    const r = withTrustedClientIp(req({ "cf-connecting-ip": "1.2.3.4", "x-real-ip": "5.6.7.8", authorization: "Bearer x" }), undefined);
    expect(r.headers.get("cf-connecting-ip")).toBeNull();
    expect(r.headers.get("x-real-ip")).toBeNull();
    expect(r.headers.get("authorization")).toBe("Bearer x");
  });

  it("takes it from the header a trusted proxy sets, the last entry of a list", () => {
    expect(
      withTrustedClientIp(req({ "x-forwarded-for": "6.6.6.6, 10.0.0.7", "cf-connecting-ip": "1.2.3.4" }), "x-forwarded-for").headers.get("cf-connecting-ip"),
    ).toBe("10.0.0.7");
    expect(withTrustedClientIp(req({ "x-real-ip": "10.0.0.8" }), "x-real-ip").headers.get("cf-connecting-ip")).toBe("10.0.0.8");
  });

  it("leaves a request without address headers as it is", () => {
    const r = req({ accept: "application/json" });
    expect(withTrustedClientIp(r, undefined)).toBe(r);
  });
});
