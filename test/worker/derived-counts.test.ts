/**
 * What the store derives from the tickets (how many are queued and admitted, the next seq, the
 * earliest lease end, queue positions) against a fresh count by SQL, after every command of random sequences
 * that move tickets every way there is: requests, admissions, completions, abandons,
 * revocations, lease expiry, retention sweeps, bootstrap hand-overs, restores, adoptions and
 * commands rolled back halfway. The commands run as the object runs them (QueueCommands over the
 * object's own SQLite database), with time passed in.
 * @module
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { QueueCommands } from "../../src/broker/queue/commands.ts";
import type { Principal } from "../../src/broker/queue/credentials.ts";
import { DEFAULT_POLICY } from "../../src/broker/queue/policy.ts";
import { migrate } from "../../src/broker/queue/schema.ts";
import { QueueStore, type TicketRow } from "../../src/broker/queue/store.ts";

const NODES = ["n0", "n1", "n2", "n3"];
const ENROLLMENT = "enr_test";
const KID = "kid_test";
const enrollment: Principal = { kind: "enrollment", id: ENROLLMENT, scope: {} };

interface World {
  sql: SqlStorage;
  store: QueueStore;
  commands: QueueCommands;
  now: number;
  jtis: number;
}

type Step = { name: string; run: (w: World) => void; toString: () => string };
/** A step reported by its name in a counterexample. */
const step = (name: string, run: (w: World) => void): Step => ({ name, run, toString: () => name });

const node = fc.constantFrom(...NODES);
const live = (w: World, n: string): TicketRow | null => w.store.liveTicketOf(n);
const admission = (t: TicketRow): Principal => ({
  kind: "admission",
  jti: t.jti!,
  ticket: t.id,
  exp: Math.floor(t.lease_expires_at! / 1000) + 600,
  payload: {},
});

/** What the object does after every command: free slots take the first in line. */
function admitWaiting(w: World): void {
  const plan = w.commands.planAdmissions();
  if (!plan) return;
  const iat = Math.floor(w.now / 1000);
  w.commands.admit(
    w.now,
    KID,
    plan.tickets.map((ticket) => ({ ticket, claims: { jti: `adm_${++w.jtis}`, iat, exp: iat + 600 }, token: "signed" })),
  );
}

