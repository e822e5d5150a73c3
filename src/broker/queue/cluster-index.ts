/**
 * The list of clusters this broker holds, for `admin clusters` and the console's cluster picker.
 * Each cluster is its own Durable Object, and Durable Objects cannot be enumerated, so one more
 * JoinQueue instance, under a name no cluster can have, keeps the names: a cluster adds itself
 * when it is created, and an older cluster the first time it wakes after this was deployed.
 * The index is a convenience for people: nothing in the join protocol reads it. The same
 * instance also keeps the broker's read-only admin credentials (admin-credentials.ts).
 * @module
 */

/** The index's instance name: `~` is outside the cluster-name alphabet, so no cluster collides. */
export const CLUSTER_INDEX_NAME = "~clusters";

/** Set in a cluster's own storage once the index knows it. */
export const INDEXED_KEY = "cluster-index.registered";

export interface IndexedCluster {
  name: string;
  createdAt: string;
}

export class ClusterIndex {
  constructor(readonly sql: SqlStorage) {
    sql.exec(`CREATE TABLE IF NOT EXISTS cluster_index (name TEXT PRIMARY KEY, created_at INTEGER NOT NULL)`);
  }

  add(name: string, createdAtMs: number): void {
    this.sql.exec(`INSERT INTO cluster_index (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, createdAtMs);
  }

  list(): IndexedCluster[] {
    return this.sql
      .exec<{ name: string; created_at: number }>(`SELECT name, created_at FROM cluster_index ORDER BY name`)
      .toArray()
      .map((r) => ({ name: r.name, createdAt: new Date(r.created_at).toISOString() }));
  }
}
