/**
 * Gate mode (`join-broker join … --exec 'COMMAND' --etcd URL[,URL…]`): the broker's queue in
 * front of an installer nobody taught about it (k0s, kubeadm, k3s; docs/installers.md).
 *
 * The agent takes its ticket and waits its turn as usual. Once admitted it runs COMMAND with the
 * broker's decision in its environment (`JOIN_BROKER_ROLE` bootstrap or join, the admission
 * token, …), heartbeats while COMMAND runs, and asks etcd itself, not COMMAND, whether the node
 * made it: the ticket completes once etcd lists a started voter with this node's peer URL.
 *
 * The installer adds its own member, so the broker cannot check that it waits its turn; what the
 * agent can do, it does: COMMAND runs only while this node holds the admission, a COMMAND left
 * running by a killed agent is stopped before anything else, and whenever this node gives up
 * its admission before being a voter (COMMAND failed, the lease ended, a revocation, --timeout),
 * COMMAND is stopped and the node's own member is removed from etcd if it is a learner or never
 * started (neither holds anything the cluster needs; a leftover learner would block the next
 * node's installer, etcd ≤ 3.5 allowing one), so that the next node can go. The same removal
 * runs first thing on every start of a node that has queued before and not joined: an attempt
 * cut short by a crash (agent and installer killed, the lease ended meanwhile) would otherwise
 * leave its learner in the way of every node admitted before this one's next turn. A voter is
 * never removed.
 *
 * An installer's own clean-up must not defeat that removal: `kubeadm reset -f` deletes
 * `/etc/kubernetes/pki`, where the recipe's `--etcd-cert` lives. So the agent keeps a copy of the
 * last working client certificate in its state dir and uses it while the files are gone. And
 * while its admission lives, the agent does not give it up before etcd has confirmed its member
 * gone: it keeps heartbeating and retrying (an unreachable etcd, a quorum being restored) until
 * the member is removed, the lease is lost, or an admin revokes the admission, for at most
 * `--removal-timeout`. An installer that added a *voter* and failed can leave a small cluster
 * without quorum, where etcd removes nothing: with `--rescue-etcd` the agent runs that member's
 * etcd itself until quorum is back, then removes it (quorum-rescue.ts). A member that still cannot
 * be removed in time is the operator's: the agent tells the broker (which ends the ticket and
 * pauses the cluster, so no node is admitted into a cluster that cannot take it), names the member
 * and the command that removes it, and exits 4; it never holds the queue for good.
 *
 * After a failed join attempt, once the member is gone (or given up on), `--cleanup` runs: what
 * the installer left would otherwise make its next run skip the join (k0s before 1.36 takes
 * `pki/ca.key` for "already joined" and starts a cluster of its own, k0s issue #5149).
 * @module
 */
import { join } from "node:path";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import { EtcdGateway, memberByPeerUrl, type EtcdMember } from "../../etcd/gateway.ts";
import { tlsFetch } from "../../etcd/tls-fetch.ts";
import type { Admission } from "../steps/admission.ts";
import type { Voter } from "../steps/member-runner.ts";
import { GaveUp, Refusal, Stopped } from "../core/errors.ts";
import { QuorumRescue, rescueFilesMissing } from "./quorum-rescue.ts";
import { ExecCommand, describeExit, stopLeftoverCommand } from "./exec-command.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { Reporter } from "../core/progress.ts";
import { Backoff, PeriodicNote, sleep, untilAborted } from "../core/retry.ts";
import type { StateDir } from "../files/state-files.ts";

/** How often etcd is asked while COMMAND runs. */
const POLL_MS = 500;
/** An installer that exited 0 gets this long for etcd to list its member as a started voter. */
const EXITED_OK_GRACE_MS = 60_000;
/** How often a start report the broker did not take is sent again. */
const REPORT_RETRY_MS = 5_000;
/** How long a signal's grace lasts before COMMAND's group gets SIGKILL. */
const STOP_GRACE_MS = 30_000;
/** Removal attempts when no admission is held (on start): the next node's turn is not this node's to hold. */
const REMOVAL_ATTEMPTS = 20;
/** Where the agent keeps its copy of etcd's client certificate, in its state dir. */
export const KEPT_ETCD_CLIENT_DIR = "etcd-client";

