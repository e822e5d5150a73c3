/**
 * What the own-etcd steps (bootstrap-step.ts, learner-step.ts) work with besides the common context.
 * @module
 */
import type { AgentContext } from "../steps/agent-context.ts";
import type { JoinApiSteps } from "./join-api-steps.ts";
import type { LocalEtcd } from "../local-etcd/local-etcd.ts";
import type { NodeKeys } from "../local-etcd/node-certificates.ts";
import type { RevocationListKeeper } from "../local-etcd/revocation-list.ts";

export interface OwnEtcdContext extends AgentContext {
  readonly etcd: LocalEtcd;
  readonly joinApi: JoinApiSteps;
  /** This node's etcd keys and certificate requests (--pki-dir), made while it waits for its turn. */
  readonly keys: NodeKeys;
  /** With --pki-dir: the revocation list etcd reads, kept current from the join API. */
  readonly crl: RevocationListKeeper | null;
}
