import { describe, expect, it } from "vitest";
import { memberIdHex } from "./member-id.ts";

describe("memberIdHex", () => {
  it("spells decimal uint64 IDs in hex, as etcdctl does", () => {
    expect(memberIdHex("10501334649042878790")).toBe("91bc3c398fb3c146");
    expect(memberIdHex("1201")).toBe("4b1");
    expect(memberIdHex("18446744073709551615")).toBe("ffffffffffffffff");
  });

  it("leaves anything else alone", () => {
    expect(memberIdHex("18446744073709551616")).toBe("18446744073709551616");
    expect(memberIdHex("")).toBe("");
    expect(memberIdHex("8e9e05c52164694d")).toBe("8e9e05c52164694d");
  });
});
