/**
 * The flags this node's etcd starts with: what the agent recorded of it (its cluster, its state,
 * its learner slots), the node's options, and with --pki-dir its TLS files and self-compaction.
 * Pure: the same record gives the same flags, printed for another supervisor or passed to etcd.
 * @module
 */
import type { AdmittedTicket } from "../../../shared/protocol/wire.ts";
import { etcdFlags } from "../../etcd/etcd-process.ts";
import { maxLearnersArgs, type EtcdTraits } from "../../etcd/versions.ts";
import { etcdServingFiles } from "../../pki/pki-dir.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { EtcdOwnership } from "../files/state-files.ts";

/** The learner limit the broker asks for, as recorded with the etcd it starts (nothing for the default 1). */
export function learnerLimit(ticket: AdmittedTicket): { maxLearners?: number } {
  return ticket.maxInFlight > 1 ? { maxLearners: ticket.maxInFlight } : {};
}

/**
 * With --pki-dir (etcd's auth on): etcd compacts its own history every 5 minutes, what
 * kube-apiserver does by default, because from etcd 3.5.35 and 3.6.16 on only root may compact
 * and kube-apiserver's user is not root. An --etcd-arg given later wins.
 */
const SELF_COMPACTION = ["--auto-compaction-mode=periodic", "--auto-compaction-retention=5m"];

/**
 * With --pki-dir: bcrypt's lowest work factor. The one password the agent's etcd holds is root's,
 * 256 bits derived from the CA key (etcdRootPassword), which no work factor makes harder to guess;
 * etcd's default (10) costs about 75 ms of CPU at the user's creation and at every sign-in, on the
 * path of the cluster's first node and of the join API's first add. An --etcd-arg given later wins.
 */
const ROOT_PASSWORD_HASHING = ["--bcrypt-cost=4"];

/** etcd's command line (without the binary) for the etcd recorded in `owned`, with `learners` as learnerArgs gave them. */
export function ownEtcdFlags(o: AgentOptions, owned: EtcdOwnership, learners: readonly string[]): string[] {
  return etcdFlags({
    name: o.node,
    dataDir: o.dataDir,
    clientURL: o.clientURL,
    peerURL: o.peerURL,
    listenPeerURL: o.listenPeerURL,
    initialCluster: owned.initialCluster,
    initialClusterState: owned.initialClusterState,
    initialClusterToken: owned.initialClusterState === "new" ? o.cluster : undefined,
    ...(o.pkiDir ? { tls: etcdServingFiles(o.pkiDir, { revocationList: true }) } : {}),
    // Ours first: a --max-learners among --etcd-arg comes later and wins.
    extraArgs: [...learners, ...(o.pkiDir ? [...SELF_COMPACTION, ...ROOT_PASSWORD_HASHING] : []), ...o.etcdArgs],
  });
}

/**
 * `--max-learners` (by this version's name) so that etcd allows as many learners as the broker
 * admits nodes at once. Nothing for 1 (etcd's default). Without --etcd-bin (`supervised` false)
 * the version is not known: a limit above 1 needs etcd 3.6 or later, so 3.6's name is printed.
 * `refused`: why this version cannot hold that many (then nothing is passed).
 */
export function learnerArgs(learners: number, traits: EtcdTraits | null, supervised: boolean): { args: string[]; refused?: string } {
  if (learners <= 1) return { args: [] };
  if (!traits) return { args: supervised ? [] : [`--max-learners=${learners}`] };
  try {
    return { args: maxLearnersArgs(traits, learners) };
  } catch (e) {
    return { args: [], refused: (e as Error).message };
  }
}
