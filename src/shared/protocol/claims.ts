/**
 * Admission token claims (docs/protocol.md, "Admission token"), built and checked without I/O.
 * @module
 */
import type { Role } from "./wire.ts";

export const ADMISSION_TYP = "admission+jwt";
export const ADMISSION_ALG = "EdDSA";

export interface AdmissionClaims {
  iss: string;
  aud: string;
  sub: string;
  jti: string;
  iat: number;
  nbf: number;
  exp: number;
  cluster: string;
  ticket: string;
  peer_url: string;
  role: Role;
}

export function audienceFor(cluster: string): string {
  return `etcd-join:${cluster}`;
}

/** The issuer is the broker's origin, whatever path a configured URL carries. */
export function issuerFor(brokerUrl: string): string {
  return new URL(brokerUrl).origin;
}

export function admissionClaims(input: {
  issuer: string;
  cluster: string;
  node: string;
  ticket: string;
  peerURL: string;
  role: Role;
  jti: string;
  nowMs: number;
  ttlSeconds: number;
}): AdmissionClaims {
  const iat = Math.floor(input.nowMs / 1000);
  return {
    iss: input.issuer,
    aud: audienceFor(input.cluster),
    sub: input.node,
    jti: input.jti,
    iat,
    nbf: iat,
    exp: iat + input.ttlSeconds,
    cluster: input.cluster,
    ticket: input.ticket,
    peer_url: input.peerURL,
    role: input.role,
  };
}

export const REQUIRED_CLAIMS = ["iss", "aud", "sub", "jti", "iat", "nbf", "exp", "cluster", "ticket", "peer_url", "role"] as const;

/** Checks the claims jose does not: the custom ones, their types and their agreement with `aud`. */
export function customClaimsProblem(payload: Record<string, unknown>, cluster: string): string | null {
  for (const name of ["sub", "jti", "cluster", "ticket", "peer_url", "role"]) {
    if (typeof payload[name] !== "string") return `claim ${name} is missing or not a string`;
  }
  if (payload.cluster !== cluster) return `token is for cluster ${String(payload.cluster)}`;
  if (payload.role !== "join" && payload.role !== "bootstrap") return "claim role is neither join nor bootstrap";
  return null;
}
