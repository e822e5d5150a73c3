/**
 * Every endpoint, fed bad input: each answer is a 4xx problem+json with a stable code, and
 * nothing changes in the cluster's state (audit log and tickets are the same afterwards).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN, admin, bootstrapped, call, OVER_HTTP, peer, ticket } from "./helpers.ts";

const C = "bad-input";
let enrollment = "";
let admitted = { ticket: "", admission: "", jti: "" };
let queued = "";
let scoped = "";

beforeAll(async () => {
  ({ enrollment } = await bootstrapped(C));
  const a = await ticket(C, enrollment, "a", peer(2));
  admitted = { ticket: a.body.ticket, admission: a.body.admission, jti: a.body.jti };
  queued = (await ticket(C, enrollment, "q", peer(3))).body.ticket;
  scoped = (await admin("POST", `${C}/enrollment-tokens`, { nodes: ["ctrl-*"], peerHosts: ["10.0.0.0/24"] })).body.token;
});

interface Case {
  name: string;
  method: string;
  path: () => string;
  token?: () => string;
  body?: unknown;
  raw?: string | Uint8Array;
  headers?: Record<string, string>;
  status: number;
  code: string;
  /** What the problem's detail must say, when it matters. */
  detail?: RegExp;
}

const E = () => enrollment;
const A = () => admitted.admission;
const ADM = () => ADMIN;
const big = "x".repeat(17 * 1024);
const tickets = () => `/v1/clusters/${C}/tickets`;
const tkt =
  (suffix = "") =>
  () =>
    `/v1/clusters/${C}/tickets/${admitted.ticket}${suffix}`;
const adm = (suffix: string) => () => `/v1/admin/clusters/${C}${suffix}`;

const JSON_TYPE = { "content-type": "application/json" };
/** `{"node":"z","description":"<invalid UTF-8>"}`: valid JSON once the bad bytes are replaced by U+FFFD. */
const notUtf8 = (field: string) => new Uint8Array([...new TextEncoder().encode(`{"${field}":"`), 0xff, 0xfe, 0xc3, ...new TextEncoder().encode('"}')]);
const peerCase = (peerURL: string) => ({
  name: `tickets: peerURL ${JSON.stringify(peerURL)}`,
  method: "POST",
  path: tickets,
  token: E,
  body: { node: "z", peerURL },
  status: 400,
  code: "invalid_peer_url",
});

