/**
 * Removing this node's own member from etcd after a failed or abandoned gate-mode attempt, when it
 * is a learner or never started: it would only block the next node's installer. A started voter
 * is never removed.
 *
 * While its admission lives, the agent does not give it up before etcd has confirmed its member
 * gone: it keeps heartbeating and retrying (an unreachable etcd, a quorum being restored) until
 * the member is removed, the lease is lost, or an admin revokes the admission, for at most
 * `--removal-timeout`. An installer that added a *voter* and failed can leave a small cluster
 * without quorum, where etcd removes nothing: with `--rescue-etcd` the agent runs that member's
 * etcd itself until quorum is back, then removes it (quorum-rescue.ts). A member that still cannot
 * be removed in time is the operator's: the agent tells the broker (which ends the ticket and
 * pauses the cluster), names the member and the command that removes it, and exits 4.
 * @module
 */
import { join } from "node:path";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { EtcdMember } from "../../etcd/gateway.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { Reporter } from "../core/progress.ts";
import { Backoff, PeriodicNote, sleep } from "../core/retry.ts";
import type { StateDir } from "../files/state-files.ts";
import { MemberStuck } from "./gate-errors.ts";
import type { OwnMember } from "./own-member.ts";
import { QuorumRescue, rescueFilesMissing } from "./quorum-rescue.ts";

/** Removal attempts when no admission is held (on start): the next node's turn is not this node's to hold. */
const REMOVAL_ATTEMPTS = 20;

/** What a removal found: the member gone (or never there), or a started voter (never removed). */
type Removal = { done: "absent" | "removed" | "voter" } | { problem: string; own: EtcdMember | null };

/** Tells the broker a member is left in etcd for an operator; true when it took note. */
export type ReportStuck = (memberID: string, detail: string) => Promise<boolean>;

export class MemberRemoval {
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #dir: StateDir;
  readonly #member: OwnMember;
  /** The etcd this agent runs to restore quorum, while it does. */
  #rescue: QuorumRescue | null = null;

  constructor(options: AgentOptions, reporter: Reporter, dir: StateDir, member: OwnMember) {
    this.#o = options;
    this.#r = reporter;
    this.#dir = dir;
    this.#member = member;
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
      `could not remove this node's non-voting member${own} from etcd (${this.#member.etcd.endpoints.join(", ")}): ${why}; remove it by hand (${this.#removeCommand(last?.own?.id)}) if it blocks the next node`,
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
    const port = new URL(this.#member.etcd.endpoints[0]!).port || "2379";
    const endpoints = tls?.serverName
      ? `https://${tls.serverName.includes(":") ? `[${tls.serverName}]` : tls.serverName}:${port}`
      : this.#member.etcd.endpoints.join(",");
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
    const list = await this.#member.etcd.memberList();
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
    const list = await this.#member.etcd.memberList();
    if (!list.ok) return { problem: `listing etcd's members to remove this node's: ${list.error.message}`, own: null };
    const own = this.#member.own(list.value.members);
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
    const removed = await this.#member.etcd.memberRemove(own.id);
    if (removed.ok || removed.error.kind === "member_not_found") {
      const kind = rescued ? "member (run by this agent to restore quorum)" : own.isLearner ? "learner" : "unstarted member";
      this.#r.event("etcd-exit", `removed this node's ${kind} ${memberIdHex(own.id)} from etcd, so that the next node can join`, { memberID: own.id });
      return { done: "removed" };
    }
    return { problem: `removing this node's member ${memberIdHex(own.id)}: ${removed.error.message}`, own };
  }
}
