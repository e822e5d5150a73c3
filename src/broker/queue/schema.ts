import { WAIT_BUCKETS_SECONDS } from "./metrics.ts";

/**
 * The JoinQueue's SQLite schema, applied as numbered migrations recorded in a table
 * (Durable Objects do not support PRAGMA user_version).
 * @module
 */

const MIGRATIONS: { id: number; name: string; sql: string }[] = [
  {
    id: 1,
    name: "initial",
    sql: `
      CREATE TABLE cluster (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        name TEXT NOT NULL,
        issuer TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        bootstrapped INTEGER NOT NULL DEFAULT 0,
        adopted INTEGER NOT NULL DEFAULT 0,
        bootstrap_node TEXT,
        paused INTEGER NOT NULL DEFAULT 0,
        max_in_flight INTEGER NOT NULL,
        lease_seconds INTEGER NOT NULL,
        admission_ttl_seconds INTEGER NOT NULL,
        max_queue INTEGER NOT NULL,
        typical_admission_ms INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE tickets (
        id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,
        node TEXT NOT NULL,
        peer_url TEXT NOT NULL,
        role TEXT NOT NULL,
        state TEXT NOT NULL,
        version INTEGER NOT NULL DEFAULT 1,
        enrollment_token_id TEXT,
        created_at INTEGER NOT NULL,
        admitted_at INTEGER,
        lease_expires_at INTEGER,
        jti TEXT,
        ended_at INTEGER,
        end_reason TEXT,
        member_id TEXT
      );
      CREATE UNIQUE INDEX tickets_one_live_per_node ON tickets (node) WHERE state IN ('queued', 'admitted');
      CREATE INDEX tickets_by_state ON tickets (state, seq);
      CREATE INDEX tickets_by_lease ON tickets (lease_expires_at) WHERE state = 'admitted';
      CREATE INDEX tickets_by_node ON tickets (node, seq);
      CREATE TABLE admissions (
        jti TEXT PRIMARY KEY,
        ticket_id TEXT NOT NULL,
        node TEXT NOT NULL,
        kid TEXT NOT NULL,
        token TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        status TEXT NOT NULL,
        ended_at INTEGER,
        reason TEXT
      );
      CREATE INDEX admissions_inactive ON admissions (expires_at) WHERE status <> 'active';
      CREATE TABLE enrollment_tokens (
        id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        description TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        max_uses INTEGER,
        uses INTEGER NOT NULL DEFAULT 0,
        revoked_at INTEGER
      );
      CREATE TABLE signing_keys (
        kid TEXT PRIMARY KEY,
        private_jwk TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        retired_at INTEGER,
        keep_until INTEGER
      );
      CREATE TABLE members (
        node TEXT PRIMARY KEY,
        peer_url TEXT NOT NULL,
        member_id TEXT,
        source TEXT NOT NULL,
        joined_at INTEGER NOT NULL
      );
      -- Retention never deletes the newest row, so the rowid alone keeps seq increasing (no AUTOINCREMENT write).
      CREATE TABLE audit_log (
        seq INTEGER PRIMARY KEY,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        subject TEXT NOT NULL,
        detail TEXT NOT NULL
      );
    `,
  },
  {
    id: 2,
    name: "enrollment token uses counted by the ticket insert",
    // A new ticket is one use of the enrollment token it was requested with (a bootstrap ticket
    // returned to its node is an update, not a use). Counting it in the insert itself saves a
    // statement on every ticket request; the use limit is checked before the insert.
    sql: `
      CREATE TRIGGER tickets_count_enrollment_use AFTER INSERT ON tickets
      WHEN NEW.enrollment_token_id IS NOT NULL
      BEGIN
        UPDATE enrollment_tokens SET uses = uses + 1 WHERE id = NEW.enrollment_token_id;
      END;
    `,
  },
  {
    id: 3,
    name: "counters kept by the writes",
    // What /metrics reports, counted by triggers in the same statement that changes the row, so
    // that a scrape reads a few rows instead of scanning history (which the alarm now deletes).
    // Existing history is counted once, here.
    sql: `
      ALTER TABLE cluster ADD COLUMN swept_at INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL DEFAULT 0, bound_ms INTEGER) WITHOUT ROWID;
      INSERT INTO counters (name, value) SELECT 'ticket.ended.' || s.state, (SELECT count(*) FROM tickets t WHERE t.state = s.state)
        FROM (SELECT 'joined' AS state UNION ALL SELECT 'expired' UNION ALL SELECT 'abandoned' UNION ALL SELECT 'revoked') s;
      INSERT INTO counters (name, value) SELECT 'admission.ended.' || s.status, (SELECT count(*) FROM admissions a WHERE a.status = s.status)
        FROM (SELECT 'completed' AS status UNION ALL SELECT 'expired' UNION ALL SELECT 'abandoned' UNION ALL SELECT 'revoked') s;
      INSERT INTO counters (name, value) SELECT 'admitted.' || r.role, (SELECT count(*) FROM admissions a JOIN tickets t ON t.id = a.ticket_id WHERE t.role = r.role)
        FROM (SELECT 'bootstrap' AS role UNION ALL SELECT 'join') r;
      INSERT INTO counters (name, value) SELECT 'wait.count', count(*) FROM tickets WHERE admitted_at IS NOT NULL;
      INSERT INTO counters (name, value) SELECT 'wait.sum_ms', coalesce(sum(admitted_at - created_at), 0) FROM tickets WHERE admitted_at IS NOT NULL;
      ${WAIT_BUCKETS_SECONDS.map((b, i) => `INSERT INTO counters (name, value, bound_ms) SELECT 'wait.le.${i}', count(*), ${Math.round(b * 1000)} FROM tickets WHERE admitted_at IS NOT NULL AND admitted_at - created_at <= ${Math.round(b * 1000)};`).join("\n      ")}
      CREATE TRIGGER tickets_count_end AFTER UPDATE OF state ON tickets
      WHEN NEW.state <> OLD.state AND NEW.state IN ('joined', 'expired', 'abandoned', 'revoked')
      BEGIN
        UPDATE counters SET value = value + 1 WHERE name = 'ticket.ended.' || NEW.state;
      END;
      CREATE TRIGGER tickets_count_admission AFTER UPDATE OF state ON tickets
      WHEN NEW.state = 'admitted' AND OLD.state <> 'admitted'
      BEGIN
        UPDATE counters SET value = value + 1
          WHERE name IN ('admitted.' || NEW.role, 'wait.count') OR bound_ms >= NEW.admitted_at - NEW.created_at;
        UPDATE counters SET value = value + (NEW.admitted_at - NEW.created_at) WHERE name = 'wait.sum_ms';
      END;
      CREATE TRIGGER admissions_count_end AFTER UPDATE OF status ON admissions
      WHEN OLD.status = 'active' AND NEW.status <> 'active'
      BEGIN
        UPDATE counters SET value = value + 1 WHERE name = 'admission.ended.' || NEW.status;
      END;
    `,
  },
  {
    id: 4,
    name: "enrollment token scopes",
    // JSON arrays, or NULL for "any": node name globs and peer hosts (names, addresses, CIDRs).
    sql: `
      ALTER TABLE enrollment_tokens ADD COLUMN nodes TEXT;
      ALTER TABLE enrollment_tokens ADD COLUMN peer_hosts TEXT;
    `,
  },
  {
    id: 5,
    name: "restored state awaits an admin",
    // restored_at: set when the state came back from an earlier point; until an admin decides, a
    // cluster that looks never bootstrapped gets no bootstrap. restore_id: the self-hosted
    // restore this cluster last took note of, so that each restore marks it once.
    sql: `
      ALTER TABLE cluster ADD COLUMN restored_at INTEGER;
      ALTER TABLE cluster ADD COLUMN restore_id TEXT;
    `,
  },
  {
    id: 6,
    name: "live tickets counted by the writes",
    // How many tickets are queued and admitted, which every ticket request and admission reads:
    // kept by triggers on every insert, state change and delete of a ticket, so that no write can
    // leave them behind, and read as two rows instead of counting a long queue. Counted once here.
    sql: `
      INSERT INTO counters (name, value) SELECT 'ticket.live.' || s.state, (SELECT count(*) FROM tickets t WHERE t.state = s.state)
        FROM (SELECT 'queued' AS state UNION ALL SELECT 'admitted') s;
      CREATE TRIGGER tickets_count_live_insert AFTER INSERT ON tickets
      WHEN NEW.state IN ('queued', 'admitted')
      BEGIN
        UPDATE counters SET value = value + 1 WHERE name = 'ticket.live.' || NEW.state;
      END;
      CREATE TRIGGER tickets_count_live_move AFTER UPDATE OF state ON tickets
      WHEN NEW.state <> OLD.state AND (NEW.state IN ('queued', 'admitted') OR OLD.state IN ('queued', 'admitted'))
      BEGIN
        UPDATE counters SET value = value + (name = 'ticket.live.' || NEW.state) - (name = 'ticket.live.' || OLD.state)
          WHERE name IN ('ticket.live.' || NEW.state, 'ticket.live.' || OLD.state);
      END;
      CREATE TRIGGER tickets_count_live_delete AFTER DELETE ON tickets
      WHEN OLD.state IN ('queued', 'admitted')
      BEGIN
        UPDATE counters SET value = value - 1 WHERE name = 'ticket.live.' || OLD.state;
      END;
    `,
  },
  {
    id: 7,
    name: "admissions exclusive until the member started",
    // exclusive_until_started: the node's installer adds its own member and writes its
    // --initial-cluster from etcd's member list (gate mode), so no other node is admitted beside
    // it until its member has started, nor beside another's unstarted member.
    // member_started_at: when the node reported its etcd member started (its etcd runs as a member).
    sql: `
      ALTER TABLE tickets ADD COLUMN exclusive_until_started INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE tickets ADD COLUMN member_started_at INTEGER;
    `,
  },
  {
    id: 8,
    name: "a cluster that needs an operator",
    // needs_operator: JSON {node, ticket, memberID, detail, at} when a node gave up its admission
    // leaving a member in etcd that it could not remove (a cluster without quorum, say); the
    // cluster is paused with it, and an admin's resume clears both.
    sql: `
      ALTER TABLE cluster ADD COLUMN needs_operator TEXT;
    `,
  },
];

/** Whether this object has a schema at all: objects that only ever answered reads have none. */
export function hasSchema(storage: DurableObjectStorage): boolean {
  return storage.sql.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sql_schema_migrations'`).toArray().length > 0;
}

/** Applies every migration not yet recorded, up to `upTo`, each in its own transaction. */
export function migrate(storage: DurableObjectStorage, nowMs: number, upTo = Number.POSITIVE_INFINITY): void {
  const sql = storage.sql;
  sql.exec(`CREATE TABLE IF NOT EXISTS _sql_schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = new Set(
    sql
      .exec<{ id: number }>(`SELECT id FROM _sql_schema_migrations`)
      .toArray()
      .map((r) => r.id),
  );
  for (const m of MIGRATIONS) {
    if (applied.has(m.id) || m.id > upTo) continue;
    storage.transactionSync(() => {
      sql.exec(m.sql);
      sql.exec(`INSERT INTO _sql_schema_migrations (id, name, applied_at) VALUES (?, ?, ?)`, m.id, m.name, nowMs);
    });
  }
}

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].id;
