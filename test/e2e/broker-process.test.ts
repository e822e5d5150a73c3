import { afterAll, beforeAll, expect, it } from "vitest";
import { brokerClient, startBroker, type BrokerProcess } from "../support/stack.ts";

let broker: BrokerProcess;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(async () => broker?.stop());

it("keeps a cluster's state across a broker restart", async () => {
  const created = await brokerClient(broker).admin("restart-me").createEnrollmentToken();
  await broker.restart();
  const listed = await brokerClient(broker).admin("restart-me").listEnrollmentTokens();
  expect(listed.body.tokens.map((t) => t.id)).toEqual([created.body.id]);
});
