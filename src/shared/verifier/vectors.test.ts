/**
 * The shared admission vectors (integrations/vectors/admission-vectors.json, made by
 * scripts/vectors.mjs from a real broker): the Go verifier in integrations/go is held to the same
 * file. Offline: pinned keys, an unreachable broker for introspection, and the recorded
 * revocation list as the allowed fallback.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { JSONWebKeySet } from "jose";
import { describe, expect, it } from "vitest";
import { AdmissionError, ClusterTrust, verifyAdmission, type VerifiedAdmission } from "./index.ts";
import { canonicalPeerUrl } from "../protocol/identifiers.ts";

interface VectorCase {
  name: string;
  token: string;
  at: number;
  trustForger?: boolean;
  request: { node: string; peerURL: string; role?: "join" | "bootstrap" | "any"; clockSkewSeconds?: number };
  expect: { ok: true; claims: Record<string, unknown> } | { ok: false; status: number; code: string };
}

const vectors = JSON.parse(readFileSync(resolve(import.meta.dirname, "../../../integrations/vectors/admission-vectors.json"), "utf8")) as {
  broker: string;
  cluster: string;
  jwks: JSONWebKeySet;
  forgerJwks: JSONWebKeySet;
  revocations: unknown;
  cases: VectorCase[];
  peerURLs: { a: string; b: string; same: boolean }[];
};

/** The broker as the verifier sees it offline: no introspection, the recorded revocation list. */
const offline: typeof fetch = async (input) => {
  const url = String(input instanceof Request ? input.url : input);
  if (url.endsWith(`/v1/clusters/${vectors.cluster}/revocations`)) return Response.json(vectors.revocations);
  throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
};

function trustFor(c: VectorCase): ClusterTrust {
  const jwks = { keys: [...vectors.jwks.keys, ...(c.trustForger ? vectors.forgerJwks.keys : [])] };
  return new ClusterTrust({ broker: vectors.broker, cluster: vectors.cluster, jwks, fetch: offline });
}

describe("the shared admission vectors", () => {
  it("cover every refusal code the vectors can reach offline, and some valid tokens", () => {
    const codes = new Set(vectors.cases.map((c) => (c.expect.ok ? "ok" : c.expect.code)));
    for (const code of [
      "ok",
      "invalid_token",
      "unknown_key",
      "token_not_yet_valid",
      "wrong_node",
      "wrong_peer_url",
      "wrong_role",
      "token_expired",
      "admission_revoked",
      "admission_completed",
    ]) {
      expect(codes).toContain(code);
    }
  });

  it.each(vectors.cases.map((c) => [c.name, c] as const))("%s", async (_name, c) => {
    const outcome = await verifyAdmission(c.token, {
      broker: vectors.broker,
      cluster: vectors.cluster,
      node: c.request.node,
      peerURL: c.request.peerURL,
      role: c.request.role,
      clockToleranceSeconds: c.request.clockSkewSeconds,
      revocationListFallback: { maxAgeSeconds: 60 },
      trust: trustFor(c),
      now: () => c.at * 1000,
    }).then(
      (ok): VerifiedAdmission | unknown => ok,
      (e: unknown) => e,
    );
    if (c.expect.ok) {
      if (outcome instanceof Error) throw outcome;
      const verified = outcome as VerifiedAdmission;
      expect(verified.activeBy).toBe("revocation-list");
      expect(verified.claims).toMatchObject(c.expect.claims);
    } else {
      if (!(outcome instanceof AdmissionError)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome)}`);
      expect({ status: outcome.status, code: outcome.code }).toEqual({ status: c.expect.status, code: c.expect.code });
    }
  });
});

describe("the shared peer URL pairs", () => {
  it("cover case, IPv6 spellings, missing ports and values that are no peer URL", () => {
    expect(vectors.peerURLs.length).toBeGreaterThan(20);
    expect(vectors.peerURLs.some((p) => p.same) && vectors.peerURLs.some((p) => !p.same)).toBe(true);
  });

  it.each(vectors.peerURLs.map((p) => [p.a, p.b, p] as const))("%s and %s", (_a, _b, p) => {
    expect(canonicalPeerUrl(p.a) === canonicalPeerUrl(p.b)).toBe(p.same);
  });
});
