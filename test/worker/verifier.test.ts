/** The admission verifier runs in Workers too: here inside workerd, reaching the broker as a service. */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ClusterTrust, verifyAdmission, type AdmissionError } from "../../src/shared/verifier/index.ts";
import { admin, BASE, bootstrapped, peer, ticket } from "./helpers.ts";

const trustFor = (cluster: string) => new ClusterTrust({ broker: BASE, cluster, fetch: (input, init) => exports.default.fetch(input as string, init) });

describe("verifyAdmission in workerd", () => {
  it("accepts a broker-issued join token and refuses it once revoked, or for another node", async () => {
    const { enrollment } = await bootstrapped("wv-verify");
    const a = await ticket("wv-verify", enrollment, "a", peer(2));
    const trust = trustFor("wv-verify");
    const ok = await verifyAdmission(a.body.admission, { broker: BASE, cluster: "wv-verify", node: "a", peerURL: peer(2), trust });
    expect(ok).toMatchObject({ activeBy: "introspection", claims: { sub: "a", role: "join", ticket: a.body.ticket } });

    const wrongNode = await verifyAdmission(a.body.admission, { broker: BASE, cluster: "wv-verify", node: "b", peerURL: peer(2), trust }).catch(
      (e: AdmissionError) => e,
    );
    expect(wrongNode).toMatchObject({ status: 403, code: "wrong_node" });

    await admin("POST", `wv-verify/admissions/${a.body.jti}/revoke`, { reason: "test" });
    const revoked = await verifyAdmission(a.body.admission, { broker: BASE, cluster: "wv-verify", node: "a", peerURL: peer(2), trust }).catch(
      (e: AdmissionError) => e,
    );
    expect(revoked).toMatchObject({ status: 410, code: "admission_revoked" });
  });

  it("introspection names when an active admission's lease ends, as the ticket's view does", async () => {
    const { enrollment } = await bootstrapped("wv-lease", { leaseSeconds: 60 });
    const a = await ticket("wv-lease", enrollment, "a", peer(2));
    const trust = trustFor("wv-lease");
    const answer = await trust.introspect(a.body.admission);
    if (!answer.active) throw new Error(answer.reason);
    expect(answer.leaseRemainingMs).toBeGreaterThan(50_000);
    expect(answer.leaseRemainingMs).toBeLessThanOrEqual(60_000);
    const raw = await exports.default.fetch(`${BASE}/v1/clusters/wv-lease/admissions/introspect`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: a.body.admission }),
    });
    expect(((await raw.json()) as { leaseExpiresAt?: string }).leaseExpiresAt).toBe(a.body.leaseExpiresAt);
  });
});
