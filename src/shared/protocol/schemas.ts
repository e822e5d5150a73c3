/**
 * Request and response schemas: they validate every request and generate the OpenAPI document.
 * @module
 */
import { z } from "@hono/zod-openapi";
import { CLUSTER_PATTERN, NODE_PATTERN, peerUrlProblem, reservedNodeNameProblem } from "./identifiers.ts";
import { NODE_GLOB, peerHostPatternProblem } from "./token-scope.ts";
import { POLICY_LIMITS } from "./wire.ts";

export const ClusterName = z
  .string()
  .regex(CLUSTER_PATTERN, "cluster must be a DNS label: a-z, 0-9 and '-', at most 63 characters")
  .openapi({ example: "prod-eu" });
export const NodeName = z
  .string()
  .regex(NODE_PATTERN, "node must start with a letter or digit and use A-Z a-z 0-9 . _ -, at most 63 characters")
  .openapi({ example: "ctrl-1" });
/** A node name a ticket may be issued for: well-formed and not reserved (identifiers.ts). */
export const AdmissibleNodeName = NodeName.superRefine((v, ctx) => {
  const why = reservedNodeNameProblem(v);
  if (why) ctx.addIssue({ code: "custom", message: why });
});
export const PeerUrl = z
  .string()
  .max(512)
  .superRefine((v, ctx) => {
    const why = peerUrlProblem(v);
    if (why) ctx.addIssue({ code: "custom", message: `peerURL ${why}` });
  })
  .openapi({ example: "https://10.0.0.11:2380" });
export const TicketId = z
  .string()
  .regex(/^tkt_[A-Za-z0-9]{1,64}$/, "not a ticket id")
  .openapi({ example: "tkt_3kTQ1w0x2z9bA7Lm" });
export const Jti = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,128}$/, "not a jti")
  .openapi({ example: "adm_q9Jx0u3RkS8mB2cVfY1a" });
export const MemberId = z
  .string()
  .regex(/^[0-9A-Fa-f]{1,20}$/, "memberID must be an etcd member ID (decimal or hex)")
  .openapi({ example: "10501334649042878790" });

export const ClusterParams = z.object({ cluster: ClusterName.openapi({ param: { name: "cluster", in: "path" } }) });
export const TicketParams = ClusterParams.extend({ ticket: TicketId.openapi({ param: { name: "ticket", in: "path" } }) });

export const TicketRequest = z
  .strictObject({
    node: AdmissibleNodeName,
    peerURL: PeerUrl,
    exclusiveUntilStarted: z
      .boolean()
      .optional()
      .openapi({
        description:
          "Addition: this node's installer adds its own etcd member and writes --initial-cluster from etcd's member list (gate mode). " +
          "Nobody is admitted beside it until it reports its member started (POST …/started), and it is admitted only once every admitted member has started.",
      }),
  })
  .openapi("TicketRequest");
export const CompleteRequest = z.strictObject({ memberID: MemberId }).openapi("CompleteRequest");
export const StartedRequest = z.strictObject({ memberID: MemberId }).openapi("StartedRequest");
/** `POST …/tickets/{ticket}/stuck`: the member this node's attempt left in etcd and could not remove, and why. */
export const StuckRequest = z.strictObject({ memberID: MemberId, detail: z.string().min(1).max(2000) }).openapi("StuckRequest", {
  description:
    "The etcd member (decimal ID) this node's failed attempt left and could not remove, and what stood in the way (etcd's answer, the command that removes it).",
});
/**
 * A number in a query string: decimal digits only, as the contract writes them. No sign, exponent,
 * `0x`/`0o`/`0b` prefix, blanks, leading zeros or empty value, all of which `Number()` would accept.
 * A number is taken too, for the typed client, which checks its input with these schemas.
 */
const queryInt = (name: string, min: number, max: number) =>
  z
    .union(
      [
        z.number(),
        z
          .string()
          .regex(/^(0|[1-9][0-9]{0,15})$/)
          .transform(Number),
      ],
      { error: `${name} must be a decimal integer` },
    )
    .pipe(z.number().int().min(min).max(max))
    .openapi({ type: "integer", minimum: min, maximum: max, param: { name, in: "query" } });

export const WaitQuery = z.object({
  wait: queryInt("wait", 0, 30).optional().openapi({ example: 30 }),
});

export const TicketView = z
  .object({
    ticket: z.string(),
    cluster: z.string(),
    node: z.string(),
    peerURL: z.string(),
    state: z.enum(["queued", "admitted", "joined", "expired", "abandoned", "revoked"]),
    role: z.enum(["bootstrap", "join"]),
    position: z.number().int().optional(),
    retryAfter: z.number().int().optional(),
    estimatedWaitSeconds: z.number().int().optional(),
    waitingFor: z.enum(["paused", "bootstrap"]).optional(),
    bootstrapNode: z.string().optional(),
    admission: z.string().optional(),
    jti: z.string().optional(),
    leaseExpiresAt: z.string().optional(),
    admissionExpiresAt: z.string().optional(),
    maxInFlight: z
      .number()
      .int()
      .optional()
      .openapi({ description: "Admitted only: the cluster's maxInFlight; start etcd ≥ 3.6 with --max-learners of at least this" }),
    memberID: z.string().optional(),
    exclusiveUntilStarted: z
      .boolean()
      .optional()
      .openapi({ description: "Addition: the ticket is under the start rule (TicketRequest.exclusiveUntilStarted)" }),
    memberStartedAt: z.string().optional().openapi({ description: "Addition: admitted only, when the node reported its etcd member started" }),
    reason: z.string().optional(),
    createdAt: z.string(),
  })
  .openapi("TicketView");

