/**
 * GET /v1/admin/clusters: every cluster on the broker, by name, whichever way it came to exist
 * (a first enrollment token, or adopt); nothing for reads of clusters that do not exist. The
 * index is told in the background: a slow index never holds a cluster's queue.
 */
import { env } from "cloudflare:workers";
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { CLUSTER_INDEX_NAME, INDEXED_KEY } from "../../src/broker/queue/cluster-index.ts";
import type { JoinQueue } from "../../src/broker/queue/join-queue.ts";
import { ADMIN, admin, call, enroll, peer, sleep, ticket } from "./helpers.ts";

const names = async (): Promise<string[]> => (await call("GET", "/v1/admin/clusters", { token: ADMIN })).body.clusters.map((c: { name: string }) => c.name);

/** Polls until `names()` is `expected`, for at most 20 s. */
async function listed(expected: string[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await names()).join() !== expected.join() && Date.now() < deadline) await sleep(50);
  expect(await names()).toEqual(expected);
}

/** `pending`, or a rejection once `ms` have passed without it settling. */
function within<T>(ms: number, what: string, pending: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([pending, late]).finally(() => clearTimeout(timer));
}

describe("the cluster list", () => {
  it("lists each cluster once, by name, and needs the admin token", async () => {
    expect((await call("GET", "/v1/admin/clusters", { token: ADMIN })).body).toEqual({ clusters: [] });
    await enroll("idx-b");
    await enroll("idx-b");
    await admin("POST", "idx-a/adopt", { members: [{ node: "m1", peerURL: "https://10.0.0.1:2380" }] });
    // Reading a cluster that does not exist creates nothing, in the list either.
    expect((await admin("GET", "idx-missing")).status).toBe(404);
    await listed(["idx-a", "idx-b"]);
    const r = await call("GET", "/v1/admin/clusters", { token: ADMIN });
    expect(r.status).toBe(200);
    for (const c of r.body.clusters) expect(Date.parse(c.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    expect((await call("GET", "/v1/admin/clusters", { token: "wrong" })).status).toBe(401);
  });

  it("a slow index holds neither a cluster's first wake nor its creation; it learns of both once it answers", async () => {
    const index = env.JOIN_QUEUE.getByName(CLUSTER_INDEX_NAME);
    const woken = env.JOIN_QUEUE.getByName("idx-woken");
    const enrollment = await enroll("idx-woken");
    await listed(["idx-a", "idx-b", "idx-woken"]);
    // A cluster the index does not know yet (as after a deploy that added the index), asleep.
    await runInDurableObject(woken, (_instance, state) => state.storage.kv.delete(INDEXED_KEY));
    await evictDurableObject(woken);

    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    // From here the index answers nothing until `release()`.
    const restore = await runInDurableObject(index, (instance: JoinQueue) => {
      const prototype = Object.getPrototypeOf(instance) as JoinQueue;
      const add = prototype.indexAdd;
      prototype.indexAdd = async function (this: JoinQueue, ...args) {
        await held;
        return add.apply(this, args);
      };
      return () => void (prototype.indexAdd = add);
    });
    try {
      expect((await within(15_000, "the first request after a wake", ticket("idx-woken", enrollment, "n1", peer(1)))).status).toBe(201);
      const created = await within(15_000, "creating a cluster", admin("POST", "idx-new/enrollment-tokens", {}));
      expect(created.status).toBe(201);
      expect((await within(15_000, "the new cluster's first ticket", ticket("idx-new", created.body.token, "n1", peer(1)))).status).toBe(201);
    } finally {
      release();
      restore();
    }
    await listed(["idx-a", "idx-b", "idx-new", "idx-woken"]);
    for (const name of ["idx-new", "idx-woken"]) {
      const indexed = () => runInDurableObject(env.JOIN_QUEUE.getByName(name), (_instance, state) => state.storage.kv.get(INDEXED_KEY));
      const deadline = Date.now() + 20_000;
      while (!(await indexed()) && Date.now() < deadline) await sleep(50);
      expect(await indexed()).toBe(true);
    }
  }, 60_000);
});
