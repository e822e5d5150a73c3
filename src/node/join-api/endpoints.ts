/**
 * The reference join API as a Hono app, in the k0s shape (docs/protocol.md, "Controllers' join API"):
 * `POST /v1beta1/etcd/members` and `POST /v1beta1/etcd/members/promote`, both authorized by an
 * admission token that is verified, bound to the request and checked active before etcd is
 * touched. Bad input is a 4xx problem; every "not now" is a 503 with Retry-After.
 * @module
 */
import { Hono, type Context } from "hono";
import { z } from "zod";
import { NODE_PATTERN, peerUrlProblem, reservedNodeNameProblem } from "../../shared/protocol/identifiers.ts";
import { AdmissionError, verifyAdmission, type VerifyAdmissionOptions } from "../../shared/verifier/index.ts";
import type { AdmissionClaims } from "../../shared/protocol/claims.ts";
import type { EtcdGateway } from "../etcd/gateway.ts";
import type { FirstLook, Membership } from "./members.ts";
import { noSigner, type CertificateSigner } from "./signer.ts";
import type { IssuedCertificates } from "../../shared/protocol/join-api.ts";
import type { CertificateLedger } from "./ledger.ts";
import { parseBearer } from "../../shared/protocol/bearer.ts";
import { fail, problemOf } from "../../shared/protocol/outcome.ts";
import { problemCodeForField } from "../../shared/protocol/problem.ts";
import { joinProblem, refuse, RETRY_AFTER, type JoinApiProblem, type Outcome } from "./outcome.ts";

export const MAX_BODY_BYTES = 16 * 1024;

const NodeName = z
  .string()
  .regex(NODE_PATTERN, "node must start with a letter or digit and use A-Z a-z 0-9 . _ -, at most 63 characters")
  .superRefine((v, ctx) => {
    const why = reservedNodeNameProblem(v);
    if (why) ctx.addIssue({ code: "custom", message: why });
  });
const PeerAddress = z
  .string()
  .max(512)
  .superRefine((v, ctx) => {
    const why = peerUrlProblem(v);
    if (why) ctx.addIssue({ code: "custom", message: `peerAddress ${why}` });
  });
const Csr = z.string().min(1).max(4096);
export const AddMemberRequest = z.strictObject({
  node: NodeName,
  peerAddress: PeerAddress,
  csrs: z.strictObject({ peer: Csr, server: Csr, client: Csr.optional() }).optional(),
});
export const PromoteRequest = z.strictObject({ node: NodeName });

export interface JoinApiOptions {
  membership: Membership;
  gateway: EtcdGateway;
  /** Verification settings shared by every request (broker, cluster, tolerance, fallback, trust). */
  verify: Omit<VerifyAdmissionOptions, "node" | "peerURL" | "role">;
  /** Signs joiners' etcd certificates (`--pki-dir`); without it, an add that sends requests is refused. */
  signer?: CertificateSigner;
  /** Keeps the revocation list that `GET /v1beta1/etcd/crl` serves (with `signer`). */
  ledger?: CertificateLedger;
  log?: (line: string) => void;
}