/** How long the clean-up command may take before it is given up on. */
const CLEANUP_TIMEOUT_MS = 60_000;

/**
 * The agent gave up its turn leaving a member in etcd that it could not remove within
 * --removal-timeout: the cluster needs an operator (exit 4).
 */
export class MemberStuck extends GaveUp {
  override readonly name = "MemberStuck";
  override readonly code = "ERR_MEMBER_STUCK";
}

/** What a removal found: the member gone (or never there), or a started voter (never removed). */
type Removal = { done: "absent" | "removed" | "voter" } | { problem: string; own: EtcdMember | null };

/** Tells the broker a member is left in etcd for an operator; true when it took note. */
export type ReportStuck = (memberID: string, detail: string) => Promise<boolean>;

/** COMMAND exited before the node was a voter: the agent leaves the queue and exits 4. */
export class CommandFailed extends GaveUp {
  override readonly name = "CommandFailed";
  override readonly code = "ERR_GATE_COMMAND_FAILED";
}

/** A node told to join is a voter of another cluster than the one it was to join: exit 3. */
export class SplitBrain extends Refusal {
  override readonly name = "SplitBrain";
  override readonly code = "ERR_SPLIT_BRAIN";
}

export class Gate {
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #dir: StateDir;
  readonly #etcd: EtcdGateway;
  readonly #command: string;
  /** COMMAND as messages name it: quoted, long ones shortened. */
  readonly #label: string;
  #running: ExecCommand | null = null;
  /** What was last reported about this node's member, so that each change is logged once. */
  #seen = "";
  /** The role the broker gave this node's current ticket. */
  #role: string | null = null;
  /** This node's member once etcd lists it started (it has a name), during the current admission. */
  #started: string | null = null;
  /** The etcd cluster ID of the first member list that showed other members than this node (decimal). */
  #cluster: string | null = null;
  /** The etcd this agent runs to restore quorum, while it does. */
  #rescue: QuorumRescue | null = null;

  constructor(options: AgentOptions, reporter: Reporter, dir: StateDir) {
    this.#o = options;
    this.#r = reporter;
    this.#dir = dir;
    this.#command = options.exec!;
    this.#label = `'${this.#command.length > 60 ? `${this.#command.slice(0, 59)}…` : this.#command}'`;
    const keep = {
      dir: join(dir.path, KEPT_ETCD_CLIENT_DIR),
      onStandIn: (missing: string) =>
        reporter.event(
          "etcd-exit",
          `${missing} is gone (an installer's clean-up?): etcd is asked with the copy of the client certificate kept in ${join(dir.path, KEPT_ETCD_CLIENT_DIR)}`,
        ),
    };
    this.#etcd = new EtcdGateway(options.etcdEndpoints, { timeoutMs: 3_000, ...(options.etcdTls ? { fetch: tlsFetch(options.etcdTls, keep) } : {}) });
  }

