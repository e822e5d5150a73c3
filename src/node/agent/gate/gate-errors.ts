/**
 * How gate mode ends a run that did not join, by type (the exit code follows from the base class).
 * @module
 */
import { GaveUp, Refusal } from "../core/errors.ts";

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

/**
 * The agent gave up its turn leaving a member in etcd that it could not remove within
 * --removal-timeout: the cluster needs an operator (exit 4).
 */
export class MemberStuck extends GaveUp {
  override readonly name = "MemberStuck";
  override readonly code = "ERR_MEMBER_STUCK";
}
