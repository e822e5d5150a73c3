/**
 * Own etcd, the agent's default mode: it makes the node a member itself. The bootstrap node starts
 * etcd with `--initial-cluster-state new` (bootstrap-step.ts); every other node is added as a
 * learner through the join API and promoted (learner-step.ts). With --etcd-bin the agent runs
 * etcd and supervises it once joined; without it, another supervisor starts etcd with the flags
 * the agent writes. With --pki-dir, etcd is on TLS with this node's own keys and certificates.
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { EndedTicket, Role } from "../../../shared/protocol/wire.ts";
import { nodeFetch } from "../../etcd/tls-fetch.ts";
import { EXIT } from "../../exit-codes.ts";
import type { Admission } from "../steps/admission.ts";
import { withDeadline, type AgentContext } from "../steps/agent-context.ts";
import { bootstrap } from "./bootstrap-step.ts";
import { markerWithoutDataMessage } from "../files/data-dir-messages.ts";
import { decideDataDir } from "../files/data-dir-rules.ts";
import { Refusal } from "../core/errors.ts";
import { checkNoClusterYet } from "../steps/existing-cluster.ts";
import { JoinApiClient } from "./join-api-client.ts";
import { JoinApiSteps } from "./join-api-steps.ts";
import { joinAsLearner } from "./learner-step.ts";
import { LocalEtcd } from "../local-etcd/local-etcd.ts";
import type { MemberRunner, RunnerMode, Voter } from "../steps/member-runner.ts";
import type { OwnEtcdContext } from "./own-etcd-context.ts";
import { bootstrapCertificates, checkOperatorCa, NodeKeys } from "../local-etcd/node-certificates.ts";
import { untilAborted } from "../core/retry.ts";
import { RevocationListKeeper } from "../local-etcd/revocation-list.ts";
import { hasEtcdData, type JoinedMarker } from "../files/state-files.ts";

export const ownEtcdMode: RunnerMode = { exclusiveUntilStarted: false, runner: (ctx) => new OwnEtcdRunner(ctx) };

export class OwnEtcdRunner implements MemberRunner {
  readonly #ctx: OwnEtcdContext;

  constructor(ctx: AgentContext) {
    const { options, reporter, files } = ctx;
    const crl = options.pkiDir ? new RevocationListKeeper(options.pkiDir, options.joinApiUrl, reporter) : null;
    const etcd = new LocalEtcd(options, reporter, files.dir, {
      owned: () => files.owned,
      saveOwned: (owned) => files.save({ etcd: owned }),
      disk: () => files.disk(),
      refusal: (rule, role, why) => files.refusal(rule, role, why),
      print: (line) => ctx.print(line),
      // From etcd's first start on, the list it reads is kept current while the agent runs.
      started: () => crl?.start(),
      beforeStart: async () => crl?.ensurePlaceholder(),
    });
    const keys = new NodeKeys(options);
    const client = new JoinApiClient(options.joinApiUrl, undefined, nodeFetch());
    const joinApi = new JoinApiSteps(client, ctx.broker, ctx.session, etcd, options, reporter, ctx.random, keys);
    this.#ctx = { ...ctx, etcd, joinApi, keys, crl };
  }

  async prepare(): Promise<void> {
    // Ask etcd its version (a process start) while the broker is asked for the ticket, not after.
    void this.#ctx.etcd.know();
  }

  async beforeQueue(): Promise<void> {
    const { options, reporter, keys } = this.#ctx;
    // Either role needs fresh etcd keys on TLS: made while the broker is asked and the queue waited in.
    if (options.pkiDir) keys.prepare();
    await checkOperatorCa(options, reporter);
  }

  resume(role: Role): Promise<void> {
    return this.#ctx.etcd.resumeOwn(role);
  }

  async admitted(admission: Admission): Promise<Voter> {
    const ctx = this.#ctx;
    if (admission.ticket.role === "join") return joinAsLearner(ctx, admission);
    await bootstrapCertificates(ctx.options, ctx.reporter, ctx.keys, ctx.crl);
    await checkNoClusterYet(ctx, admission.signal);
    return bootstrap(ctx, admission);
  }

  /** Its etcd runs again on its data, as a voter, never on none. */
  async alreadyJoined(ticket: EndedTicket, signal: AbortSignal): Promise<Voter> {
    const { options, files, etcd, reporter } = this.#ctx;
    const { node, cluster, dataDir, peerURL } = options;
    const decision = decideDataDir(files.disk(), { kind: "joined", cluster });
    if (decision.action === "refuse" && decision.rule === "joined_without_data")
      throw new Refusal(files.refusal(decision.rule, ticket.role, ticket.memberID ? memberIdHex(ticket.memberID) : ""));
    reporter.event("ticket", `the broker says this node already joined; its etcd data is in ${dataDir}`, { memberID: ticket.memberID });
    if (!files.owned)
      etcd.record({ role: ticket.role, ticket: ticket.ticket, initialCluster: [`${node}=${peerURL}`], initialClusterState: "existing", voter: true });
    etcd.markVoter();
    await etcd.start(signal);
    const status = await etcd.wait("serving", signal, ticket.memberID ? { kind: "member", memberID: ticket.memberID, per: "the broker says so" } : undefined);
    return { memberID: status.header.memberId, clusterID: status.header.clusterId };
  }

  /** Without --etcd-bin there is nothing more to do; with it, etcd starts on its data. */
  async resumeJoined(marker: JoinedMarker): Promise<JoinedMarker> {
    const ctx = this.#ctx;
    const { options: o, files, etcd } = ctx;
    if (!etcd.supervisor) return marker;
    if (!hasEtcdData(o.dataDir)) throw new Refusal(markerWithoutDataMessage(files.where(), memberIdHex(marker.memberID)));
    ctx.reporter.event("start", `already joined cluster ${marker.clusterID ?? "?"} as ${marker.role}: starting etcd on its data`);
    if (!files.owned)
      etcd.record({ role: marker.role, ticket: marker.ticket, initialCluster: [`${o.node}=${o.peerURL}`], initialClusterState: "existing", voter: true });
    etcd.markVoter();
    const status = await withDeadline(ctx, async (signal) => {
      await etcd.start(signal);
      return etcd.wait("serving", signal, marker.memberID ? { kind: "member", memberID: marker.memberID, per: `per ${files.dir.markerPath}` } : undefined);
    });
    const clusterID = memberIdHex(status.header.clusterId);
    if (marker.clusterID && clusterID !== marker.clusterID) {
      ctx.reporter.event("error", `etcd reports cluster ${clusterID}, but the marker says ${marker.clusterID}`);
    }
    return { ...marker, clusterID };
  }

  /** With --etcd-bin: supervises etcd until a signal. */
  async serve(): Promise<number> {
    const { etcd, reporter: r, stop } = this.#ctx;
    const supervisor = etcd.supervisor;
    if (!supervisor) return EXIT.ok;
    r.event("running", `supervising etcd (pid ${supervisor.pid ?? "?"}) until stopped`, { pid: supervisor.pid });
    const outcome = await Promise.race([untilAborted(stop), supervisor.failed]);
    if (outcome === "stop") {
      r.event("stopping", "stopping etcd");
      await supervisor.stop();
      return EXIT.ok;
    }
    r.event("gave-up", etcd.withLogTail(outcome));
    return EXIT.gaveUp;
  }

  stopping(): string {
    // Only what this agent runs is stopped; a node still queued runs nothing.
    return this.#ctx.etcd.supervisor?.running ? "; stopping etcd" : "";
  }

  async stop(): Promise<void> {
    await this.#ctx.etcd.supervisor?.stop();
  }

  async giveUp(): Promise<string> {
    const { etcd, options } = this.#ctx;
    if (!etcd.supervisor) return "";
    if (!etcd.supervisor.running) {
      // Between restarts: no restart may follow the agent's last word.
      await etcd.supervisor.stop();
      return "";
    }
    const s = etcd.foreignAnswered ? null : await etcd.gateway.status(options.clientURL);
    if (s?.ok && !s.value.isLearner) {
      etcd.supervisor.release();
      return ` etcd (pid ${etcd.supervisor.pid}) is a voting member and keeps running; stop it only after removing the member from the cluster, or run this command again.`;
    }
    await etcd.supervisor.stop();
    return "";
  }

  close(): void {
    this.#ctx.crl?.stop();
  }
}
