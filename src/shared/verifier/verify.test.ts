import { SignJWT, UnsecuredJWT, base64url, type JSONWebKeySet } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { admissionClaims, type AdmissionClaims } from "../protocol/claims.ts";
import { generateSigningKey, importPrivateKey, signAdmission } from "../../broker/tokens/keys.ts";
import { ClusterTrust } from "./trust.ts";
import { AdmissionError, verifyAdmission, type VerifyAdmissionOptions } from "./index.ts";

// Keys pinned in a local JWKS, so every check after the signature runs for real without a broker.
const BROKER = "https://broker.example:8443/some/prefix";
const CLUSTER = "prod-eu";
let kid: string;
let key: CryptoKey;
let jwks: JSONWebKeySet;
let options: VerifyAdmissionOptions;

function claims(over: Partial<AdmissionClaims> = {}, nowMs = Date.now()): AdmissionClaims {
  return {
    ...admissionClaims({
      issuer: "https://broker.example:8443",
      cluster: CLUSTER,
      node: "ctrl-2",
      ticket: "tkt_abc",
      peerURL: "https://10.0.0.2:2380",
      role: "join",
      jti: "adm_1",
      nowMs,
      ttlSeconds: 300,
    }),
    ...over,
  };
}

async function refusal(token: string, over: Partial<VerifyAdmissionOptions> = {}): Promise<AdmissionError> {
  const error = await verifyAdmission(token, { ...options, ...over }).then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof AdmissionError)) throw new Error(`expected an AdmissionError, got ${String(error)}`);
  return error;
}

beforeAll(async () => {
  const material = await generateSigningKey();
  kid = material.kid;
  key = await importPrivateKey(material.privateJwk);
  jwks = { keys: [material.publicJwk] };
  options = {
    broker: BROKER,
    cluster: CLUSTER,
    node: "ctrl-2",
    peerURL: "https://10.0.0.2:2380/",
    activeCheck: "none",
    trust: new ClusterTrust({ broker: BROKER, cluster: CLUSTER, jwks }),
  };
});

