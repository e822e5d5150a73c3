import { base64url } from "jose";
import { describe, expect, it } from "vitest";
import { ENROLLMENT_TOKEN_PREFIX, newEnrollmentToken, randomId, sha256Hex } from "./secrets.ts";

describe("secrets", () => {
  it("hashes to the standard SHA-256 hex digest", async () => {
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(await sha256Hex("é"), "UTF-8 bytes are hashed").toBe("4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c");
  });

  it("makes enrollment tokens with the prefix and 256 random bits, never twice the same", () => {
    const SAMPLES = 2_000;
    const tokens = Array.from({ length: SAMPLES }, () => newEnrollmentToken());
    expect(new Set(tokens).size).toBe(SAMPLES);
    const ones = new Array<number>(256).fill(0);
    for (const token of tokens) {
      expect(token.startsWith(ENROLLMENT_TOKEN_PREFIX)).toBe(true);
      const encoded = token.slice(ENROLLMENT_TOKEN_PREFIX.length);
      const bytes = base64url.decode(encoded);
      expect(bytes.length).toBe(32);
      expect(base64url.encode(bytes), "canonical unpadded base64url").toBe(encoded);
      for (let bit = 0; bit < 256; bit++) ones[bit]! += (bytes[bit >> 3]! >> (7 - (bit & 7))) & 1;
    }
    // Every one of the 256 bits is set in about half the tokens: 1000 ± 150 is more than six
    // standard deviations (22), so a fair source fails this about once in 10^8 runs, while a
    // counter, a constant or fewer random bits leave some bits (nearly) fixed.
    const unbalanced = ones.flatMap((n, bit) => (Math.abs(n - SAMPLES / 2) > 150 ? [`bit ${bit}: ${n}`] : []));
    expect(unbalanced).toEqual([]);
  });

  it("makes ids of letters and digits only after the prefix", () => {
    expect(randomId("tkt_")).toMatch(/^tkt_[A-Za-z0-9]{16}$/);
  });
});
