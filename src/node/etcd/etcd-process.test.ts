import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { etcdCommandLine, etcdFlags, startEtcd } from "./etcd-process.ts";

describe("etcdFlags", () => {
  const input = {
    name: "ctrl-2",
    dataDir: "/var/lib/etcd",
    clientURL: "http://127.0.0.1:2379",
    peerURL: "http://127.0.0.1:2380",
    initialCluster: ["ctrl-1=http://10.0.0.1:2380", "ctrl-2=http://127.0.0.1:2380"],
    initialClusterState: "existing" as const,
  };
  it("lists every flag a joining member needs, in a stable order", () => {
    expect(etcdFlags(input)).toEqual([
      "--name=ctrl-2",
      "--data-dir=/var/lib/etcd",
      "--listen-client-urls=http://127.0.0.1:2379",
      "--advertise-client-urls=http://127.0.0.1:2379",
      "--listen-peer-urls=http://127.0.0.1:2380",
      "--initial-advertise-peer-urls=http://127.0.0.1:2380",
      "--initial-cluster=ctrl-1=http://10.0.0.1:2380,ctrl-2=http://127.0.0.1:2380",
      "--initial-cluster-state=existing",
      "--heartbeat-interval=100",
      "--election-timeout=1000",
      "--logger=zap",
      "--log-outputs=stderr",
    ]);
  });
  it("adds the cluster token, timing and extra flags when given", () => {
    const flags = etcdFlags({
      ...input,
      initialClusterState: "new",
      initialClusterToken: "tok",
      heartbeatIntervalMs: 50,
      electionTimeoutMs: 500,
      extraArgs: ["--quota-backend-bytes=1"],
    });
    expect(flags).toContain("--initial-cluster-token=tok");
    expect(flags).toContain("--heartbeat-interval=50");
    expect(flags.at(-1)).toBe("--quota-backend-bytes=1");
  });
  it("with TLS, wants a certificate from the cluster's CA on both ports", () => {
    const flags = etcdFlags({
      ...input,
      tls: { caFile: "/p/ca.crt", certFile: "/p/server.crt", keyFile: "/p/server.key", peerCertFile: "/p/peer.crt", peerKeyFile: "/p/peer.key" },
    });
    for (const f of [
      "--cert-file=/p/server.crt",
      "--key-file=/p/server.key",
      "--trusted-ca-file=/p/ca.crt",
      "--client-cert-auth",
      "--peer-cert-file=/p/peer.crt",
      "--peer-key-file=/p/peer.key",
      "--peer-trusted-ca-file=/p/ca.crt",
      "--peer-client-cert-auth",
    ]) {
      expect(flags).toContain(f);
    }
    expect(etcdFlags(input).some((f) => f.includes("cert"))).toBe(false);
  });

  it("quotes only what a shell would split", () => {
    expect(etcdCommandLine("/usr/bin/etcd", { ...input, dataDir: "/tmp/my dir" })).toContain("'--data-dir=/tmp/my dir'");
    expect(etcdCommandLine("/usr/bin/etcd", input)).toMatch(/^\/usr\/bin\/etcd --name=ctrl-2 /);
  });
});

describe("startEtcd's log file", () => {
  // The process runner, not etcd, is under test: a program that exits while output it started
  // is still to come through the pipes (a descendant writes it), which 'exit' does not wait for.
  async function runScript(script: string, logFileIn: (dir: string) => string) {
    const dir = mkdtempSync(join(tmpdir(), "etcd-process-"));
    const bin = join(dir, "script");
    writeFileSync(bin, `#!/bin/sh\n${script}`);
    chmodSync(bin, 0o755);
    const logFile = logFileIn(dir);
    const proc = await startEtcd({
      bin,
      name: "n",
      dataDir: join(dir, "data"),
      clientURL: "http://127.0.0.1:1",
      peerURL: "http://127.0.0.1:2",
      initialCluster: [],
      initialClusterState: "new",
      waitFor: "none",
      logFile,
    });
    return { proc, logFile, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
  }

  it("has every line the process printed once it counts as exited, also those that came through the pipes after its exit", async () => {
    using run = await runScript("echo first line\n(sleep 0.3; echo last line) &\nexit 0\n", (dir) => join(dir, "etcd.log"));
    expect(await run.proc.exited).toBe(0);
    expect(readFileSync(run.logFile, "utf8")).toBe("first line\nlast line\n");
    expect(run.proc.logTail()).toBe("first line\nlast line");
  });

  it("that cannot be written costs the file, not the node: the tail kept in memory says so", async () => {
    using run = await runScript("echo a line\n", (dir) => join(dir, "no-such-directory", "etcd.log"));
    expect(await run.proc.exited).toBe(0);
    expect(run.proc.logTail()).toContain(`the etcd log file ${run.logFile} could not be written: ENOENT`);
    expect(run.proc.logTail()).toContain("a line");
  });
});