export const Problem = z.object({ type: z.string(), title: z.string(), status: z.number().int(), detail: z.string(), code: z.string() }).openapi("Problem");

export const IntrospectRequest = z.strictObject({ token: z.string().min(1).max(8192) }).openapi("IntrospectRequest");
export const IntrospectResponse = z
  .object({
    active: z.boolean(),
    claims: z.record(z.string(), z.unknown()).optional(),
    reason: z.string().optional(),
    /** Active only: when the admission's lease ends unless its node heartbeats (contract v1.2 addition). */
    leaseExpiresAt: z.string().optional(),
  })
  .openapi("IntrospectResponse");
export const Jwks = z.object({ keys: z.array(z.record(z.string(), z.unknown())) }).openapi("JWKS");
export const Revocations = z
  .object({ revoked: z.array(z.object({ jti: z.string(), exp: z.number().int(), reason: z.string().optional() })) })
  .openapi("Revocations");

export const EnrollmentTokenRequest = z
  .strictObject({
    ttlSeconds: z.number().int().min(60).max(31_536_000).optional(),
    maxUses: z.number().int().min(1).max(1_000_000).optional(),
    description: z.string().max(200).optional(),
    nodes: z
      .array(z.string().regex(NODE_GLOB, "a node pattern uses A-Z a-z 0-9 . _ - and the wildcards * and ?, at most 63 characters"))
      .min(1)
      .max(100)
      .optional()
      .openapi({ description: "Node names this token may ask tickets for: glob patterns (`*`, `?`); absent: any", example: ["ctrl-*"] }),
    peerHosts: z
      .array(
        z
          .string()
          .max(300)
          .superRefine((v, ctx) => {
            const why = peerHostPatternProblem(v);
            if (why) ctx.addIssue({ code: "custom", message: why });
          }),
      )
      .min(1)
      .max(100)
      .optional()
      .openapi({
        description: "Hosts the peer URLs may use: host names (`*.` for subdomains), IP addresses or CIDRs; absent: any",
        example: ["10.0.0.0/24", "ctrl-1.example"],
      }),
  })
  .openapi("EnrollmentTokenRequest");
export const EnrollmentTokenId = z.string().regex(/^enr_[A-Za-z0-9]{1,64}$/, "not an enrollment token id");
export const EnrollmentTokenParams = ClusterParams.extend({ id: EnrollmentTokenId.openapi({ param: { name: "id", in: "path" } }) });

/** A read-only admin credential: broker-wide, or for one cluster. Only reading is offered. */
export const AdminCredentialRequest = z
  .strictObject({
    readOnly: z.literal(true).openapi({ description: "Must be true: the credential can read (status, audit, metrics, console) and is refused every write" }),
    cluster: ClusterName.optional().openapi({ description: "The one cluster it may read; absent: every cluster on the broker" }),
    description: z.string().max(200).optional(),
  })
  .openapi("AdminCredentialRequest");
export const AdminCredentialId = z.string().regex(/^jbc_[A-Za-z0-9]{1,64}$/, "not an admin credential id");
export const AdminCredentialParams = z.object({ id: AdminCredentialId.openapi({ param: { name: "id", in: "path" } }) });
export const JtiParams = ClusterParams.extend({ jti: Jti.openapi({ param: { name: "jti", in: "path" } }) });
export const NodeParams = ClusterParams.extend({ node: NodeName.openapi({ param: { name: "node", in: "path" } }) });

export const RevokeRequest = z.strictObject({ reason: z.string().min(1).max(500) }).openapi("RevokeRequest");
export const TicketListQuery = z.object({
  state: z
    .enum(["queued", "admitted", "joined", "expired", "abandoned", "revoked"])
    .optional()
    .openapi({ param: { name: "state", in: "query" } }),
  limit: queryInt("limit", 1, 1000).optional(),
  after: queryInt("after", 0, Number.MAX_SAFE_INTEGER).optional(),
});
const policyField = (k: keyof typeof POLICY_LIMITS) => z.number().int().min(POLICY_LIMITS[k].min).max(POLICY_LIMITS[k].max).optional();
export const PolicyRequest = z
  .strictObject({
    maxInFlight: policyField("maxInFlight"),
    leaseSeconds: policyField("leaseSeconds"),
    admissionTtlSeconds: policyField("admissionTtlSeconds"),
    maxQueue: policyField("maxQueue"),
  })
  .openapi("PolicyRequest");
export const AdoptRequest = z
  .strictObject({
    members: z
      .array(z.strictObject({ node: NodeName, peerURL: PeerUrl }))
      .min(1)
      .max(100),
  })
  .openapi("AdoptRequest");
export const BootstrapRequest = z.strictObject({ node: NodeName, reason: z.string().min(1).max(500) }).openapi("BootstrapReassignRequest");
/** An admin's act after a restore (marking it, or deciding), with its reason for the audit log. */
export const RestoreDecisionRequest = z.strictObject({ reason: z.string().min(1).max(500) }).openapi("RestoreDecisionRequest");
export const AuditQuery = z.object({
  after: queryInt("after", 0, Number.MAX_SAFE_INTEGER).optional(),
  limit: queryInt("limit", 1, 1000).optional(),
  wait: queryInt("wait", 0, 30).optional(),
});
export const AnyObject = z.record(z.string(), z.unknown()).openapi("Object");
