/**
 * Read-only admin credentials, kept by the cluster index's instance (cluster-index.ts) for the
 * whole broker: one place to look a bearer up, whichever cluster it reads. Only the SHA-256 of
 * a secret is stored; the secret is shown once, by the Worker that made it. Each change is one
 * synchronous command (read, check, write) in `transactionSync`.
 * @module
 */
import type { AdminCredential } from "../../shared/protocol/wire.ts";

export type AdminCredentialRow = {
  id: string;
  token_hash: string;
  cluster: string | null;
  description: string | null;
  created_at: number;
  revoked_at: number | null;
};

/** What the broker answers about a credential: the contract's wire type. */
export type AdminCredentialView = AdminCredential;

export function adminCredentialView(row: AdminCredentialRow): AdminCredentialView {
  return {
    id: row.id,
    readOnly: true,
    cluster: row.cluster,
    ...(row.description === null ? {} : { description: row.description }),
    createdAt: new Date(row.created_at).toISOString(),
    ...(row.revoked_at === null ? {} : { revokedAt: new Date(row.revoked_at).toISOString() }),
    state: row.revoked_at === null ? "active" : "revoked",
  };
}

export class AdminCredentials {
  constructor(private readonly storage: DurableObjectStorage) {
    storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS admin_credentials (id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, cluster TEXT, description TEXT, created_at INTEGER NOT NULL, revoked_at INTEGER)`,
    );
  }

  create(row: Omit<AdminCredentialRow, "revoked_at">): AdminCredentialRow {
    return this.storage.transactionSync(() => {
      this.storage.sql.exec(
        `INSERT INTO admin_credentials (id, token_hash, cluster, description, created_at) VALUES (?, ?, ?, ?, ?)`,
        row.id,
        row.token_hash,
        row.cluster,
        row.description,
        row.created_at,
      );
      return this.#byId(row.id)!;
    });
  }

  list(): AdminCredentialRow[] {
    return this.storage.sql.exec<AdminCredentialRow>(`SELECT * FROM admin_credentials ORDER BY created_at, id`).toArray();
  }

  /** Revokes once; `changed` is false when it was revoked already. Null: no such credential. */
  revoke(id: string, nowMs: number): { row: AdminCredentialRow; changed: boolean } | null {
    return this.storage.transactionSync(() => {
      const row = this.#byId(id);
      if (!row) return null;
      if (row.revoked_at !== null) return { row, changed: false };
      this.storage.sql.exec(`UPDATE admin_credentials SET revoked_at = ? WHERE id = ?`, nowMs, id);
      return { row: this.#byId(id)!, changed: true };
    });
  }

  /** The active credential with this hash, or null (unknown or revoked alike). */
  active(tokenHash: string): AdminCredentialRow | null {
    const row = this.storage.sql.exec<AdminCredentialRow>(`SELECT * FROM admin_credentials WHERE token_hash = ?`, tokenHash).toArray()[0];
    return row && row.revoked_at === null ? row : null;
  }

  #byId(id: string): AdminCredentialRow | null {
    return this.storage.sql.exec<AdminCredentialRow>(`SELECT * FROM admin_credentials WHERE id = ?`, id).toArray()[0] ?? null;
  }
}
