/**
 * Which names a node's etcd certificates carry: what a node asks for, and what the join API
 * allows for an admission. Both follow from the admitted peer URL: the peer certificate names
 * exactly its host; the server certificate (etcd's client port) that host and loopback, where
 * etcd also serves its own node.
 * @module
 */
import { API_SERVER_USER, type CertificateIdentity } from "./x509.ts";

export const LOOPBACK_HOSTS = ["127.0.0.1", "::1", "localhost"] as const;

export interface NodeIdentity {
  peer: CertificateIdentity;
  server: CertificateIdentity;
  /** The API server's client certificate, when the node wants one: etcd user kube-apiserver, no names. */
  client?: CertificateIdentity;
}

/** A URL's host without IPv6 brackets. */
export function hostOf(url: string): string {
  const host = new URL(url).hostname;
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** The most a node admitted with this peer URL may have signed. */
export function allowedIdentity(node: string, peerURL: string): NodeIdentity {
  const host = hostOf(peerURL);
  return { peer: { node, hosts: [host] }, server: { node, hosts: [host, ...LOOPBACK_HOSTS.filter((h) => h !== host)] } };
}

/**
 * What a node asks for: the peer host, and for the client port its client URL's host, the peer
 * host and loopback, so clients on the node itself (kube-apiserver's `https://127.0.0.1:2379`, as
 * kubeadm's certificates allow, or a tunnel to the node) verify it too.
 */
export function requestedIdentity(node: string, peerURL: string, clientURL: string, options: { apiServerClient?: boolean } = {}): NodeIdentity {
  const peerHost = hostOf(peerURL);
  const clientHost = hostOf(clientURL);
  return {
    peer: { node, hosts: [peerHost] },
    server: { node, hosts: [...new Set([clientHost, peerHost, ...LOOPBACK_HOSTS])] },
    ...(options.apiServerClient ? { client: { node: API_SERVER_USER, hosts: [] } } : {}),
  };
}
