import { afterAll, beforeAll, expect, it } from "vitest";
import { adminCall, startBroker, type BrokerProcess } from "../support/broker.ts";

let broker: BrokerProcess;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(async () => broker?.stop());

it("keeps a cluster's state across a broker restart", async () => {
  const created = await adminCall(broker, "POST", "/v1/admin/clusters/restart-me/enrollment-tokens", {});
  expect(created.status).toBe(201);
  await broker.restart();
  const listed = await adminCall(broker, "GET", "/v1/admin/clusters/restart-me/enrollment-tokens");
  expect(listed.status).toBe(200);
  expect(listed.body.tokens.map((t: { id: string }) => t.id)).toEqual([created.body.id]);
});
