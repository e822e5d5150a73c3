import { describe, expect, it } from "vitest";
import { classifyEtcdError } from "./gateway.ts";
import { ETCD_MINORS, etcdTraits, knownEtcdMessages, maxLearnersArgs, minorOf, parseEtcdVersion, refusedFlag, type EtcdRefusal } from "./versions.ts";

describe("the etcd version table", () => {
  it("has an entry per supported minor version", () => {
    expect(ETCD_MINORS).toEqual(["3.4", "3.5", "3.6", "3.7"]);
    for (const minor of ETCD_MINORS) expect(etcdTraits(minor).minor).toBe(minor);
    expect(() => etcdTraits("3.3" as never)).toThrow(/unsupported etcd version 3.3/);
  });

  it("classifies every refusal of every version as that refusal, and every 'not now' as unavailable", () => {
    for (const minor of ETCD_MINORS) {
      const t = etcdTraits(minor);
      for (const [refusal, e] of Object.entries(t.refusals))
        expect(classifyEtcdError(e.message, e.grpcCode), `${minor} ${refusal}`).toBe(refusal as EtcdRefusal);
      for (const [name, e] of Object.entries(t.unavailable)) expect(classifyEtcdError(e.message, e.grpcCode), `${minor} ${name}`).toBe("unavailable");
    }
  });

  it("lists the longer of two overlapping messages first", () => {
    const messages = knownEtcdMessages().map((m) => m.message);
    expect(messages.indexOf("etcdserver: can only promote a learner member which is in sync with leader")).toBeLessThan(
      messages.indexOf("etcdserver: can only promote a learner member"),
    );
  });

  it("maps FailedPrecondition to 412 on 3.4 and 400 later", () => {
    expect(etcdTraits("3.4").refusals.too_many_learners.httpStatus).toBe(412);
    for (const minor of ["3.5", "3.6", "3.7"] as const) expect(etcdTraits(minor).refusals.too_many_learners.httpStatus).toBe(400);
    for (const minor of ETCD_MINORS) expect(etcdTraits(minor).refusals.unhealthy_cluster.httpStatus).toBe(503);
  });
});

describe("minorOf and parseEtcdVersion", () => {
  it("reads `etcd --version`", () => {
    expect(parseEtcdVersion("etcd Version: 3.6.16\nGit SHA: x\nGo Version: go1.26.8\n")).toEqual({ version: "3.6.16", minor: "3.6" });
    expect(parseEtcdVersion("etcd Version: 3.4.23\nGit SHA: Not provided\n")).toEqual({ version: "3.4.23", minor: "3.4" });
  });
  it("gives a newer release the newest entry and refuses older ones", () => {
    expect(minorOf("3.8.0-alpha.0")).toBe("3.7");
    expect(minorOf("4.0.0")).toBe("3.7");
    expect(minorOf("v3.5.35")).toBe("3.5");
    expect(minorOf("3.3.27")).toBeNull();
    expect(() => parseEtcdVersion("etcd Version: 3.3.27\n")).toThrow(/3.3.27 is not supported/);
    expect(() => parseEtcdVersion("bash: etcd: command not found")).toThrow(/cannot read etcd's version/);
  });
});

describe("maxLearnersArgs", () => {
  it("passes no flag for the default limit, the version's flag above it, and refuses where there is none", () => {
    expect(maxLearnersArgs(etcdTraits("3.6"), 1)).toEqual([]);
    expect(maxLearnersArgs(etcdTraits("3.6"), 6)).toEqual(["--max-learners=6"]);
    expect(maxLearnersArgs(etcdTraits("3.7"), 16)).toEqual(["--max-learners=16"]);
    expect(maxLearnersArgs(etcdTraits("3.5"), 1)).toEqual([]);
    expect(() => maxLearnersArgs(etcdTraits("3.5"), 2)).toThrow(/needs etcd 3.6/);
    expect(() => maxLearnersArgs(etcdTraits("3.6"), 0)).toThrow(/whole number/);
  });
});

describe("refusedFlag", () => {
  it("finds a flag the version refuses, however it is spelled", () => {
    expect(refusedFlag(etcdTraits("3.5"), ["--name=a", "--max-learners=3"])?.flag).toBe("--max-learners");
    expect(refusedFlag(etcdTraits("3.4"), ["-max-learners", "3"])?.flag).toBe("--max-learners");
    expect(refusedFlag(etcdTraits("3.6"), ["--max-learners=3"])).toBeNull();
    expect(refusedFlag(etcdTraits("3.6"), ["--enable-v2=false"])?.reason).toMatch(/removed/);
    expect(refusedFlag(etcdTraits("3.7"), ["--experimental-max-learners=2"])?.reason).toMatch(/--max-learners/);
  });
});
