/**
 * verifyAdmission against a real broker (wrangler dev): broker-issued tokens, forgeries, and
 * every way a token stops being good, with the error each one must give.
 */
import { SignJWT, UnsecuredJWT, base64url, decodeJwt, type JSONWebKeySet, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSigningKey, importPrivateKey, signAdmission } from "../../src/broker/tokens/keys.ts";
import type { AdmissionClaims } from "../../src/shared/protocol/claims.ts";
import { AdmissionError, ClusterTrust, verifyAdmission, type VerifyAdmissionOptions } from "../../src/shared/verifier/index.ts";
import { brokerClient, enrollCluster, startBroker, type BrokerProcess } from "../support/stack.ts";

const CLUSTER = "verifier-e2e";
const OTHER = "verifier-other";
const peer = (n: number) => `https://10.0.0.${n}:2380`;

let broker: BrokerProcess;
let trust: ClusterTrust;

interface Admitted {
  node: string;
  peerURL: string;
  ticket: string;
  token: string;
  jti: string;
  claims: AdmissionClaims;
}

const enroll = (cluster: string) => enrollCluster(broker, cluster);
const admin = () => brokerClient(broker).admin(CLUSTER);

async function ticket(cluster: string, enrollment: string, node: string, peerURL: string): Promise<Admitted> {
  const { status, body } = await brokerClient(broker, { bearer: enrollment }).cluster(cluster).requestTicket(node, peerURL);
  if (body.state !== "admitted" || !body.admission) throw new Error(`expected an admitted ticket, got ${status} ${JSON.stringify(body)}`);
  const claims = decodeJwt(body.admission) as unknown as AdmissionClaims;
  return { node, peerURL, ticket: body.ticket, token: body.admission, jti: claims.jti, claims };
}

async function complete(cluster: string, a: Admitted, memberID: string): Promise<number> {
  return (await brokerClient(broker, { bearer: a.token }).cluster(cluster).complete(a.ticket, memberID)).status;
}

const optionsFor = (a: { node: string; peerURL: string }, over: Partial<VerifyAdmissionOptions> = {}): VerifyAdmissionOptions => ({
  broker: broker.url,
  cluster: CLUSTER,
  node: a.node,
  peerURL: a.peerURL,
  trust,
  ...over,
});

