import { Option } from "commander";
import { describe, expect, it } from "vitest";
import { refusalOf } from "./cli-test-kit.ts";
import { conflicting, parseOnly, requireAll, unset, type CliCommand } from "./command.ts";
import { choice, clusterName, httpUrl, listen, number, repeated, text, value } from "./values.ts";

/** A small command: flags of each kind, a conflict with its reason, two required flags. */
function define(cmd: CliCommand): CliCommand {
  return cmd
    .addOption(value("--cluster <NAME>", "", clusterName))
    .addOption(value("--broker <URL>", "", httpUrl).env("TEST_BROKER_URL"))
    .addOption(value("--count <N>", "", number({ min: 1, max: 5, whole: true })).default(2))
    .addOption(choice("--format <FORMAT>", "", ["text", "json"]))
    .addOption(value("--tag <TAG>", "", repeated(text)))
    .addOption(new Option("--json"))
    .addOption(conflicting(new Option("--fast"), ["slow"], "pick one speed"))
    .addOption(new Option("--slow"))
    .runs(async () => 0);
}

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
  const cmd = parseOnly("test", define, argv, env);
  if (cmd) requireAll(unset(cmd, "cluster", "broker"));
  return cmd?.opts();
};

const refusal = (argv: string[], env: NodeJS.ProcessEnv = {}) => refusalOf(() => parse(argv, env));

const GIVEN = ["--cluster", "c1", "--broker", "http://b/"];

describe("the command-line layer", () => {
  it("reads every value with its reader, defaults filled in", () => {
    expect(parse([...GIVEN, "--json", "--tag", "a", "--tag=b", "--format", "json"])).toEqual({
      cluster: "c1",
      broker: "http://b",
      count: 2,
      json: true,
      tag: ["a", "b"],
      format: "json",
    });
    // commander takes the next word as a value, even one that looks like a flag: its reader judges it.
    expect(refusal(["--cluster", "--broker", "x"])).toBe("--cluster \"--broker\" is not a valid cluster name (a DNS label: a-z, 0-9, '-')");
  });

  it("names an unknown flag and the known ones closest to it", () => {
    expect(refusal(["--clster", "c1"])).toBe("unknown flag '--clster'; did you mean '--cluster'?");
    expect(refusal(["--brokr=http://x"])).toBe("unknown flag '--brokr'; did you mean '--broker'?");
    expect(refusal(["--nothing-like-it"])).toBe("unknown flag '--nothing-like-it'");
  });

  it("says what commander refuses, in the project's words", () => {
    expect(refusal(["--cluster"])).toBe("--cluster needs a value");
    expect(refusal(["stray"])).toBe(`'test' takes no arguments, not "stray"`);
    expect(refusal(["--", "--cluster"])).toBe(`'test' takes no arguments, not "--cluster"`);
    expect(refusal(["--json=yes"])).toBe("--json takes no value");
    expect(refusal([...GIVEN, "--fast", "--slow"])).toBe("--fast does not go with --slow: pick one speed");
  });

  it("words each kind of value the same way", () => {
    expect(refusal([...GIVEN, "--count", "9"])).toBe('--count must be a whole number from 1 to 5, not "9"');
    expect(refusal([...GIVEN, "--count", "1.5"])).toBe('--count must be a whole number from 1 to 5, not "1.5"');
    expect(refusal([...GIVEN, "--format", "xml"])).toBe('--format must be text or json, not "xml"');
    expect(refusal(["--cluster", "c1", "--broker", "ftp://x"])).toBe("--broker must be an http or https URL");
    expect(() => listen("8443", "--listen", undefined)).toThrow("is not HOST:PORT");
  });

  it("names every missing flag at once, with its environment variable", () => {
    expect(refusal([])).toBe("--cluster NAME and --broker URL (or TEST_BROKER_URL) are required");
    expect(refusal(["--cluster", "c1"])).toBe("--broker URL is required (or TEST_BROKER_URL)");
    expect(parse(["--cluster", "c1"], { TEST_BROKER_URL: "http://env" })).toMatchObject({ broker: "http://env" });
  });

  it("takes a blank value, on the command line or in the environment, as no value", () => {
    expect(refusal(["--cluster", "c1"], { TEST_BROKER_URL: " " })).toBe("--broker URL is required (or TEST_BROKER_URL)");
    expect(parse([...GIVEN, "--count", ""])).toMatchObject({ count: 2 });
  });

  it("answers --help before reading any value, from the command line or the environment", () => {
    expect(parseOnly("test", define, ["--cluster", "Bad!", "--help"], {})).toBeNull();
    expect(parseOnly("test", define, ["-h"], { TEST_BROKER_URL: "not a url" })).toBeNull();
    // After `--`, it is an argument.
    expect(() => parseOnly("test", define, ["--", "--help"], {})).toThrow("takes no arguments");
  });
});
