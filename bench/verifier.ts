/**
 * (4) Verifier: `verifyAdmission` on a real admission token from the bench broker, with the
 * cluster's JWKS fetched once from the broker and then served from jose's cache (warm), against
 * bare jose `jwtVerify` of the same token with a local key set, in the same process and run.
 * Both run for the same time in one process, interleaved in 50 ms slices so that both meet the
 * same load on a shared machine.
 *
 * The headline call checks what a join API checks locally: signature, pinned alg/typ/iss/aud,
 * exp/nbf, required claims, and the binding to node and peer URL (activeCheck "none"). The
 * broker round trip that establishes activeness (introspection) is measured beside it, for
 * information: it is a network call, not verification work.
 * @module
 */
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { ClusterTrust, verifyAdmission } from "../src/shared/verifier/index.ts";
import { admitted, type BrokerProcess } from "../test/support/stack.ts";
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

/** Calls `fn` back to back for `ms`; returns how many calls and how long they took. */
async function slice(ms: number, fn: () => Promise<unknown>): Promise<{ calls: number; ms: number; latencies: number[] }> {
  const latencies: number[] = [];
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    await fn();
    const after = performance.now();
    latencies.push(after - now);
    now = after;
  }
  return { calls: latencies.length, ms: now - start, latencies };
}

/**
 * Both candidates for `seconds` each, in 50 ms slices that alternate (the first of each pair
 * alternating too), so that both meet the same load on a shared machine.
 */
async function interleaved<K extends string>(seconds: number, candidates: Record<K, () => Promise<unknown>>, first: number): Promise<Record<K, number>> {
  const names = Object.keys(candidates) as K[];
  const total = Object.fromEntries(names.map((k) => [k, { calls: 0, ms: 0 }])) as Record<K, { calls: number; ms: number }>;
  const slices = Math.max(1, Math.round((seconds * 1000) / SLICE_MS));
  for (let i = 0; i < slices; i++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j + first) % names.length]!;
      const r = await slice(SLICE_MS, candidates[name]);
      total[name].calls += r.calls;
      total[name].ms += r.ms;
    }
  }
  return Object.fromEntries(names.map((k) => [k, round(total[k].calls / (total[k].ms / 1000), 1)])) as Record<K, number>;
}

const SLICE_MS = 50;

export async function verifier(broker: BrokerProcess, options: { runs: number; seconds: number }): Promise<VerifierResult> {
  const http = new HttpClient(broker.url);
  let token: string;
  let jwks: JSONWebKeySet;
  const cluster = await createCluster(http, broker, "verifier");
  try {
    // A real join admission: the bootstrap node completes, then the joiner is admitted.
    const boot = admitted((await requestTicket(cluster, "boot")).body);
    await completeTicket(cluster, boot.ticket, boot.admission, "1");
    token = admitted((await requestTicket(cluster, "joiner")).body).admission;
    jwks = (await cluster.nodes.jwks()).body as JSONWebKeySet;
  } finally {
    http.close();
  }

  const trust = new ClusterTrust({ broker: broker.url, cluster: cluster.name });
  const local = createLocalJWKSet(jwks);
  const candidates = {
    verifyAdmission: () =>
      verifyAdmission(token, { broker: broker.url, cluster: cluster.name, node: "joiner", peerURL: peerUrlOf("joiner"), activeCheck: "none", trust }),
    joseJwtVerify: () => jwtVerify(token, local),
  };
  // Warm: the first call fetches the JWKS from the broker; later ones use jose's cache.
  for (let i = 0; i < 200; i++) {
    await candidates.verifyAdmission();
    await candidates.joseJwtVerify();
  }

  const runs: VerifierRun[] = [];
  for (let run = 0; run < options.runs; run++) {
    const rate = await interleaved(options.seconds, candidates, run);
    const ratio = round(rate.verifyAdmission / rate.joseJwtVerify, 3);
    runs.push({
      run,
      order: `interleaved in ${SLICE_MS} ms slices, ${run % 2 === 0 ? "verifyAdmission" : "jose"} first`,
      verifyAdmissionPerSecond: rate.verifyAdmission,
      joseJwtVerifyPerSecond: rate.joseJwtVerify,
      ratio,
    });
    log(`verifier run ${run + 1}/${options.runs}: verifyAdmission ${rate.verifyAdmission}/s, jose ${rate.joseJwtVerify}/s, ratio ${ratio}`);
  }

  const introspectSeconds = Math.min(2, options.seconds);
  const introspected = await slice(introspectSeconds * 1000, () =>
    verifyAdmission(token, { broker: broker.url, cluster: cluster.name, node: "joiner", peerURL: peerUrlOf("joiner"), trust }),
  );
  const sorted = [...introspected.latencies].sort((a, b) => a - b);
  return {
    secondsPerLoop: options.seconds,
    runs,
    withIntrospection: {
      perSecond: round(introspected.calls / (introspected.ms / 1000), 1),
      seconds: introspectSeconds,
      p50Ms: round(sorted[Math.floor(sorted.length / 2)] ?? NaN),
    },
    summary: {
      verifyAdmissionPerSecond: round(median(runs.map((r) => r.verifyAdmissionPerSecond)), 1),
      joseJwtVerifyPerSecond: round(median(runs.map((r) => r.joseJwtVerifyPerSecond)), 1),
      ratio: round(median(runs.map((r) => r.ratio)), 3),
      withIntrospectionPerSecond: round(introspected.calls / (introspected.ms / 1000), 1),
    },
  };
}
