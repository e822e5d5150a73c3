/**
 * The agent's files in `--state-dir`, each written atomically (temp file, fsync, rename, fsync of
 * the directory) so that a crash at any instant leaves either the old or the new content:
 *
 * - `joined.json`: the marker, written only after the broker recorded the join as complete.
 * - `agent-state.json`: progress (ticket, role, whether this agent already started etcd on the
 *   data dir, for which member, and whether that member ever was a voter). It never decides
 *   between bootstrap and join; the broker does.
 * - `agent.pid`: the running agent, so that two agents never drive the same node.
 * - `etcd.pid`: the etcd this agent started, so that a restarted agent can stop one left running.
 * @module
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Role } from "../../../shared/protocol/wire.ts";
import { DirLock } from "../../dir-lock.ts";
import { writeFileAtomic } from "../../atomic-file.ts";

export interface JoinedMarker {
  version: 1;
  cluster: string;
  node: string;
  peerURL: string;
  role: Role;
  /** The etcd member ID as reported to the broker (decimal, as etcd's JSON gateway spells it). */
  memberID: string;
  /** The same in hex, as etcd logs and etcdctl print it (absent from markers of older agents). */
  memberIDHex?: string;
  /** etcd's cluster ID in hex, as etcd logs and etcdctl print it; null when it could not be read. */
  clusterID: string | null;
  ticket: string;
  joinedAt: string;
}

/** What this agent did to the etcd data dir. Written before etcd is first started; later only `voter` is added. */
export interface EtcdOwnership {
  cluster: string;
  node: string;
  role: Role;
  ticket: string;
  initialCluster: string[];
  initialClusterState: "new" | "existing";
  /** The member the join API added for this data dir (decimal). */
  memberID?: string;
  /**
   * Set once etcd reported this member a voter (or the join API promoted it). From then on the
   * data dir is never moved aside automatically, whatever happens to the member.
   */
  voter?: boolean;
  /**
   * Learners etcd must allow at once (`--max-learners`): the cluster's maxInFlight as the broker
   * reported it at admission. Kept so that every later start of this member uses the same
   * number: etcd 3.6+ checks the learner count against it on every member, at start and at
   * every membership change.
   */
  maxLearners?: number;
  at: string;
}

export interface AgentState {
  version: 1;
  cluster: string;
  node: string;
  peerURL: string;
  ticket?: string;
  role?: Role;
  etcd?: EtcdOwnership;
  updatedAt: string;
}

export class StateDir {
  constructor(readonly path: string) {
    mkdirSync(path, { recursive: true, mode: 0o700 });
    this.#lock = new DirLock(this.lockPath, (pid) => new StateDirLocked(this.path, pid));
  }

  get markerPath(): string {
    return join(this.path, "joined.json");
  }
  get statePath(): string {
    return join(this.path, "agent-state.json");
  }
  get etcdPidPath(): string {
    return join(this.path, "etcd.pid");
  }
  get etcdLogPath(): string {
    return join(this.path, "etcd.log");
  }
  get etcdFlagsPath(): string {
    return join(this.path, "etcd-flags.txt");
  }

  readMarker(): JoinedMarker | null {
    return readJson<JoinedMarker>(this.markerPath);
  }

  writeMarker(marker: JoinedMarker): void {
    writeFileAtomic(this.markerPath, `${JSON.stringify(marker, null, 2)}\n`);
  }

  readState(): AgentState | null {
    return readJson<AgentState>(this.statePath);
  }

  writeState(state: AgentState): void {
    writeFileAtomic(this.statePath, `${JSON.stringify({ ...state, updatedAt: new Date().toISOString() }, null, 2)}\n`);
  }

  readPid(path: string): number | null {
    try {
      const pid = Number(readFileSync(path, "utf8").trim());
      return Number.isInteger(pid) && pid > 1 ? pid : null;
    } catch {
      return null;
    }
  }

  writePid(path: string, pid: number): void {
    writeFileAtomic(path, `${pid}\n`);
  }

  removeFile(path: string): void {
    rmSync(path, { force: true });
  }

  get lockPath(): string {
    return join(this.path, "agent.lock");
  }

  readonly #lock: DirLock;

  /**
   * Claims the state dir for this agent (`agent.lock`, created exclusively; a stale lock is
   * taken over, see dir-lock.ts); any live holder is refused with `StateDirLocked`. Released by
   * `unlock()` and, failing that, at process exit.
   */
  lock(): void {
    this.#lock.lock();
  }

  /** Releases the lock if this StateDir holds it. */
  unlock(): void {
    this.#lock.unlock();
  }
}

export { bootId, isAlive, isStaleLock, type LockHolder } from "../../dir-lock.ts";

/** Another agent holds the state dir. */
export class StateDirLocked extends Error {
  override readonly name = "StateDirLocked";
  readonly code = "ERR_STATE_DIR_LOCKED";
  constructor(
    readonly stateDir: string,
    readonly holderPid: number | null,
  ) {
    super(
      `another agent${holderPid ? ` (pid ${holderPid})` : ""} is running with state dir ${stateDir}; ` +
        `if none is, remove ${join(stateDir, "agent.lock")} and run again`,
    );
  }
}

/**
 * Whether etcd has written its write-ahead log in `dataDir`: the same test etcd itself uses to
 * decide between "first start" and "restart with my data".
 */
export function hasEtcdData(dataDir: string): boolean {
  try {
    return readdirSync(join(dataDir, "member", "wal")).some((f) => f.endsWith(".wal"));
  } catch {
    return false;
  }
}

function readJson<T>(path: string): T | null {
  if (!existsSync(path)) return null;
  const text = readFileSync(path, "utf8");
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`${path} is not valid JSON; it was not written by this agent (move it away to continue)`);
  }
}
