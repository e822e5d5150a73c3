import { describe, expect, it } from "vitest";
import { etcdError } from "./etcd-log.ts";

const line = (o: Record<string, unknown>) => JSON.stringify({ ts: "2026-01-01T00:00:00Z", caller: "x.go:1", ...o });

describe("etcd's own reason for stopping", () => {
  it("is the last fatal entry's message and error (a port another process holds)", () => {
    const log = [
      line({ level: "info", msg: "configuring client listeners" }),
      line({ level: "error", msg: "something earlier", error: "not this" }),
      line({ level: "fatal", msg: "discovery failed", error: "listen tcp 127.0.0.1:2379: bind: address already in use", stacktrace: "main.main\n\tmain.go:10" }),
      "",
    ].join("\n");
    expect(etcdError(log)).toBe("discovery failed: listen tcp 127.0.0.1:2379: bind: address already in use");
  });

  it("falls back on the last error entry, and says nothing when there is none", () => {
    expect(etcdError([line({ level: "error", msg: "failed to publish", error: "timeout" }), line({ level: "info", msg: "stopping" })].join("\n"))).toBe("failed to publish: timeout");
    expect(etcdError(line({ level: "info", msg: "ready" }))).toBeNull();
    expect(etcdError('{"level":"fatal","msg":"cut in ha')).toBeNull();
  });
});
