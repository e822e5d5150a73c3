// `npm run vectors`: regenerates integrations/vectors/admission-vectors.json, the test vectors
// every admission verifier (TypeScript in src/shared/verifier, Go in integrations/go) is held to.
//
// It starts a real broker (wrangler dev, as the end-to-end tests do), has it issue admission
// tokens (a bootstrap, joins, one revoked, one completed, one after a key rotation, one of another
// cluster), records its JWKS and revocation list, and adds forgeries made with a key of our own.
// Each case says the token, the request it is checked against, the time (unix seconds) to verify
// at, and the expected outcome: the claims, or the refusal's status and code.
//
// Verifiers check the vectors offline: the cluster's keys pinned to `jwks` (plus `forgerJwks`
// where a case says `trustForger`), introspection unreachable, and the revocation list fallback
// allowed with `revocations` as the broker's list.
import { writeFileSync } from "node:fs";
import { register } from "tsx/esm/api";

register();
const { brokerClient, enrollCluster, startBroker } = await import("../test/support/stack.ts");
const { generateSigningKey, importPrivateKey, signAdmission } = await import("../src/broker/tokens/keys.ts");
const { CompactSign, SignJWT, UnsecuredJWT, base64url, decodeJwt } = await import("jose");

const OUT = new URL("../integrations/vectors/admission-vectors.json", import.meta.url);
const CLUSTER = "vectors";
const OTHER = "vectors-other";
const peer = (n) => `https://10.0.0.${n}:2380`;

/** [a, b, same peer?]: written by hand, so that each verifier's canonical form is checked, not copied. */
const PEER_URL_PAIRS = [
  ["https://10.0.0.1:2380", "https://10.0.0.1:2380/", true],
  ["https://10.0.0.1:2380", "HTTPS://10.0.0.1:2380", true],
  ["https://ctrl-1.example:2380", "https://CTRL-1.Example:2380", true],
  ["https://[::1]:2380", "https://[0:0:0:0:0:0:0:1]:2380", true],
  ["https://[::1]:2380", "https://[0000:0000::0001]:2380", true],
  ["https://[fd00::a:0:0:0:1]:2380", "https://[FD00:0:0:A::1]:2380", true],
  ["https://[fd00:0:0:a::1]:2380", "https://[FD00:0:0:A:0:0:0:1]:2380", true],
  ["https://[2001:db8:0:0:1:0:0:1]:2380", "https://[2001:db8::1:0:0:1]:2380", true],
  ["https://[2001:db8:0:1:1:1:1:1]:2380", "https://[2001:db8::1:1:1:1:1]:2380", true],
  ["https://[::ffff:10.0.0.1]:2380", "https://[::ffff:a00:1]:2380", true],
  ["https://[::ffff:10.0.0.1]:2380", "https://10.0.0.1:2380", false],
  ["https://[::1]:2380", "https://[::1%25eth0]:2380", false],
  ["https://10.0.0.1:2380", "https://10.0.0.1", false],
  ["https://10.0.0.1:443", "https://10.0.0.1", false],
  ["http://10.0.0.1:80", "http://10.0.0.1", false],
  ["https://10.0.0.1:2380", "https://10.0.0.1:02380", false],
  ["https://10.0.0.1:2380", "http://10.0.0.1:2380", false],
  ["https://10.0.0.1:2380", "https://010.0.0.1:2380", false],
  ["https://127.0.0.1:2380", "https://2130706433:2380", false],
  ["https://10.0.0.1:2380", "https://10.0.0.1:2380//", false],
  ["https://10.0.0.1:2380", " https://10.0.0.1:2380", false],
  ["https://10.0.0.1:2380", "https://user@10.0.0.1:2380", false],
  ["https://10.0.0.1:2380", "https://10.0.0.1:2380/x", false],
  ["ftp://10.0.0.1:2380", "FTP://10.0.0.1:2380", false],
  ["not a url/", "not a url", true],
  ["https://10.0.0.1:99999", "https://10.0.0.1:99999/", true],
  ["https://10.0.0.1:99999", "HTTPS://10.0.0.1:99999", false],
];

process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

