/**
 * Schema migrations on a real Durable Object database: a database made by an older version is
 * upgraded in place, and what the newer migrations add works on the rows it already had.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { SCHEMA_VERSION, migrate } from "../../src/broker/queue/schema.ts";

describe("schema migrations", () => {
  it("upgrades a version-1 database step by step: what each migration counts starts from the rows already there", async () => {
    await runInDurableObject(env.JOIN_QUEUE.getByName("schema-upgrade"), (_instance, state) => {
      const sql = state.storage.sql;
      const uses = () => sql.exec<{ uses: number }>(`SELECT uses FROM enrollment_tokens WHERE id = 'enr_a'`).one().uses;
      /** The migrations applied so far, by id. */
      const applied = () =>
        sql
          .exec<{ id: number }>(`SELECT id FROM _sql_schema_migrations ORDER BY id`)
          .toArray()
          .map((r) => r.id);
      const insertTicket = (id: string, seq: number, token: string | null) =>
        sql.exec(
          `INSERT INTO tickets (id, seq, node, peer_url, role, state, enrollment_token_id, created_at) VALUES (?, ?, ?, 'https://n:2380', 'join', 'queued', ?, 1)`,
          id,
          seq,
          `node-${seq}`,
          token,
        );

      migrate(state.storage, 1, 1);
      sql.exec(`INSERT INTO enrollment_tokens (id, token_hash, created_at, uses) VALUES ('enr_a', 'hash-a', 1, 2)`);
      insertTicket("tkt_old", 1, "enr_a");
      expect(uses(), "version 1 counts nothing by itself").toBe(2);

      migrate(state.storage, 2, 2);
      expect(applied()).toEqual([1, 2]);
      expect(uses(), "the upgrade leaves existing counts alone").toBe(2);

      insertTicket("tkt_new", 2, "enr_a");
      expect(uses(), "a new ticket is one use of its token").toBe(3);
      insertTicket("tkt_none", 3, null);
      sql.exec(`UPDATE tickets SET state = 'expired' WHERE id = 'tkt_new'`);
      expect(uses(), "tickets without a token, and updates, count nothing").toBe(3);

      migrate(state.storage, 3, 2);
      expect(sql.exec(`SELECT id FROM _sql_schema_migrations`).toArray()).toHaveLength(2);

      // Version 3: counters for /metrics, counted once from the history already there, then by the writes.
      migrate(state.storage, 4, 3);
      expect(applied()).toEqual([1, 2, 3]);
      const counter = (name: string) => sql.exec<{ value: number }>(`SELECT value FROM counters WHERE name = ?`, name).one().value;
      expect(counter("ticket.ended.expired"), "existing history counted").toBe(1);
      sql.exec(`UPDATE tickets SET state = 'abandoned' WHERE id = 'tkt_old'`);
      expect(counter("ticket.ended.abandoned"), "counted by the write").toBe(1);
      sql.exec(`UPDATE tickets SET state = 'admitted', admitted_at = 301 WHERE id = 'tkt_none'`);
      expect([counter("admitted.join"), counter("wait.count"), counter("wait.sum_ms"), counter("wait.le.0"), counter("wait.le.1")]).toEqual([1, 1, 300, 0, 1]);

      // Version 4: enrollment token scopes; tokens from before scopes existed stay unrestricted.
      migrate(state.storage, 5, 4);
      expect(sql.exec(`SELECT nodes, peer_hosts FROM enrollment_tokens WHERE id = 'enr_a'`).one()).toEqual({ nodes: null, peer_hosts: null });

      // Version 5: a restored state awaiting an admin; clusters from before were never marked.
      migrate(state.storage, 6, 5);
      expect(sql.exec(`SELECT restored_at, restore_id FROM cluster`).toArray()).toEqual(
        sql.exec(`SELECT count(*) AS n FROM cluster`).one().n ? [{ restored_at: null, restore_id: null }] : [],
      );

      // Version 6: live tickets counted by the writes, counted once from the tickets already there.
      insertTicket("tkt_queued", 4, null);
      migrate(state.storage, 7, 6);
      const live = () => [counter("ticket.live.queued"), counter("ticket.live.admitted")];
      expect(live(), "existing tickets counted").toEqual([1, 1]);
      insertTicket("tkt_next", 5, null);
      expect(live(), "an insert counts").toEqual([2, 1]);
      sql.exec(`UPDATE tickets SET state = 'admitted', admitted_at = 2 WHERE id = 'tkt_queued'`);
      sql.exec(`UPDATE tickets SET state = 'joined' WHERE id = 'tkt_none'`);
      sql.exec(`UPDATE tickets SET state = 'admitted', version = version + 1 WHERE id = 'tkt_queued'`);
      expect(live(), "state changes move the counts, other updates do not").toEqual([1, 1]);
      sql.exec(`DELETE FROM tickets WHERE id IN ('tkt_next', 'tkt_none')`);
      expect(live(), "a delete of a live ticket counts, of an ended one not").toEqual([0, 1]);

      // Version 7: the start rule; tickets from before it were asked for without it.
      migrate(state.storage, 8, 7);
      expect(sql.exec(`SELECT exclusive_until_started, member_started_at FROM tickets WHERE id = 'tkt_queued'`).one()).toEqual({
        exclusive_until_started: 0,
        member_started_at: null,
      });

      // Version 8: a cluster that needs an operator; none did before it.
      migrate(state.storage, 9);
      expect(SCHEMA_VERSION).toBe(8);
      expect(
        sql
          .exec(`SELECT needs_operator FROM cluster`)
          .toArray()
          .map((r) => r.needs_operator),
      ).toEqual(
        sql
          .exec(`SELECT 1 FROM cluster`)
          .toArray()
          .map(() => null),
      );
      migrate(state.storage, 10);
      expect(sql.exec(`SELECT id FROM _sql_schema_migrations`).toArray()).toHaveLength(8);
    });
  });
});
