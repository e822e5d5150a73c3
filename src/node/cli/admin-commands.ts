/**
 * The `join-broker admin` subcommands: their words, arguments and flags (admin-flags.ts), what each
 * one sends (through the typed client) and how its answer reads for a human. `--json` output is
 * handled by the caller, from the same reply.
 * @module
 */
import { BrokerProblem, checkEnrollmentTokenInput, type AdminClient, type BrokerClient, type Reply } from "../../shared/client/index.ts";
import type { AdminTicket, AuditEntry, Member } from "../../shared/client/index.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import { UsageError } from "../exit-codes.ts";
import { ADMIN_FLAGS, type AdminFlagName, type Values } from "./admin-flags.ts";
import { duration, fields, inlineDetail, relative, table, when } from "./format.ts";

export interface CommandContext {
  client: AdminClient;
  /** The whole broker, for commands that are not about one cluster. */
  broker: BrokerClient;
  /** Positional arguments after the subcommand words. */
  args: string[];
  values: Values;
  /** Writes one answer: its exact body with --json, else the human rendering. */
  print(reply: Reply<unknown>, human: () => string): void;
  /** Aborted on SIGINT/SIGTERM (used by `audit --follow`). */
  signal: AbortSignal;
  /** Notes for the operator on stderr (never on stdout, which --json keeps clean). */
  note(text: string): void;
}

export interface AdminCommand {
  words: string[];
  /** Positional argument names, e.g. ["JTI"]. */
  args: string[];
  /** Flags this subcommand takes besides the connection flags. */
  flags: AdminFlagName[];
  /** Of those, the ones it needs. */
  required?: AdminFlagName[];
  summary: string;
  details?: string;
  /** false: the command lists or acts across clusters, and --cluster is not needed. */
  perCluster?: false;
  /** Only a follower waits for an interrupt; every other subcommand dies of it the ordinary way. */
  follows?(values: Values): boolean;
  run(ctx: CommandContext): Promise<void>;
}

type TokenRow = {
  id: string;
  state: string;
  uses: number;
  maxUses: number | null;
  expiresAt: string | null;
  description?: string;
  nodes?: string[];
  peerHosts?: string[];
};
const tokenScope = (t: TokenRow) =>
  [t.nodes ? `nodes ${t.nodes.join(",")}` : "", t.peerHosts ? `hosts ${t.peerHosts.join(",")}` : ""].filter(Boolean).join(" ") || "any";
const tokenRows = (tokens: TokenRow[], now: number) =>
  table(
    ["ID", "STATE", "USES", "EXPIRES", "SCOPE", "DESCRIPTION"],
    tokens.map((t) => [
      t.id,
      t.state,
      t.maxUses === null ? `${t.uses}` : `${t.uses}/${t.maxUses}`,
      t.expiresAt ? `${t.expiresAt.slice(0, 19)}Z (${relative(t.expiresAt, now)})` : "never",
      tokenScope(t),
      t.description,
    ]),
  );

const ticketRows = (tickets: AdminTicket[], now: number) =>
  table(
    ["SEQ", "TICKET", "NODE", "STATE", "ROLE", "PEER URL", "JTI", "CREATED", "LEASE", "REASON"],
    tickets.map((t) => [
      t.seq,
      t.ticket,
      t.node,
      t.state,
      t.role,
      t.peerURL,
      t.jti,
      relative(t.createdAt, now),
      t.leaseExpiresAt ? `ends ${relative(t.leaseExpiresAt, now)}` : undefined,
      t.reason,
    ]),
  );

const memberRows = (members: Member[], now: number) =>
  table(
    ["NODE", "PEER URL", "MEMBER ID", "SOURCE", "JOINED"],
    members.map((m) => [m.node, m.peerURL, m.memberID === undefined ? undefined : memberIdHex(m.memberID), m.source, relative(m.joinedAt, now)]),
  );

