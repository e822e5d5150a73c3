/**
 * Gate mode (`join-broker join … --exec 'COMMAND' --etcd URL[,URL…]`): the broker's queue in
 * front of an installer nobody taught about it (k0s, kubeadm, k3s; docs/installers.md).
 *
 * The agent takes its ticket and waits its turn as usual. Once admitted it runs COMMAND with the
 * broker's decision in its environment (`JOIN_BROKER_ROLE` bootstrap or join, the admission
 * token, …), heartbeats while COMMAND runs, and asks etcd itself, not COMMAND, whether the node
 * made it: the ticket completes once etcd lists a started voter with this node's peer URL
 * (own-member.ts).
 *
 * The installer adds its own member, so the broker cannot check that it waits its turn; what the
 * agent can do, it does: COMMAND runs only while this node holds the admission, a COMMAND left
 * running by a killed agent is stopped before anything else, and whenever this node gives up
 * its admission before being a voter (COMMAND failed, the lease ended, a revocation, --timeout),
 * COMMAND is stopped and the node's own member is removed from etcd if it is a learner or never
 * started (member-removal.ts: neither holds anything the cluster needs; a leftover learner would
 * block the next node's installer, etcd ≤ 3.5 allowing one), so that the next node can go. The
 * same removal runs first thing on every start of a node that has queued before and not joined:
 * an attempt cut short by a crash would otherwise leave its learner in the way of every node
 * admitted before this one's next turn. A voter is never removed.
 *
 * After a failed join attempt, once the member is gone (or given up on), `--cleanup` runs: what
 * the installer left would otherwise make its next run skip the join (k0s before 1.36 takes
 * `pki/ca.key` for "already joined" and starts a cluster of its own, k0s issue #5149).
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { Stopped } from "../core/errors.ts";
import type { Reporter } from "../core/progress.ts";
import { PeriodicNote, sleep, untilAborted } from "../core/retry.ts";
import type { StateDir } from "../files/state-files.ts";
import type { Admission } from "../steps/admission.ts";
import type { Voter } from "../steps/member-runner.ts";
import { ExecCommand, describeExit, stopLeftoverCommand } from "./exec-command.ts";
import { CommandFailed } from "./gate-errors.ts";
import { MemberRemoval, type ReportStuck } from "./member-removal.ts";
import { OwnMember } from "./own-member.ts";

/** Gate mode's waits, in milliseconds. */
const WAIT_MS = {
  /** How often etcd is asked while COMMAND runs. */
  poll: 500,
  /** An installer that exited 0 gets this long for etcd to list its member as a started voter. */
  exitedOkGrace: 60_000,
  /** How often a start report the broker did not take is sent again. */
  reportRetry: 5_000,
  /** How long a signal's grace lasts before COMMAND's group gets SIGKILL. */
  stopGrace: 30_000,
  /** How long the clean-up command may take before it is given up on. */
  cleanup: 60_000,
} as const;

export class Gate {
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #dir: StateDir;
  readonly #member: OwnMember;
  readonly #removal: MemberRemoval;
  readonly #command: string;
  /** COMMAND as messages name it: quoted, long ones shortened. */
  readonly #label: string;
  #running: ExecCommand | null = null;

  constructor(options: AgentOptions, reporter: Reporter, dir: StateDir) {
    this.#o = options;
    this.#r = reporter;
    this.#dir = dir;
    this.#command = options.exec!;
    this.#label = `'${this.#command.length > 60 ? `${this.#command.slice(0, 59)}…` : this.#command}'`;
    this.#member = new OwnMember(options, reporter, dir);
    this.#removal = new MemberRemoval(options, reporter, dir, this.#member);
  }