console.log("Starting a broker (wrangler dev)…");
const broker = await startBroker();
try {
  const admin = brokerClient(broker).admin(CLUSTER);
  const enroll = (cluster) => enrollCluster(broker, cluster);
  const ticket = async (cluster, enrollment, node, peerURL) => {
    const { status, body } = await brokerClient(broker, { bearer: enrollment }).cluster(cluster).requestTicket(node, peerURL);
    if (body.state !== "admitted") throw new Error(`expected an admitted ticket for ${node}, got ${status} ${JSON.stringify(body)}`);
    return { node, peerURL, ticket: body.ticket, token: body.admission, claims: decodeJwt(body.admission) };
  };
  const complete = (cluster, a, memberID) => brokerClient(broker, { bearer: a.token }).cluster(cluster).complete(a.ticket, memberID);

  const enrollment = await enroll(CLUSTER);
  const boot = await ticket(CLUSTER, enrollment, "ctrl-0", peer(10));
  await complete(CLUSTER, boot, "1000");
  await admin.setPolicy({ maxInFlight: 8 });
  const joiner = await ticket(CLUSTER, enrollment, "ctrl-1", peer(11));
  const revoked = await ticket(CLUSTER, enrollment, "ctrl-2", peer(12));
  await admin.revokeAdmission(revoked.claims.jti, "test vector");
  const completed = await ticket(CLUSTER, enrollment, "ctrl-3", peer(13));
  await complete(CLUSTER, completed, "1003");
  await admin.rotateKeys();
  const rotated = await ticket(CLUSTER, enrollment, "ctrl-4", peer(14));
  const loopback6 = await ticket(CLUSTER, enrollment, "ctrl-5", "https://[::1]:2380");
  const named = await ticket(CLUSTER, enrollment, "ctrl-6", "https://ctrl-6.example:2380");
  const stranger = await ticket(OTHER, await enroll(OTHER), "ctrl-1", peer(11));
  const jwks = (await brokerClient(broker).cluster(CLUSTER).jwks()).body;
  const revocations = (await brokerClient(broker).cluster(CLUSTER).revocations()).body;
  if (jwks.keys.length < 2) throw new Error(`expected the rotated JWKS to hold two keys: ${JSON.stringify(jwks)}`);

  // Forgeries: a key of our own, which some cases tell the verifier to trust, so that the checks
  // after the signature are what refuses them.
  const forger = await generateSigningKey();
  const forgerKey = await importPrivateKey(forger.privateJwk);
  const forge = (claims, header = {}) =>
    new SignJWT(claims).setProtectedHeader({ alg: "EdDSA", kid: forger.kid, typ: "admission+jwt", ...header }).sign(forgerKey);
  const without = (claims, name) => Object.fromEntries(Object.entries(claims).filter(([k]) => k !== name));

  const j = joiner.claims;
  const at = Math.max(...[joiner, revoked, completed, rotated, loopback6, named].map((a) => a.claims.iat)) + 5;
  const bind = (a, over = {}) => ({ node: a.node, peerURL: a.peerURL, ...over });
  const ok = (a) => ({
    ok: true,
    claims: { sub: a.claims.sub, jti: a.claims.jti, role: a.claims.role, peer_url: a.claims.peer_url, ticket: a.claims.ticket, exp: a.claims.exp },
  });
  const no = (status, code) => ({ ok: false, status, code });
  const [h, , s] = joiner.token.split(".");

  const cases = [
    { name: "a join token, bound to its node and peer", token: joiner.token, request: bind(joiner), expect: ok(joiner) },
    { name: "the peer URL with a trailing slash", token: joiner.token, request: bind(joiner, { peerURL: `${joiner.peerURL}/` }), expect: ok(joiner) },
    { name: "a token signed with the rotated (newer) key", token: rotated.token, request: bind(rotated), expect: ok(rotated) },
    { name: "a token of the retired key, before it expires", token: joiner.token, request: bind(joiner), at: at + 60, expect: ok(joiner) },
    {
      name: "the bootstrap token where role bootstrap is accepted",
      token: boot.token,
      request: bind(boot, { role: "bootstrap" }),
      at: boot.claims.iat + 5,
      expect: { ...no(410, "admission_completed") },
    },
    { name: "another node", token: joiner.token, request: bind(joiner, { node: "ctrl-9" }), expect: no(403, "wrong_node") },
    { name: "another peer URL", token: joiner.token, request: bind(joiner, { peerURL: peer(19) }), expect: no(403, "wrong_peer_url") },
    // Peer URLs are compared in their canonical form (src/shared/protocol/peer-url.ts; `peerURLs` below).
    {
      name: "the peer URL with its scheme in upper case",
      token: joiner.token,
      request: bind(joiner, { peerURL: "HTTPS://10.0.0.11:2380" }),
      expect: ok(joiner),
    },
    {
      name: "the peer URL without its port (no default port)",
      token: joiner.token,
      request: bind(joiner, { peerURL: "https://10.0.0.11" }),
      expect: no(403, "wrong_peer_url"),
    },
    {
      name: "the peer URL as an IPv4-mapped IPv6 address",
      token: joiner.token,
      request: bind(joiner, { peerURL: "https://[::ffff:10.0.0.11]:2380" }),
      expect: no(403, "wrong_peer_url"),
    },
    { name: "an IPv6 peer URL, as signed", token: loopback6.token, request: bind(loopback6), expect: ok(loopback6) },
    {
      name: "an IPv6 peer URL written in full",
      token: loopback6.token,
      request: bind(loopback6, { peerURL: "https://[0:0:0:0:0:0:0:1]:2380" }),
      expect: ok(loopback6),
    },
    {
      name: "an IPv6 peer URL with leading zeros, in upper case",
      token: loopback6.token,
      request: bind(loopback6, { peerURL: "HTTPS://[0000::0001]:2380/" }),
      expect: ok(loopback6),
    },
    { name: "another IPv6 peer URL", token: loopback6.token, request: bind(loopback6, { peerURL: "https://[::2]:2380" }), expect: no(403, "wrong_peer_url") },
    { name: "a DNS peer URL in mixed case", token: named.token, request: bind(named, { peerURL: "Https://CTRL-6.Example:2380" }), expect: ok(named) },
    {
      name: "a DNS peer URL with another port",
      token: named.token,
      request: bind(named, { peerURL: "https://ctrl-6.example:2381" }),
      expect: no(403, "wrong_peer_url"),
    },
    { name: "a bootstrap token at a join call", token: boot.token, request: bind(boot), at: boot.claims.iat + 5, expect: no(403, "wrong_role") },
    { name: "expired, beyond the default 30 s clock skew", token: joiner.token, request: bind(joiner), at: j.exp + 31, expect: no(410, "token_expired") },
    { name: "just expired, within the default 30 s clock skew", token: joiner.token, request: bind(joiner), at: j.exp + 29, expect: ok(joiner) },
    {
      name: "just expired, with no clock skew",
      token: joiner.token,
      request: bind(joiner, { clockSkewSeconds: 0 }),
      at: j.exp,
      expect: no(410, "token_expired"),
    },
    { name: "not valid yet, beyond the clock skew", token: joiner.token, request: bind(joiner), at: j.nbf - 31, expect: no(401, "token_not_yet_valid") },
    { name: "not valid yet, within the clock skew", token: joiner.token, request: bind(joiner), at: j.nbf - 29, expect: ok(joiner) },
    { name: "revoked (on the revocation list)", token: revoked.token, request: bind(revoked), expect: no(410, "admission_revoked") },
    { name: "completed (on the revocation list)", token: completed.token, request: bind(completed), expect: no(410, "admission_completed") },
    { name: "another cluster's token (its key)", token: stranger.token, request: bind(stranger, { role: "any" }), expect: no(401, "unknown_key") },
    { name: "a kid no key of the cluster has", token: await signAdmission(j, forger.kid, forgerKey), request: bind(joiner), expect: no(401, "unknown_key") },
    { name: "alg none", token: new UnsecuredJWT({ ...j }).encode(), request: bind(joiner), expect: no(401, "invalid_token") },
    {
      name: "HS256 keyed with the cluster's public key",
      token: await new SignJWT({ ...j })
        .setProtectedHeader({ alg: "HS256", kid: jwks.keys[0].kid, typ: "admission+jwt" })
        .sign(base64url.decode(jwks.keys[0].x)),
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "a tampered payload (exp pushed back)",
      token: `${h}.${base64url.encode(JSON.stringify({ ...j, exp: j.exp + 86_400 }))}.${s}`,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "a tampered payload (another node)",
      token: `${h}.${base64url.encode(JSON.stringify({ ...j, sub: "ctrl-9" }))}.${s}`,
      request: bind(joiner, { node: "ctrl-9" }),
      expect: no(401, "invalid_token"),
    },
    {
      name: "another key's signature under the cluster's kid",
      token: await signAdmission(j, jwks.keys[0].kid, forgerKey),
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    { name: "not a JWT", token: "not.a-jwt", request: bind(joiner), expect: no(401, "invalid_token") },
    { name: "empty", token: "", request: bind(joiner), expect: no(401, "invalid_token") },
    {
      name: "trusted key: well-formed",
      token: await forge({ ...j, jti: "adm_forged_ok" }),
      trustForger: true,
      request: bind(joiner),
      expect: { ok: true, claims: { ...ok(joiner).claims, jti: "adm_forged_ok" } },
    },
    { name: "trusted key: typ JWT", token: await forge({ ...j }, { typ: "JWT" }), trustForger: true, request: bind(joiner), expect: no(401, "invalid_token") },
    {
      name: "trusted key: no typ",
      token: await forge({ ...j }, { typ: undefined }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: typ application/admission+jwt",
      token: await forge({ ...j }, { typ: "application/admission+jwt" }),
      trustForger: true,
      request: bind(joiner),
      expect: { ok: true, claims: ok(joiner).claims },
    },
    {
      name: "trusted key: another audience",
      token: await forge({ ...j, aud: `etcd-join:${OTHER}` }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: audience as an array holding ours",
      token: await forge({ ...j, aud: ["x", j.aud] }),
      trustForger: true,
      request: bind(joiner),
      expect: { ok: true, claims: ok(joiner).claims },
    },
    {
      name: "trusted key: another issuer",
      token: await forge({ ...j, iss: "https://evil.example" }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: another cluster claim",
      token: await forge({ ...j, cluster: OTHER }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: no ticket claim",
      token: await forge(without(j, "ticket")),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    { name: "trusted key: no exp claim", token: await forge(without(j, "exp")), trustForger: true, request: bind(joiner), expect: no(401, "invalid_token") },
    {
      name: "trusted key: exp as a string",
      token: await forge({ ...j, exp: String(j.exp) }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: an unknown role",
      token: await forge({ ...j, role: "admin" }),
      trustForger: true,
      request: bind(joiner, { role: "any" }),
      expect: no(401, "invalid_token"),
    },
    { name: "trusted key: sub not a string", token: await forge({ ...j, sub: 7 }), trustForger: true, request: bind(joiner), expect: no(401, "invalid_token") },
    {
      name: "trusted key: iat as a string",
      token: await forge({ ...j, iat: String(j.iat) }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: nbf ahead and exp not a number (nbf is checked first)",
      token: await forge({ ...j, nbf: j.iat + 3_600, exp: "soon" }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "token_not_yet_valid"),
    },
    {
      name: "trusted key: typ in upper case",
      token: await forge({ ...j }, { typ: "ADMISSION+JWT" }),
      trustForger: true,
      request: bind(joiner),
      expect: { ok: true, claims: ok(joiner).claims },
    },
    {
      name: "trusted key: a payload that is not an object",
      token: await new CompactSign(new TextEncoder().encode("[1]")).setProtectedHeader({ alg: "EdDSA", kid: forger.kid, typ: "admission+jwt" }).sign(forgerKey),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
    {
      name: "trusted key: nbf an hour ahead",
      token: await forge({ ...j, nbf: j.iat + 3_600 }),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "token_not_yet_valid"),
    },
    {
      name: "trusted key: HS256 is still not EdDSA",
      token: await new SignJWT({ ...j }).setProtectedHeader({ alg: "HS256", kid: forger.kid, typ: "admission+jwt" }).sign(new Uint8Array(32)),
      trustForger: true,
      request: bind(joiner),
      expect: no(401, "invalid_token"),
    },
  ];

  const vectors = {
    description:
      "Admission token test vectors, produced by scripts/vectors.mjs from a real broker. Verify each case offline: the cluster's keys pinned to `jwks` (plus `forgerJwks` when `trustForger`), introspection unreachable, the revocation list fallback allowed (60 s) with `revocations` as the broker's answer, the clock at `at` (unix seconds; default `verifyAt`), the request's node and peer URL, role `join` unless the request says otherwise, clock skew 30 s unless `clockSkewSeconds`.",
    generatedAt: new Date().toISOString(),
    broker: broker.url,
    issuer: new URL(broker.url).origin,
    cluster: CLUSTER,
    verifyAt: at,
    jwks,
    forgerJwks: { keys: [forger.publicJwk] },
    revocations,
    cases: cases.map((c) => ({ ...c, at: c.at ?? at })),
    peerURLsDescription:
      "Pairs of peer URLs and whether a verifier takes them for the same peer: both in their canonical form (scheme://host:port, scheme and host in lower case, IPv6 as RFC 5952 writes it, the port always named and without leading zeros, an optional trailing slash), or, for a value that is no valid peer URL, as written less one trailing slash.",
    peerURLs: PEER_URL_PAIRS.map(([a, b, same]) => ({ a, b, same })),
  };
  writeFileSync(OUT, `${JSON.stringify(vectors, null, 2)}\n`);
  console.log(`Wrote ${cases.length} cases to ${OUT.pathname}`);
} finally {
  await broker.stop();
}