/** Weighted: what moves tickets comes up more often than admin changes. */
const steps: { weight: number; arbitrary: fc.Arbitrary<Step> }[] = [
  { weight: 5, arbitrary: node.map((n) => step(`request ${n}`, (w) => void w.commands.requestTicket(w.now, ENROLLMENT, n, `https://${n}:2380`))) },
  {
    weight: 1,
    arbitrary: node.map((n) => step(`request ${n} (another peer)`, (w) => void w.commands.requestTicket(w.now, ENROLLMENT, n, `https://other-${n}:2380`))),
  },
  {
    weight: 5,
    arbitrary: node.map((n) =>
      step(`complete ${n}`, (w) => {
        const t = live(w, n);
        if (t?.state === "admitted") w.commands.complete(w.now, admission(t), t.id, `${n}-member`);
      }),
    ),
  },
  {
    weight: 2,
    arbitrary: node.map((n) =>
      step(`abandon ${n}`, (w) => {
        const t = live(w, n);
        if (t) w.commands.abandon(w.now, t.state === "admitted" ? admission(t) : enrollment, t.id);
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: node.map((n) =>
      step(`revoke the admission of ${n}`, (w) => {
        const t = live(w, n);
        if (t?.jti) w.commands.revokeAdmission(w.now, t.jti, "test");
      }),
    ),
  },
  {
    weight: 3,
    arbitrary: fc.integer({ min: 1, max: 240 }).map((s) =>
      step(`${s} s pass, then the alarm`, (w) => {
        w.now += s * 1000;
        w.commands.settle(w.now, true);
      }),
    ),
  },
  { weight: 2, arbitrary: fc.constant(step("retention sweep", (w) => void w.commands.sweep(w.now))) },
  { weight: 1, arbitrary: node.map((n) => step(`bootstrap reassigned to ${n}`, (w) => void w.commands.reassignBootstrap(w.now, n, "test"))) },
  { weight: 1, arbitrary: fc.constant(step("restored", (w) => void w.commands.markRestored(w.now, "admin", "test"))) },
  { weight: 1, arbitrary: fc.constant(step("bootstrap allowed", (w) => void w.commands.allowBootstrap(w.now, "test"))) },
  {
    weight: 1,
    arbitrary: fc.subarray(NODES, { minLength: 1 }).map((ns) =>
      step(
        `adopt ${ns.join(",")}`,
        (w) =>
          void w.commands.adopt(
            w.now,
            "c",
            ns.map((n) => ({ node: n, peerURL: `https://${n}:2380` })),
          ),
      ),
    ),
  },
  { weight: 1, arbitrary: node.map((n) => step(`forget member ${n}`, (w) => void w.commands.forgetMember(w.now, n))) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 3 }).map((f) => step(`maxInFlight ${f}`, (w) => void w.commands.setPolicy(w.now, "c", { maxInFlight: f }))),
  },
  { weight: 1, arbitrary: fc.constantFrom(false, false, true).map((p) => step(p ? "pause" : "resume", (w) => w.commands.setPaused(w.now, "c", p))) },
  {
    weight: 2,
    arbitrary: node.map((n) =>
      step(`a command that ends ${n}'s ticket, then fails`, (w) => {
        const t = live(w, n);
        if (!t) return;
        expect(() =>
          w.commands.run(() => {
            w.store.updateTicket(t.id, t.state, { state: "abandoned", ended_at: w.now });
            throw new Error("fails after its write");
          }),
        ).toThrow("fails after its write");
      }),
    ),
  },
];

/** What the store says against what the tickets table says. */
function expectDerivedCounts(w: World, after: string): void {
  const byState = new Map(
    w.sql
      .exec<{ state: string; n: number }>(`SELECT state, COUNT(*) AS n FROM tickets GROUP BY state`)
      .toArray()
      .map((r) => [r.state, r.n]),
  );
  const fresh = w.sql
    .exec<{ seq: number | null; lease: number | null }>(
      `SELECT max(seq) AS seq, (SELECT min(lease_expires_at) FROM tickets WHERE state = 'admitted') AS lease FROM tickets`,
    )
    .one();
  expect(
    { queued: w.store.liveCount("queued"), admitted: w.store.liveCount("admitted"), nextSeq: w.store.nextSeq(), earliestLease: w.store.earliestLeaseEnd() },
    `after ${after}`,
  ).toEqual({
    queued: byState.get("queued") ?? 0,
    admitted: byState.get("admitted") ?? 0,
    nextSeq: (fresh.seq ?? 0) + 1,
    earliestLease: fresh.lease,
  });
  const queued = w.sql.exec<{ seq: number }>(`SELECT seq FROM tickets WHERE state = 'queued' ORDER BY seq`).toArray();
  expect(
    queued.map((t) => w.store.position(t.seq)),
    `positions after ${after}`,
  ).toEqual(queued.map((_, i) => i + 1));
}

let objects = 0;

async function runSequence(sequence: Step[]): Promise<void> {
  await runInDurableObject(env.JOIN_QUEUE.getByName(`derived-counts-${++objects}`), (_instance, state) => {
    const start = 1_800_000_000_000;
    migrate(state.storage, start);
    const store = new QueueStore(state.storage.sql);
    store.schemaReady = true;
    // History is kept 1 minute: a sweep after some steps deletes ended tickets.
    const retention = { endedTicketSeconds: 60, endedAdmissionSeconds: 60, endedEnrollmentTokenSeconds: 60, auditSeconds: 60, sweepIntervalSeconds: 60 };
    const commands = new QueueCommands(store, state.storage, {
      logLevel: () => "warn",
      settleLazily: () => true,
      clusterName: () => "c",
      retention: () => retention,
    });
    commands.run(() => {
      store.createCluster("c", "https://broker.test", { ...DEFAULT_POLICY, maxQueue: 3 }, start);
      store.insertKey({ kid: KID, private_jwk: "{}", public_jwk: "{}", created_at: start });
      store.insertEnrollmentToken({
        id: ENROLLMENT,
        token_hash: "hash",
        description: null,
        created_at: start,
        expires_at: null,
        max_uses: null,
        nodes: null,
        peer_hosts: null,
      });
    });
    const w: World = { sql: state.storage.sql, store, commands, now: start, jtis: 0 };
    expectDerivedCounts(w, "the cluster was created");
    for (const step of sequence) {
      step.run(w);
      expectDerivedCounts(w, step.name);
      admitWaiting(w);
      commands.takeEffects();
      expectDerivedCounts(w, `${step.name}, then the admissions that follow`);
    }
  });
}

describe("the store's derived counts", () => {
  beforeAll(() => {
    // Commands log their audit rows at "info" only above the level given; keep the report clean all the same.
    vi.spyOn(console, "log").mockImplementation(() => {});
  });
  afterAll(() => {
    vi.restoreAllMocks();
  });

  it("equal a fresh count by SQL after every command of random sequences", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(...steps), { minLength: 1, maxLength: 40, size: "max" }), (sequence) => runSequence(sequence)),
      { numRuns: 150 },
    );
  }, 300_000);
});
