import { exports } from "cloudflare:workers";
import { expect, it } from "vitest";

it("answers", async () => {
  const res = await exports.default.fetch("https://broker.test/healthz");
  expect(res.status).toBe(200);
});