  /**
   * Before anything else: a COMMAND an earlier agent on this state dir left running is stopped,
   * and the learner or unstarted member an earlier join attempt left is removed.
   */
  async prepare(): Promise<void> {
    const stopped = await stopLeftoverCommand(this.#dir);
    if (stopped) this.#r.event("exec-exit", `stopped ${stopped}, left running by an earlier agent`);
    if (!this.#triedToJoinBefore()) return;
    const removal = await this.removeOwnNonVoter();
    // Only once etcd confirmed no member of this node's that is not a voter: a node that joined
    // (its agent killed before it noted so) keeps everything.
    if (removal === "absent" || removal === "removed") await this.#cleanup("an earlier join attempt did not finish");
  }

  /**
   * Whether an earlier agent on this state dir queued to join and the node has not joined. Only
   * then can a member of this node's be left over; a fresh node (whose cluster may not be up yet)
   * and a bootstrap node (never a learner) are not kept waiting on etcd here.
   */
  #triedToJoinBefore(): boolean {
    try {
      const state = this.#dir.readState();
      return !!state?.ticket && state.role !== "bootstrap" && !this.#dir.readMarker();
    } catch {
      return false; // unreadable state files: the agent refuses them next, with the reason
    }
  }

  /**
   * The admitted step: runs COMMAND (unless etcd already lists this node as a started voter) and
   * resolves once etcd does. COMMAND keeps running after that if it does not exit by itself.
   */
  async admitted(
    { ticket: view, signal }: Admission,
    reportStarted: (memberID: string) => Promise<boolean> = async () => true,
    reportStuck: ReportStuck = async () => false,
  ): Promise<Voter> {
    this.#role = view.role;
    this.#started = null;
    let reported = false;
    let nextReport = 0;
    try {
      const already = await this.findVoter();
      if (already) {
        this.#r.event("promoted", `etcd already lists this node as voter ${memberIdHex(already.memberID)}: not running the command again`, {
          memberID: already.memberID,
        });
        return already;
      }
      const command = this.#start({ role: view.role, admission: view.admission, ticket: view.ticket });
      let exitedOkAt: number | null = null;
      const note = new PeriodicNote();
      for (;;) {
        const voter = await this.findVoter();
        if (voter) return voter;
        // The member has a name now: the broker may admit the next node beside this one.
        // A refused report is asked again, but not at every poll.
        if (this.#started && !reported && performance.now() >= nextReport) {
          reported = await reportStarted(this.#started);
          nextReport = performance.now() + REPORT_RETRY_MS;
        }
        const exit = command.exit;
        if (exit && (exit.code !== 0 || exit.signal)) {
          throw new CommandFailed(`${this.#label} ${describeExit(exit)} before this node was a voter`);
        }
        if (exit) {
          exitedOkAt ??= performance.now();
          if (performance.now() - exitedOkAt > EXITED_OK_GRACE_MS) {
            throw new CommandFailed(
              `${this.#label} exited with status 0, but etcd (${this.#etcd.endpoints.join(", ")}) lists no started voter with peer URL ${this.#o.peerURL} ${EXITED_OK_GRACE_MS / 1000} s later`,
            );
          }
        }
        if (note.due()) {
          this.#r.retry(`waiting for etcd to list ${this.#o.peerURL} as a started voter (${this.#seen || "not a member yet"})`);
        }
        await Promise.race([sleep(POLL_MS, signal), command.exited]);
      }
    } catch (e) {
      await this.#giveUpAdmission(e, signal, reportStuck);
      throw e;
    }
  }

