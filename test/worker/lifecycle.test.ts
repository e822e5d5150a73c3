import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { abandon, admin, auditActions, bootstrapped, call, complete, enroll, heartbeat, peer, poll, sleep, ticket } from "./helpers.ts";
import { advanceTo, pollsHeld } from "./object-seams.ts";
import { WAIT_BUCKETS_SECONDS } from "../../src/broker/queue/metrics.ts";

describe("join lifecycle", () => {
  it("admits the first node of a fresh cluster at once, as its bootstrap node", async () => {
    const token = await enroll("life-boot");
    const r = await ticket("life-boot", token, "ctrl-0", peer(1));
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ cluster: "life-boot", node: "ctrl-0", state: "admitted", role: "bootstrap", peerURL: peer(1) });
    expect(r.body.admission).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(Date.parse(r.body.leaseExpiresAt)).toBeGreaterThan(Date.now());
  });

  it("queues joiners FIFO with positions while the bootstrap node works, then admits one at a time", async () => {
    const token = await enroll("life-fifo");
    const boot = await ticket("life-fifo", token, "ctrl-0", peer(1));
    const joiners = [];
    for (let i = 1; i <= 3; i++) joiners.push(await ticket("life-fifo", token, `ctrl-${i}`, peer(i + 1)));
    for (const [i, j] of joiners.entries()) {
      expect(j.status).toBe(202);
      expect(j.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(j.body).toMatchObject({ state: "queued", role: "join", position: i + 1 });
      expect(j.body.admission).toBeUndefined();
    }
    // Joiners wait for the bootstrap to complete, however long it takes.
    expect((await poll("life-fifo", token, joiners[0].body.ticket)).body.state).toBe("queued");

    expect((await complete("life-fifo", boot.body.admission, boot.body.ticket, "11")).body.state).toBe("joined");
    const first = await poll("life-fifo", token, joiners[0].body.ticket);
    expect(first.body).toMatchObject({ state: "admitted", role: "join" });
    const second = await poll("life-fifo", token, joiners[1].body.ticket);
    expect(second.body).toMatchObject({ state: "queued", position: 1 });

    expect((await complete("life-fifo", first.body.admission, first.body.ticket, "12")).status).toBe(200);
    expect((await poll("life-fifo", token, joiners[1].body.ticket)).body.state).toBe("admitted");
    expect((await poll("life-fifo", token, joiners[2].body.ticket)).body).toMatchObject({ state: "queued", position: 1 });

    const status = await admin("GET", "life-fifo");
    expect(status.body).toMatchObject({ bootstrapped: true, queue: { queued: 1, admitted: 1 } });
    expect(status.body.members.map((m: { node: string }) => m.node)).toEqual(["ctrl-0", "ctrl-1"]);
  });

  it("answers a long poll as soon as the ticket is admitted", async () => {
    const { enrollment } = await bootstrapped("life-poll");
    const a = await ticket("life-poll", enrollment, "a", peer(2));
    const b = await ticket("life-poll", enrollment, "b", peer(3));
    expect(b.body.state).toBe("queued");
    const started = Date.now();
    const held = poll("life-poll", enrollment, b.body.ticket, 20);
    await pollsHeld("life-poll");
    await complete("life-poll", a.body.admission, a.body.ticket, "22");
    const r = await held;
    expect(r.body.state).toBe("admitted");
    expect(Date.now() - started).toBeLessThan(10_000); // answered by the change, not by the 20 s wait
  });

  it("holds a long poll on an unchanged ETag and returns the same view when the wait ends", async () => {
    const { enrollment } = await bootstrapped("life-etag");
    const a = await ticket("life-etag", enrollment, "a", peer(2));
    const etag = a.headers.get("etag")!;
    const r = await poll("life-etag", enrollment, a.body.ticket, 1, { "if-none-match": etag });
    expect(r.status).toBe(200);
    expect(r.headers.get("etag")).toBe(etag);
    expect(r.body.state).toBe("admitted");
  });

  it("expires an unheartbeated lease by the alarm, revokes its token and admits the next node", async () => {
    const { enrollment } = await bootstrapped("life-lease", { leaseSeconds: 1 });
    const a = await ticket("life-lease", enrollment, "a", peer(2));
    const b = await ticket("life-lease", enrollment, "b", peer(3));
    expect(a.body.state).toBe("admitted");
    // No request touches the queue until the alarm has fired: the long poll is woken by it.
    const held = await poll("life-lease", enrollment, b.body.ticket, 15);
    expect(held.body.state).toBe("admitted");
    const expired = await poll("life-lease", enrollment, a.body.ticket);
    expect(expired.body).toMatchObject({ state: "expired", reason: "lease expired" });
    const introspection = await call("POST", "/v1/clusters/life-lease/admissions/introspect", { body: { token: a.body.admission } });
    expect(introspection.body).toEqual({ active: false, reason: "expired" });
    const audit = await admin("GET", "life-lease/audit?limit=1000");
    expect(audit.body.entries.find((e: { action: string }) => e.action === "lease.expired")).toMatchObject({ actor: "system", subject: a.body.ticket });
  });

  it("runs lease expiry in the alarm handler itself", async () => {
    const { enrollment } = await bootstrapped("life-alarm", { leaseSeconds: 1 });
    const a = await ticket("life-alarm", enrollment, "a", peer(2));
    await ticket("life-alarm", enrollment, "b", peer(3));
    const stub = env.JOIN_QUEUE.getByName("life-alarm");
    await sleep(1100);
    await runDurableObjectAlarm(stub); // true if it ran; false if the runtime's own alarm beat us to it
    const tickets = await admin("GET", "life-alarm/tickets");
    const states = Object.fromEntries(tickets.body.tickets.map((t: { node: string; state: string }) => [t.node, t.state]));
    expect(states).toMatchObject({ b0: "joined", a: "expired", b: "admitted" });
    expect(a.body.state).toBe("admitted");
  });

  it("extends the lease on heartbeat, never past the admission token's expiry", async () => {
    const { enrollment } = await bootstrapped("life-hb", { leaseSeconds: 6, admissionTtlSeconds: 10 });
    const a = await ticket("life-hb", enrollment, "a", peer(2));
    const before = Date.parse(a.body.leaseExpiresAt);
    // The object's clock is moved, not slept through: 3 s before the first lease ends...
    await advanceTo("life-hb", before - 3_000);
    const hb = await heartbeat("life-hb", a.body.admission, a.body.ticket);
    expect(hb.status).toBe(200);
    expect(Date.parse(hb.body.leaseExpiresAt)).toBeGreaterThan(before);
    expect(Date.parse(hb.body.leaseExpiresAt)).toBeLessThanOrEqual(Date.parse(hb.body.admissionExpiresAt));
    // ...then past it: only the heartbeat keeps it alive.
    await advanceTo("life-hb", before + 500);
    expect((await poll("life-hb", enrollment, a.body.ticket)).body.state).toBe("admitted");
    await admin("PUT", "life-hb/policy", { leaseSeconds: 10 });
    const capped = await heartbeat("life-hb", a.body.admission, a.body.ticket);
    expect(Date.parse(capped.body.leaseExpiresAt)).toBe(Date.parse(capped.body.admissionExpiresAt));
  });

  it("frees the slot when an admitted node abandons, and forgets a queued one", async () => {
    const { enrollment } = await bootstrapped("life-abandon");
    const a = await ticket("life-abandon", enrollment, "a", peer(2));
    const b = await ticket("life-abandon", enrollment, "b", peer(3));
    const c = await ticket("life-abandon", enrollment, "c", peer(4));
    expect((await abandon("life-abandon", enrollment, c.body.ticket)).body.state).toBe("abandoned");
    const gone = await abandon("life-abandon", a.body.admission, a.body.ticket);
    expect(gone.body.state).toBe("abandoned");
    expect((await poll("life-abandon", enrollment, b.body.ticket)).body.state).toBe("admitted");
    const intro = await call("POST", "/v1/clusters/life-abandon/admissions/introspect", { body: { token: a.body.admission } });
    expect(intro.body).toEqual({ active: false, reason: "abandoned" });
    expect(await auditActions("life-abandon")).toEqual(expect.arrayContaining(["ticket.abandoned"]));
  });

  it("admits nothing while paused and resumes in order", async () => {
    const { enrollment } = await bootstrapped("life-pause");
    expect((await admin("POST", "life-pause/pause")).body).toEqual({ paused: true });
    const a = await ticket("life-pause", enrollment, "a", peer(2));
    expect(a.body).toMatchObject({ state: "queued", position: 1 });
    expect((await admin("POST", "life-pause/resume")).body).toEqual({ paused: false });
    expect((await poll("life-pause", enrollment, a.body.ticket)).body.state).toBe("admitted");
  });

  it("admits up to maxInFlight at once", async () => {
    const { enrollment } = await bootstrapped("life-inflight", { maxInFlight: 2 });
    const views = [];
    for (const n of ["a", "b", "c"]) views.push((await ticket("life-inflight", enrollment, n, peer(views.length + 2))).body);
    expect(views.map((v) => v.state)).toEqual(["admitted", "admitted", "queued"]);
    // An admitted node learns the policy, so its etcd gets as many learner slots (--max-learners).
    expect(views.map((v) => v.maxInFlight)).toEqual([2, 2, undefined]);
  });

  it("answers 503 queue_full with Retry-After beyond maxQueue", async () => {
    const { enrollment } = await bootstrapped("life-full", { maxQueue: 1 });
    await ticket("life-full", enrollment, "a", peer(2)); // admitted
    await ticket("life-full", enrollment, "b", peer(3)); // queued (1)
    const r = await ticket("life-full", enrollment, "c", peer(4));
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(r.body.code).toBe("queue_full");
  });
});

