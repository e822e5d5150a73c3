/**
 * GET /v1/admin/clusters: every cluster on the broker, by name, whichever way it came to exist
 * (a first enrollment token, or adopt); nothing for reads of clusters that do not exist.
 */
import { describe, expect, it } from "vitest";
import { ADMIN, admin, call, enroll } from "./helpers.ts";

describe("the cluster list", () => {
  it("lists each cluster once, by name, and needs the admin token", async () => {
    expect((await call("GET", "/v1/admin/clusters", { token: ADMIN })).body).toEqual({ clusters: [] });
    await enroll("idx-b");
    await enroll("idx-b");
    await admin("POST", "idx-a/adopt", { members: [{ node: "m1", peerURL: "https://10.0.0.1:2380" }] });
    // Reading a cluster that does not exist creates nothing, in the list either.
    expect((await admin("GET", "idx-missing")).status).toBe(404);
    const r = await call("GET", "/v1/admin/clusters", { token: ADMIN });
    expect(r.status).toBe(200);
    expect(r.body.clusters.map((c: { name: string }) => c.name)).toEqual(["idx-a", "idx-b"]);
    for (const c of r.body.clusters) expect(Date.parse(c.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    expect((await call("GET", "/v1/admin/clusters", { token: "wrong" })).status).toBe(401);
  });
});
