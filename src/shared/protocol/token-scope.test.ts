import { describe, expect, it } from "vitest";
import { globMatches, hostMatches, peerHostPatternProblem, scopeProblem } from "./token-scope.ts";

describe("token scopes", () => {
  it("matches node globs as whole names", () => {
    expect(globMatches("ctrl-*", "ctrl-1")).toBe(true);
    expect(globMatches("ctrl-*", "x-ctrl-1")).toBe(false);
    expect(globMatches("ctrl-?", "ctrl-12")).toBe(false);
    expect(globMatches("a.b", "aXb")).toBe(false);
    expect(globMatches("exact", "exact")).toBe(true);
  });

  it.each([
    ["10.0.0.0/24", "10.0.0.9", true],
    ["10.0.0.0/24", "10.0.1.9", false],
    ["10.0.0.7", "10.0.0.7", true],
    ["10.0.0.7", "10.0.0.70", false],
    ["0.0.0.0/0", "192.0.2.1", true],
    ["fd00::/8", "[fd12::1]", true],
    ["fd00::/8", "[fe80::1]", false],
    ["::1", "[::1]", true],
    ["10.0.0.0/8", "[::ffff:a00:1]", false],
    ["ctrl-1.example", "ctrl-1.example", true],
    ["Ctrl-1.Example", "ctrl-1.example", true],
    ["ctrl-1.example", "ctrl-2.example", false],
    ["*.example", "ctrl-1.example", true],
    ["*.example", "example", false],
    ["*.example", "badexample", false],
    ["ctrl-1.example", "10.0.0.1", false],
  ])("peer host %s for %s: %s", (pattern, host, matches) => {
    expect(hostMatches(pattern, host)).toBe(matches);
  });

  it("validates peer host patterns", () => {
    for (const ok of ["10.0.0.0/24", "10.0.0.1", "fd00::/8", "[::1]", "host.example", "*.example"]) expect(peerHostPatternProblem(ok)).toBeNull();
    for (const bad of ["10.0.0.0/33", "10.0.0.0/024", "010.0.0.0/8", "fd00::/129", "*", "*.10.0.0.1", "a b", "host_1", "10.0.0.0/8/1", "", "http://x:1"]) {
      expect(peerHostPatternProblem(bad)).toEqual(expect.any(String));
    }
  });

  it("checks a request against both scopes", () => {
    const scope = { nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24"] };
    expect(scopeProblem(scope, "ctrl-1", "https://10.0.0.5:2380")).toBeNull();
    expect(scopeProblem(scope, "worker-1", "https://10.0.0.5:2380")).toMatch(/node worker-1/);
    expect(scopeProblem(scope, "ctrl-1", "https://10.0.1.5:2380")).toMatch(/peerURL/);
    expect(scopeProblem({}, "anything", "https://anywhere.example:1")).toBeNull();
  });
});
