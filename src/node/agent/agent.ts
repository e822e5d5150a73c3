/**
 * The node agent: the join as a short list of steps, each safe to crash at. Run the same
 * command again and it resumes from what the broker, etcd and the state dir say.
 *
 *   marker? ──yes──▶ (start etcd on its data) ▶ joined                          steps/joined-steps.ts
 *     │no
 *   ticket (idempotent POST) ▶ queued (long polls) ▶ admitted                   steps/broker-steps.ts
 *     admitted ─┬─ role bootstrap ▶ etcd `new` ▶ healthy ──────────────┐        own-etcd/bootstrap-step.ts
 *               ├─ role join ▶ learner add ▶ etcd `existing` ▶ promote ┤        own-etcd/learner-step.ts
 *               └─ gate mode ▶ the installer ▶ etcd lists a voter ─────┤        gate/installer-runner.ts
 *     complete ◀───────────────────────────────────────────────────────┘
 *     ▶ marker ▶ joined (supervise etcd, or the installer's command)            steps/joined-steps.ts
 *   anything else ▶ an exit code, the turn given up                             steps/ending.ts
 *
 * Which of the two makes the node a member is the mode's `MemberRunner` (steps/member-runner.ts):
 * the agent's own etcd (own-etcd/) or, in gate mode, an installer (gate/).
 *
 * The broker alone decides between bootstrap and join; local files never do. etcd is started
 * with `--initial-cluster-state new` only for the broker's bootstrap ticket, and a data dir this
 * agent did not fill for this cluster is never started (files/data-dir-rules.ts). While admitted, a
 * lease keeper heartbeats; if the broker ends the admission the current step stops: a
 * revocation refuses (exit 3), an expiry goes back to the queue.
 *
 * A learner whose admission ended may be removed from etcd meanwhile (the join API makes room
 * for the next node). Its data can never serve again, so a node that never was a voter moves it
 * aside and starts fresh once it is added anew; a voter's or a bootstrap node's data is never moved,
 * except bootstrap data raft never wrote to (etcd killed within its first start): it holds nothing,
 * and etcd would never elect a leader on it (files/data-dir-rules.ts `unwrittenBootstrap`).
 * @module
 */
import { NodeSession } from "../../shared/client/node-session.ts";
import type { AdmittedTicket, TicketView } from "../../shared/protocol/wire.ts";
import { nodeFetch } from "../etcd/tls-fetch.ts";
import { UsageError } from "../exit-codes.ts";
import type { Admission } from "./steps/admission.ts";
import { withDeadline, type AgentContext } from "./steps/agent-context.ts";
import type { AgentOptions } from "./core/agent-options.ts";
import { BrokerSteps } from "./steps/broker-steps.ts";
import { endRun } from "./steps/ending.ts";
import { installerMode } from "./gate/installer-runner.ts";
import { alreadyJoined, resumeJoined, serveJoined } from "./steps/joined-steps.ts";
import { AdmissionRevoked, LeaseKeeper, LeaseLost } from "./core/lease.ts";
import type { MemberRunner } from "./steps/member-runner.ts";
import { NodeFiles } from "./files/node-files.ts";
import { ownEtcdMode } from "./own-etcd/own-etcd-runner.ts";
import type { Reporter } from "./core/progress.ts";
import { Backoff, sleep, type Random } from "./core/retry.ts";
import { StateDir, type JoinedMarker } from "./files/state-files.ts";

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
  // The one place the mode is decided: an installer's (--exec) or the agent's own etcd.
  const mode = options.exec ? installerMode : ownEtcdMode;
  const ctx = agentContext(options, deps, dir, mode.exclusiveUntilStarted);
  const runner = mode.runner(ctx);
  try {
    return await run(ctx, runner);
  } finally {
    runner.close();
    dir.unlock();
    deps.reporter.close();
  }
}

/** The parts of one run, made once, that every step works with. */
function agentContext(options: AgentOptions, deps: AgentDeps, dir: StateDir, exclusiveUntilStarted: boolean): AgentContext {
  const { reporter, print } = deps;
  const random = deps.random ?? Math.random;
  // Its own fetch over node:http, and the node session alone rather than the whole broker client
  // (its input schemas): a process that starts on every controller at once loads neither undici
  // nor zod (--cluster is checked with the command line).
  const session = new NodeSession(options.brokerUrl, options.cluster, options.token, undefined, nodeFetch());
  const files = new NodeFiles(options, dir);
  const broker = new BrokerSteps(session, options, reporter, random, exclusiveUntilStarted);
  return { options, reporter, files, session, broker, random, stop: deps.stop, print };
}

async function run(ctx: AgentContext, runner: MemberRunner): Promise<number> {
  try {
    await runner.prepare();
    ctx.files.load();
    const marker = ctx.files.dir.readMarker();
    if (marker) return await resumeJoined(ctx, runner, marker);
    const o = ctx.options;
    ctx.reporter.event("start", `joining cluster ${o.cluster} through ${o.brokerUrl} as ${o.node} (${o.peerURL})`, { cluster: o.cluster, peerURL: o.peerURL });
    await runner.beforeQueue();
    const joined = await withDeadline(ctx, (signal) => join(ctx, runner, signal));
    return await serveJoined(ctx, runner, joined);
  } catch (e) {
    return await endRun(ctx, runner, e);
  }
}

/** Ticket, queue, admission; back to the queue whenever the admission ends before the join did. */
async function join(ctx: AgentContext, runner: MemberRunner, signal: AbortSignal): Promise<JoinedMarker> {
  const { broker, files } = ctx;
  const pause = new Backoff(1_000, 15_000, ctx.random);
  let next = async () => (await broker.resumeTicket(files.ticket, signal)) ?? (await broker.requestTicket(signal));
  for (;;) {
    try {
      const joined = await turn(ctx, runner, await next(), signal);
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
async function turn(ctx: AgentContext, runner: MemberRunner, first: TicketView, signal: AbortSignal): Promise<JoinedMarker | null> {
  let view = first;
  ctx.files.save({ ticket: view.ticket, role: view.role });
  if (view.state === "queued" || view.state === "admitted") await runner.resume(view.role);
  if (view.state === "queued") view = await ctx.broker.waitInQueue(view, signal);
  switch (view.state) {
    case "admitted":
      return await admitted(ctx, runner, view, signal);
    case "joined":
      return await alreadyJoined(ctx, runner, view, signal);
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

/** Admitted: under a heartbeating lease, the runner makes the node a voter; the broker hears it, and the marker is written. */
async function admitted(ctx: AgentContext, runner: MemberRunner, ticket: AdmittedTicket, outer: AbortSignal): Promise<JoinedMarker> {
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
    const voter = await runner.admitted(admission);
    await ctx.broker.complete(admission, voter.memberID);
    return ctx.files.writeMarker(ticket, voter.memberID, voter.clusterID);
  } finally {
    await lease.stop();
  }
}