const cases: Case[] = [
  // peer URLs that a lenient parser accepts (contract v1.1: one strict parser)
  ...[
    " http://127.0.0.1:23815",
    "http://127.0.0.1:23815 ",
    "http:/127.0.0.1:23815",
    "http://0177.0.0.1:23815",
    "http://2130706433:23815",
    "http://127.1:23815",
    "http://127.0.0.1:023815",
    "http://127.0.0.\u00011:23815",
    "http://127.0.0.1\t:23815",
    "http://ho\u007fst:23815",
    "http://[::1%25lo]:23815",
    "http://bücher.example:23815",
  ].map(peerCase),
  {
    name: "adopt: peerURL with a leading zero",
    method: "POST",
    path: adm("/adopt"),
    token: ADM,
    body: { members: [{ node: "m", peerURL: "http://010.0.0.1:2380" }] },
    status: 400,
    code: "invalid_peer_url",
  },
  // bodies that are not UTF-8 JSON, on every kind of route
  { name: "tickets: body not UTF-8", method: "POST", path: tickets, token: E, raw: notUtf8("node"), headers: JSON_TYPE, status: 400, code: "malformed_json" },
  {
    name: "complete: body not UTF-8",
    method: "POST",
    path: tkt("/complete"),
    token: A,
    raw: notUtf8("memberID"),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "introspect: body not UTF-8",
    method: "POST",
    path: () => `/v1/clusters/${C}/admissions/introspect`,
    raw: notUtf8("token"),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "enrollment: body not UTF-8",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    raw: notUtf8("description"),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "revoke: body not UTF-8",
    method: "POST",
    path: () => `/v1/admin/clusters/${C}/admissions/${admitted.jti}/revoke`,
    token: ADM,
    raw: notUtf8("reason"),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  { name: "pause: malformed JSON body", method: "POST", path: adm("/pause"), token: ADM, raw: "{", headers: JSON_TYPE, status: 400, code: "malformed_json" },
  {
    name: "heartbeat: body not UTF-8",
    method: "POST",
    path: tkt("/heartbeat"),
    token: A,
    raw: new Uint8Array([0x22, 0xc0, 0x22]),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "policy: truncated JSON",
    method: "PUT",
    path: adm("/policy"),
    token: ADM,
    raw: '{"maxQueue": 5',
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "adopt: two JSON values",
    method: "POST",
    path: adm("/adopt"),
    token: ADM,
    raw: '{"members": []} {}',
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  {
    name: "enrollment: a UTF-8-encoded surrogate after the JSON",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    raw: new Uint8Array([0x7b, 0x7d, 0xed, 0xa0, 0x80]),
    headers: JSON_TYPE,
    status: 400,
    code: "malformed_json",
  },
  // POST tickets
  {
    name: "tickets: malformed JSON",
    method: "POST",
    path: tickets,
    token: E,
    raw: "{node:",
    headers: { "content-type": "application/json" },
    status: 400,
    code: "malformed_json",
  },
  {
    name: "tickets: not JSON",
    method: "POST",
    path: tickets,
    token: E,
    raw: "node=a",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    status: 415,
    code: "unsupported_media_type",
  },
  {
    name: "tickets: body over 16 KiB",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: peer(9), pad: big },
    status: 413,
    code: "body_too_large",
  },
  {
    name: "tickets: unknown field",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: peer(9), extra: 1 },
    status: 400,
    code: "invalid_request",
  },
  { name: "tickets: missing body", method: "POST", path: tickets, token: E, status: 400, code: "invalid_node" },
  { name: "tickets: node of wrong type", method: "POST", path: tickets, token: E, body: { node: 7, peerURL: peer(9) }, status: 400, code: "invalid_node" },
  { name: "tickets: invalid node name", method: "POST", path: tickets, token: E, body: { node: "-bad", peerURL: peer(9) }, status: 400, code: "invalid_node" },
  {
    name: "tickets: node too long",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "n".repeat(64), peerURL: peer(9) },
    status: 400,
    code: "invalid_node",
  },
  // etcd takes a certificate's common name as the user: root is its superuser (identifiers.ts).
  {
    name: "tickets: node named root",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "root", peerURL: peer(9) },
    status: 400,
    code: "invalid_node",
    detail: /reserved/,
  },
  {
    name: "tickets: node named Root",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "Root", peerURL: peer(9) },
    status: 400,
    code: "invalid_node",
    detail: /reserved/,
  },
  {
    name: "tickets: node named kube-apiserver",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "kube-apiserver", peerURL: peer(9) },
    status: 400,
    code: "invalid_node",
    detail: /reserved/,
  },
  {
    name: "tickets: peerURL with a path",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "https://10.0.0.9:2380/etcd" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: peerURL without port",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "https://10.0.0.9" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: peerURL with userinfo",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "https://u:p@10.0.0.9:2380" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: peerURL with query",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "https://10.0.0.9:2380?x=1" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: peerURL not http",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "unix://10.0.0.9:2380" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: peerURL not a URL",
    method: "POST",
    path: tickets,
    token: E,
    body: { node: "z", peerURL: "10.0.0.9:2380" },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "tickets: invalid cluster",
    method: "POST",
    path: () => "/v1/clusters/Bad_Cluster/tickets",
    token: E,
    body: { node: "z", peerURL: peer(9) },
    status: 400,
    code: "invalid_cluster",
  },
  { name: "tickets: no token", method: "POST", path: tickets, body: { node: "z", peerURL: peer(9) }, status: 401, code: "unauthorized" },
  {
    name: "tickets: unknown cluster",
    method: "POST",
    path: () => "/v1/clusters/no-such-cluster/tickets",
    token: () => "jbe_unknown",
    body: { node: "z", peerURL: peer(9) },
    status: 404,
    code: "unknown_cluster",
  },
  {
    name: "tickets: unknown enrollment token",
    method: "POST",
    path: tickets,
    token: () => "jbe_unknown",
    body: { node: "z", peerURL: peer(9) },
    status: 401,
    code: "unauthorized",
  },
  { name: "tickets: admin token", method: "POST", path: tickets, token: ADM, body: { node: "z", peerURL: peer(9) }, status: 401, code: "unauthorized" },
  { name: "tickets: admission token", method: "POST", path: tickets, token: A, body: { node: "z", peerURL: peer(9) }, status: 403, code: "wrong_token_kind" },
  // GET ticket
  { name: "ticket: unknown ticket", method: "GET", path: () => `/v1/clusters/${C}/tickets/tkt_unknown`, token: E, status: 404, code: "ticket_not_found" },
  { name: "ticket: malformed ticket id", method: "GET", path: () => `/v1/clusters/${C}/tickets/nope`, token: E, status: 400, code: "invalid_request" },
  { name: "ticket: wait out of range", method: "GET", path: tkt("?wait=31"), token: E, status: 400, code: "invalid_request" },
  { name: "ticket: wait not a number", method: "GET", path: tkt("?wait=soon"), token: E, status: 400, code: "invalid_request" },
  // numbers in queries are decimal digits, nothing else Number() would read
  ...["0x10", "0o7", "0b1", "1e1", "1.0", "+5", "-0", "05", "", "%205", "5%20", "Infinity", "1_0"].map((wait) => ({
    name: `ticket: wait=${wait}`,
    method: "GET",
    path: tkt(`?wait=${wait}`),
    token: E,
    status: 400,
    code: "invalid_request",
  })),
  { name: "audit: wait=0x10", method: "GET", path: adm("/audit?wait=0x10"), token: ADM, status: 400, code: "invalid_request" },
  { name: "audit: after=1e3", method: "GET", path: adm("/audit?after=1e3"), token: ADM, status: 400, code: "invalid_request" },
  { name: "audit: after past 2^53", method: "GET", path: adm("/audit?after=9007199254740993"), token: ADM, status: 400, code: "invalid_request" },
  { name: "audit: limit=0x10", method: "GET", path: adm("/audit?limit=0x10"), token: ADM, status: 400, code: "invalid_request" },
  { name: "tickets list: limit=1e2", method: "GET", path: adm("/tickets?limit=1e2"), token: ADM, status: 400, code: "invalid_request" },
  { name: "tickets list: after=0x0", method: "GET", path: adm("/tickets?after=0x0"), token: ADM, status: 400, code: "invalid_request" },
  { name: "tickets list: empty limit", method: "GET", path: adm("/tickets?limit="), token: ADM, status: 400, code: "invalid_request" },
  { name: "ticket: no token", method: "GET", path: tkt(), status: 401, code: "unauthorized" },
  {
    name: "ticket: another ticket's admission token",
    method: "GET",
    path: () => `/v1/clusters/${C}/tickets/${queued}`,
    token: A,
    status: 403,
    code: "forbidden",
  },
  // heartbeat
  { name: "heartbeat: enrollment token", method: "POST", path: tkt("/heartbeat"), token: E, status: 403, code: "wrong_token_kind" },
  { name: "heartbeat: tampered token", method: "POST", path: tkt("/heartbeat"), token: () => A().slice(0, -4) + "AAAA", status: 401, code: "unauthorized" },
  { name: "heartbeat: queued ticket", method: "POST", path: () => `/v1/clusters/${C}/tickets/${queued}/heartbeat`, token: A, status: 403, code: "forbidden" },
  {
    name: "heartbeat: unknown ticket",
    method: "POST",
    path: () => `/v1/clusters/${C}/tickets/tkt_unknown/heartbeat`,
    token: A,
    status: 404,
    code: "ticket_not_found",
  },
  // complete
  { name: "complete: missing memberID", method: "POST", path: tkt("/complete"), token: A, body: {}, status: 400, code: "invalid_request" },
  {
    name: "complete: memberID not an ID",
    method: "POST",
    path: tkt("/complete"),
    token: A,
    body: { memberID: "zz top" },
    status: 400,
    code: "invalid_request",
  },
  { name: "complete: memberID of wrong type", method: "POST", path: tkt("/complete"), token: A, body: { memberID: 12 }, status: 400, code: "invalid_request" },
  {
    name: "complete: unknown field",
    method: "POST",
    path: tkt("/complete"),
    token: A,
    body: { memberID: "12", learner: false },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "complete: malformed JSON",
    method: "POST",
    path: tkt("/complete"),
    token: A,
    raw: "[",
    headers: { "content-type": "application/json" },
    status: 400,
    code: "malformed_json",
  },
  { name: "complete: enrollment token", method: "POST", path: tkt("/complete"), token: E, body: { memberID: "12" }, status: 403, code: "wrong_token_kind" },
  // abandon
  { name: "abandon: no token", method: "DELETE", path: tkt(), status: 401, code: "unauthorized" },
  { name: "abandon: unknown ticket", method: "DELETE", path: () => `/v1/clusters/${C}/tickets/tkt_unknown`, token: E, status: 404, code: "ticket_not_found" },
  // controller-facing
  { name: "jwks: unknown cluster", method: "GET", path: () => "/v1/clusters/no-such-cluster/jwks.json", status: 404, code: "unknown_cluster" },
  { name: "jwks: invalid cluster", method: "GET", path: () => "/v1/clusters/-x-/jwks.json", status: 400, code: "invalid_cluster" },
  { name: "revocations: unknown cluster", method: "GET", path: () => "/v1/clusters/no-such-cluster/revocations", status: 404, code: "unknown_cluster" },
  { name: "introspect: missing token", method: "POST", path: () => `/v1/clusters/${C}/admissions/introspect`, body: {}, status: 400, code: "invalid_request" },
  {
    name: "introspect: token of wrong type",
    method: "POST",
    path: () => `/v1/clusters/${C}/admissions/introspect`,
    body: { token: 5 },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "introspect: unknown field",
    method: "POST",
    path: () => `/v1/clusters/${C}/admissions/introspect`,
    body: { token: "x", jti: "y" },
    status: 400,
    code: "invalid_request",
  },
  // admin
  { name: "admin: no token", method: "GET", path: adm(""), status: 401, code: "unauthorized" },
  { name: "admin: wrong token", method: "GET", path: adm(""), token: () => "not-the-admin-token", status: 401, code: "unauthorized" },
  { name: "admin: enrollment token", method: "GET", path: adm(""), token: E, status: 401, code: "unauthorized" },
  { name: "admin: admission token", method: "POST", path: adm("/pause"), token: A, status: 401, code: "unauthorized" },
  { name: "admin: unknown cluster status", method: "GET", path: () => "/v1/admin/clusters/no-such-cluster", token: ADM, status: 404, code: "unknown_cluster" },
  { name: "admin: invalid cluster", method: "GET", path: () => "/v1/admin/clusters/UPPER", token: ADM, status: 400, code: "invalid_cluster" },
  {
    name: "enrollment: ttl too short",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { ttlSeconds: 1 },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: maxUses of wrong type",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { maxUses: "3" },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: unknown field",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { scope: "all" },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: revoke unknown id",
    method: "DELETE",
    path: adm("/enrollment-tokens/enr_unknown"),
    token: ADM,
    status: 404,
    code: "enrollment_token_not_found",
  },
  { name: "enrollment: revoke malformed id", method: "DELETE", path: adm("/enrollment-tokens/xyz"), token: ADM, status: 400, code: "invalid_request" },
  { name: "tickets list: unknown state", method: "GET", path: adm("/tickets?state=lost"), token: ADM, status: 400, code: "invalid_request" },
  { name: "tickets list: limit too large", method: "GET", path: adm("/tickets?limit=100000"), token: ADM, status: 400, code: "invalid_request" },
  {
    name: "revoke: missing reason",
    method: "POST",
    path: () => `/v1/admin/clusters/${C}/admissions/${admitted.jti}/revoke`,
    token: ADM,
    body: {},
    status: 400,
    code: "invalid_request",
  },
  {
    name: "revoke: unknown jti",
    method: "POST",
    path: adm("/admissions/adm_unknown/revoke"),
    token: ADM,
    body: { reason: "x" },
    status: 404,
    code: "admission_not_found",
  },
  { name: "policy: maxInFlight 0", method: "PUT", path: adm("/policy"), token: ADM, body: { maxInFlight: 0 }, status: 400, code: "invalid_request" },
  {
    name: "policy: lease longer than token",
    method: "PUT",
    path: adm("/policy"),
    token: ADM,
    body: { leaseSeconds: 3600, admissionTtlSeconds: 60 },
    status: 400,
    code: "invalid_request",
  },
  { name: "policy: fractional value", method: "PUT", path: adm("/policy"), token: ADM, body: { leaseSeconds: 1.5 }, status: 400, code: "invalid_request" },
  { name: "policy: unknown field", method: "PUT", path: adm("/policy"), token: ADM, body: { maxLearners: 2 }, status: 400, code: "invalid_request" },
  { name: "policy: number as a string", method: "PUT", path: adm("/policy"), token: ADM, body: { maxQueue: "0x10" }, status: 400, code: "invalid_request" },
  {
    name: "policy: number beyond float range",
    method: "PUT",
    path: adm("/policy"),
    token: ADM,
    raw: '{"maxQueue": 1e400}',
    headers: JSON_TYPE,
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: ttl beyond 2^53",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    raw: '{"ttlSeconds": 9007199254740993}',
    headers: JSON_TYPE,
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: maxUses null",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { maxUses: null },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "keys: rotate unknown cluster",
    method: "POST",
    path: () => "/v1/admin/clusters/no-such-cluster/keys/rotate",
    token: ADM,
    status: 404,
    code: "unknown_cluster",
  },
  { name: "adopt: empty members", method: "POST", path: adm("/adopt"), token: ADM, body: { members: [] }, status: 400, code: "invalid_request" },
  {
    name: "adopt: bad peerURL",
    method: "POST",
    path: adm("/adopt"),
    token: ADM,
    body: { members: [{ node: "m", peerURL: "m:2380" }] },
    status: 400,
    code: "invalid_peer_url",
  },
  {
    name: "adopt: after bootstrap issued",
    method: "POST",
    path: () => "/v1/admin/clusters/bad-input-fresh/adopt",
    token: ADM,
    body: { members: [{ node: "m", peerURL: peer(7) }] },
    status: 409,
    code: "bootstrap_in_progress",
  },
  { name: "forget: unknown member", method: "DELETE", path: adm("/members/nobody"), token: ADM, status: 404, code: "member_not_found" },
  { name: "forget: invalid node", method: "DELETE", path: adm("/members/-x"), token: ADM, status: 400, code: "invalid_node" },
  {
    name: "bootstrap: already bootstrapped",
    method: "POST",
    path: adm("/bootstrap"),
    token: ADM,
    body: { node: "a", reason: "x" },
    status: 409,
    code: "already_bootstrapped",
  },
  { name: "audit: negative after", method: "GET", path: adm("/audit?after=-1"), token: ADM, status: 400, code: "invalid_request" },
  { name: "audit: unknown cluster", method: "GET", path: () => "/v1/admin/clusters/no-such-cluster/audit", token: ADM, status: 404, code: "unknown_cluster" },
  // enrollment token scopes
  {
    name: "enrollment: empty node scope",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { nodes: [] },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: node pattern with a space",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { nodes: ["ctrl *"] },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: CIDR prefix too long",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { peerHosts: ["10.0.0.0/33"] },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: peer host with a leading zero",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { peerHosts: ["010.0.0.1"] },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "enrollment: peer host given as a URL",
    method: "POST",
    path: adm("/enrollment-tokens"),
    token: ADM,
    body: { peerHosts: ["https://10.0.0.1:2380"] },
    status: 400,
    code: "invalid_request",
  },
  {
    name: "tickets: node outside the token's scope",
    method: "POST",
    path: tickets,
    token: () => scoped,
    body: { node: "worker-1", peerURL: peer(9) },
    status: 403,
    code: "outside_token_scope",
  },
  {
    name: "tickets: peer host outside the token's scope",
    method: "POST",
    path: tickets,
    token: () => scoped,
    body: { node: "ctrl-9", peerURL: "https://10.0.1.9:2380" },
    status: 403,
    code: "outside_token_scope",
  },
  // routing
  { name: "unknown route", method: "GET", path: () => "/v2/anything", status: 404, code: "not_found" },
];

