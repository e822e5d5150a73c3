import { describe, expect, it } from "vitest";
import { ENROLLMENT_TOKEN_PREFIX, newEnrollmentToken, randomId, sha256Hex } from "./secrets.ts";

describe("secrets", () => {
  it("hashes to the standard SHA-256 hex digest", async () => {
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(await sha256Hex("é"), "UTF-8 bytes are hashed").toBe("4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c");
  });

  it("makes enrollment tokens with the prefix and 256 random bits, never twice the same", () => {
    const a = newEnrollmentToken();
    expect(a.startsWith(ENROLLMENT_TOKEN_PREFIX)).toBe(true);
    expect(a.length).toBe(ENROLLMENT_TOKEN_PREFIX.length + 43);
    expect(newEnrollmentToken()).not.toBe(a);
  });

  it("makes ids of letters and digits only after the prefix", () => {
    expect(randomId("tkt_")).toMatch(/^tkt_[A-Za-z0-9]{16}$/);
  });
});
