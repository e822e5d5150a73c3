import { describe, expect, it } from "vitest";
import { UsageError } from "../exit-codes.ts";
import { GaveUp, Refusal, Stopped } from "./core/errors.ts";
import { CommandFailed, SplitBrain } from "./gate/gate-errors.ts";
import { AdmissionRevoked, LeaseLost } from "./core/lease.ts";

describe("the agent's errors", () => {
  it("each has its own name and a stable code, so that logs and callers can tell them apart", () => {
    const errors = [
      new Refusal("r"),
      new GaveUp("g"),
      new Stopped("SIGTERM"),
      new LeaseLost("expired", "l"),
      new AdmissionRevoked("a"),
      new CommandFailed("c"),
      new SplitBrain("s"),
      new UsageError("u"),
    ];
    expect(errors.map((e) => [e.name, e.code])).toEqual([
      ["Refusal", "ERR_AGENT_REFUSED"],
      ["GaveUp", "ERR_AGENT_GAVE_UP"],
      ["Stopped", "ERR_AGENT_STOPPED"],
      ["LeaseLost", "ERR_LEASE_LOST"],
      ["AdmissionRevoked", "ERR_ADMISSION_REVOKED"],
      ["CommandFailed", "ERR_GATE_COMMAND_FAILED"],
      ["SplitBrain", "ERR_SPLIT_BRAIN"],
      ["UsageError", "ERR_USAGE"],
    ]);
    expect(String(new SplitBrain("two clusters"))).toBe("SplitBrain: two clusters");
    expect(new SplitBrain("x")).toBeInstanceOf(Refusal);
  });
});
