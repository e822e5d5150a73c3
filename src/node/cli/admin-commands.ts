/**
 * The `join-broker admin` subcommands: what each one sends (through the typed client) and how
 * its answer reads for a human. `--json` output is handled by the caller, from the same reply.
 * @module
 */
import { BrokerProblem, checkEnrollmentTokenInput, type AdminClient, type BrokerClient, type Reply } from "../../shared/client/index.ts";
import type { AdminTicket, AuditEntry, Member } from "../../shared/client/index.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import { UsageError } from "../exit-codes.ts";
import { duration, fields, inlineDetail, parseDuration, relative, table, when } from "./format.ts";
import type { Values } from "./flags.ts";

export type { Values };

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
  options: string[];
  synopsis: string;
  summary: string;
  details?: string;
  /** false: the command lists or acts across clusters, and --cluster is not needed. */
  perCluster?: false;
  run(ctx: CommandContext): Promise<void>;
}

const str = (values: Values, name: string): string | undefined => {
  const v = values[name];
  return typeof v === "string" ? v : undefined;
};

/** A whole, non-negative number flag. */
function int(values: Values, name: string): number | undefined {
  const v = str(values, name);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${name} must be a whole number, not ${JSON.stringify(v)}`);
  return Number(v);
}

/** A repeatable, comma-separated list flag; undefined when not given. */
function list(values: Values, name: string): string[] | undefined {
  const v = values[name];
  if (v === undefined || typeof v === "boolean") return undefined;
  const items = (Array.isArray(v) ? v : [v]).flatMap((x) => x.split(",")).map((x) => x.trim());
  if (items.some((x) => x === "")) throw new UsageError(`--${name} takes a comma-separated list without empty entries`);
  return items;
}

function required(values: Values, name: string, what: string): string {
  const v = str(values, name);
  if (v === undefined || v.trim() === "") throw new UsageError(`--${name} is required: ${what}`);
  return v;
}

type TokenRow = { id: string; state: string; uses: number; maxUses: number | null; expiresAt: string | null; description?: string; nodes?: string[]; peerHosts?: string[] };
const tokenScope = (t: TokenRow) => [t.nodes ? `nodes ${t.nodes.join(",")}` : "", t.peerHosts ? `hosts ${t.peerHosts.join(",")}` : ""].filter(Boolean).join(" ") || "any";
const tokenRows = (tokens: TokenRow[], now: number) =>
  table(
    ["ID", "STATE", "USES", "EXPIRES", "SCOPE", "DESCRIPTION"],
    tokens.map((t) => [t.id, t.state, t.maxUses === null ? `${t.uses}` : `${t.uses}/${t.maxUses}`, t.expiresAt ? `${t.expiresAt.slice(0, 19)}Z (${relative(t.expiresAt, now)})` : "never", tokenScope(t), t.description]),
  );

const ticketRows = (tickets: AdminTicket[], now: number) =>
  table(
    ["SEQ", "TICKET", "NODE", "STATE", "ROLE", "PEER URL", "JTI", "CREATED", "LEASE", "REASON"],
    tickets.map((t) => [t.seq, t.ticket, t.node, t.state, t.role, t.peerURL, t.jti, relative(t.createdAt, now), t.leaseExpiresAt ? `ends ${relative(t.leaseExpiresAt, now)}` : undefined, t.reason]),
  );

const memberRows = (members: Member[], now: number) =>
  table(
    ["NODE", "PEER URL", "MEMBER ID", "SOURCE", "JOINED"],
    members.map((m) => [m.node, m.peerURL, m.memberID === undefined ? undefined : memberIdHex(m.memberID), m.source, relative(m.joinedAt, now)]),
  );

export const auditLine = (e: AuditEntry) => `${String(e.seq).padStart(6)}  ${e.time?.slice(0, 23)}Z  ${e.actor.padEnd(16)}  ${e.action.padEnd(26)}  ${e.subject}  ${inlineDetail(e.detail)}`.trimEnd();

/** An enrollment token's lifetime when `token create` is given no --ttl. */
export const DEFAULT_TOKEN_TTL_SECONDS = 24 * 3600;

const POLICY_FLAGS = { "max-in-flight": "maxInFlight", "lease-seconds": "leaseSeconds", "admission-ttl-seconds": "admissionTtlSeconds", "max-queue": "maxQueue" } as const;

/** How long `audit --follow` keeps retrying a broker that does not answer before it gives up. */
const FOLLOW_GIVE_UP_MS = 5 * 60_000;

export const COMMANDS: AdminCommand[] = [
  {
    words: ["token", "create"],
    args: [],
    options: ["ttl", "max-uses", "description", "nodes", "peer-hosts", "new-cluster"],
    synopsis: "token create [--ttl 24h|never] [--max-uses N] [--description TEXT] [--nodes 'ctrl-*,…'] [--peer-hosts 10.0.0.0/24,…] [--new-cluster]",
    summary: "create an enrollment token (the secret is shown once); with --new-cluster, for a cluster not yet on the broker",
    details:
      "The cluster must exist on the broker, unless --new-cluster says to create it: a typo in --cluster never\n" +
      "creates a cluster whose first node would bootstrap a second etcd cluster.\n" +
      "--ttl takes seconds or a duration such as 10m, 24h, 7d (at least 60 s), or 'never'; without it the token\n" +
      "expires in 24 h. Without --max-uses it may be used any number of times until then: give the number of nodes.\n" +
      "--nodes limits the node names it may ask tickets for (glob patterns: * and ?), --peer-hosts the hosts of their\n" +
      "peer URLs (host names, *.domain, IP addresses or CIDRs); both take a comma-separated list and may be repeated.",
    async run({ client, values, print }) {
      const ttlText = str(values, "ttl");
      // A token that never expires is a choice made out loud (--ttl never), never a default.
      const ttlSeconds = ttlText === undefined ? DEFAULT_TOKEN_TTL_SECONDS : ttlText === "never" ? undefined : (parseDuration(ttlText) ?? undefined);
      if (ttlText !== undefined && ttlText !== "never" && ttlSeconds === undefined) throw new UsageError(`--ttl must be seconds, a duration like 10m, 24h, 7d, or 'never', not ${JSON.stringify(ttlText)}`);
      const input = { ttlSeconds, maxUses: int(values, "max-uses"), description: str(values, "description"), nodes: list(values, "nodes"), peerHosts: list(values, "peer-hosts") };
      checkEnrollmentTokenInput(input); // bad usage sends nothing
      // The HTTP API creates a cluster with its first token; the CLI does so only when asked to.
      let isNew = false;
      try {
        await client.status();
      } catch (e) {
        // Reported with the way to create it (--new-cluster).
        if (!(e instanceof BrokerProblem && e.code === "unknown_cluster") || values["new-cluster"] !== true) throw e;
        isNew = true;
      }
      const reply = await client.createEnrollmentToken(input);
      const t = reply.body;
      const scope = [t.nodes ? `nodes ${t.nodes.join(", ")}` : "", t.peerHosts ? `peer hosts ${t.peerHosts.join(", ")}` : ""].filter(Boolean).join("; ");
      print(reply, () =>
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
    options: [],
    synopsis: "token list",
    summary: "list the cluster's enrollment tokens (never their secrets)",
    async run({ client, print }) {
      const reply = await client.listEnrollmentTokens();
      print(reply, () => (reply.body.tokens.length ? tokenRows(reply.body.tokens, Date.now()) : `No enrollment tokens in cluster ${client.cluster}.\n`));
    },
  },
  {
    words: ["token", "revoke"],
    args: ["ID"],
    options: [],
    synopsis: "token revoke ID",
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
    options: [],
    synopsis: "clusters",
    summary: "list the clusters on this broker (no --cluster needed)",
    perCluster: false,
    async run({ broker, print }) {
      const reply = await broker.clusters();
      const now = Date.now();
      print(reply, () =>
        reply.body.clusters.length === 0
          ? "No cluster yet: 'join-broker admin token create --cluster NAME --new-cluster' creates one.\n"
          : table(["CLUSTER", "CREATED"], reply.body.clusters.map((c) => [c.name, `${c.createdAt.slice(0, 19)}Z (${relative(c.createdAt, now)})`])),
      );
    },
  },
  {
    words: ["credentials", "create"],
    args: [],
    options: ["read-only", "description"],
    synopsis: "credentials create --read-only [--cluster NAME] [--description TEXT]",
    summary: "create a read-only admin credential (the secret is shown once): it reads status, audit, metrics and the console, and is refused every write",
    details:
      "With --cluster it reads only that cluster (JOIN_BROKER_CLUSTER does not set this: only the flag does); without it,\n" +
      "every cluster on the broker. Use it as --admin-token or JOIN_BROKER_ADMIN_TOKEN, or as a Prometheus bearer.\n" +
      "Only the admin token creates, lists and revokes credentials.",
    perCluster: false,
    async run({ broker, values, print }) {
      if (values["read-only"] !== true) throw new UsageError("credentials create needs --read-only: read-only credentials are the only kind");
      const cluster = str(values, "cluster");
      const reply = await broker.createCredential({ readOnly: true, ...(cluster ? { cluster } : {}), ...(str(values, "description") ? { description: str(values, "description") } : {}) });
      const c = reply.body;
      print(reply, () => `Created read-only credential ${c.id} for ${c.cluster ? `cluster ${c.cluster}` : "every cluster"}.\nThe credential is shown only this once (the broker keeps only its hash):\n${c.token}\n`);
    },
  },
  {
    words: ["credentials", "list"],
    args: [],
    options: [],
    synopsis: "credentials list",
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
              reply.body.credentials.map((c) => [c.id, c.state, c.cluster ?? "(all)", `${c.createdAt.slice(0, 19)}Z (${relative(c.createdAt, now)})`, c.description]),
            ),
      );
    },
  },
  {
    words: ["credentials", "revoke"],
    args: ["ID"],
    options: [],
    synopsis: "credentials revoke ID",
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
    options: [],
    synopsis: "status",
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
          ["Database", s.databaseSizeBytes === undefined ? "unknown" : `${(s.databaseSizeBytes / 1048576).toFixed(1)} MiB${s.retention ? ` (history kept: audit ${duration(s.retention.auditSeconds)}, ended tickets ${duration(s.retention.endedTicketSeconds)})` : ""}`],
        ]);
        // What the node that gave up said, with the command that removes its member; then resume.
        if (s.needsOperator) out += `\nNeeds an operator (since ${when(s.needsOperator.at, now)}): ${s.needsOperator.node} left etcd member ${BigInt(s.needsOperator.memberID).toString(16)}\n  ${s.needsOperator.detail}\n  Remove it, then: join-broker admin resume\n`;
        out += `\nIn flight (${s.inFlight.length}):\n` + (s.inFlight.length ? ticketRows(s.inFlight, now) : "  none\n");
        out += `\nMembers (${s.members.length}):\n` + (s.members.length ? memberRows(s.members, now) : "  none\n");
        return out;
      });
    },
  },
  {
    words: ["tickets"],
    args: [],
    options: ["state", "limit", "after"],
    synopsis: "tickets [--state queued|admitted|joined|expired|abandoned|revoked] [--limit N] [--after SEQ]",
    summary: "list tickets in queue order, optionally of one state",
    async run({ client, values, print }) {
      const reply = await client.tickets({ state: str(values, "state") as never, limit: int(values, "limit"), after: int(values, "after") });
      print(reply, () => {
        const { tickets, next } = reply.body;
        const body = tickets.length ? ticketRows(tickets, Date.now()) : `No ${str(values, "state") ?? ""}${str(values, "state") ? " " : ""}tickets in cluster ${client.cluster}.\n`;
        return next === null ? body : `${body}More: add --after ${next}\n`;
      });
    },
  },
  {
    words: ["revoke"],
    args: ["JTI"],
    options: ["reason"],
    synopsis: "revoke JTI --reason TEXT",
    summary: "revoke an admission token now: its ticket ends and its slot goes to the next node",
    details: "Introspection reports the token inactive at once; verifiers that use the revocation list see it on their next poll.",
    async run({ client, args, values, print }) {
      const reply = await client.revokeAdmission(args[0], required(values, "reason", "say why, for the audit log"));
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
    options: [],
    synopsis: "pause",
    summary: "stop admitting: nodes keep queueing, admitted nodes keep their leases",
    async run({ client, print }) {
      const reply = await client.pause();
      print(reply, () => `Paused cluster ${client.cluster}: nothing new is admitted until 'resume'. Admitted nodes keep their leases.\n`);
    },
  },
  {
    words: ["resume"],
    args: [],
    options: [],
    synopsis: "resume",
    summary: "admit again, in queue order",
    async run({ client, print }) {
      const reply = await client.resume();
      print(reply, () => `Resumed cluster ${client.cluster}: queued nodes are admitted again, in order.\n`);
    },
  },
  {
    words: ["policy", "set"],
    args: [],
    options: Object.keys(POLICY_FLAGS),
    synopsis: "policy set [--max-in-flight N] [--lease-seconds N] [--admission-ttl-seconds N] [--max-queue N]",
    summary: "change the queue policy; fields not given keep their value",
    details: "maxInFlight above 1 needs etcd >= 3.6 (etcd 3.4/3.5 allow a single learner at a time).",
    async run({ client, values, print }) {
      const patch: Record<string, number> = {};
      for (const [flag, field] of Object.entries(POLICY_FLAGS)) {
        const v = int(values, flag);
        if (v !== undefined) patch[field] = v;
      }
      if (Object.keys(patch).length === 0) throw new UsageError(`policy set needs at least one of ${Object.keys(POLICY_FLAGS).map((f) => `--${f}`).join(", ")}`);
      const reply = await client.setPolicy(patch);
      const p = reply.body;
      print(reply, () => `Policy of ${client.cluster}: maxInFlight ${p.maxInFlight}, leaseSeconds ${p.leaseSeconds}, admissionTtlSeconds ${p.admissionTtlSeconds}, maxQueue ${p.maxQueue}.\n`);
    },
  },
  {
    words: ["policy"],
    args: [],
    options: [],
    synopsis: "policy",
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
    options: [],
    synopsis: "keys rotate",
    summary: "sign new admission tokens with a new key; the old public key stays published until its tokens expire",
    async run({ client, print }) {
      const reply = await client.rotateKeys();
      const r = reply.body;
      print(reply, () => `New signing key ${r.kid}${r.retired ? `; retired ${r.retired} (still published until the tokens it signed expire)` : ""}.\nPublished keys: ${r.keys.join(", ")}\n`);
    },
  },
  {
    words: ["adopt"],
    args: [],
    options: ["member"],
    synopsis: "adopt --member NODE=PEERURL [--member NODE=PEERURL …]",
    summary: "declare an existing etcd cluster and its members: it never gets a bootstrap ticket",
    details: "Run it before any node of that cluster asks for a ticket.",
    async run({ client, values, print }) {
      const given = (values.member as string[] | undefined) ?? [];
      if (given.length === 0) throw new UsageError("adopt needs at least one --member NODE=PEERURL");
      const members = given.map((m) => {
        const at = m.indexOf("=");
        if (at <= 0 || at === m.length - 1) throw new UsageError(`--member must be NODE=PEERURL, not ${JSON.stringify(m)}`);
        return { node: m.slice(0, at), peerURL: m.slice(at + 1) };
      });
      const reply = await client.adopt(members);
      print(reply, () => `Adopted cluster ${client.cluster} with ${reply.body.adopted} member(s); it will never issue a bootstrap ticket.\n` + memberRows(reply.body.members, Date.now()));
    },
  },
  {
    words: ["forget"],
    args: ["NODE"],
    options: [],
    synopsis: "forget NODE",
    summary: "forget a member (after removing it from etcd) so that it may join again",
    async run({ client, args, print }) {
      const reply = await client.forgetMember(args[0]);
      print(reply, () => `Forgot member ${reply.body.forgotten} of ${client.cluster}: its next ticket request queues a new join.\n`);
    },
  },
  {
    words: ["bootstrap", "reassign"],
    args: ["NODE"],
    options: ["reason"],
    synopsis: "bootstrap reassign NODE --reason TEXT",
    summary: "hand the bootstrap ticket to another node (the old holder's ticket is revoked)",
    details: "Only before the cluster is bootstrapped. Make sure the old holder's etcd is gone first: two bootstrapped nodes are two clusters.",
    async run({ client, args, values, print }) {
      const reply = await client.reassignBootstrap({ node: args[0], reason: required(values, "reason", "say why, for the audit log") });
      const r = reply.body;
      print(reply, () => `Bootstrap of ${client.cluster} now belongs to ${r.bootstrapNode}${r.revoked ? `; revoked the old holder's admission ${r.revoked}` : ""}.\n`);
    },
  },
  {
    words: ["restored"],
    args: [],
    options: ["reason"],
    synopsis: "restored --reason TEXT",
    summary: "mark the cluster's state restored from an earlier point (a point-in-time restore): no bootstrap until an admin decides",
    details: "Run it right after restoring the broker's state to an earlier point, before any node asks. Then decide: adopt, if the cluster exists; bootstrap allow, if it never formed.",
    async run({ client, values, print }) {
      const reply = await client.markRestored(required(values, "reason", "say why, for the audit log"));
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
    options: ["reason"],
    synopsis: "bootstrap allow --reason TEXT",
    summary: "after a restore: the cluster never formed, so its bootstrap may go ahead",
    details: "Only if no etcd of this cluster runs anywhere: a bootstrap next to an existing cluster makes two clusters. If it exists, adopt it instead.",
    async run({ client, values, print }) {
      const reply = await client.allowBootstrap(required(values, "reason", "say why, for the audit log"));
      print(reply, () => (reply.body.changed ? `Bootstrap of ${client.cluster} may go ahead.\n` : `${client.cluster} was not waiting for a decision; nothing changed.\n`));
    },
  },
  {
    words: ["metrics"],
    args: [],
    options: [],
    synopsis: "metrics",
    summary: "the cluster's queue metrics in the Prometheus text format (queue length, in flight, admissions, waits)",
    details: "The answer is text, not JSON, so --json does not apply; scrape GET /v1/admin/clusters/NAME/metrics with a read-only credential\n('credentials create --read-only') for monitoring.",
    async run({ client, values, print }) {
      if (values.json) throw new UsageError("'metrics' answers in the Prometheus text format; --json does not apply");
      const reply = await client.metrics();
      print(reply, () => reply.body);
    },
  },
  {
    words: ["audit"],
    args: [],
    options: ["after", "limit", "follow"],
    synopsis: "audit [--after SEQ] [--limit N] [--follow]",
    summary: "the append-only log of every state change; --follow waits for new entries until interrupted",
    details: "With --follow --json each answer that carries entries is printed as one line (the broker's body).",
    async run(ctx) {
      const { client, values, print } = ctx;
      let after = int(values, "after") ?? 0;
      const limit = int(values, "limit");
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
