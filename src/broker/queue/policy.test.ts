/**
 * Property tests of the queue rules: a small in-memory queue driven only by policy.ts's
 * decisions, over thousands of random operation sequences.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_POLICY,
  admissibleUnderStartRule,
  admittableRole,
  freeSlots,
  decideTicketRequest,
  leaseEnd,
  retryAfterSeconds,
  transition,
  validatePolicy,
  type ClusterFacts,
  type QueuePolicy,
  type Role,
  type TicketState,
} from "./policy.ts";

interface Ticket {
  id: number;
  seq: number;
  node: string;
  role: Role;
  state: TicketState;
}

class Queue {
  tickets: Ticket[] = [];
  members = new Set<string>();
  cluster: ClusterFacts = { bootstrapped: false, adopted: false, bootstrapNode: null, paused: false, restored: false };
  policy: QueuePolicy = { ...DEFAULT_POLICY, maxQueue: 5 };
  admissions: { ticket: Ticket; role: Role; inFlightAfter: number; bootstrapped: boolean }[] = [];
  nextSeq = 1;

  live(node: string) {
    return this.tickets.find((t) => t.node === node && (t.state === "queued" || t.state === "admitted")) ?? null;
  }

  request(node: string) {
    const live = this.live(node);
    const d = decideTicketRequest({
      cluster: this.cluster,
      node,
      peerURL: `p-${node}`,
      live: live && { peerURL: `p-${node}` },
      member: this.members.has(node) ? { peerURL: `p-${node}` } : null,
      queuedCount: this.tickets.filter((t) => t.state === "queued").length,
      policy: this.policy,
    });
    if (d.kind === "new") {
      this.tickets.push({ id: this.tickets.length + 1, seq: this.nextSeq++, node, role: d.role, state: "queued" });
      if (d.role === "bootstrap") this.cluster.bootstrapNode = node;
    } else if (d.kind === "revive_bootstrap") {
      const own = [...this.tickets].reverse().find((t) => t.node === node && t.role === "bootstrap")!;
      own.state = transition(own.state, "revive")!;
    }
    this.admit();
  }

  apply(id: number, event: "complete" | "expire" | "abandon" | "revoke") {
    const t = this.tickets.find((x) => x.id === id);
    if (!t) return;
    const next = transition(t.state, event);
    if (!next) return;
    t.state = next;
    if (event === "complete") {
      this.members.add(t.node);
      if (t.role === "bootstrap") this.cluster.bootstrapped = true;
    }
    this.admit();
  }

  admit() {
    const inFlight = this.tickets.filter((t) => t.state === "admitted").length;
    const role = admittableRole(this.cluster);
    const slots = freeSlots(inFlight, this.policy, this.cluster);
    const chosen =
      role === null
        ? []
        : this.tickets
            .filter((t) => t.state === "queued" && t.role === role)
            .sort((a, b) => a.seq - b.seq)
            .slice(0, slots);
    chosen.forEach((t, i) => {
      t.state = transition(t.state, "admit")!;
      this.admissions.push({ ticket: t, role: t.role, inFlightAfter: inFlight + i + 1, bootstrapped: this.cluster.bootstrapped || this.cluster.adopted });
    });
  }
}

const nodes = ["n0", "n1", "n2", "n3", "n4", "n5"];
const op = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("request" as const), node: fc.constantFrom(...nodes) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constantFrom("complete" as const, "expire" as const, "abandon" as const, "revoke" as const),
      ticket: fc.integer({ min: 1, max: 30 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom("pause" as const, "resume" as const, "adopt" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("maxInFlight" as const), n: fc.integer({ min: 1, max: 3 }) }) },
);
type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;

function step(q: Queue, o: Op): void {
  if (o.kind === "request") q.request(o.node);
  else if (o.kind === "pause") q.cluster.paused = true;
  else if (o.kind === "resume") (q.cluster.paused = false), q.admit();
  else if (o.kind === "adopt") {
    // The broker refuses adoption once a bootstrap ticket is out.
    if (q.cluster.bootstrapNode === null) (q.cluster.adopted = true), q.admit();
  } else if (o.kind === "maxInFlight") (q.policy.maxInFlight = o.n), q.admit();
  else if ("ticket" in o) q.apply(o.ticket, o.kind);
}

function run(ops: Op[]): Queue {
  const q = new Queue();
  for (const o of ops) step(q, o);
  return q;
}

describe("queue policy properties", () => {
  const sequences = fc.array(op, { minLength: 1, maxLength: 60 });

  it("never admits more than maxInFlight at once", () => {
    fc.assert(
      fc.property(sequences, (ops) => {
        const q = new Queue();
        for (const o of ops) {
          const before = q.admissions.length;
          step(q, o);
          for (const a of q.admissions.slice(before)) expect(a.inFlightAfter).toBeLessThanOrEqual(q.policy.maxInFlight);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it("admits joiners in FIFO order, each ticket at most once, and only into an existing cluster", () => {
    fc.assert(
      fc.property(sequences, (ops) => {
        const q = run(ops);
        const joins = q.admissions.filter((a) => a.role === "join");
        const seqs = joins.map((a) => a.ticket.seq);
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
        expect(new Set(joins.map((a) => a.ticket.id)).size).toBe(joins.length);
        for (const a of joins) expect(a.bootstrapped).toBe(true);
        // FIFO: no queued joiner is older than an admitted one.
        const lastAdmitted = Math.max(0, ...seqs);
        const waiting = q.tickets.filter((t) => t.state === "queued" && t.role === "join" && t.seq < lastAdmitted);
        expect(waiting).toEqual([]);
      }),
      { numRuns: 3000 },
    );
  });

  it("issues at most one bootstrap ticket, to one node, and none to an adopted cluster", () => {
    fc.assert(
      fc.property(sequences, (ops) => {
        const q = run(ops);
        const boots = q.tickets.filter((t) => t.role === "bootstrap");
        expect(boots.length).toBeLessThanOrEqual(1);
        if (q.cluster.adopted) expect(boots).toEqual([]);
        // Only the bootstrap node's own ticket can create the cluster.
        if (q.cluster.bootstrapped) expect(q.members.has(q.cluster.bootstrapNode!)).toBe(true);
        // Joiners wait for the cluster: none is admitted, or joined, before it exists.
        if (!q.cluster.bootstrapped && !q.cluster.adopted)
          expect(q.tickets.filter((t) => t.role === "join" && t.state !== "queued" && t.state !== "abandoned")).toEqual([]);
      }),
      { numRuns: 3000 },
    );
  });

  it("never lets a lease outlive its admission token", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 1, max: 3600 }), fc.integer({ min: 0, max: 86400 }), (now, lease, ttl) => {
        const policy = { ...DEFAULT_POLICY, leaseSeconds: lease };
        const exp = Math.floor(now / 1000) + ttl;
        expect(leaseEnd(now, policy, exp)).toBeLessThanOrEqual(exp * 1000);
        expect(leaseEnd(now, policy, exp)).toBeLessThanOrEqual(now + lease * 1000);
      }),
    );
  });

  it("asks queued nodes to come back within 1 to 30 seconds", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 100000 }), fc.double({ min: 0, max: 3600, noNaN: true }), fc.integer({ min: 1, max: 16 }), (pos, typical, max) => {
        const s = retryAfterSeconds(pos, typical, { ...DEFAULT_POLICY, maxInFlight: max });
        expect(Number.isInteger(s) && s >= 1 && s <= 30).toBe(true);
      }),
    );
  });

  it("validates policies", () => {
    expect(validatePolicy(DEFAULT_POLICY)).toBeNull();
    expect(validatePolicy({ ...DEFAULT_POLICY, maxInFlight: 0 })).toMatch(/maxInFlight/);
    expect(validatePolicy({ ...DEFAULT_POLICY, leaseSeconds: 1000, admissionTtlSeconds: 100 })).toMatch(/leaseSeconds/);
  });

  it("in a restored state that looks never bootstrapped, grants no bootstrap, new or returning, and admits nobody", () => {
    const facts = (over: Partial<ClusterFacts>): ClusterFacts => ({
      bootstrapped: false,
      adopted: false,
      bootstrapNode: null,
      paused: false,
      restored: true,
      ...over,
    });
    const ask = (cluster: ClusterFacts, node: string) =>
      decideTicketRequest({ cluster, node, peerURL: "p", live: null, member: null, queuedCount: 0, policy: DEFAULT_POLICY }).kind;
    expect(ask(facts({}), "n1")).toBe("restored_awaiting_admin");
    expect(ask(facts({ bootstrapNode: "n1" }), "n1")).toBe("restored_awaiting_admin");
    expect(ask(facts({ bootstrapNode: "n1" }), "n2"), "joiners still queue").toBe("new");
    expect(admittableRole(facts({ bootstrapNode: "n1" }))).toBeNull();
    expect(ask(facts({ bootstrapped: true }), "n1"), "once bootstrapped, a restore changes nothing").toBe("new");
    expect(admittableRole(facts({ adopted: true }))).toBe("join");
    expect(ask(facts({ restored: false }), "n1")).toBe("new");
  });

  it("start rule: an unstarted member of an installer that adds its own is never beside another unstarted one, and a queue whose admitted members all started moves", () => {
    type T = { exclusiveUntilStarted: boolean; started: boolean };
    const step = fc.oneof(fc.record({ kind: fc.constant("start" as const), i: fc.nat() }), fc.record({ kind: fc.constant("finish" as const), i: fc.nat() }));
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }),
        fc.array(step, { maxLength: 40 }),
        fc.integer({ min: 1, max: 4 }),
        (kinds, steps, slots) => {
          const queued = kinds.map((exclusiveUntilStarted) => ({ exclusiveUntilStarted }));
          const admitted: T[] = [];
          const admit = () => {
            const n = Math.min(slots - admitted.length, admissibleUnderStartRule(admitted, queued.slice(0, Math.max(0, slots - admitted.length))));
            for (const t of queued.splice(0, n)) admitted.push({ ...t, started: false });
          };
          const check = () => {
            const unstarted = admitted.filter((t) => !t.started);
            if (unstarted.some((t) => t.exclusiveUntilStarted)) expect(unstarted).toHaveLength(1);
            // Progress: with a free slot, every admitted member started and someone queued, someone goes.
            if (queued.length > 0 && admitted.length < slots && unstarted.length === 0) expect.unreachable("a queue that could move did not");
          };
          admit();
          check();
          for (const s of steps) {
            if (admitted.length === 0) break;
            const t = admitted[s.i % admitted.length];
            if (s.kind === "start") t.started = true;
            else admitted.splice(admitted.indexOf(t), 1);
            admit();
            check();
          }
        },
      ),
    );
  });
});