  /**
   * The admission ends here without a voter: stop COMMAND (passing a signal on), and free the way
   * for the next node. `admission` aborts when the admission is lost (lease, revocation) or the
   * agent is stopped; until then the removal is retried for as long as it takes.
   */
  async #giveUpAdmission(e: unknown, admission: AbortSignal, reportStuck: ReportStuck): Promise<void> {
    const command = this.#running;
    if (e instanceof Stopped) {
      // Stopped by a signal: the same signal for COMMAND. The ticket stays; run again to resume.
      if (command?.running) {
        this.#r.event("stopping", `passing ${e.signal} on to ${this.#label}`);
        await command.stop(e.signal, STOP_GRACE_MS);
      }
      return;
    }
    if (command?.running) this.#r.event("exec-exit", `stopping ${this.#label}: ${e instanceof Error ? e.message : String(e)}`);
    // Also what a failed COMMAND left in its process group: none of it is to be trusted now.
    await command?.stop("SIGTERM", STOP_GRACE_MS);
    const why = `${this.#label} ${describeExit(command?.exit ?? { code: null, signal: "SIGTERM" })} before this node was a voter`;
    let removal: Awaited<ReturnType<Gate["removeOwnNonVoter"]>>;
    try {
      removal = await this.removeOwnNonVoter(admission.aborted ? undefined : admission, reportStuck);
    } catch (stuck) {
      // Left to an operator, but a member that never was a voter: the installer starts afresh next time.
      if (this.#role === "join" && command) await this.#cleanup(why);
      throw stuck;
    }
    // Only once etcd confirmed no member of this node's: a node that became a voter meanwhile (its
    // installer failed after the promotion) keeps its data, and one etcd could not tell about
    // is cleaned up by the next start, once etcd can.
    if (this.#role === "join" && command && (removal === "absent" || removal === "removed")) await this.#cleanup(why);
  }

  /** Runs --cleanup (if given) and waits for it, at most a minute; its output goes to stderr. */
  async #cleanup(why: string): Promise<void> {
    const script = this.#o.cleanup;
    if (!script) return;
    this.#r.event("cleanup", `running the clean-up command (${why})`);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      JOIN_BROKER_CLUSTER: this.#o.cluster,
      JOIN_BROKER_NODE: this.#o.node,
      JOIN_BROKER_PEER_URL: this.#o.peerURL,
    };
    delete env.JOIN_BROKER_TOKEN;
    delete env.JOIN_BROKER_ADMIN_TOKEN;
    const cleanup = ExecCommand.start(script, this.#dir, env, { record: false });
    // The timer must not outlive the command: a pending one would keep the agent from exiting.
    const timer = new AbortController();
    const exit = await Promise.race([
      cleanup.exited,
      sleep(CLEANUP_TIMEOUT_MS, timer.signal).then(
        () => null,
        () => null,
      ),
    ]);
    timer.abort();
    if (!exit) {
      await cleanup.stop("SIGTERM", 5_000);
      this.#r.event(
        "error",
        `the clean-up command did not finish within ${CLEANUP_TIMEOUT_MS / 1000} s: stopped it; the installer's next run may find what it left`,
      );
    } else if (exit.code !== 0 || exit.signal)
      this.#r.event("error", `the clean-up command ${describeExit(exit)}; the installer's next run may find what it left`);
    else this.#r.event("cleanup", "the clean-up command finished");
  }

  /**
   * Removes this node's member from etcd if it is a learner or never started: after a failed or
   * abandoned attempt it would only block the next node's installer. Never a started voter
   * (unless it is the agent's own rescue of an unstarted one).
   *
   * Holding an admission (`heldUntil` not aborted), it tries until etcd confirms the member gone,
   * while the admission lives and for at most --removal-timeout; an unstarted voter that etcd
   * cannot remove gets its etcd run by the agent first (--rescue-etcd). Past the timeout the
   * member is the operator's: the broker is told (it pauses the cluster) and `MemberStuck` is
   * thrown. Without an admission, it tries a few times and says so when it could not.
   * Resolves with what etcd showed last: "absent", "removed", "voter", or "unknown".
   */
  async removeOwnNonVoter(heldUntil?: AbortSignal, reportStuck?: ReportStuck): Promise<"absent" | "removed" | "voter" | "unknown"> {
    const deadline = performance.now() + this.#o.removalTimeoutSeconds * 1000;
    const note = new PeriodicNote();
    // Held, it backs off to 5 s between tries; otherwise the few tries come half a second apart.
    const backoff = new Backoff(500, 5_000);
    let last: Extract<Removal, { problem: string }> | null = null;
    let rescueTried = false;
    try {
      for (let attempt = 0; heldUntil ? !heldUntil.aborted : attempt < REMOVAL_ATTEMPTS; attempt++) {
        const removal = await this.#removeOnce();
        if ("done" in removal) return removal.done;
        last = removal;
        // Once per attempt to give the admission up: an etcd that cannot run now will not later.
        if (heldUntil && removal.own && !removal.own.isLearner && !removal.own.started && !rescueTried) rescueTried = await this.#startRescue(removal.own);
        if (heldUntil && performance.now() >= deadline) await this.#stuck(removal, reportStuck);
        if (heldUntil && note.due()) {
          this.#r.event(
            "retry",
            `still holding this node's admission: its non-voting member must be gone from etcd before the next node goes (${removal.problem}); giving it up to an operator in ${Math.max(0, Math.round((deadline - performance.now()) / 1000))} s`,
          );
        } else this.#r.retry(removal.problem);
        await sleep(heldUntil ? Math.min(backoff.next(), Math.max(0, deadline - performance.now())) : 500, heldUntil).catch(() => undefined);
      }
    } finally {
      await this.#stopRescue();
    }
    const why = heldUntil ? "the admission ended before etcd confirmed it gone" : `etcd did not confirm it gone after ${REMOVAL_ATTEMPTS} attempts`;
    const own = last?.own ? ` ${memberIdHex(last.own.id)}` : "";
    this.#r.event(
      "error",
      `could not remove this node's non-voting member${own} from etcd (${this.#etcd.endpoints.join(", ")}): ${why}; remove it by hand (${this.#removeCommand(last?.own?.id)}) if it blocks the next node`,
    );
    return "unknown";
  }

  /**
   * The etcdctl command an operator runs to remove member `id` (hex), with this agent's endpoints
   * and TLS files; with --etcd-server-name (a certificate that names only that), against that
   * name, run on one of the other controllers.
   */
  #removeCommand(id: string | undefined): string {
    const tls = this.#o.etcdTls;
    const port = new URL(this.#etcd.endpoints[0]!).port || "2379";
    const endpoints = tls?.serverName
      ? `https://${tls.serverName.includes(":") ? `[${tls.serverName}]` : tls.serverName}:${port}`
      : this.#etcd.endpoints.join(",");
    const flags = [`--endpoints=${endpoints}`, ...(tls?.ca ? [`--cacert=${tls.ca}`] : []), ...(tls?.cert ? [`--cert=${tls.cert}`, `--key=${tls.key}`] : [])];
    const where = tls?.serverName ? ` on another controller (its etcd certificate names ${tls.serverName})` : "";
    return `etcdctl ${flags.join(" ")} member remove ${id ? memberIdHex(id) : "<member ID>"}${where}`;
  }

  /** Past --removal-timeout: the broker is told (it pauses the cluster), and the agent gives up. */
  async #stuck(removal: Extract<Removal, { problem: string }>, reportStuck?: ReportStuck): Promise<never> {
    const own = removal.own;
    const what = own
      ? `member ${memberIdHex(own.id)} (${own.isLearner ? "a learner" : "a voter"}, never started, peer URL ${this.#o.peerURL})`
      : `its member (peer URL ${this.#o.peerURL})`;
    const command = this.#removeCommand(own?.id);
    const detail = `could not remove ${what} from etcd within ${this.#o.removalTimeoutSeconds} s: ${removal.problem}. Remove it: ${command}`;
    const told = own && reportStuck ? await reportStuck(own.id, detail).catch(() => false) : false;
    throw new MemberStuck(
      `${detail}; then resume the cluster (join-broker admin resume --cluster ${this.#o.cluster}). ` +
        (told
          ? "The broker paused the cluster meanwhile, so that no node is admitted into it."
          : "The broker could not be told: pause the cluster (join-broker admin pause) until the member is gone."),
    );
  }

  /**
   * Runs the unstarted voter's etcd so that the cluster has its quorum back (--rescue-etcd).
   * False when it is to be tried again (etcd's member list could not be read for it).
   */
  async #startRescue(own: EtcdMember): Promise<boolean> {
    const files = this.#o.rescue;
    if (!files) return true;
    const missing = rescueFilesMissing(files);
    if (missing) {
      this.#r.event("rescue", `cannot run member ${memberIdHex(own.id)}'s etcd to restore quorum: ${missing}`);
      return true;
    }
    const list = await this.#etcd.memberList();
    if (!list.ok) return false;
    try {
      this.#rescue = await QuorumRescue.start(files, {
        name: this.#o.node,
        own,
        members: list.value.members,
        listenPeerURL: this.#o.listenPeerURL,
        dataDir: join(this.#dir.path, "rescue-etcd"),
        logFile: join(this.#dir.path, "rescue-etcd.log"),
      });
      this.#r.event(
        "rescue",
        `etcd cannot remove unstarted voter ${memberIdHex(own.id)} (a voter that never ran: a small cluster has no quorum without it): running its etcd (pid ${this.#rescue.process.pid}) until quorum is back, then removing it`,
        { memberID: own.id, pid: this.#rescue.process.pid },
      );
    } catch (e) {
      this.#r.event("rescue", `could not run member ${memberIdHex(own.id)}'s etcd to restore quorum: ${e instanceof Error ? e.message : String(e)}`);
    }
    return true;
  }

  async #stopRescue(): Promise<void> {
    const rescue = this.#rescue;
    this.#rescue = null;
    if (!rescue) return;
    await rescue.stop();
    this.#r.event("rescue", `stopped the etcd run to restore quorum (member ${memberIdHex(rescue.memberID)}) and deleted its data`);
  }

  /** One removal attempt. */
  async #removeOnce(): Promise<Removal> {
    const list = await this.#etcd.memberList();
    if (!list.ok) return { problem: `listing etcd's members to remove this node's: ${list.error.message}`, own: null };
    const own = this.#own(list.value.members);
    if (!own) {
      // A removal asked for while the cluster had no quorum takes effect once it has it again.
      if (this.#rescue)
        this.#r.event(
          "etcd-exit",
          `this node's member ${memberIdHex(this.#rescue.memberID)} is gone from etcd (removed once quorum was back), so that the next node can join`,
          { memberID: this.#rescue.memberID },
        );
      return { done: "absent" };
    }
    // A started voter is never removed, except the one the agent itself started to restore quorum.
    const rescued = this.#rescue?.memberID === own.id;
    if (own.started && !own.isLearner && !rescued) return { done: "voter" };
    if (rescued && !own.started) return { problem: `waiting for member ${memberIdHex(own.id)}'s etcd, run to restore quorum, to start`, own };
    const removed = await this.#etcd.memberRemove(own.id);
    if (removed.ok || removed.error.kind === "member_not_found") {
      const kind = rescued ? "member (run by this agent to restore quorum)" : own.isLearner ? "learner" : "unstarted member";
      this.#r.event("etcd-exit", `removed this node's ${kind} ${memberIdHex(own.id)} from etcd, so that the next node can join`, { memberID: own.id });
      return { done: "removed" };
    }
    return { problem: `removing this node's member ${memberIdHex(own.id)}: ${removed.error.message}`, own };
  }

  /** This node as a started voter in etcd's member list, or null (also when etcd cannot be reached). */
  async findVoter(): Promise<Voter | null> {
    const list = await this.#etcd.memberList();
    if (!list.ok) return null;
    const own = this.#own(list.value.members);
    const seen = !own
      ? ""
      : own.isLearner
        ? own.started
          ? "a started learner"
          : "a learner, not started"
        : own.started
          ? "a started voter"
          : "a voter, not started";
    if (own && seen !== this.#seen) {
      const fields = { memberID: own.id, learner: own.isLearner, started: own.started };
      if (!this.#seen) this.#r.event("member-added", `etcd lists this node as member ${memberIdHex(own.id)}: ${seen}`, fields);
      else if (own.isLearner || !own.started) this.#r.event("etcd-ready", `member ${memberIdHex(own.id)} is now ${seen}`, fields);
      if (!own.isLearner && own.started) this.#r.event("promoted", `a voter: member ${memberIdHex(own.id)}`, fields);
    }
    this.#seen = seen;
    if (own?.started) this.#started = own.id;
    const clusterID = list.value.header.clusterId;
    const others = list.value.members.filter((m) => m !== own);
    if (others.length > 0) this.#cluster ??= clusterID;
    if (!own || own.isLearner || !own.started) return null;
    // The failure the broker exists to prevent (k0s issue #5149): an installer that decided on
    // its own to start a new cluster. Never report that as a join.
    if (this.#role === "join" && others.length === 0) {
      throw new SplitBrain(
        `the broker told this node to join, but etcd at ${list.endpoint} lists it as the only member of cluster ${memberIdHex(clusterID)}: ` +
          `its installer started a new cluster of its own (split brain). Stop it, remove its etcd data, and run this command again with a recipe that joins when JOIN_BROKER_ROLE=join.`,
      );
    }
    if (this.#cluster && clusterID !== this.#cluster) {
      throw new SplitBrain(
        `etcd at ${list.endpoint} lists this node as a voter of cluster ${memberIdHex(clusterID)}, but the cluster it was to join is ${memberIdHex(this.#cluster)} (split brain). ` +
          `Stop its installer, remove its etcd data, and run this command again.`,
      );
    }
    return { memberID: own.id, clusterID };
  }

  #own(members: readonly EtcdMember[]): EtcdMember | undefined {
    return memberByPeerUrl(members, this.#o.peerURL);
  }

  #start(context: { role: string; admission?: string; ticket: string }): ExecCommand {
    const env: NodeJS.ProcessEnv = { ...process.env };
    // The enrollment token is the agent's, not the installer's.
    delete env.JOIN_BROKER_TOKEN;
    delete env.JOIN_BROKER_ADMIN_TOKEN;
    Object.assign(env, {
      JOIN_BROKER_ROLE: context.role,
      // With the cluster, what a join API started by COMMAND needs to check admissions (k0s's, patched: integrations/k0s).
      JOIN_BROKER_URL: this.#o.brokerUrl,
      JOIN_BROKER_CLUSTER: this.#o.cluster,
      JOIN_BROKER_NODE: this.#o.node,
      JOIN_BROKER_PEER_URL: this.#o.peerURL,
      JOIN_BROKER_TICKET: context.ticket,
    });
    if (this.#o.joinApiUrl) env.JOIN_BROKER_JOIN_API = this.#o.joinApiUrl;
    else delete env.JOIN_BROKER_JOIN_API;
    if (context.admission) env.JOIN_BROKER_ADMISSION = context.admission;
    else delete env.JOIN_BROKER_ADMISSION;
    const command = ExecCommand.start(this.#command, this.#dir, env);
    this.#running = command;
    this.#r.event("exec", `running ${this.#label} as ${context.role} (pid ${command.pid ?? "?"})`, { role: context.role, pid: command.pid });
    void command.exited.then((exit) => this.#r.event("exec-exit", `${this.#label} ${describeExit(exit)}`, { code: exit.code, signal: exit.signal }));
    return command;
  }

  /**
   * After the join was recorded (and the `joined cluster` line printed): COMMAND still running is
   * supervised until it exits or a signal comes (passed on to it). With --service, a COMMAND that
   * is not running (the node had joined before this run) is started again first.
   */
  async serve(stop: AbortSignal, context: { role: string; ticket: string }): Promise<{ code: "ok" | "gave-up"; message?: string }> {
    let command = this.#running;
    if (command && !command.running) {
      const exit = command.exit!;
      if (exit.code === 0 && !exit.signal) return { code: "ok" };
      return { code: "gave-up", message: `${this.#label} ${describeExit(exit)} (this node is a voter all the same)` };
    }
    if (!command) {
      if (!this.#o.service) return { code: "ok" };
      command = this.#start({ role: context.role, ticket: context.ticket });
    }
    this.#r.event("running", `supervising ${this.#label} (pid ${command.pid ?? "?"}) until it exits or a signal stops it`, { pid: command.pid });
    const outcome = await Promise.race([untilAborted(stop), command.exited]);
    if (outcome === "stop") {
      const signal = stop.reason instanceof Stopped ? stop.reason.signal : "SIGTERM";
      this.#r.event("stopping", `passing ${signal} on to ${this.#label}`);
      await command.stop(signal, STOP_GRACE_MS);
      return { code: "ok" };
    }
    if (outcome.code === 0 && !outcome.signal) return { code: "ok" };
    return { code: "gave-up", message: `${this.#label} ${describeExit(outcome)}` };
  }

  /** Whether COMMAND runs now. */
  get commandRunning(): boolean {
    return this.#running?.running ?? false;
  }

  /** Stops COMMAND if it runs (an unexpected failure of the agent). */
  async stopCommand(): Promise<void> {
    if (this.#running?.running) await this.#running.stop("SIGTERM", STOP_GRACE_MS);
  }
}
