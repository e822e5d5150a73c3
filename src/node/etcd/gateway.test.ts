import { describe, expect, it } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  classifyEtcdError,
  EtcdGateway,
  initialClusterEntries,
  isGatewayAnswer,
  isRetryableEtcdError,
  memberByPeerUrl,
  parseEndpoints,
  type EtcdMember,
} from "./gateway.ts";
import { nodeFetch } from "./tls-fetch.ts";

describe("parseEndpoints", () => {
  it("splits, trims, drops trailing slashes and duplicates", () => {
    expect(parseEndpoints(" http://127.0.0.1:2379/ ,http://127.0.0.1:2379,https://10.0.0.2:2379")).toEqual(["http://127.0.0.1:2379", "https://10.0.0.2:2379"]);
  });
  it("refuses an empty list and other schemes", () => {
    expect(() => parseEndpoints(" , ")).toThrow(/no etcd endpoint/);
    expect(() => parseEndpoints("unix:///run/etcd.sock")).toThrow(/http or https/);
  });
});

describe("classifyEtcdError", () => {
  // The messages etcd 3.4.23's gateway sends, verbatim.
  const cases: [string, number, string][] = [
    ["etcdserver: too many learner members in cluster", 9, "too_many_learners"],
    ["etcdserver: unhealthy cluster", 14, "unhealthy_cluster"],
    ["etcdserver: re-configuration failed due to not enough started members", 2, "not_enough_started"],
    ["etcdserver: can only promote a learner member which is in sync with leader", 9, "learner_not_ready"],
    ["etcdserver: can only promote a learner member", 9, "member_not_learner"],
    ["etcdserver: Peer URLs already exists", 9, "peer_url_exists"],
    ["etcdserver: member ID already exist", 9, "member_id_exists"],
    ["etcdserver: member not found", 5, "member_not_found"],
    ["etcdserver: request timed out", 14, "unavailable"],
    ["etcdserver: no leader", 14, "unavailable"],
    // A learner's endpoint: not etcd's refusal of the change, only this endpoint's; ask a voter.
    ["etcdserver: rpc not supported for learner", 9, "unavailable"],
    ["invalid character 'g' looking for beginning of value", 3, "bad_request"],
    ["something new", 2, "unknown"],
  ];
  it.each(cases)("%s → %s", (message, code, kind) => {
    expect(classifyEtcdError(message, code)).toBe(kind);
  });
  it("treats only the not-now errors as retryable", () => {
    expect(isRetryableEtcdError("unhealthy_cluster")).toBe(true);
    expect(isRetryableEtcdError("learner_not_ready")).toBe(true);
    expect(isRetryableEtcdError("peer_url_exists")).toBe(false);
    expect(isRetryableEtcdError("bad_request")).toBe(false);
  });
});

describe("isGatewayAnswer", () => {
  // etcd's gateway, verbatim (3.4.23 unless marked; src/node/etcd/versions.ts has every version's).
  const etcd: [number, Record<string, unknown>][] = [
    [200, { header: { cluster_id: "15118495548433857066", member_id: "13668033151171901709", raft_term: "2" }, members: [] }],
    [404, { error: "etcdserver: member not found", message: "etcdserver: member not found", code: 5 }],
    [412, { error: "etcdserver: too many learner members in cluster", message: "etcdserver: too many learner members in cluster", code: 9 }],
    [400, { error: "etcdserver: too many learner members in cluster", code: 9, message: "etcdserver: too many learner members in cluster" }], // 3.5
    [400, { code: 9, message: "etcdserver: too many learner members in cluster" }], // 3.6, 3.7
    [500, { code: 2, message: "etcdserver: re-configuration failed due to not enough started members" }], // every version
    [503, { error: "etcdserver: unhealthy cluster", message: "etcdserver: unhealthy cluster", code: 14 }],
    [503, { code: 14, message: "etcdserver: request timed out" }], // grpc-gateway v2 drops `error`
  ];
  it.each(etcd)("HTTP %i %j is etcd", (status, body) => {
    expect(isGatewayAnswer(status, body)).toBe(true);
  });
  // Other servers on an etcd endpoint.
  const strangers: [number, Record<string, unknown>][] = [
    [404, { type: "about:blank", title: "Not Found", status: 404, code: "not_found", detail: "no route" }],
    [404, { message: "Not Found", code: 404 }],
    [404, { error: "etcdserver: member not found", code: 9 }],
    [405, { error: "Method Not Allowed", code: 12 }],
    [500, { status: "error", detail: "upstream failed" }],
    [502, { error: "bad gateway" }],
    [200, {}],
    [200, { ok: true }],
  ];
  it.each(strangers)("HTTP %i %j is not etcd", (status, body) => {
    expect(isGatewayAnswer(status, body)).toBe(false);
  });
});

const member = (over: Partial<EtcdMember>): EtcdMember => ({ id: "1", name: "", peerURLs: [], clientURLs: [], isLearner: false, started: false, ...over });

