/**
 * The node agent: the join as a short list of steps, each safe to crash at. Run the same
 * command again and it resumes from what the broker, etcd and the state dir say.
 *
 *   marker? ──yes──▶ (start etcd on its data) ▶ joined                          joined-steps.ts
 *     │no
 *   ticket (idempotent POST) ▶ queued (long polls) ▶ admitted                   broker-steps.ts
 *     admitted ─┬─ role bootstrap ▶ etcd `new` ▶ healthy ──────────────┐        bootstrap-step.ts
 *               ├─ role join ▶ learner add ▶ etcd `existing` ▶ promote ┤        learner-step.ts
 *               └─ gate mode ▶ the installer ▶ etcd lists a voter ─────┤        gate.ts
 *     complete ◀───────────────────────────────────────────────────────┘
 *     ▶ marker ▶ joined (supervise etcd)                                        joined-steps.ts
 *   anything else ▶ an exit code, the turn given up                             ending.ts
 *
 * The broker alone decides between bootstrap and join; local files never do. etcd is started
 * with `--initial-cluster-state new` only for the broker's bootstrap ticket, and a data dir this
 * agent did not fill for this cluster is never started (data-dir-rules.ts). While admitted, a
 * lease keeper heartbeats; if the broker ends the admission the current step stops: a
 * revocation refuses (exit 3), an expiry goes back to the queue.
 *
 * A learner whose admission ended may be removed from etcd meanwhile (the join API makes room
 * for the next node). Its data can never serve again, so a node that never was a voter moves it
 * aside and starts fresh once it is added anew; a voter's or a bootstrap node's data is never moved.
 * @module
 */
import { NodeSession } from "../../shared/client/node-session.ts";
import { nodeFetch } from "../etcd/tls-fetch.ts";
import type { AdmittedTicket, TicketView } from "../../shared/protocol/wire.ts";
import type { Admission } from "./admission.ts";
import { UsageError } from "../exit-codes.ts";
import { withDeadline, type AgentContext } from "./agent-context.ts";
import { bootstrap, checkNoClusterYet } from "./bootstrap-step.ts";
import { BrokerSteps } from "./broker-steps.ts";
import { endRun } from "./ending.ts";
import { Gate } from "./gate.ts";
import { JoinApiClient } from "./join-api-client.ts";
import { JoinApiSteps } from "./join-api-steps.ts";
import type { AgentOptions } from "./agent-options.ts";
import { alreadyJoined, resumeJoined, serveJoined } from "./joined-steps.ts";
import { AdmissionRevoked, LeaseKeeper, LeaseLost } from "./lease.ts";
import { joinAsLearner } from "./learner-step.ts";
import { LocalEtcd } from "./local-etcd.ts";
import { RevocationListKeeper } from "./revocation-list.ts";
import { NodeFiles } from "./node-files.ts";
import { bootstrapCertificates, checkOperatorCa, NodeKeys } from "./node-certificates.ts";
import type { Reporter } from "./progress.ts";
import { Backoff, sleep, type Random } from "./retry.ts";
import { StateDir, type JoinedMarker } from "./state-files.ts";

export interface AgentDeps {
  reporter: Reporter;
  /** Writes one line to stdout. */
  print(line: string): void;
  /** Aborts with `Stopped` on SIGINT/SIGTERM. */
  stop: AbortSignal;
  random?: Random;
}

