/**
 * The OpenAPI document at GET /openapi.json: a structurally valid OpenAPI 3.1 document, generated
 * from the request schemas, that lists every route the app serves (read from the app's own route
 * table) and nothing it does not.
 */
import { exports } from "cloudflare:workers";
import { z } from "@hono/zod-openapi";
import { describe, expect, it } from "vitest";
import { app } from "../../src/broker/app.ts";
import { ADMIN } from "./helpers.ts";
import { CONTRACT_VERSION } from "../../src/shared/protocol/wire.ts";

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

/** Served on purpose without an operation: service discovery, the liveness probe and the document itself. */
const UNDOCUMENTED = new Set(["GET /openapi.json"]);
/** Service identification and liveness: no credential, and nothing to refuse. */
const SERVICE_ROUTES = new Set(["GET /", "GET /healthz", "GET /console", "GET /console/app.js", "GET /console/app.css", "GET /console/icon.svg"]);

// The parts of the OpenAPI 3.1 specification this document uses, as the specification requires them.
const Reference = z.strictObject({ $ref: z.string().startsWith("#/"), summary: z.string().optional(), description: z.string().optional() });
const SchemaObject = z.union([z.record(z.string(), z.unknown()), z.boolean()]);
const MediaType = z.object({ schema: SchemaObject.optional(), example: z.unknown().optional(), examples: z.record(z.string(), z.unknown()).optional() });
const Parameter = z.object({
  name: z.string().min(1),
  in: z.enum(["query", "header", "path", "cookie"]),
  required: z.boolean().optional(),
  description: z.string().optional(),
  schema: SchemaObject.optional(),
});
const Response = z.object({
  description: z.string().min(1),
  headers: z.record(z.string(), z.unknown()).optional(),
  content: z.record(z.string(), MediaType).optional(),
});
const Operation = z.object({
  summary: z.string().optional(),
  description: z.string().optional(),
  operationId: z.string().optional(),
  parameters: z.array(z.union([Parameter, Reference])).optional(),
  requestBody: z
    .union([z.object({ content: z.record(z.string(), MediaType), required: z.boolean().optional(), description: z.string().optional() }), Reference])
    .optional(),
  responses: z
    .record(z.string().regex(/^([1-5]\d\d|[1-5]XX|default)$/), z.union([Response, Reference]))
    .refine((r) => Object.keys(r).length > 0, "an operation needs responses"),
  security: z.array(z.record(z.string(), z.array(z.string()))).optional(),
  tags: z.array(z.string()).optional(),
  deprecated: z.boolean().optional(),
});
const PathItem = z
  .object(Object.fromEntries(METHODS.map((m) => [m, Operation.optional()])))
  .extend({ parameters: z.array(z.union([Parameter, Reference])).optional() });
const Document = z.object({
  openapi: z.literal("3.1.0"),
  info: z.object({
    title: z.string().min(1),
    version: z.string().min(1),
    description: z.string().optional(),
    license: z.object({ name: z.string(), identifier: z.string().optional(), url: z.string().optional() }).optional(),
  }),
  jsonSchemaDialect: z.string().optional(),
  servers: z.array(z.object({ url: z.string() })).optional(),
  paths: z.record(z.string().startsWith("/"), PathItem),
  components: z
    .object({
      schemas: z.record(z.string().regex(/^[A-Za-z0-9._-]+$/), SchemaObject).optional(),
      parameters: z.record(z.string(), Parameter).optional(),
      securitySchemes: z
        .record(z.string(), z.object({ type: z.enum(["apiKey", "http", "mutualTLS", "oauth2", "openIdConnect"]), scheme: z.string().optional() }))
        .optional(),
    })
    .optional(),
  security: z.array(z.record(z.string(), z.array(z.string()))).optional(),
});

type Doc = z.infer<typeof Document>;
type Op = z.infer<typeof Operation>;

async function servedDocument(): Promise<{ raw: any; doc: Doc }> {
  const res = await exports.default.fetch("https://broker.test/openapi.json");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const raw = await res.json();
  return { raw, doc: Document.parse(raw) };
}

/** "METHOD /path/{param}" for every route the app serves (middleware registrations excluded). */
function servedRoutes(): Set<string> {
  const routes = new Set<string>();
  for (const r of app.routes) {
    if (r.method === "ALL") continue;
    routes.add(`${r.method.toUpperCase()} ${r.path.replace(/:(\w+)/g, "{$1}")}`);
  }
  return routes;
}

function operations(doc: Doc): { key: string; path: string; method: string; op: Op }[] {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = (item as Record<string, Op | undefined>)[method];
      if (op) out.push({ key: `${method.toUpperCase()} ${path}`, path, method, op });
    }
  }
  return out;
}

