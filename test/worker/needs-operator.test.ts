/**
 * A node that gives up its admission leaving a member in etcd it could not remove (`POST
 * …/tickets/{ticket}/stuck`): its ticket ends, and the cluster is paused and marked as needing an
 * operator in the same step, so that the next node is not admitted into a cluster that cannot
 * take it. The admin's status, the metrics and the audit log show it; resume clears it.
 */
import { describe, expect, it } from "vitest";
import { ADMIN, admin, auditActions, bootstrapped, call, peer, poll, ticket } from "./helpers.ts";

const stuck = (cluster: string, token: string, id: string, body: unknown) => call("POST", `/v1/clusters/${cluster}/tickets/${id}/stuck`, { token, body });
const DETAIL =
  "could not remove member 2a (a voter, never started) from etcd within 120 s: etcdserver: request timed out. Remove it: etcdctl --endpoints=https://localhost:2379 member remove 2a";

describe("a member left for an operator", () => {
  it("ends the ticket and pauses the cluster at once: the next node stays queued until an admin resumes", async () => {
    const { enrollment } = await bootstrapped("stuck-pause");
    const a = (await ticket("stuck-pause", enrollment, "a", peer(2))).body;
    const b = (await ticket("stuck-pause", enrollment, "b", peer(3))).body;
    expect([a.state, b.state]).toEqual(["admitted", "queued"]);

    const reply = await stuck("stuck-pause", a.admission, a.ticket, { memberID: "42", detail: DETAIL });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ ticket: a.ticket, state: "abandoned" });
    // The slot is free, yet b is not admitted: the cluster is paused for the operator.
    const bNow = (await poll("stuck-pause", enrollment, b.ticket)).body;
    expect(bNow).toMatchObject({ state: "queued", position: 1, waitingFor: "paused" });

    const status = (await admin("GET", "stuck-pause")).body;
    expect(status.paused).toBe(true);
    expect(status.needsOperator).toEqual({ node: "a", ticket: a.ticket, memberID: "42", detail: DETAIL, at: expect.stringMatching(/Z$/) });
    const metrics = await call("GET", "/v1/admin/clusters/stuck-pause/metrics", { token: ADMIN });
    expect(metrics.body).toContain('join_broker_needs_operator{cluster="stuck-pause"} 1');
    expect(metrics.body).toContain('join_broker_paused{cluster="stuck-pause"} 1');
    const audit = (await admin("GET", "stuck-pause/audit")).body.entries as { action: string; detail: Record<string, unknown> }[];
    expect(audit.find((e) => e.action === "cluster.needs_operator")?.detail).toMatchObject({ node: "a", ticket: a.ticket, memberID: "42", detail: DETAIL });
    // The admission is over: introspection says so, and the token opens nothing more.
    expect((await call("POST", "/v1/clusters/stuck-pause/admissions/introspect", { body: { token: a.admission } })).body).toEqual({
      active: false,
      reason: "abandoned",
    });
    expect((await stuck("stuck-pause", a.admission, a.ticket, { memberID: "42", detail: DETAIL })).status).toBe(410);

    // The operator removed the member; resuming clears the mark and admits b.
    expect((await admin("POST", "stuck-pause/resume")).body).toEqual({ paused: false });
    expect((await admin("GET", "stuck-pause")).body).toMatchObject({ paused: false, needsOperator: null });
    expect((await poll("stuck-pause", enrollment, b.ticket)).body.state).toBe("admitted");
    const metricsAfter = await call("GET", "/v1/admin/clusters/stuck-pause/metrics", { token: ADMIN });
    expect(metricsAfter.body).toContain('join_broker_needs_operator{cluster="stuck-pause"} 0');
    const actions = await auditActions("stuck-pause");
    expect(actions.slice(actions.indexOf("cluster.needs_operator"))).toEqual(expect.arrayContaining(["cluster.needs_operator", "cluster.resumed"]));
    const resumed = ((await admin("GET", "stuck-pause/audit")).body.entries as { action: string; detail: Record<string, unknown> }[]).find(
      (e) => e.action === "cluster.resumed",
    );
    expect(resumed?.detail).toMatchObject({ needsOperatorCleared: { node: "a", memberID: "42" } });
  });

  it("takes only the ticket's current admission, and a member ID and a reason", async () => {
    const { enrollment } = await bootstrapped("stuck-auth");
    const a = (await ticket("stuck-auth", enrollment, "a", peer(2))).body;
    const byEnrollment = await stuck("stuck-auth", enrollment, a.ticket, { memberID: "42", detail: DETAIL });
    expect({ status: byEnrollment.status, code: byEnrollment.body.code }).toEqual({ status: 403, code: "wrong_token_kind" });
    for (const body of [{ memberID: "42" }, { memberID: "x", detail: "d" }, { memberID: "42", detail: "" }, { memberID: "42", detail: "d", extra: 1 }]) {
      const bad = await stuck("stuck-auth", a.admission, a.ticket, body);
      expect({ status: bad.status, code: bad.body.code }, JSON.stringify(body)).toEqual({ status: 400, code: "invalid_request" });
    }
    // Nothing changed: still admitted, not paused.
    expect((await poll("stuck-auth", enrollment, a.ticket)).body.state).toBe("admitted");
    expect((await admin("GET", "stuck-auth")).body).toMatchObject({ paused: false, needsOperator: null });
  });
});