async function refusal(token: string, options: VerifyAdmissionOptions): Promise<AdmissionError> {
  const outcome = await verifyAdmission(token, options).then(
    (ok) => ok,
    (e: unknown) => e,
  );
  if (!(outcome instanceof AdmissionError)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome)}`);
  return outcome;
}

let enrollment: string;
let joiner: Admitted; // ctrl-1: a join ticket, active
let shortLived: Admitted; // ctrl-5: admissionTtlSeconds 10
let bootstrapOfOther: Admitted;
let brokerJwks: JSONWebKeySet;

beforeAll(async () => {
  broker = await startBroker();
  trust = new ClusterTrust({ broker: broker.url, cluster: CLUSTER, jwksCooldownMs: 0 });
  enrollment = await enroll(CLUSTER);
  // The first node of a fresh cluster bootstraps; once it completed, the next one joins.
  const boot = await ticket(CLUSTER, enrollment, "ctrl-0", peer(10));
  expect(boot.claims.role).toBe("bootstrap");
  expect(await complete(CLUSTER, boot, "1001")).toBe(200);
  await admin().setPolicy({ maxInFlight: 8, leaseSeconds: 10, admissionTtlSeconds: 10 });
  shortLived = await ticket(CLUSTER, enrollment, "ctrl-5", peer(15));
  await admin().setPolicy({ leaseSeconds: 900, admissionTtlSeconds: 900 });
  joiner = await ticket(CLUSTER, enrollment, "ctrl-1", peer(11));
  expect(joiner.claims.role).toBe("join");
  bootstrapOfOther = await ticket(OTHER, await enroll(OTHER), "ctrl-1", peer(11));
  brokerJwks = (await brokerClient(broker).cluster(CLUSTER).jwks()).body as JSONWebKeySet;
});

afterAll(async () => broker?.stop());

describe("verifyAdmission against the broker", () => {
  it("accepts a broker-issued join token bound to its node and peer, after asking the broker", async () => {
    const verified = await verifyAdmission(joiner.token, optionsFor(joiner));
    expect(verified.activeBy).toBe("introspection");
    expect(verified.claims).toMatchObject({
      sub: "ctrl-1",
      peer_url: peer(11),
      cluster: CLUSTER,
      role: "join",
      aud: `etcd-join:${CLUSTER}`,
      iss: new URL(broker.url).origin,
    });
    // The same through the process-wide key cache, with only the documented arguments.
    const plain = await verifyAdmission(joiner.token, { broker: broker.url, cluster: CLUSTER, node: "ctrl-1", peerURL: `${peer(11)}/` });
    expect(plain.claims.jti).toBe(joiner.jti);
  });

  it("fetches the cluster's keys ahead of the first token when warmed, and not again for it", async () => {
    const asked: string[] = [];
    const counting: typeof fetch = (input, init) => {
      asked.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
      return fetch(input, init);
    };
    const warm = new ClusterTrust({ broker: broker.url, cluster: CLUSTER, fetch: counting });
    expect(await warm.warmKeys()).toBe(true);
    expect(asked).toEqual([`/v1/clusters/${CLUSTER}/jwks.json`]);
    await verifyAdmission(joiner.token, optionsFor(joiner, { trust: warm }));
    expect(asked.filter((p) => p.endsWith("/jwks.json"))).toHaveLength(1);
    // Pinned keys need no fetch; a cluster the broker does not know leaves it to the first token.
    expect(await new ClusterTrust({ broker: broker.url, cluster: CLUSTER, jwks: brokerJwks }).warmKeys()).toBe(false);
    expect(await new ClusterTrust({ broker: broker.url, cluster: "no-such-cluster" }).warmKeys()).toBe(false);
  });

  it("refuses alg none", async () => {
    const forged = new UnsecuredJWT({ ...joiner.claims }).encode();
    const e = await refusal(forged, optionsFor(joiner));
    expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "ERR_JOSE_ALG_NOT_ALLOWED"]);
  });

  it("refuses HS256 signed with the cluster's public key", async () => {
    const key = brokerJwks.keys[0]!;
    const forged = await new SignJWT({ ...joiner.claims })
      .setProtectedHeader({ alg: "HS256", kid: key.kid, typ: "admission+jwt" })
      .sign(base64url.decode(key.x!));
    const e = await refusal(forged, optionsFor(joiner));
    expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "ERR_JOSE_ALG_NOT_ALLOWED"]);
  });

  it("refuses an unknown kid, and another cluster's key", async () => {
    const stranger = await generateSigningKey();
    const forged = await signAdmission(joiner.claims, stranger.kid, await importPrivateKey(stranger.privateJwk));
    const e = await refusal(forged, optionsFor(joiner));
    expect([e.status, e.code]).toEqual([401, "unknown_key"]);
    // Signed by the broker, but with the other cluster's key (and for its audience).
    const other = await refusal(bootstrapOfOther.token, optionsFor(joiner, { role: "any" }));
    expect([other.status, other.code]).toEqual([401, "unknown_key"]);
  });

  it("refuses a tampered payload", async () => {
    const [header, , signature] = joiner.token.split(".");
    const payload = base64url.encode(JSON.stringify({ ...joiner.claims, exp: joiner.claims.exp + 86_400 }));
    const e = await refusal(`${header}.${payload}.${signature}`, optionsFor(joiner));
    expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"]);
  });

  it("refuses a token that is not valid yet by the verifier's clock", async () => {
    const e = await refusal(joiner.token, optionsFor(joiner, { now: () => Date.now() - 600_000 }));
    expect([e.status, e.code]).toEqual([401, "token_not_yet_valid"]);
  });

  describe("with a forging key the verifier trusts (the broker's keys plus one of ours)", () => {
    let forge: (claims: Partial<AdmissionClaims>, typ?: string) => Promise<string>;
    let pinned: ClusterTrust;
    beforeAll(async () => {
      const ours = await generateSigningKey();
      const key = await importPrivateKey(ours.privateJwk);
      pinned = new ClusterTrust({ broker: broker.url, cluster: CLUSTER, jwks: { keys: [...(brokerJwks.keys as JWK[]), ours.publicJwk] } });
      forge = (claims, typ = "admission+jwt") =>
        new SignJWT({ ...joiner.claims, ...claims }).setProtectedHeader({ alg: "EdDSA", kid: ours.kid, typ }).sign(key);
    });

    it("refuses a wrong typ", async () => {
      const e = await refusal(await forge({}, "JWT"), optionsFor(joiner, { trust: pinned }));
      expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "typ"]);
    });

    it("refuses a wrong aud", async () => {
      const e = await refusal(await forge({ aud: `etcd-join:${OTHER}` }), optionsFor(joiner, { trust: pinned }));
      expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "aud"]);
    });

    it("refuses a future nbf", async () => {
      const e = await refusal(await forge({ nbf: Math.floor(Date.now() / 1000) + 3_600 }), optionsFor(joiner, { trust: pinned }));
      expect([e.status, e.code]).toEqual([401, "token_not_yet_valid"]);
    });

    it("asks the broker about a well-formed forgery, which does not know it", async () => {
      const e = await refusal(await forge({ jti: "adm_forged" }), optionsFor(joiner, { trust: pinned }));
      expect([e.status, e.code, e.reason]).toEqual([401, "invalid_token", "invalid"]);
    });
  });

  it("refuses a token for another node or another peer URL with 403", async () => {
    const node = await refusal(joiner.token, optionsFor({ node: "ctrl-2", peerURL: peer(11) }));
    expect([node.status, node.code]).toEqual([403, "wrong_node"]);
    const peerURL = await refusal(joiner.token, optionsFor({ node: "ctrl-1", peerURL: peer(12) }));
    expect([peerURL.status, peerURL.code]).toEqual([403, "wrong_peer_url"]);
  });

  it("refuses a revoked token with 410", async () => {
    const doomed = await ticket(CLUSTER, enrollment, "ctrl-2", peer(12));
    await expect(verifyAdmission(doomed.token, optionsFor(doomed))).resolves.toBeTruthy();
    await admin().revokeAdmission(doomed.jti, "test");
    const e = await refusal(doomed.token, optionsFor(doomed));
    expect([e.status, e.code]).toEqual([410, "admission_revoked"]);
  });

  it("refuses a completed token with 410", async () => {
    const used = await ticket(CLUSTER, enrollment, "ctrl-3", peer(13));
    expect(await complete(CLUSTER, used, "1003")).toBe(200);
    const e = await refusal(used.token, optionsFor(used));
    expect([e.status, e.code]).toEqual([410, "admission_completed"]);
  });

  it("picks up a rotated key through the unknown kid", async () => {
    await admin().rotateKeys();
    const fresh = await ticket(CLUSTER, enrollment, "ctrl-4", peer(14));
    expect(decodeJwt(fresh.token).jti).toBe(fresh.jti);
    const verified = await verifyAdmission(fresh.token, optionsFor(fresh));
    expect(verified.claims.sub).toBe("ctrl-4");
    // Tokens signed by the retired key stay verifiable until they expire.
    await expect(verifyAdmission(joiner.token, optionsFor(joiner))).resolves.toBeTruthy();
  });

  it("refuses an expired token with 410", async () => {
    const wait = shortLived.claims.exp * 1000 + 1_500 - Date.now();
    if (wait > 0) await new Promise((ok) => setTimeout(ok, wait));
    const local = await refusal(shortLived.token, optionsFor(shortLived, { clockToleranceSeconds: 0 }));
    expect([local.status, local.code, local.reason]).toEqual([410, "token_expired", "exp"]);
    // Within the clock tolerance the local check lets it through, and the broker says it expired.
    const remote = await refusal(shortLived.token, optionsFor(shortLived, { clockToleranceSeconds: 120 }));
    expect([remote.status, remote.code, remote.reason]).toEqual([410, "token_expired", "expired"]);
  });

  describe("when the broker cannot be reached", () => {
    let revoked: Admitted;
    let active: Admitted;
    beforeAll(async () => {
      active = await ticket(CLUSTER, enrollment, "ctrl-6", peer(16));
      revoked = await ticket(CLUSTER, enrollment, "ctrl-7", peer(17));
      await admin().revokeAdmission(revoked.jti, "test");
      // Keys and the revocation list fetched while the broker was up.
      await verifyAdmission(active.token, optionsFor(active));
      const list = await trust.refreshRevocations();
      expect(list.revoked.has(revoked.jti)).toBe(true);
      expect((await trust.refreshRevocations()).etag).toBe(list.etag);
      await broker.stop();
    });

    it("refuses with 503 by default", async () => {
      const e = await refusal(active.token, optionsFor(active));
      expect([e.status, e.code]).toEqual([503, "broker_unavailable"]);
    });

    it("accepts, when explicitly allowed, a token that is not on a recent revocation list", async () => {
      const verified = await verifyAdmission(active.token, optionsFor(active, { revocationListFallback: { maxAgeSeconds: 60 } }));
      expect(verified.activeBy).toBe("revocation-list");
      const e = await refusal(revoked.token, optionsFor(revoked, { revocationListFallback: { maxAgeSeconds: 60 } }));
      expect([e.status, e.code]).toEqual([410, "admission_revoked"]);
    });

    it("does not accept a revocation list older than allowed", async () => {
      const e = await refusal(active.token, optionsFor(active, { revocationListFallback: { maxAgeSeconds: 60 }, now: () => Date.now() + 61_000 }));
      expect([e.status, e.code, e.reason]).toEqual([503, "broker_unavailable", "revocation_list_stale"]);
    });

    it("refuses with 503 when it never had the cluster's keys", async () => {
      const stranger = new ClusterTrust({ broker: broker.url, cluster: CLUSTER, timeoutMs: 2_000 });
      const e = await refusal(active.token, optionsFor(active, { trust: stranger }));
      expect([e.status, e.code]).toEqual([503, "broker_unavailable"]);
    });
  });
});
