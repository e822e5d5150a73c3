/**
 * Setup file of the `contract-serve` project: each contract file gets a `join-broker serve` of
 * its own (as each Worker test file gets its own storage in workerd), with the Worker tests' admin
 * token and issuer, trusting `cf-connecting-ip` as a proxy's header (the tests play distinct
 * clients with it). Files run several at once: none sees another's clusters, tokens or
 * failed-authentication counts.
 */
import { afterAll, beforeAll } from "vitest";
import { startBroker, type BrokerProcess } from "./broker.ts";
import { serveForThisFile } from "./serve-contract-exports.ts";

const ADMIN = "test-admin-token-0123456789";
let broker: BrokerProcess | undefined;

beforeAll(async () => {
  broker = await startBroker({
    runtime: "serve",
    env: { JOIN_BROKER_ADMIN_TOKEN: ADMIN },
    args: ["--issuer", "https://broker.test", "--client-ip-header", "cf-connecting-ip"],
  });
  serveForThisFile(broker.url);
});

afterAll(async () => {
  await broker?.stop(true);
});
