import { describe, expect, it } from "vitest";
import { selfHosted, withDate } from "./wrap.ts";

const NOW = Date.UTC(2026, 11, 3, 10, 0, 0);

describe("selfHosted", () => {
  it("answers with a Date header: agents measure their lease on the broker's clock by it", async () => {
    const wrapped = selfHosted({ fetch: async () => new Response("ok") }, () => NOW);
    const res = await wrapped.fetch!(new Request("http://broker.test/healthz") as never, {} as never, {} as never);
    expect(res.headers.get("date")).toBe("Thu, 03 Dec 2026 10:00:00 GMT");
    expect(await res.text()).toBe("ok");
  });
});

describe("withDate", () => {
  it("keeps a Date the response has", () => {
    const res = withDate(new Response(null, { headers: { date: "Wed, 02 Dec 2026 00:00:00 GMT" } }), NOW);
    expect(res.headers.get("date")).toBe("Wed, 02 Dec 2026 00:00:00 GMT");
  });

  it("copies a response whose headers cannot change", () => {
    const immutable = Response.redirect("http://broker.test/elsewhere", 302);
    const res = withDate(immutable, NOW);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("http://broker.test/elsewhere");
    expect(res.headers.get("date")).toBe("Thu, 03 Dec 2026 10:00:00 GMT");
  });
});