/** Runs the agent to its end and returns the exit code. */
export async function runAgent(options: AgentOptions, deps: AgentDeps): Promise<number> {
  const dir = new StateDir(options.stateDir);
  try {
    dir.lock();
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const ctx = agentContext(options, deps, dir);
  try {
    return await run(ctx);
  } finally {
    ctx.crl?.stop();
    dir.unlock();
    deps.reporter.close();
  }
}

/** The parts of one run, made once, that every step works with. */
function agentContext(options: AgentOptions, deps: AgentDeps, dir: StateDir): AgentContext {
  const { reporter, print } = deps;
  const random = deps.random ?? Math.random;
  // Its own fetch over node:http, and the node session alone rather than the whole broker client
  // (its input schemas): a process that starts on every controller at once loads neither undici
  // nor zod (--cluster is checked with the command line).
  const fetch = nodeFetch();
  const session = new NodeSession(options.brokerUrl, options.cluster, options.token, undefined, fetch);
  const files = new NodeFiles(options, dir);
  const broker = new BrokerSteps(session, options, reporter, random);
  const crl = options.pkiDir && !options.exec ? new RevocationListKeeper(options.pkiDir, options.joinApiUrl, reporter) : null;
  const etcd = new LocalEtcd(options, reporter, dir, {
    owned: () => files.owned,
    saveOwned: (owned) => files.save({ etcd: owned }),
    disk: () => files.disk(),
    refusal: (rule, role, why) => files.refusal(rule, role, why),
    print,
    // From etcd's first start on, the list it reads is kept current while the agent runs.
    started: () => crl?.start(),
    beforeStart: async () => crl?.ensurePlaceholder(),
  });
  const keys = new NodeKeys(options);
  const joinApi = new JoinApiSteps(new JoinApiClient(options.joinApiUrl, undefined, fetch), broker, session, etcd, options, reporter, random, keys);
  const gate = options.exec ? new Gate(options, reporter, dir) : null;
  return { options, reporter, files, etcd, session, broker, joinApi, keys, gate, random, crl, stop: deps.stop, print };
}

async function run(ctx: AgentContext): Promise<number> {
  try {
    await ctx.gate?.prepare();
    ctx.files.load();
    // Ask etcd its version (a process start) while the broker is asked for the ticket, not after.
    void ctx.etcd.know();
    const marker = ctx.files.dir.readMarker();
    if (marker) return await resumeJoined(ctx, marker);
    const o = ctx.options;
    // Either role needs fresh etcd keys on TLS: made while the broker is asked and the queue waited in.
    if (o.pkiDir && !ctx.gate) ctx.keys.prepare();
    ctx.reporter.event("start", `joining cluster ${o.cluster} through ${o.brokerUrl} as ${o.node} (${o.peerURL})`, { cluster: o.cluster, peerURL: o.peerURL });
    await checkOperatorCa(o, ctx.reporter);
    const joined = await withDeadline(ctx, (signal) => join(ctx, signal));
    return await serveJoined(ctx, joined);
  } catch (e) {
    return await endRun(ctx, e);
  }
}

/** Ticket, queue, admission; back to the queue whenever the admission ends before the join did. */
async function join(ctx: AgentContext, signal: AbortSignal): Promise<JoinedMarker> {
  const { broker, files } = ctx;
  const pause = new Backoff(1_000, 15_000, ctx.random);
  let next = async () => (await broker.resumeTicket(files.ticket, signal)) ?? (await broker.requestTicket(signal));
  for (;;) {
    try {
      const joined = await turn(ctx, await next(), signal);
      if (joined) return joined;
    } catch (e) {
      if (!(e instanceof LeaseLost)) throw e;
      ctx.reporter.event("lease", `${e.message}; asking for a ticket again`, { state: e.state });
    }
    await sleep(pause.next(), signal);
    next = () => broker.requestTicket(signal);
  }
}

/** One ticket's way: its turn in the queue, then its admission; null when it ended without either (a new ticket is asked for). */
async function turn(ctx: AgentContext, first: TicketView, signal: AbortSignal): Promise<JoinedMarker | null> {
  let view = first;
  ctx.files.save({ ticket: view.ticket, role: view.role });
  if (view.state === "queued" || view.state === "admitted") await ctx.etcd.resumeOwn(view.role);
  if (view.state === "queued") view = await ctx.broker.waitInQueue(view, signal);
  switch (view.state) {
    case "admitted":
      return await admitted(ctx, view, signal);
    case "joined":
      return await alreadyJoined(ctx, view, signal);
    case "revoked":
      throw new AdmissionRevoked(
        `an admin revoked this node's admission${view.reason ? ` (${view.reason})` : ""}; to ask for a new place in the queue, run again with --retry-revoked`,
      );
    default:
      ctx.reporter.event("ticket", `ticket ${view.ticket} ${view.state}${view.reason ? ` (${view.reason})` : ""}; asking for a new one`, {
        state: view.state,
      });
      return null;
  }
}

/** Admitted: under a heartbeating lease, the role's steps (or the installer's, in gate mode). */
async function admitted(ctx: AgentContext, ticket: AdmittedTicket, outer: AbortSignal): Promise<JoinedMarker> {
  const r = ctx.reporter;
  r.event("admitted", `admitted as ${ticket.role}; lease until ${ticket.leaseExpiresAt}`, {
    ticket: ticket.ticket,
    role: ticket.role,
    jti: ticket.jti,
    leaseExpiresAt: ticket.leaseExpiresAt,
  });
  const lease = new LeaseKeeper(ctx.session, ticket.ticket, ticket.admission, ticket.leaseExpiresAt, ctx.random, {
    onTrouble: (m) => r.failure("broker", m),
    onHeartbeat: () => r.reachable("broker"),
  });
  lease.start();
  const admission: Admission = { ticket, signal: AbortSignal.any([outer, lease.signal]) };
  try {
    if (ticket.role === "bootstrap" && !ctx.gate) await bootstrapCertificates(ctx.options, r, ctx.keys, ctx.crl);
    if (ticket.role === "bootstrap") await checkNoClusterYet(ctx, admission.signal);
    if (ctx.gate) {
      const voter = await ctx.gate.admitted(
        admission,
        (memberID) => ctx.broker.reportStarted(admission, memberID),
        (memberID, detail) => ctx.broker.reportStuck(admission, memberID, detail),
      );
      await ctx.broker.complete(admission, voter.memberID);
      return ctx.files.writeMarker(ticket, voter.memberID, voter.clusterID);
    }
    return ticket.role === "bootstrap" ? await bootstrap(ctx, admission) : await joinAsLearner(ctx, admission);
  } finally {
    await lease.stop();
  }
}
