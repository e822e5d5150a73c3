// Package admission verifies the admission tokens an etcd join broker issues, for a
// controllers' join API written in Go (k0s's POST /v1beta1/etcd/members handler, a kubeadm or
// k3s wrapper, a cluster-API provider).
//
// An admission token is a short-lived JWT (alg EdDSA, typ admission+jwt) the broker signs with
// the cluster's key once a node's turn to join has come. A join API that calls Verify before it
// adds the node's etcd member (as a learner) lets only the admitted node, at the admitted peer
// URL, join, one admission at a time.
//
// Verify checks, in order:
//
//   - the signature with the cluster's public key: alg EdDSA only (never none, never HS256),
//     the kid looked up in the cluster's JWKS ({broker}/v1/clusters/{cluster}/jwks.json), which is
//     cached for 10 minutes and refetched once on an unknown kid (after a key rotation);
//   - typ admission+jwt, iss (the broker's origin), aud etcd-join:{cluster}, the required claims,
//     exp and nbf with a clock skew (30 s by default);
//   - the binding to the request: sub is the node, peer_url the peer URL it would add (compared
//     in canonical form, as the TypeScript verifier does: see CanonicalPeerURL), role join;
//   - that the admission is still active, by asking the broker (introspection). By default a
//     broker that cannot be asked means no admission (BrokerUnavailable, 503).
//
// Offline fallback: with Options.RevocationListFallback set, a verifier that cannot reach the
// broker for introspection accepts a token whose jti is not on the broker's revocation list
// ({broker}/v1/clusters/{cluster}/revocations), fetched at most that long ago (a fresh one is
// fetched first if possible). A token revoked after the last fetch is then accepted, so keep the
// limit short (tens of seconds). This mirrors the TypeScript verifier's revocationListFallback.
//
// Every refusal is an *Error whose Code (and HTTP status) is the same as the TypeScript
// verifier's and the join API's problem codes: 401 invalid_token, unknown_key,
// token_not_yet_valid; 403 wrong_node, wrong_peer_url, wrong_role; 410 token_expired,
// admission_revoked, admission_completed, admission_inactive; 503 broker_unavailable. Answer a
// 503 with Retry-After so the node asks again; never answer 500 for any of them.
//
// Both verifiers are held to the same test vectors (integrations/vectors/admission-vectors.json),
// made from a real broker by scripts/vectors.mjs.
//
// Package joinhandler in this module is a k0s-style join handler built on Verify.
package admission