async function snapshot() {
  const audit = await admin("GET", `${C}/audit?limit=1000`);
  const list = await admin("GET", `${C}/tickets?limit=1000`);
  const tokens = await admin("GET", `${C}/enrollment-tokens`);
  const status = await admin("GET", C);
  return { audit: audit.body.entries, tickets: list.body.tickets, tokens: tokens.body.tokens, status: status.body };
}

describe("bad input", () => {
  it("prepares a cluster whose bootstrap ticket is out, for the adopt case", async () => {
    const { enrollment: e } = { enrollment: (await admin("POST", "bad-input-fresh/enrollment-tokens", {})).body.token as string };
    expect((await ticket("bad-input-fresh", e, "b0", peer(1))).body.role).toBe("bootstrap");
  });

  it.each(cases)("$name → $status $code", async (c) => {
    const before = await snapshot();
    const r = await call(c.method, c.path(), { token: c.token?.(), body: c.body, raw: c.raw, headers: { "cf-connecting-ip": "192.0.2.1", ...c.headers } });
    expect({ status: r.status, code: r.body?.code }).toEqual({ status: c.status, code: c.code });
    expect(r.headers.get("content-type")).toBe("application/problem+json");
    expect(r.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status: c.status, detail: expect.any(String) });
    if (c.detail) expect(r.body.detail).toMatch(c.detail);
    expect(await snapshot()).toEqual(before);
  });
});

