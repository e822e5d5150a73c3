/**
 * (4) Verifier: `verifyAdmission` on a real admission token from the bench broker, with the
 * cluster's JWKS fetched once from the broker and then served from jose's cache (warm), against
 * bare jose `jwtVerify` of the same token with a local key set, in the same process and run.
 * Both loops run back to back for the same time, alternating order from run to run.
 *
 * The headline call checks what a join API checks locally: signature, pinned alg/typ/iss/aud,
 * exp/nbf, required claims, and the binding to node and peer URL (activeCheck "none"). The
 * broker round trip that establishes activeness (introspection) is measured beside it, for
 * information: it is a network call, not verification work.
 * @module
 */
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { ClusterTrust, verifyAdmission } from "../src/verifier/index.ts";
import type { BenchBroker } from "./support/broker.ts";
import { completeTicket, createCluster, peerUrlOf, requestTicket } from "./support/cluster.ts";
import { HttpClient } from "./support/http.ts";
import { log, median, round } from "./support/stats.ts";

export interface VerifierRun {
  run: number;
  order: string;
  verifyAdmissionPerSecond: number;
  joseJwtVerifyPerSecond: number;
  ratio: number;
}

export interface VerifierResult {
  secondsPerLoop: number;
  runs: VerifierRun[];
  withIntrospection: { perSecond: number; seconds: number; p50Ms: number };
  summary: { verifyAdmissionPerSecond: number; joseJwtVerifyPerSecond: number; ratio: number; withIntrospectionPerSecond: number };
}

/** Calls `fn` back to back for `seconds`; returns calls per second. */
async function loop(seconds: number, fn: () => Promise<unknown>): Promise<{ perSecond: number; latencies: number[] }> {
  const latencies: number[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  let calls = 0;
  let now = start;
  while (now < end) {
    await fn();
    const after = performance.now();
    latencies.push(after - now);
    now = after;
    calls++;
  }
  return { perSecond: round(calls / ((now - start) / 1000), 1), latencies };
}

export async function verifier(broker: BenchBroker, options: { runs: number; seconds: number }): Promise<VerifierResult> {
  const http = new HttpClient(broker.url);
  let token: string;
  let jwks: JSONWebKeySet;
  const cluster = await createCluster(http, broker.adminToken, "verifier");
  try {
    // A real join admission: the bootstrap node completes, then the joiner is admitted.
    const boot = (await requestTicket(http, cluster, "boot")).body as { ticket: string; admission: string };
    await completeTicket(http, cluster, boot.ticket, boot.admission, "1");
    const join = (await requestTicket(http, cluster, "joiner")).body as { admission?: string };
    if (!join.admission) throw new Error("the joiner was not admitted");
    token = join.admission;
    jwks = (await http.expect([200], "GET", `/v1/clusters/${cluster.name}/jwks.json`)).body as JSONWebKeySet;
  } finally {
    http.close();
  }

  const trust = new ClusterTrust({ broker: broker.url, cluster: cluster.name });
  const local = createLocalJWKSet(jwks);
  const candidates = {
    verifyAdmission: () => verifyAdmission(token, { broker: broker.url, cluster: cluster.name, node: "joiner", peerURL: peerUrlOf("joiner"), activeCheck: "none", trust }),
    joseJwtVerify: () => jwtVerify(token, local),
  };
  // Warm: the first call fetches the JWKS from the broker; later ones use jose's cache.
  for (let i = 0; i < 200; i++) {
    await candidates.verifyAdmission();
    await candidates.joseJwtVerify();
  }

  const runs: VerifierRun[] = [];
  for (let run = 0; run < options.runs; run++) {
    const order = run % 2 === 0 ? (["verifyAdmission", "joseJwtVerify"] as const) : (["joseJwtVerify", "verifyAdmission"] as const);
    const rate = {} as Record<"verifyAdmission" | "joseJwtVerify", number>;
    for (const name of order) rate[name] = (await loop(options.seconds, candidates[name])).perSecond;
    const ratio = round(rate.verifyAdmission / rate.joseJwtVerify, 3);
    runs.push({ run, order: order.join(" then "), verifyAdmissionPerSecond: rate.verifyAdmission, joseJwtVerifyPerSecond: rate.joseJwtVerify, ratio });
    log(`verifier run ${run + 1}/${options.runs}: verifyAdmission ${rate.verifyAdmission}/s, jose ${rate.joseJwtVerify}/s, ratio ${ratio}`);
  }

  const introspectSeconds = Math.min(2, options.seconds);
  const introspected = await loop(introspectSeconds, () => verifyAdmission(token, { broker: broker.url, cluster: cluster.name, node: "joiner", peerURL: peerUrlOf("joiner"), trust }));
  const sorted = [...introspected.latencies].sort((a, b) => a - b);
  return {
    secondsPerLoop: options.seconds,
    runs,
    withIntrospection: { perSecond: introspected.perSecond, seconds: introspectSeconds, p50Ms: round(sorted[Math.floor(sorted.length / 2)] ?? NaN) },
    summary: {
      verifyAdmissionPerSecond: round(median(runs.map((r) => r.verifyAdmissionPerSecond)), 1),
      joseJwtVerifyPerSecond: round(median(runs.map((r) => r.joseJwtVerifyPerSecond)), 1),
      ratio: round(median(runs.map((r) => r.ratio)), 3),
      withIntrospectionPerSecond: introspected.perSecond,
    },
  };
}
