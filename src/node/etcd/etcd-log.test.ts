import { describe, expect, it } from "vitest";
import { catchUpFacts, etcdError, etcdTlsRejections } from "./etcd-log.ts";

const line = (o: Record<string, unknown>) => JSON.stringify({ ts: "2026-01-01T00:00:00Z", caller: "x.go:1", ...o });

describe("etcd's own reason for stopping", () => {
  it("is the last fatal entry's message and error (a port another process holds)", () => {
    const log = [
      line({ level: "info", msg: "configuring client listeners" }),
      line({ level: "error", msg: "something earlier", error: "not this" }),
      line({
        level: "fatal",
        msg: "discovery failed",
        error: "listen tcp 127.0.0.1:2379: bind: address already in use",
        stacktrace: "main.main\n\tmain.go:10",
      }),
      "",
    ].join("\n");
    expect(etcdError(log)).toBe("discovery failed: listen tcp 127.0.0.1:2379: bind: address already in use");
  });

  it("falls back on the last error entry, and says nothing when there is none", () => {
    expect(etcdError([line({ level: "error", msg: "failed to publish", error: "timeout" }), line({ level: "info", msg: "stopping" })].join("\n"))).toBe(
      "failed to publish: timeout",
    );
    expect(etcdError(line({ level: "info", msg: "ready" }))).toBeNull();
    expect(etcdError('{"level":"fatal","msg":"cut in ha')).toBeNull();
  });
});

describe("the certificate refusals etcd logs", () => {
  // Lines as etcd 3.4 and 3.6 wrote them (a node whose certificates another CA signed).
  const v34 =
    '{"level":"warn","ts":"2026-12-06T03:12:53.563Z","caller":"embed/config_logging.go:287","msg":"rejected connection","remote-addr":"127.0.0.1:57748","server-name":"","error":"tls: failed to verify client certificate: x509: certificate signed by unknown authority"}';
  const v36 =
    '{"level":"warn","ts":"2026-12-06T03:12:58.317433Z","caller":"embed/config_logging.go:194","msg":"rejected connection on client endpoint","remote-addr":"127.0.0.1:40130","server-name":"","error":"tls: failed to verify certificate: x509: certificate signed by unknown authority"}';
  const peerRefusedUs =
    '{"level":"warn","ts":"2026-12-06T03:13:22.578997Z","caller":"embed/config_logging.go:194","msg":"rejected connection on peer endpoint","remote-addr":"127.0.0.1:50382","server-name":"","error":"remote error: tls: bad certificate"}';
  const outgoing =
    '{"level":"warn","ts":"2026-12-06T03:13:22.578853Z","caller":"etcdserver/cluster_util.go:86","msg":"failed to get cluster response","address":"https://127.0.0.1:24016/members","error":"Get \\"https://127.0.0.1:24016/members\\": tls: failed to verify certificate: x509: certificate signed by unknown authority"}';
  const noise =
    '{"level":"warn","ts":"2026-12-06T03:13:00.948773Z","caller":"embed/config_logging.go:194","msg":"rejected connection on client endpoint","remote-addr":"127.0.0.1:40160","server-name":"","error":"local error: tls: bad record MAC"}';
  const expired =
    '{"level":"warn","ts":"2026-12-06T03:13:00Z","msg":"rejected connection on peer endpoint","remote-addr":"10.0.0.5:41000","error":"tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-12-06T03:13:00Z is before 2026-12-06T03:20:00Z"}';

  it("says where, who, and etcd's words; other TLS errors and other lines are not certificate refusals", () => {
    const found = etcdTlsRejections(
      [v34, v36, peerRefusedUs, outgoing, noise, expired, line({ level: "info", msg: "ready" }), '{"level":"warn","msg":"rejected conn'].join("\n"),
    );
    expect(found).toEqual([
      {
        at: "client or peer port",
        remote: "127.0.0.1:57748",
        error: "tls: failed to verify client certificate: x509: certificate signed by unknown authority",
        refusedBy: "etcd",
        expiry: false,
        ts: "2026-12-06T03:12:53.563Z",
      },
      {
        at: "client port",
        remote: "127.0.0.1:40130",
        error: "tls: failed to verify certificate: x509: certificate signed by unknown authority",
        refusedBy: "etcd",
        expiry: false,
        ts: "2026-12-06T03:12:58.317433Z",
      },
      {
        at: "peer port",
        remote: "127.0.0.1:50382",
        error: "remote error: tls: bad certificate",
        refusedBy: "remote",
        expiry: false,
        ts: "2026-12-06T03:13:22.578997Z",
      },
      {
        at: "a peer",
        remote: "https://127.0.0.1:24016/members",
        error: 'Get "https://127.0.0.1:24016/members": tls: failed to verify certificate: x509: certificate signed by unknown authority',
        refusedBy: "etcd",
        expiry: false,
        ts: "2026-12-06T03:13:22.578853Z",
      },
      expect.objectContaining({ at: "peer port", remote: "10.0.0.5:41000", expiry: true }),
    ]);
  });
});

describe("how a member caught up, from its log", () => {
  const at = (ms: number, o: Record<string, unknown>) =>
    JSON.stringify({ level: "info", ts: new Date(Date.UTC(2026, 0, 1) + ms).toISOString(), caller: "x.go:1", ...o });

  it("counts the snapshot it was sent and the publish that timed out, and times the publish from its first line", () => {
    const log = [
      at(0, { msg: "starting an etcd server" }),
      at(40, { msg: "received and saved database snapshot", "incoming-snapshot-index": 157 }),
      at(7_010, {
        level: "warn",
        msg: "failed to publish local member to cluster through raft",
        "publish-timeout": "7s",
        error: "etcdserver: request timed out",
      }),
      at(7_020, { msg: "published local member to cluster through raft" }),
      at(7_021, { msg: "published local member to cluster through raft" }),
      '{"level":"info","msg":"cut',
    ].join("\n");
    expect(catchUpFacts(log)).toEqual({ snapshotsReceived: 1, failedPublishes: 1, publishMs: 7_020 });
  });

  it("reads 3.4's float timestamps, and says null for a member that never published", () => {
    expect(
      catchUpFacts(
        [
          JSON.stringify({ level: "info", ts: 1_700_000_000.5, msg: "x" }),
          JSON.stringify({ level: "info", ts: 1_700_000_000.75, msg: "published local member to cluster through raft" }),
        ].join("\n"),
      ),
    ).toEqual({
      snapshotsReceived: 0,
      failedPublishes: 0,
      publishMs: 250,
    });
    expect(catchUpFacts(at(0, { msg: "starting" })).publishMs).toBeNull();
  });
});
