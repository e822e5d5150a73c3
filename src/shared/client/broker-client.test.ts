import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BrokerClient, BrokerProblem, BrokerUnreachable, InvalidInput } from "./index.ts";

// A loopback HTTP server standing in for whatever answers at the broker's address: the broker's
// own problem+json, a proxy's HTML error page, a redirect, silence.
let server: Server;
let base: string;
const seen: { method: string; url: string; auth?: string; type?: string; body: string }[] = [];

const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  "GET /v1/admin/clusters/c1": (_q, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"cluster":"c1","paused":false}'),
  "POST /v1/admin/clusters/c1/pause": (_q, res) =>
    res
      .writeHead(404, { "content-type": "application/problem+json" })
      .end(
        JSON.stringify({ type: "https://x/unknown-cluster", title: "Not Found", status: 404, detail: "cluster c1 does not exist", code: "unknown_cluster" }),
      ),
  "GET /v1/admin/clusters/c1/tickets": (_q, res) =>
    res
      .writeHead(503, { "content-type": "application/problem+json", "retry-after": "7" })
      .end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, detail: "retry", code: "unavailable" })),
  "GET /v1/admin/clusters/c1/enrollment-tokens": (_q, res) => res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad gateway</html>"),
  "POST /v1/admin/clusters/c1/keys/rotate": (_q, res) => res.writeHead(302, { location: "https://elsewhere.example/" }).end(),
  "GET /v1/admin/clusters/c1/audit": () => {
    /* never answers */
  },
  "GET /v1/admin/clusters/c1/metrics": (_q, res) => res.writeHead(200, { "content-type": "text/plain" }).end("join_broker_paused 0\n"),
  "PUT /v1/admin/clusters/c1/policy": (_q, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"maxInFlight":2}'),
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, type: req.headers["content-type"], body });
      const route = routes[`${req.method} ${req.url!.split("?")[0]}`];
      if (route) route(req, res);
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const admin = (timeoutMs = 5_000) => new BrokerClient({ baseUrl: base, bearer: "adm-secret", timeoutMs }).admin("c1");

describe("BrokerClient", () => {
  it("sends the bearer token and JSON, and returns the parsed body with its exact text", async () => {
    const reply = await admin().setPolicy({ maxInFlight: 2 });
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ maxInFlight: 2 });
    expect(reply.text).toBe('{"maxInFlight":2}');
    const sent = seen.at(-1)!;
    expect(sent).toMatchObject({
      method: "PUT",
      url: "/v1/admin/clusters/c1/policy",
      auth: "Bearer adm-secret",
      type: "application/json",
      body: '{"maxInFlight":2}',
    });
  });

  it("turns a problem+json answer into a BrokerProblem with its code, status and Retry-After", async () => {
    const unknown = await admin()
      .pause()
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(BrokerProblem);
    expect(unknown).toMatchObject({ status: 404, code: "unknown_cluster", refused: false, transient: false });
    expect((unknown as BrokerProblem).retryAfter).toBeUndefined(); // no Retry-After: no hint, not "0 s"
    const busy = (await admin()
      .tickets()
      .catch((e: unknown) => e)) as BrokerProblem;
    expect(busy).toMatchObject({ status: 503, code: "unavailable", retryAfter: 7, transient: true });
  });

  it("describes an answer that is not a problem (a proxy's error page) with an http_<status> code", async () => {
    const e = (await admin()
      .listEnrollmentTokens()
      .catch((x: unknown) => x)) as BrokerProblem;
    expect(e).toBeInstanceOf(BrokerProblem);
    expect(e.problem).toMatchObject({ code: "http_502", status: 502, detail: "<html>Bad gateway</html>" });
  });

  it("does not follow redirects with the admin token", async () => {
    const e = await admin()
      .rotateKeys()
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(BrokerUnreachable);
  });

  it("gives up after its deadline, and reports a closed port as unreachable", async () => {
    const started = Date.now();
    const slow = (await admin(300)
      .audit({})
      .catch((x: unknown) => x)) as Error;
    expect(slow).toBeInstanceOf(BrokerUnreachable);
    expect(slow.message).toMatch(/no answer within/);
    expect(Date.now() - started).toBeLessThan(5_000);

    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    const closed = (await new BrokerClient({ baseUrl: `http://127.0.0.1:${port}` })
      .admin("c1")
      .status()
      .catch((x: unknown) => x)) as Error;
    expect(closed).toBeInstanceOf(BrokerUnreachable);
    expect(closed.message).toContain("ECONNREFUSED");
  });

  it("aborts a long poll when the caller's signal fires", async () => {
    const stop = new AbortController();
    const pending = admin()
      .audit({ wait: 30 }, stop.signal)
      .catch((x: unknown) => x);
    setTimeout(() => stop.abort(new Error("interrupted")), 100);
    expect(((await pending) as Error).message).toBe("interrupted");
  });

  it("reads Prometheus text as text", async () => {
    expect((await admin().metrics()).body).toBe("join_broker_paused 0\n");
  });

  it("checks inputs with the broker's schemas and sends nothing when they fail", async () => {
    const before = seen.length;
    const client = new BrokerClient({ baseUrl: base, bearer: "x" });
    expect(() => client.admin("Not_A_Cluster")).toThrow(InvalidInput);
    expect(() => admin().setPolicy({ maxInFlight: 0 })).toThrow(/maxInFlight/);
    expect(() => admin().setPolicy({ bogus: 1 } as never)).toThrow(/bogus/);
    expect(() => admin().revokeAdmission("adm_1", "")).toThrow(/reason/);
    expect(() => admin().adopt([{ node: "n1", peerURL: "https://10.0.0.1" }])).toThrow(/port/);
    expect(() => admin().createEnrollmentToken({ ttlSeconds: 5 })).toThrow(/ttlSeconds/);
    expect(() => admin().createEnrollmentToken({ peerHosts: ["10.0.0.0/33"] })).toThrow(/peerHosts/);
    expect(() => admin().createEnrollmentToken({ nodes: ["ctrl 1"] })).toThrow(/nodes/);
    expect(() => client.cluster("c1").requestTicket("n1", "http://0177.0.0.1:2380")).toThrow(/IPv4/);
    expect(() => client.cluster("c1").requestTicket("n1", "ftp://10.0.0.1:2380")).toThrow(/http or https/);
    expect(seen.length).toBe(before);
  });

  it("refuses a broker URL that is not http(s)", () => {
    expect(() => new BrokerClient({ baseUrl: "ftp://broker" })).toThrow(/http or https/);
    expect(() => new BrokerClient({ baseUrl: "broker.example.com" })).toThrow(/absolute URL/);
  });
});
