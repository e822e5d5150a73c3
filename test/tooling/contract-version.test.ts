/**
 * The contract version the code names (`join-broker --version`, the OpenAPI document's
 * `info.version`) is the one docs/protocol.md, the contract's copy in this repository, is titled with.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { CONTRACT_VERSION } from "../../src/shared/protocol/wire.ts";

it("CONTRACT_VERSION is the version in docs/protocol.md's title", () => {
  const title = readFileSync(join(import.meta.dirname, "../../docs/protocol.md"), "utf8").split("\n")[0];
  expect(title).toMatch(/^# .*\(contract v\d+\.\d+\)$/);
  expect(title).toContain(`(contract v${CONTRACT_VERSION})`);
});
