import { describe, expect, it } from "vitest";
import { parseBearer } from "./bearer.ts";

describe("parseBearer", () => {
  it("takes the token of a bearer header, whatever the scheme's case and the spacing", () => {
    expect(parseBearer("Bearer abc.def-ghi_~+/==")).toBe("abc.def-ghi_~+/==");
    expect(parseBearer("bearer   enr_x1 ")).toBe("enr_x1");
  });

  it("refuses anything else", () => {
    for (const h of [undefined, null, "", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer a b", "Bearer a=b", "Token abc"])
      expect(parseBearer(h)).toBeNull();
  });
});