describe("verifyAdmission with pinned keys", () => {
  it("accepts a well-formed token bound to this node and peer", async () => {
    const ok = await verifyAdmission(await signAdmission(claims(), kid, key), options);
    expect(ok.claims.sub).toBe("ctrl-2");
    expect(ok.activeBy).toBe("unchecked");
  });

  it.each([
    ["alg none", async () => new UnsecuredJWT({ ...claims() }).encode(), 401, "invalid_token"],
    [
      "HS256 signed with the public key",
      async () => new SignJWT({ ...claims() }).setProtectedHeader({ alg: "HS256", kid, typ: "admission+jwt" }).sign(base64url.decode(jwks.keys[0]!.x!)),
      401,
      "invalid_token",
    ],
    [
      "an unknown kid",
      async () => {
        const other = await generateSigningKey();
        return signAdmission(claims(), other.kid, await importPrivateKey(other.privateJwk));
      },
      401,
      "unknown_key",
    ],
    [
      "a key that is not the kid's",
      async () => {
        const other = await generateSigningKey();
        return signAdmission(claims(), kid, await importPrivateKey(other.privateJwk));
      },
      401,
      "invalid_token",
    ],
    [
      "a tampered payload",
      async () => {
        const [h, , s] = (await signAdmission(claims(), kid, key)).split(".");
        return [
          h,
          base64url.encode(JSON.stringify(claims({ sub: "ctrl-2", peer_url: "https://10.0.0.2:2380", role: "join", exp: claims().exp + 3600 }))),
          s,
        ].join(".");
      },
      401,
      "invalid_token",
    ],
    ["expiry", async () => signAdmission(claims({}, Date.now() - 3_600_000), kid, key), 410, "token_expired"],
    ["a future nbf", async () => signAdmission(claims({ nbf: Math.floor(Date.now() / 1000) + 600 }), kid, key), 401, "token_not_yet_valid"],
    ["a wrong typ", async () => new SignJWT({ ...claims() }).setProtectedHeader({ alg: "EdDSA", kid, typ: "JWT" }).sign(key), 401, "invalid_token"],
    ["no typ", async () => new SignJWT({ ...claims() }).setProtectedHeader({ alg: "EdDSA", kid }).sign(key), 401, "invalid_token"],
    ["another cluster's aud", async () => signAdmission(claims({ aud: "etcd-join:other" }), kid, key), 401, "invalid_token"],
    ["a cluster claim that disagrees", async () => signAdmission(claims({ cluster: "other" }), kid, key), 401, "invalid_token"],
    ["another issuer", async () => signAdmission(claims({ iss: "https://evil.example" }), kid, key), 401, "invalid_token"],
    ["a missing peer_url", async () => signAdmission({ ...claims(), peer_url: undefined } as unknown as AdmissionClaims, kid, key), 401, "invalid_token"],
    ["another node's sub", async () => signAdmission(claims({ sub: "ctrl-3" }), kid, key), 403, "wrong_node"],
    ["another peer_url", async () => signAdmission(claims({ peer_url: "https://10.0.0.9:2380" }), kid, key), 403, "wrong_peer_url"],
    ["the bootstrap role", async () => signAdmission(claims({ role: "bootstrap" }), kid, key), 403, "wrong_role"],
  ] as const)("refuses %s", async (_name, make, status, code) => {
    const error = await refusal(await make());
    expect([error.status, error.code]).toEqual([status, code]);
  });

  it("names the issuer it got and the one it expects, so that localhost vs 127.0.0.1 is plain to see", async () => {
    const error = await refusal(await signAdmission(claims({ iss: "http://localhost:8787" }), kid, key));
    expect(error.message).toContain('issued by "http://localhost:8787"');
    expect(error.message).toContain('expects "https://broker.example:8443"');
    const aud = await refusal(await signAdmission(claims({ aud: "etcd-join:other" }), kid, key));
    expect(aud.message).toContain('audience "etcd-join:other"');
    expect(aud.message).toContain(`expects "etcd-join:${CLUSTER}"`);
  });

  it("allows skew within the clock tolerance and not beyond", async () => {
    const token = await signAdmission(claims({}, Date.now() + 20_000), kid, key);
    await expect(verifyAdmission(token, { ...options, clockToleranceSeconds: 30 })).resolves.toBeTruthy();
    expect((await refusal(token, { clockToleranceSeconds: 5 })).code).toBe("token_not_yet_valid");
  });

  it("accepts the bootstrap role only when asked to", async () => {
    const token = await signAdmission(claims({ role: "bootstrap" }), kid, key);
    await expect(verifyAdmission(token, { ...options, role: "bootstrap" })).resolves.toBeTruthy();
  });

  it("does not need a peer URL to bind when the request names none", async () => {
    const token = await signAdmission(claims(), kid, key);
    await expect(verifyAdmission(token, { ...options, peerURL: undefined })).resolves.toBeTruthy();
  });

  it("refuses an empty token and garbage", async () => {
    expect((await refusal("")).status).toBe(401);
    expect((await refusal("a.b.c")).code).toBe("invalid_token");
  });
});

describe("ClusterTrust.introspect", () => {
  const answering = (body: unknown, headers: Record<string, string> = {}) =>
    new ClusterTrust({ broker: BROKER, cluster: CLUSTER, jwks: { keys: [] }, fetch: async () => Response.json(body, { headers }) });

  it("counts the lease left on the broker's clock (its Date header), not on this machine's", async () => {
    // This machine's clock is wherever it is; the broker says it is 10:00:00 and the lease ends at 10:00:30.
    const answer = await answering(
      { active: true, claims: { sub: "ctrl-2" }, leaseExpiresAt: "2026-12-03T10:00:30.000Z" },
      { date: "Thu, 03 Dec 2026 10:00:00 GMT" },
    ).introspect("t");
    // The header has whole seconds, so the broker may be at 10:00:00.999: 29 001 ms left at most.
    expect(answer).toEqual({ active: true, claims: { sub: "ctrl-2" }, leaseRemainingMs: 29_001 });
  });

  it("says nothing of a lease the broker did not name, and passes an inactive answer's reason on", async () => {
    expect(await answering({ active: true, claims: {} }).introspect("t")).toEqual({ active: true, claims: {} });
    expect(await answering({ active: false, reason: "revoked" }).introspect("t")).toEqual({ active: false, reason: "revoked" });
  });
});