describe("reads of clusters that do not exist", () => {
  // Looks inside the Durable Object: not possible from outside the runtime (the contract-serve run).
  it.skipIf(OVER_HTTP)("create no storage", async () => {
    const { env } = await import("cloudflare:workers");
    const { runInDurableObject } = await import("cloudflare:test");
    for (const path of ["/v1/clusters/ghost/jwks.json", "/v1/clusters/ghost/revocations", "/v1/admin/clusters/ghost", "/v1/admin/clusters/ghost/audit"]) {
      expect((await call("GET", path, { token: ADMIN })).status).toBe(404);
    }
    expect((await call("POST", "/v1/clusters/ghost/admissions/introspect", { body: { token: "a.b.c" } })).body).toEqual({
      active: false,
      reason: "unknown_cluster",
    });
    expect((await call("POST", "/v1/clusters/ghost/tickets/tkt_x/complete", { token: "a.b.c", body: { memberID: "1" } })).status).toBe(401);
    const tables = await runInDurableObject(env.JOIN_QUEUE.getByName("ghost"), (_instance, state) =>
      state.storage.sql.exec(`SELECT name FROM sqlite_master`).toArray(),
    );
    expect(tables).toEqual([]);
  });
});

describe("admin writes on clusters that do not exist", () => {
  const ghost = "never-created";
  const g = (suffix: string) => `/v1/admin/clusters/${ghost}${suffix}`;
  // Every admin write but creating an enrollment token and adopt: 404 unknown_cluster, nothing created.
  const writes: [string, string, unknown?][] = [
    ["POST", g("/pause")],
    ["POST", g("/resume")],
    ["PUT", g("/policy"), { maxQueue: 10 }],
    ["POST", g("/keys/rotate")],
    ["POST", g("/admissions/adm_x/revoke"), { reason: "x" }],
    ["DELETE", g("/enrollment-tokens/enr_x")],
    ["DELETE", g("/members/n1")],
    ["POST", g("/bootstrap"), { node: "n1", reason: "x" }],
  ];

  it.each(writes)("%s %s → 404 unknown_cluster", async (method, path, body) => {
    const r = await call(method, path, { token: ADMIN, body });
    expect({ status: r.status, code: r.body?.code }).toEqual({ status: 404, code: "unknown_cluster" });
    expect(r.headers.get("content-type")).toBe("application/problem+json");
  });

  it.each([
    ["PUT", g("/policy"), { maxInFlight: 0 }, 400, "invalid_request"],
    ["PUT", g("/policy"), { leaseSeconds: 3600, admissionTtlSeconds: 60 }, 404, "unknown_cluster"],
    ["POST", g("/adopt"), { members: [{ node: "m", peerURL: "http://0177.0.0.1:2380" }] }, 400, "invalid_peer_url"],
    ["POST", g("/enrollment-tokens"), { ttlSeconds: 1 }, 400, "invalid_request"],
  ] as const)("a refused %s %s creates nothing either", async (method, path, body, status, code) => {
    const r = await call(method, path, { token: ADMIN, body });
    expect({ status: r.status, code: r.body?.code }).toEqual({ status, code });
  });

  it("leave the cluster nonexistent: no status", async () => {
    for (const [method, path, body] of writes) await call(method, path, { token: ADMIN, body });
    expect((await call("GET", g(""), { token: ADMIN })).status).toBe(404);
  });

  // Reads the object's storage itself, which only the in-workerd run can reach (not over HTTP).
  it.skipIf(OVER_HTTP)("leave the cluster nonexistent: no storage", async () => {
    const { env } = await import("cloudflare:workers");
    const { runInDurableObject } = await import("cloudflare:test");
    for (const [method, path, body] of writes) await call(method, path, { token: ADMIN, body });
    const tables = await runInDurableObject(env.JOIN_QUEUE.getByName(ghost), (_instance, state) =>
      state.storage.sql.exec(`SELECT name FROM sqlite_master`).toArray(),
    );
    expect(tables).toEqual([]);
  });
});