export const auditLine = (e: AuditEntry) =>
  `${String(e.seq).padStart(6)}  ${e.time?.slice(0, 23)}Z  ${e.actor.padEnd(16)}  ${e.action.padEnd(26)}  ${e.subject}  ${inlineDetail(e.detail)}`.trimEnd();

/** An enrollment token's lifetime when `token create` is given no --ttl. */
export const DEFAULT_TOKEN_TTL_SECONDS = 24 * 3600;

/** The flags `policy set` takes: each sets the policy field of its name. */
const POLICY_FLAGS = ["maxInFlight", "leaseSeconds", "admissionTtlSeconds", "maxQueue"] as const satisfies AdminFlagName[];

/** How long `audit --follow` keeps retrying a broker that does not answer before it gives up. */
const FOLLOW_GIVE_UP_MS = 5 * 60_000;

export const COMMANDS: AdminCommand[] = [
  {
    words: ["token", "create"],
    args: [],
    flags: ["ttl", "maxUses", "description", "nodes", "peerHosts", "newCluster"],
    summary: "create an enrollment token (the secret is shown once); with --new-cluster, for a cluster not yet on the broker",
    details:
      "The cluster must exist on the broker, unless --new-cluster says to create it: a typo in --cluster never\n" +
      "creates a cluster whose first node would bootstrap a second etcd cluster.",
    async run({ client, values, print }) {
      // A token that never expires is a choice made out loud (--ttl never), never a default.
      const ttlSeconds = values.ttl === undefined ? DEFAULT_TOKEN_TTL_SECONDS : values.ttl === "never" ? undefined : values.ttl;
      const input = { ttlSeconds, maxUses: values.maxUses, description: values.description, nodes: values.nodes, peerHosts: values.peerHosts };
      checkEnrollmentTokenInput(input); // bad usage sends nothing
      // The HTTP API creates a cluster with its first token; the CLI does so only when asked to.
      let isNew = false;
      try {
        await client.status();
      } catch (e) {
        // Reported with the way to create it (--new-cluster).
        if (!(e instanceof BrokerProblem && e.code === "unknown_cluster") || values.newCluster !== true) throw e;
        isNew = true;
      }
      const reply = await client.createEnrollmentToken(input);
      const t = reply.body;
      const scope = [t.nodes ? `nodes ${t.nodes.join(", ")}` : "", t.peerHosts ? `peer hosts ${t.peerHosts.join(", ")}` : ""].filter(Boolean).join("; ");
      print(
        reply,
        () =>
          (isNew ? `Created cluster ${client.cluster}.\n` : "") +
          `Created enrollment token ${t.id} for cluster ${client.cluster}: ` +
          `${t.expiresAt ? `expires ${when(t.expiresAt)}` : "never expires"}, ${t.maxUses === null ? "unlimited uses" : `at most ${t.maxUses} use(s)`}` +
          `${scope ? `, only for ${scope}` : ""}.\n` +
          `The token is shown only this once (the broker keeps only its hash):\n${t.token}\n`,
      );
    },
  },
  {
    words: ["token", "list"],
    args: [],
    flags: [],
    summary: "list the cluster's enrollment tokens (never their secrets)",
    async run({ client, print }) {
      const reply = await client.listEnrollmentTokens();
      print(reply, () => (reply.body.tokens.length ? tokenRows(reply.body.tokens, Date.now()) : `No enrollment tokens in cluster ${client.cluster}.\n`));
    },
  },
  {
    words: ["token", "revoke"],
    args: ["ID"],
    flags: [],
    summary: "revoke an enrollment token: it can no longer create or read tickets",
    details: "Tickets it created stay in the queue, and admission tokens already issued stay valid; revoke those with 'revoke JTI'.",
    async run({ client, args, print }) {
      const reply = await client.revokeEnrollmentToken(args[0]);
      const t = reply.body;
      print(reply, () =>
        t.changed === false
          ? `Enrollment token ${t.id} was already revoked${t.revokedAt ? ` (at ${t.revokedAt})` : ""}; nothing changed.\n`
          : `Revoked enrollment token ${t.id} (used ${t.uses} time(s)).\n`,
      );
    },
  },
  {
    words: ["clusters"],
    args: [],
    flags: [],
    summary: "list the clusters on this broker (no --cluster needed)",
    perCluster: false,
    async run({ broker, print }) {
      const reply = await broker.clusters();
      const now = Date.now();
      print(reply, () =>
        reply.body.clusters.length === 0
          ? "No cluster yet: 'join-broker admin token create --cluster NAME --new-cluster' creates one.\n"
          : table(
              ["CLUSTER", "CREATED"],
              reply.body.clusters.map((c) => [c.name, `${c.createdAt.slice(0, 19)}Z (${relative(c.createdAt, now)})`]),
            ),
      );
    },
  },
  {
    words: ["credentials", "create"],
    args: [],
    flags: ["readOnly", "description"],
    required: ["readOnly"],
    summary: "create a read-only admin credential (the secret is shown once): it reads status, audit, metrics and the console, and is refused every write",
    details:
      "With --cluster it reads only that cluster (JOIN_BROKER_CLUSTER does not set this: only the flag does); without it,\n" +
      "every cluster on the broker. Use it as --admin-token or JOIN_BROKER_ADMIN_TOKEN, or as a Prometheus bearer.\n" +
      "Only the admin token creates, lists and revokes credentials.",
    perCluster: false,
    async run({ broker, values, print }) {
      const { cluster, description } = values;
      const reply = await broker.createCredential({ readOnly: true, ...(cluster ? { cluster } : {}), ...(description ? { description } : {}) });
      const c = reply.body;
      print(
        reply,
        () =>
          `Created read-only credential ${c.id} for ${c.cluster ? `cluster ${c.cluster}` : "every cluster"}.\nThe credential is shown only this once (the broker keeps only its hash):\n${c.token}\n`,
      );
    },
  },
  {
    words: ["credentials", "list"],
    args: [],
    flags: [],
    summary: "list the read-only admin credentials (never their secrets)",
    perCluster: false,
    async run({ broker, print }) {
      const reply = await broker.listCredentials();
      const now = Date.now();
      print(reply, () =>
        reply.body.credentials.length === 0
          ? "No read-only credentials.\n"
          : table(
              ["ID", "STATE", "CLUSTER", "CREATED", "DESCRIPTION"],
              reply.body.credentials.map((c) => [
                c.id,
                c.state,
                c.cluster ?? "(all)",
                `${c.createdAt.slice(0, 19)}Z (${relative(c.createdAt, now)})`,
                c.description,
              ]),
            ),
      );
    },
  },
  {
    words: ["credentials", "revoke"],
    args: ["ID"],
    flags: [],
    summary: "revoke a read-only admin credential: its next request is refused",
    perCluster: false,
    async run({ broker, args, print }) {
      const reply = await broker.revokeCredential(args[0]);
      const c = reply.body;
      print(reply, () => (c.changed ? `Revoked read-only credential ${c.id}.\n` : `Read-only credential ${c.id} was already revoked; nothing changed.\n`));
    },
  },
  {
    words: ["status"],
    args: [],
    flags: [],
    summary: "bootstrap state, pause, policy, queue, admissions in flight, members",
    async run({ client, print }) {
      const reply = await client.status();
      print(reply, () => {
        const s = reply.body;
        const now = Date.now();
        const p = s.policy;
        const state = s.restored?.awaitingAdmin
          ? "RESTORED: no bootstrap until an admin decides (adopt, if the cluster exists; bootstrap allow, if it never formed)"
          : s.bootstrapped
            ? `bootstrapped${s.bootstrapNode ? ` (by ${s.bootstrapNode})` : ""}`
            : s.adopted
              ? "adopted (existing cluster: no bootstrap)"
              : s.bootstrapNode
                ? `waiting for bootstrap: ${s.bootstrapNode} holds the bootstrap ticket`
                : "new: the first node to ask bootstraps";
        let out = fields([
          ["Cluster", s.cluster],
          ["Issuer", s.issuer],
          ["Created", when(s.createdAt, now)],
          ["State", state],
          ["Admissions", s.needsOperator ? "PAUSED: a member needs an operator (below)" : s.paused ? "PAUSED: nothing new is admitted" : "running"],
          ["Policy", `maxInFlight ${p.maxInFlight}, leaseSeconds ${p.leaseSeconds}, admissionTtlSeconds ${p.admissionTtlSeconds}, maxQueue ${p.maxQueue}`],
          ["Queue", `${s.queue.queued} queued, ${s.queue.admitted} admitted`],
          ["Typical admission", s.typicalAdmissionSeconds ? duration(s.typicalAdmissionSeconds) : "unknown yet"],
          ["Signing key", s.signingKey],
          [
            "Database",
            s.databaseSizeBytes === undefined
              ? "unknown"
              : `${(s.databaseSizeBytes / 1048576).toFixed(1)} MiB${s.retention ? ` (history kept: audit ${duration(s.retention.auditSeconds)}, ended tickets ${duration(s.retention.endedTicketSeconds)})` : ""}`,
          ],
        ]);
        // What the node that gave up said, with the command that removes its member; then resume.
        if (s.needsOperator)
          out += `\nNeeds an operator (since ${when(s.needsOperator.at, now)}): ${s.needsOperator.node} left etcd member ${BigInt(s.needsOperator.memberID).toString(16)}\n  ${s.needsOperator.detail}\n  Remove it, then: join-broker admin resume\n`;
        out += `\nIn flight (${s.inFlight.length}):\n` + (s.inFlight.length ? ticketRows(s.inFlight, now) : "  none\n");
        out += `\nMembers (${s.members.length}):\n` + (s.members.length ? memberRows(s.members, now) : "  none\n");
        return out;
      });
    },
  },
  {
    words: ["tickets"],
    args: [],
    flags: ["state", "limit", "after"],
    summary: "list tickets in queue order, optionally of one state",
    async run({ client, values, print }) {
      const reply = await client.tickets({ state: values.state as never, limit: values.limit, after: values.after });
      print(reply, () => {
        const { tickets, next } = reply.body;
        const body = tickets.length ? ticketRows(tickets, Date.now()) : `No ${values.state ? `${values.state} ` : ""}tickets in cluster ${client.cluster}.\n`;
        return next === null ? body : `${body}More: add --after ${next}\n`;
      });
    },
  },
  {
    words: ["revoke"],
    args: ["JTI"],
    flags: ["reason"],
    required: ["reason"],
    summary: "revoke an admission token now: its ticket ends and its slot goes to the next node",
    details: "Introspection reports the token inactive at once; verifiers that use the revocation list see it on their next poll.",
    async run({ client, args, values, print }) {
      const reply = await client.revokeAdmission(args[0], values.reason!);
      const r = reply.body;
      print(reply, () =>
        r.changed
          ? `Revoked admission ${r.jti} of node ${r.node} (ticket ${r.ticket}): it is inactive now, and its slot is free.\n`
          : `Admission ${r.jti} of node ${r.node} had already ended (${r.status}); nothing changed.\n`,
      );
    },
  },
  {
    words: ["pause"],
    args: [],
    flags: [],
    summary: "stop admitting: nodes keep queueing, admitted nodes keep their leases",
    async run({ client, print }) {
      const reply = await client.pause();
      print(reply, () => `Paused cluster ${client.cluster}: nothing new is admitted until 'resume'. Admitted nodes keep their leases.\n`);
    },
  },
  {
    words: ["resume"],
    args: [],
    flags: [],
    summary: "admit again, in queue order",
    async run({ client, print }) {
      const reply = await client.resume();
      print(reply, () => `Resumed cluster ${client.cluster}: queued nodes are admitted again, in order.\n`);
    },
  },
  {
    words: ["policy", "set"],
    args: [],
    flags: [...POLICY_FLAGS],
    summary: "change the queue policy; fields not given keep their value",
    details: "maxInFlight above 1 needs etcd >= 3.6 (etcd 3.4/3.5 allow a single learner at a time).",
    async run({ client, values, print }) {
      const patch: Record<string, number> = {};
      for (const field of POLICY_FLAGS) if (values[field] !== undefined) patch[field] = values[field];
      if (Object.keys(patch).length === 0)
        throw new UsageError(`policy set needs at least one of ${POLICY_FLAGS.map((f) => ADMIN_FLAGS[f].flags.split(" ")[0]).join(", ")}`);
      const reply = await client.setPolicy(patch);
      const p = reply.body;
      print(
        reply,
        () =>
          `Policy of ${client.cluster}: maxInFlight ${p.maxInFlight}, leaseSeconds ${p.leaseSeconds}, admissionTtlSeconds ${p.admissionTtlSeconds}, maxQueue ${p.maxQueue}.\n`,
      );
    },
  },
  {
    words: ["policy"],
    args: [],
    flags: [],
    summary: "show the queue policy",
    async run({ client, print }) {
      const reply = await client.policy();
      const p = reply.body;
      print(reply, () =>
        fields([
          ["maxInFlight", `${p.maxInFlight}  (nodes admitted at once)`],
          ["leaseSeconds", `${p.leaseSeconds}  (an admitted node must heartbeat or complete within this)`],
          ["admissionTtlSeconds", `${p.admissionTtlSeconds}  (lifetime of an admission token)`],
          ["maxQueue", `${p.maxQueue}  (live tickets at most)`],
        ]),
      );
    },
  },
  {
    words: ["keys", "rotate"],
    args: [],
    flags: [],
    summary: "sign new admission tokens with a new key; the old public key stays published until its tokens expire",
    async run({ client, print }) {
      const reply = await client.rotateKeys();
      const r = reply.body;
      print(
        reply,
        () =>
          `New signing key ${r.kid}${r.retired ? `; retired ${r.retired} (still published until the tokens it signed expire)` : ""}.\nPublished keys: ${r.keys.join(", ")}\n`,
      );
    },
  },
  {
    words: ["adopt"],
    args: [],
    flags: ["member"],
    required: ["member"],
    summary: "declare an existing etcd cluster and its members: it never gets a bootstrap ticket",
    details: "Run it before any node of that cluster asks for a ticket.",
    async run({ client, values, print }) {
      const reply = await client.adopt(values.member!);
      print(
        reply,
        () =>
          `Adopted cluster ${client.cluster} with ${reply.body.adopted} member(s); it will never issue a bootstrap ticket.\n` +
          memberRows(reply.body.members, Date.now()),
      );
    },
  },
  {
    words: ["forget"],
    args: ["NODE"],
    flags: [],
    summary: "forget a member (after removing it from etcd) so that it may join again",
    async run({ client, args, print }) {
      const reply = await client.forgetMember(args[0]);
      print(reply, () => `Forgot member ${reply.body.forgotten} of ${client.cluster}: its next ticket request queues a new join.\n`);
    },
  },
  {
    words: ["bootstrap", "reassign"],
    args: ["NODE"],
    flags: ["reason"],
    required: ["reason"],
    summary: "hand the bootstrap ticket to another node (the old holder's ticket is revoked)",
    details: "Only before the cluster is bootstrapped. Make sure the old holder's etcd is gone first: two bootstrapped nodes are two clusters.",
    async run({ client, args, values, print }) {
      const reply = await client.reassignBootstrap({ node: args[0], reason: values.reason! });
      const r = reply.body;
      print(
        reply,
        () => `Bootstrap of ${client.cluster} now belongs to ${r.bootstrapNode}${r.revoked ? `; revoked the old holder's admission ${r.revoked}` : ""}.\n`,
      );
    },
  },
  {
    words: ["restored"],
    args: [],
    flags: ["reason"],
    required: ["reason"],
    summary: "mark the cluster's state restored from an earlier point (a point-in-time restore): no bootstrap until an admin decides",
    details:
      "Run it right after restoring the broker's state to an earlier point, before any node asks. Then decide: adopt, if the cluster exists; bootstrap allow, if it never formed.",
    async run({ client, values, print }) {
      const reply = await client.markRestored(values.reason!);
      print(reply, () =>
        reply.body.awaitingAdmin
          ? `Marked ${client.cluster} restored: no bootstrap until you decide (adopt, if the cluster exists; bootstrap allow, if it never formed).\n`
          : `Marked ${client.cluster} restored; it is bootstrapped or adopted, so there is nothing to decide.\n`,
      );
    },
  },
  {
    words: ["bootstrap", "allow"],
    args: [],
    flags: ["reason"],
    required: ["reason"],
    summary: "after a restore: the cluster never formed, so its bootstrap may go ahead",
    details: "Only if no etcd of this cluster runs anywhere: a bootstrap next to an existing cluster makes two clusters. If it exists, adopt it instead.",
    async run({ client, values, print }) {
      const reply = await client.allowBootstrap(values.reason!);
      print(reply, () =>
        reply.body.changed ? `Bootstrap of ${client.cluster} may go ahead.\n` : `${client.cluster} was not waiting for a decision; nothing changed.\n`,
      );
    },
  },
  {
    words: ["metrics"],
    args: [],
    flags: [],
    summary: "the cluster's queue metrics in the Prometheus text format (queue length, in flight, admissions, waits)",
    details:
      "The answer is text, not JSON, so --json does not apply; scrape GET /v1/admin/clusters/NAME/metrics with a read-only credential\n('credentials create --read-only') for monitoring.",
    async run({ client, values, print }) {
      if (values.json) throw new UsageError("'metrics' answers in the Prometheus text format; --json does not apply");
      const reply = await client.metrics();
      print(reply, () => reply.body);
    },
  },
  {
    words: ["audit"],
    args: [],
    flags: ["after", "limit", "follow"],
    follows: (values) => values.follow === true,
    summary: "the append-only log of every state change; --follow waits for new entries until interrupted",
    details: "With --follow --json each answer that carries entries is printed as one line (the broker's body).",
    async run(ctx) {
      const { client, values, print } = ctx;
      let after = values.after ?? 0;
      const limit = values.limit;
      if (!values.follow) {
        const reply = await client.audit({ after, limit });
        print(reply, () => {
          const { entries, next } = reply.body;
          const more = entries.length === (limit ?? 100) ? `More: add --after ${next}\n` : "";
          return (entries.length ? entries.map(auditLine).join("\n") + "\n" : `No audit entries after ${after}.\n`) + more;
        });
        return;
      }
      // Follow: long polls of up to 30 s; "not now" answers and lost connections are retried.
      let failingSince: number | null = null;
      let backoff = 1000;
      while (!ctx.signal.aborted) {
        try {
          const reply = await client.audit({ after, limit, wait: 30 }, ctx.signal);
          failingSince = null;
          backoff = 1000;
          if (reply.body.entries.length > 0) {
            print(reply, () => reply.body.entries.map(auditLine).join("\n") + "\n");
            after = reply.body.next;
          }
        } catch (e) {
          if (ctx.signal.aborted) return;
          const transient = (e as { transient?: boolean }).transient === true || (e as Error).name === "BrokerUnreachable";
          if (!transient) throw e;
          failingSince ??= Date.now();
          if (Date.now() - failingSince > FOLLOW_GIVE_UP_MS) throw e;
          ctx.note(`${(e as Error).message}; retrying in ${Math.round(backoff / 1000)} s`);
          await sleep(backoff, ctx.signal);
          backoff = Math.min(backoff * 2, 15_000);
        }
      }
    },
  },
];

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
