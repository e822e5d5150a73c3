import { describe, expect, it } from "vitest";
import { DEFAULT_LOG_LEVEL, actionLevel, isLogged, parseLogLevel } from "./event-log.ts";

describe("state-change log levels", () => {
  it("makes the two per-node routine changes debug lines and every other change an info line", () => {
    expect(actionLevel("ticket.created")).toBe("debug");
    expect(actionLevel("lease.extended")).toBe("debug");
    for (const action of [
      "ticket.admitted",
      "ticket.joined",
      "lease.expired",
      "admission.revoked",
      "cluster.bootstrapped",
      "ticket.bootstrap_returned",
      "policy.changed",
    ]) {
      expect(actionLevel(action), action).toBe("info");
    }
  });

  it("writes debug lines only at debug, info lines at debug and info, nothing at warn", () => {
    expect(isLogged("debug", "debug")).toBe(true);
    expect(isLogged("debug", "info")).toBe(false);
    expect(isLogged("info", "debug")).toBe(true);
    expect(isLogged("info", "info")).toBe(true);
    expect(isLogged("info", "warn")).toBe(false);
    expect(isLogged("debug", "warn")).toBe(false);
  });

  it("reads LOG_LEVEL loosely and falls back to info when it is unset or unknown", () => {
    expect(DEFAULT_LOG_LEVEL).toBe("info");
    expect(parseLogLevel(undefined)).toBe("info");
    expect(parseLogLevel("")).toBe("info");
    expect(parseLogLevel("DEBUG")).toBe("debug");
    expect(parseLogLevel(" warn ")).toBe("warn");
    expect(parseLogLevel("verbose")).toBe("info");
  });
});
