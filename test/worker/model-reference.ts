/**
 * A small reference model of one cluster's join queue, for the model-based tests: a list of
 * tickets in arrival order, the admissions they were given, the members, and a handful of flags.
 * It is written from docs/protocol.md, independently of the Durable Object's SQL and of
 * src/broker/queue/policy.ts, so that the two can disagree.
 * @module
 */

export type TicketState = "queued" | "admitted" | "joined" | "expired" | "abandoned" | "revoked";
export type Role = "bootstrap" | "join";
export type AdmissionStatus = "active" | "completed" | "expired" | "abandoned" | "revoked";

export interface RefTicket {
  /** The broker's ticket id, learned from its answer. */
  id: string;
  node: string;
  peerURL: string;
  role: Role;
  state: TicketState;
  /** Arrival order; a returned bootstrap ticket keeps its place. */
  seq: number;
  /** The current (or last) admission of this ticket. */
  admission: RefAdmission | null;
  memberID: string | null;
}

export interface RefAdmission {
  node: string;
  ticket: RefTicket;
  status: AdmissionStatus;
  /** Learned once a ticket view or heartbeat showed them. */
  token: string | null;
  jti: string | null;
}

/** What the broker must answer to a ticket request. */
export type TicketRequestPrediction =
  | { kind: "view"; ticket: RefTicket; status: 200 | 201 | 202 }
  | { kind: "create"; role: Role; status: 201 | 202 }
  | { kind: "problem"; status: 409 | 503; code: string };

export class QueueModel {
  bootstrapped = false;
  bootstrapNode: string | null = null;
  paused = false;
  maxInFlight = 1;
  maxQueue = 1000;
  leaseSeconds = 60;
  /** Real lease expiries a test sequence has spent (each costs a second of waiting). */
  expiries = 0;
  readonly tickets: RefTicket[] = [];
  readonly admissions: RefAdmission[] = [];
  readonly members = new Map<string, { peerURL: string; memberID: string }>();
  #nextSeq = 1;

  latest(node: string): RefTicket | undefined {
    for (let i = this.tickets.length - 1; i >= 0; i--) if (this.tickets[i].node === node) return this.tickets[i];
    return undefined;
  }

  live(node: string): RefTicket | undefined {
    return this.tickets.find((t) => t.node === node && (t.state === "queued" || t.state === "admitted"));
  }

  queued(): RefTicket[] {
    return this.tickets.filter((t) => t.state === "queued").sort((a, b) => a.seq - b.seq);
  }

  admitted(): RefTicket[] {
    return this.tickets.filter((t) => t.state === "admitted");
  }

  /** 1 for the ticket admitted next if nothing else changes. */
  position(t: RefTicket): number {
    return this.queued().filter((q) => q.seq <= t.seq).length;
  }

  /** The ticket request rules of docs/protocol.md, in order. */
  predictRequest(node: string, peerURL: string): TicketRequestPrediction {
    const live = this.live(node);
    if (live) {
      if (live.peerURL !== peerURL) return { kind: "problem", status: 409, code: "peer_url_conflict" };
      return { kind: "view", ticket: live, status: live.state === "queued" ? 202 : 200 };
    }
    const member = this.members.get(node);
    if (member) {
      if (member.peerURL !== peerURL) return { kind: "problem", status: 409, code: "peer_url_conflict" };
      return { kind: "view", ticket: this.latest(node)!, status: 200 };
    }
    if (!this.bootstrapped && (this.bootstrapNode === null || this.bootstrapNode === node)) {
      // The one bootstrap ticket, or the same node getting it back (with the same peer URL).
      const previous = this.latest(node);
      if (previous && previous.role === "bootstrap" && previous.peerURL !== peerURL) return { kind: "problem", status: 409, code: "peer_url_conflict" };
      return { kind: "create", role: "bootstrap", status: 201 };
    }
    if (this.queued().length >= this.maxQueue) return { kind: "problem", status: 503, code: "queue_full" };
    return { kind: "create", role: "join", status: 201 };
  }

  /** Applies a ticket creation the broker reported with `id`; returns the ticket. */
  create(node: string, peerURL: string, role: Role, id: string): RefTicket {
    const previous = this.latest(node);
    if (role === "bootstrap" && previous && previous.role === "bootstrap") {
      // The bootstrap ticket comes back to its node: same ticket, same place in the queue.
      previous.state = "queued";
      previous.admission = null;
      return previous;
    }
    const t: RefTicket = { id, node, peerURL, role, state: "queued", seq: this.#nextSeq++, admission: null, memberID: null };
    this.tickets.push(t);
    if (role === "bootstrap") this.bootstrapNode = node;
    return t;
  }

  /** Fills free slots: FIFO among queued tickets of the one role that may be admitted now. */
  admit(): RefTicket[] {
    if (this.paused) return [];
    const role: Role = this.bootstrapped ? "join" : "bootstrap";
    const free = this.maxInFlight - this.admitted().length;
    const next = this.queued()
      .filter((t) => t.role === role)
      .slice(0, Math.max(0, free));
    for (const t of next) {
      t.state = "admitted";
      t.admission = { node: t.node, ticket: t, status: "active", token: null, jti: null };
      this.admissions.push(t.admission);
    }
    return next;
  }

  /** Ends an admitted ticket's admission (lease expiry, abandonment, revocation), then fills the slot. */
  end(t: RefTicket, how: "expired" | "abandoned" | "revoked"): void {
    if (t.state === "admitted") t.admission!.status = how;
    t.state = how;
    this.admit();
  }

  complete(t: RefTicket, memberID: string): void {
    t.state = "joined";
    t.memberID = memberID;
    t.admission!.status = "completed";
    this.members.set(t.node, { peerURL: t.peerURL, memberID });
    if (t.role === "bootstrap") this.bootstrapped = true;
    this.admit();
  }

  /** Is this admission the one its ticket holds now, and active? */
  active(a: RefAdmission): boolean {
    return a.status === "active" && a.ticket.state === "admitted" && a.ticket.admission === a;
  }

  /** The admission with this token, if the model learned it. */
  byToken(token: string): RefAdmission | undefined {
    return this.admissions.find((a) => a.token === token);
  }
}
