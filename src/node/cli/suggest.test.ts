import { describe, expect, it } from "vitest";
import { closest, didYouMean, editDistance } from "./suggest.ts";

describe("typo suggestions", () => {
  it("counts a swapped pair as one edit", () => {
    expect(editDistance("stauts", "status")).toBe(1);
    expect(editDistance("crate", "create")).toBe(1);
    expect(editDistance("abc", "abc")).toBe(0);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("suggests only names within a typo's reach", () => {
    const words = ["status", "tickets", "token list", "token create", "pause", "resume"];
    expect(closest("stauts", words)).toEqual(["status"]);
    expect(closest("tokens list", words)).toEqual(["token list"]);
    expect(closest("token crate", words)).toEqual(["token create"]);
    expect(closest("deploy", words)).toEqual([]);
    expect(didYouMean("pasue", words)).toBe("; did you mean 'pause'?");
    expect(didYouMean("zzz", words)).toBe("");
  });
});
