/**
 * Gate mode's way back to quorum (`--rescue-etcd PATH --rescue-pki DIR`) when an installer added
 * this node as a *voting* member and failed before its etcd ran (k0s before 1.36 adds voters): a
 * one-member cluster that gains an unstarted voter has lost its quorum, and etcd then removes no
 * member, so the agent could not hand the slot on.
 *
 * The agent starts that member's etcd itself, as etcd's own recipe for an added member says:
 * `--initial-cluster` from the member list, `--initial-cluster-state existing`, on the node's peer
 * URL with the peer certificate the installer made (DIR/peer.crt, DIR/peer.key, DIR/ca.crt: k0s's
 * /var/lib/k0s/pki/etcd, kubeadm's /etc/kubernetes/pki/etcd), an empty data dir of the agent's own
 * and a client port on loopback only. Once etcd lists the member started, the cluster has its
 * quorum again; the agent removes the member (etcd then stops it) and deletes that data dir. The
 * installer's own data dir is never touched, and nothing of it is used after the removal.
 * @module
 */
import { existsSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import { initialClusterEntries, type EtcdMember } from "../../etcd/gateway.ts";
import { startEtcd, type EtcdProcess } from "../../etcd/etcd-process.ts";
import type { RescueFiles } from "../core/agent-options.ts";

/** A port nobody listens on now, on loopback (the rescue's client port: only the agent would ask it). */
async function freeLoopbackPort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => ok(port));
    });
  });
}

/** Why the files for a rescue are not all there (the installer never made them), or null. */
export function rescueFilesMissing(files: RescueFiles): string | null {
  const pki = files.pkiDir;
  const missing = pki ? ["ca.crt", "peer.crt", "peer.key"].map((f) => join(pki, f)).filter((f) => !existsSync(f)) : [];
  if (!existsSync(files.etcdBin)) missing.unshift(files.etcdBin);
  return missing.length ? `missing ${missing.join(", ")}` : null;
}

export class QuorumRescue {
  private constructor(
    readonly process: EtcdProcess,
    readonly dataDir: string,
    readonly memberID: string,
  ) {}

  /**
   * Starts etcd as member `own` (unstarted, a voter) of the cluster `members` lists, named `name`,
   * on `listenPeerURL`, with its data in `dataDir` (made empty first).
   */
  static async start(
    files: RescueFiles,
    input: { name: string; own: EtcdMember; members: readonly EtcdMember[]; listenPeerURL: string; dataDir: string; logFile?: string },
  ): Promise<QuorumRescue> {
    const { own, members, name } = input;
    rmSync(input.dataDir, { recursive: true, force: true });
    const clientURL = `http://127.0.0.1:${await freeLoopbackPort()}`;
    const initialCluster = initialClusterEntries(members, (m) => (m.id === own.id ? name : `unstarted-${memberIdHex(m.id)}`));
    const process = await startEtcd({
      bin: files.etcdBin,
      name,
      dataDir: input.dataDir,
      clientURL,
      peerURL: own.peerURLs[0]!,
      listenPeerURL: input.listenPeerURL,
      initialCluster,
      initialClusterState: "existing",
      // TLS on the peer port only: the client port is plain http on loopback, for nobody but this agent.
      extraArgs: files.pkiDir
        ? [
            `--peer-cert-file=${join(files.pkiDir, "peer.crt")}`,
            `--peer-key-file=${join(files.pkiDir, "peer.key")}`,
            `--peer-trusted-ca-file=${join(files.pkiDir, "ca.crt")}`,
            "--peer-client-cert-auth",
          ]
        : [],
      waitFor: "none",
      ...(input.logFile ? { logFile: input.logFile } : {}),
    });
    return new QuorumRescue(process, input.dataDir, own.id);
  }

  get running(): boolean {
    return this.process.running();
  }

  /** Stops it (etcd stops a removed member by itself) and deletes its data. */
  async stop(): Promise<void> {
    await this.process.stop(5_000);
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}