  /**
   * Before anything else: a COMMAND an earlier agent on this state dir left running is stopped,
   * and the learner or unstarted member an earlier join attempt left is removed.
   */
  async prepare(): Promise<void> {
    const stopped = await stopLeftoverCommand(this.#dir);
    if (stopped) this.#r.event("exec-exit", `stopped ${stopped}, left running by an earlier agent`);
    if (!this.#triedToJoinBefore()) return;
    const removal = await this.#removal.removeOwnNonVoter();
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
    this.#member.role = view.role;
    this.#member.started = null;
    let reported = false;
    let nextReport = 0;
    try {
      const already = await this.#member.findVoter();
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
        const voter = await this.#member.findVoter();
        if (voter) return voter;
        // The member's etcd runs now (own-member.ts): the broker may admit the next node beside this one.
        // A refused report is asked again, but not at every poll.
        if (this.#member.started && !reported && performance.now() >= nextReport) {
          reported = await reportStarted(this.#member.started);
          nextReport = performance.now() + WAIT_MS.reportRetry;
        }
        const exit = command.exit;
        if (exit && (exit.code !== 0 || exit.signal)) {
          throw new CommandFailed(`${this.#label} ${describeExit(exit)} before this node was a voter`);
        }
        if (exit) {
          exitedOkAt ??= performance.now();
          if (performance.now() - exitedOkAt > WAIT_MS.exitedOkGrace) {
            throw new CommandFailed(
              `${this.#label} exited with status 0, but etcd (${this.#member.etcd.endpoints.join(", ")}) lists no started voter with peer URL ${this.#o.peerURL} ${WAIT_MS.exitedOkGrace / 1000} s later`,
            );
          }
        }
        if (note.due()) {
          this.#r.retry(`waiting for etcd to list ${this.#o.peerURL} as a started voter (${this.#member.seen || "not a member yet"})`);
        }
        await Promise.race([sleep(WAIT_MS.poll, signal), command.exited]);
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
        await command.stop(e.signal, WAIT_MS.stopGrace);
      }
      return;
    }
    if (command?.running) this.#r.event("exec-exit", `stopping ${this.#label}: ${e instanceof Error ? e.message : String(e)}`);
    // Also what a failed COMMAND left in its process group: none of it is to be trusted now.
    await command?.stop("SIGTERM", WAIT_MS.stopGrace);
    const why = `${this.#label} ${describeExit(command?.exit ?? { code: null, signal: "SIGTERM" })} before this node was a voter`;
    let removal: Awaited<ReturnType<MemberRemoval["removeOwnNonVoter"]>>;
    try {
      removal = await this.#removal.removeOwnNonVoter(admission.aborted ? undefined : admission, reportStuck);
    } catch (stuck) {
      // Left to an operator, but a member that never was a voter: the installer starts afresh next time.
      if (this.#member.role === "join" && command) await this.#cleanup(why);
      throw stuck;
    }
    // Only once etcd confirmed no member of this node's: a node that became a voter meanwhile (its
    // installer failed after the promotion) keeps its data, and one etcd could not tell about
    // is cleaned up by the next start, once etcd can.
    if (this.#member.role === "join" && command && (removal === "absent" || removal === "removed")) await this.#cleanup(why);
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
      sleep(WAIT_MS.cleanup, timer.signal).then(
        () => null,
        () => null,
      ),
    ]);
    timer.abort();
    if (!exit) {
      await cleanup.stop("SIGTERM", 5_000);
      this.#r.event(
        "error",
        `the clean-up command did not finish within ${WAIT_MS.cleanup / 1000} s: stopped it; the installer's next run may find what it left`,
      );
    } else if (exit.code !== 0 || exit.signal)
      this.#r.event("error", `the clean-up command ${describeExit(exit)}; the installer's next run may find what it left`);
    else this.#r.event("cleanup", "the clean-up command finished");
  }

  /** This node as a started voter in etcd's member list, or null (also when etcd cannot be reached). */
  findVoter(): Promise<Voter | null> {
    return this.#member.findVoter();
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
      await command.stop(signal, WAIT_MS.stopGrace);
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
    if (this.#running?.running) await this.#running.stop("SIGTERM", WAIT_MS.stopGrace);
  }
}
