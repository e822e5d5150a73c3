import { describe, expect, it } from "vitest";
import { UsageError } from "../exit-codes.ts";
import { defineCommand, parseCommand } from "./flags.ts";

const OPTIONS = { cluster: "NAME", broker: "URL", json: true } as const;
const parseFlags = (argv: string[], options: typeof OPTIONS) => parseCommand(defineCommand("test", options), argv, {});

const usage = (argv: string[]) => {
  try {
    parseFlags(argv, OPTIONS);
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    throw e;
  }
  return null;
};

describe("the command-line layer", () => {
  it("parses known flags", () => {
    expect(parseFlags(["--cluster", "c1", "--json", "--broker=http://x"], OPTIONS).values).toEqual({ cluster: "c1", json: true, broker: "http://x" });
  });

  it("names an unknown flag and the known ones closest to it", () => {
    expect(usage(["--clster", "c1"])).toBe("unknown flag '--clster'; did you mean '--cluster'?");
    expect(usage(["--brokr=http://x"])).toBe("unknown flag '--brokr'; did you mean '--broker'?");
    expect(usage(["--nothing-like-it"])).toBe("unknown flag '--nothing-like-it'");
  });

  it("does not judge a string flag's value as a flag", () => {
    expect(parseFlags(["--cluster=--clster"], OPTIONS).values).toEqual({ cluster: "--clster" });
    // parseArgs' own word for a value that looks like a flag, not "unknown flag".
    expect(usage(["--cluster", "--clster"])).toMatch(/ambiguous/);
  });

  it("says what parseArgs refuses, as bad usage", () => {
    expect(usage(["--cluster"])).toMatch(/--cluster/);
    expect(usage(["stray"])).toMatch(/positional argument/i);
    expect(usage(["--", "--cluster"])).toBe("unexpected positional argument '--cluster'");
    expect(usage(["--json=yes"])).toBe("--json takes no value");
  });
});
