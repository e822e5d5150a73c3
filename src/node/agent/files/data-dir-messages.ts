/**
 * What a refused node is told: for each data-directory rule (data-dir-rules.ts), what is wrong
 * and what the operator does about it, with this node's own paths and names in the commands.
 * Pure: the agent passes where its files are.
 * @module
 */
import type { Role } from "../../../shared/protocol/wire.ts";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { DiskFacts, RefusalRule } from "./data-dir-rules.ts";

/** This node, its files, and what the agent recorded of its etcd. */
export interface NodePlace {
  node: string;
  cluster: string;
  brokerUrl: string;
  peerURL: string;
  dataDir: string;
  markerPath: string;
  statePath: string;
  owned: DiskFacts["owned"];
}

/** The one way back for a node whose membership outlived its data: the old member goes, the broker forgets it, the node joins anew. */
export function howToRejoin(at: NodePlace, memberHex: string | undefined): string {
  const { node, cluster, brokerUrl } = at;
  return (
    `To join it again: remove its old member from etcd (etcdctl member remove ${memberHex || "<id>"}), ` +
    `run 'join-broker admin forget ${node} --cluster ${cluster} --broker ${brokerUrl}' if the broker still lists it, delete ${at.markerPath} if it exists, and run this command again.`
  );
}

/** A refused data dir, said so that an operator knows what to do. */
export function refusalMessage(at: NodePlace, rule: RefusalRule, role: Role = "join", why = ""): string {
  const { dataDir, cluster, node, owned } = at;
  switch (rule) {
    case "foreign_data":
      return (
        `${dataDir} already holds etcd data, but this agent never started etcd there for cluster ${cluster}. It may be another cluster's data, ` +
        `and starting it could split the cluster. Move it away (or choose another --data-dir) and run again.`
      );
    case "other_cluster":
      return `${dataDir} holds etcd data this agent made for cluster ${owned?.cluster}, not ${cluster}: starting it could split the cluster. Move it away (or choose another --data-dir) and run again.`;
    case "role_changed":
      return (
        `${dataDir} holds etcd data from when this node ${owned?.role === "bootstrap" ? "bootstrapped a cluster" : "joined a cluster"}, but the broker now ` +
        `says it must ${role === "bootstrap" ? "bootstrap" : "join"}. Move the data dir away and run again.`
      );
    case "joined_never_bootstraps":
      return `${at.markerPath} says this node joined cluster ${cluster}, but the broker now asks it to bootstrap: it will not start a second cluster. Check the broker (was its state reset?) and run 'join-broker admin status --cluster ${cluster}'.`;
    case "joined_without_data":
      // `why`: the member the broker says this node joined as, in hex, when it says.
      return (
        `the broker says ${node} already joined cluster ${cluster}${why ? ` as member ${why}` : ""}, but ${dataDir} holds no etcd data. ` +
        `This node will not start etcd: it must neither start a new cluster nor reuse a membership whose data is gone. ${howToRejoin(at, why || undefined)}`
      );
    case "started_voter_without_data":
      return (
        `the join API says this node's member ${why} (${at.peerURL}) is a voter that has run before, but ${dataDir} holds no etcd data ` +
        `(a lost disk, or a reinstalled node). This node will not start etcd: that voter would come back without its raft state (its term and vote). ` +
        `${howToRejoin(at, why)} It joins as a new member.`
      );
    default: {
      const keep =
        rule === "marker_says_joined"
          ? `${at.markerPath} says this node joined`
          : rule === "not_ours"
            ? `${dataDir} was not filled by this agent`
            : rule === "bootstrapped_here"
              ? "this node bootstrapped the cluster from this data"
              : `member ${owned?.memberID ? memberIdHex(owned.memberID) : "?"} was a voter`;
      return (
        `${why}, but ${keep}: its data in ${dataDir} is not moved aside automatically. If the member really is gone for good, stop etcd, ` +
        `move ${dataDir} away, remove ${at.statePath} and ${at.markerPath}, run 'join-broker admin forget ${node} --cluster ${cluster}', and run again.`
      );
    }
  }
}

/** The marker of an earlier run says this node joined, but its data is gone: no etcd starts. */
export function markerWithoutDataMessage(at: NodePlace, memberHex: string): string {
  return `${at.markerPath} says this node joined cluster ${at.cluster}, but ${at.dataDir} holds no etcd data. This node will not start etcd. ${howToRejoin(at, memberHex)}`;
}
