/**
 * What the agent is told to do: the options `join-broker join` reads from its flags
 * (src/node/cli/join.ts), typed and checked, defaults filled in.
 * @module
 */
import type { TlsFiles } from "../../etcd/tls-fetch.ts";

export type LogFormat = "text" | "json";

/** Gate mode's --rescue-etcd: what the agent runs an unstarted voter's etcd with to restore quorum (gate/quorum-rescue.ts). */
export interface RescueFiles {
  /** The etcd binary to run. */
  etcdBin: string;
  /** Holds ca.crt, peer.crt and peer.key: the member's peer identity, as the installer made it (null: plain http peers). */
  pkiDir: string | null;
}

export interface AgentOptions {
  brokerUrl: string;
  cluster: string;
  token: string;
  node: string;
  peerURL: string;
  listenPeerURL: string;
  joinApiUrl: string;
  stateDir: string;
  dataDir: string;
  clientURL: string;
  /** Start and supervise etcd; null: another supervisor starts it with the flags the agent gives. */
  etcdBin: string | null;
  etcdArgs: string[];
  printEtcdFlags: boolean;
  /** Ask for a new ticket even though an admin revoked this node's last admission. */
  retryRevoked: boolean;
  /** Overall deadline for joining, in seconds; 0 means none. */
  timeoutSeconds: number;
  /** How long an admitted node tries to reach the join API to be added before it gives its slot back and queues again. */
  joinApiPatienceSeconds: number;
  /** Gate mode: an unmodified installer to run once admitted (`sh -c`); null: the agent joins itself. */
  exec: string | null;
  /** Gate mode: where to ask etcd whether this node is a started voter (default: the client URL). */
  etcdEndpoints: string[];
  /**
   * The other controllers' etcd client URLs (`--etcd`, either mode; empty without it): asked
   * before acting on a bootstrap ticket whether a cluster already exists there.
   */
  controllers: string[];
  /** TLS files for the `--etcd` endpoints (etcdctl's --cacert, --cert, --key), and the name their certificate is checked against. */
  etcdTls: TlsFiles | null;
  /**
   * Its own mode with TLS on every etcd port (`--pki-dir`): the cluster's CA certificate, this
   * node's keys and certificates, and on the node that made or was given it, the CA key. null: plain http.
   */
  pkiDir: string | null;
  /**
   * With --pki-dir: also the client certificate this node's API server reaches etcd with
   * (`apiserver-etcd-client.crt`: etcd user kube-apiserver).
   */
  apiServerClient: boolean;
  /** Gate mode: COMMAND is the node's long-running service; run it again once the node joined. */
  service: boolean;
  /**
   * Gate mode: run with `sh -c` after a failed join attempt, once this node's member is gone from
   * etcd (or given up on): puts the node back where its installer joins from (k0s: its pki/ and
   * etcd/). null: nothing.
   */
  cleanup: string | null;
  /** Gate mode: how long an agent that gives up its turn tries to remove its member before it leaves it to an operator. */
  removalTimeoutSeconds: number;
  /** Gate mode: bring an added, never-started voter's etcd up to restore quorum before removing it (quorum-rescue.ts). */
  rescue: RescueFiles | null;
  logFormat: LogFormat;
  verbose: boolean;
}
