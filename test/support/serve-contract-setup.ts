/**
 * Global setup of the `contract-serve` project: one `join-broker serve` for every contract file,
 * with the Worker tests' admin token and issuer, trusting `cf-connecting-ip` as a proxy's header
 * (the tests play distinct clients with it).
 */
import type { TestProject } from "vitest/node";
import { startBroker, type BrokerProcess } from "./broker.ts";

const ADMIN = "test-admin-token-0123456789";
let broker: BrokerProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  broker = await startBroker({
    runtime: "serve",
    env: { JOIN_BROKER_ADMIN_TOKEN: ADMIN },
    args: ["--issuer", "https://broker.test", "--client-ip-header", "cf-connecting-ip"],
  });
  project.provide("serveUrl", broker.url);
}

export async function teardown(): Promise<void> {
  await broker?.stop(true);
}
