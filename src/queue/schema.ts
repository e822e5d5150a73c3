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
      -- Rows are never deleted, so the rowid alone keeps seq increasing (no AUTOINCREMENT write).
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
    name: "enrollment token scopes",
    // JSON arrays, or NULL for "any": node name globs and peer hosts (names, addresses, CIDRs).
    sql: `
      ALTER TABLE enrollment_tokens ADD COLUMN nodes TEXT;
      ALTER TABLE enrollment_tokens ADD COLUMN peer_hosts TEXT;
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
  const applied = new Set(sql.exec<{ id: number }>(`SELECT id FROM _sql_schema_migrations`).toArray().map((r) => r.id));
  for (const m of MIGRATIONS) {
    if (applied.has(m.id) || m.id > upTo) continue;
    storage.transactionSync(() => {
      sql.exec(m.sql);
      sql.exec(`INSERT INTO _sql_schema_migrations (id, name, applied_at) VALUES (?, ?, ?)`, m.id, m.name, nowMs);
    });
  }
}

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].id;