export function createJoinApi(options: JoinApiOptions): Hono {
  const app = new Hono();
  const log = options.log ?? (() => {});

  const verify = async (token: string, node: string, peerURL?: string): Promise<Outcome<AdmissionClaims & { look?: FirstLook }>> => {
    try {
      const { claims, introspection } = await verifyAdmission(token, { ...options.verify, node, peerURL, role: "join" });
      const look = introspection
        ? {
            status: { active: true as const, ...(introspection.leaseRemainingMs !== undefined ? { leaseRemainingMs: introspection.leaseRemainingMs } : {}) },
            at: Date.now(),
          }
        : undefined;
      return { ok: true, value: { ...claims, look } };
    } catch (e) {
      if (!(e instanceof AdmissionError)) throw e;
      log(`refused node ${node}: ${e.code} (${e.message})`);
      return fail(e.status, e.code, e.message, e.status === 503 ? RETRY_AFTER.unavailable : undefined);
    }
  };

  app.post("/v1beta1/etcd/members", async (c) => {
    const token = bearer(c);
    if (!token) return unauthorized(c);
    const body = await readBody(c, AddMemberRequest);
    if (!body.ok) return send(c, body);
    const { node, peerAddress, csrs } = body.value;
    const verified = await verify(token, node, peerAddress);
    if (!verified.ok) return send(c, verified);
    // Certificate requests are checked before etcd is touched: a node that could not run its
    // member is never added.
    let checked = null;
    if (csrs) {
      if (!options.signer) return send(c, noSigner());
      const outcome = await options.signer.check(csrs, node, verified.value.peer_url);
      if (!outcome.ok) {
        log(`refused node ${node}'s certificate requests: ${outcome.code} (${outcome.detail})`);
        return send(c, outcome);
      }
      checked = outcome.value;
    }
    // Signed while etcd is asked, once nothing holds the add back, not after etcd answers (a
    // node's etcd waits for both), nor while it is held (other nodes' adds come first); their
    // serials (chosen before signing) are recorded in etcd with the learner, in the write right
    // after the add; handed out only once that write is made, and dropped unseen otherwise.
    const signer = options.signer;
    let signing: Promise<IssuedCertificates> | null = null;
    const sign = () => {
      if (!checked || !signer) return null;
      signing ??= signer.issue(checked);
      signing.catch(() => undefined);
      return signing;
    };
    const entries = checked ? Object.values(checked.serials).map((serial) => ({ serial, notAfter: checked.notAfter, jti: verified.value.jti })) : undefined;
    const added = await options.membership.addLearner(
      { node, peerURL: peerAddress, jti: verified.value.jti, token, certificates: entries },
      verified.value.look,
      sign,
    );
    if (!added.ok) {
      log(`not adding node ${node} now: ${added.code} (${added.detail})`);
      return send(c, added);
    }
    if (!checked || !signer) return send(c, added);
    // A second set for the same member only while it has not run (its node crashed before our
    // answer and asks again with fresh keys): a member that has started holds its certificates,
    // and a voter never gets more.
    if (added.value.started || !added.value.learner) {
      log(`refused node ${node}'s certificate requests: member ${added.value.memberID} has started`);
      return send(
        c,
        refuse(
          409,
          "certificates_not_reissued",
          `member ${added.value.memberID} of node ${node} has started: its certificates were signed before it ran, and none are signed for a member that has (to replace them, remove the member and join again)`,
        ),
      );
    }
    const certificates = await sign()!;
    log(`signed node ${node}'s peer and server certificates (admission ${verified.value.jti})`);
    return c.json({ ...added.value, certificates }, 200);
  });

  app.post("/v1beta1/etcd/members/promote", async (c) => {
    const token = bearer(c);
    if (!token) return unauthorized(c);
    const body = await readBody(c, PromoteRequest);
    if (!body.ok) return send(c, body);
    const { node } = body.value;
    // The request names no peer: the token's own peer_url says which member to promote.
    const verified = await verify(token, node);
    if (!verified.ok) {
      // A node that lost our 200 may ask again after it reported completion to the broker: if its
      // member is a voter already, saying so changes nothing and spares it a needless failure.
      if (verified.code === "admission_completed") {
        const again = await voterAfterCompletion(token, node);
        if (again) return c.json(again, 200);
      }
      return send(c, verified);
    }
    const promoted = await options.membership.promote({ node, peerURL: verified.value.peer_url, jti: verified.value.jti, token }, verified.value.look);
    if (!promoted.ok) log(`not promoting node ${node} now: ${promoted.code} (${promoted.detail})`);
    return send(c, promoted);
  });

  const voterAfterCompletion = async (token: string, node: string): Promise<{ memberID: string; learner: false } | null> => {
    try {
      const { claims } = await verifyAdmission(token, { ...options.verify, node, role: "join", activeCheck: "none" });
      const member = await options.membership.member(claims.peer_url);
      if (member.ok && member.value && !member.value.isLearner) return { memberID: member.value.id, learner: false };
    } catch {
      // Fall through to the original refusal.
    }
    return null;
  };

  // The certificates every etcd of the cluster must refuse, signed by its CA (DER, as etcd reads
  // it): each node's agent fetches it every few seconds. Public: serial numbers are no secret.
  app.get("/v1beta1/etcd/crl", async (c) => {
    if (!options.ledger)
      return problemResponse(c, joinProblem(422, "certificates_unavailable", "this join API holds no etcd CA (--pki-dir), so it keeps no revocation list"));
    // None yet (this instance just started, or etcd did not answer it): a sweep now, for up to 3 s.
    if (!options.ledger.current) await Promise.race([options.ledger.sweep(), new Promise((r) => setTimeout(r, 3_000))]);
    const list = options.ledger.current;
    if (!list)
      return problemResponse(
        c,
        joinProblem(503, "etcd_unavailable", "no revocation list yet: etcd has not answered this join API's first look at its records"),
        RETRY_AFTER.unavailable,
      );
    c.header("content-type", "application/pkix-crl");
    c.header("cache-control", "no-store");
    c.header("x-crl-number", list.number.toString());
    return c.body(list.der as Uint8Array<ArrayBuffer>, 200);
  });

  app.get("/healthz", async (c) => {
    const health = await options.gateway.clusterHealth();
    const body = { status: health.healthy ? "ok" : "degraded", etcd: health };
    if (!health.healthy) c.header("retry-after", String(RETRY_AFTER.unavailable));
    return c.json(body, health.healthy ? 200 : 503);
  });

  app.all("/v1beta1/etcd/members", (c) =>
    problemResponse(c, joinProblem(405, "method_not_allowed", `${c.req.method} is not allowed here; use POST`), undefined, { allow: "POST" }),
  );
  app.all("/v1beta1/etcd/crl", (c) =>
    problemResponse(c, joinProblem(405, "method_not_allowed", `${c.req.method} is not allowed here; use GET`), undefined, { allow: "GET" }),
  );
  app.all("/v1beta1/etcd/members/promote", (c) =>
    problemResponse(c, joinProblem(405, "method_not_allowed", `${c.req.method} is not allowed here; use POST`), undefined, { allow: "POST" }),
  );
  app.notFound((c) => problemResponse(c, joinProblem(404, "not_found", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)));
  app.onError((e, c) => {
    log(`internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return problemResponse(c, joinProblem(500, "internal_error", "unexpected error in the join API"));
  });
  return app;
}

function bearer(c: Context): string | null {
  return parseBearer(c.req.header("authorization"));
}

function unauthorized(c: Context): Response {
  c.header("www-authenticate", 'Bearer error="invalid_token"');
  return problemResponse(c, joinProblem(401, "unauthorized", "send the node's admission token as Authorization: Bearer <token>"));
}

/** JSON, at most 16 KiB, matching the schema exactly (unknown fields are refused). */
async function readBody<T>(c: Context, schema: z.ZodType<T>): Promise<Outcome<T>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
    return fail(415, "unsupported_media_type", "send the body as application/json");
  }
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > MAX_BODY_BYTES) return fail(413, "body_too_large", `the body is over ${MAX_BODY_BYTES} bytes`);
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (bytes.byteLength > MAX_BODY_BYTES) return fail(413, "body_too_large", `the body is over ${MAX_BODY_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes));
  } catch {
    return fail(400, "malformed_json", "the body is not valid UTF-8 JSON");
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return { ok: true, value: parsed.data };
  const first = parsed.error.issues[0];
  const field = first && first.code !== "unrecognized_keys" ? String(first.path[first.path.length - 1] ?? "") : "";
  const detail = parsed.error.issues
    .map((i) => (i.code === "unrecognized_keys" ? `unknown field(s): ${i.keys.join(", ")}` : `${i.path.join(".") || "body"}: ${i.message}`))
    .join("; ");
  const code = problemCodeForField(field);
  // Its bodies name no cluster: that code is the broker's alone.
  return fail(400, code && code !== "invalid_cluster" ? code : "invalid_request", detail);
}

function send<T>(c: Context, outcome: Outcome<T>): Response {
  if (outcome.ok) return c.json(outcome.value as object, 200);
  return problemResponse(c, problemOf(outcome), outcome.retryAfter);
}

function problemResponse(c: Context, p: JoinApiProblem, retryAfter?: number, headers: Record<string, string> = {}): Response {
  for (const [k, v] of Object.entries(headers)) c.header(k, v);
  if (retryAfter !== undefined || p.status === 503) c.header("retry-after", String(Math.max(1, Math.ceil(retryAfter ?? RETRY_AFTER.unavailable))));
  c.header("content-type", "application/problem+json");
  c.header("cache-control", "no-store");
  return c.body(JSON.stringify(p), p.status as 400);
}