describe("members", () => {
  const members = [
    member({ id: "1", name: "a", peerURLs: ["http://10.0.0.1:2380"], started: true }),
    member({ id: "2", peerURLs: ["http://10.0.0.2:2380/"], isLearner: true }),
  ];
  it("finds a member by peer URL, ignoring a trailing slash", () => {
    expect(memberByPeerUrl(members, "http://10.0.0.2:2380")?.id).toBe("2");
    expect(memberByPeerUrl(members, "http://10.0.0.1:2380/")?.id).toBe("1");
    expect(memberByPeerUrl(members, "http://10.0.0.3:2380")).toBeUndefined();
    // One address, one spelling: a member added by hand as HTTP://HOST is found by its canonical URL.
    expect(memberByPeerUrl([member({ id: "4", peerURLs: ["HTTP://Ctrl-4.Example:2380/"] })], "http://ctrl-4.example:2380")?.id).toBe("4");
  });
  it("names unstarted members through the callback and skips those it cannot name", () => {
    expect(initialClusterEntries(members, (m) => (m.id === "2" ? "b" : undefined))).toEqual(["a=http://10.0.0.1:2380", "b=http://10.0.0.2:2380/"]);
    expect(initialClusterEntries(members, () => undefined)).toEqual(["a=http://10.0.0.1:2380"]);
  });
});

describe("EtcdGateway: which member it asks", () => {
  /** Loopback servers answering as etcd's JSON gateway does: each one's answer to member/add, in order. */
  async function members(answers: Array<"unhealthy" | "added" | "too_many_learners">): Promise<{ urls: string[]; asked: number[]; close: () => void }> {
    const asked = answers.map(() => 0);
    const servers = answers.map((answer, i) =>
      createServer((_req, res) => {
        asked[i]!++;
        res.setHeader("content-type", "application/json");
        if (answer === "added")
          res.end(
            JSON.stringify({
              header: { cluster_id: "1", member_id: String(i + 1), raft_term: "2" },
              member: { ID: "99", peerURLs: ["http://10.0.0.9:2380"], isLearner: true },
              members: [],
            }),
          );
        else {
          const message = answer === "unhealthy" ? "etcdserver: unhealthy cluster" : "etcdserver: too many learner members in cluster";
          res.statusCode = 503;
          res.end(JSON.stringify({ error: message, message, code: answer === "unhealthy" ? 14 : 9 }));
        }
      }),
    );
    await Promise.all(servers.map((s) => new Promise<void>((ok) => s.listen(0, "127.0.0.1", ok))));
    return {
      urls: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`),
      asked,
      close: () => {
        for (const s of servers) s.close();
      },
    };
  }

  it("asks the next member when one calls the cluster unhealthy (etcd checks a change against the connections of the member asked)", async () => {
    const m = await members(["unhealthy", "added"]);
    try {
      const added = await new EtcdGateway(m.urls).memberAdd(["http://10.0.0.9:2380"], { learner: true });
      expect(added).toMatchObject({ ok: true, endpoint: m.urls[1] });
      expect(m.asked).toEqual([1, 1]);
    } finally {
      m.close();
    }
  });

  it("answers 'unhealthy' when every member says so, and another member's refusal as it is", async () => {
    const all = await members(["unhealthy", "unhealthy"]);
    const mixed = await members(["unhealthy", "too_many_learners"]);
    try {
      expect(await new EtcdGateway(all.urls).memberAdd(["http://10.0.0.9:2380"], { learner: true })).toMatchObject({
        ok: false,
        error: { kind: "unhealthy_cluster" },
      });
      expect(all.asked).toEqual([1, 1]);
      expect(await new EtcdGateway(mixed.urls).memberAdd(["http://10.0.0.9:2380"], { learner: true })).toMatchObject({
        ok: false,
        error: { kind: "too_many_learners", endpoint: mixed.urls[1] },
      });
    } finally {
      all.close();
      mixed.close();
    }
  });
});

describe("an endpoint that does not answer in time", () => {
  it("is reported as timed out over node:http too (not as the timeout's legacy DOMException code)", async () => {
    // Accepts the request and never answers it.
    const silent = createServer(() => {});
    await new Promise<void>((ok) => silent.listen(0, "127.0.0.1", ok));
    const second = createServer(() => {});
    await new Promise<void>((ok) => second.listen(0, "127.0.0.1", ok));
    try {
      const urls = [silent, second].map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`);
      for (const fetch of [undefined, nodeFetch()]) {
        const list = await new EtcdGateway(urls.join(","), { timeoutMs: 300, ...(fetch ? { fetch } : {}) }).memberList();
        expect(list.ok ? "answered" : list.error.message).toBe(
          `no etcd endpoint answered /v3/cluster/member/list: ${urls[0]}: timed out; ${urls[1]}: timed out`,
        );
      }
    } finally {
      silent.closeAllConnections();
      second.closeAllConnections();
      silent.close();
      second.close();
    }
  });
});
