/**
 * The controllers' join API on the wire (docs/protocol.md, "Controllers' join API"), with this
 * repository's addition for etcd run on TLS: the add carries a certificate request per
 * certificate the node needs, and the answer the certificates signed for its admission.
 * @module
 */

/** PEM PKCS#10 requests, one per certificate; the keys stay on the node. */
export interface CertificateRequests {
  /** For etcd's peer port: names the admitted peer URL's host. */
  peer: string;
  /** For etcd's client port: the peer host and/or loopback. */
  server: string;
  /**
   * Optional: the client certificate the node's API server reaches etcd with (etcd user
   * `kube-apiserver`: read-write on every key but the join API's records). No subject
   * alternative name; common name `kube-apiserver` or none.
   */
  client?: string;
}

/** PEM certificates signed by the cluster's etcd CA, and that CA's certificate. Never a key. */
export interface IssuedCertificates {
  ca: string;
  peer: string;
  server: string;
  /** When the requests had `client`. */
  client?: string;
}

export interface AddMemberBody {
  node: string;
  peerAddress: string;
  csrs?: CertificateRequests;
}

export interface MemberAdded {
  memberID: string;
  learner: boolean;
  /** `name=peerURL` for every member, this node included: etcd's `--initial-cluster`. */
  initialCluster: string[];
  /** The member has run already (absent from join APIs that predate the field). */
  started?: boolean;
  /** Present when the request carried `csrs`. */
  certificates?: IssuedCertificates;
}

export interface MemberPromoted {
  memberID: string;
  learner: boolean;
}