/** Every `$ref` anywhere in the document, as [where, ref]. */
function refs(node: unknown, where = "#"): [string, string][] {
  if (Array.isArray(node)) return node.flatMap((v, i) => refs(v, `${where}/${i}`));
  if (node && typeof node === "object") {
    return Object.entries(node).flatMap(([k, v]) => (k === "$ref" && typeof v === "string" ? [[where, v] as [string, string]] : refs(v, `${where}/${k}`)));
  }
  return [];
}

function resolve(doc: unknown, ref: string): unknown {
  return ref
    .slice(2)
    .split("/")
    .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce<unknown>((node, key) => (node && typeof node === "object" ? (node as Record<string, unknown>)[key] : undefined), doc);
}

describe("GET /openapi.json", () => {
  it("is a structurally valid OpenAPI 3.1 document whose references all resolve", async () => {
    const { raw, doc } = await servedDocument();
    expect(doc.info.title).toBe("etcd join broker");
    expect(doc.info.version).toBe(CONTRACT_VERSION);
    const all = refs(raw);
    expect(all.length).toBeGreaterThan(5);
    for (const [where, ref] of all) expect({ where, ref, resolved: resolve(raw, ref) !== undefined }).toEqual({ where, ref, resolved: true });
    const ids = operations(doc)
      .map((o) => o.op.operationId)
      .filter(Boolean);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("lists every route the app serves, and only those", async () => {
    const { doc } = await servedDocument();
    const served = servedRoutes();
    const documented = new Set(operations(doc).map((o) => o.key));
    const missing = [...served].filter((r) => !documented.has(r) && !UNDOCUMENTED.has(r));
    const phantom = [...documented].filter((r) => !served.has(r));
    expect({ missing, phantom }).toEqual({ missing: [], phantom: [] });
    for (const r of UNDOCUMENTED) expect(served).toContain(r);
    // The contract's routes are all there (docs/protocol.md), so an empty route table cannot pass.
    for (const r of [
      "POST /v1/clusters/{cluster}/tickets",
      "GET /v1/clusters/{cluster}/tickets/{ticket}",
      "POST /v1/clusters/{cluster}/tickets/{ticket}/heartbeat",
      "POST /v1/clusters/{cluster}/tickets/{ticket}/complete",
      "DELETE /v1/clusters/{cluster}/tickets/{ticket}",
      "GET /v1/clusters/{cluster}/jwks.json",
      "GET /v1/clusters/{cluster}/revocations",
      "POST /v1/clusters/{cluster}/admissions/introspect",
      "POST /v1/admin/clusters/{cluster}/enrollment-tokens",
      "GET /v1/admin/clusters/{cluster}/enrollment-tokens",
      "DELETE /v1/admin/clusters/{cluster}/enrollment-tokens/{id}",
      "GET /v1/admin/clusters/{cluster}",
      "GET /v1/admin/clusters/{cluster}/tickets",
      "POST /v1/admin/clusters/{cluster}/admissions/{jti}/revoke",
      "POST /v1/admin/clusters/{cluster}/pause",
      "POST /v1/admin/clusters/{cluster}/resume",
      "PUT /v1/admin/clusters/{cluster}/policy",
      "POST /v1/admin/clusters/{cluster}/keys/rotate",
      "POST /v1/admin/clusters/{cluster}/adopt",
      "DELETE /v1/admin/clusters/{cluster}/members/{node}",
      "GET /v1/admin/clusters/{cluster}/audit",
      "GET /v1/admin/clusters/{cluster}/metrics",
    ]) {
      expect(documented).toContain(r);
    }
  });

  it("declares each path template parameter once, as a required path parameter, and no others", async () => {
    const { raw, doc } = await servedDocument();
    for (const { key, path, op } of operations(doc)) {
      const params = (op.parameters ?? []).map((p) => ("$ref" in p ? (resolve(raw, p.$ref) as z.infer<typeof Parameter>) : p));
      const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const inPath = params.filter((p) => p.in === "path");
      expect({ key, path: inPath.map((p) => p.name).sort() }).toEqual({ key, path: templated });
      for (const p of inPath) expect({ key, name: p.name, required: p.required }).toEqual({ key, name: p.name, required: true });
      const names = params.map((p) => `${p.in}:${p.name}`);
      expect({ key, duplicates: names.filter((n, i) => names.indexOf(n) !== i) }).toEqual({ key, duplicates: [] });
      for (const p of params) expect({ key, name: p.name, hasSchema: p.schema !== undefined }).toEqual({ key, name: p.name, hasSchema: true });
    }
  });

  it("gives every operation a success response and problem responses, and JSON request bodies that reject unknown fields", async () => {
    const { raw, doc } = await servedDocument();
    for (const { key, op } of operations(doc)) {
      const statuses = Object.keys(op.responses);
      expect({ key, success: statuses.some((s) => /^2\d\d$/.test(s)) }).toEqual({ key, success: true });
      const problems = statuses.filter((s) => /^[45]\d\d$/.test(s));
      // Service routes can only refuse a request body (the shared middleware); the others more.
      const bodyProblems = ["400", "413", "415"];
      expect({ key, more: problems.some((s) => !bodyProblems.includes(s)) }).toEqual({ key, more: !SERVICE_ROUTES.has(key) });
      for (const s of problems) {
        // Served as application/problem+json; either media type may describe it.
        const content = (op.responses[s] as z.infer<typeof Response>).content ?? {};
        const schema = (content["application/problem+json"] ?? content["application/json"])?.schema as { $ref?: string } | undefined;
        expect({ key, s, schema: schema?.$ref }).toEqual({ key, s, schema: "#/components/schemas/Problem" });
      }
      if (!op.requestBody) continue;
      const body = ("$ref" in op.requestBody ? resolve(raw, op.requestBody.$ref) : op.requestBody) as {
        content: Record<string, { schema?: { $ref?: string } }>;
      };
      expect({ key, types: Object.keys(body.content) }).toEqual({ key, types: ["application/json"] });
      const ref = body.content["application/json"].schema?.$ref;
      const schema = (ref ? resolve(raw, ref) : body.content["application/json"].schema) as { type?: string; additionalProperties?: unknown };
      expect({ key, type: schema.type, additionalProperties: schema.additionalProperties }).toEqual({ key, type: "object", additionalProperties: false });
    }
  });

  it("declares what every route can answer: body problems everywhere, 401/429 where a credential is checked, 500/503 where a cluster answers; Retry-After on 202, 429 and 503", async () => {
    const { raw, doc } = await servedDocument();
    expect(doc.info).toMatchObject({ license: { name: "Apache-2.0" } });
    expect(raw.servers?.length).toBeGreaterThan(0);
    const retryAfter = resolve(raw, "#/components/headers/RetryAfter") as { schema: { type: string } };
    expect(retryAfter.schema.type).toBe("integer");
    for (const { key, path, op } of operations(doc)) {
      expect({ key, operationId: op.operationId }).toEqual({ key, operationId: expect.stringMatching(/^[a-z][A-Za-z0-9]+$/) });
      expect({ key, security: Array.isArray(op.security) }).toEqual({ key, security: true });
      const statuses = Object.keys(op.responses);
      const expected = ["400", "413", "415"];
      if ((op.security ?? []).length > 0) expected.push("401", "429");
      if (path.startsWith("/v1/")) expected.push("500", "503");
      expect({ key, missing: expected.filter((s) => !statuses.includes(s)) }).toEqual({ key, missing: [] });
      for (const s of ["202", "429", "503"].filter((x) => statuses.includes(x))) {
        const headers = (op.responses[s] as { headers?: Record<string, { $ref?: string }> }).headers ?? {};
        expect({ key, s, retryAfter: headers["Retry-After"]?.$ref }).toEqual({ key, s, retryAfter: "#/components/headers/RetryAfter" });
      }
    }
  });

  it("names the credential of every operation: admin token, node bearer token, or none for the controllers' routes", async () => {
    const { doc } = await servedDocument();
    const schemes = Object.keys(doc.components?.securitySchemes ?? {});
    expect(schemes.sort()).toEqual(["adminToken", "bearer"]);
    for (const { key, path, op } of operations(doc)) {
      const used = (op.security ?? []).flatMap((s) => Object.keys(s));
      for (const name of used) expect(schemes).toContain(name);
      const open = SERVICE_ROUTES.has(key) || /\/(jwks\.json|revocations|admissions\/introspect)$/.test(path);
      const expected = path.startsWith("/v1/admin/") ? ["adminToken"] : open ? [] : ["bearer"];
      expect({ key, used }).toEqual({ key, used: expected });
    }
  });

  it("describes the schemas the routes validate with: a request the document forbids is refused", async () => {
    const { raw } = await servedDocument();
    const ticketRequest = resolve(raw, "#/components/schemas/TicketRequest") as { required: string[]; properties: Record<string, unknown> };
    expect(ticketRequest.required.sort()).toEqual(["node", "peerURL"]);
    const policy = resolve(raw, "#/components/schemas/PolicyRequest") as { properties: Record<string, { minimum: number; maximum: number }> };
    const tooMany = policy.properties.maxInFlight.maximum + 1;
    const res = await exports.default.fetch("https://broker.test/v1/admin/clusters/openapi-check/policy", {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ maxInFlight: tooMany }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("invalid_request");
  });
});
