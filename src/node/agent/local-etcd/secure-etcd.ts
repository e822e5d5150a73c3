/**
 * The bootstrap node, once its etcd is healthy and before it reports the cluster ready (so before
 * any other node is admitted): it records its own certificates (so that removing its member
 * revokes them like any other's) and turns etcd's auth on (etcd-auth.ts): from then on only the
 * CA key's holders (`root`: the join API) change the membership, and the certificates the join
 * API signs for joiners name no user with any right.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { ensureEtcdAuth } from "../../etcd/etcd-auth.ts";
import { EtcdGateway, type EtcdResult } from "../../etcd/gateway.ts";
import { tlsFetchFromMemory } from "../../etcd/tls-fetch.ts";
import { memberRecordKey, type MemberRecord } from "../../join-api/learner-records.ts";
import { ROOT_USER, anonymousClientCertificate, etcdRootPassword } from "../../pki/etcd-identities.ts";
import { certificateAuthority, pkiFiles } from "../../pki/pki-dir.ts";
import { certificateFacts, normalSerial } from "../../pki/x509.ts";
import { canonicalPeerUrl } from "../../../shared/protocol/identifiers.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { Reporter } from "../core/progress.ts";
import { GaveUp } from "../core/errors.ts";
import { sleep } from "../core/retry.ts";

/** How long the bootstrap node keeps asking its (just healthy) etcd before it gives up. */
const SECURE_TIMEOUT_MS = 60_000;

export async function secureBootstrapEtcd(o: AgentOptions, r: Reporter, memberID: string, signal: AbortSignal): Promise<void> {
  if (!o.pkiDir) return;
  const files = pkiFiles(o.pkiDir);
  const { ca } = await certificateAuthority(o.pkiDir);
  const own = await anonymousClientCertificate(ca, o.node);
  const gateway = new EtcdGateway(o.clientURL, {
    timeoutMs: 5_000,
    fetch: tlsFetchFromMemory(() => ({ ca: ca.certPem, cert: own.cert, key: own.key })),
    credentials: { user: ROOT_USER, password: etcdRootPassword(readFileSync(files.caKey, "utf8")) },
  });
  const certificates = [files.peerCert, files.serverCert, ...(existsSync(files.apiServerCert) ? [files.apiServerCert] : [])].map((path) => {
    const facts = certificateFacts(readFileSync(path, "utf8"));
    return { serial: normalSerial(facts.serial), notAfter: facts.notAfter };
  });
  const record: MemberRecord = { node: o.node, peerURL: canonicalPeerUrl(o.peerURL), memberID, certificates };
  await untilDone(signal, "recording this node's certificates in etcd", () => gateway.put(memberRecordKey(memberID), JSON.stringify(record)));
  const auth = await untilDone(signal, "turning etcd's auth on", () => ensureEtcdAuth(gateway, etcdRootPassword(readFileSync(files.caKey, "utf8"))));
  r.event(
    "pki",
    auth.turnedOn
      ? "turned etcd's auth on: root (the holders of the CA key: the join API) alone changes the membership; kube-apiserver (the API servers' client certificates) reads and writes every key but /join-broker/; node certificates get nothing but the member list and status"
      : "etcd's auth is on already",
    { turnedOn: auth.turnedOn },
  );
}

/** Retries while etcd is not ready (it just became healthy); etcd's refusal of another kind ends it. */
async function untilDone<T>(signal: AbortSignal, what: string, attempt: () => Promise<EtcdResult<T>>): Promise<T> {
  const until = Date.now() + SECURE_TIMEOUT_MS;
  for (;;) {
    const got = await attempt();
    if (got.ok) return got.value;
    if (got.error.kind !== "unavailable" || Date.now() > until) throw new GaveUp(`${what}: ${got.error.message}`);
    await sleep(500, signal);
  }
}