describe("metrics", () => {
  const scrape = async (cluster: string) => {
    const r = await call("GET", `/v1/admin/clusters/${cluster}/metrics`, { token: "test-admin-token-0123456789" });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const values = new Map<string, number>();
    for (const line of String(r.body).split("\n")) {
      const m = /^(\w+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (m) values.set(m[1], Number(m[2]));
    }
    return (name: string) => values.get(name);
  };

  it("change as the queue moves", async () => {
    const { enrollment } = await bootstrapped("metrics-move");
    const l = 'cluster="metrics-move"';
    let m = await scrape("metrics-move");
    expect(m(`join_broker_queue_length{${l}}`)).toBe(0);
    expect(m(`join_broker_admissions_total{${l},role="bootstrap"}`)).toBe(1);
    expect(m(`join_broker_joins_total{${l}}`)).toBe(1);
    const a = await ticket("metrics-move", enrollment, "a", peer(2));
    await ticket("metrics-move", enrollment, "b", peer(3));
    await ticket("metrics-move", enrollment, "c", peer(4));
    m = await scrape("metrics-move");
    expect(m(`join_broker_queue_length{${l}}`)).toBe(2);
    expect(m(`join_broker_in_flight{${l}}`)).toBe(1);
    expect(m(`join_broker_admissions_total{${l},role="join"}`)).toBe(1);
    // b waits 20 s on the object's clock for the slot a's revocation frees: its wait lands between the 10 s and 30 s buckets.
    await advanceTo("metrics-move", Date.now() + 20_000);
    await admin("POST", `metrics-move/admissions/${a.body.jti}/revoke`, { reason: "test" });
    m = await scrape("metrics-move");
    expect(m(`join_broker_revocations_total{${l}}`)).toBe(1);
    expect(m(`join_broker_queue_length{${l}}`)).toBe(1);
    expect(m(`join_broker_admissions_total{${l},role="join"}`)).toBe(2);
    expect(m(`join_broker_admission_wait_seconds_count{${l}}`)).toBe(3);
    expect(m(`join_broker_admission_wait_seconds_bucket{${l},le="+Inf"}`)).toBe(3);
    // Every finite bucket, cumulative: the bootstrap and a admitted at once, b after its 20 s.
    const buckets = Object.fromEntries(WAIT_BUCKETS_SECONDS.map((le) => [le, m(`join_broker_admission_wait_seconds_bucket{${l},le="${le}"}`)]));
    expect(buckets).toEqual({ 0.1: 2, 0.5: 2, 1: 2, 5: 2, 10: 2, 30: 3, 60: 3, 120: 3, 300: 3, 600: 3, 1800: 3 });
    expect(m(`join_broker_members{${l}}`)).toBe(1);
  });
});
