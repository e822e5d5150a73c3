/**
 * The main flows, answered as the OpenAPI document says: every answer's status is declared for
 * its operation, with its media type, and its body validates against the declared schema.
 */
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN, BASE, peer } from "./helpers.ts";
import { validate } from "./json-schema.ts";

let doc: any;
const checked: string[] = [];

beforeAll(async () => {
  doc = await (await exports.default.fetch(`${BASE}/openapi.json`)).json();
});

function operationFor(method: string, path: string): { template: string; op: any } {
  for (const [template, item] of Object.entries<any>(doc.paths)) {
    const re = new RegExp(`^${template.replace(/[.]/g, "\\.").replace(/\{\w+\}/g, "[^/]+")}$`);
    if (re.test(path) && item[method.toLowerCase()]) return { template, op: item[method.toLowerCase()] };
  }
  throw new Error(`no operation for ${method} ${path}`);
}

/** Calls the Worker and checks the answer against the document; returns the parsed body. */
async function conforming(method: string, path: string, opts: { token?: string; body?: unknown } = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await exports.default.fetch(`${BASE}${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const { template, op } = operationFor(method, path.split("?")[0]);
  const where = `${method} ${template} → ${res.status}`;
  const declared = op.responses[String(res.status)];
  expect(declared, `${where} is not declared`).toBeDefined();
  const type = (res.headers.get("content-type") ?? "").split(";")[0];
  const text = await res.text();
  const body = text ? (type.endsWith("json") ? JSON.parse(text) : text) : null;
  if (declared.headers?.["Retry-After"]) expect(res.headers.get("retry-after"), `${where}: Retry-After`).toMatch(/^[1-9]\d*$/);
  if (text) {
    const media = declared.content?.[type];
    expect(media, `${where}: ${type} is not declared (${Object.keys(declared.content ?? {})})`).toBeDefined();
    expect({ where, errors: validate(media.schema, body, doc) }).toEqual({ where, errors: [] });
  }
  checked.push(where);
  return { status: res.status, body };
}

describe("response bodies follow the OpenAPI document", () => {
  const C = "openapi-flows";
  const A = `/v1/admin/clusters/${C}`;
  const T = `/v1/clusters/${C}`;

  it("through a bootstrap, a join, a queue, an abandon, a revocation and the admin views", async () => {
    const created = await conforming("POST", `${A}/enrollment-tokens`, { token: ADMIN, body: { maxUses: 10, description: "flows" } });
    expect(created.status).toBe(201);
    const enrollment = created.body.token;

    const boot = await conforming("POST", `${T}/tickets`, { token: enrollment, body: { node: "b0", peerURL: peer(1) } });
    expect(boot.status).toBe(201);
    await conforming("GET", `${T}/tickets/${boot.body.ticket}`, { token: boot.body.admission });
    await conforming("POST", `${T}/tickets/${boot.body.ticket}/heartbeat`, { token: boot.body.admission });
    await conforming("POST", `${T}/admissions/introspect`, { body: { token: boot.body.admission } });
    expect((await conforming("POST", `${T}/tickets/${boot.body.ticket}/complete`, { token: boot.body.admission, body: { memberID: "1001" } })).body.state).toBe(
      "joined",
    );
    await conforming("POST", `${T}/admissions/introspect`, { body: { token: boot.body.admission } });

    const a = await conforming("POST", `${T}/tickets`, { token: enrollment, body: { node: "a", peerURL: peer(2) } });
    const q = await conforming("POST", `${T}/tickets`, { token: enrollment, body: { node: "q", peerURL: peer(3) } });
    expect(q.status).toBe(202);
    await conforming("GET", `${T}/tickets/${q.body.ticket}`, { token: enrollment });
    await conforming("POST", `${T}/tickets`, { token: enrollment, body: { node: "q", peerURL: peer(4) } }); // 409
    await conforming("POST", `${T}/tickets/${a.body.ticket}/heartbeat`, { token: enrollment }); // 403
    await conforming("POST", `${T}/tickets`, { token: "jbe_nope", body: { node: "z", peerURL: peer(9) } }); // 401
    await conforming("POST", `${T}/tickets`, { token: enrollment, body: { node: "-bad", peerURL: peer(9) } }); // 400

    const revoked = await conforming("POST", `${A}/admissions/${a.body.jti}/revoke`, { token: ADMIN, body: { reason: "flows" } });
    expect(revoked.body.changed).toBe(true);
    await conforming("POST", `${T}/tickets/${a.body.ticket}/heartbeat`, { token: a.body.admission }); // 410
    await conforming("GET", `${T}/tickets/${a.body.ticket}`, { token: a.body.admission }); // 410
    await conforming("DELETE", `${T}/tickets/${a.body.ticket}`, { token: a.body.admission }); // 410
    await conforming("DELETE", `${T}/tickets/${q.body.ticket}`, { token: enrollment });

    await conforming("GET", `${T}/jwks.json`);
    await conforming("GET", `${T}/revocations`);
    await conforming("GET", `/v1/clusters/no-such-cluster/jwks.json`); // 404
    await conforming("GET", A, { token: ADMIN });
    await conforming("GET", `${A}/tickets`, { token: ADMIN });
    await conforming("GET", `${A}/enrollment-tokens`, { token: ADMIN });
    await conforming("GET", `${A}/audit?limit=5`, { token: ADMIN });
    await conforming("GET", `${A}/metrics`, { token: ADMIN });
    await conforming("POST", `${A}/pause`, { token: ADMIN });
    await conforming("POST", `${A}/resume`, { token: ADMIN });
    await conforming("PUT", `${A}/policy`, { token: ADMIN, body: { maxQueue: 50 } });
    await conforming("POST", `${A}/keys/rotate`, { token: ADMIN });
    await conforming("POST", `/v1/admin/clusters/openapi-flows-adopted/adopt`, { token: ADMIN, body: { members: [{ node: "m1", peerURL: peer(7) }] } });
    await conforming("DELETE", `/v1/admin/clusters/openapi-flows-adopted/members/m1`, { token: ADMIN });
    await conforming("POST", `/v1/admin/clusters/never-there/pause`, { token: ADMIN }); // 404
    await conforming("GET", A, { token: "wrong" }); // 401
    await conforming("GET", "/");
    await conforming("GET", "/healthz");

    const statuses = new Set(checked.map((w) => w.split(" → ")[1]));
    for (const s of ["200", "201", "202", "400", "401", "403", "404", "409", "410"]) expect(statuses).toContain(s);
  });
});
